package scheduling_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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
