package forward_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodewright/nodewright/forwarder/internal/forward"
	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	"github.com/nodewright/nodewright/forwarder/internal/status"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// fakeAPI records what is posted and answers batches with a scripted solve.
type fakeAPI struct {
	mu        sync.Mutex
	batches   []v1.PodBatch
	configs   []v1.ClusterConfig
	regs      []v1.NodeRegistrations
	snapshots []v1.ClusterSnapshot
	// snapshotAt is when each snapshot part was posted.
	snapshotAt []time.Time
	polls      int
	claims     []v1.NodeClaim
	records    []v1.EventRecord
	classes    []v1.NodeClassStatus
	// syncs counts the polls of the API (Sync); failSyncs fails this many
	// of the next ones.
	syncs, failSyncs int
	// failSnapshots fails this many of the next snapshot posts (a post
	// lost on its way).
	failSnapshots int
	// solved answers GET for a batch; nil means still Queued.
	solve func(b v1.PodBatch) *v1.PodBatchResult
}

func (a *fakeAPI) PostPodBatch(_ context.Context, b *v1.PodBatch) (v1.PodBatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches = append(a.batches, *b)
	return v1.PodBatchResult{BatchID: b.ID, State: v1.BatchQueued}, nil
}

func (a *fakeAPI) PodBatchResult(_ context.Context, id string) (v1.PodBatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.polls++
	for _, b := range a.batches {
		if b.ID == id && a.solve != nil {
			if r := a.solve(b); r != nil {
				return *r, nil
			}
		}
	}
	return v1.PodBatchResult{BatchID: id, State: v1.BatchQueued}, nil
}

func (a *fakeAPI) PostConfig(_ context.Context, c *v1.ClusterConfig) (v1.Receipt, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.configs = append(a.configs, *c)
	return v1.Receipt{ID: c.ID}, nil
}

func (a *fakeAPI) PostRegistrations(_ context.Context, r *v1.NodeRegistrations) (v1.Receipt, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.regs = append(a.regs, *r)
	return v1.Receipt{ID: r.ID}, nil
}

func (a *fakeAPI) PostSnapshot(_ context.Context, s *v1.ClusterSnapshot) (v1.Receipt, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failSnapshots > 0 {
		a.failSnapshots--
		return v1.Receipt{}, errors.New("connection reset")
	}
	a.snapshots = append(a.snapshots, *s)
	a.snapshotAt = append(a.snapshotAt, time.Now())
	return v1.Receipt{ID: s.ID}, nil
}

func (a *fakeAPI) Sync(context.Context) (v1.Sync, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.syncs++
	if a.failSyncs > 0 {
		a.failSyncs--
		return v1.Sync{}, errors.New("connection reset")
	}
	return v1.Sync{NodeClaims: slices.Clone(a.claims), Events: v1.EventList{Items: slices.Clone(a.records)}, NodeClasses: slices.Clone(a.classes)}, nil
}

func (a *fakeAPI) syncCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.syncs
}

// batchPods returns the pod names of every batch posted so far.
func (a *fakeAPI) batchPods() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out [][]string
	for _, b := range a.batches {
		var names []string
		for _, p := range b.Pods {
			names = append(names, p.Name)
		}
		out = append(out, names)
	}
	return out
}

func (a *fakeAPI) counts() (batches, configs, regs, snapshots int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.batches), len(a.configs), len(a.regs), len(a.snapshots)
}

type emitted struct {
	BatchID string
	Pods    []string
}

type fakeEmitter struct {
	mu   sync.Mutex
	seen []emitted
}

func (e *fakeEmitter) Emit(_ context.Context, r v1.PodBatchResult, pods map[types.UID]v1.PodSummary) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var names []string
	for uid := range r.Nominations {
		names = append(names, pods[uid].Name)
	}
	slices.Sort(names)
	e.seen = append(e.seen, emitted{BatchID: r.BatchID, Pods: names})
	return len(names), nil
}

