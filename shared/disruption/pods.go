package disruption

import (
	"fmt"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// podKey is how the solver keys a pod: its UID, or namespace/name without
// one (scheduling.Result).
func podKey(p *corev1.Pod) string {
	if p.UID != "" {
		return string(p.UID)
	}
	return podName(p)
}

// podName is "namespace/name".
func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// terminal reports a pod that has finished.
func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// active is Karpenter's IsActive: not terminal and not being deleted
// (karpenter: pkg/utils/pod).
func active(p *corev1.Pod) bool { return !terminal(p) && p.DeletionTimestamp == nil }

func ownerKind(p *corev1.Pod) string {
	if o := metav1.GetControllerOf(p); o != nil {
		return o.Kind
	}
	return ""
}

func mirrorPod(p *corev1.Pod) bool {
	_, ok := p.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// reschedulable reports whether draining the pod's node leaves it needing
// a new home: not a DaemonSet or mirror pod, not terminal, and either
// active or a terminating StatefulSet pod (karpenter-spec §3.7).
func reschedulable(p *corev1.Pod) bool {
	if terminal(p) || ownerKind(p) == "DaemonSet" || mirrorPod(p) {
		return false
	}
	return p.DeletionTimestamp == nil || ownerKind(p) == "StatefulSet"
}

// evictable is Karpenter's IsEvictable: active, not a mirror pod, and not
// tolerating karpenter.sh/disrupted:NoSchedule (such pods are never
// drained, so no PodDisruptionBudget stands in the way).
func evictable(p *corev1.Pod) bool {
	if !active(p) || mirrorPod(p) {
		return false
	}
	for _, t := range p.Spec.Tolerations {
		if v1.ToleratesDisruptedTaint(t) {
			return false
		}
	}
	return true
}

// doNotDisrupt returns why the pod's karpenter.sh/do-not-disrupt
// annotation protects it at now, or "": "true" always does, a positive Go
// duration does while the pod is younger than it (age from
// status.startTime, else creation), anything else is ignored
// (karpenter-spec §1.5). Only active pods count.
func doNotDisrupt(p *corev1.Pod, now time.Time) string {
	v, ok := p.Annotations[v1.AnnotationDoNotDisrupt]
	if !ok || !active(p) {
		return ""
	}
	if v == "true" {
		return fmt.Sprintf("pod %s has %s: \"true\"", podName(p), v1.AnnotationDoNotDisrupt)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return ""
	}
	start := p.CreationTimestamp.Time
	if p.Status.StartTime != nil {
		start = p.Status.StartTime.Time
	}
	if age := now.Sub(start); age < d {
		return fmt.Sprintf("pod %s has %s: %q and started %s ago (protected until %s)",
			podName(p), v1.AnnotationDoNotDisrupt, v, age.Round(time.Second), start.Add(d).UTC().Format(time.RFC3339))
	}
	return ""
}

// podReady reports the PodReady condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// evictionCost is Karpenter's per-pod eviction cost: 1 + deletion cost /
// 2^27 + priority / 2^25, clamped to [-10, 10] (karpenter:
// pkg/utils/disruption EvictionCost; karpenter-spec §6.2).
func evictionCost(p *corev1.Pod) float64 {
	cost := 1.0
	if s, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			cost += f / math.Pow(2, 27)
		}
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / math.Pow(2, 25)
	}
	return math.Max(-10, math.Min(10, cost))
}

// rescheduleCost is 1 + Σ max(0, eviction cost) over pods: Karpenter's
// RescheduleDisruptionCost, the divisor of the savings ratio and the
// per-move disruption cost of the Balanced policy.
func rescheduleCost(pods []*corev1.Pod) float64 {
	c := 1.0
	for _, p := range pods {
		c += math.Max(0, evictionCost(p))
	}
	return c
}

// lifetimeRemaining is the fraction of expireAfter the NodeClaim has left,
// in [0, 1]; 1 without expiry (karpenter: LifetimeRemaining).
func lifetimeRemaining(nc *v1.NodeClaim, now time.Time) float64 {
	d := expireAfter(nc)
	if d == nil || *d <= 0 {
		return 1
	}
	left := d.Seconds() - now.Sub(nc.CreationTimestamp.Time).Seconds()
	return math.Max(0, math.Min(1, left/d.Seconds()))
}

// disruptionCost is Σ eviction cost × lifetime remaining: Karpenter's
// DisruptionCost of a candidate.
func disruptionCost(pods []*corev1.Pod, nc *v1.NodeClaim, now time.Time) float64 {
	c := 0.0
	for _, p := range pods {
		c += evictionCost(p)
	}
	return c * lifetimeRemaining(nc, now)
}

// expireAfter is the NodeClaim's expiry duration: spec.expireAfter, or the
// CRD default 720h when unset; nil for Never.
func expireAfter(nc *v1.NodeClaim) *time.Duration {
	ea := nc.Spec.ExpireAfter
	if !ea.IsSet() {
		ea = v1.MustParseNillable(v1.DefaultExpireAfter)
	}
	return ea.Duration
}
