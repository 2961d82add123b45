package v1

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is karpenter.sh/v1 NodeClaim: one requested node. Its spec is
// immutable once created (karpenter: pkg/apis/v1/nodeclaim.go).
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeClaimSpec   `json:"spec"`
	Status            NodeClaimStatus `json:"status,omitzero"`
}

// NodeClaimSpec is the desired node: requirements narrowed to the launch
// candidates, the summed resource requests and the template's taints.
type NodeClaimSpec struct {
	Taints                 []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements           []NodeSelectorRequirementWithMinValues `json:"requirements"`
	Resources              ResourceRequirements                   `json:"resources,omitzero"`
	NodeClassRef           *NodeClassReference                    `json:"nodeClassRef"`
	TerminationGracePeriod *Duration                              `json:"terminationGracePeriod,omitempty"`
	ExpireAfter            NillableDuration                       `json:"expireAfter,omitzero"`
}

// ResourceRequirements holds the requests a NodeClaim must satisfy: pod
// requests + daemonset overhead + a "pods" count.
type ResourceRequirements struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaimStatus is the observed state of a NodeClaim.
type NodeClaimStatus struct {
	NodeName         string              `json:"nodeName,omitempty"`
	ProviderID       string              `json:"providerID,omitempty"`
	ImageID          string              `json:"imageID,omitempty"`
	Capacity         corev1.ResourceList `json:"capacity,omitempty"`
	Allocatable      corev1.ResourceList `json:"allocatable,omitempty"`
	Conditions       []metav1.Condition  `json:"conditions,omitempty"`
	LastPodEventTime metav1.Time         `json:"lastPodEventTime,omitzero"`
}

// NodeClaimList is a list of NodeClaims.
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// NodeClaim condition types (karpenter: pkg/apis/v1/nodeclaim_status.go).
const (
	ConditionTypeLaunched             = "Launched"
	ConditionTypeRegistered           = "Registered"
	ConditionTypeInitialized          = "Initialized"
	ConditionTypeReady                = "Ready"
	ConditionTypeConsolidatable       = "Consolidatable"
	ConditionTypeDrifted              = "Drifted"
	ConditionTypeDrained              = "Drained"
	ConditionTypeVolumesDetached      = "VolumesDetached"
	ConditionTypeInstanceTerminating  = "InstanceTerminating"
	ConditionTypeConsistentStateFound = "ConsistentStateFound"
	ConditionTypeDisruptionReason     = "DisruptionReason"
	// ConditionTypeAdopted is nodewright's condition on a Karpenter
	// NodeClaim it looked at for adoption (not a Karpenter condition):
	// False, with the refusal's reason (AdoptionNodePoolNotFound, ...) and
	// message, while the node is left alone; True (reason Adopted) on the
	// record of an adopted node, which its taken-over object mirrors.
	ConditionTypeAdopted = "Adopted"
)

// SetCondition returns conds with condition t set to status, reason (t
// when empty), message and generation. LastTransitionTime moves to now
// only when the status changes, as the Kubernetes condition convention
// requires. The input slice is not modified.
func SetCondition(conds []metav1.Condition, t string, status metav1.ConditionStatus, reason, message string, generation int64, now time.Time) []metav1.Condition {
	out := slices.Clone(conds)
	if reason == "" {
		reason = t
	}
	for i := range out {
		if out[i].Type != t {
			continue
		}
		if out[i].Status != status {
			out[i].LastTransitionTime = metav1.NewTime(now)
		}
		out[i].Status, out[i].Reason, out[i].Message, out[i].ObservedGeneration = status, reason, message, generation
		return out
	}
	return append(out, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	})
}