type fakeMirror struct {
	mu         sync.Mutex
	syncs      [][]string
	conditions []string
}

func (m *fakeMirror) Sync(_ context.Context, claims []v1.NodeClaim) (mirror.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for _, c := range claims {
		names = append(names, c.Name)
	}
	m.syncs = append(m.syncs, names)
	return mirror.Result{}, nil
}

// SetCondition records "name type=status reason" and writes nothing.
func (m *fakeMirror) SetCondition(_ context.Context, cur *unstructured.Unstructured, c metav1.Condition) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conditions = append(m.conditions, cur.GetName()+" "+c.Type+"="+string(c.Status)+" "+c.Reason)
	return true, nil
}

func (m *fakeMirror) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.syncs)
}

// fakeStatus records each status write: the class names it was given, or
// "pools only" for SyncPools, and how many relays had run by then.
type fakeStatus struct {
	mu     sync.Mutex
	relay  *fakeRelay
	writes []string
}

func (s *fakeStatus) Sync(_ context.Context, classes []v1.NodeClassStatus) (status.SyncResult, error) {
	var names []string
	for _, c := range classes {
		names = append(names, c.Name)
	}
	s.record(fmt.Sprintf("classes %v after %d relays", names, len(s.relay.seen())))
	return status.SyncResult{}, nil
}

func (s *fakeStatus) SyncPools(context.Context) (status.SyncResult, error) {
	s.record(fmt.Sprintf("pools only after %d relays", len(s.relay.seen())))
	return status.SyncResult{}, nil
}

func (s *fakeStatus) record(w string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, w)
}

func (s *fakeStatus) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

// relayed is one Relay call: the record IDs and how many mirror syncs had
// run by then.
type relayed struct {
	IDs         []string
	MirrorSyncs int
}

// fakeRelay records each Relay call. It answers the count of records
// given, or, with dedupe, of the records no earlier call was given (as
// the real relay creates an Event once per record).
type fakeRelay struct {
	mu     sync.Mutex
	mirror *fakeMirror
	calls  []relayed
	dedupe bool
	seenID map[string]bool
}

func (r *fakeRelay) Relay(_ context.Context, records []v1.EventRecord) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, rec := range records {
		ids = append(ids, rec.ID)
	}
	r.calls = append(r.calls, relayed{IDs: ids, MirrorSyncs: r.mirror.count()})
	if !r.dedupe {
		return len(ids), nil
	}
	created := 0
	for _, id := range ids {
		if !r.seenID[id] {
			r.seenID[id] = true
			created++
		}
	}
	return created, nil
}

func (r *fakeRelay) seen() []relayed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// fakeInformer holds an indexer and the handlers registered on it; the test
// changes the indexer and calls the handlers as a real informer would.
type fakeInformer struct {
	mu       sync.Mutex
	store    cache.Indexer
	handlers map[*handle]cache.ResourceEventHandler
}

type handle struct {
	cache.ResourceEventHandlerRegistration
}

func (h *handle) HasSynced() bool { return true }

func newInformer() *fakeInformer {
	return &fakeInformer{
		store:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		handlers: map[*handle]cache.ResourceEventHandler{},
	}
}

func (f *fakeInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &handle{}
	f.handlers[r] = h
	return r, nil
}

func (f *fakeInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.handlers, r.(*handle))
	return nil
}

func (f *fakeInformer) registered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.handlers)
}

// remove deletes obj and tells the handlers.
func (f *fakeInformer) remove(t *testing.T, obj any) {
	t.Helper()
	if err := f.store.Delete(obj); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	hs := make([]cache.ResourceEventHandler, 0, len(f.handlers))
	for _, h := range f.handlers {
		hs = append(hs, h)
	}
	f.mu.Unlock()
	for _, h := range hs {
		h.OnDelete(obj)
	}
}

