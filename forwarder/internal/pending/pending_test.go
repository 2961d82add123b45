package pending_test

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodewright/nodewright/forwarder/internal/batcher"
	"github.com/nodewright/nodewright/forwarder/internal/pending"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// pod returns a pod the kube-scheduler could not place, changed by opts.
func pod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func boundTo(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = node
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	}
}

func ownedBy(apiVersion, kind string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "uid-owner"})
	}
}

func withCondition(status corev1.ConditionStatus, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: status, Reason: reason}}
	}
}

func TestProvisionable(t *testing.T) {
	tests := []struct {
		name string
		give *corev1.Pod
		want bool
	}{
		{name: "should provision for a pod marked PodScheduled=False/Unschedulable", give: pod("a"), want: true},
		{name: "should provision for a ReplicaSet pod", give: pod("a", ownedBy("apps/v1", "ReplicaSet")), want: true},
		{name: "should not provision for a pod the scheduler has not looked at yet", give: pod("a", func(p *corev1.Pod) { p.Status.Conditions = nil })},
		{name: "should not provision for a pod with another PodScheduled reason", give: pod("a", withCondition(corev1.ConditionFalse, "SchedulerError"))},
		{name: "should not provision for a pod whose PodScheduled condition is True", give: pod("a", withCondition(corev1.ConditionTrue, corev1.PodReasonUnschedulable))},
		{name: "should not provision for a bound pod", give: pod("a", func(p *corev1.Pod) { p.Spec.NodeName = "n1" })},
		{name: "should not provision for a pod nominated by preemption", give: pod("a", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n1" })},
		{name: "should not provision for a daemonset pod", give: pod("a", ownedBy("apps/v1", "DaemonSet"))},
		{name: "should not provision for a mirror pod (annotation)", give: pod("a", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "abc"}
		})},
		{name: "should not provision for a mirror pod (owned by its node)", give: pod("a", ownedBy("v1", "Node"))},
		{name: "should provision for a pod owned by a custom kind named DaemonSet in another group", give: pod("a", ownedBy("example.com/v1", "DaemonSet")), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pending.Provisionable(tt.give); got != tt.want {
				t.Errorf("Provisionable() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReschedulable(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name string
		give *corev1.Pod
		want bool
	}{
		{name: "should move a running deployment pod", give: pod("a", boundTo("n1"), ownedBy("apps/v1", "ReplicaSet")), want: true},
		{name: "should not move a succeeded pod", give: pod("a", boundTo("n1"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })},
		{name: "should not move a failed pod", give: pod("a", boundTo("n1"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
		{name: "should not move a terminating pod", give: pod("a", boundTo("n1"), func(p *corev1.Pod) { p.DeletionTimestamp = &now })},
		{name: "should not move a daemonset pod", give: pod("a", boundTo("n1"), ownedBy("apps/v1", "DaemonSet"))},
		{name: "should not move a mirror pod", give: pod("a", boundTo("n1"), ownedBy("v1", "Node"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pending.Reschedulable(tt.give); got != tt.want {
				t.Errorf("Reschedulable() = %v, want %v", got, tt.want)
			}
		})
	}
}

func node(name string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func tainted(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func TestLeaving(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name string
		give *corev1.Node
		want bool
	}{
		{name: "should treat a node tainted karpenter.sh/disrupted:NoSchedule as leaving", give: node("n", tainted(v1.TaintKeyDisrupted, corev1.TaintEffectNoSchedule)), want: true},
		{name: "should treat a deleting node as leaving", give: node("n", func(n *corev1.Node) { n.DeletionTimestamp = &now }), want: true},
		{name: "should not treat an untainted node as leaving", give: node("n")},
		{name: "should not treat the disrupted key with another effect as leaving", give: node("n", tainted(v1.TaintKeyDisrupted, corev1.TaintEffectNoExecute))},
		{name: "should not treat a cordoned node as leaving", give: node("n", func(n *corev1.Node) { n.Spec.Unschedulable = true })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pending.Leaving(tt.give); got != tt.want {
				t.Errorf("Leaving() = %v, want %v", got, tt.want)
			}
		})
	}
}

func listers(t *testing.T, pods []*corev1.Pod, nodes []*corev1.Node) (corelisters.PodLister, corelisters.NodeLister) {
	t.Helper()
	pi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range pods {
		if err := pi.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	ni := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		if err := ni.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewPodLister(pi), corelisters.NewNodeLister(ni)
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func TestCollect(t *testing.T) {
	pods := []*corev1.Pod{
		pod("web-b"),
		pod("web-a"),
		pod("ds", ownedBy("apps/v1", "DaemonSet")),
		pod("on-healthy", boundTo("healthy")),
		pod("on-disrupted", boundTo("disrupted"), ownedBy("apps/v1", "ReplicaSet")),
		pod("ds-on-disrupted", boundTo("disrupted"), ownedBy("apps/v1", "DaemonSet")),
		pod("done-on-disrupted", boundTo("disrupted"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("on-deleting", boundTo("deleting")),
	}
	now := metav1.Now()
	nodes := []*corev1.Node{
		node("healthy"),
		node("disrupted", tainted(v1.TaintKeyDisrupted, corev1.TaintEffectNoSchedule)),
		node("deleting", func(n *corev1.Node) { n.DeletionTimestamp = &now }),
	}
	pl, nl := listers(t, pods, nodes)
	got, err := pending.Collect(pl, nl)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"web-a", "web-b", "on-deleting", "on-disrupted"}
	if diff := cmp.Diff(want, names(got)); diff != "" {
		t.Errorf("Collect() mismatch (-want +got):\n%s", diff)
	}
}

// recorder records batcher triggers.
type recorder struct {
	mu   sync.Mutex
	keys []string
}

func (r *recorder) add(keys ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, keys...)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.keys
	r.keys = nil
	slices.Sort(out)
	return out
}

func TestTriggerHandlers(t *testing.T) {
	pl, nl := listers(t, nil, nil)
	var rec recorder
	podHandler, nodeHandler := pending.NewTrigger(pl, nl, rec.add, batcher.SystemClock{}).Handlers()
	podHandler.OnAdd(pod("a"), false)
	podHandler.OnUpdate(pod("b"), pod("b", boundTo("n1")))
	podHandler.OnUpdate(pod("c"), pod("c"))
	podHandler.OnAdd(pod("ds", ownedBy("apps/v1", "DaemonSet")), false)
	podHandler.OnDelete(pod("d"))
	nodeHandler.OnAdd(node("n1"), false)
	nodeHandler.OnUpdate(node("n2"), node("n2", tainted(v1.TaintKeyDisrupted, corev1.TaintEffectNoSchedule)))
	want := []string{"node/n2", "pod/uid-a", "pod/uid-c"}
	if diff := cmp.Diff(want, rec.take()); diff != "" {
		t.Errorf("triggers mismatch (-want +got):\n%s", diff)
	}
}

func TestTriggerRetriggersEvery10s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pods := []*corev1.Pod{pod("a"), pod("b", boundTo("n1"))}
		pl, nl := listers(t, pods, []*corev1.Node{node("n1")})
		var rec recorder
		trigger := pending.NewTrigger(pl, nl, rec.add, batcher.SystemClock{})
		done := make(chan error, 1)
		go func() { done <- trigger.Run(t.Context()) }()

		time.Sleep(pending.RetriggerInterval - time.Millisecond)
		synctest.Wait()
		if got := rec.take(); len(got) != 0 {
			t.Errorf("triggers before 10 s = %v, want none", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff([]string{"pod/uid-a"}, rec.take()); diff != "" {
			t.Errorf("triggers at 10 s mismatch (-want +got):\n%s", diff)
		}
		time.Sleep(pending.RetriggerInterval)
		synctest.Wait()
		if diff := cmp.Diff([]string{"pod/uid-a"}, rec.take()); diff != "" {
			t.Errorf("triggers at 20 s mismatch (-want +got):\n%s", diff)
		}
	})
}
