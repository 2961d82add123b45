package requirements

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// ForPod returns a pod's strict node requirements: nodeSelector (as In), the
// first term of required node affinity, and, when respectPreferences, the
// heaviest preferred node-affinity term treated as required (karpenter-spec §2).
//
// Later required terms are alternatives (OR) the solver reaches by relaxing
// (karpenter: preferences.go Relax); among preferred terms of equal weight
// the first listed wins. The pod is not modified. Keys are normalized as in
// New. ForPod does not reject what Karpenter refuses to provision for
// (matchFields, restricted keys, karpenter.sh/nodepool DoesNotExist): call
// ValidatePod first.
func ForPod(pod *corev1.Pod, respectPreferences bool) Requirements {
	r := FromLabels(pod.Spec.NodeSelector)
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		return r
	}
	na := pod.Spec.Affinity.NodeAffinity
	if respectPreferences {
		if term := heaviestPreferred(na.PreferredDuringSchedulingIgnoredDuringExecution); term != nil {
			r.addCore(term.Preference.MatchExpressions)
		}
	}
	if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil && len(req.NodeSelectorTerms) > 0 {
		r.addCore(req.NodeSelectorTerms[0].MatchExpressions)
	}
	return r
}

// heaviestPreferred returns the first preferred term with the largest
// weight, or nil when there is none.
func heaviestPreferred(terms []corev1.PreferredSchedulingTerm) *corev1.PreferredSchedulingTerm {
	var best *corev1.PreferredSchedulingTerm
	for i := range terms {
		if best == nil || terms[i].Weight > best.Weight {
			best = &terms[i]
		}
	}
	return best
}

// ErrNodePoolDoesNotExist is returned (wrapped) by ValidatePod when a pod's
// requirements, preferences included, contain karpenter.sh/nodepool
// DoesNotExist: the pod opts out of provisioned nodes, and Karpenter ignores
// it without an event (karpenter: provisioner.go
// validateKarpenterManagedLabelCanExist; karpenter-spec §2).
var ErrNodePoolDoesNotExist = errors.New("pod requires " + v1.LabelNodePool + " " + string(corev1.NodeSelectorOpDoesNotExist))

// ValidatePod reports whether the provisioner may act on pod, with the rules
// Karpenter applies before scheduling (karpenter: provisioner.go Validate;
// karpenter-spec §1.4, §2):
//
//   - a pod requiring karpenter.sh/nodepool DoesNotExist is ignored
//     silently: the error wraps ErrNodePoolDoesNotExist;
//   - any required node-selector term with matchFields is unsupported;
//   - every nodeSelector entry and required match expression must use a supported
//     operator, a key that is not restricted (kubernetes.io/hostname, and
//     the karpenter.sh and karpenter.k8s.aws domains except well-known
//     keys), In must list a value, and Gt/Lt/Gte/Lte a single non-negative
//     integer.
//
// Any other failure is reported with every reason, in the pod's order,
// separated by "; ": the text of a FailedScheduling event. Keys are checked
// after normalization (v1.NormalizedLabels). Preferred node-affinity terms
// are not validated (Karpenter >= v1.5, kubernetes-sigs/karpenter #2182):
// one the provisioner cannot satisfy is relaxed away like any preference.
func ValidatePod(pod *corev1.Pod) error {
	if req, ok := ForPod(pod, true)[v1.LabelNodePool]; ok && !req.complement && len(req.values) == 0 {
		return fmt.Errorf("validate pod %s/%s: %w", pod.Namespace, pod.Name, ErrNodePoolDoesNotExist)
	}
	var problems []string
	keys := make([]string, 0, len(pod.Spec.NodeSelector))
	for k := range pod.Spec.NodeSelector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		problems = appendRequirementProblems(problems, k, corev1.NodeSelectorOpIn, []string{pod.Spec.NodeSelector[k]})
	}
	if pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil {
		na := pod.Spec.Affinity.NodeAffinity
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			for _, term := range req.NodeSelectorTerms {
				problems = appendTermProblems(problems, term)
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("validate pod %s/%s: %s", pod.Namespace, pod.Name, strings.Join(problems, "; "))
}

func appendTermProblems(problems []string, term corev1.NodeSelectorTerm) []string {
	if len(term.MatchFields) > 0 {
		problems = append(problems, "node selector term with matchFields is not supported")
	}
	for _, e := range term.MatchExpressions {
		problems = appendRequirementProblems(problems, e.Key, e.Operator, e.Values)
	}
	return problems
}

// supportedOperators are the operators Karpenter accepts in requirements
// (karpenter: pkg/apis/v1 SupportedNodeSelectorOps, plus Gte and Lte).
var supportedOperators = []corev1.NodeSelectorOperator{
	corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
	corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt,
	v1.NodeSelectorOpGte, v1.NodeSelectorOpLte,
}

func appendRequirementProblems(problems []string, key string, op corev1.NodeSelectorOperator, values []string) []string {
	if normalized, ok := v1.NormalizedLabels[key]; ok {
		key = normalized
	}
	if !slices.Contains(supportedOperators, op) {
		problems = append(problems, fmt.Sprintf("key %s has an unsupported operator %s", key, op))
	}
	if RestrictedKey(key) {
		problems = append(problems, fmt.Sprintf("label %s is restricted; use a well-known label or a custom label outside the %s and %s domains", key, v1.Group, v1.AWSGroup))
	}
	switch op {
	case corev1.NodeSelectorOpIn:
		if len(values) == 0 {
			problems = append(problems, fmt.Sprintf("key %s with operator %s must have a value defined", key, op))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
		if len(values) != 1 {
			problems = append(problems, fmt.Sprintf("key %s with operator %s must have a single non-negative integer value", key, op))
		} else if n, err := strconv.ParseInt(values[0], 10, 64); err != nil || n < 0 {
			problems = append(problems, fmt.Sprintf("key %s with operator %s must have a single non-negative integer value", key, op))
		}
	}
	return problems
}

// RestrictedKey reports whether key may not appear in pod or NodePool
// requirements (karpenter-spec §1.4; karpenter: pkg/apis/v1/labels.go
// IsRestrictedLabel): kubernetes.io/hostname, and any key in the
// karpenter.sh or karpenter.k8s.aws domains (or their subdomains) that is
// not well-known (v1.WellKnownLabels). Pass normalized keys.
func RestrictedKey(key string) bool {
	if v1.WellKnownLabels[key] {
		return false
	}
	if key == v1.LabelHostname {
		return true
	}
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return false
	}
	domain := key[:i]
	for _, restricted := range []string{v1.Group, v1.AWSGroup} {
		if domain == restricted || strings.HasSuffix(domain, "."+restricted) {
			return true
		}
	}
	return false
}
