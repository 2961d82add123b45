package decider_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/functions/decider"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/disruption"
)

// snapshotWithPods stores snapshot id, seed's Node with pods bound to it,
// as current at now.
func (e env) snapshotWithPods(t *testing.T, id string, now time.Time, pods ...v1.PodSummary) {
	t.Helper()
	claims, err := e.store.ListNodeClaims(t.Context())
	if err != nil || len(claims) != 1 {
		t.Fatalf("ListNodeClaims() = %d, %v; want seed's", len(claims), err)
	}
	node := seededNode(claims[0].Labels, claims[0].CreationTimestamp)
	part := &v1.ClusterSnapshot{ID: id, Cluster: testCluster, CreatedAt: metav1.NewTime(now), SnapshotID: id,
		Part: 0, Parts: 1, Nodes: []v1.NodeSummary{v1.SummarizeNode(node)}, Pods: pods}
	if _, err := e.store.PutSnapshotPart(t.Context(), part, now); err != nil {
		t.Fatal(err)
	}
}

// protectedPod is a running pod on node-a with karpenter.sh/do-not-disrupt,
// so node-a is no candidate and consolidation finds nothing.
func protectedPod(name string) v1.PodSummary {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{v1.AnnotationDoNotDisrupt: "true"}, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "main"}}},
	}
	return v1.SummarizePod(p)
}

// kept reads the stored consolidation outcome; nil for none or "null".
func (e env) kept(t *testing.T, now time.Time) *disruption.Consolidated {
	t.Helper()
	data, err := e.store.GetPayload(t.Context(), decider.ConsolidatedKey, now)
	if errors.Is(err, ddbstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var c *disruption.Consolidated
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("kept outcome %q: %v", data, err)
	}
	return c
}

// TestHandleKeepsTheConsolidationOutcomeBetweenRuns runs the evaluation
// every minute over an unchanged cluster (each minute a new snapshot of
// the same content, as the forwarder posts them): consolidation simulates
// at the first run, stands for the next ones until five minutes passed,
// simulates again, and a run whose kept outcome cannot be read simulates
// as if there were none.
func TestHandleKeepsTheConsolidationOutcomeBetweenRuns(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	steps := []struct {
		at      time.Duration
		corrupt bool
		skipped bool
	}{
		{at: 0, skipped: false},
		{at: time.Minute, skipped: true},
		{at: 4 * time.Minute, skipped: true},
		{at: 5 * time.Minute, skipped: false}, // disruption.ConsolidationRevalidate
		{at: 6 * time.Minute, skipped: true},
		{at: 7 * time.Minute, corrupt: true, skipped: false},
		{at: 8 * time.Minute, skipped: true},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		e.snapshotWithPods(t, "snap-"+s.at.String(), now, protectedPod("db-0"))
		if s.corrupt {
			if err := e.store.PutPayload(t.Context(), decider.ConsolidatedKey, []byte("{not json"), now, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		out, err := e.handler(t, now).Handle(t.Context(), nil)
		if err != nil {
			t.Fatalf("at +%v: Handle() error = %v", s.at, err)
		}
		if len(out.Started) != 0 || out.ConsolidationSkipped != s.skipped {
			t.Errorf("at +%v: Started %+v, ConsolidationSkipped %v; want none, %v", s.at, out.Started, out.ConsolidationSkipped, s.skipped)
		}
		kept := e.kept(t, now)
		if kept == nil || kept.Fingerprint == "" || len(kept.Reasons) != 1 || kept.Reasons[0].NodeClaim != "general-a" {
			t.Fatalf("at +%v: kept outcome = %+v, want one standing for general-a", s.at, kept)
		}
		if !s.skipped && !kept.EvaluatedAt.Equal(now) {
			t.Errorf("at +%v: kept outcome from %v, want this run's", s.at, kept.EvaluatedAt)
		}
	}
}

// TestHandleDropsTheConsolidationOutcomeWhenTheClusterChanges: the
// protected pod leaves, node-a is empty and emptiness deletes it; the kept
// outcome is dropped, so a later run cannot take it.
func TestHandleDropsTheConsolidationOutcomeWhenTheClusterChanges(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	e.snapshotWithPods(t, "snap-1", t0, protectedPod("db-0"))
	if _, err := e.handler(t, t0).Handle(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if e.kept(t, t0) == nil {
		t.Fatal("no outcome kept after a run that found nothing to consolidate")
	}
	later := t0.Add(time.Minute)
	e.snapshotWithPods(t, "snap-2", later)
	out, err := e.handler(t, later).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.ConsolidationSkipped || len(out.Started) != 1 || out.Started[0].Method != "Empty" {
		t.Fatalf("Handle() = skipped %v, started %+v; want emptiness's command", out.ConsolidationSkipped, out.Started)
	}
	if k := e.kept(t, later); k != nil {
		t.Errorf("kept outcome = %+v after a command, want it dropped", k)
	}
}
