package schedulingtest

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// PodRequests is the pod's effective resource requests as Kubernetes
// computes them (k8s.io/component-helpers resource.PodRequests): the sum of
// its containers and native sidecars, or the largest init-container step
// (an init container plus the sidecars started before it) if larger, plus
// spec.overhead; a container with limits but no request for a resource
// counts its limit (API-server defaulting). It does not add the "pods"
// count.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for i := range p.Spec.Containers {
		add(sum, containerRequests(&p.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		req := containerRequests(c)
		step := corev1.ResourceList{}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sum, req)
			add(sidecars, req)
			add(step, sidecars)
		} else {
			add(step, req)
			add(step, sidecars)
		}
		maxInto(initMax, step)
	}
	maxInto(sum, initMax)
	add(sum, p.Spec.Overhead)
	return sum
}

func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range c.Resources.Limits {
		out[k] = v.DeepCopy()
	}
	for k, v := range c.Resources.Requests {
		out[k] = v.DeepCopy()
	}
	return out
}

func add(dst, src corev1.ResourceList) {
	for k, v := range src {
		q := dst[k]
		q.Add(v)
		dst[k] = q
	}
}

func maxInto(dst, src corev1.ResourceList) {
	for k, v := range src {
		if q, ok := dst[k]; !ok || v.Cmp(q) > 0 {
			dst[k] = v.DeepCopy()
		}
	}
}

// fits reports whether need <= have for every resource in need; the first
// resource that does not fit is named.
func fits(need, have corev1.ResourceList) (string, bool) {
	keys := make([]string, 0, len(need))
	for k := range need {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := need[corev1.ResourceName(k)]
		if n.IsZero() {
			continue
		}
		h := have[corev1.ResourceName(k)]
		if n.Cmp(h) > 0 {
			return fmt.Sprintf("%s %s > %s", k, n.String(), h.String()), false
		}
	}
	return "", true
}

// SeparateNodes is the size of the largest group of pods that must each be
// on a node of their own: pods of one namespace with the same required
// hostname pod-anti-affinity term whose selector matches the pod itself.
func SeparateNodes(pods []*corev1.Pod) int {
	groups := map[string]int{}
	best := 0
	for _, p := range pods {
		if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
			continue
		}
		for _, t := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t.TopologyKey != v1.LabelHostname || !selects(t.LabelSelector, p.Labels) {
				continue
			}
			key := p.Namespace + "\x00" + metav1.FormatLabelSelector(t.LabelSelector)
			groups[key]++
			best = max(best, groups[key])
		}
	}
	return best
}

// selects reports whether sel matches set; a nil selector matches nothing,
// as in Kubernetes affinity terms.
func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	if sel == nil {
		return false
	}
	if len(sel.MatchExpressions) == 0 {
		for k, v := range sel.MatchLabels {
			if have, ok := set[k]; !ok || have != v {
				return false
			}
		}
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(set))
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
