package catalog_test

import (
	"encoding/json"
	"os"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// listedResources reads the `resources` of every record of the data:
// Karpenter's own allocatable for AL2023 with no blockDeviceMappings
// (data/README.md).
func listedResources(t *testing.T) map[string]map[string]string {
	t.Helper()
	raw, err := os.ReadFile("data/ec2-instance-types.json")
	if err != nil {
		t.Fatalf("read catalog: %v", err)
	}
	var recs []struct {
		Name               string            `json:"name"`
		TrunkingCompatible *bool             `json:"trunkingCompatible"`
		Resources          map[string]string `json:"resources"`
	}
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatalf("decode catalog: %v", err)
	}
	out := make(map[string]map[string]string, len(recs))
	for _, r := range recs {
		out[r.Name] = r.Resources
	}
	return out
}

// Whole-catalog oracle: for AL2023 defaults, allocatable cpu, memory,
// ephemeral-storage and pods, and every extended resource Karpenter's
// listing shows, must equal the listing for all 1363 types.
func TestResolveMatchesKarpenterListingForEveryType(t *testing.T) {
	listed := listedResources(t)
	its, _, err := catalog.Resolve(nodeClass(), defaultOptions)
	if err != nil {
		t.Fatalf("Resolve() error = %v", err)
	}
	if len(its) != len(listed) {
		t.Fatalf("Resolve() = %d types, listing has %d", len(its), len(listed))
	}
	compared := []corev1.ResourceName{
		corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods,
		catalog.ResourceNVIDIAGPU, catalog.ResourceAMDGPU, catalog.ResourceAWSNeuron, catalog.ResourceAWSNeuronCore, catalog.ResourceEFA,
	}
	var mismatches []string
	var podENIOnlyInVPCLimits []string
	for _, it := range its {
		want, ok := listed[it.Name]
		if !ok {
			t.Errorf("%s: not in the listing", it.Name)
			continue
		}
		alloc := it.Allocatable()
		for _, name := range compared {
			if !sameQuantity(want[string(name)], alloc[name]) {
				q := alloc[name]
				mismatches = append(mismatches, it.Name+" "+string(name)+": listed "+want[string(name)]+", got "+q.String())
			}
		}
		// pod-eni: the listing predates the vpclimits file the catalog
		// follows (data/README.md); only additions are expected.
		if got := alloc[catalog.ResourceAWSPodENI]; !sameQuantity(want[catalog.ResourceAWSPodENI], got) {
			if _, listedPodENI := want[catalog.ResourceAWSPodENI]; listedPodENI {
				mismatches = append(mismatches, it.Name+" pod-eni: listed "+want[catalog.ResourceAWSPodENI]+", got "+got.String())
			} else {
				podENIOnlyInVPCLimits = append(podENIOnlyInVPCLimits, it.Name)
			}
		}
	}
	if len(mismatches) != 0 {
		t.Errorf("%d resources differ from Karpenter's listing:\n%s", len(mismatches), joinLines(mismatches))
	}
	if len(podENIOnlyInVPCLimits) != 56 {
		t.Errorf("pod-eni present only through vpclimits for %d types, want the 56 data/README.md names:\n%s",
			len(podENIOnlyInVPCLimits), joinLines(podENIOnlyInVPCLimits))
	}
}

// sameQuantity compares a listed quantity ("" when not listed, i.e. 0)
// with a computed one by value.
func sameQuantity(listed string, got resource.Quantity) bool {
	if listed == "" {
		return got.IsZero()
	}
	want, err := resource.ParseQuantity(listed)
	if err != nil {
		return false
	}
	return want.Cmp(got) == 0
}

func joinLines(lines []string) string {
	sort.Strings(lines)
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}

// AllocatableVector must agree with Allocatable for every type under node
// classes that exercise every overhead path.
func TestAllocatableVectorMatchesAllocatable(t *testing.T) {
	tests := []struct {
		name string
		nc   *v1.EC2NodeClass
	}{
		{name: "AL2023 defaults", nc: nodeClass()},
		{name: "Windows2022 with kubelet overrides", nc: nodeClass(alias("windows2022@latest"), kubelet(func(kc *v1.KubeletConfiguration) {
			kc.KubeReserved = map[string]string{"cpu": "150m"}
			kc.SystemReserved = map[string]string{"memory": "300Mi", "ephemeral-storage": "2Gi"}
			kc.EvictionHard = map[string]string{"memory.available": "7%", "nodefs.available": "12%"}
		}))},
		{name: "Bottlerocket RAID0 with maxPods", nc: nodeClass(alias("bottlerocket@latest"), raid0, maxPods(250))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, it := range mustResolve(t, tt.nc, defaultOptions) {
				want, ok := catalog.NewVector(it.Allocatable())
				if !ok {
					t.Fatalf("%s: Allocatable() has a resource a Vector cannot hold", it.Name)
				}
				if diff := cmp.Diff(want, it.AllocatableVector()); diff != "" {
					t.Errorf("%s AllocatableVector() (-Allocatable +vector):\n%s", it.Name, diff)
				}
			}
		})
	}
}

func mustResolve(t *testing.T, nc *v1.EC2NodeClass, opts catalog.Options) []*catalog.InstanceType {
	t.Helper()
	its, _, err := catalog.Resolve(nc, opts)
	if err != nil {
		t.Fatalf("Resolve() error = %v", err)
	}
	return its
}
