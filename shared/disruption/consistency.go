package disruption

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Inconsistency is one finding of the NodeClaim consistency checks: what
// Karpenter's nodeclaim.consistency controller reports as a
// FailedConsistencyCheck Warning event on the NodeClaim (karpenter:
// pkg/controllers/nodeclaim/consistency; karpenter-spec.md section 5:
// every 10 min, node capacity under 90% of what was expected).
type Inconsistency struct {
	NodeClaim string `json:"nodeClaim"`
	Node      string `json:"node"`
	// Message is the finding as the event's message.
	Message string `json:"message"`
}

// shapeTolerance is the fraction of a NodeClaim's expected capacity a
// Node must have of each requested resource (karpenter: NodeShape, 90%).
const shapeTolerance = 0.90

// inconsistencies runs Karpenter's two consistency checks on every
// NodeClaim with a providerID and a Node, sorted by NodeClaim:
//
//   - node shape, for an initialized NodeClaim not being deleted: for
//     each resource its spec.resources.requests asks a non-zero amount of
//     and its status.capacity expects a non-zero amount of, the Node's
//     status.capacity must be at least 90% of the expected amount; each
//     shortfall reads "expected <q> of resource <name>, but found <q>
//     (<pct>% of expected)" (karpenter: consistency.NodeShape);
//   - termination, for a NodeClaim being deleted: a pod the drain must
//     evict that the Eviction API would refuse (a PodDisruptionBudget at 0
//     allowed disruptions, or several selecting it) reads "can't drain
//     node, <why>" (karpenter: consistency.Termination, which names the
//     PDB; the same PDB rule as the candidates' pod check, pdbBlock).
func (e *evaluation) inconsistencies() []Inconsistency {
	var out []Inconsistency
	for _, n := range e.nodes {
		c := n.claim
		if n.node == nil || c.Status.ProviderID == "" {
			continue
		}
		add := func(msg string) {
			out = append(out, Inconsistency{NodeClaim: c.Name, Node: n.node.Name, Message: msg})
		}
		if c.DeletionTimestamp != nil {
			if why := e.pdbBlock(n); why != "" {
				add("can't drain node, " + why)
			}
			continue
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, v1.ConditionTypeInitialized) {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(c.Spec.Resources.Requests)) {
			requested, expected := c.Spec.Resources.Requests[name], c.Status.Capacity[name]
			if requested.IsZero() || expected.IsZero() {
				continue
			}
			found := n.node.Status.Capacity[name]
			if pct := found.AsApproximateFloat64() / expected.AsApproximateFloat64(); pct < shapeTolerance {
				add(fmt.Sprintf("expected %s of resource %s, but found %s (%0.1f%% of expected)", expected.String(), name, found.String(), pct*100))
			}
		}
	}
	return out
}
