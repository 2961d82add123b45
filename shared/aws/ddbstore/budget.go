package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

const (
	kindBudget = "Budget"
	// budgetAttempts bounds the read-modify-write retries of one budget
	// call under contention. Every lost attempt means another caller's
	// write succeeded, so the system as a whole always makes progress.
	budgetAttempts = 16
	// leaseNodes and leaseUntilMs are the fields of one entry of the
	// leases map.
	leaseNodes   = "nodes"
	leaseUntilMs = "untilMs"
	// budgetEntryOverhead approximates the bytes one leases-map entry
	// adds besides its execution name.
	budgetEntryOverhead = 48
)

// ErrBudgetExhausted (v1.ErrBudgetExhausted): granting the request would
// take the NodePool's active budget leases past the limit.
var ErrBudgetExhausted = v1.ErrBudgetExhausted

// ErrLeaseLapsed (v1.ErrLeaseLapsed): RenewBudget found no unexpired lease
// of the execution (it expired or was released), so there is nothing to
// renew.
var ErrLeaseLapsed = v1.ErrLeaseLapsed

// BudgetRequest asks for part of a NodePool's disruption budget for one
// execution (one disruption command).
type BudgetRequest struct {
	// NodePool is the pool whose budget is spent.
	NodePool string
	// Execution identifies the holder, e.g. the Step Functions execution
	// name. Acquiring again with the same Execution replaces its lease
	// (and so renews it); it never takes a second share.
	Execution string
	// Nodes is how many nodes the execution disrupts; at least 1.
	Nodes int
	// Limit is the most nodes all unexpired leases of the pool may hold
	// together, this one included (Karpenter's allowed disruptions for the
	// reason, karpenter-spec.md section 6.3). 0 refuses every request.
	Limit int
}

// BudgetLease is one execution's active share of a NodePool's budget.
type BudgetLease struct {
	// Execution is BudgetRequest.Execution.
	Execution string
	// Nodes is BudgetRequest.Nodes.
	Nodes int
	// Until is when the lease lapses if it is not released or renewed
	// (millisecond precision).
	Until time.Time
}

// AcquireBudget leases req.Nodes of req.NodePool's disruption budget to
// req.Execution until now+ttl. It returns ErrBudgetExhausted if the leases
// unexpired at now, plus this one, would exceed req.Limit.
//
// All leases of a pool live in one item, written with a condition on its
// version: of two concurrent acquirers, one writes and the other re-reads
// and re-checks the limit, so the limit can never be exceeded. Expired
// leases are dropped on every write. After 16 lost races it returns a
// *ConflictError, which is safe to retry.
func (s *Store) AcquireBudget(ctx context.Context, req BudgetRequest, now time.Time, ttl time.Duration) error {
	if err := checkBudgetRequest(req, ttl); err != nil {
		return fmt.Errorf("acquire budget: %w", err)
	}
	until := now.Add(ttl).UnixMilli()
	return s.updateBudget(ctx, req.NodePool, "acquire budget", func(leases map[string]BudgetLease) (bool, error) {
		pruneBudget(leases, now)
		used := 0
		for exec, l := range leases {
			if exec != req.Execution {
				used += l.Nodes
			}
		}
		if used+req.Nodes > req.Limit {
			return false, fmt.Errorf("acquire budget of nodepool %s for %s: %d of %d nodes leased, %d requested: %w",
				req.NodePool, req.Execution, used, req.Limit, req.Nodes, ErrBudgetExhausted)
		}
		leases[req.Execution] = BudgetLease{Execution: req.Execution, Nodes: req.Nodes, Until: time.UnixMilli(until).UTC()}
		return true, nil
	})
}

// RenewBudget extends execution's lease on nodePool's budget to now+ttl,
// keeping its nodes. It returns ErrLeaseLapsed when the execution holds no
// lease unexpired at now: a lease that lapsed may already have been
// counted as free room by another acquirer, so it is never taken back by a
// renewal (only a new AcquireBudget, checked against the limit, may lease
// again). The write is conditional on the item's version, as in
// AcquireBudget.
func (s *Store) RenewBudget(ctx context.Context, nodePool, execution string, now time.Time, ttl time.Duration) error {
	if err := checkKeyPart("nodepool name", nodePool); err != nil {
		return fmt.Errorf("renew budget: %w", err)
	}
	if ttl <= 0 {
		return fmt.Errorf("renew budget of nodepool %s: ttl %v: must be positive: %w", nodePool, ttl, ErrInvalid)
	}
	return s.updateBudget(ctx, nodePool, "renew budget", func(leases map[string]BudgetLease) (bool, error) {
		pruneBudget(leases, now)
		l, ok := leases[execution]
		if !ok {
			return false, fmt.Errorf("renew budget of nodepool %s for %s: no unexpired lease: %w", nodePool, execution, ErrLeaseLapsed)
		}
		l.Until = time.UnixMilli(now.Add(ttl).UnixMilli()).UTC()
		leases[execution] = l
		return true, nil
	})
}

// ReleaseBudget ends execution's lease on nodePool's budget. It is
// idempotent: it returns nil if the execution holds no lease. Expired
// leases of other executions are dropped in the same write.
func (s *Store) ReleaseBudget(ctx context.Context, nodePool, execution string, now time.Time) error {
	if err := checkKeyPart("nodepool name", nodePool); err != nil {
		return fmt.Errorf("release budget: %w", err)
	}
	return s.updateBudget(ctx, nodePool, "release budget", func(leases map[string]BudgetLease) (bool, error) {
		if _, ok := leases[execution]; !ok {
			return false, nil
		}
		delete(leases, execution)
		pruneBudget(leases, now)
		// The item stays, even when empty: deleting it would restart its
		// version at 1 and let a writer holding a stale read of an older
		// incarnation pass the version condition (ABA).
		return true, nil
	})
}

