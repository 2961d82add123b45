// Package forward is the forwarder's posting loop, run only while this
// replica holds the leader lease. It watches what the API needs, through
// informer caches shared with the non-leading replica, and posts it:
//
//   - pod batches: provisionable pods (pending.Provisionable) and pods of
//     leaving nodes, in Karpenter's 1 s idle / 10 s max windows, re-triggered
//     every 10 s while pods stay pending; the answers become pod Events;
//   - the cluster config (NodePools and EC2NodeClasses) on every change;
//   - node registrations as nodes join and change;
//   - the cluster snapshot (Nodes, bound pods, PodDisruptionBudgets,
//     DaemonSets, and the NodeClaims nodewright did not write, which the
//     API adopts) when it changed, on the cadence described below;
//   - every SyncInterval (15 s; backing off to SyncIdleInterval, 60 s,
//     while the answers change nothing and no Node changes), and at once
//     after a batch answer that created NodeClaims, it polls the API once (GET /v1/sync: the resolved
//     EC2NodeClasses, the NodeClaims and the event records in one request)
//     and, from that answer, keeps the NodeClaim mirrors equal to the API's
//     NodeClaims, then writes the event records as Kubernetes Events on
//     Nodes and NodeClaims (after the mirrors, so that an event about a
//     NodeClaim finds its mirror), then the EC2NodeClass and NodePool status
//     (Options.Status).
//
// # Snapshot cadence
//
// The disruption Lambda evaluates the last snapshot posted, every 10 s on
// the local stack and every minute on AWS, as Karpenter's disruption
// controller polls every 10 s over its in-memory cluster state
// (karpenter-spec section 6.1). So that a decision never waits for a
// periodic rebuild, the snapshot is rebuilt promptly after a change it
// shows:
//
//   - a Node added, removed, or changed in its summary (Ready and other
//     conditions without heartbeats, taints, unschedulable, labels, the
//     karpenter annotations, capacity, deletion);
//   - a pod bound, deleted, finished, marked for deletion or relabelled
//     (any change of the pod's snapshot summary or of its inclusion).
//
// Each Node of the snapshot carries when a pod was last bound to it,
// marked for deletion, deleted or finished there (LastPodEventTime, see
// podevents.go), from which the disruption Lambda runs consolidateAfter
// as Karpenter does from NodeClaim status.lastPodEventTime.
//
// A change opens a window that closes SnapshotDebounce (1 s) after the last
// change, or SnapshotMinInterval (5 s) after the first, whichever comes
// first; the snapshot is then rebuilt, but never sooner than
// SnapshotMinInterval after the previous build, so a busy cluster costs at
// most one build (and at most one post) per SnapshotMinInterval.
// Regardless of changes it is rebuilt every SnapshotInterval (30 s), which
// covers PodDisruptionBudget and DaemonSet changes (not watched here) and
// any missed event. A rebuild whose decision hash (report.Snapshot)
// equals the last post's, so that only replaced pods' names, UIDs and
// creation times or the nodes' LastPodEventTime changed, is posted only once
// SnapshotChurnInterval (30 s) has passed since the last post (at the
// build due then): churn of a Deployment's pods costs at most one post per
// SnapshotChurnInterval, and consolidation (every minute on AWS) reads a
// consolidateAfter start at most that late. A rebuild whose content hash
// equals the last post is not posted, unless that post is SnapshotMaxAge (5 min) old, or
// ForeignSnapshotMaxAge (1 min) old while it carries foreign NodeClaims
// (the gc Lambda adopts only from a fresh one). A reaction
// to a Node or pod change therefore reaches the API within about
// SnapshotDebounce, and at most SnapshotMinInterval, plus the post.
//
// A failed post is logged and retried by the next trigger; only the end of
// leadership stops the loop.
//
// # Karpenter still running
//
// While Karpenter's controller is active (karpenter.go: its leader Lease
// renewed, or one of its NodeClaims changed, recently) the loop posts no
// pod batches (the pending pods are Karpenter's to handle: two autoscalers
// must never fight), sends no NodeClaims for adoption (the snapshot says why
// in KarpenterActive instead), logs a warning when that starts and every 5
// minutes after, and writes a KarpenterActive Warning Event on every
// NodePool once per episode. Everything else (config, registrations,
// snapshots, mirrors) goes on, so that nodewright takes over as soon as
// Karpenter stops.
package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/nodewright/nodewright/forwarder/internal/batcher"
	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	"github.com/nodewright/nodewright/forwarder/internal/pending"
	"github.com/nodewright/nodewright/forwarder/internal/report"
	"github.com/nodewright/nodewright/forwarder/internal/status"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// API is the intake API as the loop uses it (intake.Client implements it).
type API interface {
	PostPodBatch(ctx context.Context, b *v1.PodBatch) (v1.PodBatchResult, error)
	PodBatchResult(ctx context.Context, id string) (v1.PodBatchResult, error)
	PostConfig(ctx context.Context, cfg *v1.ClusterConfig) (v1.Receipt, error)
	PostRegistrations(ctx context.Context, r *v1.NodeRegistrations) (v1.Receipt, error)
	PostSnapshot(ctx context.Context, s *v1.ClusterSnapshot) (v1.Receipt, error)
	// Sync answers the resolved EC2NodeClasses, the NodeClaims and the
	// event records, complete (v1.Sync with nothing deferred).
	Sync(ctx context.Context) (v1.Sync, error)
}

