package schedulingtest_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

func TestPodRequests(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string // cpu/memory
	}{
		{"should sum regular containers", st.Pod("a", st.Requests("500m", "1Gi"), st.Container("b", "250m", "512Mi")), "750m/1536Mi"},
		{"should take a larger init container instead of the sum", st.Pod("a", st.Requests("250m", "512Mi"), st.InitContainer("i", "2", "2Gi")), "2/2Gi"},
		{"should add native sidecars to the running sum", st.Pod("a", st.Requests("500m", "1Gi"), st.Sidecar("s", "100m", "128Mi")), "600m/1152Mi"},
		{"should count sidecars started before an init container into its step", st.Pod("a", st.Requests("100m", "100Mi"),
			st.Sidecar("s", "1", "1Gi"), st.InitContainer("i", "1500m", "1Gi")), "2500m/2Gi"},
		{"should add the pod overhead", st.Pod("a", st.Requests("500m", "1Gi"), st.Overhead("250m", "160Mi")), "750m/1184Mi"},
		{"should count limits as requests when no request is set", st.Pod("a", st.Limits("1", "2Gi")), "1/2Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl := st.PodRequests(tt.pod)
			mem := rl[corev1.ResourceMemory]
			got := rl.Cpu().String() + "/" + mem.String()
			if got != tt.want {
				t.Errorf("PodRequests() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestFixtureDefaults(t *testing.T) {
	p := st.Pod("web-0", st.Namespace("shop"))
	np := st.NodePool("batch", st.PoolWeight(10), st.PoolTaint("workload", "batch", corev1.TaintEffectNoSchedule),
		st.PoolLimits("cpu", "100", "nodes", "3"))
	ds := st.DaemonSet("fluent-bit", st.Requests("100m", "200Mi"))
	nodesLimit := np.Spec.Limits["nodes"]
	claim := st.NodeClaim("claim-1", st.ClaimType(st.InstanceType("m5.large", "2", "8Gi", "29", 0.096), "us-east-1a", "spot"))
	got := map[string]any{
		"pod namespace":       p.Namespace,
		"pod uid is stable":   p.UID == st.Pod("web-0", st.Namespace("shop")).UID,
		"pod uid differs":     p.UID != st.Pod("web-0").UID,
		"pod unschedulable":   p.Status.Conditions[0].Reason,
		"pool weight":         *np.Spec.Weight,
		"pool class":          np.Spec.Template.Spec.NodeClassRef.Name,
		"pool nodes limit":    nodesLimit.String(),
		"pool taint":          np.Spec.Template.Spec.Taints[0].ToString(),
		"daemonset namespace": ds.Namespace,
		"daemonset cpu":       ds.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(),
		"claim zone":          claim.Labels[v1.LabelTopologyZone],
		"claim allocatable":   claim.Status.Allocatable.Cpu().String(),
		"input now":           st.Input(nil, nil, nil).Now.Equal(st.Epoch),
	}
	want := map[string]any{
		"pod namespace":       "shop",
		"pod uid is stable":   true,
		"pod uid differs":     true,
		"pod unschedulable":   corev1.PodReasonUnschedulable,
		"pool weight":         int32(10),
		"pool class":          "default",
		"pool nodes limit":    "3",
		"pool taint":          "workload=batch:NoSchedule",
		"daemonset namespace": "kube-system",
		"daemonset cpu":       "100m",
		"claim zone":          "us-east-1a",
		"claim allocatable":   "2",
		"input now":           true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fixture defaults mismatch (-want +got):\n%s", diff)
	}
}

func TestRealisticPods(t *testing.T) {
	pods := st.RealisticPods(1000)
	if len(pods) != 1000 {
		t.Fatalf("RealisticPods(1000) returned %d pods", len(pods))
	}
	groups := map[string]int{}
	names := map[string]bool{}
	for _, p := range pods {
		if names[p.Name] {
			t.Fatalf("duplicate pod name %s", p.Name)
		}
		names[p.Name] = true
		switch {
		case p.Spec.NodeSelector[v1.LabelArch] == "arm64":
			groups["arm64"]++
		case len(p.Spec.Tolerations) > 0 && p.Spec.Tolerations[0].Key == "workload":
			groups["batch"]++
		case len(p.Spec.Tolerations) > 0:
			groups["gpu"]++
		}
	}
	want := map[string]int{"arm64": 80 + 8, "batch": 160 + 16, "gpu": 10 + 1}
	// 1000 pods = 10 full repetitions of 92 plus 80 pods of the 11th: 24 web,
	// 16 api, 12 worker, 6 jvm, 3 cache, 16 batch and the first 3 of 8 arm.
	want["arm64"], want["gpu"] = 83, 10
	if diff := cmp.Diff(want, groups); diff != "" {
		t.Errorf("group sizes mismatch (-want +got):\n%s", diff)
	}
	if got := st.SeparateNodes(pods); got != 3 {
		t.Errorf("SeparateNodes = %d, want 3 (one cache Deployment of 3 replicas)", got)
	}
}

func TestCatalogLowerBound(t *testing.T) {
	tiny := []*catalog.InstanceType{
		st.InstanceType("m5.large", "2", "8Gi", "29", 0.1),
		st.InstanceType("c5.large", "2", "4Gi", "29", 0.08),
	}
	gpuType := st.InstanceType("g5.xlarge", "4", "16Gi", "58", 1.0, st.TypeResources(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}))
	pool := st.NodePool("default")
	gpuPool := st.NodePool("gpu", st.PoolNodeClass("gpu"), st.PoolTaint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule))
	nginx := map[string]string{"app": "nginx"}
	anti := func(name string) *corev1.Pod {
		return st.Pod(name, st.Requests("100m", "100Mi"), st.Labels(nginx), st.PodAntiAffinity(v1.LabelHostname, nginx))
	}
	gpuPod := st.Pod("infer", st.Resources(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}),
		st.Toleration("nvidia.com/gpu", "", corev1.TaintEffectNoSchedule))
	tests := []struct {
		name string
		in   scheduling.Input
		want float64
	}{
		{"should charge cpu at the cheapest rate ($0.04 per CPU on c5.large)",
			st.Input([]v1.NodePool{pool}, tiny, []*corev1.Pod{st.Pod("a", st.Requests("1", "1Gi"))}), 0.04},
		{"should charge memory at the cheapest rate ($0.0125 per GiB on m5.large)",
			st.Input([]v1.NodePool{pool}, tiny, []*corev1.Pod{st.Pod("a", st.Requests("100m", "3Gi"))}), 0.0375},
		{"should charge one cheapest node per hostname anti-affinity pod",
			st.Input([]v1.NodePool{pool}, tiny, []*corev1.Pod{anti("a"), anti("b"), anti("c")}), 0.24},
		{"should ignore pods no option can host",
			st.Input([]v1.NodePool{pool}, tiny, []*corev1.Pod{st.Pod("a", st.Requests("64", "1Gi"))}), 0},
		{"should add disjoint groups (gpu pods only fit the gpu pool)",
			st.Input([]v1.NodePool{pool, gpuPool}, tiny, []*corev1.Pod{st.Pod("a", st.Requests("1", "1Gi")), gpuPod},
				st.WithNodeClassTypes("gpu", []*catalog.InstanceType{gpuType})), 0.04 + 1.0},
		{"should subtract the overhead of daemonsets that run on the pool",
			st.Input([]v1.NodePool{pool}, []*catalog.InstanceType{tiny[1]}, []*corev1.Pod{st.Pod("a", st.Requests("1", "1Gi"))},
				st.WithDaemonSets(st.DaemonSet("agent", st.Requests("1", "")))), 0.08},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := st.CatalogLowerBound(tt.in); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("CatalogLowerBound() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCatalogLowerBoundNeverExceedsTheFakeBound(t *testing.T) {
	for _, n := range []int{100, 1000} {
		pods := st.DiverseMix(n, 42)
		if got, lb := st.CatalogLowerBound(st.BenchmarkInput(pods, "")), st.LowerBound(pods); got > lb || got < 0.95*lb {
			t.Errorf("n=%d: CatalogLowerBound %.3f, want within [0.95, 1] x LowerBound %.3f", n, got, lb)
		}
	}
}
