package schedulingtest

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// This file is a small, independent evaluator of node selector requirements
// against one concrete node's labels. CheckResult and CatalogLowerBound use
// it instead of shared/requirements so that they check the solver rather
// than share its code.

// matches evaluates one requirement against concrete labels, with
// Kubernetes semantics for In/NotIn/Exists/DoesNotExist/Gt/Lt and Karpenter's
// inclusive Gte/Lte (karpenter-spec §2). A non-integer value never satisfies
// a bound.
func matches(key string, op corev1.NodeSelectorOperator, values []string, labels map[string]string) bool {
	v, ok := labels[key]
	switch op {
	case corev1.NodeSelectorOpIn:
		return ok && slices.Contains(values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
		if !ok || len(values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		switch op {
		case corev1.NodeSelectorOpGt:
			return have > want
		case corev1.NodeSelectorOpLt:
			return have < want
		case v1.NodeSelectorOpGte:
			return have >= want
		default:
			return have <= want
		}
	}
	return false
}

// podAccepts reports whether a node with labels satisfies the pod's
// nodeSelector and required node affinity (terms ORed, expressions ANDed).
// Keys in skip (e.g. kubernetes.io/hostname, unknown before launch) are
// treated as satisfied.
func podAccepts(p *corev1.Pod, labels map[string]string, skip map[string]bool) bool {
	for k, v := range p.Spec.NodeSelector {
		if !skip[k] && labels[k] != v {
			return false
		}
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		ok := len(t.MatchExpressions) > 0 || len(t.MatchFields) > 0
		for _, r := range t.MatchExpressions {
			if !skip[r.Key] && !matches(r.Key, r.Operator, r.Values, labels) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// tolerates reports whether tolerations tolerate every NoSchedule and
// NoExecute taint (PreferNoSchedule never blocks).
func tolerates(tolerations []corev1.Toleration, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range tolerations {
			if toleratesTaint(&tolerations[j], t) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// poolLabels are the labels every node of pool gets regardless of instance
// type: template labels, single-valued In requirements, the nodepool and
// ec2nodeclass labels.
func poolLabels(np *v1.NodePool) map[string]string {
	out := map[string]string{}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		out[k] = v
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			out[normalized(r.Key)] = r.Values[0]
		}
	}
	out[v1.LabelNodePool] = np.Name
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
		out[v1.LabelEC2NodeClass] = ref.Name
	}
	return out
}

func normalized(key string) string {
	if k, ok := v1.NormalizedLabels[key]; ok {
		return k
	}
	return key
}

// withOffering returns base plus the zone and capacity-type labels of o.
func withOffering(base map[string]string, zone, capacityType string) map[string]string {
	out := make(map[string]string, len(base)+2)
	for k, v := range base {
		out[k] = v
	}
	out[v1.LabelTopologyZone] = zone
	out[v1.LabelCapacityType] = capacityType
	return out
}

// merged returns the union of label sets, later sets winning.
func merged(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

// toleratesTaint follows Kubernetes' Toleration.ToleratesTaint: the effect
// must match unless empty, an empty key with Exists matches every key,
// Exists ignores the value and Equal (the default) compares it.
func toleratesTaint(tol *corev1.Toleration, t *corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != t.Key && (tol.Key != "" || tol.Operator != corev1.TolerationOpExists) {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return tol.Value == t.Value
	}
	return false
}