// updateBudget reads nodePool's leases, applies mutate and, when it
// reports a change, writes them back on the condition that the item's
// version did not move, re-reading after every lost race (at most
// budgetAttempts times, then a *ConflictError, safe to retry). Every lost
// attempt means another caller's write succeeded, so the system as a whole
// always makes progress. An error from mutate is returned as is.
func (s *Store) updateBudget(ctx context.Context, nodePool, op string, mutate func(map[string]BudgetLease) (bool, error)) error {
	var version int64
	for range budgetAttempts {
		var leases map[string]BudgetLease
		var err error
		version, leases, err = s.readBudget(ctx, nodePool)
		if err != nil {
			return fmt.Errorf("%s of nodepool %s: %w", op, nodePool, err)
		}
		changed, err := mutate(leases)
		if err != nil || !changed {
			return err
		}
		err = s.writeBudget(ctx, nodePool, version, leases)
		if isConditionFailed(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s of nodepool %s: %w", op, nodePool, err)
		}
		return nil
	}
	return fmt.Errorf("%s of nodepool %s: %w", op, nodePool, &ConflictError{Kind: kindBudget, Name: nodePool, Version: version})
}

// ListBudgetLeases returns nodePool's leases unexpired at now, sorted by
// execution, read with strong consistency.
func (s *Store) ListBudgetLeases(ctx context.Context, nodePool string, now time.Time) ([]BudgetLease, error) {
	if err := checkKeyPart("nodepool name", nodePool); err != nil {
		return nil, fmt.Errorf("list budget leases: %w", err)
	}
	_, leases, err := s.readBudget(ctx, nodePool)
	if err != nil {
		return nil, fmt.Errorf("list budget leases of nodepool %s: %w", nodePool, err)
	}
	pruneBudget(leases, now)
	out := make([]BudgetLease, 0, len(leases))
	for _, l := range leases {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Execution < out[j].Execution })
	return out, nil
}

func checkBudgetRequest(req BudgetRequest, ttl time.Duration) error {
	if err := checkKeyPart("nodepool name", req.NodePool); err != nil {
		return err
	}
	switch {
	case req.Execution == "" || len(req.Execution) > maxKeyPart:
		return fmt.Errorf("execution: %d bytes, want 1 to %d: %w", len(req.Execution), maxKeyPart, ErrInvalid)
	case req.Nodes < 1:
		return fmt.Errorf("nodes %d: want at least 1: %w", req.Nodes, ErrInvalid)
	case req.Limit < 0:
		return fmt.Errorf("limit %d: want at least 0: %w", req.Limit, ErrInvalid)
	case ttl <= 0:
		return fmt.Errorf("ttl %v: must be positive: %w", ttl, ErrInvalid)
	}
	return nil
}

func pruneBudget(leases map[string]BudgetLease, now time.Time) {
	nowMs := now.UnixMilli()
	for exec, l := range leases {
		if l.Until.UnixMilli() <= nowMs {
			delete(leases, exec)
		}
	}
}

// readBudget returns the pool's budget item version (0 if absent) and all
// its leases, expired ones included.
func (s *Store) readBudget(ctx context.Context, nodePool string) (int64, map[string]BudgetLease, error) {
	item, err := s.getItem(ctx, s.pk(pkBudget), nodePool)
	if errors.Is(err, ErrNotFound) {
		return 0, map[string]BudgetLease{}, nil
	}
	if err != nil {
		return 0, nil, err
	}
	version, err := getInt(item, attrVersion)
	if err != nil {
		return 0, nil, err
	}
	m, ok := item[attrLeases].(*types.AttributeValueMemberM)
	if !ok {
		return 0, nil, errors.New("attribute leases: missing or not a map")
	}
	leases := make(map[string]BudgetLease, len(m.Value))
	for exec, v := range m.Value {
		entry, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return 0, nil, fmt.Errorf("lease %s: not a map", exec)
		}
		nodes, err := getInt(entry.Value, leaseNodes)
		if err != nil {
			return 0, nil, fmt.Errorf("lease %s: %w", exec, err)
		}
		untilMs, err := getInt(entry.Value, leaseUntilMs)
		if err != nil {
			return 0, nil, fmt.Errorf("lease %s: %w", exec, err)
		}
		leases[exec] = BudgetLease{Execution: exec, Nodes: int(nodes), Until: time.UnixMilli(untilMs).UTC()}
	}
	return version, leases, nil
}

// writeBudget replaces the pool's budget item if its version is still
// version (0: the item must not exist). The item has no TTL attribute:
// it holds live leases, and its expired entries are dropped by the store.
func (s *Store) writeBudget(ctx context.Context, nodePool string, version int64, leases map[string]BudgetLease) error {
	m := make(map[string]types.AttributeValue, len(leases))
	size := 0
	for exec, l := range leases {
		m[exec] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			leaseNodes:   num(int64(l.Nodes)),
			leaseUntilMs: num(l.Until.UnixMilli()),
		}}
		size += len(exec) + budgetEntryOverhead
	}
	if size > MaxBodyBytes {
		return fmt.Errorf("%d leases take about %d bytes, at most %d: %w", len(leases), size, MaxBodyBytes, ErrItemTooLarge)
	}
	in := &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			attrPK:      str(s.pk(pkBudget)),
			attrSK:      str(nodePool),
			attrKind:    str(kindBudget),
			attrVersion: num(version + 1),
			attrLeases:  &types.AttributeValueMemberM{Value: m},
		},
	}
	putIfVersion(in, version)
	_, err := s.api.PutItem(ctx, in)
	return err
}
