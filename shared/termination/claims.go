package termination

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/workflow"
)

// updateAttempts bounds the read-mutate-write rounds of one NodeClaim
// update under contention.
const updateAttempts = 5

// Claim is the execution holding a NodeClaim, read from its annotations.
type Claim struct {
	// Holder is the execution's name; "" when the NodeClaim is not
	// claimed.
	Holder string
	// Method is the holder's method.
	Method string
	// Until is when the claim lapses unless renewed.
	Until time.Time
}

// ClaimOf returns the claim on c.
func ClaimOf(c *v1.NodeClaim) Claim {
	cl := Claim{Holder: c.Annotations[AnnotationClaimHolder], Method: c.Annotations[AnnotationClaimMethod]}
	if t, err := time.Parse(time.RFC3339, c.Annotations[AnnotationClaimUntil]); err == nil {
		cl.Until = t
	}
	return cl
}

// Live reports whether the claim holds at now.
func (c Claim) Live(now time.Time) bool { return c.Holder != "" && now.Before(c.Until) }

// InFlight returns the commands live claims say are being carried out, as
// shared/disruption's Input.InFlight wants them: one per holder, with its
// method and candidates (sorted by holder, then NodeClaim). Their
// candidates count as disrupting and are not chosen again.
func InFlight(claims []v1.NodeClaim, now time.Time) []disruption.Command {
	byHolder := map[string]*disruption.Command{}
	for i := range claims {
		c := &claims[i]
		cl := ClaimOf(c)
		if !cl.Live(now) {
			continue
		}
		cmd := byHolder[cl.Holder]
		if cmd == nil {
			cmd = &disruption.Command{ID: cl.Holder, Method: disruption.Method(cl.Method), Budgeted: workflow.IsBudgetedMethod(cl.Method)}
			byHolder[cl.Holder] = cmd
		}
		pool := c.Labels[v1.LabelNodePool]
		if cmd.NodePool == "" && len(cmd.Candidates) == 0 {
			cmd.NodePool = pool
		} else if cmd.NodePool != pool {
			cmd.NodePool = ""
		}
		cmd.Candidates = append(cmd.Candidates, disruption.Candidate{
			NodeClaim: c.Name, Node: c.Status.NodeName, NodePool: pool, ProviderID: c.Status.ProviderID,
		})
	}
	out := make([]disruption.Command, 0, len(byHolder))
	for _, h := range slices.Sorted(maps.Keys(byHolder)) {
		cmd := byHolder[h]
		slices.SortFunc(cmd.Candidates, func(a, b disruption.Candidate) int { return cmp.Compare(a.NodeClaim, b.NodeClaim) })
		out = append(out, *cmd)
	}
	return out
}

// HeldReplacements returns the replacement NodeClaims of the commands in
// inFlight (InFlight's result), as shared/disruption's
// Input.HeldReplacements wants them: replacement NodeClaim -> command ID.
// A replacement is recognised by AnnotationReplacementFor, which Prepare
// sets to the execution's name, the ID its claims carry.
func HeldReplacements(claims []v1.NodeClaim, inFlight []disruption.Command) map[string]string {
	live := map[string]bool{}
	for _, c := range inFlight {
		live[c.ID] = true
	}
	out := map[string]string{}
	for i := range claims {
		if cmd := claims[i].Annotations[AnnotationReplacementFor]; cmd != "" && live[cmd] {
			out[claims[i].Name] = cmd
		}
	}
	return out
}

// updateClaim reads the NodeClaim name, applies mutate and writes it when
// mutate reports a change, re-reading on version conflicts. It returns the
// stored claim. An error from mutate is returned as is.
func (s *Service) updateClaim(ctx context.Context, name string, mutate func(*v1.NodeClaim) (bool, error)) (v1.NodeClaim, error) {
	var lastErr error
	for range updateAttempts {
		c, err := s.p.Claims.GetNodeClaim(ctx, name)
		if err != nil {
			return v1.NodeClaim{}, fmt.Errorf("get nodeclaim %s: %w", name, err)
		}
		next := copyClaim(c)
		changed, err := mutate(&next)
		if err != nil {
			return c, err
		}
		if !changed {
			return c, nil
		}
		updated, err := s.p.Claims.UpdateNodeClaim(ctx, next)
		if errors.Is(err, v1.ErrConflict) {
			lastErr = err
			continue
		}
		if err != nil {
			return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %w", name, err)
		}
		return updated, nil
	}
	return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %d attempts: %w", name, updateAttempts, lastErr)
}

// copyClaim copies what the steps change in a NodeClaim (metadata and
// conditions), so a mutation never touches the original.
func copyClaim(c v1.NodeClaim) v1.NodeClaim {
	out := c
	out.ObjectMeta = *c.DeepCopy()
	out.Status.Conditions = slices.Clone(c.Status.Conditions)
	return out
}

