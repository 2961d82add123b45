package disruption_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodewright/nodewright/internal/measure"
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

// realisticCluster is n on-demand m6a.2xlarge nodes of the realistic
// "general" pool (10% Underutilized budget) on the embedded us-east-1
// catalog, with the realistic DaemonSets' pods bound to every node and
// PodDisruptionBudgets on three apps. A packed node runs 4 web (1 cpu,
// 3Gi), 2 api (1500m, 4Gi) and 1 worker (500m, 6Gi) pod: no cheaper type
// holds them and the other nodes have no room, so nothing consolidates.
// Every underused-th node (0: none) runs only 2 web pods. Every 25th node
// also runs a db pod (100m, 128Mi) whose PDB allows no disruption, which
// blocks that node.
func realisticCluster(b testing.TB, n, underused int) disruption.Input {
	b.Helper()
	classes := st.RealisticNodeClasses()[:1]
	types, _, err := catalog.Resolve(&classes[0], catalog.Options{Region: "us-east-1", SpotPriceRatio: 0.35})
	if err != nil {
		b.Fatalf("Resolve() error = %v", err)
	}
	var it *catalog.InstanceType
	for _, t := range types {
		if t.Name == "m6a.2xlarge" {
			it = t
		}
	}
	general := st.RealisticNodePools()[0]
	general.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "10%"}}
	st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand)(&general)
	c := &cluster{in: disruption.Input{
		Now: now, NodePools: []v1.NodePool{general}, NodeClasses: classes,
		InstanceTypes: map[string][]*catalog.InstanceType{classes[0].Name: types},
		DaemonSets:    st.RealisticDaemonSets(),
		PodDisruptionBudgets: []policyv1.PodDisruptionBudget{
			pdb("web", map[string]string{"app": "web"}, nil, intOrStr(intstr.FromString("10%"))),
			pdb("api", map[string]string{"app": "api"}, intOrStr(intstr.FromString("50%")), nil),
			pdb("db", map[string]string{"app": "db"}, intOrStr(intstr.FromString("100%")), nil),
		},
	}}
	app := func(name string) st.PodOption {
		return func(p *corev1.Pod) { p.Labels = map[string]string{"app": name} }
	}
	zones := st.RealisticZones
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("general-%04d", i)
		node := "node-" + name
		c.node(name, it, zones[i%len(zones)], v1.CapacityTypeOnDemand, "general")
		for _, ds := range c.in.DaemonSets[:3] { // nvidia-device-plugin needs a GPU
			req := ds.Spec.Template.Spec.Containers[0].Resources.Requests
			c.pod(ds.Name+"-"+name, node, st.Namespace(ds.Namespace), st.Resources(req), st.OwnedBy("apps/v1", "DaemonSet", ds.Name))
		}
		if underused > 0 && i%underused == underused-1 {
			for j := 0; j < 2; j++ {
				c.pod(fmt.Sprintf("web-%04d-%d", i, j), node, st.Requests("1", "3Gi"), app("web"))
			}
			continue
		}
		for j := 0; j < 4; j++ {
			c.pod(fmt.Sprintf("web-%04d-%d", i, j), node, st.Requests("1", "3Gi"), app("web"))
		}
		for j := 0; j < 2; j++ {
			c.pod(fmt.Sprintf("api-%04d-%d", i, j), node, st.Requests("1500m", "4Gi"), app("api"))
		}
		c.pod(fmt.Sprintf("worker-%04d", i), node, st.Requests("500m", "6Gi"), app("worker"))
		if i%25 == 24 {
			c.pod(fmt.Sprintf("db-%04d", i), node, st.Requests("100m", "128Mi"), app("db"))
		}
	}
	return c.in
}

// BenchmarkEvaluateRealistic measures Evaluate on realistic clusters
// (DaemonSets, PodDisruptionBudgets): packed ones of 50 to 5,000 nodes
// (11 pods each), where every candidate is rejected (the worst case:
// single-node consolidation simulates every node), and one with some
// underused nodes, where multi-node consolidation finds a command. It
// reports the peak live heap (peak-live-B, the input included) beside
// the disruption Lambda's 2 GB (BENCHMARKS.md). The spread case adds to
// each packed node one pod of a Deployment spread one per node by a
// required hostname anti-affinity (the shape of docs/cost.md's scenario):
// a topology group in every simulation, so every node is built in each.
func BenchmarkEvaluateRealistic(b *testing.B) {
	for _, bc := range []struct {
		name             string
		nodes, underused int
		wantCommands     bool
		spread           bool
	}{
		{"packed/nodes=50", 50, 0, false, false},
		{"packed/nodes=200", 200, 0, false, false},
		{"packed/nodes=500", 500, 0, false, false},
		{"packed/nodes=1000", 1000, 0, false, false},
		{"packed/nodes=2000", 2000, 0, false, false},
		{"packed/nodes=5000", 5000, 0, false, false},
		{"underused/nodes=200", 200, 10, true, false},
		{"spread/nodes=100", 100, 0, false, true},
		{"spread/nodes=200", 200, 0, false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := realisticCluster(b, bc.nodes, bc.underused)
			if bc.spread {
				edge := map[string]string{"app": "edge"}
				for i := range bc.nodes {
					p := st.Pod(fmt.Sprintf("edge-%04d", i), st.BoundTo(fmt.Sprintf("node-general-%04d", i)), ready,
						st.Requests("100m", "128Mi"), st.Labels(edge), st.PodAntiAffinity(v1.LabelHostname, edge))
					in.Pods = append(in.Pods, *p)
				}
			}
			b.ReportAllocs()
			var cmds int
			peak := measure.LiveHeap()
			cpu := measure.CPU()
			for b.Loop() {
				res, err := disruption.Evaluate(b.Context(), in)
				if err != nil {
					b.Fatalf("Evaluate() error = %v", err)
				}
				cmds = len(res.Commands)
			}
			live := peak()
			b.ReportMetric(cpu().Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(live), "peak-live-B")
			if (cmds > 0) != bc.wantCommands {
				b.Fatalf("Evaluate() found %d commands, want some: %v", cmds, bc.wantCommands)
			}
		})
	}
}

// BenchmarkEvaluateConsolidated is the evaluation of a packed realistic
// cluster consolidation already found nothing to do in, one minute
// earlier (Input.Consolidated): the fingerprint instead of the
// simulations. Compare with BenchmarkEvaluateRealistic's packed cases.
func BenchmarkEvaluateConsolidated(b *testing.B) {
	for _, nodes := range []int{50, 200, 1000} {
		b.Run(fmt.Sprintf("packed/nodes=%d", nodes), func(b *testing.B) {
			in := realisticCluster(b, nodes, 0)
			first, err := disruption.Evaluate(b.Context(), in)
			if err != nil || first.Consolidated == nil {
				b.Fatalf("Evaluate() = consolidated %v, error %v; want an outcome to keep", first.Consolidated, err)
			}
			in.Consolidated, in.Now = first.Consolidated, in.Now.Add(time.Minute)
			b.ReportAllocs()
			cpu := measure.CPU()
			var skipped bool
			for b.Loop() {
				res, err := disruption.Evaluate(b.Context(), in)
				if err != nil {
					b.Fatalf("Evaluate() error = %v", err)
				}
				skipped = res.ConsolidationSkipped
			}
			b.ReportMetric(cpu().Seconds()/float64(b.N), "cpu-s/op")
			if !skipped {
				b.Fatal("Evaluate() simulated again; want the kept outcome to stand")
			}
		})
	}
}