// StatusWriter writes EC2NodeClass and NodePool status (status.Writer).
type StatusWriter interface {
	// Sync writes the EC2NodeClass status of the API's resolutions, then
	// every NodePool's.
	Sync(ctx context.Context, classes []v1.NodeClassStatus) (status.SyncResult, error)
	// SyncPools writes every NodePool's status only, when the API's
	// resolutions are not known.
	SyncPools(ctx context.Context) (status.SyncResult, error)
}

// Emitter turns a batch answer into pod Events (events.Emitter).
type Emitter interface {
	Emit(ctx context.Context, result v1.PodBatchResult, pods map[types.UID]v1.PodSummary) (int, error)
}

// Relay writes the API's event records as Kubernetes Events, once per
// record however often it is listed (events.Relay).
type Relay interface {
	Relay(ctx context.Context, records []v1.EventRecord) (int, error)
}

// Mirror keeps NodeClaim mirrors in the cluster (mirror.Mirror), and sets
// the conditions event records carry on Karpenter's NodeClaims.
type Mirror interface {
	Sync(ctx context.Context, claims []v1.NodeClaim) (mirror.Result, error)
	SetCondition(ctx context.Context, cur *unstructured.Unstructured, c metav1.Condition) (bool, error)
}

// Informer is the part of a shared informer the loop uses to be told of
// changes while it leads.
type Informer interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error
}

// PDBLister lists PodDisruptionBudgets from a cache.
type PDBLister interface {
	List(selector labels.Selector) ([]*policyv1.PodDisruptionBudget, error)
}

// CSINodeLister lists CSINodes from a cache.
type CSINodeLister interface {
	List(selector labels.Selector) ([]*storagev1.CSINode, error)
}

// DaemonSetLister lists DaemonSets from a cache.
type DaemonSetLister interface {
	List(selector labels.Selector) ([]*appsv1.DaemonSet, error)
}

// ObjectLister lists objects of a dynamic informer (cache.GenericLister).
type ObjectLister interface {
	List(selector labels.Selector) ([]runtime.Object, error)
}

// Sources are the informer caches the loop reads.
type Sources struct {
	Pods        pending.PodLister
	Nodes       pending.NodeLister
	PDBs        PDBLister
	DaemonSets  DaemonSetLister
	NodePools   ObjectLister
	NodeClasses ObjectLister

	PodInformer       Informer
	NodeInformer      Informer
	NodePoolInformer  Informer
	NodeClassInformer Informer
	// PDBInformer and DaemonSetInformer tell of PodDisruptionBudget and
	// DaemonSet changes, which rebuild the snapshot as a Node change does.
	PDBInformer       Informer
	DaemonSetInformer Informer
	// Volumes looks up the claims, volumes and classes pods name, sent
	// with each pod batch (the pending pods') and each snapshot (the bound
	// pods'); nil sends none.
	Volumes report.VolumeSource
	// CSINodes are the cluster's CSINodes, whose attach limits the
	// snapshot carries; CSINodeInformer tells of their changes, which
	// rebuild the snapshot as a Node change does. Nil sends none.
	CSINodes        CSINodeLister
	CSINodeInformer Informer

	// NodeClaims and NodeClaimInformer are the cluster's karpenter.sh/v1
	// NodeClaims (mirrors and Karpenter's); Leases reads Karpenter's
	// leader Lease. Without NodeClaims no NodeClaim is reported for
	// adoption and Karpenter's activity is judged by its Lease alone;
	// without Leases, by its NodeClaims alone.
	NodeClaims        ObjectLister
	NodeClaimInformer Informer
	Leases            LeaseReader
}

