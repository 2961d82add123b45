package kube

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// StuckTerminatingAfter is how long past its deletionTimestamp a pod still
// on the node is considered stuck (a lost kubelet, a finalizer nobody
// removes); the drain stops waiting for it (karpenter-spec 5.2).
const StuckTerminatingAfter = time.Minute

// Priority classes Karpenter evicts last (karpenter-spec 5.2).
const (
	PriorityClassSystemClusterCritical = "system-cluster-critical"
	PriorityClassSystemNodeCritical    = "system-node-critical"
)

// DrainOrder returns the pods of a Node that its drain has to see gone, in
// Karpenter's eviction tiers (karpenter-spec 5.2, 11.3 item 21):
//
//  1. non-critical pods not owned by a DaemonSet,
//  2. non-critical DaemonSet pods,
//  3. critical pods not owned by a DaemonSet,
//  4. critical DaemonSet pods,
//
// where critical means priorityClassName system-cluster-critical or
// system-node-critical. Only the non-empty tiers are returned, in that
// order, each sorted by namespace and name; the drain evicts the first tier
// and starts on the next only when the first is gone, and the Node is
// drained when DrainOrder returns nothing.
//
// Pods the drain does not wait for are left out: terminal pods (Succeeded
// or Failed), pods that tolerate karpenter.sh/disrupted:NoSchedule (so a
// DaemonSet that tolerates every taint is never drained), mirror pods
// (kubelet static pods, annotated kubernetes.io/config.mirror or owned by
// the Node) and pods whose deletionTimestamp is more than
// StuckTerminatingAfter before now. Pods already terminating, and pods with
// an active do-not-disrupt annotation, stay in their tier (the drain waits
// for them) but must not be evicted: see Evictable.
func DrainOrder(pods []corev1.Pod, now time.Time) [][]corev1.Pod {
	var tiers [4][]corev1.Pod
	for _, p := range pods {
		if !waitedFor(&p, now) {
			continue
		}
		tier := 0
		if ownedByDaemonSet(&p) {
			tier++
		}
		if critical(&p) {
			tier += 2
		}
		tiers[tier] = append(tiers[tier], p)
	}
	var out [][]corev1.Pod
	for _, t := range tiers {
		if len(t) == 0 {
			continue
		}
		slices.SortFunc(t, func(a, b corev1.Pod) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		out = append(out, t)
	}
	return out
}

// Evictable reports whether a pod from a DrainOrder tier should be sent an
// eviction now: it is not already terminating (deletionTimestamp unset) and
// carries no active karpenter.sh/do-not-disrupt annotation (DoNotDisrupt).
// A pod that is not evictable still holds up its tier until it is gone or
// the NodeClaim's terminationGracePeriod forces its deletion (DeletePod).
func Evictable(pod *corev1.Pod, now time.Time) bool {
	return pod.DeletionTimestamp == nil && !DoNotDisrupt(pod, now)
}

// DoNotDisrupt reports whether pod's karpenter.sh/do-not-disrupt
// annotation is active at now (karpenter-spec 1.5, 11.3 item 28): the value
// "true" always is; a positive Go duration ("30m") is while the pod is
// younger than it (age from metadata.creationTimestamp). Any other value is
// ignored and reported inactive.
func DoNotDisrupt(pod *corev1.Pod, now time.Time) bool {
	v, ok := pod.Annotations[v1.AnnotationDoNotDisrupt]
	if !ok {
		return false
	}
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false
	}
	return now.Before(pod.CreationTimestamp.Add(d))
}

// Drainable reports whether the drain of its Node acts on pod, Karpenter's
// drainability rule (karpenter-spec 5.2): the pod does not tolerate
// karpenter.sh/disrupted:NoSchedule, is not a mirror pod, and is not stuck
// terminating (deletionTimestamp more than StuckTerminatingAfter before
// now). Terminal pods count as drainable here; DrainOrder leaves them out
// because there is nothing to wait for. The wait for volume detachment
// ignores the volumes of pods that are not drainable: nothing will ever
// move them off the Node.
func Drainable(p *corev1.Pod, now time.Time) bool {
	switch {
	case toleratesDisrupted(p), mirror(p):
		return false
	case p.DeletionTimestamp != nil && now.Sub(p.DeletionTimestamp.Time) > StuckTerminatingAfter:
		return false
	}
	return true
}

// waitedFor reports whether the drain waits for pod (DrainOrder's filter).
func waitedFor(p *corev1.Pod, now time.Time) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return Drainable(p, now)
}

// toleratesDisrupted reports whether one of the pod's tolerations matches
// the disrupted taint, by the rules of the Toleration API: an empty key
// with operator Exists matches every key, an empty effect every effect;
// operator Exists ignores the value, Equal (the default) compares it.
func toleratesDisrupted(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.Tolerations, v1.ToleratesDisruptedTaint)
}

// mirror reports a kubelet static pod's API mirror: annotated by the
// kubelet, or owned by the Node.
func mirror(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "Node" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err == nil && o.Kind == "DaemonSet" && (gv.Group == "apps" || gv.Group == "extensions") {
			return true
		}
	}
	return false
}

func critical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == PriorityClassSystemClusterCritical ||
		p.Spec.PriorityClassName == PriorityClassSystemNodeCritical
}
