package disruption

import (
	"context"
	"fmt"
)

// defaultMultiNodeCandidates caps multi-node consolidation's batch
// (karpenter-spec §6.4).
const defaultMultiNodeCandidates = 100

// multiNodeConsolidation removes several nodes at once, deleting them or
// replacing them with one cheaper NodeClaim (karpenter:
// multinodeconsolidation.go; karpenter-spec §6.4). Candidates are taken by
// savings ratio while their pool's Underutilized budget has room (each
// takes one), at most 100; a binary search over the prefix length (2..n)
// keeps the longest prefix that consolidates. A single candidate is left to
// single-node consolidation.
type multiNodeConsolidation struct{}

func (multiNodeConsolidation) reason() Method { return MethodUnderutilized }

func (multiNodeConsolidation) compute(ctx context.Context, e *evaluation) ([]Command, error) {
	avail := e.available.clone()
	// Candidates past their pool's budget are told so only if this method
	// starts a command: otherwise no budget was used, and single-node
	// consolidation records their real reason.
	var batch, overBudget []*node
	for _, n := range e.consolidationCandidates() {
		if !avail.take(n.pool.Name, MethodUnderutilized) {
			overBudget = append(overBudget, n)
			continue
		}
		batch = append(batch, n)
	}
	limit := e.in.Options.MultiNodeCandidates
	if limit <= 0 {
		limit = defaultMultiNodeCandidates
	}
	if len(batch) > limit {
		batch = batch[:limit]
	}
	if len(batch) < 2 {
		return nil, nil
	}
	var best *Command
	var bestSet []*node
	lo, hi := 1, len(batch)-1
	for lo <= hi {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		mid := (lo + hi) / 2
		set := batch[:mid+1]
		var c *Command
		if !e.cannotConsolidateKnown(set) {
			var err error
			if c, _, err = e.consolidate(ctx, set); err != nil {
				return nil, err
			}
		}
		if c != nil {
			best, bestSet = c, set
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	if best == nil {
		return nil, nil
	}
	for _, n := range overBudget {
		n.note(noEvent, "%s", e.describeBudget(n.pool.Name, MethodUnderutilized))
	}
	best.Reason = fmt.Sprintf("multi-node consolidation of %d nodes: %s", len(bestSet), best.Reason)
	return []Command{e.finish(best, bestSet)}, nil
}
