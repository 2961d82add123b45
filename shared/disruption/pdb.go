package disruption

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// pdbLimit is one PodDisruptionBudget with the disruptions it allows now.
type pdbLimit struct {
	name      string // namespace/name
	namespace string
	selector  labels.Selector
	allowed   int
	// alwaysAllowUnhealthy is unhealthyPodEvictionPolicy AlwaysAllow: a
	// pod that is not Ready may be evicted whatever the budget.
	alwaysAllowUnhealthy bool
}

// newPDBLimits computes each PDB's allowed disruptions the way the
// Kubernetes disruption controller does, from its spec and the pods it
// selects (policy/v1 semantics: a nil selector selects nothing, an empty
// one every pod of the namespace):
//
//	expected = selected non-terminal pods
//	healthy  = those Ready and not being deleted
//	desired  = minAvailable (an int, or a percentage of expected rounded
//	           up), or expected - maxUnavailable (rounded up), or 0 when
//	           neither is set
//	allowed  = max(healthy - desired, 0)
//
// The controller scales percentages by the owning controllers' replicas;
// the selected pods stand in for them here. The PDBs' status is not read.
func newPDBLimits(pdbs []policyv1.PodDisruptionBudget, pods []*corev1.Pod) ([]pdbLimit, error) {
	out := make([]pdbLimit, 0, len(pdbs))
	for i := range pdbs {
		pdb := &pdbs[i]
		sel := labels.Nothing()
		if pdb.Spec.Selector != nil {
			s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				return nil, fmt.Errorf("poddisruptionbudget %s/%s: selector: %w", pdb.Namespace, pdb.Name, err)
			}
			sel = s
		}
		expected, healthy := 0, 0
		for _, p := range pods {
			if p.Namespace != pdb.Namespace || terminal(p) || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			expected++
			if p.DeletionTimestamp == nil && podReady(p) {
				healthy++
			}
		}
		desired := 0
		switch {
		case pdb.Spec.MinAvailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, expected, true)
			if err != nil {
				return nil, fmt.Errorf("poddisruptionbudget %s/%s: minAvailable: %w", pdb.Namespace, pdb.Name, err)
			}
			desired = v
		case pdb.Spec.MaxUnavailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, expected, true)
			if err != nil {
				return nil, fmt.Errorf("poddisruptionbudget %s/%s: maxUnavailable: %w", pdb.Namespace, pdb.Name, err)
			}
			desired = max(expected-v, 0)
		}
		out = append(out, pdbLimit{
			name: pdb.Namespace + "/" + pdb.Name, namespace: pdb.Namespace, selector: sel,
			allowed:              max(healthy-desired, 0),
			alwaysAllowUnhealthy: pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// blocksEviction returns why the Eviction API would refuse to evict p, or
// "": a selecting PDB allows no disruption now (unless p is not Ready and
// the PDB always allows evicting unhealthy pods), or more than one PDB
// selects p (karpenter: pkg/utils/pdb Limits.CanEvictPods).
func blocksEviction(limits []pdbLimit, p *corev1.Pod) string {
	var matched []string
	var zero *pdbLimit
	for i := range limits {
		l := &limits[i]
		if l.namespace != p.Namespace || !l.selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		matched = append(matched, l.name)
		if zero == nil && l.allowed == 0 && (!l.alwaysAllowUnhealthy || podReady(p)) {
			zero = l
		}
	}
	switch {
	case len(matched) > 1:
		return fmt.Sprintf("pod %s is selected by more than one PodDisruptionBudget (%s); the Eviction API refuses to evict it", podName(p), strings.Join(matched, ", "))
	case zero != nil:
		return fmt.Sprintf("pod %s is protected by PodDisruptionBudget %s (0 disruptions allowed)", podName(p), zero.name)
	}
	return ""
}
