package decider_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/functions/decider"
	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
)

// eventRecords lists the stored event records as "<reason> on <object>:
// <message>", sorted, and their IDs.
func (e env) eventRecords(t *testing.T) ([]string, []string) {
	t.Helper()
	recs, err := e.store.ListEvents(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	var got, ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	for _, r := range ddbstore.Expand(recs) {
		obj := "Node " + r.Node
		switch {
		case r.NodePool != "":
			obj = "NodePool " + r.NodePool
		case r.Node == "":
			obj = "NodeClaim " + r.NodeClaim
		}
		got = append(got, r.Reason+" on "+obj+": "+r.Message)
	}
	slices.Sort(got)
	slices.Sort(ids)
	return got, ids
}

// editConfig rewrites the stored NodePool "general".
func (e env) editPool(t *testing.T, edit func(*v1.NodePool)) {
	t.Helper()
	cfg, err := e.store.GetConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	edit(&cfg.NodePools[0])
	if _, err := e.store.PutConfig(t.Context(), cfg.Config, cfg.Version); err != nil {
		t.Fatal(err)
	}
}

func TestHandleRecordsWhyNodesAreNotDisrupted(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, e env)
		want    []string
		// records is how many records hold want: the Node's and the
		// NodeClaim's event of a pair are one.
		records int
	}{
		{
			name: "should record DisruptionBlocked on a node whose NodeClaim has do-not-disrupt",
			prepare: func(t *testing.T, e env) {
				c, err := e.store.GetNodeClaim(t.Context(), "general-a")
				if err != nil {
					t.Fatal(err)
				}
				c.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
				if _, err := e.store.UpdateNodeClaim(t.Context(), c); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{
				`DisruptionBlocked on Node node-a: Cannot disrupt Node: the NodeClaim is annotated karpenter.sh/do-not-disrupt: "true"`,
				`DisruptionBlocked on NodeClaim general-a: Cannot disrupt NodeClaim: the NodeClaim is annotated karpenter.sh/do-not-disrupt: "true"`,
			},
			records: 1,
		},
		{
			name: "should record DisruptionBlocked on the NodePool for each reason its budget blocks, and nothing on its node",
			prepare: func(t *testing.T, e env) {
				e.editPool(t, func(np *v1.NodePool) { np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}} })
			},
			want: []string{
				"DisruptionBlocked on NodePool general: No allowed disruptions for disruption reason Drifted due to blocking budget",
				"DisruptionBlocked on NodePool general: No allowed disruptions for disruption reason Empty due to blocking budget",
				"DisruptionBlocked on NodePool general: No allowed disruptions for disruption reason Underutilized due to blocking budget",
			},
			records: 3,
		},
		{
			name: "should record Unconsolidatable on a node of a pool whose consolidation is disabled",
			prepare: func(t *testing.T, e env) {
				e.editPool(t, func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.NillableDuration{Raw: "Never"} })
			},
			want: []string{
				"Unconsolidatable on Node node-a: Consolidation is disabled: NodePool general has consolidateAfter: Never",
				"Unconsolidatable on NodeClaim general-a: Consolidation is disabled: NodePool general has consolidateAfter: Never",
			},
			records: 1,
		},
		{
			name: "should record FailedConsistencyCheck on a NodeClaim whose Node has less memory than it expects, and only on the NodeClaim",
			prepare: func(t *testing.T, e env) {
				c, err := e.store.GetNodeClaim(t.Context(), "general-a")
				if err != nil {
					t.Fatal(err)
				}
				c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: mustQuantity("1Gi")}
				c.Status.Capacity = corev1.ResourceList{corev1.ResourceMemory: mustQuantity("16Gi")}
				if _, err := e.store.UpdateNodeClaim(t.Context(), c); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{
				"FailedConsistencyCheck on NodeClaim general-a: expected 16Gi of resource memory, but found 8Gi (50.0% of expected)",
			},
			records: 1,
		},
		{
			name: "should record nothing when the node is disrupted",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed(t)
			if tt.prepare != nil {
				tt.prepare(t, e)
			}
			out, err := e.handler(t, t0).Handle(t.Context(), nil)
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			got, ids := e.eventRecords(t)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("event records mismatch (-want +got):\n%s", diff)
			}
			if out.Events != tt.records || len(ids) != tt.records {
				t.Errorf("Output.Events = %d, %d records stored; want %d", out.Events, len(ids), tt.records)
			}
		})
	}
}

