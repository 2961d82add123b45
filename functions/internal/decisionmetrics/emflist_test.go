package decisionmetrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// EMFMetric is one entry of testdata/emf-metrics.json, the list the infra
// module's dashboard test also reads.
type EMFMetric struct {
	Name       string   `json:"name"`
	Dimensions []string `json:"dimensions"`
}

// exercise calls every exported method of the recorder once; the names
// are counted against the method set, so a method added later without a
// call here fails the test.
var exercise = map[string]func(ctx context.Context, r *decisionmetrics.Recorder){
	"NodeClaimCreated": func(ctx context.Context, r *decisionmetrics.Recorder) {
		r.NodeClaimCreated(ctx, v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelNodePool: "default"}}}, "provisioning")
	},
	"NodeClaimTerminated": func(ctx context.Context, r *decisionmetrics.Recorder) {
		c := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelNodePool: "default"}}}
		c.Status.NodeName = "ip-10-0-0-1"
		marked := metav1.NewTime(time.Unix(0, 0))
		c.DeletionTimestamp = &marked // a termination: the durations are observed too
		r.NodeClaimTerminated(ctx, c)
	},
	"NodeRegistered": func(ctx context.Context, r *decisionmetrics.Recorder) { r.NodeRegistered(ctx, v1.NodeClaim{}) },
	"NodeClaimDisrupted": func(ctx context.Context, r *decisionmetrics.Recorder) {
		r.NodeClaimDisrupted(ctx, "Drifted", "default", "spot")
	},
	"DisruptionDecision": func(ctx context.Context, r *decisionmetrics.Recorder) {
		r.DisruptionDecision(ctx, "delete", "Empty", "empty")
	},
	"EligibleNodes": func(ctx context.Context, r *decisionmetrics.Recorder) { r.EligibleNodes(ctx, "Drifted", 1) },
	"InterruptionReceived": func(ctx context.Context, r *decisionmetrics.Recorder) {
		r.InterruptionReceived(ctx, "spot_interrupted")
	},
	"CloudProviderCall": func(ctx context.Context, r *decisionmetrics.Recorder) {
		r.CloudProviderCall(ctx, "provisioner", "Create", time.Second, "InsufficientCapacityError")
	},
	"SchedulingRound": func(ctx context.Context, r *decisionmetrics.Recorder) { r.SchedulingRound(ctx, time.Second) },
	"PendingPods":     func(ctx context.Context, r *decisionmetrics.Recorder) { r.PendingPods(ctx, 3, 1) },
	"NodesConsumingBudgets": func(ctx context.Context, r *decisionmetrics.Recorder) {
		r.NodesConsumingBudgets(ctx, "default", "Underutilized", 1)
	},
	"AllowedDisruptions": func(ctx context.Context, r *decisionmetrics.Recorder) {
		r.AllowedDisruptions(ctx, "default", "Underutilized", 2)
	},
	"BlockedNodes": func(ctx context.Context, r *decisionmetrics.Recorder) { r.BlockedNodes(ctx, "DisruptionBlocked", 2) },
	"FirstEviction": func(ctx context.Context, r *decisionmetrics.Recorder) {
		r.FirstEviction(ctx, "spot_interrupted", 4*time.Second)
	},
}

// The dashboard (infra/nodewright) may name only what the Lambdas emit:
// testdata/emf-metrics.json is that list, and this test holds it to the
// EMF lines of every recorder method, both ways.
func TestEMFMetricsFileListsWhatTheRecorderEmits(t *testing.T) {
	if got, want := reflect.TypeFor[*decisionmetrics.Recorder]().NumMethod(), len(exercise); got != want {
		t.Fatalf("Recorder has %d exported methods, the test exercises %d: add the new method to exercise", got, want)
	}
	var out bytes.Buffer
	r := decisionmetrics.New(&fakeStore{}, &out, slog.New(slog.NewTextHandler(io.Discard, nil)), "prod", func() time.Time { return t0 })
	for _, call := range exercise {
		call(t.Context(), r)
	}
	emitted := map[string]EMFMetric{}
	for line := range bytes.Lines(out.Bytes()) {
		var doc struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name string }
				}
			} `json:"_aws"`
		}
		if err := json.Unmarshal(line, &doc); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		for _, cw := range doc.AWS.CloudWatchMetrics {
			if cw.Namespace != decisionmetrics.Namespace {
				t.Errorf("namespace %q, want %q", cw.Namespace, decisionmetrics.Namespace)
			}
			for _, m := range cw.Metrics {
				for _, dims := range cw.Dimensions {
					if prev, ok := emitted[m.Name]; ok && !slices.Equal(prev.Dimensions, dims) {
						t.Errorf("metric %s emitted with dimensions %v and %v: one set per metric", m.Name, prev.Dimensions, dims)
					}
					emitted[m.Name] = EMFMetric{Name: m.Name, Dimensions: dims}
				}
			}
		}
	}
	raw, err := os.ReadFile("testdata/emf-metrics.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Namespace string      `json:"namespace"`
		Metrics   []EMFMetric `json:"metrics"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if file.Namespace != decisionmetrics.Namespace {
		t.Errorf("file namespace %q, want %q", file.Namespace, decisionmetrics.Namespace)
	}
	var got []EMFMetric
	for _, name := range slices.Sorted(maps.Keys(emitted)) {
		got = append(got, emitted[name])
	}
	if diff := cmp.Diff(file.Metrics, got); diff != "" {
		t.Errorf("testdata/emf-metrics.json does not list what the recorder emits (-file +emitted):\n%s", diff)
	}
}
