package disruption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// Skipping simulations that cannot succeed must not change any Result:
// each cluster is evaluated with and without the shortcut.
func TestEvaluateSkipsOnlySimulationsBoundToFail(t *testing.T) {
	budget := func(nodes string) func(*disruption.Input) {
		return func(in *disruption.Input) { in.NodePools[0].Spec.Disruption.Budgets = []v1.Budget{{Nodes: nodes}} }
	}
	tests := []struct {
		name   string
		build  func(testing.TB) disruption.Input
		modify []func(*disruption.Input)
		// wantFewer: the shortcut must skip some simulations.
		wantFewer bool
	}{
		{name: "packed nodes keep their reasons with fewer simulations", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 50, 0) }, wantFewer: true},
		{name: "full identical nodes keep their reasons with fewer simulations", build: func(tb testing.TB) disruption.Input {
			return benchCluster(tb, 40, 7, "m6a.2xlarge", "3900Mi")
		}, wantFewer: true},
		{name: "underused nodes are consolidated as before", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 50, 10) }},
		{name: "every other node underused under a 100% budget", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 30, 2) }, modify: []func(*disruption.Input){budget("100%")}},
		{name: "packed nodes under a 100% budget", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 30, 0) }, modify: []func(*disruption.Input){budget("100%")}},
		{name: "nodes with spare room are deleted by multi-node consolidation", build: func(tb testing.TB) disruption.Input {
			return benchCluster(tb, 40, 5, "m6i.2xlarge", "2Gi")
		}},
		{name: "an unmanaged node with room takes the pods of packed nodes", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 30, 0) }, modify: []func(*disruption.Input){
			func(in *disruption.Input) {
				in.Nodes = append(in.Nodes, *st.Node("unmanaged", st.NodeAllocatable("64", "256Gi", "110")))
			},
		}},
		{name: "pending pods compete with the packed nodes' pods", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 30, 5) }, modify: []func(*disruption.Input){
			func(in *disruption.Input) {
				for _, name := range []string{"pending-0", "pending-1", "pending-2"} {
					in.Pods = append(in.Pods, *st.Pod(name, st.Requests("2", "8Gi")))
				}
			},
		}},
		{name: "a node being deleted leaves its pods to place", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 30, 3) }, modify: []func(*disruption.Input){
			func(in *disruption.Input) {
				in.NodeClaims[4].DeletionTimestamp = &st.NodeClaim("x").CreationTimestamp
			},
		}},
		{name: "spot nodes with spot-to-spot consolidation", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 30, 4) }, modify: []func(*disruption.Input){
			func(in *disruption.Input) {
				in.FeatureGates.SpotToSpotConsolidation = true
				in.NodePools[0].Spec.Template.Spec.Requirements = nil
				for i := range in.NodeClaims {
					in.NodeClaims[i].Labels[v1.LabelCapacityType] = v1.CapacityTypeSpot
					in.Nodes[i].Labels[v1.LabelCapacityType] = v1.CapacityTypeSpot
				}
			},
		}},
		{name: "pods with limits only and an init container", build: func(tb testing.TB) disruption.Input { return realisticCluster(tb, 30, 3) }, modify: []func(*disruption.Input){
			func(in *disruption.Input) {
				for i := range in.Pods {
					if i%7 == 0 && in.Pods[i].Namespace == st.DefaultNamespace {
						c := &in.Pods[i].Spec.Containers[0]
						c.Resources.Limits, c.Resources.Requests = c.Resources.Requests, nil
						in.Pods[i].Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: c.Resources.Limits}}}
					}
				}
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if testing.Short() && !tt.wantFewer {
				t.Skip("exhaustive evaluations take seconds")
			}
			in := tt.build(t)
			for _, m := range tt.modify {
				m(&in)
			}
			want, exhaustive, err := disruption.EvaluateCounted(t.Context(), in, true)
			if err != nil {
				t.Fatalf("EvaluateCounted(exhaustive) error = %v", err)
			}
			got, fast, err := disruption.EvaluateCounted(t.Context(), in, false)
			if err != nil {
				t.Fatalf("EvaluateCounted() error = %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Evaluate() with skipped simulations differs (-exhaustive +got):\n%s", diff)
			}
			t.Logf("%d simulations instead of %d", fast, exhaustive)
			if fast > exhaustive || (tt.wantFewer && fast >= exhaustive) {
				t.Errorf("Evaluate() ran %d simulations, exhaustive %d; want fewer: %v", fast, exhaustive, tt.wantFewer)
			}
		})
	}
}
