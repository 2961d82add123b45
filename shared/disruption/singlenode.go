package disruption

import (
	"context"
)

// singleNodeConsolidation removes one node, deleting it or replacing it
// with one cheaper NodeClaim (karpenter: singlenodeconsolidation.go;
// karpenter-spec §6.4). Candidates by savings ratio are interleaved
// round-robin across NodePools (pools in the order of their best
// candidate); the first one whose pool's Underutilized budget has room and
// that consolidates becomes the command.
type singleNodeConsolidation struct{}

func (singleNodeConsolidation) reason() Method { return MethodUnderutilized }

func (singleNodeConsolidation) compute(ctx context.Context, e *evaluation) ([]Command, error) {
	for _, n := range interleave(e.consolidationCandidates()) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if e.available[n.pool.Name][MethodUnderutilized] <= 0 {
			n.note(noEvent, "%s", e.describeBudget(n.pool.Name, MethodUnderutilized))
			continue
		}
		if n.why != "" && e.cannotConsolidateKnown([]*node{n}) {
			continue // its reason is already recorded: skip the simulation
		}
		c, why, err := e.consolidate(ctx, []*node{n})
		if err != nil {
			return nil, err
		}
		if c == nil {
			// karpenter: computeConsolidation's Unconsolidatable events,
			// published for a single candidate.
			n.note(EventUnconsolidatable, "%s", why)
			continue
		}
		return []Command{e.finish(c, []*node{n})}, nil
	}
	return nil, nil
}

// interleave orders ns (already by savings) round-robin across pools.
func interleave(ns []*node) []*node {
	var order []string
	byPool := map[string][]*node{}
	for _, n := range ns {
		p := n.pool.Name
		if byPool[p] == nil {
			order = append(order, p)
		}
		byPool[p] = append(byPool[p], n)
	}
	out := make([]*node, 0, len(ns))
	for len(out) < len(ns) {
		for _, p := range order {
			if len(byPool[p]) > 0 {
				out = append(out, byPool[p][0])
				byPool[p] = byPool[p][1:]
			}
		}
	}
	return out
}