// set stores obj and tells the handlers, as an add or an update.
func (f *fakeInformer) set(t *testing.T, obj any) {
	t.Helper()
	old, exists, err := f.store.Get(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Update(obj); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	hs := make([]cache.ResourceEventHandler, 0, len(f.handlers))
	for _, h := range f.handlers {
		hs = append(hs, h)
	}
	f.mu.Unlock()
	for _, h := range hs {
		if exists {
			h.OnUpdate(old, obj)
		} else {
			h.OnAdd(obj, false)
		}
	}
}

var epoch = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

func pendingPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: epoch},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		}}},
	}
}

func nodeWithProvider(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: epoch},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name},
	}
}

func nodePool(name string, weight int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"weight": weight, "template": map[string]any{"spec": map[string]any{
			"requirements": []any{},
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
		}}},
	}}
	return u
}

type harness struct {
	api                                 *fakeAPI
	events                              *fakeEmitter
	mirror                              *fakeMirror
	relay                               *fakeRelay
	status                              *fakeStatus
	pods, nodes, nodePools, nodeClasses *fakeInformer
	pdbs, daemonSets                    *fakeInformer
	started                             time.Time
	cancel                              context.CancelFunc
	done                                chan error
}

// start runs a Forwarder inside the current synctest bubble, as the leader
// callback would, with one pending pod, one node and one NodePool.
func start(t *testing.T) *harness {
	t.Helper()
	h := &harness{
		api: &fakeAPI{records: []v1.EventRecord{{ID: "r1"}}}, events: &fakeEmitter{}, mirror: &fakeMirror{},
		pods: newInformer(), nodes: newInformer(), nodePools: newInformer(), nodeClasses: newInformer(),
		pdbs: newInformer(), daemonSets: newInformer(),
		done: make(chan error, 1), started: time.Now(),
	}
	for _, obj := range []struct {
		inf *fakeInformer
		obj any
	}{{h.pods, pendingPod("web-0")}, {h.nodes, nodeWithProvider("n1")}, {h.nodePools, nodePool("default", 10)}} {
		if err := obj.inf.store.Add(obj.obj); err != nil {
			t.Fatal(err)
		}
	}
	h.relay = &fakeRelay{mirror: h.mirror}
	h.status = &fakeStatus{relay: h.relay}
	gr := schema.GroupResource{Group: "karpenter.sh", Resource: "nodepools"}
	src := forward.Sources{
		Pods:              corelisters.NewPodLister(h.pods.store),
		Nodes:             corelisters.NewNodeLister(h.nodes.store),
		PDBs:              policylisters.NewPodDisruptionBudgetLister(h.pdbs.store),
		DaemonSets:        appslisters.NewDaemonSetLister(h.daemonSets.store),
		NodePools:         cache.NewGenericLister(h.nodePools.store, gr),
		NodeClasses:       cache.NewGenericLister(h.nodeClasses.store, gr),
		PodInformer:       h.pods,
		NodeInformer:      h.nodes,
		NodePoolInformer:  h.nodePools,
		NodeClassInformer: h.nodeClasses,
		PDBInformer:       h.pdbs,
		DaemonSetInformer: h.daemonSets,
	}
	f := forward.New(forward.Options{Cluster: "prod", Status: h.status, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, src, h.api, h.events, h.mirror, h.relay)
	ctx, cancel := context.WithCancel(t.Context())
	h.cancel = cancel
	go func() { h.done <- f.Run(ctx) }()
	return h
}

// stop ends leadership and checks that the loop let go of its handlers.
func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	if err := <-h.done; err != nil {
		t.Errorf("Run() = %v, want nil after the lease ends", err)
	}
	for name, inf := range map[string]*fakeInformer{"pods": h.pods, "nodes": h.nodes, "nodepools": h.nodePools, "ec2nodeclasses": h.nodeClasses,
		"poddisruptionbudgets": h.pdbs, "daemonsets": h.daemonSets} {
		if n := inf.registered(); n != 0 {
			t.Errorf("%d %s handlers left registered after Run returned", n, name)
		}
	}
}

func TestPodBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		time.Sleep(500 * time.Millisecond)
		h.pods.set(t, pendingPod("web-1")) // 0.5 s later: same window
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff([][]string{{"web-0", "web-1"}}, h.api.batchPods()); diff != "" {
			t.Errorf("batches after the first window mismatch (-want +got):\n%s", diff)
		}

		bound := pendingPod("web-0")
		bound.Spec.NodeName = "n1"
		bound.Status.Conditions = nil
		h.pods.set(t, bound) // web-0 was scheduled; web-1 stays pending
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if diff := cmp.Diff([][]string{{"web-0", "web-1"}, {"web-1"}}, h.api.batchPods()); diff != "" {
			t.Errorf("batches after the 10 s re-trigger mismatch (-want +got):\n%s", diff)
		}

		h.stop(t)
		before, _, _, _ := h.api.counts()
		time.Sleep(time.Minute)
		if after, _, _, _ := h.api.counts(); after != before {
			t.Errorf("%d batches posted after leadership ended", after-before)
		}
	})
}

func daemonSet(name, cpu string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID("uid-" + name)},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}}}},
	}
}

// TestPodBatchesCarryTheDaemonSetsOfTheirWindow is issue 19 item 9: a
// DaemonSet created just before its pods reaches the solve with them, in
// the batch, not 30 s later with the snapshot.
func TestPodBatchesCarryTheDaemonSetsOfTheirWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		h.daemonSets.set(t, daemonSet("agent", "200m"))
		time.Sleep(time.Second)
		h.pods.set(t, pendingPod("web-1"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		h.api.mu.Lock()
		var got [][]string
		for _, b := range h.api.batches {
			names := []string{}
			for _, ds := range b.DaemonSets {
				names = append(names, ds.Namespace+"/"+ds.Name+" "+ds.Template.Spec.Containers[0].Requests.Cpu().String())
			}
			got = append(got, names)
		}
		h.api.mu.Unlock()
		if diff := cmp.Diff([][]string{{}, {"kube-system/agent 200m"}}, got); diff != "" {
			t.Errorf("DaemonSets of each batch mismatch (-want +got):\n%s", diff)
		}
		h.stop(t)
	})
}

func TestAnswersBecomeEventsAndMirrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		solvedAfter := 3 * time.Second
		postedAt := time.Now()
		h.api.mu.Lock()
		h.api.solve = func(b v1.PodBatch) *v1.PodBatchResult {
			if time.Since(postedAt) < solvedAfter {
				return nil
			}
			r := &v1.PodBatchResult{BatchID: b.ID, State: v1.BatchSolved, Nominations: map[types.UID]v1.Nomination{},
				NodeClaims: []v1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "default-abc"}}}}
			for _, p := range b.Pods {
				r.Nominations[p.UID] = v1.Nomination{NodeClaim: "default-abc"}
			}
			return r
		}
		h.api.mu.Unlock()
		synctest.Wait()
		mirrorsAtStart := h.mirror.count()
		if mirrorsAtStart != 1 {
			t.Errorf("mirror syncs at start = %d, want 1", mirrorsAtStart)
		}

		time.Sleep(5 * time.Second) // window closes at 1 s, answer ready at 3 s, polled every 2 s
		synctest.Wait()
		h.events.mu.Lock()
		seen := slices.Clone(h.events.seen)
		h.events.mu.Unlock()
		h.api.mu.Lock()
		first := h.api.batches[0].ID
		h.api.mu.Unlock()
		if len(seen) != 1 || seen[0].BatchID != first {
			t.Fatalf("events emitted for %+v, want the first batch once", seen)
		}
		if diff := cmp.Diff([]string{"web-0"}, seen[0].Pods); diff != "" {
			t.Errorf("nominated pods mismatch (-want +got):\n%s", diff)
		}
		if got := h.mirror.count(); got != mirrorsAtStart+1 {
			t.Errorf("mirror syncs = %d, want one more right after the answer with NodeClaims", got)
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if got := h.mirror.count(); got < mirrorsAtStart+2 {
			t.Errorf("mirror syncs = %d, want the periodic 15 s sync too", got)
		}
		h.stop(t)
	})
}

