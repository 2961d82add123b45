package scheduling_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// requests renders a NodeClaim's resources.requests as strings.
func requests(nc v1.NodeClaim) map[string]string {
	out := map[string]string{}
	for k, q := range nc.Spec.Resources.Requests {
		out[string(k)] = q.String()
	}
	return out
}

// requirement returns the NodeClaim requirement for key.
func requirement(nc v1.NodeClaim, key string) v1.NodeSelectorRequirementWithMinValues {
	for _, r := range nc.Spec.Requirements {
		if r.Key == key {
			return r
		}
	}
	return v1.NodeSelectorRequirementWithMinValues{}
}

func TestSolveDaemonSetOverhead(t *testing.T) {
	tests := []struct {
		name     string
		pool     v1.NodePool
		ds       []appsDaemon
		pod      *corev1.Pod
		wantReqs map[string]string
		wantType string
	}{
		{
			name:     "should add daemonset overhead and the pods count to the nodeclaim's requests (11.3 item 11)",
			pool:     st.NodePool("default"),
			ds:       []appsDaemon{{"agent", []st.PodOption{st.Requests("100m", "128Mi")}}},
			pod:      st.Pod("p", st.Requests("1", "1Gi")),
			wantReqs: map[string]string{"cpu": "1100m", "memory": "1152Mi", "pods": "2"},
			wantType: "m6g.large",
		},
		{
			name:     "should exclude instance types that cannot hold the pods plus daemonset overhead (11.3 item 11)",
			pool:     st.NodePool("default"),
			ds:       []appsDaemon{{"agent", []st.PodOption{st.Requests("1500m", "")}}},
			pod:      st.Pod("p", st.Requests("1", "1Gi")),
			wantReqs: map[string]string{"cpu": "2500m", "memory": "1Gi", "pods": "2"},
			wantType: "c6i.xlarge",
		},
		{
			name:     "should not count a daemonset that does not tolerate the nodepool's taints",
			pool:     st.NodePool("default", st.PoolTaint("dedicated", "db", corev1.TaintEffectNoSchedule)),
			ds:       []appsDaemon{{"agent", []st.PodOption{st.Requests("1500m", "")}}},
			pod:      st.Pod("p", st.Requests("1", "1Gi"), st.Toleration("dedicated", "db", corev1.TaintEffectNoSchedule)),
			wantReqs: map[string]string{"cpu": "1", "memory": "1Gi", "pods": "1"},
			wantType: "m6g.large",
		},
		{
			name:     "should count a daemonset that tolerates every taint",
			pool:     st.NodePool("default", st.PoolTaint("dedicated", "db", corev1.TaintEffectNoSchedule)),
			ds:       []appsDaemon{{"agent", []st.PodOption{st.Requests("100m", ""), st.Toleration("", "", "")}}},
			pod:      st.Pod("p", st.Requests("1", "1Gi"), st.Toleration("dedicated", "db", corev1.TaintEffectNoSchedule)),
			wantReqs: map[string]string{"cpu": "1100m", "memory": "1Gi", "pods": "2"},
			wantType: "m6g.large",
		},
		{
			name:     "should count a daemonset despite a PreferNoSchedule taint",
			pool:     st.NodePool("default", st.PoolTaint("soft", "", corev1.TaintEffectPreferNoSchedule)),
			ds:       []appsDaemon{{"agent", []st.PodOption{st.Requests("100m", "")}}},
			pod:      st.Pod("p", st.Requests("1", "1Gi"), st.Toleration("soft", "", corev1.TaintEffectPreferNoSchedule)),
			wantReqs: map[string]string{"cpu": "1100m", "memory": "1Gi", "pods": "2"},
			wantType: "m6g.large",
		},
		{
			name:     "should not count a daemonset whose node affinity excludes the nodepool",
			pool:     st.NodePool("default", st.PoolRequirement(v1.LabelArch, corev1.NodeSelectorOpIn, "amd64")),
			ds:       []appsDaemon{{"arm-agent", []st.PodOption{st.Requests("1500m", ""), st.NodeSelector(map[string]string{v1.LabelArch: "arm64"})}}},
			pod:      st.Pod("p", st.Requests("1", "1Gi")),
			wantReqs: map[string]string{"cpu": "1", "memory": "1Gi", "pods": "1"},
			wantType: "c6i.large",
		},
		{
			name:     "should count a daemonset only on the instance types it selects",
			pool:     st.NodePool("default"),
			ds:       []appsDaemon{{"gpu-agent", []st.PodOption{st.Requests("3", ""), st.RequiredNodeAffinity(st.Term(st.Exists(v1.LabelInstanceGPUCount)))}}},
			pod:      st.Pod("p", st.Requests("1", "1Gi")),
			wantReqs: map[string]string{"cpu": "1", "memory": "1Gi", "pods": "1"},
			wantType: "m6g.large",
		},
		{
			name:     "should count limits as requests for limits-only daemonset containers",
			pool:     st.NodePool("default"),
			ds:       []appsDaemon{{"agent", []st.PodOption{st.Limits("200m", "256Mi")}}},
			pod:      st.Pod("p", st.Requests("1", "1Gi")),
			wantReqs: map[string]string{"cpu": "1200m", "memory": "1280Mi", "pods": "2"},
			wantType: "m6g.large",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dss []st.InputOption
			for _, d := range tt.ds {
				dss = append(dss, st.WithDaemonSets(st.DaemonSet(d.name, d.opts...)))
			}
			in := input([]v1.NodePool{tt.pool}, []*corev1.Pod{tt.pod}, dss...)
			res := solve(t, in)
			if len(res.NewClaims) != 1 {
				t.Fatalf("got %d claims, want 1 (unschedulable %v)", len(res.NewClaims), res.Unschedulable)
			}
			c := res.NewClaims[0]
			if diff := cmp.Diff(tt.wantReqs, requests(c.NodeClaim)); diff != "" {
				t.Errorf("resources.requests mismatch (-want +got):\n%s", diff)
			}
			if c.Expected.InstanceType != tt.wantType {
				t.Errorf("cheapest candidate = %s, want %s (candidates %v)", c.Expected.InstanceType, tt.wantType, c.InstanceTypes)
			}
		})
	}
}