func TestHandleRecordsABlockedNodeOncePerWindowAcrossInstances(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	e.editPool(t, func(np *v1.NodePool) { np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}} })
	// t0 starts a window (03:00 UTC); the seeded snapshot is current
	// from a minute before it.
	now := t0.Add(-50 * time.Second)
	warm := e.handlerClock(t, func() time.Time { return now })
	type run struct {
		name string
		at   time.Duration // after t0
		cold bool          // a new Lambda instance
		// wantWritten is what the run writes; wantRecords what is stored
		// after it.
		wantWritten, wantRecords int
	}
	runs := []run{
		{name: "first run", at: -50 * time.Second, wantWritten: 3, wantRecords: 3},
		{name: "10 s later", at: -40 * time.Second, wantRecords: 3},
		// The records are conditional writes, not a per-instance memory:
		// a new instance (or a duplicated, concurrent run) writes nothing.
		{name: "cold start in the same window", at: -30 * time.Second, cold: true, wantRecords: 3},
		{name: "the warm instance again", at: -20 * time.Second, wantRecords: 3},
		{name: "next window", at: 10 * time.Second, wantWritten: 3, wantRecords: 6},
		{name: "next window, 10 s later", at: 20 * time.Second, wantRecords: 6},
	}
	for _, r := range runs {
		now = t0.Add(r.at)
		h := warm
		if r.cold {
			h = e.handlerClock(t, func() time.Time { return now })
		}
		out, err := h.Handle(t.Context(), nil)
		if err != nil {
			t.Fatalf("%s: Handle() error = %v", r.name, err)
		}
		_, ids := e.eventRecords(t)
		if out.Events != r.wantWritten || len(ids) != r.wantRecords {
			t.Errorf("%s: wrote %d records, %d stored (%v); want %d and %d", r.name, out.Events, len(ids), ids, r.wantWritten, r.wantRecords)
		}
	}
}

func TestHandleSucceedsWhenEventsCannotBeWritten(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	e.editPool(t, func(np *v1.NodePool) { np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}} })
	st, err := sfnstarter.New(e.sfn, e.arn)
	if err != nil {
		t.Fatal(err)
	}
	h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1"}, decider.Deps{
		Store: failingEvents{e.store}, NodeClasses: resolver{}, Instances: noInstances{}, Starter: st,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Handle(t.Context(), nil)
	if err != nil {
		t.Fatalf("Handle() error = %v, want the run's success", err)
	}
	if out.Events != 0 {
		t.Errorf("Output.Events = %d, want 0", out.Events)
	}
}

// failingEvents is the store with every event write throttled.
type failingEvents struct{ *ddbstore.Store }

func (failingEvents) PutEventOnce(context.Context, ddbstore.Event, time.Time, time.Duration) (bool, error) {
	return false, errors.New("ProvisionedThroughputExceededException")
}

// handlerClock is a handler over e whose clock is now.
func (e env) handlerClock(t *testing.T, now func() time.Time) *decider.Handler {
	t.Helper()
	st, err := sfnstarter.New(e.sfn, e.arn)
	if err != nil {
		t.Fatal(err)
	}
	h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1"}, decider.Deps{
		Store: e.store, NodeClasses: resolver{}, Instances: noInstances{}, Starter: st,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// puts counts the handler store's PutItem calls so far, by partition
// (after the cluster).
func (e env) puts() map[string]int {
	n := map[string]int{}
	for _, c := range e.calls.Calls() {
		if c.Op == "PutItem" {
			n[strings.TrimPrefix(c.PartitionKey, testCluster+"#")]++
		}
	}
	return n
}

// TestHandleWritesOnlyWhatChanged checks that evaluations of an unchanged
// cluster write nothing after the first: not its event records
// (Unconsolidatable, written again only in the next 15-minute window, as
// Karpenter deduplicates them), not its gauges, not the EC2NodeClass
// resolution. The kept consolidation outcome (decider.ConsolidatedKey) is
// written when consolidation simulates: at the first run and once it is
// disruption.ConsolidationRevalidate old.
func TestHandleWritesOnlyWhatChanged(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	e.editPool(t, func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.NillableDuration{Raw: "Never"} })
	now := t0
	h := e.handlerWithMetrics(t, func() time.Time { return now })
	runs := []struct {
		name string
		at   time.Duration // after t0
		// wantEvents is what the run writes to the event partition;
		// wantNone, that it writes nothing at all.
		wantEvents int
		wantNone   bool
		wantKept   bool
	}{
		// The Node's and the NodeClaim's Unconsolidatable are one
		// record, one PutItem.
		{name: "first run", at: 0, wantEvents: 1, wantKept: true},
		{name: "a minute later", at: time.Minute, wantNone: true},
		{name: "14 minutes later", at: 14 * time.Minute, wantNone: true, wantKept: true},
		{name: "the next 15-minute window", at: 15 * time.Minute, wantEvents: 1},
		{name: "a minute into it", at: 16 * time.Minute, wantNone: true},
	}
	for _, r := range runs {
		now = t0.Add(r.at)
		before := e.puts()
		out, err := h.Handle(t.Context(), nil)
		if err != nil {
			t.Fatalf("%s: Handle() error = %v", r.name, err)
		}
		after := e.puts()
		wrote := map[string]int{}
		for pk, n := range after {
			if d := n - before[pk]; d > 0 {
				wrote[pk] = d
			}
		}
		if wrote["EVENT"] != r.wantEvents || out.Events != r.wantEvents {
			t.Errorf("%s: %d event PutItem, Output.Events %d; want %d", r.name, wrote["EVENT"], out.Events, r.wantEvents)
		}
		const keptPK = "PAYLOAD#" + decider.ConsolidatedKey
		if got := wrote[keptPK] > 0; got != r.wantKept {
			t.Errorf("%s: kept consolidation outcome written %v, want %v", r.name, got, r.wantKept)
		}
		delete(wrote, keptPK)
		if r.wantNone && len(wrote) != 0 {
			t.Errorf("%s: PutItem by partition %v, want none: the cluster did not change", r.name, wrote)
		}
		if r.at == 0 && (wrote["METRIC"] == 0 || wrote["NODECLASSSTATUS"] == 0) {
			t.Errorf("first run: PutItem by partition %v, want the gauges and the class resolution written", wrote)
		}
	}
	// One pair per window.
	got, _ := e.eventRecords(t)
	onNode := "Unconsolidatable on Node node-a: Consolidation is disabled: NodePool general has consolidateAfter: Never"
	onClaim := "Unconsolidatable on NodeClaim general-a: Consolidation is disabled: NodePool general has consolidateAfter: Never"
	if diff := cmp.Diff([]string{onNode, onNode, onClaim, onClaim}, got); diff != "" {
		t.Errorf("event records mismatch (-want +got):\n%s", diff)
	}
}

