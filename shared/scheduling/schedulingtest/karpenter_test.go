package schedulingtest_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/scheduling"
	"github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// fingerprint sums a pod set the way karpenter-benchmark.md §2.4 reports it.
type fingerprint struct {
	TotalMilliCPU int64
	TotalMi       int64
	ClassMilliCPU [5]int64 // generic / zone-TSC / host-TSC / zone-aff / host-anti
}

func fingerprintOf(pods []*corev1.Pod) fingerprint {
	var f fingerprint
	k := len(pods) / 5
	for i, p := range pods {
		rl := schedulingtest.PodRequests(p)
		cpu := rl.Cpu().MilliValue()
		f.TotalMilliCPU += cpu
		f.TotalMi += rl.Memory().Value() >> 20
		if class := i / k; class < 5 {
			f.ClassMilliCPU[class] += cpu
		}
	}
	return f
}

func TestDiverseMixMatchesKarpenterFingerprints(t *testing.T) {
	tests := []struct {
		name string
		n    int
		want fingerprint
	}{
		{
			name: "should draw 100 pods with seed 42 like the upstream benchmark",
			n:    100,
			want: fingerprint{70650, 137892, [5]int64{16200, 12650, 13350, 15150, 13300}},
		},
		{
			name: "should draw 1000 pods with seed 42 like the upstream benchmark",
			n:    1000,
			want: fingerprint{663350, 1341084, [5]int64{132100, 128200, 130700, 140400, 131950}},
		},
		{
			name: "should draw 5000 pods with seed 42 like the upstream benchmark",
			n:    5000,
			want: fingerprint{3309000, 6708012, [5]int64{650400, 650350, 634700, 712700, 660850}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := schedulingtest.DiverseMix(tt.n, 42)
			if len(pods) != tt.n {
				t.Fatalf("DiverseMix(%d, 42) returned %d pods", tt.n, len(pods))
			}
			if diff := cmp.Diff(tt.want, fingerprintOf(pods)); diff != "" {
				t.Errorf("fingerprint mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// podSummary is what §2.4 lists about the first pods of N=100, seed 42.
type podSummary struct {
	Label, Selector, Group, App string
	CPU, Memory                 string
	SpreadKey                   string
	AffinityKey, AntiKey        string
}

func summarize(p *corev1.Pod) podSummary {
	s := podSummary{
		Label:  p.Labels[schedulingtest.BenchmarkLabelKey],
		Group:  p.Labels[schedulingtest.BenchmarkAffinityKey],
		App:    p.Labels["app"],
		CPU:    p.Spec.Containers[0].Resources.Requests.Cpu().String(),
		Memory: p.Spec.Containers[0].Resources.Requests.Memory().String(),
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		s.SpreadKey = c.TopologyKey
		s.Selector = c.LabelSelector.MatchLabels[schedulingtest.BenchmarkLabelKey]
	}
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				s.AffinityKey = term.TopologyKey
				if term.LabelSelector.MatchLabels[schedulingtest.BenchmarkAffinityKey] != s.Group {
					s.AffinityKey += " (selector differs from own group)"
				}
			}
		}
		if a.PodAntiAffinity != nil {
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				s.AntiKey = term.TopologyKey
			}
		}
	}
	return s
}

func TestDiverseMixFirstPods(t *testing.T) {
	pods := schedulingtest.DiverseMix(100, 42)
	tests := []struct {
		name  string
		index int
		want  podSummary
	}{
		{"should make pod0 generic my-label=f 500m/512Mi", 0, podSummary{Label: "f", CPU: "500m", Memory: "512Mi"}},
		{"should make pod1 generic my-label=b 1000m/256Mi", 1, podSummary{Label: "b", CPU: "1", Memory: "256Mi"}},
		{"should make pod20 a zone spread pod labelled e selecting c, 250m/512Mi", 20,
			podSummary{Label: "e", Selector: "c", CPU: "250m", Memory: "512Mi", SpreadKey: v1.LabelTopologyZone}},
		{"should make pod40 a hostname spread pod labelled e selecting f, 1500m/4096Mi", 40,
			podSummary{Label: "e", Selector: "f", CPU: "1500m", Memory: "4Gi", SpreadKey: v1.LabelHostname}},
		{"should make pod60 a zone self-affinity pod of group e, 1500m/100Mi", 60,
			podSummary{Group: "e", CPU: "1500m", Memory: "100Mi", AffinityKey: v1.LabelTopologyZone}},
		{"should make pod80 a hostname anti-affinity pod, 500m/4096Mi", 80,
			podSummary{App: "nginx", CPU: "500m", Memory: "4Gi", AntiKey: v1.LabelHostname}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarize(pods[tt.index])); diff != "" {
				t.Errorf("pod%d mismatch (-want +got):\n%s", tt.index, diff)
			}
		})
	}
}

func TestDiverseMixShape(t *testing.T) {
	tests := []struct {
		name        string
		n           int
		wantGeneric int // pods with no constraint at all
		wantAnti    int
	}{
		{"should make a single generic pod for N=1", 1, 1, 0},
		{"should fill the remainder of N=7 with generic pods", 7, 3, 1},
		{"should make five equal classes for N=100", 100, 20, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := schedulingtest.DiverseMix(tt.n, 42)
			var generic, anti int
			for _, p := range pods {
				switch {
				case p.Spec.Affinity == nil && len(p.Spec.TopologySpreadConstraints) == 0:
					generic++
				case p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil:
					anti++
				}
			}
			if generic != tt.wantGeneric || anti != tt.wantAnti {
				t.Errorf("DiverseMix(%d): generic %d, anti-affinity %d; want %d, %d", tt.n, generic, anti, tt.wantGeneric, tt.wantAnti)
			}
			if got := schedulingtest.SeparateNodes(pods); got != tt.wantAnti {
				t.Errorf("SeparateNodes = %d, want %d", got, tt.wantAnti)
			}
		})
	}
}

