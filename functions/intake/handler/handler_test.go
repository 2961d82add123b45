package handler_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/functions/intake/handler"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/queue"
)

var (
	pbResult = metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatchResult}
	receiptT = metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindReceipt}
)

func TestLoadConfig(t *testing.T) {
	env := map[string]string{"CLUSTER_NAME": "prod", "TABLE_NAME": "nw", "QUEUE_URL": "https://sqs/q.fifo", "IDEMPOTENCY_TTL": "2h"}
	got, err := handler.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig() error = %v", err)
	}
	want := handler.Config{Cluster: "prod", Table: "nw", QueueURL: "https://sqs/q.fifo", IdempotencyTTL: 2 * time.Hour, ApplyLease: 30 * time.Second, PayloadTTL: 96 * time.Hour}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig() mismatch (-want +got):\n%s", diff)
	}
	if _, err := handler.LoadConfig(func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "CLUSTER_NAME: required") || !strings.Contains(err.Error(), "QUEUE_URL: required") {
		t.Errorf("LoadConfig(empty) error = %v, want every missing setting named", err)
	}
}

func TestPostPodBatch(t *testing.T) {
	tests := []struct {
		name string
		req  events.APIGatewayProxyRequest
	}{
		{name: "should enqueue a new batch on the cluster's message group and answer Queued", req: post(v1.RoutePodBatches, "b1", okBatch("b1"))},
		{name: "should match the idempotency header case-insensitively", req: func() events.APIGatewayProxyRequest {
			r := post(v1.RoutePodBatches, "", okBatch("b1"))
			r.Headers["idempotency-key"] = "b1"
			return r
		}()},
		{name: "should accept a base64-encoded body", req: func() events.APIGatewayProxyRequest {
			r := post(v1.RoutePodBatches, "b1", base64.StdEncoding.EncodeToString([]byte(okBatch("b1"))))
			r.IsBase64Encoded = true
			return r
		}()},
		{name: "should accept a trailing slash", req: post(v1.RoutePodBatches+"/", "b1", okBatch("b1"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			var got v1.PodBatchResult
			e.do(t, tt.req, http.StatusAccepted, &got)
			if diff := cmp.Diff(v1.PodBatchResult{TypeMeta: pbResult, BatchID: "b1", State: v1.BatchQueued}, got); diff != "" {
				t.Errorf("answer mismatch (-want +got):\n%s", diff)
			}
			want := []queue.Message{{GroupID: cluster, Kind: v1.KindPodBatch, Body: []byte(okBatch("b1"))}}
			if diff := cmp.Diff(want, e.received(t)); diff != "" {
				t.Errorf("queue mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPostPodBatchDuplicates(t *testing.T) {
	t.Run("should answer a repeated batch as the first and enqueue it once", func(t *testing.T) {
		e := newEnv(t)
		e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, nil)
		var got v1.PodBatchResult
		e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, &got)
		if diff := cmp.Diff(v1.PodBatchResult{TypeMeta: pbResult, BatchID: "b1", State: v1.BatchQueued, Duplicate: true}, got); diff != "" {
			t.Errorf("answer mismatch (-want +got):\n%s", diff)
		}
		if n := len(e.received(t)); n != 1 {
			t.Errorf("queued %d messages, want 1", n)
		}
	})
	t.Run("should answer a repeat of a solved batch with its stored result", func(t *testing.T) {
		e := newEnv(t)
		e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, nil)
		solved := v1.PodBatchResult{TypeMeta: pbResult, BatchID: "b1", State: v1.BatchSolved, Unschedulable: map[types.UID]string{"uid-web-0": "no nodepool"}}
		if err := e.store.PutBatchResult(context.Background(), solved, t0); err != nil {
			t.Fatal(err)
		}
		var got v1.PodBatchResult
		e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, &got)
		solved.Duplicate = true
		if diff := cmp.Diff(solved, got); diff != "" {
			t.Errorf("answer mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should release the claim when enqueueing fails, so the retry is enqueued", func(t *testing.T) {
		e := newEnv(t)
		e.sender.Fail = 1
		var failed v1.ErrorResponse
		e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusInternalServerError, &failed)
		if !strings.Contains(failed.Message, "connection reset") {
			t.Errorf("error message = %q, want the cause", failed.Message)
		}
		if n := e.items(t); n != 0 {
			t.Errorf("table holds %d items after the failure, want 0", n)
		}
		var got v1.PodBatchResult
		e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, &got)
		if got.Duplicate {
			t.Error("retry answered as a duplicate, want a first acceptance")
		}
		if n := len(e.received(t)); n != 1 {
			t.Errorf("queued %d messages, want 1", n)
		}
	})
	t.Run("should store a message too large for the queue and enqueue its reference", func(t *testing.T) {
		e := newEnv(t)
		e.sender.TooLarge = true
		e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, nil)
		want := []queue.Message{{GroupID: cluster, Kind: v1.KindPodBatch, PayloadRef: "PodBatch-b1"}}
		if diff := cmp.Diff(want, e.received(t)); diff != "" {
			t.Errorf("queue mismatch (-want +got):\n%s", diff)
		}
		payload, err := e.store.GetPayload(context.Background(), "PodBatch-b1", t0)
		if err != nil {
			t.Fatalf("GetPayload() error = %v", err)
		}
		if string(payload) != okBatch("b1") {
			t.Errorf("stored payload = %s, want the request body", payload)
		}
	})
}

// TestPostAcknowledgesOnlyWhatWasApplied injects the interleavings of issue
// 13 item 3: a retry that arrives while the first request is still applying,
// and a retry after an invocation that died mid-apply without releasing its
// claim. Neither retry may be answered as a duplicate before the apply is
// recorded: each is told to retry (409, Retry-After) and is applied once.
func TestPostAcknowledgesOnlyWhatWasApplied(t *testing.T) {
	routes := []struct {
		route, id, body, kind string
	}{
		{v1.RoutePodBatches, "b1", okBatch("b1"), v1.KindPodBatch},
		{v1.RouteRegistrations, "r1", registrations("r1"), v1.KindNodeRegistrations},
	}
	for _, r := range routes {
		t.Run("should tell a retry of a "+r.kind+" still being applied to retry, then answer it as a duplicate", func(t *testing.T) {
			e := newEnv(t)
			e.sender.Block, e.sender.Sending = make(chan struct{}), make(chan struct{})
			first := make(chan events.APIGatewayProxyResponse)
			go func() {
				resp, _ := e.h.Handle(context.Background(), post(r.route, r.id, r.body))
				first <- resp
			}()
			<-e.sender.Sending
			var busy v1.ErrorResponse
			resp := e.do(t, post(r.route, r.id, r.body), http.StatusConflict, &busy)
			if resp.Headers["Retry-After"] != "30" || !strings.Contains(busy.Message, "being applied") {
				t.Errorf("in-flight repeat answered Retry-After %q, %q; want 30 s and the reason", resp.Headers["Retry-After"], busy.Message)
			}
			close(e.sender.Block)
			if resp := <-first; resp.StatusCode != http.StatusAccepted || strings.Contains(resp.Body, `"duplicate":true`) {
				t.Errorf("first request answered %d %s, want 202 and not a duplicate", resp.StatusCode, resp.Body)
			}
			resp = e.do(t, post(r.route, r.id, r.body), http.StatusAccepted, nil)
			if !strings.Contains(resp.Body, `"duplicate":true`) {
				t.Errorf("repeat after the apply answered %s, want a duplicate", resp.Body)
			}
			if n := len(e.received(t)); n != 1 {
				t.Errorf("queued %d messages, want 1", n)
			}
		})
		t.Run("should make retries of a "+r.kind+" whose apply died unreleased wait for the claim to lapse, then apply it", func(t *testing.T) {
			e := newEnv(t)
			e.sender.Fail, e.faults.FailDeletes = 1, 1 // the apply fails, and so does the release
			e.do(t, post(r.route, r.id, r.body), http.StatusInternalServerError, nil)
			e.clock.Advance(10 * time.Second)
			resp := e.do(t, post(r.route, r.id, r.body), http.StatusConflict, nil)
			if resp.Headers["Retry-After"] != "20" {
				t.Errorf("Retry-After = %q, want the 20 s left of the dead request's claim", resp.Headers["Retry-After"])
			}
			if n := len(e.received(t)); n != 0 {
				t.Fatalf("queued %d messages before the retry applied, want 0", n)
			}
			e.clock.Advance(20 * time.Second)
			resp = e.do(t, post(r.route, r.id, r.body), http.StatusAccepted, nil)
			if strings.Contains(resp.Body, `"duplicate":true`) {
				t.Errorf("retry after the claim lapsed answered %s, want a first acceptance", resp.Body)
			}
			if n := len(e.received(t)); n != 1 {
				t.Errorf("queued %d messages, want 1", n)
			}
		})
	}
}

// TestRejections covers issue 4's malformed batches and the contract's
// other 4xx answers: each gets its status and field paths, and nothing is
// stored or enqueued.
func TestRejections(t *testing.T) {
	tenMB := `{"apiVersion":"nodewright.dev/v1","kind":"PodBatch","padding":"` + strings.Repeat("x", 10<<20) + `"}`
	tests := []struct {
		name       string
		req        events.APIGatewayProxyRequest
		wantStatus int
		wantPaths  []string
	}{
		{name: "should reject truncated JSON", req: post(v1.RoutePodBatches, "b1", okBatch("b1")[:90]), wantStatus: 400, wantPaths: []string{"(body)"}},
		{name: "should reject pods of the wrong type", req: post(v1.RoutePodBatches, "b1", podBatch("b1", cluster, `"web-0"`)), wantStatus: 400, wantPaths: []string{"pods"}},
		{name: "should reject a uid of the wrong type", req: post(v1.RoutePodBatches, "b1", podBatch("b1", cluster, `[{"name":"a","namespace":"n","uid":5}]`)), wantStatus: 400, wantPaths: []string{"pods[0].uid"}},
		{name: "should reject a 10 MB body before decoding it", req: post(v1.RoutePodBatches, "b1", tenMB), wantStatus: 413},
		{name: "should reject a 10 MB base64 body before decoding it", req: func() events.APIGatewayProxyRequest {
			r := post(v1.RoutePodBatches, "b1", base64.StdEncoding.EncodeToString([]byte(tenMB)))
			r.IsBase64Encoded = true
			return r
		}(), wantStatus: 413},
		{name: "should reject an unknown kind", req: post(v1.RoutePodBatches, "b1", strings.Replace(okBatch("b1"), `"kind":"PodBatch"`, `"kind":"PodBunch"`, 1)), wantStatus: 400, wantPaths: []string{"kind"}},
		{name: "should reject a kind that is not the route's", req: post(v1.RouteRegistrations, "b1", okBatch("b1")), wantStatus: 400, wantPaths: []string{"kind"}},
		{name: "should reject another apiVersion", req: post(v1.RoutePodBatches, "b1", strings.Replace(okBatch("b1"), "nodewright.dev/v1", "nodewright.dev/v2", 1)), wantStatus: 400, wantPaths: []string{"apiVersion"}},
		{name: "should reject pods without a UID", req: post(v1.RoutePodBatches, "b1", podBatch("b1", cluster, "["+pod("web-0", "")+"]")), wantStatus: 400, wantPaths: []string{"pods[0].uid"}},
		{name: "should reject a batch without pods", req: post(v1.RoutePodBatches, "b1", podBatch("b1", cluster, "[]")), wantStatus: 400, wantPaths: []string{"pods"}},
		{name: "should reject another cluster's batch", req: post(v1.RoutePodBatches, "b1", podBatch("b1", "other", "["+pod("web-0", "u")+"]")), wantStatus: 400, wantPaths: []string{"cluster"}},
		{name: "should reject a missing idempotency header", req: post(v1.RoutePodBatches, "", okBatch("b1")), wantStatus: 400, wantPaths: []string{"header Idempotency-Key"}},
		{name: "should reject an idempotency header that differs from the id", req: post(v1.RoutePodBatches, "b2", okBatch("b1")), wantStatus: 400, wantPaths: []string{"header Idempotency-Key"}},
		{name: "should reject invalid base64", req: func() events.APIGatewayProxyRequest {
			r := post(v1.RoutePodBatches, "b1", "%%%")
			r.IsBase64Encoded = true
			return r
		}(), wantStatus: 400, wantPaths: []string{"(body)"}},
		{name: "should reject a malformed config", req: post(v1.RouteConfig, "c1", config("c1")[:40]), wantStatus: 400, wantPaths: []string{"(body)"}},
		{name: "should reject registrations of a node without providerID", req: post(v1.RouteRegistrations, "r1", strings.Replace(registrations("r1"), `"providerID":"aws:///us-east-1a/i-0123",`, "", 1)), wantStatus: 400, wantPaths: []string{"nodes[0].providerID"}},
		{name: "should reject a snapshot part beyond its parts", req: post(v1.RouteSnapshots, "s1", snapshot("s1", "snap", 2, 2)), wantStatus: 400, wantPaths: []string{"part"}},
		{name: "should answer 404 for an unknown route", req: post("/v1/podbatch", "b1", okBatch("b1")), wantStatus: 404},
		{name: "should answer 405 for a method the route does not serve", req: get(v1.RoutePodBatches), wantStatus: 405},
		{name: "should answer 405 for a POST of events", req: post(v1.RouteEvents, "e1", `{}`), wantStatus: 405},
		{name: "should answer 405 for a POST of node classes", req: post(v1.RouteNodeClasses, "n1", `{}`), wantStatus: 405},
		{name: "should answer 404 for a batch never posted", req: get(v1.RoutePodBatches + "/b9"), wantStatus: 404},
		{name: "should reject a batch id that cannot be one", req: get(v1.RoutePodBatches + "/a.b"), wantStatus: 400, wantPaths: []string{"id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			var got v1.ErrorResponse
			e.do(t, tt.req, tt.wantStatus, &got)
			if got.Message == "" {
				t.Error("ErrorResponse.Message is empty")
			}
			var paths []string
			for _, f := range got.Fields {
				paths = append(paths, f.Path)
			}
			if diff := cmp.Diff(tt.wantPaths, paths, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("field paths mismatch (-want +got):\n%s", diff)
			}
			if n := e.items(t); n != 0 {
				t.Errorf("table holds %d items, want nothing stored", n)
			}
			if msgs := e.received(t); len(msgs) != 0 {
				t.Errorf("queue holds %d messages, want nothing enqueued", len(msgs))
			}
		})
	}
}

func TestGetPodBatch(t *testing.T) {
	e := newEnv(t)
	var got v1.PodBatchResult
	e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, nil)
	e.do(t, get(v1.RoutePodBatches+"/b1"), http.StatusOK, &got)
	if diff := cmp.Diff(v1.PodBatchResult{TypeMeta: pbResult, BatchID: "b1", State: v1.BatchQueued}, got); diff != "" {
		t.Errorf("before solving: mismatch (-want +got):\n%s", diff)
	}
	solved := v1.PodBatchResult{TypeMeta: pbResult, BatchID: "b1", State: v1.BatchSolved, Nominations: map[types.UID]v1.Nomination{"uid-web-0": {NodeClaim: "default-abc"}}}
	if err := e.store.PutBatchResult(context.Background(), solved, t0); err != nil {
		t.Fatal(err)
	}
	got = v1.PodBatchResult{}
	e.do(t, get(v1.RoutePodBatches+"/b1"), http.StatusOK, &got)
	if diff := cmp.Diff(solved, got); diff != "" {
		t.Errorf("after solving: mismatch (-want +got):\n%s", diff)
	}
}

func TestPostConfig(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var got v1.Receipt
	e.do(t, post(v1.RouteConfig, "c1", config("c1", "b", "a")), http.StatusAccepted, &got)
	if diff := cmp.Diff(v1.Receipt{TypeMeta: receiptT, ID: "c1"}, got); diff != "" {
		t.Errorf("receipt mismatch (-want +got):\n%s", diff)
	}
	e.do(t, post(v1.RouteConfig, "c2", config("c2", "a")), http.StatusAccepted, nil)
	e.do(t, post(v1.RouteConfig, "c1", config("c1", "b", "a")), http.StatusAccepted, &got)
	if !got.Duplicate {
		t.Error("repeated config c1: Duplicate = false, want true")
	}
	snap, err := e.store.GetConfig(ctx)
	if err != nil {
		t.Fatalf("GetConfig() error = %v", err)
	}
	var names []string
	for _, np := range snap.NodePools {
		names = append(names, np.Name)
	}
	// c2 replaced c1 whole; the repeat of c1 changed nothing.
	if diff := cmp.Diff([]string{"a"}, names); diff != "" || snap.Version != 2 {
		t.Errorf("stored config = version %d, pools %v; want version 2, pools [a]", snap.Version, names)
	}
	if msgs := e.received(t); len(msgs) != 0 {
		t.Errorf("config enqueued %d messages, want none", len(msgs))
	}
}

// TestPostConfigKeepsTheNewest: a config read before a NodePool was deleted
// but arriving after the config without it (a slow retry) is acknowledged
// and discarded, so the deleted NodePool never comes back.
func TestPostConfigKeepsTheNewest(t *testing.T) {
	e := newEnv(t)
	older := strings.Replace(config("c1", "a", "gone"), createdAt, `"createdAt":"2030-01-02T03:04:00Z","generation":1`, 1)
	newer := strings.Replace(config("c2", "a"), createdAt, `"createdAt":"2030-01-02T03:04:01Z","generation":2`, 1)
	e.do(t, post(v1.RouteConfig, "c2", newer), http.StatusAccepted, nil)
	var got v1.Receipt
	e.do(t, post(v1.RouteConfig, "c1", older), http.StatusAccepted, &got)
	if got.Duplicate {
		t.Error("older config answered as a duplicate, want a first acceptance (it was judged, and kept out)")
	}
	snap, err := e.store.GetConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, np := range snap.NodePools {
		names = append(names, np.Name)
	}
	if diff := cmp.Diff([]string{"a"}, names); diff != "" {
		t.Errorf("stored NodePools mismatch, the deleted one came back (-want +got):\n%s", diff)
	}
}

// TestTouchesOnlyTheKeysItsRoleAllows runs every route, failure paths
// included, and checks each DynamoDB call against the partition keys
// ddbstore.Schema grants the intake (which the CDK app turns into the
// intake role's dynamodb:LeadingKeys conditions): IAM and the store cannot
// disagree unnoticed.
func TestTouchesOnlyTheKeysItsRoleAllows(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.store.PutNodeClaim(ctx, v1.NodeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: v1.KindNodeClaim}, ObjectMeta: metav1.ObjectMeta{Name: "default-a"}}); err != nil {
		t.Fatal(err)
	}
	e.calls.Reset()
	e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, nil)
	e.do(t, post(v1.RoutePodBatches, "b1", okBatch("b1")), http.StatusAccepted, nil)
	e.do(t, get(v1.RoutePodBatches+"/b1"), http.StatusOK, nil)
	e.sender.TooLarge = true
	e.do(t, post(v1.RouteRegistrations, "r1", registrations("r1")), http.StatusAccepted, nil)
	e.sender.TooLarge, e.sender.Fail = false, 1
	e.do(t, post(v1.RouteRegistrations, "r2", registrations("r2")), http.StatusInternalServerError, nil)
	e.do(t, post(v1.RouteConfig, "c1", config("c1", "a")), http.StatusAccepted, nil)
	e.do(t, post(v1.RouteSnapshots, "p0", snapshot("p0", "snap", 0, 2)), http.StatusAccepted, nil)
	e.do(t, post(v1.RouteSnapshots, "p1", snapshot("p1", "snap", 1, 2)), http.StatusAccepted, nil)
	e.do(t, get(v1.RouteNodeClaims), http.StatusOK, nil)
	paged := get(v1.RouteNodeClaims)
	paged.QueryStringParameters = map[string]string{v1.QueryLimit: "10"}
	e.do(t, paged, http.StatusOK, nil)
	e.do(t, get(v1.RouteEvents), http.StatusOK, nil)
	e.do(t, get(v1.RouteNodeClasses), http.StatusOK, nil)

	access := ddbstore.Schema().Access["intake"]
	for _, c := range e.calls.Denied(func(c awstest.DynamoDBCall) bool { return access.Allows(cluster, c.Op, c.Index, c.PartitionKey) }) {
		t.Errorf("%s %s %s: not in the intake's access (ddbstore.Schema): its role would be denied", c.Op, c.Index, c.PartitionKey)
	}
	if n := len(e.calls.Calls()); n < 20 {
		t.Errorf("recorded %d calls, want the routes' calls recorded", n)
	}
}

