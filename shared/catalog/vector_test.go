package catalog_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/shared/catalog"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func vec(slots map[int]int64) catalog.Vector {
	var v catalog.Vector
	for i, n := range slots {
		v[i] = n
	}
	return v
}

func TestNewVector(t *testing.T) {
	tests := []struct {
		name   string
		give   corev1.ResourceList
		want   catalog.Vector
		wantOK bool
	}{
		{name: "converts cpu to millicores and memory to bytes",
			give:   rl("cpu", "1500m", "memory", "1Gi", "ephemeral-storage", "2G", "pods", "3"),
			want:   vec(map[int]int64{catalog.VecCPU: 1500, catalog.VecMemory: 1 << 30, catalog.VecEphemeralStorage: 2e9, catalog.VecPods: 3}),
			wantOK: true},
		{name: "holds every extended resource of the catalog",
			give: rl("nvidia.com/gpu", "1", "amd.com/gpu", "2", "habana.ai/gaudi", "3", "aws.amazon.com/neuron", "4",
				"aws.amazon.com/neuroncore", "5", "vpc.amazonaws.com/pod-eni", "6", "vpc.amazonaws.com/efa", "7",
				"vpc.amazonaws.com/PrivateIPv4Address", "8"),
			want: vec(map[int]int64{catalog.VecNVIDIAGPU: 1, catalog.VecAMDGPU: 2, catalog.VecHabanaGaudi: 3, catalog.VecAWSNeuron: 4,
				catalog.VecAWSNeuronCore: 5, catalog.VecAWSPodENI: 6, catalog.VecEFA: 7, catalog.VecPrivateIPv4Address: 8}),
			wantOK: true},
		{name: "reports a positive resource it has no slot for",
			give: rl("cpu", "1", "example.com/widget", "1"), want: vec(map[int]int64{catalog.VecCPU: 1000}), wantOK: false},
		{name: "ignores a zero resource it has no slot for",
			give: rl("cpu", "1", "example.com/widget", "0"), want: vec(map[int]int64{catalog.VecCPU: 1000}), wantOK: true},
		{name: "rounds fractional bytes up", give: rl("memory", "1500m"), want: vec(map[int]int64{catalog.VecMemory: 2}), wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := catalog.NewVector(tt.give)
			if diff := cmp.Diff([]any{tt.want, tt.wantOK}, []any{got, ok}); diff != "" {
				t.Errorf("NewVector() [vector ok] (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVectorResourceListRoundTrip(t *testing.T) {
	give := rl("cpu", "1930m", "memory", "6903Mi", "ephemeral-storage", "17Gi", "pods", "29", "vpc.amazonaws.com/pod-eni", "9")
	v, ok := catalog.NewVector(give)
	if !ok {
		t.Fatalf("NewVector(%v) not ok", give)
	}
	if diff := cmp.Diff(strs(give), strs(v.ResourceList())); diff != "" {
		t.Errorf("ResourceList() (-want +got):\n%s", diff)
	}
}

func TestVectorArithmetic(t *testing.T) {
	a := vec(map[int]int64{catalog.VecCPU: 1000, catalog.VecMemory: 2048, catalog.VecPods: 1})
	b := vec(map[int]int64{catalog.VecCPU: 250, catalog.VecMemory: 4096, catalog.VecNVIDIAGPU: 1})
	tests := []struct {
		name string
		got  any
		want any
	}{
		{name: "Add sums slots", got: a.Add(b),
			want: vec(map[int]int64{catalog.VecCPU: 1250, catalog.VecMemory: 6144, catalog.VecPods: 1, catalog.VecNVIDIAGPU: 1})},
		{name: "Sub may go negative", got: a.Sub(b),
			want: vec(map[int]int64{catalog.VecCPU: 750, catalog.VecMemory: -2048, catalog.VecPods: 1, catalog.VecNVIDIAGPU: -1})},
		{name: "Add and Sub leave operands unchanged", got: []catalog.Vector{a, b},
			want: []catalog.Vector{
				vec(map[int]int64{catalog.VecCPU: 1000, catalog.VecMemory: 2048, catalog.VecPods: 1}),
				vec(map[int]int64{catalog.VecCPU: 250, catalog.VecMemory: 4096, catalog.VecNVIDIAGPU: 1}),
			}},
		{name: "Fits when every slot is within capacity", got: a.Fits(a.Add(b)), want: true},
		{name: "does not fit when one slot exceeds capacity", got: b.Fits(a), want: false},
		{name: "a GPU request does not fit a type without GPUs", got: vec(map[int]int64{catalog.VecNVIDIAGPU: 1}).Fits(a), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestVectorIndex(t *testing.T) {
	for i := range catalog.NumVec {
		name := catalog.VectorResourceName(i)
		got, ok := catalog.VectorIndex(name)
		if !ok || got != i {
			t.Errorf("VectorIndex(%q) = %d, %t; want %d, true", name, got, ok, i)
		}
	}
	if _, ok := catalog.VectorIndex("hugepages-2Mi"); ok {
		t.Errorf("VectorIndex(hugepages-2Mi) ok, want no slot")
	}
	if got := catalog.VectorResourceName(catalog.NumVec); got != "" {
		t.Errorf("VectorResourceName(NumVec) = %q, want empty", got)
	}
}

func TestAllocatableSubtractsHugepagesFromMemory(t *testing.T) {
	it := &catalog.InstanceType{
		Name:     "custom",
		Capacity: rl("cpu", "2", "memory", "8Gi", "hugepages-2Mi", "1Gi", "pods", "10"),
		Overhead: catalog.Overhead{
			KubeReserved:      rl("cpu", "100m", "memory", "1Gi"),
			SystemReserved:    rl("memory", "512Mi"),
			EvictionThreshold: rl("memory", "100Mi"),
		},
	}
	want := map[string]string{"cpu": "1900m", "memory": "5532Mi", "hugepages-2Mi": "1Gi", "pods": "10"}
	if diff := cmp.Diff(want, strs(it.Allocatable())); diff != "" {
		t.Errorf("Allocatable() (-want +got):\n%s", diff)
	}
	wantVec := vec(map[int]int64{catalog.VecCPU: 1900, catalog.VecMemory: 5532 << 20, catalog.VecPods: 10})
	if diff := cmp.Diff(wantVec, it.AllocatableVector()); diff != "" {
		t.Errorf("AllocatableVector() (-want +got):\n%s", diff)
	}
}

func TestAllocatableFloorsAtZero(t *testing.T) {
	it := &catalog.InstanceType{
		Name:     "tiny",
		Capacity: rl("cpu", "1", "memory", "256Mi", "pods", "4"),
		Overhead: catalog.Overhead{KubeReserved: rl("cpu", "60m", "memory", "299Mi")},
	}
	if diff := cmp.Diff(map[string]string{"cpu": "940m", "pods": "4"}, strs(it.Allocatable())); diff != "" {
		t.Errorf("Allocatable() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(vec(map[int]int64{catalog.VecCPU: 940, catalog.VecPods: 4}), it.AllocatableVector()); diff != "" {
		t.Errorf("AllocatableVector() (-want +got):\n%s", diff)
	}
}
