package disruption_test

import (
	"runtime"
	"testing"

	"github.com/nodewright/nodewright/shared/disruption"
)

// allocatedBy is the bytes one Evaluate of in allocates (the heap's
// cumulative allocation count, which does not depend on timing or GC).
func allocatedBy(t *testing.T, in disruption.Input) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := disruption.Evaluate(t.Context(), in); err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Evaluating a realistic cluster grows linearly with it: single-node
// consolidation simulates every candidate, so work per simulation that
// grew with the cluster made the whole evaluation quadratic. 4x the nodes
// may allocate at most 4x the bytes. (A memory count, not a timing; it
// evaluates 2,500 nodes, so -short skips it.)
func TestEvaluateAllocationGrowsLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluates a 2,000-node cluster")
	}
	small := allocatedBy(t, realisticCluster(t, 500, 0))
	large := allocatedBy(t, realisticCluster(t, 2000, 0))
	t.Logf("500 nodes: %.1f MB, 2,000 nodes: %.1f MB (%.2fx)", float64(small)/1e6, float64(large)/1e6, float64(large)/float64(small))
	if large > 4*small {
		t.Errorf("Evaluate allocated %d bytes at 2,000 nodes, %.2fx the %d at 500; want at most 4x", large, float64(large)/float64(small), small)
	}
}