func TestPreferenceMixRequests(t *testing.T) {
	tests := []struct {
		name        string
		seed        int64
		cpu, memory string
	}{
		{"should request 100m/4096Mi with seed 42 (the fresh-process value)", 42, "100m", "4Gi"},
		{"should request 250m/256Mi with seed 43", 43, "250m", "256Mi"},
		{"should request 1000m/2048Mi with seed 44", 44, "1", "2Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := schedulingtest.PreferenceMix(50, tt.seed)
			for _, p := range pods {
				r := p.Spec.Containers[0].Resources.Requests
				if got := fmt.Sprintf("%s/%s", r.Cpu(), r.Memory()); got != tt.cpu+"/"+tt.memory {
					t.Fatalf("pod %s requests %s, want %s/%s", p.Name, got, tt.cpu, tt.memory)
				}
			}
			a := pods[0].Spec.Affinity
			if n, pa := len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution), len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution); n != 1 || pa != 2 {
				t.Errorf("preferences: %d node, %d anti-affinity; want 1, 2", n, pa)
			}
		})
	}
}

func TestFakeInstanceTypes(t *testing.T) {
	types := schedulingtest.FakeInstanceTypes(400)
	tests := []struct {
		name                 string
		index                int
		wantAllocatable      string
		wantPrice            float64
		wantSize, wantSpecil string
	}{
		{"should give fake-it-0 0.9 CPU, 2Gi-10Mi and 10 pods", 0, "cpu=900m memory=2038Mi pods=10", 0.3147483648, "small", ""},
		{"should mark fake-it-4 large and special", 4, "cpu=4900m memory=10230Mi pods=50", 5 * 0.3147483648, "large", "optional"},
		{"should give fake-it-399 399.9 CPU", 399, "cpu=399900m memory=819190Mi pods=4000", 400 * 0.3147483648, "large", "optional"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := types[tt.index]
			a := it.Allocatable()
			mem := a[corev1.ResourceMemory]
			got := fmt.Sprintf("cpu=%dm memory=%dMi pods=%d", a.Cpu().MilliValue(), mem.Value()>>20, a.Pods().Value())
			if got != tt.wantAllocatable {
				t.Errorf("allocatable = %s, want %s", got, tt.wantAllocatable)
			}
			if len(it.Offerings) != 5 {
				t.Fatalf("%d offerings, want 5", len(it.Offerings))
			}
			for _, o := range it.Offerings {
				if math.Abs(o.Price-tt.wantPrice) > 1e-9 || !o.Available {
					t.Errorf("offering %+v, want available at %v", o, tt.wantPrice)
				}
			}
			if it.Labels["size"] != tt.wantSize || it.Labels["special"] != tt.wantSpecil {
				t.Errorf("labels %v", it.Labels)
			}
		})
	}
}

func TestLowerBoundAndCost(t *testing.T) {
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		// karpenter-benchmark §4.2 prints LB 22.866 for diverse 100 / seed 42.
		{"should give the documented lower bound for 100 diverse pods", schedulingtest.LowerBound(schedulingtest.DiverseMix(100, 42)), 22.866},
		{"should give the documented lower bound for 1000 diverse pods", schedulingtest.LowerBound(schedulingtest.DiverseMix(1000, 42)), 215.083},
		{"should give the documented lower bound for 5000 diverse pods", schedulingtest.LowerBound(schedulingtest.DiverseMix(5000, 42)), 1072.977},
		{"should give the documented lower bound for 4000 preference pods", schedulingtest.LowerBound(schedulingtest.PreferenceMix(4000, 42)), 2517.987},
		{"should cost one n=1 type for a 100m pod", schedulingtest.FakeLaunchCost(100, 100<<20, 1), 0.3147483648},
		{"should round 4 pods of 1 CPU up to n=5 (0.1 CPU reserved)", schedulingtest.FakeLaunchCost(4000, 1<<30, 4), 5 * 0.3147483648},
		{"should size by pods when 11 tiny pods need n=2", schedulingtest.FakeLaunchCost(100, 1<<20, 11), 2 * 0.3147483648},
		{"should sum Expected prices of new claims", schedulingtest.LaunchCost(scheduling.Result{NewClaims: []scheduling.NewClaim{
			{Expected: scheduling.ExpectedOffering{PricePerHour: 0.5}}, {Expected: scheduling.ExpectedOffering{PricePerHour: 0.25}},
		}}), 0.75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if math.Abs(tt.got-tt.want) > 0.0005 {
				t.Errorf("got %.4f, want %.4f", tt.got, tt.want)
			}
		})
	}
}

func TestFakeLaunchCostTooLarge(t *testing.T) {
	if got := schedulingtest.FakeLaunchCost(400_000, 1<<30, 1); !math.IsInf(got, 1) {
		t.Errorf("FakeLaunchCost(400 CPU) = %v, want +Inf (largest type has 399.9 allocatable)", got)
	}
}
