package scheduling_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestSolveAllocatableOracles places pods sized exactly at the allocatable
// vectors of karpenter-spec §3.6 (AL2023 defaults, gp3 20Gi root) on the
// embedded catalog: a pod that fills m5.large / m6g.large exactly launches
// it, one millicore or MiB more needs the next size.
func TestSolveAllocatableOracles(t *testing.T) {
	tests := []struct {
		name     string
		family   string
		cpu, mem string
		ds       []appsv1.DaemonSet
		want     string
	}{
		{name: "should fit a pod of exactly m5.large's allocatable (1930m, 6903Mi)", family: "m5", cpu: "1930m", mem: "6903Mi", want: "m5.large"},
		{name: "should need m5.xlarge for one more millicore", family: "m5", cpu: "1931m", mem: "1Gi", want: "m5.xlarge"},
		{name: "should need m5.xlarge for one more MiB", family: "m5", cpu: "1", mem: "6904Mi", want: "m5.xlarge"},
		{name: "should fit a pod of exactly m5.xlarge's allocatable (3920m, 14162Mi)", family: "m5", cpu: "3920m", mem: "14162Mi", want: "m5.xlarge"},
		{name: "should fit a pod of exactly m6g.large's allocatable (1930m, 6844Mi)", family: "m6g", cpu: "1930m", mem: "6844Mi", want: "m6g.large"},
		{name: "should need m6g.xlarge for one more MiB on arm64", family: "m6g", cpu: "1", mem: "6845Mi", want: "m6g.xlarge"},
		{
			name: "should subtract daemonset overhead from m5.large's allocatable", family: "m5", cpu: "1830m", mem: "6775Mi",
			ds:   []appsv1.DaemonSet{st.DaemonSet("agent", st.Requests("100m", "128Mi"))},
			want: "m5.large",
		},
		{
			name: "should need m5.xlarge when daemonset overhead leaves too little", family: "m5", cpu: "1831m", mem: "1Gi",
			ds:   []appsv1.DaemonSet{st.DaemonSet("agent", st.Requests("100m", "128Mi"))},
			want: "m5.xlarge",
		},
	}
	nc := st.EC2NodeClass(st.DefaultNodeClass)
	types, _, err := catalog.Resolve(&nc, catalog.Options{Region: "us-east-1"})
	if err != nil {
		t.Fatalf("catalog.Resolve() error = %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := st.NodePool("default", st.PoolRequirement(v1.LabelInstanceFamily, corev1.NodeSelectorOpIn, tt.family))
			in := st.Input([]v1.NodePool{pool}, types, []*corev1.Pod{st.Pod("p", st.Requests(tt.cpu, tt.mem))}, st.WithDaemonSets(tt.ds...))
			in.NodeClasses = []v1.EC2NodeClass{nc}
			res := solve(t, in)
			if len(res.NewClaims) != 1 {
				t.Fatalf("got %d claims, want 1 (unschedulable %v)", len(res.NewClaims), res.Unschedulable)
			}
			if got := res.NewClaims[0].Expected.InstanceType; got != tt.want {
				t.Errorf("cheapest candidate = %s, want %s (candidates %v)", got, tt.want, res.NewClaims[0].InstanceTypes)
			}
		})
	}
}

// TestSolveRealisticWorkload checks the realistic workload on the full
// us-east-1 catalog: every pod is placed, the GPU pod on the GPU pool and
// the arm64 pods on the arm64 pool, and every invariant holds. (Batch pods
// tolerate the batch pool's taint but may also share this round's general
// claims, as in Karpenter, where in-flight claims of any pool come first.)
func TestSolveRealisticWorkload(t *testing.T) {
	in, err := st.RealisticInput(600)
	if err != nil {
		t.Fatalf("RealisticInput() error = %v", err)
	}
	res := solve(t, in)
	if len(res.Unschedulable) != 0 {
		for uid, why := range res.Unschedulable {
			t.Errorf("pod %s unschedulable: %s", uid, why)
		}
	}
	pools := map[string]string{}
	for _, c := range res.NewClaims {
		for _, uid := range c.Pods {
			pools[uid] = c.NodePool
		}
	}
	for _, p := range in.Pods {
		want := ""
		switch {
		case p.Spec.NodeSelector[v1.LabelArch] == "arm64":
			want = "arm64"
		case p.Spec.Tolerations != nil && p.Spec.Tolerations[0].Key == "nvidia.com/gpu":
			want = "gpu"
		}
		if want != "" && pools[string(p.UID)] != want {
			t.Errorf("pod %s on pool %q, want %q", p.Name, pools[string(p.UID)], want)
		}
	}
	if cost, lb := st.LaunchCost(res), st.CatalogLowerBound(in); cost < lb {
		t.Errorf("plan costs %.2f $/h, below the lower bound %.2f: the bound or the cost is wrong", cost, lb)
	}
}
