package disruption

import (
	"context"
	"sort"
)

// method is one budgeted disruption method. compute returns the commands
// it would start now (none when it has nothing to do), records on the
// nodes it rejects why, and marks the nodes its commands take.
type method interface {
	reason() Method
	compute(ctx context.Context, e *evaluation) ([]Command, error)
}

// methods are the budgeted methods in Karpenter's order (karpenter:
// pkg/controllers/disruption/controller.go; karpenter-spec §6.1).
func methods() []method {
	return []method{emptiness{}, drift{}, multiNodeConsolidation{}, singleNodeConsolidation{}}
}

// bySavings sorts nodes for emptiness and consolidation: highest savings
// ratio (price / (1 + Σ positive pod eviction costs)) first, then by
// NodeClaim name (karpenter-spec §6.2).
func bySavings(ns []*node) {
	sort.SliceStable(ns, func(i, j int) bool {
		if ns[i].savingRatio != ns[j].savingRatio {
			return ns[i].savingRatio > ns[j].savingRatio
		}
		return ns[i].claim.Name < ns[j].claim.Name
	})
}
