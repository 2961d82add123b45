package disruption_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// benchCluster is n on-demand nodes of typeName of the realistic "general"
// pool, limited to on-demand, on the embedded us-east-1 catalog, each running pods pods of 1 cpu
// and memory.
func benchCluster(b testing.TB, n, pods int, typeName, memory string) disruption.Input {
	b.Helper()
	classes := st.RealisticNodeClasses()[:1]
	types, _, err := catalog.Resolve(&classes[0], catalog.Options{Region: "us-east-1", SpotPriceRatio: 0.35})
	if err != nil {
		b.Fatalf("Resolve() error = %v", err)
	}
	var it *catalog.InstanceType
	for _, t := range types {
		if t.Name == typeName {
			it = t
		}
	}
	general := st.RealisticNodePools()[0]
	general.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "10%"}}
	st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand)(&general)
	c := &cluster{in: disruption.Input{
		Now: now, NodePools: []v1.NodePool{general}, NodeClasses: classes,
		InstanceTypes: map[string][]*catalog.InstanceType{classes[0].Name: types},
	}}
	zones := st.RealisticZones
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("general-%04d", i)
		c.node(name, it, zones[i%len(zones)], v1.CapacityTypeOnDemand, "general")
		for j := 0; j < pods; j++ {
			c.pod(fmt.Sprintf("web-%04d-%d", i, j), "node-"+name, st.Requests("1", memory),
				func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} })
		}
	}
	return c.in
}

// BenchmarkEvaluate measures a cluster of m6i.2xlarge nodes with spare
// room (5 of 8 cpus used: multi-node consolidation finds a command) and a
// full one of m6a.2xlarge nodes (7 cpus and 27Gi used on each, no cheaper
// type holds that: every candidate is simulated and rejected, the worst
// case for single-node consolidation).
func BenchmarkEvaluate(b *testing.B) {
	for _, bc := range []struct {
		nodes, pods  int
		typ, memory  string
		wantCommands bool
	}{
		{10, 5, "m6i.2xlarge", "2Gi", true}, {50, 5, "m6i.2xlarge", "2Gi", true}, {200, 5, "m6i.2xlarge", "2Gi", true},
		{50, 7, "m6a.2xlarge", "3900Mi", false}, {200, 7, "m6a.2xlarge", "3900Mi", false},
	} {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", bc.nodes, bc.nodes*bc.pods), func(b *testing.B) {
			in := benchCluster(b, bc.nodes, bc.pods, bc.typ, bc.memory)
			b.ReportAllocs()
			var cmds int
			for b.Loop() {
				res, err := disruption.Evaluate(b.Context(), in)
				if err != nil {
					b.Fatalf("Evaluate() error = %v", err)
				}
				cmds = len(res.Commands)
			}
			if (cmds > 0) != bc.wantCommands {
				b.Fatalf("Evaluate() found %d commands, want some: %v", cmds, bc.wantCommands)
			}
		})
	}
}
