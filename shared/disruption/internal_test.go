package disruption

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/requirements"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

func typeNames(types []*catalog.InstanceType) []string {
	out := []string{}
	for _, it := range types {
		out = append(out, it.Name)
	}
	return out
}

// The multi-node guard vectors of karpenter-spec §6.6 (t3a on-demand
// prices in us-east-1).
func TestFilterOutSameType(t *testing.T) {
	nano := st.InstanceType("t3a.nano", "2", "0.5Gi", "4", 0.0047)
	small := st.InstanceType("t3a.small", "2", "2Gi", "8", 0.0188)
	xlarge := st.InstanceType("t3a.xlarge", "4", "16Gi", "58", 0.1504)
	xlarge2 := st.InstanceType("t3a.2xlarge", "8", "32Gi", "58", 0.3008)
	cand := func(it *catalog.InstanceType) *node {
		return &node{it: it, price: it.Offerings[0].Price, priced: true}
	}
	cands := []*node{cand(xlarge2), cand(xlarge2), cand(small)}
	reqs := requirements.NewRequirements()
	tests := []struct {
		name    string
		options []*catalog.InstanceType
		want    []string
	}{
		{"should reject [2xlarge, 2xlarge, small] -> {small, xlarge, 2xlarge}", []*catalog.InstanceType{small, xlarge, xlarge2}, []string{}},
		{"should trim [2xlarge, 2xlarge, small] -> {nano, small, ...} to {nano}", []*catalog.InstanceType{nano, small, xlarge, xlarge2}, []string{"t3a.nano"}},
		{"should keep options when no candidate type is among them", []*catalog.InstanceType{nano}, []string{"t3a.nano"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := typeNames(filterOutSameType(tt.options, cands, reqs))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("filterOutSameType() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorstLaunchPrice(t *testing.T) {
	it := st.InstanceType("m5.large", "2", "8Gi", "29", 0, st.TypeOfferings(
		st.Offering("us-east-1a", v1.CapacityTypeOnDemand, 0.096),
		st.Offering("us-east-1a", v1.CapacityTypeSpot, 0.030),
		st.Offering("us-east-1b", v1.CapacityTypeSpot, 0.045),
		catalog.Offering{Zone: "us-east-1c", CapacityType: v1.CapacityTypeSpot, Price: 0.090, Available: false},
	))
	ct := func(values ...string) requirements.Requirements {
		return requirements.NewRequirements(requirements.New(v1.LabelCapacityType, corev1.NodeSelectorOpIn, values...))
	}
	tests := []struct {
		name string
		reqs requirements.Requirements
		want float64
	}{
		{"should price spot before on-demand, at its most expensive available zone", ct(v1.CapacityTypeSpot, v1.CapacityTypeOnDemand), 0.045},
		{"should price on-demand when only on-demand is allowed", ct(v1.CapacityTypeOnDemand), 0.096},
		{"should honour a zone requirement", requirements.NewRequirements(requirements.New(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a")), 0.030},
		{"should be infinite without an allowed offering", ct(v1.CapacityTypeReserved), math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := worstLaunchPrice(it, tt.reqs); got != tt.want {
				t.Errorf("worstLaunchPrice() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMinValuesPrefix(t *testing.T) {
	a := st.InstanceType("a.large", "2", "8Gi", "29", 1)
	b := st.InstanceType("b.large", "2", "8Gi", "29", 2)
	a2 := st.InstanceType("a.xlarge", "4", "16Gi", "29", 3)
	mv := func(n int) requirements.Requirements {
		r := requirements.New(v1.LabelInstanceFamily, corev1.NodeSelectorOpExists)
		r.MinValues = &n
		return requirements.NewRequirements(r)
	}
	tests := []struct {
		name   string
		types  []*catalog.InstanceType
		reqs   requirements.Requirements
		want   int
		wantOK bool
	}{
		{"should need no prefix without minValues", []*catalog.InstanceType{a}, requirements.NewRequirements(), 0, true},
		{"should count types until two families are offered", []*catalog.InstanceType{a, a2, b}, mv(2), 3, true},
		{"should fail when the types offer too few families", []*catalog.InstanceType{a, a2}, mv(2), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := minValuesPrefix(tt.types, tt.reqs)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("minValuesPrefix() = %d, %v, want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestPDBAllowedDisruptions(t *testing.T) {
	pod := func(name string, isReady bool) *corev1.Pod {
		p := st.Pod(name, st.Labels(map[string]string{"app": "api"}))
		if isReady {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	pods := []*corev1.Pod{pod("api-0", true), pod("api-1", true), pod("api-2", true), pod("api-3", false)}
	spec := func(minAvailable, maxUnavailable *intstr.IntOrString) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
				MinAvailable: minAvailable, MaxUnavailable: maxUnavailable},
		}
	}
	is := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	tests := []struct {
		name string
		pdb  policyv1.PodDisruptionBudget
		want int
	}{
		{"should allow healthy minus minAvailable", spec(is(intstr.FromInt32(2)), nil), 1},
		{"should round a minAvailable percentage up", spec(is(intstr.FromString("60%")), nil), 0},
		{"should allow healthy minus (expected minus maxUnavailable)", spec(nil, is(intstr.FromInt32(2))), 1},
		{"should allow nothing with maxUnavailable 0", spec(nil, is(intstr.FromInt32(0))), 0},
		{"should round a maxUnavailable percentage up", spec(nil, is(intstr.FromString("30%"))), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits, err := newPDBLimits([]policyv1.PodDisruptionBudget{tt.pdb}, pods)
			if err != nil {
				t.Fatalf("newPDBLimits() error = %v", err)
			}
			if got := limits[0].allowed; got != tt.want {
				t.Errorf("allowed = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestBlocksEvictionLetsUnhealthyPodsGoUnderAlwaysAllow(t *testing.T) {
	always := policyv1.AlwaysAllow
	b := policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			MaxUnavailable: &intstr.IntOrString{IntVal: 0}, UnhealthyPodEvictionPolicy: &always,
		},
	}
	unready := st.Pod("api-0", st.Labels(map[string]string{"app": "api"}))
	readyPod := st.Pod("api-1", st.Labels(map[string]string{"app": "api"}))
	readyPod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	limits, err := newPDBLimits([]policyv1.PodDisruptionBudget{b}, []*corev1.Pod{unready, readyPod})
	if err != nil {
		t.Fatalf("newPDBLimits() error = %v", err)
	}
	got := []string{blocksEviction(limits, unready), blocksEviction(limits, readyPod)}
	want := []string{"", "pod default/api-1 is protected by PodDisruptionBudget default/api (0 disruptions allowed)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocksEviction() mismatch (-want +got):\n%s", diff)
	}
}

func TestEvictionCost(t *testing.T) {
	withCost := func(deletionCost string, priority *int32) *corev1.Pod {
		p := st.Pod("p")
		if deletionCost != "" {
			p.Annotations = map[string]string{corev1.PodDeletionCost: deletionCost}
		}
		p.Spec.Priority = priority
		return p
	}
	high, low := int32(1_000_000_000), int32(-2_147_483_648)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want float64
	}{
		{"should cost 1 by default", withCost("", nil), 1},
		{"should add deletion cost / 2^27", withCost("134217728", nil), 2},
		{"should add priority / 2^25", withCost("", ptrTo(int32(1<<25))), 2},
		{"should clamp at 10", withCost("", &high), 10},
		{"should clamp at -10", withCost("", &low), -10},
		{"should ignore an unparsable deletion cost", withCost("lots", nil), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evictionCost(tt.pod); got != tt.want {
				t.Errorf("evictionCost() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLifetimeRemaining(t *testing.T) {
	nc := st.NodeClaim("a")
	nc.Spec.ExpireAfter = v1.MustParseNillable("10h")
	tests := []struct {
		name string
		now  time.Time
		want float64
	}{
		{"should be 1 at creation", st.Epoch, 1},
		{"should fall linearly", st.Epoch.Add(4 * time.Hour), 0.6},
		{"should floor at 0", st.Epoch.Add(20 * time.Hour), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lifetimeRemaining(nc, tt.now); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("lifetimeRemaining() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCommandIDIsAnExecutionName(t *testing.T) {
	long := "general-averyveryveryveryveryveryveryveryveryveryveryveryverylongnodeclaimname.with.dots"
	c := &Command{Method: MethodUnderutilized, Decision: DecisionDelete, Candidates: []Candidate{{NodeClaim: long}}}
	id := commandID(c)
	if len(id) > 80 {
		t.Errorf("commandID() = %q: %d characters, want at most 80", id, len(id))
	}
	const nameChars = "-_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for _, r := range id {
		if !strings.ContainsRune(nameChars, r) {
			t.Errorf("commandID() = %q contains %q", id, r)
		}
	}
	other := &Command{Method: MethodUnderutilized, Decision: DecisionDelete, Candidates: []Candidate{{NodeClaim: long}, {NodeClaim: "b"}}}
	if commandID(other) == id {
		t.Errorf("commandID() is the same for different candidate sets: %q", id)
	}
	if commandID(c) != id {
		t.Errorf("commandID() is not deterministic")
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestFilterByPriceNeverTakesAnEqualSummedPrice(t *testing.T) {
	big := st.InstanceType("m6a.16xlarge", "64", "256Gi", "737", 2.7648)
	sum := 0.0
	for i := 0; i < 8; i++ {
		sum += 0.3456
	}
	got, why := filterByPrice([]*catalog.InstanceType{big}, requirements.NewRequirements(), sum)
	if len(got) != 0 || why != "" {
		t.Errorf("filterByPrice(2.7648 vs 8 × 0.3456) = %v, %q; want nothing cheaper", typeNames(got), why)
	}
}