func TestPostRegistrations(t *testing.T) {
	e := newEnv(t)
	var got v1.Receipt
	e.do(t, post(v1.RouteRegistrations, "r1", registrations("r1")), http.StatusAccepted, &got)
	e.do(t, post(v1.RouteRegistrations, "r1", registrations("r1")), http.StatusAccepted, &got)
	if diff := cmp.Diff(v1.Receipt{TypeMeta: receiptT, ID: "r1", Duplicate: true}, got); diff != "" {
		t.Errorf("receipt of the repeat mismatch (-want +got):\n%s", diff)
	}
	want := []queue.Message{{GroupID: cluster, Kind: v1.KindNodeRegistrations, Body: []byte(registrations("r1"))}}
	if diff := cmp.Diff(want, e.received(t)); diff != "" {
		t.Errorf("queue mismatch (-want +got):\n%s", diff)
	}
}

func TestPostSnapshots(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.do(t, post(v1.RouteSnapshots, "p1", snapshot("p1", "snap", 1, 2)), http.StatusAccepted, nil)
	if _, err := e.store.CurrentSnapshot(ctx, t0); err == nil {
		t.Error("CurrentSnapshot() after one of two parts: error = nil, want not found")
	}
	e.do(t, post(v1.RouteSnapshots, "p0", snapshot("p0", "snap", 0, 2)), http.StatusAccepted, nil)
	snap, err := e.store.CurrentSnapshot(ctx, t0)
	if err != nil {
		t.Fatalf("CurrentSnapshot() error = %v", err)
	}
	if snap.ID != "snap" || len(snap.Nodes) != 2 || snap.Nodes[0].Name != "node-0" {
		t.Errorf("CurrentSnapshot() = %s with nodes %v, want snap with node-0 and node-1", snap.ID, snap.Nodes)
	}
}

