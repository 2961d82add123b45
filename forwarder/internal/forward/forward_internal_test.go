package forward

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestSnapshotChangeFiresOnlyForWhatTheSnapshotShows(t *testing.T) {
	node := func(mutate func(n *corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.Unix(100, 0),
		}}}}
		if mutate != nil {
			mutate(n)
		}
		return n
	}
	pod := func(mutate func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	now := metav1.Unix(200, 0)
	tests := []struct {
		name    string
		summary func(any) any
		event   func(h cache.ResourceEventHandler)
		want    bool
	}{
		{"should fire when a node joins", nodeSummary, func(h cache.ResourceEventHandler) { h.OnAdd(node(nil), false) }, true},
		{"should fire when a node leaves", nodeSummary, func(h cache.ResourceEventHandler) { h.OnDelete(node(nil)) }, true},
		{"should fire when a node leaves unseen", nodeSummary, func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "n1", Obj: node(nil)})
		}, true},
		{"should fire when a node becomes Ready", nodeSummary, func(h cache.ResourceEventHandler) {
			h.OnUpdate(node(nil), node(func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionTrue }))
		}, true},
		{"should fire when a node is tainted", nodeSummary, func(h cache.ResourceEventHandler) {
			h.OnUpdate(node(nil), node(func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}
			}))
		}, true},
		{"should fire when a node is being deleted", nodeSummary, func(h cache.ResourceEventHandler) {
			h.OnUpdate(node(nil), node(func(n *corev1.Node) { n.DeletionTimestamp = &now }))
		}, true},
		{"should not fire on a node heartbeat", nodeSummary, func(h cache.ResourceEventHandler) {
			h.OnUpdate(node(nil), node(func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = now }))
		}, false},
		{"should fire when a pod is bound", podSummary, func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(func(p *corev1.Pod) { p.Spec.NodeName = "" }), pod(nil))
		}, true},
		{"should fire when a bound pod is deleted", podSummary, func(h cache.ResourceEventHandler) { h.OnDelete(pod(nil)) }, true},
		{"should fire when a bound pod finishes", podSummary, func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(nil), pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }))
		}, true},
		{"should fire when a bound pod is being deleted", podSummary, func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(nil), pod(func(p *corev1.Pod) { p.DeletionTimestamp = &now }))
		}, true},
		{"should not fire when a pending pod is created", podSummary, func(h cache.ResourceEventHandler) {
			h.OnAdd(pod(func(p *corev1.Pod) { p.Spec.NodeName = "" }), false)
		}, false},
		{"should not fire when a pending pod is deleted", podSummary, func(h cache.ResourceEventHandler) {
			h.OnDelete(pod(func(p *corev1.Pod) { p.Spec.NodeName = "" }))
		}, false},
		{"should not fire on a bound pod's status conditions", podSummary, func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(nil), pod(func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			}))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fired := false
			tt.event(snapshotChange(tt.summary, func() { fired = true }))
			if diff := cmp.Diff(tt.want, fired); diff != "" {
				t.Errorf("fired mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
