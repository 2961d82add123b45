package decider_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestHandleRunsConsolidateAfterFromTheLastPodEvent checks that an empty
// node's consolidateAfter (2m) runs from the snapshot Node's
// lastPodEventTime (Karpenter's NodeClaim status.lastPodEventTime), not
// from its initialization two hours earlier.
func TestHandleRunsConsolidateAfterFromTheLastPodEvent(t *testing.T) {
	lastPodLeft := t0.Add(-30 * time.Second)
	tests := []struct {
		name string
		now  time.Time
		want []string // methods started
	}{
		{"should not empty a node whose last pod left 30s ago", t0, nil},
		{"should not empty a node 1s before consolidateAfter elapses", lastPodLeft.Add(2*time.Minute - time.Second), nil},
		{"should empty a node once consolidateAfter elapsed since its last pod left", lastPodLeft.Add(2*time.Minute + time.Second), []string{"Empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed(t)
			cfg, err := e.store.GetConfig(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			after := v1.MustParseNillable("2m")
			cfg.NodePools[0].Spec.Disruption.ConsolidateAfter = after
			if _, err := e.store.PutConfig(t.Context(), cfg.Config, cfg.Version); err != nil {
				t.Fatal(err)
			}
			snap, err := e.store.CurrentSnapshot(t.Context(), t0)
			if err != nil {
				t.Fatal(err)
			}
			node := snap.Nodes[0]
			at := metav1.NewTime(lastPodLeft)
			node.LastPodEventTime = &at
			part := &v1.ClusterSnapshot{ID: "part-2", Cluster: testCluster, CreatedAt: metav1.NewTime(t0), SnapshotID: "snap-2",
				Part: 0, Parts: 1, Nodes: []v1.NodeSummary{node}}
			if _, err := e.store.PutSnapshotPart(t.Context(), part, t0); err != nil {
				t.Fatal(err)
			}

			out, err := e.handler(t, tt.now).Handle(t.Context(), nil)
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			var got []string
			for _, s := range out.Started {
				got = append(got, s.Method)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("methods started mismatch (-want +got):\n%s\nwarnings: %v", diff, out.Warnings)
			}
		})
	}
}