// TestPostSnapshotRepeated checks that a snapshot post needs no
// idempotency key: a repeat is stored again and answered as accepted (not
// a duplicate), a one-part post writes its blob and the pointer alone, and
// a late repeat of an older snapshot leaves the newer one current.
func TestPostSnapshotRepeated(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	older := strings.Replace(snapshot("s-old", "old", 0, 1), `"node-0"`, `"node-old"`, 1)
	newer := strings.Replace(strings.Replace(snapshot("s-new", "new", 0, 1), `"node-0"`, `"node-new"`, 1), createdAt, `"createdAt":"2030-01-02T03:04:06Z"`, 1)
	if !strings.Contains(newer, "03:04:06") {
		t.Fatalf("the newer snapshot's createdAt not set: %s", newer)
	}
	receiptT := metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindReceipt}
	for i, body := range []struct{ id, body string }{{"s-old", older}, {"s-new", newer}, {"s-new", newer}, {"s-old", older}} {
		e.calls.Reset()
		var got v1.Receipt
		e.do(t, post(v1.RouteSnapshots, body.id, body.body), http.StatusAccepted, &got)
		if diff := cmp.Diff(v1.Receipt{TypeMeta: receiptT, ID: body.id}, got); diff != "" {
			t.Errorf("post #%d: receipt mismatch (-want +got):\n%s", i, diff)
		}
		for _, c := range e.calls.Calls() {
			if c.Op != "GetItem" && !strings.HasPrefix(c.PartitionKey, cluster+"#SNAPSHOT") {
				t.Errorf("post #%d: %s of %s, want only the snapshot's blob and pointer", i, c.Op, c.PartitionKey)
			}
			if c.Op == "Query" {
				t.Errorf("post #%d: Query of %s, want none for a one-part snapshot", i, c.PartitionKey)
			}
		}
	}
	snap, err := e.store.CurrentSnapshot(ctx, t0)
	if err != nil {
		t.Fatalf("CurrentSnapshot() error = %v", err)
	}
	if snap.ID != "new" || len(snap.Nodes) != 1 || snap.Nodes[0].Name != "node-new" {
		t.Errorf("CurrentSnapshot() = %s with nodes %v, want new with node-new: a late repeat of an older one does not turn it back", snap.ID, snap.Nodes)
	}
}

