package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/functions/provisioner/handler"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

const cluster = "test-cluster"

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// provisioner records batches and answers with the scripted error for a
// batch ID (nil by default).
type provisioner struct {
	mu      sync.Mutex
	errs    map[string]error
	batches []string
	// launches are the launches every answer reports.
	launches []provisioning.Launch
}

func (p *provisioner) Provision(_ context.Context, b *v1.PodBatch, now time.Time) (provisioning.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !now.Equal(t0) {
		return provisioning.Result{}, fmt.Errorf("now = %v, want the handler's clock", now)
	}
	p.batches = append(p.batches, b.ID)
	return provisioning.Result{Batch: v1.PodBatchResult{BatchID: b.ID, State: v1.BatchSolved}, Launches: p.launches}, p.errs[b.ID]
}

// registrar answers every node with a patch that registers it, or the
// scripted error for its name.
// registrar records the Nodes it registers; safe for the handler's
// concurrent registrations.
type registrar struct {
	mu    sync.Mutex
	errs  map[string]error
	nodes []string
	// settled are the nodes whose registration is already complete: their
	// Register changes nothing.
	settled map[string]bool
}

func (r *registrar) Register(_ context.Context, n *corev1.Node, _ time.Time) (provisioning.Registration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = append(r.nodes, n.Name)
	if err := r.errs[n.Name]; err != nil {
		return provisioning.Registration{}, err
	}
	if r.settled[n.Name] {
		return provisioning.Registration{NodeClaim: v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + n.Name}}}, nil
	}
	return provisioning.Registration{
		NodeClaim: v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + n.Name}},
		Patch: provisioning.NodePatch{
			Node:         n.Name,
			Labels:       map[string]string{v1.LabelRegistered: "true"},
			RemoveTaints: []corev1.Taint{{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}},
		},
	}, nil
}

// payloads serves claim-checked bodies by key.
type payloads struct {
	bodies map[string]string
	err    error
}

func (p payloads) GetPayload(_ context.Context, key string, _ time.Time) ([]byte, error) {
	if p.err != nil {
		return nil, p.err
	}
	b, ok := p.bodies[key]
	if !ok {
		return nil, fmt.Errorf("get payload %s: %w", key, ddbstore.ErrNotFound)
	}
	return []byte(b), nil
}

// results records stored batch results.
type results struct{ stored []v1.PodBatchResult }

func (r *results) PutBatchResult(_ context.Context, res v1.PodBatchResult) error {
	r.stored = append(r.stored, res)
	return nil
}

// recorder records the event records written, failing every write with
// err when set.
type recorder struct {
	mu   sync.Mutex
	err  error
	evs  []ddbstore.Event
	ttls []time.Duration
}

func (r *recorder) PutEvent(_ context.Context, e ddbstore.Event, _ time.Time, ttl time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.evs = append(r.evs, e)
	r.ttls = append(r.ttls, ttl)
	return nil
}

// failingNodes fails every UpdateNode.
type failingNodes struct{ handler.NodeAPI }

func (failingNodes) UpdateNode(context.Context, string, func(*corev1.Node) error) error {
	return errors.New("apiserver unavailable")
}

type fixture struct {
	prov     *provisioner
	reg      *registrar
	clients  *fake.Clientset
	results  *results
	payloads payloads
	nodes    handler.NodeAPI
	events   *recorder
	// logs receives the handler's lines (nil: discarded), at debug and up.
	logs io.Writer
}

func newFixture() *fixture {
	unregistered := corev1.Taint{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-a", Taints: []corev1.Taint{unregistered}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-b", Taints: []corev1.Taint{unregistered}}},
	)
	f := &fixture{prov: &provisioner{errs: map[string]error{}}, reg: &registrar{errs: map[string]error{}}, clients: cs, results: &results{}, events: &recorder{}}
	f.nodes = kube.NewFromClientset(cs)
	return f
}