// Options configure the loop; zero durations take the defaults named.
type Options struct {
	// Cluster is the EKS cluster name written into every message.
	Cluster string
	// PodWindow is the pod batching window (1 s idle, 10 s max).
	PodWindow batcher.Options
	// RegistrationWindow groups node changes (1 s idle, 5 s max).
	RegistrationWindow batcher.Options
	// ConfigWindow groups NodePool and EC2NodeClass changes (1 s idle, 10 s max).
	ConfigWindow batcher.Options
	// ConfigResync re-checks the config (posting it if the last post
	// failed) this often: 1 min.
	ConfigResync time.Duration
	// SnapshotInterval is how often the snapshot is rebuilt without any
	// change seen: 30 s, the ceiling of the snapshot's delay.
	SnapshotInterval time.Duration
	// SnapshotDebounce rebuilds the snapshot this long after the last
	// Node or pod change that shows in it: 1 s.
	SnapshotDebounce time.Duration
	// SnapshotMinInterval is the least time between two snapshot builds,
	// and the longest a change waits while changes keep coming: 5 s.
	SnapshotMinInterval time.Duration
	// SnapshotChurnInterval is the least time between two posts whose
	// decision hash (report.Snapshot) is equal: 30 s.
	SnapshotChurnInterval time.Duration
	// SnapshotMaxAge re-posts an unchanged snapshot this long after the
	// last post: 5 min.
	SnapshotMaxAge time.Duration
	// ForeignSnapshotMaxAge re-posts an unchanged snapshot that carries
	// foreign NodeClaims this long after the last post: 1 min, half of
	// provisioning.MaxAdoptionSnapshotAge, the oldest snapshot adoption acts
	// on, so that a live forwarder's is always fresh enough.
	ForeignSnapshotMaxAge time.Duration
	// SyncInterval is how often the API is polled (one GET /v1/sync) for
	// EC2NodeClass status, NodeClaim mirrors and event records while
	// something changes: 15 s (and at once after a batch answer that
	// created NodeClaims), so a class's status, a mirror and an Event
	// reach the cluster within about 15 s of the API holding them.
	SyncInterval time.Duration
	// SyncIdleInterval is the longest interval between polls: after an
	// answer that changed nothing in the cluster (no mirror written, no
	// Node deleted, no Event written, no status written) the interval
	// doubles from SyncInterval up to this, 60 s. An answer that changed
	// something, a failed poll, a batch answer that created NodeClaims or
	// a Node added, removed or changed in its snapshot summary (a
	// disruption taints its Node, a replacement registers) brings it back
	// to SyncInterval, a Node change within SyncInterval of the last poll.
	// Equal to SyncInterval: no back-off.
	SyncIdleInterval time.Duration
	// Status writes EC2NodeClass and NodePool status after each poll; nil
	// writes none.
	Status StatusWriter
	// ResultPoll is how often outstanding batch answers are polled: 2 s.
	ResultPoll time.Duration
	// ResultTimeout gives up polling a batch this long after posting: 2 min.
	ResultTimeout time.Duration
	// Clock defaults to batcher.SystemClock.
	Clock batcher.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Forwarder is the leader-only loop. Build it with New and run it in the
// leader election callback.
type Forwarder struct {
	opts   Options
	src    Sources
	api    API
	events Emitter
	mirror Mirror
	relay  Relay
	log    *slog.Logger
	// podEvents outlives a leadership term, so a replica that leads again
	// keeps the pod events it saw.
	podEvents *podEvents
	// karpenter tells whether Karpenter's controller still runs.
	karpenter *karpenterWatch
}

// New returns a Forwarder; opts' zero fields take their defaults.
func New(opts Options, src Sources, api API, events Emitter, m Mirror, relay Relay) *Forwarder {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if opts.Clock == nil {
		opts.Clock = batcher.SystemClock{}
	}
	for _, w := range []*batcher.Options{&opts.PodWindow, &opts.RegistrationWindow, &opts.ConfigWindow} {
		if w.Clock == nil {
			w.Clock = opts.Clock
		}
	}
	def(&opts.RegistrationWindow.Max, 5*time.Second)
	def(&opts.ConfigResync, time.Minute)
	def(&opts.SnapshotInterval, 30*time.Second)
	def(&opts.SnapshotDebounce, time.Second)
	def(&opts.SnapshotMinInterval, 5*time.Second)
	def(&opts.SnapshotChurnInterval, 30*time.Second)
	def(&opts.SnapshotMaxAge, 5*time.Minute)
	def(&opts.ForeignSnapshotMaxAge, time.Minute)
	def(&opts.SyncInterval, DefaultSyncInterval)
	def(&opts.SyncIdleInterval, DefaultSyncIdleInterval)
	opts.SyncIdleInterval = max(opts.SyncIdleInterval, opts.SyncInterval)
	def(&opts.ResultPoll, 2*time.Second)
	def(&opts.ResultTimeout, 2*time.Minute)
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	f := &Forwarder{opts: opts, src: src, api: api, events: events, mirror: m, relay: relay, log: log, podEvents: newPodEvents(opts.Clock)}
	if src.Leases != nil || src.NodeClaims != nil {
		f.karpenter = &karpenterWatch{leases: src.Leases}
	}
	return f
}

// karpenterActive returns why Karpenter's controller is believed to run
// (empty when it is not) and since when, logging a warning at the start of
// each episode and every 5 minutes during it.
func (f *Forwarder) karpenterActive(ctx context.Context) (string, time.Time) {
	if f.karpenter == nil {
		return "", time.Time{}
	}
	now := f.opts.Clock.Now()
	reason := f.karpenter.active(ctx, now)
	since, log := f.karpenter.episode(reason, now)
	if log {
		f.log.Warn("Karpenter's controller is active: nodewright adopts no node and posts no pod batches until it stops; stop it (kubectl -n <namespace> scale deployment karpenter --replicas=0)",
			"reason", reason, "since", since)
	}
	return reason, since
}

// Run posts until ctx is done, then removes its event handlers and returns
// nil. It returns an error only if an informer refuses a handler.
func (f *Forwarder) Run(ctx context.Context) error {
	pods := batcher.New[string](f.opts.PodWindow)
	nodes := batcher.New[string](f.opts.RegistrationWindow)
	config := batcher.New[string](f.opts.ConfigWindow)
	trigger := pending.NewTrigger(f.src.Pods, f.src.Nodes, pods.Add, f.opts.Clock)
	podHandler, nodeHandler := trigger.Handlers()
	onNode := func(name string) { nodes.Add(name) }
	onConfig := func() { config.Add("config") }
	changes := newChangeSignal(f.opts.Clock)
	nodeChanged := make(chan struct{}, 1)

	var handlers handlerSet
	defer handlers.remove(f.log)
	for _, h := range []struct {
		inf Informer
		h   cache.ResourceEventHandler
	}{
		{f.src.PodInformer, podHandler},
		{f.src.NodeInformer, nodeHandler},
		{f.src.NodeInformer, anyChange(func(obj any) { onNode(objectName(obj)) })},
		{f.src.NodePoolInformer, anyChange(func(any) { onConfig() })},
		{f.src.NodeClassInformer, anyChange(func(any) { onConfig() })},
		{f.src.NodeInformer, snapshotChange(nodeSummary, changes.note)},
		{f.src.NodeInformer, snapshotChange(nodeSummary, func() { poke(nodeChanged) })},
		{f.src.PodInformer, snapshotChange(podSummary, changes.note)},
		{f.src.PDBInformer, snapshotChange(pdbSummary, changes.note)},
		{f.src.DaemonSetInformer, snapshotChange(daemonSetSummary, changes.note)},
		{f.src.CSINodeInformer, snapshotChange(csiNodeSummary, changes.note)},
		{f.src.PodInformer, f.podEvents.handler()},
		{f.src.NodeClaimInformer, f.karpenterHandler()},
	} {
		if h.inf == nil || h.h == nil {
			continue
		}
		if err := handlers.add(h.inf, h.h); err != nil {
			return err
		}
	}

	// Leadership just started: look at everything once.
	if all, err := f.src.Pods.List(labels.Everything()); err != nil {
		f.log.Error("list pods for their nodes' last pod events", "error", err)
	} else {
		f.podEvents.seed(all)
	}
	if _, err := trigger.Sweep(); err != nil {
		f.log.Error("sweep pending pods", "error", err)
	}
	nodes.Add("")
	onConfig()

	results := make(chan posted, 64)
	mirrorNow := make(chan struct{}, 1)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return trigger.Run(ctx) })
	g.Go(func() error { f.podLoop(ctx, pods, results); return nil })
	g.Go(func() error { f.resultLoop(ctx, results, mirrorNow); return nil })
	g.Go(func() error { f.registrationLoop(ctx, nodes); return nil })
	g.Go(func() error { f.configLoop(ctx, config); return nil })
	g.Go(func() error { f.every(ctx, f.opts.ConfigResync, onConfig); return nil })
	g.Go(func() error { f.snapshotLoop(ctx, changes); return nil })
	g.Go(func() error { f.syncLoop(ctx, mirrorNow, nodeChanged); return nil })
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// posted is a batch the API accepted, waiting for its answer.
type posted struct {
	batch  v1.PodBatch
	result v1.PodBatchResult
	at     time.Time
}

