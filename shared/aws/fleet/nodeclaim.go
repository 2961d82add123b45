package fleet

import (
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
)

// Launched returns claim as a successful launch leaves it (karpenter-spec §4
// step 10; aws: pkg/cloudprovider/cloudprovider.go instanceToNodeClaim):
//   - labels: the claim's labels overlaid by the instance type's labels
//     (it.Labels: every single-valued instance-type label, region
//     included), topology.kubernetes.io/zone, topology.k8s.aws/zone-id
//     when known, karpenter.sh/capacity-type,
//     karpenter.k8s.aws/instance-tenancy=default and, for reserved
//     instances, karpenter.k8s.aws/capacity-reservation-id (§1.4);
//   - status.providerID aws:///<zone>/<id>, status.imageID, and
//     status.capacity and status.allocatable of it;
//   - condition Launched=True at now (reason "Launched").
//
// claim is not modified: maps and the condition list are copied. it may be
// nil when the type is unknown, leaving capacity and type labels unset.
func Launched(claim v1.NodeClaim, inst launch.Instance, it *catalog.InstanceType, now time.Time) v1.NodeClaim {
	out := claim
	labels := maps.Clone(claim.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if it != nil {
		maps.Copy(labels, it.Labels)
		out.Status.Capacity = it.Capacity.DeepCopy()
		out.Status.Allocatable = it.Allocatable()
	}
	labels[v1.LabelInstanceType] = inst.InstanceType
	labels[v1.LabelTopologyZone] = inst.Zone
	if inst.ZoneID != "" {
		labels[v1.LabelZoneID] = inst.ZoneID
	}
	labels[v1.LabelCapacityType] = inst.CapacityType
	labels[v1.LabelInstanceTenancy] = "default"
	if inst.ReservationID != "" {
		labels[v1.LabelCapacityReservationID] = inst.ReservationID
	}
	out.Labels = labels
	out.Status.ProviderID = inst.ProviderID()
	out.Status.ImageID = inst.ImageID
	conds := slices.DeleteFunc(slices.Clone(claim.Status.Conditions), func(c metav1.Condition) bool {
		return c.Type == v1.ConditionTypeLaunched
	})
	out.Status.Conditions = append(conds, metav1.Condition{
		Type:               v1.ConditionTypeLaunched,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: claim.Generation,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             "Launched",
	})
	return out
}