func (f *fixture) handler(t *testing.T) *handler.Handler {
	t.Helper()
	h, err := handler.NewWithDeps(handler.Deps{
		Provisioner: f.prov, Registrar: f.reg, Nodes: f.nodes, Payloads: f.payloads, Results: f.results, Events: f.events,
		Log: f.logger(), Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (f *fixture) logger() *slog.Logger {
	if f.logs == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func str(s string) *string { return &s }

// record is an SQS record as Lambda delivers it from the FIFO queue.
func record(id, kind, body string, extra ...string) events.SQSMessage {
	attrs := map[string]events.SQSMessageAttribute{}
	if kind != "" {
		attrs["kind"] = events.SQSMessageAttribute{DataType: "String", StringValue: str(kind)}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		attrs[extra[i]] = events.SQSMessageAttribute{DataType: "String", StringValue: str(extra[i+1])}
	}
	return events.SQSMessage{
		MessageId: id, Body: body, MessageAttributes: attrs,
		Attributes: map[string]string{"MessageGroupId": cluster, "MessageDeduplicationId": id, "ApproximateReceiveCount": "1"},
	}
}

func batch(id string) string {
	return fmt.Sprintf(`{"apiVersion":"nodewright.dev/v1","kind":"PodBatch","id":%q,"cluster":%q,"createdAt":"2030-01-02T03:00:00Z","pods":[{"name":"web-0","namespace":"default","uid":"u-%s","creationTimestamp":"2030-01-02T03:00:00Z","spec":{"containers":[{"name":"app"}]}}]}`, id, cluster, id)
}

func registrations(id string, nodes ...string) string {
	var ns []string
	for _, n := range nodes {
		ns = append(ns, fmt.Sprintf(`{"name":%q,"providerID":"aws:///us-east-1a/i-%s","creationTimestamp":"2030-01-02T03:00:00Z"}`, n, n))
	}
	return fmt.Sprintf(`{"apiVersion":"nodewright.dev/v1","kind":"NodeRegistrations","id":%q,"cluster":%q,"createdAt":"2030-01-02T03:00:00Z","nodes":[%s]}`, id, cluster, strings.Join(ns, ","))
}

func failures(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestHandle(t *testing.T) {
	tests := []struct {
		name          string
		setup         func(*fixture)
		records       []events.SQSMessage
		wantFailures  []string
		wantBatches   []string
		wantRegisters []string
		wantResults   []v1.BatchState
	}{
		{
			name:        "should provision each pod batch in order and acknowledge it",
			records:     []events.SQSMessage{record("m1", "PodBatch", batch("b1")), record("m2", "PodBatch", batch("b2"))},
			wantBatches: []string{"b1", "b2"},
		},
		{
			name:          "should register the nodes of a registrations message",
			records:       []events.SQSMessage{record("m1", "NodeRegistrations", registrations("r1", "node-a", "node-b"))},
			wantRegisters: []string{"node-a", "node-b"},
		},
		{
			name:          "should skip a node that left the cluster",
			records:       []events.SQSMessage{record("m1", "NodeRegistrations", registrations("r1", "node-gone", "node-a"))},
			wantRegisters: []string{"node-a"},
		},
		{
			name: "should acknowledge a node that no NodeClaim claims",
			setup: func(f *fixture) {
				f.reg.errs["node-a"] = fmt.Errorf("register node-a: %w", provisioning.ErrNoNodeClaim)
			},
			records:       []events.SQSMessage{record("m1", "NodeRegistrations", registrations("r1", "node-a"))},
			wantRegisters: []string{"node-a"},
		},
		{
			name:        "should read a claim-checked batch from the payload store",
			setup:       func(f *fixture) { f.payloads.bodies = map[string]string{"PodBatch-b1": batch("b1")} },
			records:     []events.SQSMessage{record("m1", "PodBatch", "PodBatch-b1", "payload-ref", "PodBatch-b1")},
			wantBatches: []string{"b1"},
		},
		{
			name:    "should acknowledge poison: an undecodable body, a missing kind, an unknown kind, an expired claim check",
			records: []events.SQSMessage{record("m1", "PodBatch", `{"kind":`), record("m2", "", batch("b1")), record("m3", "Pod", batch("b1")), record("m4", "PodBatch", "x", "payload-ref", "gone")},
		},
		{
			name: "should acknowledge a batch the provisioner rejects and store it Failed",
			setup: func(f *fixture) {
				f.prov.errs["b1"] = fmt.Errorf("provision batch b1: %w", provisioning.ErrInvalidInput)
			},
			records:     []events.SQSMessage{record("m1", "PodBatch", batch("b1"))},
			wantBatches: []string{"b1"},
			wantResults: []v1.BatchState{v1.BatchFailed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			if tt.setup != nil {
				tt.setup(f)
			}
			resp, err := f.handler(t).Handle(context.Background(), events.SQSEvent{Records: tt.records})
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantFailures, failures(resp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("failures mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantBatches, f.prov.batches, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("provisioned batches mismatch (-want +got):\n%s", diff)
			}
			// The Nodes of a message register concurrently: the order is
			// not a promise.
			if diff := cmp.Diff(tt.wantRegisters, f.reg.nodes, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("registered nodes mismatch (-want +got):\n%s", diff)
			}
			var states []v1.BatchState
			for _, r := range f.results.stored {
				states = append(states, r.State)
			}
			if diff := cmp.Diff(tt.wantResults, states, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("stored results mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandleAppliesTheRegistrationPatch(t *testing.T) {
	f := newFixture()
	if _, err := f.handler(t).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("m1", "NodeRegistrations", registrations("r1", "node-a")),
	}}); err != nil {
		t.Fatal(err)
	}
	n, err := f.clients.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[v1.LabelRegistered] != "true" || len(n.Spec.Taints) != 0 {
		t.Errorf("node-a labels %v taints %v, want registered and the unregistered taint removed", n.Labels, n.Spec.Taints)
	}
}

// A registration that changes nothing (the forwarder reports a Node again
// on every update of it) is logged at debug; one that patched the Node at
// info.
func TestRegistrationLineIsInfoOnlyWhenItChangedSomething(t *testing.T) {
	f := newFixture()
	var buf bytes.Buffer
	f.logs = &buf
	f.reg.settled = map[string]bool{"node-b": true}
	if _, err := f.handler(t).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("m1", "NodeRegistrations", registrations("r1", "node-a", "node-b")),
	}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil && m["msg"] == "node registered" {
			got[fmt.Sprint(m["node"])] = fmt.Sprint(m["level"])
		}
	}
	if diff := cmp.Diff(map[string]string{"node-a": "INFO", "node-b": "DEBUG"}, got); diff != "" {
		t.Errorf("node registered levels mismatch (-want +got):\n%s", diff)
	}
}

// TestHandleRedelivers covers the records reported failed: an incomplete
// effect is redelivered, and on a FIFO queue so is everything after it.
func TestHandleRedelivers(t *testing.T) {
	tests := []struct {
		name         string
		setup        func(*fixture)
		records      []events.SQSMessage
		wantFailures []string
		wantBatches  []string
	}{
		{
			name: "should redeliver a batch whose launches are incomplete, and the records after it unprocessed",
			setup: func(f *fixture) {
				f.prov.errs["b2"] = fmt.Errorf("provision batch b2: %w: 1 of 2", provisioning.ErrLaunchIncomplete)
			},
			records:      []events.SQSMessage{record("m1", "PodBatch", batch("b1")), record("m2", "PodBatch", batch("b2")), record("m3", "PodBatch", batch("b3"))},
			wantFailures: []string{"m2", "m3"},
			wantBatches:  []string{"b1", "b2"},
		},
		{
			name:         "should redeliver a batch when a store failed",
			setup:        func(f *fixture) { f.prov.errs["b1"] = errors.New("provision batch b1: list nodeclaims: throttled") },
			records:      []events.SQSMessage{record("m1", "PodBatch", batch("b1"))},
			wantFailures: []string{"m1"},
			wantBatches:  []string{"b1"},
		},
		{
			name:         "should redeliver registrations whose node could not be patched",
			setup:        func(f *fixture) { f.nodes = failingNodes{NodeAPI: f.nodes} },
			records:      []events.SQSMessage{record("m1", "NodeRegistrations", registrations("r1", "node-a"))},
			wantFailures: []string{"m1"},
		},
		{
			name:         "should redeliver registrations whose NodeClaim could not be written",
			setup:        func(f *fixture) { f.reg.errs["node-a"] = fmt.Errorf("update nodeclaim: %w", v1.ErrConflict) },
			records:      []events.SQSMessage{record("m1", "NodeRegistrations", registrations("r1", "node-a"))},
			wantFailures: []string{"m1"},
		},
		{
			name:         "should redeliver a claim check whose payload could not be read",
			setup:        func(f *fixture) { f.payloads.err = errors.New("dynamodb unavailable") },
			records:      []events.SQSMessage{record("m1", "PodBatch", "ref", "payload-ref", "PodBatch-b1")},
			wantFailures: []string{"m1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			tt.setup(f)
			resp, err := f.handler(t).Handle(context.Background(), events.SQSEvent{Records: tt.records})
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantFailures, failures(resp)); diff != "" {
				t.Errorf("failures mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantBatches, f.prov.batches, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("provisioned batches mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	env := map[string]string{
		"CLUSTER_NAME": "prod", "TABLE_NAME": "nw", "AWS_REGION": "eu-west-1", "KUBERNETES_VERSION": "1.33",
		"CLUSTER_ENDPOINT": "https://ABC.gr7.eu-west-1.eks.amazonaws.com", "CLUSTER_CA_DATA": "Y2EtYnVuZGxlCg==", "SERVICE_CIDR": "10.100.0.0/16",
	}
	got, err := handler.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig() error = %v", err)
	}
	want := handler.Config{
		Cluster: "prod", Table: "nw", Region: "eu-west-1", KubernetesVersion: "1.33",
		Endpoint: "https://ABC.gr7.eu-west-1.eks.amazonaws.com", CAData: "Y2EtYnVuZGxlCg==", ServiceCIDR: "10.100.0.0/16",
		LaunchParallelism: provisioning.DefaultLaunchParallelism,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig() mismatch (-want +got):\n%s", diff)
	}
	env["CLUSTER_CA_DATA"] = "not base64!"
	delete(env, "KUBERNETES_VERSION")
	_, err = handler.LoadConfig(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "KUBERNETES_VERSION: required") || !strings.Contains(err.Error(), "CLUSTER_CA_DATA: not base64") {
		t.Errorf("LoadConfig(bad) error = %v, want both problems", err)
	}
}

// classStatusStore records PutNodeClassStatus calls and fails with err.
type classStatusStore struct {
	got []v1.NodeClassStatus
	err error
}

func (s *classStatusStore) PutNodeClassStatus(_ context.Context, rec v1.NodeClassStatus) (bool, error) {
	s.got = append(s.got, rec)
	return s.err == nil, s.err
}

func TestRecordNodeClassStatus(t *testing.T) {
	nc := v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 4, UID: "uid-1"},
		Status: v1.EC2NodeClassStatus{Subnets: []v1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}}, InstanceProfile: "NodeRole"}}
	want := []v1.NodeClassStatus{{Name: "default", Generation: 4, UID: "uid-1", ChangedAt: metav1.NewTime(t0), Status: nc.Status}}
	tests := []struct {
		name    string
		err     error
		wantLog string
	}{
		{name: "should store the resolved class with its generation and UID"},
		{name: "should log a failed write and go on", err: errors.New("throttled"), wantLog: "EC2NodeClass status not recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &classStatusStore{err: tt.err}
			var logs strings.Builder
			handler.RecordNodeClassStatus(store, slog.New(slog.NewTextHandler(&logs, nil)), func() time.Time { return t0 })(context.Background(), nc)
			if diff := cmp.Diff(want, store.got); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
			if tt.wantLog != "" && !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log = %q; want %q", logs.String(), tt.wantLog)
			}
		})
	}
}

func TestHandleRecordsTheRoundsProvisioningEvents(t *testing.T) {
	f := newFixture()
	f.prov.launches = []provisioning.Launch{
		{NodeClaim: "default-a", Status: launch.Launched, ProviderID: "aws:///us-east-1a/i-a"},
		{NodeClaim: "default-b", Status: launch.InsufficientCapacity, Reason: "InsufficientInstanceCapacity: no m5.large in us-east-1a"},
		{NodeClaim: "default-c", Status: launch.NodeClassNotReady, Reason: `EC2NodeClass "default" is missing, invalid or not ready`},
	}
	resp, err := f.handler(t).Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("m1", "PodBatch", batch("b1"))}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle() = %v, %v; want the batch acknowledged", failures(resp), err)
	}
	want := []ddbstore.Event{
		{ID: "InsufficientCapacityError:default-b", Time: t0, Type: "Warning", Reason: "InsufficientCapacityError", NodeClaim: "default-b",
			Message: "NodeClaim default-b event: InsufficientInstanceCapacity: no m5.large in us-east-1a"},
		{ID: "NodeClassNotReady:default-c", Time: t0, Type: "Warning", Reason: "NodeClassNotReady", NodeClaim: "default-c",
			Message: `NodeClaim default-c event: EC2NodeClass "default" is missing, invalid or not ready`},
	}
	if diff := cmp.Diff(want, f.events.evs, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("recorded events mismatch (-want +got):\n%s", diff)
	}
	for _, ttl := range f.events.ttls {
		if ttl != ddbstore.EventTTL {
			t.Errorf("event ttl = %v, want ddbstore.EventTTL", ttl)
		}
	}
}

func TestHandleAcknowledgesTheBatchWhenItsEventsCannotBeRecorded(t *testing.T) {
	f := newFixture()
	f.prov.launches = []provisioning.Launch{{NodeClaim: "default-b", Status: launch.InsufficientCapacity, Reason: "no capacity"}}
	f.events.err = errors.New("ProvisionedThroughputExceededException")
	resp, err := f.handler(t).Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("m1", "PodBatch", batch("b1"))}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle() = %v, %v; want the batch acknowledged (an Event is a report, not an effect)", failures(resp), err)
	}
}
