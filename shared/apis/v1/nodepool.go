package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool is karpenter.sh/v1 NodePool: a template for NodeClaims plus the
// disruption rules and limits that apply to them. Field names, JSON tags and
// defaults follow Karpenter v1.14.1 (karpenter: pkg/apis/v1/nodepool.go).
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodePoolSpec   `json:"spec"`
	Status            NodePoolStatus `json:"status,omitzero"`
}

// NodePoolSpec is the desired state of a NodePool.
type NodePoolSpec struct {
	// Template describes the NodeClaims this pool creates.
	Template NodeClaimTemplate `json:"template"`
	// Disruption controls consolidation, emptiness and the disruption budgets.
	// When omitted it defaults to {consolidateAfter: 0s, consolidationPolicy:
	// WhenEmptyOrUnderutilized, budgets: [{nodes: 10%}]}.
	Disruption Disruption `json:"disruption,omitzero"`
	// Limits caps the summed capacity (not allocatable) of the pool's nodes,
	// including the pseudo-resource "nodes".
	Limits Limits `json:"limits,omitempty"`
	// Weight orders pools: higher first; unset means 0. Valid range 1..100.
	Weight *int32 `json:"weight,omitempty"`
	// Replicas (alpha, StaticCapacity gate) makes the pool static.
	Replicas *int64 `json:"replicas,omitempty"`
}

// Limits is a ResourceList of capacity caps (cpu, memory, nodes, ...).
type Limits corev1.ResourceList

// Disruption is spec.disruption of a NodePool.
type Disruption struct {
	// ConsolidateAfter is a duration ("30s", "1h5m") or "Never".
	ConsolidateAfter NillableDuration `json:"consolidateAfter,omitzero"`
	// ConsolidationPolicy is WhenEmpty, WhenEmptyOrUnderutilized (default) or Balanced.
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets rate-limit voluntary disruption. Default [{nodes: "10%"}].
	Budgets []Budget `json:"budgets,omitempty"`
}

// ConsolidationPolicy names what consolidation may do.
type ConsolidationPolicy string

// Consolidation policies accepted by spec.disruption.consolidationPolicy.
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	ConsolidationPolicyBalanced                 ConsolidationPolicy = "Balanced"
)

// DisruptionReason is a reason a budget can be restricted to.
type DisruptionReason string

// Disruption reasons accepted by spec.disruption.budgets[].reasons.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Budget limits how many nodes may be disrupting at once, optionally only
// during a cron window (evaluated in UTC) and only for some reasons.
type Budget struct {
	Reasons  []DisruptionReason `json:"reasons,omitempty"`
	Nodes    string             `json:"nodes"`
	Schedule *string            `json:"schedule,omitempty"`
	Duration *Duration          `json:"duration,omitempty"`
}

// NodeClaimTemplate is spec.template of a NodePool.
type NodeClaimTemplate struct {
	ObjectMeta ObjectMeta            `json:"metadata,omitzero"`
	Spec       NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the subset of metadata a NodeClaim template may carry.
type ObjectMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is spec.template.spec of a NodePool: a NodeClaimSpec
// without resources.
type NodeClaimTemplateSpec struct {
	Taints                 []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements           []NodeSelectorRequirementWithMinValues `json:"requirements"`
	NodeClassRef           *NodeClassReference                    `json:"nodeClassRef"`
	TerminationGracePeriod *Duration                              `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is a duration or "Never"; default 720h.
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// NodeSelectorRequirementWithMinValues is a node selector requirement with
// Karpenter's extra operators (Gte, Lte) and an optional minValues: the
// minimum number of distinct values the launch candidates must offer for Key.
type NodeSelectorRequirementWithMinValues struct {
	Key      string                      `json:"key"`
	Operator corev1.NodeSelectorOperator `json:"operator"`
	Values   []string                    `json:"values,omitempty"`
	// MinValues is 1..50 when set.
	MinValues *int `json:"minValues,omitempty"`
}

// Karpenter's operators beyond the core NodeSelectorOperator set.
const (
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// NodeClassReference points at the provider node class (EC2NodeClass).
type NodeClassReference struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Group string `json:"group"`
}

// NodePoolStatus is the observed state of a NodePool.
type NodePoolStatus struct {
	Resources                   corev1.ResourceList `json:"resources,omitempty"`
	Nodes                       *int64              `json:"nodes,omitempty"`
	NodeClassObservedGeneration int64               `json:"nodeClassObservedGeneration,omitempty"`
	Conditions                  []metav1.Condition  `json:"conditions,omitempty"`
}

// NodePoolList is a list of NodePools.
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// Quantity is re-exported for callers that build limits.
type Quantity = resource.Quantity

// NodePool condition types (karpenter: pkg/apis/v1/nodepool_status.go).
// ValidationSucceeded and NodeClassReady together make Ready;
// NodeRegistrationHealthy is informational.
const (
	ConditionTypeValidationSucceeded     = "ValidationSucceeded"
	ConditionTypeNodeClassReady          = "NodeClassReady"
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
)
