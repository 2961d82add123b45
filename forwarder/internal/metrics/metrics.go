// Package metrics measures the forwarder with Prometheus: decorators around
// the intake API, the event emitter, the event record relay and the
// NodeClaim mirror count what they do (nodewright_forwarder_*), Karpenter
// serves Karpenter's karpenter_* metrics from stored and cluster state, and
// Handler serves /metrics, /healthz and /readyz.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	"github.com/nodewright/nodewright/internal/intake"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Metrics holds the forwarder's collectors.
type Metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	batchPods    prometheus.Histogram
	events       prometheus.Counter
	records      prometheus.Counter
	mirrorWrites *prometheus.CounterVec
	leader       prometheus.Gauge
	now          func() time.Time
}

// New creates the collectors and registers them with reg. now times
// requests (time.Now in main).
func New(reg prometheus.Registerer, now func() time.Time) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodewright_forwarder_requests_total",
			Help: "Requests to the intake API by route and outcome (ok, client_error, server_error, network_error, too_large, canceled), counting each call once however many attempts it took.",
		}, []string{"route", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nodewright_forwarder_request_duration_seconds",
			Help:    "Time from the first attempt of a request to the intake API to its outcome, retries included.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodewright_forwarder_request_retries_total",
			Help: "Failed attempts that were retried, by route and HTTP status (0 for a network error).",
		}, []string{"route", "status"}),
		batchPods: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nodewright_forwarder_batch_pods",
			Help:    "Pods per pod batch posted.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8), // 1 .. 16384
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodewright_forwarder_pod_events_total",
			Help: "Kubernetes Events written on pods from batch answers.",
		}),
		records: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodewright_forwarder_record_events_total",
			Help: "Kubernetes Events written on Nodes and NodeClaims from the API's event records.",
		}),
		mirrorWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodewright_forwarder_nodeclaim_mirror_writes_total",
			Help: "NodeClaim mirrors created, updated and deleted.",
		}, []string{"op"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodewright_forwarder_leader",
			Help: "1 while this replica holds the leader lease and posts, else 0.",
		}),
		now: now,
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.retries, m.batchPods, m.events, m.records, m.mirrorWrites, m.leader} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetLeader records whether this replica leads.
func (m *Metrics) SetLeader(leading bool) {
	if leading {
		m.leader.Set(1)
		return
	}
	m.leader.Set(0)
}

// OnRetry counts a retried attempt; pass it as intake.Options.OnRetry.
func (m *Metrics) OnRetry(route string, status int, _ error) {
	m.retries.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

// Outcome classifies the result of an intake call for the requests metric.
func Outcome(err error) string {
	var se *intake.StatusError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, v1.ErrMessageTooLarge):
		return "too_large"
	case errors.As(err, &se) && se.StatusCode >= 500:
		return "server_error"
	case errors.As(err, &se):
		return "client_error"
	}
	return "network_error"
}

// intakeAPI is the intake API being measured (forward.API's method set).
type intakeAPI interface {
	PostPodBatch(ctx context.Context, b *v1.PodBatch) (v1.PodBatchResult, error)
	PodBatchResult(ctx context.Context, id string) (v1.PodBatchResult, error)
	PostConfig(ctx context.Context, cfg *v1.ClusterConfig) (v1.Receipt, error)
	PostRegistrations(ctx context.Context, r *v1.NodeRegistrations) (v1.Receipt, error)
	PostSnapshot(ctx context.Context, s *v1.ClusterSnapshot) (v1.Receipt, error)
	Sync(ctx context.Context) (v1.Sync, error)
}

// API measures every call to next.
type API struct {
	next intakeAPI
	m    *Metrics
}

// API wraps next.
func (m *Metrics) API(next intakeAPI) *API { return &API{next: next, m: m} }

func (a *API) observe(route string, start time.Time, err error) {
	a.m.requests.WithLabelValues(route, Outcome(err)).Inc()
	a.m.duration.WithLabelValues(route).Observe(a.m.now().Sub(start).Seconds())
}

// PostPodBatch posts b through next and records the call and the batch size.
func (a *API) PostPodBatch(ctx context.Context, b *v1.PodBatch) (v1.PodBatchResult, error) {
	start := a.m.now()
	r, err := a.next.PostPodBatch(ctx, b)
	a.observe(v1.RoutePodBatches, start, err)
	if err == nil {
		a.m.batchPods.Observe(float64(len(b.Pods)))
	}
	return r, err
}

