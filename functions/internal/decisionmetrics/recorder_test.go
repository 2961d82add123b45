package decisionmetrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type update struct {
	Op     string
	Name   string
	Labels map[string]string
	Value  float64
}

type fakeStore struct {
	got []update
	err error
}

func (f *fakeStore) AddCounter(_ context.Context, name string, labels map[string]string, d float64) error {
	f.got = append(f.got, update{"add", name, labels, d})
	return f.err
}

func (f *fakeStore) SetGauge(_ context.Context, name string, labels map[string]string, v float64) error {
	f.got = append(f.got, update{"set", name, labels, v})
	return f.err
}

func (f *fakeStore) Observe(_ context.Context, name string, labels map[string]string, v float64) error {
	f.got = append(f.got, update{"observe", name, labels, v})
	return f.err
}

func TestRecorderStoresAndLogsEachUpdateOnce(t *testing.T) {
	st := &fakeStore{}
	var out bytes.Buffer
	r := decisionmetrics.New(st, &out, slog.New(slog.NewTextHandler(io.Discard, nil)), "prod", func() time.Time { return t0 })
	claim := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{v1.LabelNodePool: "default"}}}
	r.NodeClaimCreated(t.Context(), claim, "Drifted")
	r.CloudProviderCall(t.Context(), "provisioner", "Create", 1500*time.Millisecond, "InsufficientCapacityError")

	want := []update{
		{"add", v1.MetricNodeClaimsCreated, map[string]string{"reason": "drifted", "nodepool": "default", "min_values_relaxed": "false"}, 1},
		{"observe", v1.MetricCloudProviderSeconds, map[string]string{"controller": "provisioner", "method": "Create", "provider": "aws"}, 1.5},
		{"add", v1.MetricCloudProviderErrors, map[string]string{"controller": "provisioner", "method": "Create", "provider": "aws", "error": "InsufficientCapacityError"}, 1},
	}
	if diff := cmp.Diff(want, st.got); diff != "" {
		t.Errorf("stored updates mismatch (-want +got):\n%s", diff)
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("EMF lines = %d, want 3:\n%s", len(lines), out.String())
	}
	var first map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	wantFirst := map[string]any{
		"_aws": map[string]any{
			"Timestamp": float64(t0.UnixMilli()),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  "Nodewright",
				"Dimensions": []any{[]any{"cluster", "min_values_relaxed", "nodepool", "reason"}},
				"Metrics":    []any{map[string]any{"Name": v1.MetricNodeClaimsCreated, "Unit": "Count"}},
			}},
		},
		"cluster": "prod", "min_values_relaxed": "false", "nodepool": "default", "reason": "drifted",
		v1.MetricNodeClaimsCreated: float64(1),
	}
	if diff := cmp.Diff(wantFirst, first); diff != "" {
		t.Errorf("EMF line mismatch (-want +got):\n%s", diff)
	}
}

func TestRecorderLogsAStoreFailureAndStillEmits(t *testing.T) {
	st := &fakeStore{err: errors.New("ProvisionedThroughputExceededException")}
	var out, logs bytes.Buffer
	r := decisionmetrics.New(st, &out, slog.New(slog.NewTextHandler(&logs, nil)), "prod", func() time.Time { return t0 })
	r.InterruptionReceived(t.Context(), "spot_interrupted")
	if !bytes.Contains(logs.Bytes(), []byte("metric not stored")) {
		t.Errorf("log = %q, want a warning naming the unstored metric", logs.String())
	}
	if !bytes.Contains(out.Bytes(), []byte(`"message_type":"spot_interrupted"`)) {
		t.Errorf("EMF = %q, want the update logged regardless", out.String())
	}
}

