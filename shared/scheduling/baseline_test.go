package scheduling_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestSolveNeverCostsMoreThanKarpenterStyle compares Solve with the
// Karpenter-style packing of the same semantics (first fit on the claim
// with the fewest pods, no improvement) on every workload the benchmarks
// use and on random ones: Solve must place at least as many pods and, when
// it places the same pods, never cost more.
func TestSolveNeverCostsMoreThanKarpenterStyle(t *testing.T) {
	type workload struct {
		name string
		in   scheduling.Input
	}
	var ws []workload
	for _, n := range []int{100, 1000} {
		ws = append(ws, workload{fmt.Sprintf("diverse-%d", n), st.BenchmarkInput(st.DiverseMix(n, 42), "")})
	}
	ws = append(ws,
		workload{"preference-respect-300", st.BenchmarkInput(st.PreferenceMix(300, 42), "Respect")},
		workload{"preference-ignore-1000", st.BenchmarkInput(st.PreferenceMix(1000, 42), "Ignore")})
	real, err := st.RealisticInput(500)
	if err != nil {
		t.Fatalf("RealisticInput() error = %v", err)
	}
	ws = append(ws, workload{"realistic-500", real})
	for seed := int64(1); seed <= 40; seed++ {
		ws = append(ws, workload{fmt.Sprintf("random-%d", seed), randomWorkload(rand.New(rand.NewSource(seed)))})
	}
	for _, w := range ws {
		t.Run(w.name, func(t *testing.T) {
			ours := solve(t, w.in)
			base, err := scheduling.SolveKarpenterStyle(t.Context(), w.in)
			if err != nil {
				t.Fatalf("SolveKarpenterStyle() error = %v", err)
			}
			if len(ours.Unschedulable) > len(base.Unschedulable) {
				t.Fatalf("Solve leaves %d pods unschedulable, the Karpenter-style baseline %d", len(ours.Unschedulable), len(base.Unschedulable))
			}
			if len(ours.Unschedulable) < len(base.Unschedulable) {
				return // more pods placed: costs are not comparable
			}
			oc, bc := st.LaunchCost(ours), st.LaunchCost(base)
			t.Logf("cost %.3f $/h, Karpenter-style %.3f $/h (%.3f)", oc, bc, oc/bc)
			if oc > bc+1e-9 {
				t.Errorf("Solve costs %.4f $/h, more than the Karpenter-style baseline's %.4f $/h", oc, bc)
			}
		})
	}
}
