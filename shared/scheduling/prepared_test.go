package scheduling_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// realisticCluster is RealisticInput(pods) plus nodes m6i.2xlarge nodes of
// the general pool, each running two of its own 1 cpu pods.
func realisticCluster(t *testing.T, pods, nodes int) scheduling.Input {
	t.Helper()
	in, err := st.RealisticInput(pods)
	if err != nil {
		t.Fatalf("RealisticInput() error = %v", err)
	}
	var it *catalog.InstanceType
	for _, c := range in.InstanceTypes {
		for _, x := range c {
			if x.Name == "m6i.2xlarge" {
				it = x
			}
		}
	}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("general-%d", i)
		n := st.Node(name, st.NodeType(it, st.RealisticZones[i%3], "on-demand"), st.ManagedBy("general"))
		var bound []*corev1.Pod
		for j := 0; j < 2; j++ {
			bound = append(bound, st.Pod(fmt.Sprintf("bound-%d-%d", i, j), st.Requests("1", "2Gi"), st.BoundTo(name)))
		}
		in.Nodes = append(in.Nodes, st.Existing(n, bound...))
	}
	return in
}

// A prepared solve must return exactly what Solve returns for the same
// Input, whatever pods it places and whichever nodes are marked for
// deletion.
func TestPreparedSolveMatchesSolve(t *testing.T) {
	base := realisticCluster(t, 40, 6)
	tests := []struct {
		name   string
		modify func(in *scheduling.Input)
	}{
		{name: "same input as prepared", modify: func(*scheduling.Input) {}},
		{name: "fewer pods than prepared", modify: func(in *scheduling.Input) { in.Pods = in.Pods[:7] }},
		{name: "no pods", modify: func(in *scheduling.Input) { in.Pods = nil }},
		{name: "a node marked for deletion", modify: func(in *scheduling.Input) {
			in.Nodes = append([]scheduling.ExistingNode(nil), in.Nodes...)
			in.Nodes[2].MarkedForDeletion = true
		}},
		{name: "every node marked for deletion", modify: func(in *scheduling.Input) {
			in.Nodes = append([]scheduling.ExistingNode(nil), in.Nodes...)
			for i := range in.Nodes {
				in.Nodes[i].MarkedForDeletion = true
			}
		}},
		{name: "a node bringing a resource no instance type has (nothing reused)", modify: func(in *scheduling.Input) {
			in.Nodes = append([]scheduling.ExistingNode(nil), in.Nodes...)
			n := in.Nodes[0].Node.DeepCopy()
			n.Status.Allocatable["example.com/dongle"] = resource.MustParse("1")
			in.Nodes[0].Node = n
			in.Pods = append(in.Pods[:5:5], st.Pod("dongle", st.Resources(corev1.ResourceList{"example.com/dongle": resource.MustParse("1")})))
		}},
		{name: "preferences ignored", modify: func(in *scheduling.Input) {
			in.Options.PreferencePolicy = scheduling.PreferencePolicyIgnore
		}},
	}
	prep, err := scheduling.Prepare(t.Context(), base)
	if err != nil {
		t.Fatalf("Prepare() error = %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			tt.modify(&in)
			want, err := scheduling.Solve(t.Context(), in)
			if err != nil {
				t.Fatalf("Solve() error = %v", err)
			}
			got, err := prep.Solve(t.Context(), in)
			if err != nil {
				t.Fatalf("Prepared.Solve() error = %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Prepared.Solve() mismatch (-Solve +Prepared.Solve):\n%s", diff)
			}
			if len(want.NewClaims)+len(want.Placements) == 0 && len(in.Pods) > 0 {
				t.Errorf("Solve() placed nothing; the case does not exercise placement")
			}
		})
	}
}

func TestPreparedSolveErrors(t *testing.T) {
	base := realisticCluster(t, 5, 2)
	prep, err := scheduling.Prepare(t.Context(), base)
	if err != nil {
		t.Fatalf("Prepare() error = %v", err)
	}
	in := base
	in.Options.MinValuesPolicy = "Sometimes"
	_, want := scheduling.Solve(t.Context(), in)
	_, got := prep.Solve(t.Context(), in)
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Errorf("Prepared.Solve() error = %v, want Solve's %v", got, want)
	}
	bad := base
	bad.Options.PreferencePolicy = "Maybe"
	if _, err := scheduling.Prepare(t.Context(), bad); err == nil {
		t.Errorf("Prepare() with an invalid preference policy error = nil, want Solve's error")
	}
}