func TestEventRecordsAreRelayedAfterEachMirrorSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		synctest.Wait()
		h.api.mu.Lock()
		h.api.records = append(h.api.records, v1.EventRecord{ID: "r2"})
		h.api.mu.Unlock()
		time.Sleep(15 * time.Second) // the default SyncInterval
		synctest.Wait()
		want := []relayed{{IDs: []string{"r1"}, MirrorSyncs: 1}, {IDs: []string{"r1", "r2"}, MirrorSyncs: 2}}
		if diff := cmp.Diff(want, h.relay.seen()); diff != "" {
			t.Errorf("relay calls mismatch (-want +got):\n%s", diff)
		}
		h.stop(t)
		time.Sleep(time.Minute)
		if n := len(h.relay.seen()); n != 2 {
			t.Errorf("relay calls = %d after leadership ended, want still 2", n)
		}
	})
}

// TestPollBacksOffWhileNothingChanges: an answer that changes nothing
// doubles the wait before the next poll, up to a minute; a new event
// record brings it back to 15 s, and a Node change cuts a longer wait to
// 15 s after the last poll.
func TestPollBacksOffWhileNothingChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		h.relay.mu.Lock()
		h.relay.dedupe, h.relay.seenID = true, map[string]bool{}
		h.relay.mu.Unlock()
		begin := time.Now()
		polls := func(at time.Duration, want int, why string) {
			t.Helper()
			time.Sleep(time.Until(begin.Add(at)))
			synctest.Wait()
			if got := h.api.syncCount(); got != want {
				t.Errorf("polls by %v = %d, want %d: %s", at, got, want, why)
			}
		}
		polls(time.Second, 1, "the first, which relays r1")
		polls(16*time.Second, 2, "15 s after a poll that changed something")
		polls(44*time.Second, 2, "30 s after the first poll that changed nothing")
		polls(46*time.Second, 3, "at 45 s")
		polls(104*time.Second, 3, "then a minute")
		polls(106*time.Second, 4, "at 105 s")
		h.api.mu.Lock()
		h.api.records = append(h.api.records, v1.EventRecord{ID: "r2"})
		h.api.mu.Unlock()
		polls(164*time.Second, 4, "still a minute")
		polls(166*time.Second, 5, "at 165 s, relaying r2")
		polls(181*time.Second, 6, "15 s after relaying r2")
		polls(185*time.Second, 6, "30 s after a poll that changed nothing")
		h.nodes.set(t, func() *corev1.Node {
			n := nodeWithProvider("n1")
			n.Labels = map[string]string{"team": "blue"}
			return n
		}())
		polls(194*time.Second, 6, "a Node changed at 185 s: 15 s after the poll at 180 s")
		polls(196*time.Second, 7, "at 195 s")
		h.stop(t)
	})
}