func (f *Forwarder) podLoop(ctx context.Context, pods *batcher.Batcher[string], results chan<- posted) {
	for {
		w, err := pods.Next(ctx)
		if err != nil {
			return
		}
		if reason, _ := f.karpenterActive(ctx); reason != "" {
			f.log.Info("pod batch not posted: Karpenter's controller is active", "reason", reason, "triggers", len(w.Keys))
			continue
		}
		list, err := pending.Collect(f.src.Pods, f.src.Nodes)
		if err != nil {
			f.log.Error("collect pending pods", "error", err)
			continue
		}
		dss, err := f.src.DaemonSets.List(labels.Everything())
		if err != nil {
			f.log.Error("list daemonsets for the pod batch", "error", err)
			continue
		}
		batches, err := report.PodBatches(f.opts.Cluster, w.Closed, list, dss, f.src.Volumes)
		if err != nil {
			f.log.Error("build pod batches", "error", err)
			continue
		}
		for i := range batches {
			b := &batches[i]
			res, err := f.api.PostPodBatch(ctx, b)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				f.log.Error("post pod batch", "batch", b.ID, "pods", len(b.Pods), "error", err)
				continue
			}
			f.log.Info("posted pod batch", "batch", b.ID, "pods", len(b.Pods), "triggers", len(w.Keys), "state", res.State, "duplicate", res.Duplicate)
			select {
			case results <- posted{batch: *b, result: res, at: f.opts.Clock.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// resultLoop polls the answers of posted batches until they are final or
// time out, turns them into events and asks for a mirror sync when they
// created NodeClaims.
func (f *Forwarder) resultLoop(ctx context.Context, results <-chan posted, mirrorNow chan<- struct{}) {
	var outstanding []posted
	finish := func(p posted) {
		if p.result.State == v1.BatchFailed {
			f.log.Warn("pod batch failed", "batch", p.batch.ID, "message", p.result.Message)
			return
		}
		n, err := f.events.Emit(ctx, p.result, report.PodsByUID([]v1.PodBatch{p.batch}))
		if err != nil {
			f.log.Error("emit pod events", "batch", p.batch.ID, "error", err)
		}
		f.log.Info("pod batch solved", "batch", p.batch.ID, "nominated", len(p.result.Nominations),
			"unschedulable", len(p.result.Unschedulable), "nodeclaims", len(p.result.NodeClaims), "events", n)
		if len(p.result.NodeClaims) > 0 {
			poke(mirrorNow)
		}
	}
	for {
		var tick <-chan time.Time
		if len(outstanding) > 0 {
			tick = f.opts.Clock.After(f.opts.ResultPoll)
		}
		select {
		case <-ctx.Done():
			return
		case p := <-results:
			if p.result.State == v1.BatchQueued {
				outstanding = append(outstanding, p)
				continue
			}
			finish(p)
		case <-tick:
			now := f.opts.Clock.Now()
			kept := outstanding[:0]
			for _, p := range outstanding {
				res, err := f.api.PodBatchResult(ctx, p.batch.ID)
				switch {
				case err != nil && ctx.Err() != nil:
					return
				case err != nil:
					f.log.Error("poll pod batch", "batch", p.batch.ID, "error", err)
				case res.State != v1.BatchQueued:
					p.result = res
					finish(p)
					continue
				}
				if now.Sub(p.at) >= f.opts.ResultTimeout {
					f.log.Warn("pod batch not solved in time; its pods are retried with the next batch", "batch", p.batch.ID)
					continue
				}
				kept = append(kept, p)
			}
			outstanding = kept
		}
	}
}

func (f *Forwarder) registrationLoop(ctx context.Context, nodes *batcher.Batcher[string]) {
	regs := report.NewRegistrations()
	for {
		w, err := nodes.Next(ctx)
		if err != nil {
			return
		}
		all, err := f.src.Nodes.List(labels.Everything())
		if err != nil {
			f.log.Error("list nodes", "error", err)
			continue
		}
		changed, removed := regs.Pending(all)
		msgs, err := report.RegistrationMessages(f.opts.Cluster, w.Closed, changed, removed)
		if err != nil {
			f.log.Error("build node registrations", "error", err)
			continue
		}
		for i := range msgs {
			m := &msgs[i]
			if _, err := f.api.PostRegistrations(ctx, m); err != nil {
				if ctx.Err() != nil {
					return
				}
				f.log.Error("post node registrations", "id", m.ID, "error", err)
				// Not acknowledged: the next node event reports it again.
				continue
			}
			regs.Acknowledge(m.Nodes, m.Removed)
			f.log.Info("posted node registrations", "id", m.ID, "nodes", len(m.Nodes), "removed", len(m.Removed))
		}
	}
}

// every calls fn every interval until ctx is done.
func (f *Forwarder) every(ctx context.Context, interval time.Duration, fn func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.opts.Clock.After(interval):
			fn()
		}
	}
}

func (f *Forwarder) configLoop(ctx context.Context, config *batcher.Batcher[string]) {
	var lastHash string
	var generation int64
	for {
		w, err := config.Next(ctx)
		if err != nil {
			return
		}
		nps, err := unstructuredList(f.src.NodePools)
		if err != nil {
			f.log.Error("list nodepools", "error", err)
			continue
		}
		ncs, err := unstructuredList(f.src.NodeClasses)
		if err != nil {
			f.log.Error("list ec2nodeclasses", "error", err)
			continue
		}
		cfg, hash, warnings, err := report.Config(f.opts.Cluster, w.Closed, nps, ncs)
		for _, warn := range warnings {
			f.log.Warn("config field ignored", "warning", warn)
		}
		if err != nil {
			f.log.Error("read config; keeping the last one posted", "error", err)
			continue
		}
		if hash == lastHash {
			continue
		}
		generation++
		cfg.Generation = generation
		if _, err := f.api.PostConfig(ctx, &cfg); err != nil {
			if ctx.Err() != nil {
				return
			}
			f.log.Error("post config", "id", cfg.ID, "error", err)
			continue
		}
		lastHash = hash
		f.log.Info("posted config", "id", cfg.ID, "nodepools", len(cfg.NodePools), "ec2nodeclasses", len(cfg.EC2NodeClasses))
	}
}

// snapshotLoop builds and posts the snapshot at once, then on the cadence
// of the package doc: after changes (debounced, at least
// SnapshotMinInterval apart) and every SnapshotInterval.
func (f *Forwarder) snapshotLoop(ctx context.Context, changes *changeSignal) {
	var lastHash, lastDecision string
	var lastAt time.Time
	for {
		now := f.opts.Clock.Now()
		changes.take()
		active, _ := f.karpenterActive(ctx)
		parts, hash, decision, err := f.snapshot(now, active)
		// churnDue is when a churn-only change held back is posted.
		var churnDue time.Time
		switch {
		case err != nil:
			f.log.Error("build snapshot", "error", err)
		case hash == lastHash && now.Sub(lastAt) < maxAge(f.opts, parts):
		case decision == lastDecision && now.Sub(lastAt) < min(f.opts.SnapshotChurnInterval, maxAge(f.opts, parts)):
			churnDue = lastAt.Add(f.opts.SnapshotChurnInterval)
		default:
			ok := true
			for i := range parts {
				if _, err := f.api.PostSnapshot(ctx, &parts[i]); err != nil {
					if ctx.Err() != nil {
						return
					}
					f.log.Error("post snapshot", "id", parts[i].ID, "error", err)
					ok = false
					break
				}
			}
			if ok {
				lastHash, lastDecision, lastAt = hash, decision, now
				f.log.Info("posted snapshot", "snapshot", parts[0].SnapshotID, "parts", len(parts))
			}
		}
		if !f.waitForSnapshot(ctx, changes, now, churnDue) {
			return
		}
	}
}

// maxAge is how long an unchanged snapshot of parts waits to be
// re-posted.
func maxAge(opts Options, parts []v1.ClusterSnapshot) time.Duration {
	for i := range parts {
		if len(parts[i].ForeignNodeClaims) > 0 {
			return min(opts.SnapshotMaxAge, opts.ForeignSnapshotMaxAge)
		}
	}
	return opts.SnapshotMaxAge
}

// waitForSnapshot waits until the next snapshot is due after a build at
// built: SnapshotInterval later, at churnDue when that is set and sooner,
// or sooner once a change's window closes (see the package doc). It
// returns false when ctx is done.
func (f *Forwarder) waitForSnapshot(ctx context.Context, changes *changeSignal, built, churnDue time.Time) bool {
	ceiling := built.Add(f.opts.SnapshotInterval)
	if !churnDue.IsZero() {
		ceiling = earliest(ceiling, latest(churnDue, built.Add(f.opts.SnapshotMinInterval)))
	}
	for {
		due := ceiling
		if first, last, ok := changes.pending(); ok {
			closes := earliest(last.Add(f.opts.SnapshotDebounce), first.Add(f.opts.SnapshotMinInterval))
			due = earliest(ceiling, latest(closes, built.Add(f.opts.SnapshotMinInterval)))
		}
		wait := due.Sub(f.opts.Clock.Now())
		if wait <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changes.kick:
			// A change: recompute when the snapshot is due.
		case <-f.opts.Clock.After(wait):
		}
	}
}

// snapshot builds the snapshot's parts, its content hash and its decision
// hash (report.Snapshot; KarpenterActive counts in both). The first part
// carries the foreign NodeClaims, or, when karpenterActive is not empty,
// none and the reason.
func (f *Forwarder) snapshot(now time.Time, karpenterActive string) (parts []v1.ClusterSnapshot, hash, decision string, err error) {
	nodes, err := f.src.Nodes.List(labels.Everything())
	if err != nil {
		return nil, "", "", err
	}
	pods, err := f.src.Pods.List(labels.Everything())
	if err != nil {
		return nil, "", "", err
	}
	pdbs, err := f.src.PDBs.List(labels.Everything())
	if err != nil {
		return nil, "", "", err
	}
	dss, err := f.src.DaemonSets.List(labels.Everything())
	if err != nil {
		return nil, "", "", err
	}
	var claims []v1.NodeClaim
	if f.src.NodeClaims != nil && karpenterActive == "" {
		if claims, err = foreignNodeClaims(f.src.NodeClaims); err != nil {
			return nil, "", "", fmt.Errorf("list nodeclaims: %w", err)
		}
		if len(claims) > v1.MaxNodesPerMessage {
			claims = claims[:v1.MaxNodesPerMessage]
		}
	}
	storage := report.Storage{Volumes: f.src.Volumes}
	if f.src.CSINodes != nil {
		if storage.CSINodes, err = f.src.CSINodes.List(labels.Everything()); err != nil {
			return nil, "", "", fmt.Errorf("list csinodes: %w", err)
		}
	}
	// The foreign NodeClaims are chunked with the rest: each part stays
	// within the intake's limit however many there are.
	parts, hash, decision, err = report.Snapshot(f.opts.Cluster, now, nodes, pods, pdbs, dss, claims, storage)
	if err != nil {
		return nil, "", "", err
	}
	hash = withPodEvents(hash, f.podEvents.stamp(parts))
	if f.src.NodeClaims != nil && karpenterActive != "" {
		parts[0].KarpenterActive = karpenterActive
		return parts, hash + "/karpenter-active", decision + "/karpenter-active", nil
	}
	return parts, hash, decision, nil
}

// karpenterHandler notes changes of Karpenter's NodeClaims (nil without a
// NodeClaim informer).
func (f *Forwarder) karpenterHandler() cache.ResourceEventHandler {
	if f.karpenter == nil || f.src.NodeClaimInformer == nil {
		return nil
	}
	return f.karpenter.handler(f.opts.Clock.Now)
}

// The defaults of Options.SyncInterval and Options.SyncIdleInterval.
const (
	DefaultSyncInterval     = 15 * time.Second
	DefaultSyncIdleInterval = time.Minute
)

// syncLoop polls the API (GET /v1/sync) at once, then every SyncInterval,
// backing off to SyncIdleInterval while the answers change nothing, and
// whenever now fires; nodeChanged shortens a longer wait to SyncInterval
// after the last poll. Each answer is applied: mirrors, then event
// records, then status. A failed poll is logged; NodePool status, which
// reads the cluster, is still written.
func (f *Forwarder) syncLoop(ctx context.Context, now, nodeChanged <-chan struct{}) {
	interval := f.opts.SyncInterval
	for {
		polled := f.opts.Clock.Now()
		changed := f.syncOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		interval = nextSyncInterval(interval, changed, f.opts.SyncInterval, f.opts.SyncIdleInterval)
		wait := f.opts.Clock.After(interval)
	waiting:
		for {
			select {
			case <-ctx.Done():
				return
			case <-now:
				interval = f.opts.SyncInterval
				break waiting
			case <-wait:
				break waiting
			case <-nodeChanged:
				if interval == f.opts.SyncInterval {
					continue
				}
				interval = f.opts.SyncInterval
				d := polled.Add(interval).Sub(f.opts.Clock.Now())
				if d <= 0 {
					break waiting
				}
				wait = f.opts.Clock.After(d)
			}
		}
	}
}

// nextSyncInterval is the wait after a poll: base after one that changed
// something, else twice the last wait, at most idle.
func nextSyncInterval(last time.Duration, changed bool, base, idle time.Duration) time.Duration {
	if changed {
		return base
	}
	return min(2*last, idle)
}

// syncOnce polls the API once and applies the answer. It reports whether
// the poll failed or the answer changed anything in the cluster.
func (f *Forwarder) syncOnce(ctx context.Context) bool {
	s, err := f.api.Sync(ctx)
	changed := true
	switch {
	case err != nil && ctx.Err() != nil:
		return true
	case err != nil:
		f.log.Error("poll the API (nodeclaims, event records, ec2nodeclass status)", "error", err)
	default:
		res, err := f.mirror.Sync(ctx, s.NodeClaims)
		if err != nil {
			f.log.Error("sync nodeclaim mirrors", "error", err)
		}
		mirrored := res.Created+res.Updated+res.Deleted > 0 || len(res.NodesDeleted) > 0
		if mirrored {
			f.log.Info("synced nodeclaim mirrors", "created", res.Created, "updated", res.Updated, "deleted", res.Deleted, "nodes-deleted", res.NodesDeleted)
		}
		relayed := f.relayEvents(ctx, s.Events)
		changed = err != nil || mirrored || relayed > 0
	}
	if f.writeStatus(ctx, s.NodeClasses, err == nil) {
		changed = true
	}
	return changed
}

// poke signals c without blocking: a signal already pending stands for
// this one.
func poke(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// writeStatus writes EC2NodeClass status from classes when known, and
// NodePool status, through Options.Status. It reports whether it wrote
// any, or failed to.
func (f *Forwarder) writeStatus(ctx context.Context, classes []v1.NodeClassStatus, known bool) bool {
	if f.opts.Status == nil {
		return false
	}
	var res status.SyncResult
	var err error
	if known {
		res, err = f.opts.Status.Sync(ctx, classes)
	} else {
		res, err = f.opts.Status.SyncPools(ctx)
	}
	switch {
	case err != nil && ctx.Err() == nil:
		f.log.Warn("status not written", "error", err)
	case res.NodePools+res.NodeClasses > 0:
		f.log.Info("status written", "nodepools", res.NodePools, "ec2nodeclasses", res.NodeClasses)
	}
	return err != nil || res.NodePools+res.NodeClasses > 0
}

// relayEvents writes the new event records of list and returns how many
// Events it created, or 1 when writing failed (so the poll counts as a
// change and the next comes soon).
func (f *Forwarder) relayEvents(ctx context.Context, list v1.EventList) int {
	if list.Omitted > 0 {
		f.log.Warn("the API left out older event records", "listed", len(list.Items), "omitted", list.Omitted)
	}
	if reason, since := f.karpenterActive(ctx); reason != "" {
		recs, err := karpenterRecords(f.src.NodePools, reason, since)
		if err != nil {
			f.log.Error("list nodepools for the KarpenterActive events", "error", err)
		}
		list.Items = append(list.Items, recs...)
	}
	n, err := f.relay.Relay(ctx, list.Items)
	if err != nil && ctx.Err() == nil {
		f.log.Error("write events of event records", "error", err)
	}
	if n > 0 {
		f.log.Info("wrote events of event records", "created", n)
	}
	f.setConditions(ctx, list.Items)
	if err != nil {
		return max(n, 1)
	}
	return n
}

// setConditions sets the condition a record carries (the Adopted False of
// a refused adoption) on the Karpenter NodeClaim it names, when the cache
// holds that NodeClaim and it is not nodewright's (a mirror, or taken over
// after adoption). Every poll looks again, so a failed write, or a
// condition someone removed, is set by the next; an unchanged one is not
// written.
func (f *Forwarder) setConditions(ctx context.Context, records []v1.EventRecord) {
	if f.src.NodeClaims == nil {
		return
	}
	var objs map[string]*unstructured.Unstructured
	for _, rec := range records {
		if rec.Condition == nil || rec.NodeClaim == "" {
			continue
		}
		if objs == nil {
			list, err := unstructuredList(f.src.NodeClaims)
			if err != nil {
				f.log.Error("list nodeclaims for the conditions of event records", "error", err)
				return
			}
			objs = make(map[string]*unstructured.Unstructured, len(list))
			for _, u := range list {
				objs[u.GetName()] = u
			}
		}
		u, ok := objs[rec.NodeClaim]
		if !ok || !foreign(u) || adopted(u) {
			continue
		}
		wrote, err := f.mirror.SetCondition(ctx, u, *rec.Condition)
		switch {
		case err != nil && ctx.Err() == nil:
			f.log.Error("set the condition of an event record", "nodeclaim", rec.NodeClaim, "type", rec.Condition.Type, "error", err)
		case wrote:
			f.log.Info("set nodeclaim condition", "nodeclaim", rec.NodeClaim, "type", rec.Condition.Type,
				"status", rec.Condition.Status, "reason", rec.Condition.Reason)
		}
	}
}

func unstructuredList(l ObjectLister) ([]*unstructured.Unstructured, error) {
	objs, err := l.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out, nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// changeSignal records when changes that show in the snapshot happened
// since the last build, and wakes the snapshot loop. note is safe for
// concurrent use by informer handlers.
type changeSignal struct {
	clock batcher.Clock
	kick  chan struct{}

	mu          sync.Mutex
	first, last time.Time
}

func newChangeSignal(clock batcher.Clock) *changeSignal {
	return &changeSignal{clock: clock, kick: make(chan struct{}, 1)}
}

// note records a change now.
func (c *changeSignal) note() {
	now := c.clock.Now()
	c.mu.Lock()
	if c.first.IsZero() {
		c.first = now
	}
	c.last = now
	c.mu.Unlock()
	poke(c.kick)
}

// pending returns the first and last change since the last take, and
// whether there was one.
func (c *changeSignal) pending() (first, last time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first, c.last, !c.first.IsZero()
}

// take forgets the changes noted so far: the build about to start sees
// them.
func (c *changeSignal) take() {
	c.mu.Lock()
	c.first, c.last = time.Time{}, time.Time{}
	c.mu.Unlock()
}

// snapshotChange calls fn on an add or delete whose object shows in the
// snapshot, and on an update that changes what the snapshot shows of the
// object; summary returns that (nil when the object is left out).
func snapshotChange(summary func(obj any) any, fn func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if summary(obj) != nil {
				fn()
			}
		},
		UpdateFunc: func(old, obj any) {
			if !equality.Semantic.DeepEqual(summary(old), summary(obj)) {
				fn()
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			// A deleted object whose last state is unknown may have shown.
			if obj == nil || summary(obj) != nil {
				fn()
			}
		},
	}
}

// nodeSummary is what the snapshot shows of a Node (report.Snapshot keeps
// every Node).
func nodeSummary(obj any) any {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	return v1.SummarizeNode(n)
}

// podSummary is what the snapshot shows of a pod: bound and not terminal
// pods only, as report.Snapshot keeps them.
func podSummary(obj any) any {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil
	}
	return v1.SummarizePod(p)
}

// pdbSummary is what the snapshot shows of a PodDisruptionBudget.
func pdbSummary(obj any) any {
	p, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return nil
	}
	return report.SummarizePDB(p)
}

