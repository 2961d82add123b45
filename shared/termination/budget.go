package termination

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// unlimited is the lease limit of a pool no budget limits.
const unlimited = math.MaxInt32

// AcquireBudget is StepAcquireBudget: it claims every candidate NodeClaim
// for the execution (see the package doc) and, for a budgeted method,
// leases from each candidate NodePool's budget as many nodes as the
// command disrupts there, until now+LeaseSeconds. The limit of a pool's
// lease is the command's Allowed for it minus the pool's initialized nodes
// disrupting outside nodewright's live leases (NotReady, being deleted, or
// tainted karpenter.sh/disrupted by someone else), read live from the
// cluster and the store; the conditional write of the lease fails when the
// other live leases leave no room.
//
// Errors: workflow.ErrBudgetExhausted when a pool has no room,
// workflow.ErrNoLongerEligible when a candidate is gone or held by another
// execution, workflow.ErrInvalidInput for a malformed state; port failures
// otherwise. What it took before failing stays for the rollback to
// release. Repeating the call renews what it holds.
func (s *Service) AcquireBudget(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.BudgetOutput, error) {
	if err := checkState(st); err != nil {
		return workflow.BudgetOutput{}, err
	}
	until := now.Add(leaseDuration(st))
	claimed, err := s.claimCandidates(ctx, st, now, until)
	out := workflow.BudgetOutput{Claimed: claimed, Pools: []workflow.PoolLease{}, Until: until.UTC()}
	if err != nil {
		return out, fmt.Errorf("claim candidates: %w", err)
	}
	if !st.Budget.Budgeted {
		return out, nil
	}
	if s.p.Budgets == nil {
		return out, errors.New("acquire budget: no budget store")
	}
	perPool := candidatesPerPool(st)
	var nodes []corev1.Node
	var claims []v1.NodeClaim
	if len(perPool) > 0 {
		if nodes, err = s.p.Nodes.ListNodes(ctx); err != nil {
			return out, fmt.Errorf("acquire budget: %w", err)
		}
		if claims, err = s.p.Claims.ListNodeClaims(ctx); err != nil {
			return out, fmt.Errorf("acquire budget: %w", err)
		}
	}
	own := map[string]bool{}
	for _, c := range st.CandidateList() {
		own[c.NodeClaim] = true
	}
	for _, pool := range slices.Sorted(maps.Keys(perPool)) {
		allowed, ok := allowedFor(st, pool)
		if !ok {
			return out, workflow.NewError(workflow.ErrInvalidInput, fmt.Errorf("acquire budget: no budget given for nodepool %s", pool))
		}
		holders, err := s.p.Budgets.BudgetHolders(ctx, pool, now)
		if err != nil {
			return out, fmt.Errorf("acquire budget of nodepool %s: %w", pool, err)
		}
		elsewhere := DisruptingElsewhere(pool, nodes, claims, holders, own, now)
		lease := workflow.PoolLease{NodePool: pool, Leased: perPool[pool], Allowed: allowed, DisruptingElsewhere: elsewhere, Holders: []string{}}
		for _, h := range slices.Sorted(maps.Keys(holders)) {
			if h != st.ID {
				lease.Holders = append(lease.Holders, fmt.Sprintf("%s (%d)", h, holders[h]))
			}
		}
		lease.Limit = unlimited
		if allowed >= 0 {
			lease.Limit = max(allowed-len(elsewhere), 0)
		}
		err = s.p.Budgets.AcquireBudget(ctx, pool, st.ID, perPool[pool], lease.Limit, now, leaseDuration(st))
		if errors.Is(err, v1.ErrBudgetExhausted) {
			return out, workflow.NewError(workflow.ErrBudgetExhausted, fmt.Errorf(
				"nodepool %s allows %d %s disruptions; %d nodes disrupting elsewhere %v, leases held by %v; %d requested: %w",
				pool, allowed, st.Method, len(elsewhere), elsewhere, lease.Holders, perPool[pool], err))
		}
		if err != nil {
			return out, fmt.Errorf("acquire budget of nodepool %s: %w", pool, err)
		}
		out.Pools = append(out.Pools, lease)
	}
	return out, nil
}

// renew extends the execution's claims and leases to now+LeaseSeconds.
// Only what is still held can be renewed: a claim or lease that lapsed (the
// stale-lease sweep may have given its node back, another execution may
// hold it or its budget room by now) fails the renewal with
// workflow.ErrNoLongerEligible, and the execution rolls back. Every step
// that acts on the candidates or waits for them renews first.
func (s *Service) renew(ctx context.Context, st workflow.DisruptionState, now time.Time) error {
	until := now.Add(leaseDuration(st))
	if err := s.renewClaims(ctx, st, now, until); err != nil {
		return fmt.Errorf("renew claims: %w", err)
	}
	if !st.Budget.Budgeted || s.p.Budgets == nil {
		return nil
	}
	for _, pool := range slices.Sorted(maps.Keys(candidatesPerPool(st))) {
		err := s.p.Budgets.RenewBudget(ctx, pool, st.ID, now, leaseDuration(st))
		if errors.Is(err, v1.ErrLeaseLapsed) {
			return workflow.NewError(workflow.ErrNoLongerEligible, fmt.Errorf("renew budget lease of nodepool %s: %w", pool, err))
		}
		if err != nil {
			return fmt.Errorf("renew budget lease of nodepool %s: %w", pool, err)
		}
	}
	return nil
}