// TestOnePollFeedsMirrorsEventsAndStatus: the API is polled with one
// request every 15 s, and each answer feeds the mirrors, then the event
// records, then the EC2NodeClass status; a failed poll still writes the
// NodePools' status.
func TestOnePollFeedsMirrorsEventsAndStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		h.api.mu.Lock()
		h.api.classes = []v1.NodeClassStatus{{Name: "default"}}
		h.api.mu.Unlock()
		synctest.Wait()
		if got := h.api.syncCount(); got != 1 {
			t.Fatalf("polls at start = %d, want 1", got)
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if got := h.api.syncCount(); got != 4 {
			t.Errorf("polls in the first 59 s = %d, want 4 (at 0, 15, 30 and 45 s)", got)
		}
		h.api.mu.Lock()
		h.api.failSyncs = 1
		h.api.mu.Unlock()
		time.Sleep(time.Second) // the poll at 60 s fails
		synctest.Wait()
		want := []string{
			"classes [default] after 1 relays", "classes [default] after 2 relays", "classes [default] after 3 relays", "classes [default] after 4 relays",
			"pools only after 4 relays",
		}
		if diff := cmp.Diff(want, h.status.seen()); diff != "" {
			t.Errorf("status writes mismatch (-want +got):\n%s", diff)
		}
		if got := h.mirror.count(); got != 4 {
			t.Errorf("mirror syncs = %d, want one per answered poll (4)", got)
		}
		h.stop(t)
	})
}

func TestConfigRegistrationsAndSnapshots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		_, configs, regs, snapshots := h.api.counts()
		if configs != 1 || regs != 1 || snapshots != 1 {
			t.Fatalf("at start: %d configs, %d registrations, %d snapshots; want one each", configs, regs, snapshots)
		}

		h.nodePools.set(t, nodePool("default", 10)) // an update that changes nothing
		h.nodes.set(t, nodeWithProvider("n1"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, c, r, _ := h.api.counts(); c != 1 || r != 1 {
			t.Errorf("after no-op updates: %d configs, %d registrations; want nothing new", c, r)
		}

		h.nodePools.set(t, nodePool("default", 50))
		h.nodes.set(t, nodeWithProvider("n2"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		h.api.mu.Lock()
		if len(h.api.configs) != 2 || *h.api.configs[1].NodePools[0].Spec.Weight != 50 {
			t.Errorf("configs after a weight change: %d", len(h.api.configs))
		} else if g0, g1 := h.api.configs[0].Generation, h.api.configs[1].Generation; g0 != 1 || g1 != 2 {
			t.Errorf("config generations = %d, %d; want 1, 2 (the API orders configs of one instant by them)", g0, g1)
		}
		if len(h.api.regs) != 2 || len(h.api.regs[1].Nodes) != 1 || h.api.regs[1].Nodes[0].Name != "n2" {
			t.Errorf("registrations after n2 joined: %+v", h.api.regs)
		}
		h.api.mu.Unlock()

		// The snapshot changed (n2 joined at 4 s): posted at 5 s, the
		// minimum interval after the first build; after that, unchanged
		// 30 s rebuilds post nothing.
		time.Sleep(time.Second)
		synctest.Wait()
		_, _, _, s1 := h.api.counts()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		_, _, _, s2 := h.api.counts()
		if s1 != 2 || s2 != 2 {
			t.Errorf("snapshots: %d after the change, %d two minutes later; want 2 and 2", s1, s2)
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if _, _, _, s3 := h.api.counts(); s3 != 3 {
			t.Errorf("snapshots after 5 min unchanged = %d, want a refresh (3)", s3)
		}
		h.stop(t)
	})
}

func TestLeaderStartSendsPendingPodsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := h.api.batchPods(); len(got) != 1 {
			t.Errorf("batches 1 s after leadership started = %v, want the pod pending before", got)
		}
		h.stop(t)
	})
}

// snapshotOffsets returns when each snapshot was posted, as offsets from
// the start of leadership.
func (h *harness) snapshotOffsets() []time.Duration {
	h.api.mu.Lock()
	defer h.api.mu.Unlock()
	var out []time.Duration
	for _, at := range h.api.snapshotAt {
		out = append(out, at.Sub(h.started))
	}
	return out
}

func boundPod(name, node string) *corev1.Pod {
	p := pendingPod(name)
	p.Spec.NodeName = node
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	return p
}