func TestPostSnapshotPartsThatDisagreeAreRefused(t *testing.T) {
	e := newEnv(t)
	e.do(t, post(v1.RouteSnapshots, "p0", snapshot("p0", "snap", 0, 3)), http.StatusAccepted, nil)
	var refused v1.ErrorResponse
	e.do(t, post(v1.RouteSnapshots, "p1", snapshot("p1", "snap", 1, 2)), http.StatusBadRequest, &refused)
	if len(refused.Fields) != 1 || refused.Fields[0].Path != "parts" {
		t.Errorf("fields = %+v, want one at parts", refused.Fields)
	}
	if _, err := e.store.CurrentSnapshot(context.Background(), t0); err == nil {
		t.Error("CurrentSnapshot() error = nil, want no current snapshot: two of three parts arrived")
	}
	// The refusal is final for that body, and released the ID: a corrected
	// part under the same ID is applied.
	e.do(t, post(v1.RouteSnapshots, "p1", snapshot("p1", "snap", 1, 3)), http.StatusAccepted, nil)
}

func TestGetNodeClaims(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var empty v1.NodeClaimList
	resp := e.do(t, get(v1.RouteNodeClaims), http.StatusOK, &empty)
	if !strings.Contains(resp.Body, `"items":[]`) || empty.Kind != "NodeClaimList" {
		t.Errorf("empty list body = %s, want kind NodeClaimList and an empty items list", resp.Body)
	}
	for _, name := range []string{"default-b", "default-a"} {
		c := v1.NodeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: v1.KindNodeClaim}, ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := e.store.PutNodeClaim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	var got v1.NodeClaimList
	e.do(t, get(v1.RouteNodeClaims), http.StatusOK, &got)
	var names []string
	for _, c := range got.Items {
		names = append(names, c.Name+"@"+c.ResourceVersion)
	}
	if diff := cmp.Diff([]string{"default-a@1", "default-b@1"}, names); diff != "" {
		t.Errorf("listed nodeclaims mismatch (-want +got):\n%s", diff)
	}
}

