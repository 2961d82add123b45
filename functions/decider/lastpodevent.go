package decider

import (
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// withLastPodEvents sets each claim's Status.LastPodEventTime from the
// snapshot Node it names (by status.nodeName, else status.providerID, as
// disruption.Evaluate pairs them) when the Node's LastPodEventTime is
// later than the claim's, so consolidateAfter runs from the last pod event
// seen by the forwarder (Karpenter's NodeClaim status.lastPodEventTime,
// karpenter-spec section 5.1). The stored NodeClaims are not changed:
// claims is modified in place and returned.
func withLastPodEvents(claims []v1.NodeClaim, nodes []v1.NodeSummary) []v1.NodeClaim {
	byName := map[string]*v1.NodeSummary{}
	byProvider := map[string]*v1.NodeSummary{}
	for i := range nodes {
		n := &nodes[i]
		byName[n.Name] = n
		if n.ProviderID != "" {
			byProvider[n.ProviderID] = n
		}
	}
	for i := range claims {
		c := &claims[i]
		n := byName[c.Status.NodeName]
		if n == nil || c.Status.NodeName == "" {
			n = byProvider[c.Status.ProviderID]
			if c.Status.ProviderID == "" {
				n = nil
			}
		}
		if n == nil || n.LastPodEventTime == nil || !n.LastPodEventTime.After(c.Status.LastPodEventTime.Time) {
			continue
		}
		c.Status.LastPodEventTime = *n.LastPodEventTime.DeepCopy()
	}
	return claims
}
