package schedulingtest_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

func checkTypes() []*catalog.InstanceType {
	return []*catalog.InstanceType{
		st.InstanceType("m5.large", "2", "8Gi", "29", 0.096),
		st.InstanceType("m5.xlarge", "4", "16Gi", "58", 0.192),
	}
}

// claim builds a NewClaim of pool "default" holding pods, with requests
// equal to the pods' requests, candidates types and the expected offering
// m5.large/us-east-1a/on-demand.
func claim(zone string, types []string, pods ...*corev1.Pod) scheduling.NewClaim {
	req := corev1.ResourceList{}
	for _, p := range pods {
		for k, v := range st.PodRequests(p) {
			q := req[k]
			q.Add(v)
			req[k] = q
		}
	}
	req[corev1.ResourcePods] = *resource.NewQuantity(int64(len(pods)), resource.DecimalSI)
	cl := scheduling.NewClaim{
		NodePool: "default", NodeClass: "default", InstanceTypes: types,
		Expected: scheduling.ExpectedOffering{InstanceType: types[0], Zone: "us-east-1a", CapacityType: v1.CapacityTypeOnDemand, PricePerHour: 0.096},
	}
	if types[0] == "m5.xlarge" {
		cl.Expected.PricePerHour = 0.192
	}
	cl.NodeClaim.Spec.Resources.Requests = req
	if zone != "" {
		cl.NodeClaim.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}
	}
	for _, p := range pods {
		cl.Pods = append(cl.Pods, string(p.UID))
	}
	return cl
}

