package scheduling_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// testZones are the zones of testTypes' offerings.
var testZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// typeSpec describes one test instance type.
type typeSpec struct {
	name        string
	cpu, memory string
	pods        string
	price       float64
	arch        string
	generation  string
	gpus        int
}

// testCatalog is a small, hand-priced catalog: allocatable equals capacity
// (no overhead) so expectations read directly off the table.
var testCatalog = []typeSpec{
	{name: "c6i.large", cpu: "2", memory: "4Gi", pods: "29", price: 0.085, arch: "amd64", generation: "6"},
	{name: "m6i.large", cpu: "2", memory: "8Gi", pods: "29", price: 0.096, arch: "amd64", generation: "6"},
	{name: "r6i.large", cpu: "2", memory: "16Gi", pods: "29", price: 0.126, arch: "amd64", generation: "6"},
	{name: "c6i.xlarge", cpu: "4", memory: "8Gi", pods: "58", price: 0.17, arch: "amd64", generation: "6"},
	{name: "m6i.xlarge", cpu: "4", memory: "16Gi", pods: "58", price: 0.192, arch: "amd64", generation: "6"},
	{name: "m6i.2xlarge", cpu: "8", memory: "32Gi", pods: "58", price: 0.384, arch: "amd64", generation: "6"},
	{name: "m6i.4xlarge", cpu: "16", memory: "64Gi", pods: "234", price: 0.768, arch: "amd64", generation: "6"},
	{name: "m5.large", cpu: "2", memory: "8Gi", pods: "29", price: 0.096, arch: "amd64", generation: "5"},
	{name: "m6g.large", cpu: "2", memory: "8Gi", pods: "29", price: 0.077, arch: "arm64", generation: "6"},
	{name: "g5.xlarge", cpu: "4", memory: "16Gi", pods: "58", price: 1.006, arch: "amd64", generation: "5", gpus: 1},
}

// testTypes builds testCatalog, with on-demand offerings in testZones.
func testTypes() []*catalog.InstanceType {
	out := make([]*catalog.InstanceType, 0, len(testCatalog))
	for _, s := range testCatalog {
		labels := map[string]string{
			v1.LabelArch: s.arch, v1.LabelInstanceGeneration: s.generation,
			v1.LabelInstanceCPU: s.cpu,
		}
		opts := []st.InstanceTypeOption{st.TypeLabels(labels)}
		if s.gpus > 0 {
			opts = append(opts,
				st.TypeLabels(map[string]string{v1.LabelInstanceGPUCount: fmt.Sprint(s.gpus), v1.LabelInstanceGPUManufacturer: "nvidia"}),
				st.TypeResources(corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(int64(s.gpus), resource.DecimalSI)}))
		}
		it := st.InstanceType(s.name, s.cpu, s.memory, s.pods, s.price, opts...)
		if s.arch == "arm64" {
			it.Labels[v1.LabelArch] = "arm64"
		}
		out = append(out, it)
	}
	return out
}

// withSpot adds spot offerings at ratio x the on-demand price.
func withSpot(types []*catalog.InstanceType, ratio float64) []*catalog.InstanceType {
	for _, it := range types {
		var spot catalog.Offerings
		for _, o := range it.Offerings {
			spot = append(spot, catalog.Offering{Zone: o.Zone, CapacityType: v1.CapacityTypeSpot, Price: o.Price * ratio, Available: true})
		}
		it.Offerings = append(it.Offerings, spot...)
	}
	return types
}

// input builds a snapshot over testTypes.
func input(pools []v1.NodePool, pods []*corev1.Pod, opts ...st.InputOption) scheduling.Input {
	return st.Input(pools, testTypes(), pods, opts...)
}

// solve runs Solve and the independent invariant checker.
func solve(t *testing.T, in scheduling.Input) scheduling.Result {
	t.Helper()
	res, err := scheduling.Solve(t.Context(), in)
	if err != nil {
		t.Fatalf("Solve() error = %v", err)
	}
	if err := st.CheckResult(in, res); err != nil {
		t.Fatalf("Solve() broke a plan invariant: %v", err)
	}
	return res
}

// claimView is a new claim reduced to what tests compare.
type claimView struct {
	Pool     string
	Cheapest string   // Expected.InstanceType
	Zone     string   // Expected.Zone
	Capacity string   // Expected.CapacityType
	Pods     []string // pod names, sorted
}

// view is a plan reduced to names.
type view struct {
	Claims        []claimView
	Placements    map[string]string // pod name -> node
	Unschedulable map[string]string // pod name -> reason
}

// viewOf renders res with pod names; claims sorted by pool then pods.
func viewOf(in scheduling.Input, res scheduling.Result) view {
	names := map[string]string{}
	for _, p := range in.Pods {
		names[string(p.UID)] = p.Name
	}
	v := view{Placements: map[string]string{}, Unschedulable: map[string]string{}}
	for uid, node := range res.Placements {
		v.Placements[names[uid]] = node
	}
	for uid, why := range res.Unschedulable {
		v.Unschedulable[names[uid]] = why
	}
	for _, c := range res.NewClaims {
		cv := claimView{Pool: c.NodePool, Cheapest: c.Expected.InstanceType, Zone: c.Expected.Zone, Capacity: c.Expected.CapacityType}
		for _, uid := range c.Pods {
			cv.Pods = append(cv.Pods, names[uid])
		}
		sort.Strings(cv.Pods)
		v.Claims = append(v.Claims, cv)
	}
	sort.SliceStable(v.Claims, func(i, j int) bool {
		if v.Claims[i].Pool != v.Claims[j].Pool {
			return v.Claims[i].Pool < v.Claims[j].Pool
		}
		return fmt.Sprint(v.Claims[i].Pods) < fmt.Sprint(v.Claims[j].Pods)
	})
	return v
}

// pods builds n pods named prefix-0..n-1 with the same options.
func pods(prefix string, n int, opts ...st.PodOption) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = st.Pod(fmt.Sprintf("%s-%d", prefix, i), opts...)
	}
	return out
}

// reasonOf returns the single unschedulable reason of res, failing otherwise.
func reasonOf(t *testing.T, res scheduling.Result) string {
	t.Helper()
	if len(res.Unschedulable) != 1 {
		t.Fatalf("want exactly one unschedulable pod, got %v (claims %d, placements %v)", res.Unschedulable, len(res.NewClaims), res.Placements)
	}
	for _, why := range res.Unschedulable {
		return why
	}
	return ""
}

// cmpEmpty makes nil and empty maps and slices equal.
var cmpEmpty = cmpopts.EquateEmpty()
