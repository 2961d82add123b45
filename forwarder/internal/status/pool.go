// Package status writes the status subresources Karpenter maintains and
// operators read with kubectl: a NodePool's status.resources, status.nodes,
// nodeClassObservedGeneration and conditions (ValidationSucceeded,
// NodeClassReady, Ready), and an EC2NodeClass's resolved subnets, security
// groups, AMIs, instance profile and conditions, as the API resolved them
// (GET v1.RouteSync). It writes a status only when it changed, and
// only while its caller leads.
//
// The pure parts (PoolResources, PoolConditions, ClassConditions) take the
// time as an argument; Writer reads its injected clock.
package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// ResourceNodes is the status.resources key holding the pool's node count
// (`kubectl get nodepools` prints it as NODES).
const ResourceNodes corev1.ResourceName = "nodes"

// Condition reasons this package writes. Sources: karpenter:
// pkg/controllers/nodepool/readiness/controller.go (NodeClassReady),
// pkg/controllers/nodepool/validation/controller.go (ValidationSucceeded)
// and operatorpkg's status conditions (Ready over its dependents, a True
// condition's reason being its type).
const (
	ReasonNodeClassNotFound         = "NodeClassNotFound"
	ReasonNodeClassTerminating      = "NodeClassTerminating"
	ReasonNodeClassReadinessUnknown = "NodeClassReadinessUnknown"
	ReasonNodePoolValidationFailed  = "NodePoolValidationFailed"
	ReasonUnhealthyDependents       = "UnhealthyDependents"
)

// baseResources are the names status.resources always carries, zero when
// the pool has no nodes (karpenter: pkg/controllers/nodepool/counter).
var baseResources = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage,
}

// PoolResources is a NodePool's status.resources: the sum of the capacity
// of each of its nodes, plus ResourceNodes, the node count (karpenter-spec
// section 4: "NodePool usage for limits = sum of node capacity of the pool
// + nodes count", karpenter: pkg/controllers/nodepool/counter/controller.go).
//
// A node of the pool is a NodeClaim labelled karpenter.sh/nodepool=pool,
// counted with the capacity of its Node (status.nodeName) when that Node
// exists and with the NodeClaim's status.capacity before it registers, or a
// Node so labelled that no such NodeClaim names. cpu, memory, pods and
// ephemeral-storage are always present.
func PoolResources(pool string, claims []v1.NodeClaim, nodes []*corev1.Node) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, name := range baseResources {
		out[name] = resource.MustParse("0")
	}
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		if n.Labels[v1.LabelNodePool] == pool {
			byName[n.Name] = n
		}
	}
	count := int64(0)
	seen := map[string]bool{}
	for _, c := range claims {
		if c.Labels[v1.LabelNodePool] != pool {
			continue
		}
		count++
		capacity := c.Status.Capacity
		if n, ok := byName[c.Status.NodeName]; ok && c.Status.NodeName != "" {
			capacity, seen[n.Name] = n.Status.Capacity, true
		}
		add(out, capacity)
	}
	for name, n := range byName {
		if !seen[name] {
			count++
			add(out, n.Status.Capacity)
		}
	}
	out[ResourceNodes] = *resource.NewQuantity(count, resource.DecimalSI)
	return out
}

func add(sum, capacity corev1.ResourceList) {
	for name, q := range capacity {
		total := sum[name]
		total.Add(q)
		sum[name] = total
	}
}

// ClassState is what a NodePool's NodeClassReady reads of its class: nil
// when the class does not exist.
type ClassState struct {
	Generation int64
	Deleting   bool
	// Ready is the class's Ready condition; nil when it has none.
	Ready *metav1.Condition
}

// PoolConditions returns np's ValidationSucceeded, NodeClassReady and Ready
// conditions, in that order, stamped with np's generation:
//
//   - ValidationSucceeded from np.Validate (after defaulting); False with
//     reason NodePoolValidationFailed and the error as message;
//   - NodeClassReady mirrors the class's Ready (karpenter-spec section 7):
//     a missing class is False NodeClassNotFound, a deleting one False
//     NodeClassTerminating, a class with Ready Unknown or none False
//     NodeClassReadinessUnknown, Ready=False carries the class's reason and
//     message;
//   - Ready is True when both are, else False UnhealthyDependents naming
//     the conditions that are not True.
//
// A condition whose status, reason and message equal one in prev keeps its
// lastTransitionTime; any other gets now.
func PoolConditions(np v1.NodePool, class *ClassState, prev []metav1.Condition, now time.Time) []metav1.Condition {
	np.SetDefaults()
	validation := metav1.Condition{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeValidationSucceeded}
	if err := np.Validate(); err != nil {
		validation = metav1.Condition{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionFalse, Reason: ReasonNodePoolValidationFailed, Message: err.Error()}
	}
	classReady := metav1.Condition{Type: v1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeNodeClassReady}
	switch {
	case class == nil:
		classReady.Status, classReady.Reason, classReady.Message = metav1.ConditionFalse, ReasonNodeClassNotFound, "NodeClass not found on cluster"
	case class.Deleting:
		classReady.Status, classReady.Reason, classReady.Message = metav1.ConditionFalse, ReasonNodeClassTerminating, "NodeClass is terminating"
	case class.Ready == nil || class.Ready.Status == metav1.ConditionUnknown:
		classReady.Status, classReady.Reason, classReady.Message = metav1.ConditionFalse, ReasonNodeClassReadinessUnknown, "NodeClass readiness is unknown"
	case class.Ready.Status == metav1.ConditionFalse:
		classReady.Status, classReady.Reason, classReady.Message = metav1.ConditionFalse, class.Ready.Reason, class.Ready.Message
	}
	conds := []metav1.Condition{validation, classReady}
	return finish(append(conds, readyOf(conds)), np.Generation, prev, now)
}

// readyOf is the Ready condition over dependents.
func readyOf(dependents []metav1.Condition) metav1.Condition {
	var bad []string
	for _, c := range dependents {
		if c.Status != metav1.ConditionTrue {
			bad = append(bad, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
	}
	if len(bad) == 0 {
		return metav1.Condition{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady}
	}
	return metav1.Condition{Type: v1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: ReasonUnhealthyDependents, Message: strings.Join(bad, ", ")}
}

// finish stamps conditions with generation and a lastTransitionTime: the
// previous one when the condition did not change, else now.
func finish(conds []metav1.Condition, generation int64, prev []metav1.Condition, now time.Time) []metav1.Condition {
	for i := range conds {
		c := &conds[i]
		c.ObservedGeneration = generation
		c.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
		j := slices.IndexFunc(prev, func(p metav1.Condition) bool { return p.Type == c.Type })
		if j >= 0 && prev[j].Status == c.Status && prev[j].Reason == c.Reason && prev[j].Message == c.Message {
			c.LastTransitionTime = prev[j].LastTransitionTime
		}
	}
	return conds
}

// Find returns the condition of type t, or nil.
func Find(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