// TestHandleRetriesAnEventWriteThatFailed checks that a record whose write
// failed is written by the next run, and not again after it succeeded.
func TestHandleRetriesAnEventWriteThatFailed(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	e.editPool(t, func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.NillableDuration{Raw: "Never"} })
	store := &flakyEvents{Store: e.handlerStore, fail: 1}
	now := t0
	h := e.handlerOver(t, store, func() time.Time { return now })
	// The Node's and the NodeClaim's Unconsolidatable are one record.
	for i, want := range []struct{ tries, written int }{
		{tries: 1, written: 0}, // the write throttled
		{tries: 1, written: 1}, // again
		{tries: 0, written: 0},
	} {
		now = t0.Add(time.Duration(i) * time.Minute)
		store.tries = 0
		out, err := h.Handle(t.Context(), nil)
		if err != nil {
			t.Fatalf("run %d: Handle() error = %v", i, err)
		}
		if store.tries != want.tries || out.Events != want.written {
			t.Errorf("run %d: %d event writes tried, %d written; want %d and %d", i, store.tries, out.Events, want.tries, want.written)
		}
	}
	if got, ids := e.eventRecords(t); len(got) != 2 || len(ids) != 1 {
		t.Errorf("event records = %v in %v, want both in one", got, ids)
	}
}

// flakyEvents is the store with its first fail event writes throttled.
type flakyEvents struct {
	*ddbstore.Store
	fail, tries int
}

func (f *flakyEvents) PutEventOnce(ctx context.Context, e ddbstore.Event, now time.Time, ttl time.Duration) (bool, error) {
	f.tries++
	if f.fail > 0 {
		f.fail--
		return false, errors.New("ProvisionedThroughputExceededException")
	}
	return f.Store.PutEventOnce(ctx, e, now, ttl)
}

// handlerWithMetrics is a handler over e's recorded store, with its
// decision metrics stored there too, whose clock is now.
func (e env) handlerWithMetrics(t *testing.T, now func() time.Time) *decider.Handler {
	t.Helper()
	st, err := sfnstarter.New(e.sfn, e.arn)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1"}, decider.Deps{
		Store: e.handlerStore, NodeClasses: resolver{}, Instances: noInstances{}, Starter: st, Log: log, Now: now,
		Metrics: decisionmetrics.New(e.handlerStore, nil, log, testCluster, now),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// handlerOver is a handler over store whose clock is now.
func (e env) handlerOver(t *testing.T, store decider.Store, now func() time.Time) *decider.Handler {
	t.Helper()
	st, err := sfnstarter.New(e.sfn, e.arn)
	if err != nil {
		t.Fatal(err)
	}
	h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1"}, decider.Deps{
		Store: store, NodeClasses: resolver{}, Instances: noInstances{}, Starter: st,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}