func TestCheckResultAcceptsValidPlans(t *testing.T) {
	web := st.Pod("web-0", st.Requests("500m", "1Gi"))
	zoned := st.Pod("zoned-0", st.Requests("500m", "1Gi"), st.NodeSelector(map[string]string{v1.LabelTopologyZone: "us-east-1a"}))
	group := map[string]string{"group": "a"}
	aff0 := st.Pod("aff-0", st.Requests("100m", "100Mi"), st.Labels(group), st.PodAffinity(v1.LabelTopologyZone, group))
	aff1 := st.Pod("aff-1", st.Requests("100m", "100Mi"), st.Labels(group), st.PodAffinity(v1.LabelTopologyZone, group))
	node := st.Node("node-1", st.NodeAllocatable("4", "16Gi", "110"))
	big := st.Pod("big-0", st.Requests("3", "1Gi"))
	big1 := st.Pod("big-1", st.Requests("3", "1Gi"))
	heavyLimited := func(cpu string) v1.NodePool {
		return st.NodePool("heavy", st.PoolWeight(50), st.PoolLimits("cpu", cpu))
	}
	heavyClaim := claim("", []string{"m5.xlarge"}, big)
	heavyClaim.NodePool = "heavy"
	tests := []struct {
		name string
		in   scheduling.Input
		res  scheduling.Result
	}{
		{
			name: "should accept one pod on the cheapest fitting candidate",
			in:   st.Input([]v1.NodePool{st.NodePool("default")}, checkTypes(), []*corev1.Pod{web}),
			res:  scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large", "m5.xlarge"}, web)}},
		},
		{
			name: "should accept a zone selector when the claim is pinned to that zone",
			in:   st.Input([]v1.NodePool{st.NodePool("default")}, checkTypes(), []*corev1.Pod{zoned}),
			res:  scheduling.Result{NewClaims: []scheduling.NewClaim{claim("us-east-1a", []string{"m5.large"}, zoned)}},
		},
		{
			name: "should accept a placement on an existing node and an unschedulable pod with a reason",
			in:   st.Input([]v1.NodePool{st.NodePool("default")}, checkTypes(), []*corev1.Pod{web, zoned}, st.WithNodes(st.Existing(node))),
			res: scheduling.Result{
				Placements:    map[string]string{string(web.UID): "node-1"},
				Unschedulable: map[string]string{string(zoned.UID): "no zone"},
			},
		},
		{
			name: "should accept a pod on a lighter pool's claim when the heavier pool's limit stops it after the plan's claims of that pool",
			in:   st.Input([]v1.NodePool{st.NodePool("default"), heavyLimited("4")}, checkTypes(), []*corev1.Pod{big, web}),
			res:  scheduling.Result{NewClaims: []scheduling.NewClaim{heavyClaim, claim("", []string{"m5.large"}, web)}},
		},
		{
			name: "should accept a pod the limited heavier pool could take in a lighter pool's claim opened by a pod its limit stops",
			in:   st.Input([]v1.NodePool{st.NodePool("default"), heavyLimited("6")}, checkTypes(), []*corev1.Pod{big, big1, web}),
			res:  scheduling.Result{NewClaims: []scheduling.NewClaim{heavyClaim, claim("", []string{"m5.xlarge"}, big1, web)}},
		},
		{
			name: "should accept a zone affinity group on two claims pinned to one zone",
			in:   st.Input([]v1.NodePool{st.NodePool("default")}, checkTypes(), []*corev1.Pod{aff0, aff1}),
			res: scheduling.Result{NewClaims: []scheduling.NewClaim{
				claim("us-east-1a", []string{"m5.large"}, aff0), claim("us-east-1a", []string{"m5.large"}, aff1),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := st.CheckResult(tt.in, tt.res); err != nil {
				t.Errorf("CheckResult() = %v, want nil", err)
			}
		})
	}
}

func TestCheckResultReportsViolations(t *testing.T) {
	pool := st.NodePool("default")
	web := st.Pod("web-0", st.Requests("500m", "1Gi"))
	big := st.Pod("big-0", st.Requests("3", "1Gi"))
	zoned := st.Pod("zoned-0", st.Requests("500m", "1Gi"), st.NodeSelector(map[string]string{v1.LabelTopologyZone: "us-east-1b"}))
	nginx := map[string]string{"app": "nginx"}
	anti0 := st.Pod("anti-0", st.Labels(nginx), st.PodAntiAffinity(v1.LabelHostname, nginx))
	anti1 := st.Pod("anti-1", st.Labels(nginx), st.PodAntiAffinity(v1.LabelHostname, nginx))
	spread0 := st.Pod("spread-0", st.Labels(nginx), st.TopologySpread(v1.LabelHostname, 1, corev1.DoNotSchedule, nginx))
	spread1 := st.Pod("spread-1", st.Labels(nginx), st.TopologySpread(v1.LabelHostname, 1, corev1.DoNotSchedule, nginx))
	zspread := st.Pod("zspread-0", st.Labels(nginx), st.TopologySpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, nginx))
	port0 := st.Pod("port-0", st.HostPort(8080, corev1.ProtocolTCP))
	port1 := st.Pod("port-1", st.HostPort(8080, corev1.ProtocolTCP))
	tainted := st.NodePool("default", st.PoolTaint("workload", "batch", corev1.TaintEffectNoSchedule))
	limited := st.NodePool("default", st.PoolLimits("cpu", "3"))
	deleting := st.Existing(st.Node("node-1", st.NodeAllocatable("4", "16Gi", "110")))
	deleting.MarkedForDeletion = true
	cheapFirst := claim("", []string{"m5.xlarge", "m5.large"}, web)
	wrongPrice := claim("", []string{"m5.large"}, web)
	wrongPrice.Expected.PricePerHour = 0.05
	short := claim("", []string{"m5.large"}, web)
	short.NodeClaim.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	heavy := st.NodePool("heavy", st.PoolWeight(50))
	heavyClaim := claim("", []string{"m5.xlarge"}, big)
	heavyClaim.NodePool = "heavy"
	web1 := st.Pod("web-1", st.Requests("500m", "1Gi"))
	heavyLimited := st.NodePool("heavy", st.PoolWeight(50), st.PoolLimits("cpu", "6"))
	db := st.Pod("db-0", st.Requests("500m", "1Gi"), st.WithClaim("data-db-0"))
	attached := st.Existing(st.Node("node-1", st.NodeAllocatable("4", "16Gi", "110")),
		st.Pod("db-1", st.Requests("100m", "100Mi"), st.WithClaim("data-db-1")))
	attached.VolumeLimits = map[string]int{"ebs.csi.aws.com": 1}
	vols := func(in *scheduling.Input) {
		in.Volumes = scheduling.Volumes{
			Claims:            []corev1.PersistentVolumeClaim{st.BoundClaim("default", "data-db-0", "pv-0"), st.BoundClaim("default", "data-db-1", "pv-1")},
			PersistentVolumes: []corev1.PersistentVolume{st.ZonalVolume("pv-0", "us-east-1a"), st.ZonalVolume("pv-1", "us-east-1a")},
		}
	}

	tests := []struct {
		name    string
		in      scheduling.Input
		res     scheduling.Result
		wantErr string
	}{
		{"should report a pod that is neither placed nor unschedulable",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{web}), scheduling.Result{},
			"neither placed nor unschedulable"},
		{"should report a pod placed twice",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{web}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large"}, web)}, Unschedulable: map[string]string{string(web.UID): "x"}},
			"is in both"},
		{"should report an unschedulable pod without a reason",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{web}),
			scheduling.Result{Unschedulable: map[string]string{string(web.UID): ""}},
			"without a reason"},
		{"should report an unknown pod UID",
			st.Input([]v1.NodePool{pool}, checkTypes(), nil),
			scheduling.Result{Unschedulable: map[string]string{"nope": "x"}},
			"unknown pod UID"},
		{"should report a placement on a node marked for deletion",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{web}, st.WithNodes(deleting)),
			scheduling.Result{Placements: map[string]string{string(web.UID): "node-1"}},
			"marked for deletion"},
		{"should report a candidate that cannot hold the requests",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{big}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large", "m5.xlarge"}, big)}},
			"candidate m5.large cannot hold"},
		{"should report requests that do not cover the pods",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{web}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{short}},
			"do not cover its pods"},
		{"should report an expected offering that is not the cheapest",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{web}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{cheapFirst}},
			"an allowed offering costs 0.096"},
		{"should report an expected price that is not the offering's",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{web}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{wrongPrice}},
			"offering price 0.096"},
		{"should report more candidates than MaxInstanceTypes",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{web}, st.WithOptions(scheduling.Options{MaxInstanceTypes: 1})),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large", "m5.xlarge"}, web)}},
			"2 candidate instance types, want 1 to 1"},
		{"should report a pod that does not tolerate the pool's taint",
			st.Input([]v1.NodePool{tainted}, checkTypes(), []*corev1.Pod{web}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large"}, web)}},
			"does not tolerate"},
		{"should report a zone selector the claim does not pin",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{zoned}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large"}, zoned)}},
			"node requirements fail on candidate m5.large in us-east-1a"},
		{"should report two hostname anti-affinity pods on one claim",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{anti0, anti1}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large"}, anti0, anti1)}},
			"has anti-affinity to pod default/anti-1"},
		{"should report two self-matching hostname spread pods on one claim",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{spread0, spread1}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large"}, spread0, spread1)}},
			"maxSkew 1"},
		{"should report a zone spread pod on a claim not pinned to one zone",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{zspread}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large"}, zspread)}},
			"zone spread constraint"},
		{"should report two pods using one host port",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{port0, port1}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large"}, port0, port1)}},
			"host port 8080/TCP"},
		{"should report a pod on a lighter pool's claim when a heavier pool without limits could take it",
			st.Input([]v1.NodePool{pool, heavy}, checkTypes(), []*corev1.Pod{web, big}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large"}, web), heavyClaim}},
			"the heavier NodePool heavy (weight 50, no limits) could take it"},
		{"should report a lighter pool's claim whose pods fit a heavier pool with limits within what the plan leaves of them",
			st.Input([]v1.NodePool{pool, heavyLimited}, checkTypes(), []*corev1.Pod{big, web, web1}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{heavyClaim, claim("", []string{"m5.large"}, web, web1)}},
			"could each take a node of the heavier NodePool heavy (weight 50) within its limits"},
		{"should report a placement past an existing node's CSI attach limit",
			st.Input([]v1.NodePool{pool}, checkTypes(), []*corev1.Pod{db}, st.WithNodes(attached), vols),
			scheduling.Result{Placements: map[string]string{string(db.UID): "node-1"}},
			"2 claims of CSI driver ebs.csi.aws.com after the plan, attach limit 1"},
		{"should report a cpu limit exceeded by the largest candidate",
			st.Input([]v1.NodePool{limited}, checkTypes(), []*corev1.Pod{web}),
			scheduling.Result{NewClaims: []scheduling.NewClaim{claim("", []string{"m5.large", "m5.xlarge"}, web)}},
			"cpu limit 3 exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := st.CheckResult(tt.in, tt.res)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CheckResult() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