// daemonSetSummary is what the snapshot shows of a DaemonSet.
func daemonSetSummary(obj any) any {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return nil
	}
	return report.SummarizeDaemonSet(ds)
}

// csiNodeSummary is what the snapshot shows of a CSINode.
func csiNodeSummary(obj any) any {
	n, ok := obj.(*storagev1.CSINode)
	if !ok {
		return nil
	}
	return v1.SummarizeCSINode(n)
}

// anyChange calls fn on every add, update and delete.
func anyChange(fn func(obj any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    fn,
		UpdateFunc: func(_, obj any) { fn(obj) },
		DeleteFunc: fn,
	}
}

func objectName(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key
	}
	if o, ok := obj.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}

// handlerSet remembers registered handlers so they are removed when the
// loop ends (the informers outlive leadership).
type handlerSet struct {
	mu   sync.Mutex
	regs []registration
}

type registration struct {
	inf Informer
	reg cache.ResourceEventHandlerRegistration
}

func (s *handlerSet) add(inf Informer, h cache.ResourceEventHandler) error {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return fmt.Errorf("add event handler: %w", err)
	}
	s.mu.Lock()
	s.regs = append(s.regs, registration{inf, reg})
	s.mu.Unlock()
	return nil
}

func (s *handlerSet) remove(log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.regs {
		if err := r.inf.RemoveEventHandler(r.reg); err != nil {
			log.Error("remove event handler", "error", err)
		}
	}
	s.regs = nil
}