// ReleaseBudget is StepReleaseBudget: it ends the execution's budget
// leases and the claims it still holds (the candidates are normally
// deleted by then). It is idempotent.
func (s *Service) ReleaseBudget(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.ReleaseOutput, error) {
	out := workflow.ReleaseOutput{Released: []string{}}
	released, err := s.releaseClaims(ctx, st)
	out.Released = append(out.Released, released...)
	if err != nil {
		return out, err
	}
	if err := s.releaseLeases(ctx, st, now); err != nil {
		return out, err
	}
	out.BudgetReleased = st.Budget.Budgeted
	return out, nil
}

func (s *Service) releaseLeases(ctx context.Context, st workflow.DisruptionState, now time.Time) error {
	if !st.Budget.Budgeted || s.p.Budgets == nil {
		return nil
	}
	for _, pool := range slices.Sorted(maps.Keys(candidatesPerPool(st))) {
		if err := s.p.Budgets.ReleaseBudget(ctx, pool, st.ID, now); err != nil {
			return fmt.Errorf("release budget of nodepool %s: %w", pool, err)
		}
	}
	return nil
}

// releaseClaims clears the execution's claims from the candidates that
// still exist and returns their names.
func (s *Service) releaseClaims(ctx context.Context, st workflow.DisruptionState) ([]string, error) {
	var released []string
	for _, cand := range st.CandidateList() {
		var did bool
		_, err := s.updateClaim(ctx, cand.NodeClaim, func(c *v1.NodeClaim) (bool, error) {
			did = clearClaim(c, st.ID)
			return did, nil
		})
		if errors.Is(err, v1.ErrNotFound) {
			continue
		}
		if err != nil {
			return released, fmt.Errorf("release claim: %w", err)
		}
		if did {
			released = append(released, cand.NodeClaim)
		}
	}
	return released, nil
}

// DisruptingElsewhere returns the nodes of pool that count against its
// budget outside the live leases in holders (holder -> nodes), each as
// "<node> (<why>)", sorted: initialized Nodes labelled with the pool that
// are NotReady, being deleted, or tainted karpenter.sh/disrupted, except
// those whose NodeClaim a lease holder claims and the NodeClaims in own
// (the command's candidates). It is Karpenter's "disrupting" count
// (karpenter-spec.md section 6.3) without double-counting nodewright's own
// leased executions.
func DisruptingElsewhere(pool string, nodes []corev1.Node, claims []v1.NodeClaim, holders map[string]int, own map[string]bool, now time.Time) []string {
	claimOfNode := map[string]*v1.NodeClaim{}
	for i := range claims {
		c := &claims[i]
		if c.Status.NodeName != "" {
			claimOfNode[c.Status.NodeName] = c
		}
		if c.Status.ProviderID != "" {
			claimOfNode["providerID:"+c.Status.ProviderID] = c
		}
	}
	out := []string{}
	for i := range nodes {
		n := &nodes[i]
		if n.Labels[v1.LabelNodePool] != pool || n.Labels[v1.LabelInitialized] != "true" {
			continue
		}
		var why []string
		if !v1.NodeReady(n) {
			why = append(why, "NotReady")
		}
		if n.DeletionTimestamp != nil {
			why = append(why, "deleting")
		}
		if v1.HasDisruptedTaint(n) {
			why = append(why, "tainted "+v1.TaintKeyDisrupted)
		}
		if len(why) == 0 {
			continue
		}
		c := claimOfNode[n.Name]
		if c == nil && n.Spec.ProviderID != "" {
			c = claimOfNode["providerID:"+n.Spec.ProviderID]
		}
		if c != nil {
			if own[c.Name] {
				continue
			}
			if cl := ClaimOf(c); cl.Live(now) && holders[cl.Holder] > 0 {
				continue
			}
		}
		out = append(out, n.Name+" ("+strings.Join(why, ", ")+")")
	}
	slices.Sort(out)
	return out
}

// candidatesPerPool counts the candidates of each NodePool; a candidate
// without its own pool belongs to the command's.
func candidatesPerPool(st workflow.DisruptionState) map[string]int {
	out := map[string]int{}
	for _, c := range st.CandidateList() {
		pool := c.NodePool
		if pool == "" {
			pool = st.NodePool
		}
		if pool != "" {
			out[pool]++
		}
	}
	return out
}

func allowedFor(st workflow.DisruptionState, pool string) (int, bool) {
	for _, b := range st.Budget.Pools {
		if b.NodePool == pool {
			return b.Allowed, true
		}
	}
	return 0, false
}

func leaseDuration(st workflow.DisruptionState) time.Duration {
	if st.Settings.LeaseSeconds > 0 {
		return time.Duration(st.Settings.LeaseSeconds) * time.Second
	}
	return LeaseDuration
}

// checkState rejects a state no step can act on.
func checkState(st workflow.DisruptionState) error {
	switch {
	case st.ID == "":
		return workflow.NewError(workflow.ErrInvalidInput, errors.New("state: id is empty"))
	case len(st.CandidateList()) == 0:
		return workflow.NewError(workflow.ErrInvalidInput, errors.New("state: no candidates"))
	}
	for _, c := range st.CandidateList() {
		if c.NodeClaim == "" {
			return workflow.NewError(workflow.ErrInvalidInput, errors.New("state: a candidate has no nodeClaim"))
		}
	}
	return nil
}
