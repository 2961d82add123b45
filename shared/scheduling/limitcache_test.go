package scheduling_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestRejectionsAreCached checks that pods rejected for the same reason
// (same class, same requests, no placement in between) do not each run the
// full placement search again: the scheduling loop makes one search per
// placed pod plus at most one per pass for each rejected group.
func TestRejectionsAreCached(t *testing.T) {
	tests := []struct {
		name        string
		pool        v1.NodePool
		pods        int
		wantPlaced  int
		wantReason  string
		maxSearches int
	}{
		{
			name:        "should search once per pass for identical pods rejected by a binding cpu limit",
			pool:        st.NodePool("default", st.PoolLimits("cpu", "4")),
			pods:        40,
			wantPlaced:  4,
			wantReason:  `NodePool "default": limit cpu 4 reached (4 in use)`,
			maxSearches: 4 + 2,
		},
		{
			name:        "should print a binding limit as written, not with an SI suffix (1000, not 1k)",
			pool:        st.NodePool("default", st.PoolLimits("cpu", "1000")),
			pods:        1010,
			wantPlaced:  1000,
			wantReason:  `NodePool "default": limit cpu 1000 reached (1000 in use)`,
			maxSearches: 1000 + 2,
		},
		{
			name:        "should search once per pass for identical pods rejected by a binding nodes limit",
			pool:        st.NodePool("default", st.PoolLimits("nodes", "1")),
			pods:        40,
			wantPlaced:  16,
			wantReason:  `NodePool "default": limit nodes 1 reached (1 in use)`,
			maxSearches: 16 + 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{tt.pool}, pods("web", tt.pods, st.Requests("1", "1Gi")))
			searches, res, err := scheduling.PlacementSearches(t.Context(), in)
			if err != nil {
				t.Fatalf("PlacementSearches() error = %v", err)
			}
			if err := st.CheckResult(in, res); err != nil {
				t.Fatalf("plan broke an invariant: %v", err)
			}
			placed := 0
			for _, c := range res.NewClaims {
				placed += len(c.Pods)
			}
			reasons := map[string]int{}
			for _, why := range res.Unschedulable {
				reasons[why]++
			}
			want := map[string]int{tt.wantReason: tt.pods - tt.wantPlaced}
			if placed != tt.wantPlaced {
				t.Errorf("placed %d pods, want %d", placed, tt.wantPlaced)
			}
			if diff := cmp.Diff(want, reasons); diff != "" {
				t.Errorf("unschedulable reasons mismatch (-want +got):\n%s", diff)
			}
			if searches > tt.maxSearches {
				t.Errorf("scheduling loop made %d placement searches, want at most %d", searches, tt.maxSearches)
			}
		})
	}
}

// TestClaimRejectionsAreCached checks that pods of different classes
// rejected by the same claims for the same reason (a binding limit) do not
// each scan every claim's candidate list again.
func TestClaimRejectionsAreCached(t *testing.T) {
	tests := []struct {
		name     string
		pods     int
		maxScans int
	}{
		{name: "should scan each claim once for 40 distinct classes rejected by a binding cpu limit", pods: 40, maxScans: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []*corev1.Pod
			for i := 0; i < tt.pods; i++ {
				ps = append(ps, st.Pod(fmt.Sprintf("web-%d", i), st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": fmt.Sprintf("app-%d", i)})))
			}
			in := input([]v1.NodePool{st.NodePool("default", st.PoolLimits("cpu", "4"))}, ps)
			scans, err := scheduling.ClaimTypeScans(t.Context(), in)
			if err != nil {
				t.Fatalf("ClaimTypeScans() error = %v", err)
			}
			if scans > tt.maxScans {
				t.Errorf("scheduling loop scanned claims' candidate lists %d times, want at most %d", scans, tt.maxScans)
			}
		})
	}
}
