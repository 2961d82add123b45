package forward

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// stepClock is a batcher.Clock whose time the test sets.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time                       { return c.now }
func (c *stepClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// lastPodEvents stamps a one-node snapshot and returns n1's time.
func lastPodEvents(e *podEvents) *metav1.Time {
	parts := []v1.ClusterSnapshot{{Nodes: []v1.NodeSummary{{Name: "n1"}}}}
	e.stamp(parts)
	return parts[0].Nodes[0].LastPodEventTime
}

func TestPodEventsRecordKarpentersPodEvents(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := t0.Add(time.Minute)
	at := func(t time.Time) *metav1.Time { mt := metav1.NewTime(t); return &mt }
	pod := func(mutate func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	deleting := metav1.NewTime(later)
	tests := []struct {
		name  string
		event func(h cache.ResourceEventHandler)
		want  *metav1.Time
	}{
		{"should record a pod bound to the node", func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(func(p *corev1.Pod) { p.Spec.NodeName = "" }), pod(nil))
		}, at(later)},
		{"should record a pod created bound to the node", func(h cache.ResourceEventHandler) { h.OnAdd(pod(nil), false) }, at(later)},
		{"should record a pod of the node marked for deletion", func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(nil), pod(func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }))
		}, at(later)},
		{"should record a pod of the node deleted", func(h cache.ResourceEventHandler) { h.OnDelete(pod(nil)) }, at(later)},
		{"should record a pod of the node deleted unseen", func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "shop/web-0", Obj: pod(nil)})
		}, at(later)},
		{"should record a pod of the node succeeding", func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(nil), pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }))
		}, at(later)},
		{"should record a pod of the node failing", func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(nil), pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }))
		}, at(later)},
		{"should not record an informer's initial list", func(h cache.ResourceEventHandler) { h.OnAdd(pod(nil), true) }, nil},
		{"should not record a pending pod", func(h cache.ResourceEventHandler) {
			h.OnAdd(pod(func(p *corev1.Pod) { p.Spec.NodeName = "" }), false)
		}, nil},
		{"should not record a relabelled pod", func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(nil), pod(func(p *corev1.Pod) { p.Labels = map[string]string{"v": "2"} }))
		}, nil},
		{"should not record a pod becoming ready", func(h cache.ResourceEventHandler) {
			h.OnUpdate(pod(nil), pod(func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			}))
		}, nil},
		{"should not record a finished pod deleted", func(h cache.ResourceEventHandler) {
			h.OnDelete(pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }))
		}, nil},
		{"should not record a pod of another node", func(h cache.ResourceEventHandler) {
			h.OnDelete(pod(func(p *corev1.Pod) { p.Spec.NodeName = "n2" }))
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPodEvents(&stepClock{now: later})
			tt.event(e.handler())
			if diff := cmp.Diff(tt.want, lastPodEvents(e)); diff != "" {
				t.Errorf("LastPodEventTime mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodEventsFoldEventsWithinTheDedupe(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &stepClock{now: t0}
	e := newPodEvents(clock)
	var got []time.Time
	for _, step := range []time.Duration{0, 4 * time.Second, 9 * time.Second, 10 * time.Second, 25 * time.Second} {
		clock.now = t0.Add(step)
		e.observe("n1")
		got = append(got, lastPodEvents(e).Time)
	}
	want := []time.Time{t0, t0, t0, t0.Add(10 * time.Second), t0.Add(25 * time.Second)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LastPodEventTime after each event mismatch (-want +got):\n%s", diff)
	}
}

func TestPodEventsSeedFromBoundPodsWithoutHistory(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := metav1.NewTime(t0.Add(3 * time.Minute))
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: metav1.NewTime(t0)}, Spec: corev1.PodSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "started", CreationTimestamp: metav1.NewTime(t0.Add(time.Minute))},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{StartTime: &start}},
		{ObjectMeta: metav1.ObjectMeta{Name: "done", CreationTimestamp: metav1.NewTime(t0.Add(9 * time.Minute))},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending", CreationTimestamp: metav1.NewTime(t0.Add(9 * time.Minute))}},
	}
	tests := []struct {
		name    string
		history time.Duration // of n1 before the seed; 0 for none
		want    time.Time
	}{
		{"should take the latest creation or start of the node's running pods", 0, start.Time},
		{"should keep a later recorded event", 5 * time.Minute, t0.Add(5 * time.Minute)},
		{"should replace an earlier recorded event", time.Minute, start.Time},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPodEvents(&stepClock{now: t0.Add(tt.history)})
			if tt.history != 0 {
				e.observe("n1")
			}
			e.seed(pods)
			if diff := cmp.Diff(tt.want, lastPodEvents(e).Time); diff != "" {
				t.Errorf("LastPodEventTime mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodEventsForgetNodesTheSnapshotNoLongerLists(t *testing.T) {
	clock := &stepClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newPodEvents(clock)
	e.observe("gone")
	e.observe("n1")
	got := e.stamp([]v1.ClusterSnapshot{{Nodes: []v1.NodeSummary{{Name: "n1"}, {Name: "idle"}}}})
	if diff := cmp.Diff(map[string]time.Time{"n1": clock.now}, got); diff != "" {
		t.Errorf("stamped times mismatch (-want +got):\n%s", diff)
	}
	if _, ok := e.last["gone"]; ok {
		t.Errorf("a node the snapshot no longer lists is still remembered")
	}
}