// claimCandidates claims every candidate NodeClaim for st's execution
// until `until`, or renews the claims it holds. A candidate that is gone,
// being deleted by someone else, or held by another live execution makes
// it fail with workflow.ErrNoLongerEligible (a forceful method takes over
// a budgeted method's claim instead); claims taken before that stay (the
// rollback releases them). An interrupted NodeClaim already gone is
// skipped.
func (s *Service) claimCandidates(ctx context.Context, st workflow.DisruptionState, now, until time.Time) ([]string, error) {
	var claimed []string
	for _, cand := range st.CandidateList() {
		_, err := s.updateClaim(ctx, cand.NodeClaim, func(c *v1.NodeClaim) (bool, error) {
			cl := ClaimOf(c)
			// A forceful method (expiry, interruption) takes a node
			// from a budgeted or manual command; nothing else takes a
			// live claim (a manual replacement never does).
			takeover := workflow.IsForcefulMethod(st.Method) && !workflow.IsForcefulMethod(cl.Method)
			switch {
			case cl.Holder != st.ID && cl.Live(now) && !takeover:
				return false, workflow.NewError(workflow.ErrNoLongerEligible,
					fmt.Errorf("nodeclaim %s is held by execution %s until %s", c.Name, cl.Holder, cl.Until.Format(time.RFC3339)))
			case cl.Holder != st.ID && c.DeletionTimestamp != nil && st.Method != workflow.MethodInterrupted:
				return false, workflow.NewError(workflow.ErrNoLongerEligible, fmt.Errorf("nodeclaim %s is being deleted", c.Name))
			}
			setClaim(c, st, now, until)
			return true, nil
		})
		if errors.Is(err, v1.ErrNotFound) {
			if st.Method == workflow.MethodInterrupted {
				continue
			}
			return claimed, workflow.NewError(workflow.ErrNoLongerEligible, fmt.Errorf("nodeclaim %s is gone", cand.NodeClaim))
		}
		if err != nil {
			return claimed, err
		}
		claimed = append(claimed, cand.NodeClaim)
	}
	return claimed, nil
}

// renewClaims extends the claims st's execution holds to until. A claim
// that is no longer this execution's and live at now fails with
// workflow.ErrNoLongerEligible: it lapsed (and may have been given back or
// taken by another execution since), and a lapsed claim never comes back.
// A NodeClaim gone is skipped (it may have been deleted by the steps after
// the drain).
func (s *Service) renewClaims(ctx context.Context, st workflow.DisruptionState, now, until time.Time) error {
	for _, cand := range st.CandidateList() {
		_, err := s.updateClaim(ctx, cand.NodeClaim, func(c *v1.NodeClaim) (bool, error) {
			cl := ClaimOf(c)
			switch {
			case cl.Holder != st.ID && cl.Live(now):
				return false, workflow.NewError(workflow.ErrNoLongerEligible,
					fmt.Errorf("nodeclaim %s was taken by execution %s after this execution's claim lapsed", c.Name, cl.Holder))
			case cl.Holder != st.ID:
				return false, workflow.NewError(workflow.ErrNoLongerEligible,
					fmt.Errorf("nodeclaim %s is no longer claimed by this execution (its claim lapsed and was given back)", c.Name))
			case !cl.Live(now):
				return false, workflow.NewError(workflow.ErrNoLongerEligible,
					fmt.Errorf("this execution's claim on nodeclaim %s lapsed at %s", c.Name, cl.Until.Format(time.RFC3339)))
			}
			setClaim(c, st, now, until)
			return true, nil
		})
		if err != nil && !errors.Is(err, v1.ErrNotFound) {
			return err
		}
	}
	return nil
}

// setClaim writes st's claim on c, with Karpenter's DisruptionReason
// condition naming the method.
func setClaim(c *v1.NodeClaim, st workflow.DisruptionState, now, until time.Time) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[AnnotationClaimHolder] = st.ID
	c.Annotations[AnnotationClaimMethod] = st.Method
	c.Annotations[AnnotationClaimUntil] = until.UTC().Format(time.RFC3339)
	c.Status.Conditions = v1.SetCondition(c.Status.Conditions, v1.ConditionTypeDisruptionReason, metav1.ConditionTrue, st.Method, st.Reason, c.Generation, now)
}

// clearClaim removes holder's claim from c and reports whether it did.
func clearClaim(c *v1.NodeClaim, holder string) bool {
	if c.Annotations[AnnotationClaimHolder] != holder {
		return false
	}
	delete(c.Annotations, AnnotationClaimHolder)
	delete(c.Annotations, AnnotationClaimMethod)
	delete(c.Annotations, AnnotationClaimUntil)
	c.Status.Conditions = slices.DeleteFunc(slices.Clone(c.Status.Conditions), func(cond metav1.Condition) bool {
		return cond.Type == v1.ConditionTypeDisruptionReason
	})
	return true
}

// conditionTrue reports whether c's condition t is True.
func conditionTrue(c *v1.NodeClaim, t string) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == t {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return false
}
