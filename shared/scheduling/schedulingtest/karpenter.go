package schedulingtest

import (
	"fmt"
	"math"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// This file re-creates the workload of Karpenter's provisioning-solver
// benchmark (kubernetes-sigs/karpenter
// pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go at
// commit 2266468104f36373ed002241afaee2d3bbc26078) from its written
// description in the project's karpenter-benchmark.md (sections 2.1-2.5).
// No upstream code was used; the fingerprints of section 2.4 are checked in
// karpenter_test.go.

// Benchmark topology keys and labels (karpenter-benchmark §2.3; the
// misspelt "my-affininity" is the real key).
const (
	BenchmarkLabelKey    = "my-label"
	BenchmarkAffinityKey = "my-affininity"
	BenchmarkZones       = 3
)

// FakePricePerUnit is the price of one unit of n in FakeInstanceTypes:
// 0.1 x cpu + 0.1 x memory_bytes / 1e9 with cpu = n and memory = 2n GiB
// (karpenter-benchmark §2.1).
const FakePricePerUnit = 0.1 + 0.1*2*(1<<30)/1e9

var (
	benchCPU    = []string{"100m", "250m", "500m", "1000m", "1500m"}
	benchMemory = []string{"100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"}
	benchValues = []string{"a", "b", "c", "d", "e", "f", "g"}
)

// FakeInstanceTypes returns the benchmark's n fake instance types
// fake-it-0 ... fake-it-(n-1) (karpenter-benchmark §2.1). With m = index+1:
// capacity cpu m, memory 2m GiB, pods 10m; kube-reserved 100m CPU and 10Mi
// memory (so allocatable is m-0.1 CPU, 2m GiB-10Mi, 10m pods); labels arch
// amd64, os linux, integer=m, size large with special=optional when m >= 5
// (cpu > 4 and memory > 8Gi) else size small; five available offerings
// (spot in test-zone-1 and -2, on-demand in test-zone-1, -2 and -3) all at
// FakePricePerUnit x m $/h. Upstream's types list OS In [linux windows
// darwin]; Labels holds one value per key, so they say linux, which no
// benchmark pod selects on.
func FakeInstanceTypes(n int) []*catalog.InstanceType {
	out := make([]*catalog.InstanceType, 0, n)
	for i := range n {
		m := i + 1
		price := 0.1*float64(m) + 0.1*float64(int64(2*m)<<30)/1e9
		labels := map[string]string{
			v1.LabelInstanceType: fmt.Sprintf("fake-it-%d", i),
			v1.LabelArch:         "amd64",
			v1.LabelOS:           "linux",
			"integer":            fmt.Sprint(m),
			"size":               "small",
		}
		if m >= 5 {
			labels["size"] = "large"
			labels["special"] = "optional"
		}
		out = append(out, &catalog.InstanceType{
			Name:   labels[v1.LabelInstanceType],
			Labels: labels,
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(int64(m), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(2*m)<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(int64(10*m), resource.DecimalSI),
			},
			Overhead: catalog.Overhead{KubeReserved: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("10Mi"),
			}},
			Offerings: catalog.Offerings{
				Offering("test-zone-1", v1.CapacityTypeSpot, price),
				Offering("test-zone-2", v1.CapacityTypeSpot, price),
				Offering("test-zone-1", v1.CapacityTypeOnDemand, price),
				Offering("test-zone-2", v1.CapacityTypeOnDemand, price),
				Offering("test-zone-3", v1.CapacityTypeOnDemand, price),
			},
		})
	}
	return out
}

// BenchmarkNodePool is the benchmark's single NodePool "default": no
// requirements, no taints, weight unset, limits cpu 10,000,000 and memory
// 10,000,000Gi (karpenter-benchmark §2.2), class "default".
func BenchmarkNodePool() v1.NodePool {
	return NodePool("default", PoolLimits("cpu", "10000000", "memory", "10000000Gi"))
}

// BenchmarkInput is the benchmark's snapshot for pods: BenchmarkNodePool,
// the 400 FakeInstanceTypes on an EC2NodeClass whose subnets are in
// test-zone-1..3, an empty cluster and no DaemonSets, policy as given
// ("" or "Respect", or "Ignore").
func BenchmarkInput(pods []*corev1.Pod, preferencePolicy string) scheduling.Input {
	in := Input([]v1.NodePool{BenchmarkNodePool()}, FakeInstanceTypes(400), pods,
		WithOptions(scheduling.Options{PreferencePolicy: preferencePolicy}))
	in.NodeClasses[0] = EC2NodeClass(DefaultNodeClass, ClassZones("test-zone-1", "test-zone-2", "test-zone-3"))
	return in
}