// TestGetNodeClaimsPages lists more NodeClaims than one answer carries:
// 500 claims of about 9 KB encode to 4.6 MB, past the 4 MiB a Lambda
// answer holds, and past DynamoDB's 1 MB Query pages.
func TestGetNodeClaimsPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var want []string
	for i := range 500 {
		name := fmt.Sprintf("default-%03d", i)
		want = append(want, name)
		c := v1.NodeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: v1.KindNodeClaim},
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"example.com/padding": strings.Repeat("x", 9000)}}}
		if _, err := e.store.PutNodeClaim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("should answer every NodeClaim exactly once across pages that each fit a Lambda answer", func(t *testing.T) {
		var got []string
		pages := 0
		token := ""
		for ; pages < 20; pages++ {
			req := get(v1.RouteNodeClaims)
			req.QueryStringParameters = map[string]string{v1.QueryLimit: "1000"}
			if token != "" {
				req.QueryStringParameters[v1.QueryContinue] = token
			}
			var page v1.NodeClaimList
			resp := e.do(t, req, http.StatusOK, &page)
			if len(resp.Body) > 4<<20 {
				t.Errorf("page %d is %d bytes, more than 4 MiB", pages, len(resp.Body))
			}
			for _, c := range page.Items {
				got = append(got, c.Name)
			}
			if token = page.Continue; token == "" {
				break
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("paged nodeclaims mismatch (-want +got):\n%s", diff)
		}
		if pages < 1 {
			t.Errorf("answered in %d pages, want at least 2", pages+1)
		}
	})
	t.Run("should keep a page within its limit", func(t *testing.T) {
		req := get(v1.RouteNodeClaims)
		req.QueryStringParameters = map[string]string{v1.QueryLimit: "7"}
		var page v1.NodeClaimList
		e.do(t, req, http.StatusOK, &page)
		if len(page.Items) != 7 || page.Continue == "" {
			t.Errorf("page of limit 7 = %d items, continue %q; want 7 and a token", len(page.Items), page.Continue)
		}
	})
	t.Run("should fail a list too large for one answer when no page is asked for", func(t *testing.T) {
		var failed v1.ErrorResponse
		e.do(t, get(v1.RouteNodeClaims), http.StatusInternalServerError, &failed)
		if !strings.Contains(failed.Message, "ask for pages") {
			t.Errorf("message = %q, want it to point at paging", failed.Message)
		}
	})
}