func TestSnapshotCadence(t *testing.T) {
	tests := []struct {
		name string
		// act changes the cluster; it runs right after leadership starts
		// (and the first snapshot is posted) and may sleep.
		act  func(t *testing.T, h *harness)
		want []time.Duration
	}{
		{
			name: "should post a joined node one debounce after the change",
			act: func(t *testing.T, h *harness) {
				time.Sleep(10 * time.Second)
				h.nodes.set(t, nodeWithProvider("n2"))
			},
			want: []time.Duration{0, 11 * time.Second},
		},
		{
			name: "should post a node that became Ready one debounce after the change",
			act: func(t *testing.T, h *harness) {
				time.Sleep(12 * time.Second)
				n := nodeWithProvider("n1")
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
				h.nodes.set(t, n)
			},
			want: []time.Duration{0, 13 * time.Second},
		},
		{
			name: "should wait the minimum interval after the previous build",
			act: func(t *testing.T, h *harness) {
				time.Sleep(2 * time.Second)
				h.pods.set(t, boundPod("web-0", "n1"))
			},
			want: []time.Duration{0, 5 * time.Second},
		},
		{
			name: "should group changes until a debounce passes without one",
			act: func(t *testing.T, h *harness) {
				time.Sleep(10 * time.Second)
				h.pods.set(t, boundPod("web-0", "n1"))
				time.Sleep(600 * time.Millisecond)
				h.pods.set(t, boundPod("web-1", "n1"))
				time.Sleep(600 * time.Millisecond)
				h.nodes.set(t, nodeWithProvider("n2"))
			},
			want: []time.Duration{0, 12200 * time.Millisecond},
		},
		{
			name: "should post at most every minimum interval while changes keep coming",
			act: func(t *testing.T, h *harness) {
				time.Sleep(10 * time.Second)
				// A newly bound pod every 700 ms from 10 s to 21.9 s.
				for i := range 18 {
					h.pods.set(t, boundPod(fmt.Sprintf("busy-%d", i), "n1"))
					time.Sleep(700 * time.Millisecond)
				}
			},
			// 15 s: 5 s after the first change; 20.6 s: 5 s after the first
			// change after that build (15.6 s); 25.6 s: 5 s after the build
			// at 20.6 s, though the last change (21.9 s) is 1 s old at 22.9 s.
			want: []time.Duration{0, 15 * time.Second, 20600 * time.Millisecond, 25600 * time.Millisecond},
		},
		{
			name: "should post a pod replaced on its node by an equal one only after the churn interval",
			act: func(t *testing.T, h *harness) {
				h.pods.set(t, boundPod("api-0", "n1"))
				time.Sleep(10 * time.Second)
				h.pods.remove(t, boundPod("api-0", "n1"))
				h.pods.set(t, boundPod("api-1", "n1"))
			},
			// 5 s: api-0 bound (a decision-relevant change); the
			// replacement at 10 s changes only a name, a UID and n1's
			// LastPodEventTime: posted 30 s after the post at 5 s.
			want: []time.Duration{0, 5 * time.Second, 35 * time.Second},
		},
		{
			name: "should post a replacement with other labels one debounce after the change",
			act: func(t *testing.T, h *harness) {
				h.pods.set(t, boundPod("api-0", "n1"))
				time.Sleep(10 * time.Second)
				h.pods.remove(t, boundPod("api-0", "n1"))
				p := boundPod("api-1", "n1")
				p.Labels = map[string]string{"app": "api", "version": "2"}
				h.pods.set(t, p)
			},
			want: []time.Duration{0, 5 * time.Second, 11 * time.Second},
		},
		{
			name: "should post a replacement of a do-not-disrupt pod one debounce after the change",
			act: func(t *testing.T, h *harness) {
				dnd := func(name string) *corev1.Pod {
					p := boundPod(name, "n1")
					p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "10m"}
					return p
				}
				h.pods.set(t, dnd("api-0"))
				time.Sleep(10 * time.Second)
				h.pods.remove(t, dnd("api-0"))
				h.pods.set(t, dnd("api-1"))
			},
			want: []time.Duration{0, 5 * time.Second, 11 * time.Second},
		},
		{
			name: "should post nothing for changes the snapshot does not show",
			act: func(t *testing.T, h *harness) {
				time.Sleep(10 * time.Second)
				// Not shown: a node's kubelet version and foreign annotation,
				// and a pending pod (all reach the handlers).
				n := nodeWithProvider("n1")
				n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
				n.Status.NodeInfo.KubeletVersion = "v1.34.1"
				h.nodes.set(t, n)
				h.pods.set(t, pendingPod("web-9"))
			},
			want: []time.Duration{0},
		},
		{
			name: "should post a new PodDisruptionBudget one debounce after the change, as a Node change",
			act: func(t *testing.T, h *harness) {
				time.Sleep(10 * time.Second)
				h.pdbs.set(t, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}})
			},
			want: []time.Duration{0, 11 * time.Second},
		},
		{
			name: "should post a PodDisruptionBudget whose allowed disruptions changed one debounce after the change",
			act: func(t *testing.T, h *harness) {
				h.pdbs.set(t, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}})
				time.Sleep(12 * time.Second)
				h.pdbs.set(t, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
					Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}})
			},
			want: []time.Duration{0, 5 * time.Second, 13 * time.Second},
		},
		{
			name: "should post a new DaemonSet one debounce after the change, as a Node change",
			act: func(t *testing.T, h *harness) {
				time.Sleep(10 * time.Second)
				h.daemonSets.set(t, daemonSet("agent", "200m"))
			},
			want: []time.Duration{0, 11 * time.Second},
		},
		{
			name: "should not rebuild for a DaemonSet status change the snapshot does not show",
			act: func(t *testing.T, h *harness) {
				h.daemonSets.set(t, daemonSet("agent", "200m"))
				time.Sleep(10 * time.Second)
				ds := daemonSet("agent", "200m")
				ds.Status.NumberReady = 3
				h.daemonSets.set(t, ds)
			},
			want: []time.Duration{0, 5 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t)
				synctest.Wait()
				tt.act(t, h)
				time.Sleep(time.Until(h.started.Add(40 * time.Second)))
				synctest.Wait()
				if diff := cmp.Diff(tt.want, h.snapshotOffsets()); diff != "" {
					t.Errorf("snapshot post times mismatch (-want +got):\n%s", diff)
				}
				h.stop(t)
			})
		})
	}
}

