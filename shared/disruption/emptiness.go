package disruption

import (
	"context"
	"fmt"
)

// emptiness deletes consolidatable nodes that have no pod to reschedule,
// as many as the Empty budgets allow, in one command per NodePool
// (karpenter: pkg/controllers/disruption/emptiness.go; karpenter-spec
// §6.4). It runs for every consolidation policy; consolidateAfter Never
// disables it. "Empty" is cost-based: no reschedulable pod with a positive
// eviction cost (DaemonSet and mirror pods never count).
type emptiness struct{}

func (emptiness) reason() Method { return MethodEmpty }

func (emptiness) compute(_ context.Context, e *evaluation) ([]Command, error) {
	var cands []*node
	for _, n := range e.nodes {
		if n.deleting || n.block != "" || !n.empty {
			continue
		}
		if why, event := e.consolidationBlock(n, false); why != "" {
			if n.drift == "" { // a drifted node's drift outcome says more
				n.note(event, "%s", why)
			}
			continue
		}
		cands = append(cands, n)
	}
	bySavings(cands)
	avail := e.available.clone()
	byPool := map[string][]*node{}
	var pools []string
	for _, n := range cands {
		pool := n.pool.Name
		if !avail.take(pool, MethodEmpty) {
			n.note(noEvent, "empty, but %s", e.describeBudget(pool, MethodEmpty))
			continue
		}
		if byPool[pool] == nil {
			pools = append(pools, pool)
		}
		byPool[pool] = append(byPool[pool], n)
	}
	var out []Command
	for _, pool := range pools {
		ns := byPool[pool]
		c := Command{Method: MethodEmpty, Decision: DecisionDelete, Budgeted: true}
		for _, n := range ns {
			c.SavingsPerHour += n.price
		}
		c.Reason = fmt.Sprintf("%d empty node(s) of NodePool %s (%s): no pod to reschedule, consolidateAfter %s elapsed",
			len(ns), pool, names(ns), e.pools[pool].Spec.Disruption.ConsolidateAfter.Duration)
		out = append(out, e.finish(&c, ns))
	}
	return out, nil
}
