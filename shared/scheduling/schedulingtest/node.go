package schedulingtest

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// NodeOption changes a Node built by Node.
type NodeOption func(*corev1.Node)

// Node returns a Ready, schedulable Node named name with label
// kubernetes.io/hostname=name, UID UID("Node", "", name) and no capacity
// until NodeType or NodeAllocatable sets it.
func Node(name string, opts ...NodeOption) *corev1.Node {
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: UID("Node", "", name), CreationTimestamp: metav1.NewTime(Epoch),
			Labels: map[string]string{v1.LabelHostname: name},
		},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// NodeType gives the node the labels, capacity and allocatable of it, and
// the zone and capacity-type labels.
func NodeType(it *catalog.InstanceType, zone, capacityType string) NodeOption {
	return func(n *corev1.Node) {
		for k, v := range it.Labels {
			n.Labels[k] = v
		}
		n.Labels[v1.LabelTopologyZone] = zone
		n.Labels[v1.LabelCapacityType] = capacityType
		n.Status.Capacity = mergeList(nil, it.Capacity)
		n.Status.Allocatable = it.Allocatable()
	}
}

// NodeAllocatable sets capacity and allocatable to cpu, memory and pods (an
// empty string leaves a resource unset).
func NodeAllocatable(cpu, memory, pods string) NodeOption {
	return func(n *corev1.Node) {
		rl := list(cpu, memory)
		if pods != "" {
			rl[corev1.ResourcePods] = mustQuantity(pods)
		}
		n.Status.Capacity = mergeList(nil, rl)
		n.Status.Allocatable = mergeList(nil, rl)
	}
}

// NodeLabels merges labels into the node's labels.
func NodeLabels(labels map[string]string) NodeOption {
	return func(n *corev1.Node) {
		for k, v := range labels {
			n.Labels[k] = v
		}
	}
}

// NodeTaint appends a taint.
func NodeTaint(key, value string, effect corev1.TaintEffect) NodeOption {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// ManagedBy labels the node as a registered, initialized node of NodePool
// pool (karpenter.sh/nodepool, karpenter.sh/registered,
// karpenter.sh/initialized).
func ManagedBy(pool string) NodeOption {
	return NodeLabels(map[string]string{
		v1.LabelNodePool: pool, v1.LabelRegistered: "true", v1.LabelInitialized: "true",
	})
}

// NodeClaimOption changes a NodeClaim built by NodeClaim.
type NodeClaimOption func(*v1.NodeClaim)

// NodeClaim returns a launched, not yet registered NodeClaim named name of
// NodePool "default" and EC2NodeClass "default", UID UID("NodeClaim", "",
// name), with no capacity until ClaimType sets it.
func NodeClaim(name string, opts ...NodeClaimOption) *v1.NodeClaim {
	nc := &v1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.Group + "/v1", Kind: v1.KindNodeClaim},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: UID(v1.KindNodeClaim, "", name), CreationTimestamp: metav1.NewTime(Epoch),
			Labels: map[string]string{v1.LabelNodePool: "default"},
		},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: DefaultNodeClass},
		},
		Status: v1.NodeClaimStatus{
			Conditions: []metav1.Condition{{
				Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
				LastTransitionTime: metav1.NewTime(Epoch),
			}},
		},
	}
	for _, o := range opts {
		o(nc)
	}
	return nc
}

// ClaimType resolves the claim to it in zone and capacityType: labels,
// single-valued instance-type, zone and capacity-type requirements, and
// status capacity and allocatable.
func ClaimType(it *catalog.InstanceType, zone, capacityType string) NodeClaimOption {
	return func(nc *v1.NodeClaim) {
		for k, v := range it.Labels {
			nc.Labels[k] = v
		}
		nc.Labels[v1.LabelTopologyZone] = zone
		nc.Labels[v1.LabelCapacityType] = capacityType
		nc.Spec.Requirements = append(nc.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{it.Name}},
			v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}},
			v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{capacityType}},
		)
		nc.Status.Capacity = mergeList(nil, it.Capacity)
		nc.Status.Allocatable = it.Allocatable()
	}
}

// ClaimPool sets the owning NodePool label.
func ClaimPool(pool string) NodeClaimOption {
	return func(nc *v1.NodeClaim) { nc.Labels[v1.LabelNodePool] = pool }
}

// ClaimNode records the registered Node name in status.nodeName.
func ClaimNode(nodeName string) NodeClaimOption {
	return func(nc *v1.NodeClaim) { nc.Status.NodeName = nodeName }
}

// Existing is a registered node not managed by a NodeClaim, hosting pods
// (each bound to it with BoundTo).
func Existing(node *corev1.Node, pods ...*corev1.Pod) scheduling.ExistingNode {
	return scheduling.ExistingNode{Node: node, Pods: bind(node.Name, pods)}
}

// InFlight is a launched NodeClaim whose Node has not registered, hosting
// (nominated) pods. The pods are bound to the claim name.
func InFlight(claim *v1.NodeClaim, pods ...*corev1.Pod) scheduling.ExistingNode {
	return scheduling.ExistingNode{NodeClaim: claim, Pods: bind(claim.Name, pods)}
}

// Managed is a registered Node with its NodeClaim, hosting pods bound to the
// node.
func Managed(node *corev1.Node, claim *v1.NodeClaim, pods ...*corev1.Pod) scheduling.ExistingNode {
	claim.Status.NodeName = node.Name
	return scheduling.ExistingNode{Node: node, NodeClaim: claim, Pods: bind(node.Name, pods)}
}

func bind(nodeName string, pods []*corev1.Pod) []*corev1.Pod {
	for _, p := range pods {
		BoundTo(nodeName)(p)
	}
	return pods
}