type appsDaemon struct {
	name string
	opts []st.PodOption
}

func TestSolveLimits(t *testing.T) {
	taint := st.NodeTaint("reserved", "x", corev1.TaintEffectNoSchedule)
	existing8 := st.Existing(st.Node("n1", st.ManagedBy("default"), st.NodeAllocatable("8", "32Gi", "58"), taint))
	tests := []struct {
		name       string
		pool       v1.NodePool
		nodes      []scheduling.ExistingNode
		pods       []*corev1.Pod
		wantClaims int
		wantUnsch  int
		// wantMaxCPU bounds the sum, over new claims, of the largest
		// candidate's cpu: the worst case a launch can reach.
		wantMaxCPU int64
	}{
		{
			name:       "should only consider instance types within the remaining cpu limit (11.3 item 10)",
			pool:       st.NodePool("default", st.PoolLimits("cpu", "10")),
			nodes:      []scheduling.ExistingNode{existing8},
			pods:       pods("web", 1, st.Requests("500m", "1Gi")),
			wantClaims: 1, wantMaxCPU: 2,
		},
		{
			name:      "should not launch when existing capacity reaches the cpu limit (11.3 item 10)",
			pool:      st.NodePool("default", st.PoolLimits("cpu", "8")),
			nodes:     []scheduling.ExistingNode{existing8},
			pods:      pods("web", 1, st.Requests("500m", "1Gi")),
			wantUnsch: 1,
		},
		{
			name:       "should keep the largest candidates of all claims within the limit",
			pool:       st.NodePool("default", st.PoolLimits("cpu", "16")),
			pods:       pods("web", 2, st.Labels(web), st.Requests("3", "1Gi"), st.PodAntiAffinity(v1.LabelHostname, web)),
			wantClaims: 2, wantMaxCPU: 16,
		},
		{
			name:       "should leave pods unschedulable once their cheapest types exhaust the limit",
			pool:       st.NodePool("default", st.PoolLimits("cpu", "8")),
			pods:       pods("web", 3, st.Labels(web), st.Requests("3", "1Gi"), st.PodAntiAffinity(v1.LabelHostname, web)),
			wantClaims: 2, wantUnsch: 1, wantMaxCPU: 8,
		},
		{
			name:       "should respect a memory limit",
			pool:       st.NodePool("default", st.PoolLimits("memory", "16Gi")),
			pods:       pods("web", 1, st.Requests("500m", "1Gi")),
			wantClaims: 1, wantMaxCPU: 4,
		},
		{
			name:       "should stop at the node-count limit",
			pool:       st.NodePool("default", st.PoolLimits("nodes", "2")),
			pods:       pods("web", 3, st.Labels(web), st.Requests("100m", "128Mi"), st.PodAntiAffinity(v1.LabelHostname, web)),
			wantClaims: 2, wantUnsch: 1, wantMaxCPU: 32,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{tt.pool}, tt.pods, st.WithNodes(tt.nodes...))
			res := solve(t, in)
			if len(res.NewClaims) != tt.wantClaims || len(res.Unschedulable) != tt.wantUnsch {
				t.Fatalf("got %d claims and %d unschedulable (%v), want %d and %d",
					len(res.NewClaims), len(res.Unschedulable), res.Unschedulable, tt.wantClaims, tt.wantUnsch)
			}
			cpus := map[string]int64{}
			for _, it := range in.InstanceTypes[st.DefaultNodeClass] {
				cpus[it.Name] = it.Capacity.Cpu().Value()
			}
			var sum int64
			for _, c := range res.NewClaims {
				var largest int64
				for _, name := range c.InstanceTypes {
					largest = max(largest, cpus[name])
				}
				sum += largest
			}
			if sum != tt.wantMaxCPU && len(res.NewClaims) > 0 {
				t.Errorf("largest candidates sum to %d cpu, want %d", sum, tt.wantMaxCPU)
			}
		})
	}
}