// DiverseMix returns the benchmark's diverse mix of n pods drawn from
// rand.New(rand.NewSource(seed)) (math/rand v1), in karpenter-benchmark
// §2.3's class order and §2.4's draw order. With k = n/5: k generic pods
// (label my-label=<v>), k with a zone spread constraint and k with a hostname
// spread constraint (maxSkew 1, DoNotSchedule, selector my-label=<drawn
// independently>), k with required zone pod affinity to their own
// my-affininity=<v> group, k with required hostname anti-affinity to
// app=nginx (label app=nginx), then n-5k generic pods. Values are a..g; cpu is
// one of 100m, 250m, 500m, 1000m, 1500m; memory one of 100Mi, 256Mi, 512Mi,
// 1024Mi, 2048Mi, 4096Mi. Pods are named "pod-<index>" in namespace
// default; the same (n, seed) always gives the same pods.
func DiverseMix(n int, seed int64) []*corev1.Pod {
	r := rand.New(rand.NewSource(seed))
	label := func() string { return benchValues[r.Intn(len(benchValues))] }
	requests := func() PodOption {
		cpu := benchCPU[r.Intn(len(benchCPU))]
		mem := benchMemory[r.Intn(len(benchMemory))]
		return Requests(cpu, mem)
	}
	pods := make([]*corev1.Pod, 0, n)
	name := func() string { return fmt.Sprintf("pod-%d", len(pods)) }
	generic := func() {
		l := label()
		pods = append(pods, Pod(name(), Labels(map[string]string{BenchmarkLabelKey: l}), requests()))
	}
	spread := func(topologyKey string) {
		l, sel := label(), label()
		pods = append(pods, Pod(name(), Labels(map[string]string{BenchmarkLabelKey: l}),
			TopologySpread(topologyKey, 1, corev1.DoNotSchedule, map[string]string{BenchmarkLabelKey: sel}), requests()))
	}
	k := n / 5
	for range k {
		generic()
	}
	for range k {
		spread(v1.LabelTopologyZone)
	}
	for range k {
		spread(v1.LabelHostname)
	}
	for range k {
		l := label()
		group := map[string]string{BenchmarkAffinityKey: l}
		pods = append(pods, Pod(name(), Labels(group), PodAffinity(v1.LabelTopologyZone, group), requests()))
	}
	for range k {
		nginx := map[string]string{"app": "nginx"}
		pods = append(pods, Pod(name(), Labels(nginx), PodAntiAffinity(v1.LabelHostname, nginx), requests()))
	}
	for len(pods) < n {
		generic()
	}
	return pods
}

// PreferenceMix returns the benchmark's preference mix of n pods
// (karpenter-benchmark §2.3): one (cpu, memory) draw from
// rand.New(rand.NewSource(seed)) shared by every pod (seed 42 gives
// 100m/4096Mi, the fresh-process value §7 says to use), label app=nginx,
// preferred node affinity zone In [test-zone-1] (weight 1), preferred
// anti-affinity to app=nginx on zone (weight 10) and on hostname (weight 1).
// Pods are named "pref-<index>".
func PreferenceMix(n int, seed int64) []*corev1.Pod {
	r := rand.New(rand.NewSource(seed))
	cpu := benchCPU[r.Intn(len(benchCPU))]
	mem := benchMemory[r.Intn(len(benchMemory))]
	nginx := map[string]string{"app": "nginx"}
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = Pod(fmt.Sprintf("pref-%d", i), Labels(nginx), Requests(cpu, mem),
			PreferredNodeAffinity(1, Term(In(v1.LabelTopologyZone, "test-zone-1"))),
			PreferredPodAntiAffinity(10, v1.LabelTopologyZone, nginx),
			PreferredPodAntiAffinity(1, v1.LabelHostname, nginx))
	}
	return pods
}

// LaunchCost is the $/h of a plan: the sum over new NodeClaims of the
// Expected offering's price (the offering CreateFleet would pick). On
// FakeInstanceTypes this equals karpenter-benchmark §2.5's launch cost when
// Expected is the cheapest candidate that fits. Existing capacity costs
// nothing extra.
func LaunchCost(res scheduling.Result) float64 {
	total := 0.0
	for _, c := range res.NewClaims {
		total += c.Expected.PricePerHour
	}
	return total
}

// FakeLaunchCost is karpenter-benchmark §2.5's cost of one NodeClaim on
// FakeInstanceTypes: FakePricePerUnit x the smallest m with m-0.1 >= cpu
// cores, 2m GiB-10Mi >= memory and 10m >= pods. It returns +Inf when no type
// up to 400 fits.
func FakeLaunchCost(cpuMilli, memoryBytes, pods int64) float64 {
	m := max(
		ceilDiv(cpuMilli+100, 1000),
		ceilDiv(memoryBytes+10<<20, 2<<30),
		ceilDiv(pods, 10),
		1,
	)
	if m > 400 {
		return math.Inf(1)
	}
	return FakePricePerUnit * float64(m)
}

// LowerBound is karpenter-benchmark §2.5's lower bound for pods on
// FakeInstanceTypes, in $/h: FakePricePerUnit x max(cpu + 0.1K,
// (memory + 10Mi K) / 2GiB, P/10), with cpu in cores and memory in bytes
// summed over pods (PodRequests), P the pod count and K the size of the
// largest group of pods that must each have their own node (pods carrying
// the same required hostname anti-affinity term that also matches them). It
// ignores rounding to whole types, so it is loose but never above the
// optimum.
func LowerBound(pods []*corev1.Pod) float64 {
	var cpuMilli, memBytes int64
	for _, p := range pods {
		rl := PodRequests(p)
		cpuMilli += rl.Cpu().MilliValue()
		memBytes += rl.Memory().Value()
	}
	k := float64(SeparateNodes(pods))
	units := max(
		float64(cpuMilli)/1000+0.1*k,
		(float64(memBytes)+10*(1<<20)*k)/(2*(1<<30)),
		float64(len(pods))/10,
	)
	return FakePricePerUnit * units
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