func TestEMFLogsAnEmptyLabelAsNone(t *testing.T) {
	line, err := decisionmetrics.EMF(t0, "prod", v1.MetricCounter, v1.MetricNodeClaimsDisrupted, map[string]string{"capacity_type": ""}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, []byte(`"capacity_type":"none"`)) {
		t.Errorf("EMF = %s, want capacity_type none", line)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *decisionmetrics.Recorder
	r.EligibleNodes(t.Context(), "drifted", 2) // must not panic
}

func TestNodeClaimTerminatedObservesTheSpanFromItsDeletionMark(t *testing.T) {
	labels := map[string]string{v1.LabelNodePool: "default", v1.LabelCapacityType: "spot", v1.LabelTopologyZone: "us-east-1b"}
	marked := metav1.NewTime(t0.Add(-90 * time.Second))
	tests := []struct {
		name  string
		claim v1.NodeClaim
		want  []update
	}{
		{
			name:  "should observe a terminated NodeClaim and its Node from the deletion mark",
			claim: v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: labels, DeletionTimestamp: &marked}, Status: v1.NodeClaimStatus{NodeName: "ip-10-0-1-5"}},
			want: []update{
				{"add", v1.MetricNodeClaimsTerminated, map[string]string{"nodepool": "default", "capacity_type": "spot", "zone": "us-east-1b"}, 1},
				{"add", v1.MetricNodesTerminated, map[string]string{"nodepool": "default"}, 1},
				{"observe", v1.MetricNodeClaimsTerminationSeconds, map[string]string{"nodepool": "default"}, 90},
				{"observe", v1.MetricNodesTerminationSeconds, map[string]string{"nodepool": "default"}, 90},
			},
		},
		{
			name:  "should observe no node termination for a NodeClaim that never had a Node",
			claim: v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-b", Labels: labels, DeletionTimestamp: &marked}},
			want: []update{
				{"add", v1.MetricNodeClaimsTerminated, map[string]string{"nodepool": "default", "capacity_type": "spot", "zone": "us-east-1b"}, 1},
				{"observe", v1.MetricNodeClaimsTerminationSeconds, map[string]string{"nodepool": "default"}, 90},
			},
		},
		{
			name:  "should observe no duration for a NodeClaim deleted without a termination (launch failure, garbage collection)",
			claim: v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-c", Labels: labels}, Status: v1.NodeClaimStatus{NodeName: "ip-10-0-1-6"}},
			want: []update{
				{"add", v1.MetricNodeClaimsTerminated, map[string]string{"nodepool": "default", "capacity_type": "spot", "zone": "us-east-1b"}, 1},
				{"add", v1.MetricNodesTerminated, map[string]string{"nodepool": "default"}, 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeStore{}
			r := decisionmetrics.New(st, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), "prod", func() time.Time { return t0 })
			r.NodeClaimTerminated(t.Context(), tt.claim)
			if diff := cmp.Diff(tt.want, st.got); diff != "" {
				t.Errorf("stored updates mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllowedDisruptionsServesNoBudgetAsKarpentersUnlimited(t *testing.T) {
	st := &fakeStore{}
	r := decisionmetrics.New(st, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), "prod", func() time.Time { return t0 })
	r.AllowedDisruptions(t.Context(), "default", "Drifted", 2)
	r.AllowedDisruptions(t.Context(), "default", "Empty", -1)
	want := []update{
		{"set", v1.MetricNodePoolsAllowedDisruptions, map[string]string{"nodepool": "default", "reason": "Drifted"}, 2},
		{"set", v1.MetricNodePoolsAllowedDisruptions, map[string]string{"nodepool": "default", "reason": "Empty"}, math.MaxInt32},
	}
	if diff := cmp.Diff(want, st.got); diff != "" {
		t.Errorf("stored updates mismatch (-want +got):\n%s", diff)
	}
}

func TestCloudWatchOnlyMetricsAreLoggedNotStored(t *testing.T) {
	st := &fakeStore{}
	var out bytes.Buffer
	r := decisionmetrics.New(st, &out, slog.New(slog.NewTextHandler(io.Discard, nil)), "prod", func() time.Time { return t0 })
	r.PendingPods(t.Context(), 5, 2)
	r.NodesConsumingBudgets(t.Context(), "default", "Drifted", 1)
	r.BlockedNodes(t.Context(), decisionmetrics.BlockedWaiting, 3)
	r.FirstEviction(t.Context(), "spot_interrupted", 7*time.Second)
	if len(st.got) != 0 {
		t.Errorf("stored %v, want nothing: these series exist in CloudWatch only", st.got)
	}
	for _, want := range []string{
		`"karpenter_scheduler_queue_depth":5`, `"karpenter_scheduler_unschedulable_pods_count":2`,
		`"karpenter_nodepools_nodes_consuming_budgets":1`, `"reason":"Drifted"`,
		`"nodewright_disruption_blocked_nodes":3`, `"reason":"Waiting"`,
		`"nodewright_interruption_first_eviction_seconds":7`, `"Unit":"Seconds"`,
	} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("EMF output lacks %s:\n%s", want, out.String())
		}
	}
}