// familyTypes builds n types of family fam priced from base upward.
func familyTypes(fam string, n int, base float64) []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for i := 0; i < n; i++ {
		name := fam + "." + []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge"}[i]
		out = append(out, st.InstanceType(name, "4", "16Gi", "58", base+float64(i)*0.01))
	}
	return out
}

func TestSolveMinValues(t *testing.T) {
	twoFamilies := append(familyTypes("m7i", 3, 0.1), familyTypes("c7i", 2, 0.5)...)
	tests := []struct {
		name         string
		types        []*catalog.InstanceType
		pool         v1.NodePool
		opts         scheduling.Options
		wantUnsch    string
		wantRelaxed  string
		wantFamilies int
		wantTypes    int
	}{
		{
			name:      "should fail a pod when minValues cannot be met under the Strict policy (11.3 item 8)",
			types:     twoFamilies,
			pool:      st.NodePool("default", st.PoolRequirementMinValues(3, v1.LabelInstanceFamily, corev1.NodeSelectorOpExists)),
			wantUnsch: "minValues 3 for karpenter.k8s.aws/instance-family cannot be met: the compatible instance types that fit offer 2",
		},
		{
			name:         "should relax minValues and annotate the nodeclaim under the BestEffort policy (11.3 item 8)",
			types:        twoFamilies,
			pool:         st.NodePool("default", st.PoolRequirementMinValues(3, v1.LabelInstanceFamily, corev1.NodeSelectorOpExists)),
			opts:         scheduling.Options{MinValuesPolicy: scheduling.MinValuesPolicyBestEffort},
			wantRelaxed:  "true",
			wantFamilies: 2, wantTypes: 5,
		},
		{
			name:         "should keep minValues when truncating the candidates to the cheapest",
			types:        twoFamilies,
			pool:         st.NodePool("default", st.PoolRequirementMinValues(2, v1.LabelInstanceFamily, corev1.NodeSelectorOpExists)),
			opts:         scheduling.Options{MaxInstanceTypes: 3},
			wantRelaxed:  "false",
			wantFamilies: 2, wantTypes: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := st.Input([]v1.NodePool{tt.pool}, tt.types, []*corev1.Pod{st.Pod("p", st.Requests("1", "1Gi"))}, st.WithOptions(tt.opts))
			res := solve(t, in)
			if tt.wantUnsch != "" {
				if why := reasonOf(t, res); !strings.Contains(why, tt.wantUnsch) {
					t.Errorf("reason = %q, want it to contain %q", why, tt.wantUnsch)
				}
				return
			}
			if len(res.NewClaims) != 1 {
				t.Fatalf("got %d claims, want 1 (unschedulable %v)", len(res.NewClaims), res.Unschedulable)
			}
			c := res.NewClaims[0]
			if got := c.NodeClaim.Annotations[v1.AnnotationNodeClaimMinValuesRelaxed]; got != tt.wantRelaxed {
				t.Errorf("%s = %q, want %q", v1.AnnotationNodeClaimMinValuesRelaxed, got, tt.wantRelaxed)
			}
			fams := map[string]bool{}
			for _, n := range c.InstanceTypes {
				fams[strings.SplitN(n, ".", 2)[0]] = true
			}
			if len(fams) != tt.wantFamilies || len(c.InstanceTypes) != tt.wantTypes {
				t.Errorf("candidates %v: %d families, %d types; want %d and %d", c.InstanceTypes, len(fams), len(c.InstanceTypes), tt.wantFamilies, tt.wantTypes)
			}
			if r := requirement(c.NodeClaim, v1.LabelInstanceFamily); r.MinValues == nil || *r.MinValues != tt.wantFamilies {
				t.Errorf("family requirement = %+v, want minValues %d", r, tt.wantFamilies)
			}
		})
	}
}