// PodBatchResult asks next and records the call.
func (a *API) PodBatchResult(ctx context.Context, id string) (v1.PodBatchResult, error) {
	start := a.m.now()
	r, err := a.next.PodBatchResult(ctx, id)
	a.observe(v1.RoutePodBatches+"/{id}", start, err)
	return r, err
}

// PostConfig posts through next and records the call.
func (a *API) PostConfig(ctx context.Context, cfg *v1.ClusterConfig) (v1.Receipt, error) {
	start := a.m.now()
	r, err := a.next.PostConfig(ctx, cfg)
	a.observe(v1.RouteConfig, start, err)
	return r, err
}

// PostRegistrations posts through next and records the call.
func (a *API) PostRegistrations(ctx context.Context, reg *v1.NodeRegistrations) (v1.Receipt, error) {
	start := a.m.now()
	r, err := a.next.PostRegistrations(ctx, reg)
	a.observe(v1.RouteRegistrations, start, err)
	return r, err
}

// PostSnapshot posts through next and records the call.
func (a *API) PostSnapshot(ctx context.Context, s *v1.ClusterSnapshot) (v1.Receipt, error) {
	start := a.m.now()
	r, err := a.next.PostSnapshot(ctx, s)
	a.observe(v1.RouteSnapshots, start, err)
	return r, err
}

// Sync asks next and records the call (one GET v1.RouteSync, with the
// requests of any part it deferred).
func (a *API) Sync(ctx context.Context) (v1.Sync, error) {
	start := a.m.now()
	r, err := a.next.Sync(ctx)
	a.observe(v1.RouteSync, start, err)
	return r, err
}

type emitter interface {
	Emit(ctx context.Context, result v1.PodBatchResult, pods map[types.UID]v1.PodSummary) (int, error)
}

// Emitter counts the events next writes.
type Emitter struct {
	next emitter
	m    *Metrics
}

// Emitter wraps next.
func (m *Metrics) Emitter(next emitter) *Emitter { return &Emitter{next: next, m: m} }

// Emit writes through next and counts the events written.
func (e *Emitter) Emit(ctx context.Context, result v1.PodBatchResult, pods map[types.UID]v1.PodSummary) (int, error) {
	n, err := e.next.Emit(ctx, result, pods)
	e.m.events.Add(float64(n))
	return n, err
}

type relayer interface {
	Relay(ctx context.Context, records []v1.EventRecord) (int, error)
}

// Relay counts the events next writes from event records.
type Relay struct {
	next relayer
	m    *Metrics
}

// Relay wraps next.
func (m *Metrics) Relay(next relayer) *Relay { return &Relay{next: next, m: m} }

// Relay writes through next and counts the events written.
func (r *Relay) Relay(ctx context.Context, records []v1.EventRecord) (int, error) {
	n, err := r.next.Relay(ctx, records)
	r.m.records.Add(float64(n))
	return n, err
}

type mirrorer interface {
	Sync(ctx context.Context, claims []v1.NodeClaim) (mirror.Result, error)
	SetCondition(ctx context.Context, cur *unstructured.Unstructured, c metav1.Condition) (bool, error)
}

// Mirror counts the mirror writes next makes.
type Mirror struct {
	next mirrorer
	m    *Metrics
}

// Mirror wraps next.
func (m *Metrics) Mirror(next mirrorer) *Mirror { return &Mirror{next: next, m: m} }

// Sync syncs through next and counts its writes.
func (mr *Mirror) Sync(ctx context.Context, claims []v1.NodeClaim) (mirror.Result, error) {
	r, err := mr.next.Sync(ctx, claims)
	mr.m.mirrorWrites.WithLabelValues("create").Add(float64(r.Created))
	mr.m.mirrorWrites.WithLabelValues("update").Add(float64(r.Updated))
	mr.m.mirrorWrites.WithLabelValues("delete").Add(float64(r.Deleted))
	return r, err
}

// SetCondition sets through next and counts a write as an update.
func (mr *Mirror) SetCondition(ctx context.Context, cur *unstructured.Unstructured, c metav1.Condition) (bool, error) {
	wrote, err := mr.next.SetCondition(ctx, cur, c)
	if wrote {
		mr.m.mirrorWrites.WithLabelValues("update").Inc()
	}
	return wrote, err
}

// Handler serves /metrics from g, /healthz (200 while the process serves)
// and /readyz (200 once ready returns nil, else 503 with its error).
func Handler(g prometheus.Gatherer, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