func TestSnapshotChurnConvergesAfterALostPost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		synctest.Wait()
		h.pods.set(t, boundPod("api-0", "n1"))
		time.Sleep(10 * time.Second)
		h.api.mu.Lock()
		h.api.failSnapshots = 1 // the churn post at 35 s is lost
		h.api.mu.Unlock()
		h.pods.remove(t, boundPod("api-0", "n1"))
		h.pods.set(t, boundPod("api-1", "n1"))
		time.Sleep(time.Until(h.started.Add(70 * time.Second)))
		synctest.Wait()
		// Posted at 0 and 5 s; the post at 35 s failed; the next build
		// (SnapshotInterval after it) posts the replacement.
		if diff := cmp.Diff([]time.Duration{0, 5 * time.Second, 65 * time.Second}, h.snapshotOffsets()); diff != "" {
			t.Errorf("snapshot post times mismatch (-want +got):\n%s", diff)
		}
		h.api.mu.Lock()
		last := h.api.snapshots[len(h.api.snapshots)-1]
		h.api.mu.Unlock()
		var names []string
		for _, p := range last.Pods {
			names = append(names, p.Name)
		}
		if !slices.Contains(names, "api-1") || slices.Contains(names, "api-0") {
			t.Errorf("pods of the last snapshot = %v, want api-1 and not api-0", names)
		}
		h.stop(t)
	})
}