func TestSolveCandidateList(t *testing.T) {
	tests := []struct {
		name string
		opts scheduling.Options
		want int
	}{
		{name: "should list at most 60 candidates by default", want: 60},
		{name: "should list at most MaxInstanceTypes candidates", opts: scheduling.Options{MaxInstanceTypes: 7}, want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := st.BenchmarkInput([]*corev1.Pod{st.Pod("p", st.Requests("1", "1Gi"))}, "")
			in.Options = tt.opts
			res := solve(t, in)
			c := res.NewClaims[0]
			if len(c.InstanceTypes) != tt.want {
				t.Fatalf("got %d candidates, want %d", len(c.InstanceTypes), tt.want)
			}
			prices := map[string]float64{}
			for _, it := range in.InstanceTypes[st.DefaultNodeClass] {
				prices[it.Name] = it.Offerings[0].Price
			}
			if !sort.SliceIsSorted(c.InstanceTypes, func(i, j int) bool { return prices[c.InstanceTypes[i]] < prices[c.InstanceTypes[j]] }) {
				t.Errorf("candidates are not cheapest first: %v", c.InstanceTypes)
			}
			if c.InstanceTypes[0] != "fake-it-1" {
				t.Errorf("cheapest candidate = %s, want fake-it-1 (1.1 cpu needed)", c.InstanceTypes[0])
			}
			if r := requirement(c.NodeClaim, v1.LabelInstanceType); len(r.Values) != tt.want {
				t.Errorf("instance-type requirement lists %d values, want %d", len(r.Values), tt.want)
			}
		})
	}
}