func TestGetListPageRejections(t *testing.T) {
	tests := []struct {
		name      string
		route     string
		query     map[string]string
		wantField string
	}{
		{name: "should refuse a limit of zero", route: v1.RouteNodeClaims, query: map[string]string{v1.QueryLimit: "0"}, wantField: "query limit"},
		{name: "should refuse a limit above the maximum", route: v1.RouteNodeClasses, query: map[string]string{v1.QueryLimit: "1001"}, wantField: "query limit"},
		{name: "should refuse a limit that is not a number", route: v1.RouteNodeClaims, query: map[string]string{v1.QueryLimit: "ten"}, wantField: "query limit"},
		{name: "should refuse a token it never gave", route: v1.RouteNodeClaims, query: map[string]string{v1.QueryLimit: "10", v1.QueryContinue: "%%%"}, wantField: "query continue"},
		{name: "should refuse a token without a limit", route: v1.RouteNodeClasses, query: map[string]string{v1.QueryContinue: "YQ"}, wantField: "query continue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			req := get(tt.route)
			req.QueryStringParameters = tt.query
			var got v1.ErrorResponse
			e.do(t, req, http.StatusBadRequest, &got)
			if len(got.Fields) != 1 || got.Fields[0].Path != tt.wantField {
				t.Errorf("fields = %+v, want one at %q", got.Fields, tt.wantField)
			}
		})
	}
}

