package disruption

import (
	"fmt"
	"sort"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// balancedK is the Balanced policy's tolerance: a move must return at
// least 1/k of its pool's cost share per unit of disruption share
// (karpenter-spec §6.4).
const balancedK = 2

// balanced returns why a NodePool with consolidationPolicy Balanced
// rejects the consolidation c of cands, or "". Each Balanced pool among
// the candidates scores the move on its own:
//
//	savings share    = pool's part of the savings / pool's total price
//	disruption share = (candidates of the pool + Σ their pods' positive
//	                   eviction costs) / the same over all the pool's nodes
//	approved when savings share / disruption share ≥ 1/k, k = 2
//
// A pool's part of the savings is proportional to its candidates' share
// of the candidates' price; pool totals cover its nodes that could be
// candidates (registered, initialized, priced, not leaving). Positive
// savings are required (karpenter: pkg/controllers/disruption/balanced.go).
func (e *evaluation) balanced(c *Command, cands []*node) string {
	byPool := map[string][]*node{}
	total := 0.0
	for _, n := range cands {
		byPool[n.pool.Name] = append(byPool[n.pool.Name], n)
		total += n.price
	}
	pools := make([]string, 0, len(byPool))
	for p := range byPool {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	for _, pool := range pools {
		if e.pools[pool].Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyBalanced {
			continue
		}
		poolCost, poolDisruption := 0.0, 0.0
		for _, n := range e.nodes {
			if n.pool == nil || n.pool.Name != pool || n.deleting || !n.initialized || !n.priced || n.price == 0 {
				continue
			}
			poolCost += n.price
			poolDisruption += rescheduleCost(n.reschedulable)
		}
		savings := c.SavingsPerHour
		share, moveDisruption := 0.0, 0.0
		for _, n := range byPool[pool] {
			share += n.price
			moveDisruption += rescheduleCost(n.reschedulable)
		}
		if total > 0 && len(byPool) > 1 {
			savings *= share / total
		}
		switch {
		case poolCost <= 0 || savings <= 0:
			return fmt.Sprintf("consolidationPolicy Balanced of NodePool %s: the move saves nothing", pool)
		case poolDisruption <= 0:
			continue
		}
		score := (savings / poolCost) / (moveDisruption / poolDisruption)
		if score < 1.0/balancedK {
			return fmt.Sprintf("consolidationPolicy Balanced of NodePool %s: the move saves %.1f%% of the pool's cost for %.1f%% of its disruption (score %.2f, needs %.2f)",
				pool, 100*savings/poolCost, 100*moveDisruption/poolDisruption, score, 1.0/balancedK)
		}
	}
	return ""
}