func TestSolveNodeClaimShape(t *testing.T) {
	expire := v1.MustParseNillable("24h")
	tgp := v1.Duration{Duration: time.Hour, Raw: "1h"}
	pool := st.NodePool("general",
		st.PoolLabels(map[string]string{"team": "payments"}),
		st.PoolRequirement("tier", corev1.NodeSelectorOpIn, "gold", "silver"),
		st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand),
		st.PoolTaint("dedicated", "payments", corev1.TaintEffectNoSchedule),
		st.PoolStartupTaint("node.cilium.io/agent-not-ready", "true", corev1.TaintEffectNoSchedule),
		func(np *v1.NodePool) {
			np.Spec.Template.ObjectMeta.Annotations = map[string]string{"example.com/owner": "payments"}
			np.Spec.Template.Spec.ExpireAfter = expire
			np.Spec.Template.Spec.TerminationGracePeriod = &tgp
			np.Annotations = map[string]string{v1.AnnotationNodePoolHash: "123", v1.AnnotationNodePoolHashVersion: v1.NodePoolHashVersion}
		})
	pod := st.Pod("p", st.Requests("1", "1Gi"), st.Toleration("dedicated", "payments", corev1.TaintEffectNoSchedule),
		st.NodeSelector(map[string]string{"tier": "gold", v1.LabelArch: "amd64"}))
	in := st.Input([]v1.NodePool{pool}, withSpot(testTypes(), 0.4), []*corev1.Pod{pod})
	res := solve(t, in)
	if len(res.NewClaims) != 1 {
		t.Fatalf("got %d claims, want 1 (unschedulable %v)", len(res.NewClaims), res.Unschedulable)
	}
	c := res.NewClaims[0]
	nc := c.NodeClaim
	want := v1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "general-1", GenerateName: "general-",
			Labels: map[string]string{"team": "payments", "tier": "gold", v1.LabelNodePool: "general", v1.LabelEC2NodeClass: "default"},
			Annotations: map[string]string{"example.com/owner": "payments", v1.AnnotationNodeClaimMinValuesRelaxed: "false",
				v1.AnnotationNodePoolHash: "123", v1.AnnotationNodePoolHashVersion: v1.NodePoolHashVersion},
			CreationTimestamp: metav1.NewTime(st.Epoch),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "general",
				UID: pool.UID, BlockOwnerDeletion: ptr(true)}},
		},
		Spec: v1.NodeClaimSpec{
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelEC2NodeClass, Operator: corev1.NodeSelectorOpIn, Values: []string{"default"}},
				{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand, v1.CapacityTypeSpot}},
				{Key: v1.LabelNodePool, Operator: corev1.NodeSelectorOpIn, Values: []string{"general"}},
				{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
				{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: sortedCopy(c.InstanceTypes)},
				{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"payments"}},
				{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"gold"}},
			},
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("1")}},
			NodeClassRef:           pool.Spec.Template.Spec.NodeClassRef,
			TerminationGracePeriod: &tgp,
			ExpireAfter:            expire,
		},
	}
	if diff := cmp.Diff(want, nc, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("NodeClaim mismatch (-want +got):\n%s", diff)
	}
	wantExpected := scheduling.ExpectedOffering{InstanceType: "c6i.large", Zone: "us-east-1a", CapacityType: v1.CapacityTypeSpot, PricePerHour: 0.085 * 0.4}
	if diff := cmp.Diff(wantExpected, c.Expected, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("Expected mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"us-east-1a", "us-east-1b", "us-east-1c"}, c.Zones); diff != "" {
		t.Errorf("Zones mismatch (-want +got):\n%s", diff)
	}
	if c.NodePool != "general" || c.NodeClass != "default" || len(c.Pods) != 1 || c.Pods[0] != string(pod.UID) {
		t.Errorf("claim = pool %q class %q pods %v; want general, default, [%s]", c.NodePool, c.NodeClass, c.Pods, pod.UID)
	}
}

func TestSolveExpectedOffering(t *testing.T) {
	tests := []struct {
		name  string
		pool  v1.NodePool
		ratio float64 // spot price / on-demand price
		want  string  // capacity type
	}{
		{name: "should expect spot when spot is allowed and available", pool: st.NodePool("default"), ratio: 0.4, want: v1.CapacityTypeSpot},
		{name: "should expect on-demand when the nodepool requires it",
			pool:  st.NodePool("default", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand)),
			ratio: 0.4, want: v1.CapacityTypeOnDemand},
		{name: "should expect on-demand when every spot offering is pricier than the cheapest on-demand one",
			pool: st.NodePool("default"), ratio: 1.2, want: v1.CapacityTypeOnDemand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := st.Input([]v1.NodePool{tt.pool}, withSpot(testTypes(), tt.ratio), []*corev1.Pod{st.Pod("p", st.Requests("1", "1Gi"))})
			res := solve(t, in)
			if got := res.NewClaims[0].Expected.CapacityType; got != tt.want {
				t.Errorf("expected capacity type = %s, want %s", got, tt.want)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