func TestGetNodeClasses(t *testing.T) {
	e := newEnv(t)
	var empty v1.NodeClassStatusList
	resp := e.do(t, get(v1.RouteNodeClasses), http.StatusOK, &empty)
	if !strings.Contains(resp.Body, `"items":[]`) || empty.Kind != v1.KindNodeClassStatuses || empty.APIVersion != v1.APIVersion {
		t.Errorf("empty list body = %s, want kind %s and an empty items list", resp.Body, v1.KindNodeClassStatuses)
	}
	for _, name := range []string{"b", "a"} {
		rec := v1.NodeClassStatus{Name: name, Generation: 1, Status: v1.EC2NodeClassStatus{Subnets: []v1.Subnet{{ID: "subnet-" + name, Zone: "us-east-1a"}}}}
		if _, err := e.store.PutNodeClassStatus(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	var got v1.NodeClassStatusList
	e.do(t, get(v1.RouteNodeClasses), http.StatusOK, &got)
	var names []string
	for _, r := range got.Items {
		names = append(names, r.Name+":"+r.Status.Subnets[0].ID)
	}
	if diff := cmp.Diff([]string{"a:subnet-a", "b:subnet-b"}, names); diff != "" {
		t.Errorf("listed node classes mismatch (-want +got):\n%s", diff)
	}
}

func TestGetEvents(t *testing.T) {
	// record is the i-th event record: i seconds after t0, with a message
	// of size bytes (a short text when 0).
	record := func(i, size int) ddbstore.Event {
		msg := fmt.Sprintf("message %d", i)
		if size > 0 {
			msg = strings.Repeat("m", size)
		}
		e := ddbstore.Event{
			ID: fmt.Sprintf("rec-%04d", i), Time: t0.Add(time.Duration(i) * time.Second), Type: "Warning",
			Reason: "SpotInterrupted", Message: msg, NodeClaim: fmt.Sprintf("default-%d", i),
		}
		if i%2 == 0 {
			e.Node = fmt.Sprintf("ip-10-0-0-%d", i)
		}
		return e
	}
	ids := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("rec-%04d", i))
		}
		return out
	}
	tests := []struct {
		name string
		// put writes records 0..n-1 with messages of size bytes; expired
		// writes one more already expired at t0.
		n, size    int
		expired    bool
		wantIDs    []string
		wantOmit   int
		checkFirst bool
	}{
		{name: "should answer an empty list when no record is stored", wantIDs: nil},
		{name: "should list every unexpired record oldest first with its fields", n: 3, expired: true, wantIDs: ids(0, 3), checkFirst: true},
		{name: "should answer the newest MaxEventsPerList records and count the older ones omitted", n: v1.MaxEventsPerList + 3, wantIDs: ids(3, v1.MaxEventsPerList+3), wantOmit: 3},
		// 20 records of 300 KB are 6 MB: only the newest 13 fit 4 MiB.
		{name: "should answer only the newest records that fit a Lambda response", n: 20, size: 300_000, wantIDs: ids(7, 20), wantOmit: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			// Written newest first: the answer's order is the records' time.
			for i := tt.n - 1; i >= 0; i-- {
				if err := e.store.PutEvent(ctx, record(i, tt.size), t0, ddbstore.EventTTL); err != nil {
					t.Fatal(err)
				}
			}
			if tt.expired {
				old := record(99, 0)
				if err := e.store.PutEvent(ctx, old, t0.Add(-2*ddbstore.EventTTL), ddbstore.EventTTL); err != nil {
					t.Fatal(err)
				}
			}
			var got v1.EventList
			resp := e.do(t, get(v1.RouteEvents), http.StatusOK, &got)
			if got.APIVersion != v1.APIVersion || got.Kind != v1.KindEventList || !strings.Contains(resp.Body, `"items":[`) {
				t.Errorf("answer = %.200s, want apiVersion %s, kind %s and an items list", resp.Body, v1.APIVersion, v1.KindEventList)
			}
			if len(resp.Body) > 4<<20 {
				t.Errorf("answer of %d bytes, want at most 4 MiB", len(resp.Body))
			}
			var gotIDs []string
			for _, r := range got.Items {
				gotIDs = append(gotIDs, r.ID)
			}
			if diff := cmp.Diff(tt.wantIDs, gotIDs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("listed ids mismatch (-want +got):\n%s", diff)
			}
			if got.Omitted != tt.wantOmit {
				t.Errorf("Omitted = %d, want %d", got.Omitted, tt.wantOmit)
			}
			if tt.checkFirst {
				want := v1.EventRecord{ID: "rec-0000", Time: metav1.NewTime(t0), Type: "Warning", Reason: "SpotInterrupted",
					Message: "message 0", NodeClaim: "default-0", Node: "ip-10-0-0-0"}
				if diff := cmp.Diff(want, got.Items[0]); diff != "" {
					t.Errorf("first record mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := handler.New(handler.Config{}, handler.Deps{}); err == nil {
		t.Error("New(zero) error = nil, want an error")
	}
}

func TestGetEventsCopiesPodAndNodePoolTargets(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	records := []ddbstore.Event{
		{ID: "evicted", Time: t0, Type: "Normal", Reason: "Evicted", Message: "evicted", NodeClaim: "default-a", Node: "ip-10-0-0-1",
			Pod: "shop/web-1", PodUID: "uid-web-1"},
		{ID: "pool", Time: t0.Add(time.Second), Type: "Normal", Reason: "DisruptionBlocked", Message: "no budget", NodePool: "default"},
	}
	for _, r := range records {
		if err := e.store.PutEvent(ctx, r, t0, ddbstore.EventTTL); err != nil {
			t.Fatal(err)
		}
	}
	var got v1.EventList
	e.do(t, get(v1.RouteEvents), http.StatusOK, &got)
	want := []v1.EventRecord{
		{ID: "evicted", Time: metav1.NewTime(t0), Type: "Normal", Reason: "Evicted", Message: "evicted", NodeClaim: "default-a",
			Node: "ip-10-0-0-1", Pod: "shop/web-1", PodUID: "uid-web-1"},
		{ID: "pool", Time: metav1.NewTime(t0.Add(time.Second)), Type: "Normal", Reason: "DisruptionBlocked", Message: "no budget", NodePool: "default"},
	}
	if diff := cmp.Diff(want, got.Items); diff != "" {
		t.Errorf("listed records mismatch (-want +got):\n%s", diff)
	}
}

// TestGetEventsExpandsPairs checks that a paired record (an event on a
// Node and its NodeClaim in one item, as the decider writes them) is
// listed as the two events the forwarder writes.
func TestGetEventsExpandsPairs(t *testing.T) {
	e := newEnv(t)
	rec := ddbstore.Event{ID: "Unconsolidatable:a:w", Time: t0, Type: "Normal", Reason: "Unconsolidatable", Message: "disabled",
		NodeClaim: "default-a", Node: "ip-10-0-0-1", OnNodeClaim: &ddbstore.NodeClaimEvent{ID: "Unconsolidatable:nodeclaim:a:w"}}
	if err := e.store.PutEvent(context.Background(), rec, t0, ddbstore.EventTTL); err != nil {
		t.Fatal(err)
	}
	want := []v1.EventRecord{
		{ID: "Unconsolidatable:a:w", Time: metav1.NewTime(t0), Type: "Normal", Reason: "Unconsolidatable", Message: "disabled",
			NodeClaim: "default-a", Node: "ip-10-0-0-1"},
		{ID: "Unconsolidatable:nodeclaim:a:w", Time: metav1.NewTime(t0), Type: "Normal", Reason: "Unconsolidatable", Message: "disabled",
			NodeClaim: "default-a"},
	}
	var got v1.EventList
	e.do(t, get(v1.RouteEvents), http.StatusOK, &got)
	if diff := cmp.Diff(want, got.Items); diff != "" {
		t.Errorf("listed records mismatch (-want +got):\n%s", diff)
	}
	var sync v1.Sync
	e.do(t, get(v1.RouteSync), http.StatusOK, &sync)
	if diff := cmp.Diff(want, sync.Events.Items); diff != "" {
		t.Errorf("sync's records mismatch (-want +got):\n%s", diff)
	}
}

func TestGetSync(t *testing.T) {
	putClaims := func(t *testing.T, e *env, n, padding int) {
		t.Helper()
		for i := range n {
			c := v1.NodeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: v1.KindNodeClaim},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("default-%03d", i)}}
			if padding > 0 {
				c.Annotations = map[string]string{"example.com/padding": strings.Repeat("x", padding)}
			}
			if _, err := e.store.PutNodeClaim(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
	}
	putClassAndEvent := func(t *testing.T, e *env) {
		t.Helper()
		rec := v1.NodeClassStatus{Name: "default", Generation: 1, Status: v1.EC2NodeClassStatus{Subnets: []v1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}}}}
		if _, err := e.store.PutNodeClassStatus(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		ev := ddbstore.Event{ID: "rec-0", Time: t0, Type: "Warning", Reason: "SpotInterrupted", Message: "m", NodeClaim: "default-000"}
		if err := e.store.PutEvent(context.Background(), ev, t0, ddbstore.EventTTL); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("should answer empty parts and defer nothing when the API holds nothing", func(t *testing.T) {
		e := newEnv(t)
		var got v1.Sync
		resp := e.do(t, get(v1.RouteSync), http.StatusOK, &got)
		for _, part := range []string{`"nodeClasses":[]`, `"nodeClaims":[]`, `"items":[]`} {
			if !strings.Contains(resp.Body, part) {
				t.Errorf("body = %s, want %s", resp.Body, part)
			}
		}
		if got.Kind != v1.KindSync || got.APIVersion != v1.APIVersion || got.Events.Kind != v1.KindEventList || len(got.Deferred) != 0 {
			t.Errorf("answer = %+v, want kind %s with an EventList and nothing deferred", got, v1.KindSync)
		}
	})
	t.Run("should answer in one what the three routes answer", func(t *testing.T) {
		e := newEnv(t)
		putClaims(t, e, 3, 0)
		putClassAndEvent(t, e)
		var got v1.Sync
		e.do(t, get(v1.RouteSync), http.StatusOK, &got)
		var classes v1.NodeClassStatusList
		var claims v1.NodeClaimList
		var evs v1.EventList
		e.do(t, get(v1.RouteNodeClasses), http.StatusOK, &classes)
		e.do(t, get(v1.RouteNodeClaims), http.StatusOK, &claims)
		e.do(t, get(v1.RouteEvents), http.StatusOK, &evs)
		want := v1.Sync{TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindSync},
			NodeClasses: classes.Items, NodeClaims: claims.Items, Events: evs, NodeClaimsGeneration: 3}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("sync mismatch (-want +got):\n%s", diff)
		}
		if len(got.NodeClasses) != 1 || len(got.NodeClaims) != 3 || len(got.Events.Items) != 1 {
			t.Errorf("sync holds %d classes, %d claims, %d events; want 1, 3, 1", len(got.NodeClasses), len(got.NodeClaims), len(got.Events.Items))
		}
	})
	syncAt := func(gen string) events.APIGatewayProxyRequest {
		req := get(v1.RouteSync)
		req.QueryStringParameters = map[string]string{v1.QueryNodeClaimsGeneration: gen}
		return req
	}
	claimQueries := func(e *env) int {
		n := 0
		for _, c := range e.calls.Calls() {
			if c.Op == "Query" && c.PartitionKey == cluster+"#NODECLAIM" {
				n++
			}
		}
		return n
	}
	t.Run("should answer unchanged without reading the NodeClaims while their generation is the poller's", func(t *testing.T) {
		e := newEnv(t)
		putClaims(t, e, 3, 0)
		putClassAndEvent(t, e)
		var first v1.Sync
		e.do(t, get(v1.RouteSync), http.StatusOK, &first)
		e.calls.Reset()
		var got v1.Sync
		resp := e.do(t, syncAt(strconv.FormatInt(first.NodeClaimsGeneration, 10)), http.StatusOK, &got)
		if !got.NodeClaimsUnchanged || got.NodeClaimsGeneration != first.NodeClaimsGeneration || !strings.Contains(resp.Body, `"nodeClaims":[]`) {
			t.Errorf("answer = %s, want nodeClaimsUnchanged at generation %d and no NodeClaims", resp.Body, first.NodeClaimsGeneration)
		}
		if len(got.NodeClasses) != 1 || len(got.Events.Items) != 1 {
			t.Errorf("answer holds %d classes, %d events; want the other parts whole (1, 1)", len(got.NodeClasses), len(got.Events.Items))
		}
		if n := claimQueries(e); n != 0 {
			t.Errorf("NodeClaim queries = %d, want 0", n)
		}
	})
	t.Run("should answer every NodeClaim once one changed since the poller's generation", func(t *testing.T) {
		e := newEnv(t)
		putClaims(t, e, 2, 0)
		var first v1.Sync
		e.do(t, get(v1.RouteSync), http.StatusOK, &first)
		c := first.NodeClaims[0]
		c.Status.ProviderID = "aws:///us-east-1a/i-0abc"
		if _, err := e.store.UpdateNodeClaim(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		var got v1.Sync
		e.do(t, syncAt(strconv.FormatInt(first.NodeClaimsGeneration, 10)), http.StatusOK, &got)
		if got.NodeClaimsUnchanged || got.NodeClaimsGeneration != first.NodeClaimsGeneration+1 || len(got.NodeClaims) != 2 ||
			got.NodeClaims[0].Status.ProviderID != c.Status.ProviderID {
			t.Errorf("answer = %+v, want both NodeClaims, the changed one launched, at generation %d", got, first.NodeClaimsGeneration+1)
		}
	})
	t.Run("should answer every NodeClaim to a generation that is not the API's", func(t *testing.T) {
		e := newEnv(t)
		putClaims(t, e, 2, 0)
		var got v1.Sync
		e.do(t, syncAt("999"), http.StatusOK, &got)
		if got.NodeClaimsUnchanged || len(got.NodeClaims) != 2 || got.NodeClaimsGeneration != 2 {
			t.Errorf("answer = %+v, want both NodeClaims at generation 2", got)
		}
	})
	t.Run("should defer the NodeClaims to their paged route when they do not fit one answer", func(t *testing.T) {
		e := newEnv(t)
		// 500 claims of about 9 KB encode to 4.6 MB, past the 4 MiB of an answer.
		putClaims(t, e, 500, 9000)
		putClassAndEvent(t, e)
		var got v1.Sync
		resp := e.do(t, get(v1.RouteSync), http.StatusOK, &got)
		if len(resp.Body) > 4<<20 {
			t.Errorf("answer of %d bytes, want at most 4 MiB", len(resp.Body))
		}
		if diff := cmp.Diff([]string{v1.RouteNodeClaims}, got.Deferred); diff != "" {
			t.Errorf("deferred mismatch (-want +got):\n%s", diff)
		}
		if len(got.NodeClaims) != 0 || len(got.NodeClasses) != 1 || len(got.Events.Items) != 1 {
			t.Errorf("sync holds %d claims, %d classes, %d events; want 0 (deferred), 1, 1", len(got.NodeClaims), len(got.NodeClasses), len(got.Events.Items))
		}
	})
}

func TestGetSyncErrors(t *testing.T) {
	for _, gen := range []string{"0", "-3", "seven", ""} {
		t.Run("should refuse nodeClaimsGeneration "+strconv.Quote(gen)+" naming the parameter", func(t *testing.T) {
			e := newEnv(t)
			req := get(v1.RouteSync)
			req.QueryStringParameters = map[string]string{v1.QueryNodeClaimsGeneration: gen}
			var got v1.ErrorResponse
			e.do(t, req, http.StatusBadRequest, &got)
			if !strings.Contains(got.Message, "query "+v1.QueryNodeClaimsGeneration) {
				t.Errorf("message = %q, want the parameter named", got.Message)
			}
		})
	}
}