// packedCluster is the general pool with nodes m6i.2xlarge nodes: every
// third runs one 1 cpu pod (room for more), the others seven (no room
// for a 1 cpu pod), plus an in-flight NodeClaim and a cordoned node.
// Its pending pods carry no topology constraint, so a prepared solve
// builds only the nodes some pod fits in.
func packedCluster(t *testing.T, nodes int) scheduling.Input {
	t.Helper()
	in := realisticCluster(t, 0, 0)
	var it *catalog.InstanceType
	for _, c := range in.InstanceTypes {
		for _, x := range c {
			if x.Name == "m6i.2xlarge" {
				it = x
			}
		}
	}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("general-%d", i)
		n := st.Node(name, st.NodeType(it, st.RealisticZones[i%3], "on-demand"), st.ManagedBy("general"))
		if i == 4 {
			n.Spec.Unschedulable = true
		}
		count := 7
		if i%3 == 0 {
			count = 1
		}
		var bound []*corev1.Pod
		for j := 0; j < count; j++ {
			bound = append(bound, st.Pod(fmt.Sprintf("bound-%d-%d", i, j), st.Requests("1", "2Gi"), st.BoundTo(name)))
		}
		in.Nodes = append(in.Nodes, st.Existing(n, bound...))
	}
	claim := st.NodeClaim("general-inflight", st.ClaimType(it, st.RealisticZones[0], "on-demand"), st.ClaimPool("general"))
	in.Nodes = append(in.Nodes, st.InFlight(claim))
	for i := 0; i < 6; i++ {
		in.Pods = append(in.Pods, st.Pod(fmt.Sprintf("pending-%d", i), st.Requests("1", "3Gi")))
	}
	return in
}

// A prepared solve that skips the nodes no pod fits in returns exactly
// what Solve returns, and skips them only when nothing else (topology)
// needs them.
func TestPreparedSolveSkippingFullNodesMatchesSolve(t *testing.T) {
	base := packedCluster(t, 12)
	mark := func(is ...int) func(in *scheduling.Input) {
		return func(in *scheduling.Input) {
			in.Nodes = append([]scheduling.ExistingNode(nil), in.Nodes...)
			for _, i := range is {
				in.Nodes[i].MarkedForDeletion = true
			}
		}
	}
	tests := []struct {
		name   string
		modify func(in *scheduling.Input)
		// built is how many nodes the prepared solve builds; -1: all
		// usable ones (nothing skipped).
		built int
	}{
		{name: "small pods fit in the nodes with room and the in-flight claim", modify: func(*scheduling.Input) {}, built: 5},
		{name: "nodes with room marked for deletion", modify: mark(0, 3, 6), built: 2},
		{name: "a pod too large for every node", modify: func(in *scheduling.Input) {
			in.Pods = []*corev1.Pod{st.Pod("huge", st.Requests("7", "20Gi"))}
		}, built: 1},
		{name: "a pod of 500m fits on more nodes", modify: func(in *scheduling.Input) {
			in.Pods = append(in.Pods[:2:2], st.Pod("half", st.Requests("500m", "1Gi")))
		}, built: 13},
		{name: "no pods", modify: func(in *scheduling.Input) { in.Pods = nil }, built: 0},
		{name: "only pods the solver ignores", modify: func(in *scheduling.Input) {
			in.Pods = []*corev1.Pod{st.Pod("bound", st.Requests("1", "1Gi"), st.BoundTo("elsewhere"))}
		}, built: 0},
		{name: "pending pods with zone spread need every node", modify: func(in *scheduling.Input) {
			in.Pods = []*corev1.Pod{
				st.Pod("spread-0", st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": "s"}), st.TopologySpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, map[string]string{"app": "s"})),
				st.Pod("spread-1", st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": "s"}), st.TopologySpread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, map[string]string{"app": "s"})),
			}
		}, built: -1},
		{name: "a bound pod with anti-affinity needs every node", modify: func(in *scheduling.Input) {
			in.Nodes = append([]scheduling.ExistingNode(nil), in.Nodes...)
			pods := append([]*corev1.Pod(nil), in.Nodes[1].Pods...)
			pods[0] = st.Pod("anti", st.Requests("1", "2Gi"), st.BoundTo(in.Nodes[1].Node.Name),
				st.Labels(map[string]string{"app": "a"}), st.PodAntiAffinity(corev1.LabelTopologyZone, map[string]string{"app": "b"}))
			in.Nodes[1].Pods = pods
			in.Pods = append(in.Pods, st.Pod("b", st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": "b"})))
		}, built: -1},
		{name: "pool limits count the skipped nodes", modify: func(in *scheduling.Input) {
			in.NodePools = append([]v1.NodePool(nil), in.NodePools...)
			in.NodePools[0].Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("100")}
		}, built: 5},
	}
	prep, err := scheduling.Prepare(t.Context(), base)
	if err != nil {
		t.Fatalf("Prepare() error = %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			tt.modify(&in)
			want, err := scheduling.Solve(t.Context(), in)
			if err != nil {
				t.Fatalf("Solve() error = %v", err)
			}
			got, err := prep.Solve(t.Context(), in)
			if err != nil {
				t.Fatalf("Prepared.Solve() error = %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Prepared.Solve() mismatch (-Solve +Prepared.Solve):\n%s", diff)
			}
			built, err := scheduling.PreparedNodesBuilt(t.Context(), prep, in)
			if err != nil {
				t.Fatalf("PreparedNodesBuilt() error = %v", err)
			}
			usable := 0
			for _, n := range in.Nodes {
				if !n.MarkedForDeletion {
					usable++
				}
			}
			if wantBuilt := tt.built; (wantBuilt < 0 && built != usable) || (wantBuilt >= 0 && built != wantBuilt) {
				t.Errorf("prepared solve built %d of %d usable nodes, want %d (-1: all)", built, usable, wantBuilt)
			}
		})
	}
}
