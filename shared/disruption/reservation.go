package disruption

import (
	"fmt"
	"maps"
	"sort"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// reservationOf is the capacity reservation n runs in: the one EC2 reports
// for its instance when Input.Instances lists it, else the
// karpenter.k8s.aws/capacity-reservation-id label of a NodeClaim labelled
// karpenter.sh/capacity-type=reserved; "" for none.
func (e *evaluation) reservationOf(n *node) string {
	if inst, ok := e.instances[n.claim.Status.ProviderID]; ok && n.claim.Status.ProviderID != "" {
		return inst.CapacityReservationID
	}
	if n.labels[v1.LabelCapacityType] != v1.CapacityTypeReserved {
		return ""
	}
	return n.labels[v1.LabelCapacityReservationID]
}

// statusReservation is the class's status.capacityReservations entry of
// reservation id, or nil.
func statusReservation(nc *v1.EC2NodeClass, id string) *v1.CapacityReservation {
	if nc == nil || id == "" {
		return nil
	}
	for i := range nc.Status.CapacityReservations {
		if nc.Status.CapacityReservations[i].ID == id {
			return &nc.Status.CapacityReservations[i]
		}
	}
	return nil
}

// expireCapacityBlocks returns one CapacityBlockExpiring command per
// NodeClaim whose reservation (reservationOf) is a capacity block that is
// expiring at Now (v1.CapacityReservation.StateAt over the class's status
// entry; an entry without a reservation type takes the NodeClaim's
// karpenter.k8s.aws/capacity-reservation-type label), and marks those
// NodeClaims as leaving. Karpenter deletes them 40 minutes before the
// block's end, 10 minutes before EC2 starts reclaiming its instances (aws:
// pkg/controllers/capacityreservation/expiration). Like expiration it is
// forceful: no budget, no replacement launched first (the drained pods go
// pending and provisioning replaces the capacity, never in the expiring
// block), do-not-disrupt and PodDisruptionBudgets honoured by the drain
// only until the terminationGracePeriod. A NodeClaim whose reservation has
// no status entry is left to demotion and drift (Demotions, driftOf).
// NodeClaims already leaving or in flight are left alone.
func (e *evaluation) expireCapacityBlocks() []Command {
	var out []Command
	for _, n := range e.nodes {
		if n.deleting {
			continue
		}
		id := e.reservationOf(n)
		entry := statusReservation(n.class, id)
		if entry == nil {
			continue
		}
		cr := *entry
		if cr.ReservationType == "" {
			cr.ReservationType = n.labels[v1.LabelCapacityReservationType]
		}
		if cr.StateAt(e.now) != v1.ReservationStateExpiring {
			continue
		}
		n.deleting = true
		c := Command{
			Method: MethodCapacityBlockExpiring, Decision: DecisionDelete, SavingsPerHour: n.price,
			Reason: fmt.Sprintf("NodeClaim %s runs in capacity block %s, which ends at %s and is expiring from %s (%s before its end); the block's NodeClaims are deleted then, forcefully: no budget, no replacement first, do-not-disrupt ignored",
				n.claim.Name, id, cr.EndTime.UTC().Format(time.RFC3339), cr.EndTime.Add(-v1.CapacityBlockExpiryLead).UTC().Format(time.RFC3339), v1.CapacityBlockExpiryLead),
		}
		out = append(out, e.finish(&c, []*node{n}))
	}
	return out
}

// capacityReservationDrift: the instance runs in a capacity reservation
// its EC2NodeClass no longer selects, the reservation being absent from a
// resolved status.capacityReservations (v1.EC2NodeClass.
// CapacityReservationsResolved; aws: pkg/cloudprovider/drift.go
// isCapacityReservationDrifted). When Input.Instances lists the instance,
// EC2's answer decides (an instance in no reservation any more is
// demoted, not drifted: Demotions); otherwise the NodeClaim's reserved
// labels stand in for it.
func (e *evaluation) capacityReservationDrift(n *node) (string, string) {
	id := e.reservationOf(n)
	if id == "" || !n.class.CapacityReservationsResolved() || statusReservation(n.class, id) != nil {
		return "", ""
	}
	return DriftCapacityReservation, fmt.Sprintf("capacity reservation %q is no longer selected by EC2NodeClass %s", id, n.class.Name)
}

// Demotion is a reserved NodeClaim to relabel on-demand because its
// capacity reservation is gone (expired, cancelled, or otherwise no longer
// holding the instance): karpenter.sh/capacity-type goes reserved ->
// on-demand and karpenter.k8s.aws/capacity-reservation-id is removed, on
// the NodeClaim and on its registered Node (aws:
// pkg/controllers/capacityreservation/capacitytype). The instance keeps
// running, billed on-demand.
type Demotion struct {
	// NodeClaim is the NodeClaim's name.
	NodeClaim string `json:"nodeClaim"`
	// Node is its Node's name; "" when it has none yet or the Node is not
	// to be relabelled (not registered, being deleted, not reserved).
	Node string `json:"node,omitempty"`
	// ReservationID is the reservation it ran in.
	ReservationID string `json:"reservationID"`
	// Reason says why, in a sentence.
	Reason string `json:"reason"`
}

// Demotions lists the NodeClaims of in to demote, by NodeClaim name. A
// NodeClaim is demoted when all of these hold:
//   - it is labelled karpenter.sh/capacity-type=reserved and is not being
//     deleted (a leaving node is not relabelled: Karpenter's rule);
//   - EC2 says its instance runs in no capacity reservation any more:
//     Input.Instances lists it with no CapacityReservationID (Karpenter
//     reads the capacity type from the instance);
//   - its EC2NodeClass is known, its status.capacityReservations is
//     resolved (v1.EC2NodeClass.CapacityReservationsResolved) and does not
//     list the reservation. An instance that has not been listed, or a
//     class whose discovery has not run for its current generation, demotes
//     nothing: both signals must agree that the reservation is gone.
//
// Its Node is named when it carries karpenter.sh/registered=true, the
// reserved capacity type and no deletionTimestamp. When karpenterActive is
// not empty (v1.ClusterSnapshot.KarpenterActive), NodeClaims nodewright
// adopted from Karpenter are left to Karpenter, as HoldAdopted does.
// Applying a Demotion is idempotent (DemoteLabels).
func Demotions(in Input, karpenterActive string) ([]Demotion, error) {
	e, err := newEvaluation(in)
	if err != nil {
		return nil, err
	}
	var out []Demotion
	for _, n := range e.nodes {
		c := n.claim
		if c.DeletionTimestamp != nil || c.Labels[v1.LabelCapacityType] != v1.CapacityTypeReserved {
			continue
		}
		if karpenterActive != "" && c.Annotations[v1.AnnotationAdoptedFrom] != "" {
			continue
		}
		inst, listed := e.instances[c.Status.ProviderID]
		if !listed || c.Status.ProviderID == "" || inst.CapacityReservationID != "" {
			continue
		}
		id := c.Labels[v1.LabelCapacityReservationID]
		if n.class == nil || !n.class.CapacityReservationsResolved() || statusReservation(n.class, id) != nil {
			continue
		}
		d := Demotion{NodeClaim: c.Name, ReservationID: id,
			Reason: fmt.Sprintf("capacity reservation %q no longer holds instance %s and EC2NodeClass %s no longer lists it: the NodeClaim runs on-demand", id, c.Status.ProviderID, n.class.Name)}
		if nd := n.node; nd != nil && nd.DeletionTimestamp == nil && nd.Labels[v1.LabelRegistered] == "true" && nd.Labels[v1.LabelCapacityType] == v1.CapacityTypeReserved {
			d.Node = nd.Name
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeClaim < out[j].NodeClaim })
	return out, nil
}

// DemoteLabels returns labels demoted from reserved to on-demand
// (karpenter.sh/capacity-type=on-demand, no
// karpenter.k8s.aws/capacity-reservation-id) and whether that changed
// anything; labels not reserved are returned unchanged, so applying it
// twice is applying it once. It does not modify labels.
func DemoteLabels(labels map[string]string) (map[string]string, bool) {
	if labels[v1.LabelCapacityType] != v1.CapacityTypeReserved {
		return labels, false
	}
	out := maps.Clone(labels)
	out[v1.LabelCapacityType] = v1.CapacityTypeOnDemand
	delete(out, v1.LabelCapacityReservationID)
	return out, true
}

// ApplyDemotions demotes, in place, the NodeClaims and Nodes of in that ds
// name (DemoteLabels), so an evaluation in the same run sees them as the
// demotion leaves them.
func ApplyDemotions(in *Input, ds []Demotion) {
	claims, nodes := map[string]bool{}, map[string]bool{}
	for _, d := range ds {
		claims[d.NodeClaim] = true
		if d.Node != "" {
			nodes[d.Node] = true
		}
	}
	for i := range in.NodeClaims {
		if c := &in.NodeClaims[i]; claims[c.Name] {
			c.Labels, _ = DemoteLabels(c.Labels)
		}
	}
	for i := range in.Nodes {
		if n := &in.Nodes[i]; nodes[n.Name] {
			n.Labels, _ = DemoteLabels(n.Labels)
		}
	}
}
