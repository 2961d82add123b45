package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/forwarder/internal/forward"
	"github.com/nodewright/nodewright/forwarder/internal/metrics"
	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	"github.com/nodewright/nodewright/internal/intake"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// The decorators fit the loop's ports.
var (
	_ forward.API     = (*metrics.API)(nil)
	_ forward.Emitter = (*metrics.Emitter)(nil)
	_ forward.Mirror  = (*metrics.Mirror)(nil)
)

func TestOutcome(t *testing.T) {
	tests := []struct {
		name string
		give error
		want string
	}{
		{name: "success", give: nil, want: "ok"},
		{name: "400", give: fmt.Errorf("post: %w", &intake.StatusError{StatusCode: 400}), want: "client_error"},
		{name: "503 after retries", give: fmt.Errorf("post after 6 attempts: %w", &intake.StatusError{StatusCode: 503}), want: "server_error"},
		{name: "oversized body", give: fmt.Errorf("post: %w", v1.ErrMessageTooLarge), want: "too_large"},
		{name: "shutdown", give: fmt.Errorf("post: %w", context.Canceled), want: "canceled"},
		{name: "connection refused", give: errors.New("dial tcp: connection refused"), want: "network_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := metrics.Outcome(tt.give); got != tt.want {
				t.Errorf("Outcome() = %q, want %q", got, tt.want)
			}
		})
	}
}

// api fails config posts with a 503 and accepts the rest.
type api struct{}

func (api) PostPodBatch(context.Context, *v1.PodBatch) (v1.PodBatchResult, error) {
	return v1.PodBatchResult{State: v1.BatchQueued}, nil
}
func (api) PodBatchResult(context.Context, string) (v1.PodBatchResult, error) {
	return v1.PodBatchResult{}, nil
}
func (api) PostConfig(context.Context, *v1.ClusterConfig) (v1.Receipt, error) {
	return v1.Receipt{}, &intake.StatusError{StatusCode: 503}
}
func (api) PostRegistrations(context.Context, *v1.NodeRegistrations) (v1.Receipt, error) {
	return v1.Receipt{}, nil
}
func (api) PostSnapshot(context.Context, *v1.ClusterSnapshot) (v1.Receipt, error) {
	return v1.Receipt{}, nil
}
func (api) Sync(context.Context) (v1.Sync, error) { return v1.Sync{}, nil }

type emitter struct{}

func (emitter) Emit(context.Context, v1.PodBatchResult, map[types.UID]v1.PodSummary) (int, error) {
	return 3, nil
}

type relayer struct{}

func (relayer) Relay(context.Context, []v1.EventRecord) (int, error) { return 2, nil }

type mirrorer struct{}

func (mirrorer) Sync(context.Context, []v1.NodeClaim) (mirror.Result, error) {
	return mirror.Result{Created: 2, Deleted: 1}, nil
}

func (mirrorer) SetCondition(context.Context, *unstructured.Unstructured, metav1.Condition) (bool, error) {
	return false, nil
}

func TestDecorators(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	tick := time.Unix(0, 0)
	m, err := metrics.New(reg, func() time.Time { tick = tick.Add(250 * time.Millisecond); return tick })
	if err != nil {
		t.Fatal(err)
	}
	a := m.API(api{})
	ctx := t.Context()
	for range 2 {
		if _, err := a.PostPodBatch(ctx, &v1.PodBatch{Pods: make([]v1.PodSummary, 7)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.PostConfig(ctx, &v1.ClusterConfig{}); err == nil {
		t.Fatal("PostConfig() through the decorator lost the error")
	}
	m.OnRetry(v1.RouteConfig, 503, errors.New("busy"))
	if _, err := m.Emitter(emitter{}).Emit(ctx, v1.PodBatchResult{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Mirror(mirrorer{}).Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Relay(relayer{}).Relay(ctx, nil); err != nil {
		t.Fatal(err)
	}
	m.SetLeader(true)

	want := `
# HELP nodewright_forwarder_requests_total Requests to the intake API by route and outcome (ok, client_error, server_error, network_error, too_large, canceled), counting each call once however many attempts it took.
# TYPE nodewright_forwarder_requests_total counter
nodewright_forwarder_requests_total{outcome="ok",route="/v1/podbatches"} 2
nodewright_forwarder_requests_total{outcome="ok",route="/v1/sync"} 1
nodewright_forwarder_requests_total{outcome="server_error",route="/v1/config"} 1
# HELP nodewright_forwarder_request_retries_total Failed attempts that were retried, by route and HTTP status (0 for a network error).
# TYPE nodewright_forwarder_request_retries_total counter
nodewright_forwarder_request_retries_total{route="/v1/config",status="503"} 1
# HELP nodewright_forwarder_pod_events_total Kubernetes Events written on pods from batch answers.
# TYPE nodewright_forwarder_pod_events_total counter
nodewright_forwarder_pod_events_total 3
# HELP nodewright_forwarder_record_events_total Kubernetes Events written on Nodes and NodeClaims from the API's event records.
# TYPE nodewright_forwarder_record_events_total counter
nodewright_forwarder_record_events_total 2
# HELP nodewright_forwarder_nodeclaim_mirror_writes_total NodeClaim mirrors created, updated and deleted.
# TYPE nodewright_forwarder_nodeclaim_mirror_writes_total counter
nodewright_forwarder_nodeclaim_mirror_writes_total{op="create"} 2
nodewright_forwarder_nodeclaim_mirror_writes_total{op="delete"} 1
nodewright_forwarder_nodeclaim_mirror_writes_total{op="update"} 0
# HELP nodewright_forwarder_leader 1 while this replica holds the leader lease and posts, else 0.
# TYPE nodewright_forwarder_leader gauge
nodewright_forwarder_leader 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"nodewright_forwarder_requests_total", "nodewright_forwarder_request_retries_total",
		"nodewright_forwarder_pod_events_total", "nodewright_forwarder_record_events_total", "nodewright_forwarder_nodeclaim_mirror_writes_total",
		"nodewright_forwarder_leader"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "nodewright_forwarder_batch_pods"); n != 1 {
		t.Errorf("batch_pods series = %d, want 1", n)
	}
	if n := testutil.CollectAndCount(reg, "nodewright_forwarder_request_duration_seconds"); n != 3 {
		t.Errorf("request_duration_seconds series = %d, want 3 (three routes)", n)
	}
}

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, time.Now); err != nil {
		t.Fatal(err)
	}
	var synced atomic.Bool
	srv := httptest.NewServer(metrics.Handler(reg, func() error {
		if !synced.Load() {
			return errors.New("informer caches not synced")
		}
		return nil
	}))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not synced") {
		t.Errorf("/readyz before sync = %d %q, want 503 naming the cause", code, body)
	}
	synced.Store(true)
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after sync = %d, want 200", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "nodewright_forwarder_leader 0") {
		t.Errorf("/metrics = %d, body lacks the leader gauge", code)
	}
}
