package forward

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodewright/nodewright/forwarder/internal/batcher"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// PodEventDedupe folds a node's pod events less than this long after the
// last one recorded into it: 10 s, Karpenter's pod events controller
// dedupe (karpenter-spec section 2, nodeclaim.podevents).
const PodEventDedupe = 10 * time.Second

// podEvents keeps, per node name, when a pod event last happened on it,
// for NodeSummary.LastPodEventTime (Karpenter's NodeClaim
// status.lastPodEventTime). A pod event is a pod bound to the node, or a
// pod on it marked for deletion, deleted or finished (Succeeded/Failed).
// Its methods are safe for concurrent use by informer handlers.
type podEvents struct {
	clock batcher.Clock

	mu   sync.Mutex
	last map[string]time.Time
}

func newPodEvents(clock batcher.Clock) *podEvents {
	return &podEvents{clock: clock, last: map[string]time.Time{}}
}

// observe records a pod event on node now, unless the last one recorded is
// less than PodEventDedupe old.
func (e *podEvents) observe(node string) {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if last, ok := e.last[node]; ok && now.Sub(last) < PodEventDedupe && !now.Before(last) {
		return
	}
	e.last[node] = latest(e.last[node], now)
}

// seed gives nodes without history the latest creation or start time of
// their bound, unfinished pods, so that a forwarder that just started
// never shows a busy node as idle since its initialization. A node with a
// later recorded time keeps it.
func (e *podEvents) seed(pods []*corev1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range pods {
		if p.Spec.NodeName == "" || finished(p) {
			continue
		}
		t := p.CreationTimestamp.Time
		if p.Status.StartTime != nil {
			t = latest(t, p.Status.StartTime.Time)
		}
		e.last[p.Spec.NodeName] = latest(e.last[p.Spec.NodeName], t)
	}
}

// stamp sets LastPodEventTime on the snapshot's nodes that have one and
// forgets nodes the snapshot no longer lists. It returns the times set,
// by node name, for the snapshot's hash.
func (e *podEvents) stamp(parts []v1.ClusterSnapshot) map[string]time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	listed := map[string]time.Time{}
	for i := range parts {
		for j := range parts[i].Nodes {
			n := &parts[i].Nodes[j]
			t, ok := e.last[n.Name]
			if !ok {
				continue
			}
			mt := metav1.NewTime(t)
			n.LastPodEventTime = &mt
			listed[n.Name] = t
		}
	}
	for name := range e.last {
		if _, ok := listed[name]; !ok {
			delete(e.last, name)
		}
	}
	return listed
}

// handler calls observe for each pod event (see podEvents). The adds of
// an informer's initial list are not events: seed covers those pods.
func (e *podEvents) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if p, ok := obj.(*corev1.Pod); ok && !initial && p.Spec.NodeName != "" && !finished(p) {
				e.observe(p.Spec.NodeName) // created bound
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*corev1.Pod)
			p, ok2 := obj.(*corev1.Pod)
			if !ok1 || !ok2 || p.Spec.NodeName == "" {
				return
			}
			if old.Spec.NodeName == "" || // bound
				(old.DeletionTimestamp == nil && p.DeletionTimestamp != nil) || // marked for deletion
				(!finished(old) && finished(p)) { // finished
				e.observe(p.Spec.NodeName)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && !finished(p) {
				e.observe(p.Spec.NodeName)
			}
		},
	}
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// withPodEvents folds the nodes' last pod event times into a snapshot's
// content hash, so a snapshot whose only change is such a time is posted.
func withPodEvents(hash string, times map[string]time.Time) string {
	if len(times) == 0 {
		return hash
	}
	h := sha256.New()
	h.Write([]byte(hash))
	for _, name := range slices.Sorted(maps.Keys(times)) {
		fmt.Fprintf(h, "\x00%s=%d", name, times[name].UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))
}
