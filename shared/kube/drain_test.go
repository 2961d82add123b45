package kube_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/shared/kube"
)

// tierNames returns namespace/name per tier.
func tierNames(tiers [][]corev1.Pod) [][]string {
	var out [][]string
	for _, t := range tiers {
		out = append(out, podNames(t))
	}
	return out
}

func TestDrainOrder(t *testing.T) {
	clusterCritical := priorityClass(kube.PriorityClassSystemClusterCritical)
	nodeCritical := priorityClass(kube.PriorityClassSystemNodeCritical)
	tests := []struct {
		name string
		pods []corev1.Pod
		want [][]string
	}{
		{name: "node without pods is drained", want: nil},
		{
			name: "should evict non-critical non-daemonset pods, then daemonset pods, then critical pods, then critical daemonset pods",
			pods: []corev1.Pod{
				newPod("kube-system", "kube-proxy", daemonSetPod, nodeCritical),
				newPod("kube-system", "coredns", clusterCritical),
				newPod("monitoring", "node-exporter", daemonSetPod),
				newPod("shop", "web-0"),
			},
			want: [][]string{{"shop/web-0"}, {"monitoring/node-exporter"}, {"kube-system/coredns"}, {"kube-system/kube-proxy"}},
		},
		{
			name: "empty tiers are left out",
			pods: []corev1.Pod{newPod("kube-system", "coredns", clusterCritical), newPod("shop", "web-0")},
			want: [][]string{{"shop/web-0"}, {"kube-system/coredns"}},
		},
		{
			name: "pods of a tier are sorted by namespace and name",
			pods: []corev1.Pod{newPod("shop", "web-1"), newPod("billing", "api-0"), newPod("shop", "web-0")},
			want: [][]string{{"billing/api-0", "shop/web-0", "shop/web-1"}},
		},
		{
			name: "other priority classes are not critical",
			pods: []corev1.Pod{newPod("shop", "web-0", priorityClass("high-priority")), newPod("shop", "web-1", priorityClass("system-critical"))},
			want: [][]string{{"shop/web-0", "shop/web-1"}},
		},
		{
			name: "only a DaemonSet owner makes a daemonset pod",
			pods: []corev1.Pod{
				newPod("shop", "web-0", ownedBy("apps/v1", "ReplicaSet")),
				newPod("shop", "db-0", ownedBy("apps/v1", "StatefulSet")),
				newPod("legacy", "agent", ownedBy("extensions/v1beta1", "DaemonSet")),
				newPod("custom", "agent", ownedBy("example.com/v1", "DaemonSet")),
			},
			want: [][]string{{"custom/agent", "shop/db-0", "shop/web-0"}, {"legacy/agent"}},
		},
		{
			name: "should not evict pods that tolerate the disrupted taint",
			pods: []corev1.Pod{
				newPod("shop", "web-0"),
				newPod("kube-system", "tolerates-key", daemonSetPod, tolerating(corev1.Toleration{Key: "karpenter.sh/disrupted", Operator: corev1.TolerationOpExists})),
				newPod("kube-system", "tolerates-all", daemonSetPod, tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists})),
				newPod("kube-system", "tolerates-noschedule", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
				newPod("kube-system", "tolerates-equal", tolerating(corev1.Toleration{Key: "karpenter.sh/disrupted", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule})),
				newPod("kube-system", "tolerates-default-op", tolerating(corev1.Toleration{Key: "karpenter.sh/disrupted"})),
			},
			want: [][]string{{"shop/web-0"}},
		},
		{
			name: "tolerations that do not match the disrupted taint do not exempt",
			pods: []corev1.Pod{
				newPod("a", "noexecute-only", tolerating(corev1.Toleration{Key: "karpenter.sh/disrupted", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
				newPod("b", "other-key", tolerating(corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists})),
				newPod("c", "wrong-value", tolerating(corev1.Toleration{Key: "karpenter.sh/disrupted", Operator: corev1.TolerationOpEqual, Value: "true"})),
			},
			want: [][]string{{"a/noexecute-only", "b/other-key", "c/wrong-value"}},
		},
		{
			name: "mirror pods are not drained",
			pods: []corev1.Pod{
				newPod("kube-system", "etcd-node-a", annotated(corev1.MirrorPodAnnotationKey, "abc")),
				newPod("kube-system", "static-node-a", ownedBy("v1", "Node")),
				newPod("shop", "web-0"),
			},
			want: [][]string{{"shop/web-0"}},
		},
		{
			name: "terminal pods are not drained",
			pods: []corev1.Pod{
				newPod("batch", "done", phase(corev1.PodSucceeded)),
				newPod("batch", "failed", phase(corev1.PodFailed)),
				newPod("batch", "pending", phase(corev1.PodPending)),
			},
			want: [][]string{{"batch/pending"}},
		},
		{
			name: "pods stuck terminating for more than a minute are not waited for",
			pods: []corev1.Pod{
				newPod("shop", "stuck", deleted(t0.Add(-kube.StuckTerminatingAfter-time.Second))),
				newPod("shop", "just-a-minute", deleted(t0.Add(-kube.StuckTerminatingAfter))),
				newPod("shop", "terminating", deleted(t0.Add(20*time.Second))),
			},
			want: [][]string{{"shop/just-a-minute", "shop/terminating"}},
		},
		{
			name: "pods with do-not-disrupt stay in their tier",
			pods: []corev1.Pod{newPod("shop", "web-0", annotated("karpenter.sh/do-not-disrupt", "true"))},
			want: [][]string{{"shop/web-0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kube.DrainOrder(tt.pods, t0)
			if diff := cmp.Diff(tt.want, tierNames(got)); diff != "" {
				t.Errorf("DrainOrder() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDoNotDisrupt(t *testing.T) {
	tests := []struct {
		name  string
		value *string
		age   time.Duration
		want  bool
	}{
		{name: "no annotation", age: time.Hour},
		{name: `"true" is always active`, value: ptr("true"), age: 1000 * time.Hour, want: true},
		{name: "a duration is active while the pod is younger", value: ptr("30m"), age: 29 * time.Minute, want: true},
		{name: "a duration ends when the pod reaches that age", value: ptr("30m"), age: 30 * time.Minute},
		{name: "an older pod is not protected", value: ptr("30m"), age: time.Hour},
		{name: "compound durations are understood", value: ptr("1h30m"), age: 89 * time.Minute, want: true},
		{name: "an invalid value is ignored", value: ptr("yes"), age: time.Second},
		{name: `"True" is not "true"`, value: ptr("True"), age: time.Second},
		{name: "a zero duration is ignored", value: ptr("0s"), age: 0},
		{name: "a negative duration is ignored", value: ptr("-5m"), age: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("shop", "web-0")
			p.CreationTimestamp.Time = t0.Add(-tt.age)
			if tt.value != nil {
				annotated("karpenter.sh/do-not-disrupt", *tt.value)(&p)
			}
			if got := kube.DoNotDisrupt(&p, t0); got != tt.want {
				t.Errorf("DoNotDisrupt() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestEvictable(t *testing.T) {
	tests := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{name: "a running pod is evictable", pod: newPod("shop", "web-0"), want: true},
		{name: "a terminating pod is not evicted again", pod: newPod("shop", "web-0", deleted(t0.Add(10*time.Second)))},
		{name: "should not evict a pod with an active do-not-disrupt annotation", pod: newPod("shop", "web-0", annotated("karpenter.sh/do-not-disrupt", "true"))},
		{name: "an expired do-not-disrupt duration does not protect", pod: newPod("shop", "web-0", annotated("karpenter.sh/do-not-disrupt", "5m")), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kube.Evictable(&tt.pod, t0); got != tt.want {
				t.Errorf("Evictable() = %t, want %t", got, tt.want)
			}
		})
	}
}
