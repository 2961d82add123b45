package scheduling_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

var web = map[string]string{"app": "web"}

// zoneOf returns, per pod name, the zone its claim is pinned to ("" when
// the claim may land in several zones) or the zone label of its node.
func zoneOf(t *testing.T, in scheduling.Input, res scheduling.Result) map[string]string {
	t.Helper()
	names := map[string]string{}
	for _, p := range in.Pods {
		names[string(p.UID)] = p.Name
	}
	out := map[string]string{}
	for _, c := range res.NewClaims {
		zone := ""
		if len(c.Zones) == 1 {
			zone = c.Zones[0]
		}
		for _, uid := range c.Pods {
			out[names[uid]] = zone
		}
	}
	nodeZone := map[string]string{}
	for _, n := range in.Nodes {
		if n.Node != nil {
			nodeZone[n.Node.Name] = n.Node.Labels[v1.LabelTopologyZone]
		}
	}
	for uid, node := range res.Placements {
		out[names[uid]] = nodeZone[node]
	}
	return out
}

// perZone counts pods per zone.
func perZone(zones map[string]string) map[string]int {
	out := map[string]int{}
	for _, z := range zones {
		out[z]++
	}
	return out
}

// hostsOf groups pod names by claim (by index) or node.
func hostsOf(in scheduling.Input, res scheduling.Result) [][]string {
	v := viewOf(in, res)
	var out [][]string
	for _, c := range v.Claims {
		out = append(out, c.Pods)
	}
	byNode := map[string][]string{}
	for p, n := range v.Placements {
		byNode[n] = append(byNode[n], p)
	}
	for _, ps := range byNode {
		sort.Strings(ps)
		out = append(out, ps)
	}
	return out
}

func TestSolveTopologySpread(t *testing.T) {
	m6iLarge := testTypes()[1]
	full := st.NodeAllocatable("1", "1Gi", "10")
	tests := []struct {
		name  string
		pool  v1.NodePool
		nodes []scheduling.ExistingNode
		pods  []*corev1.Pod
		want  map[string]int // pods per zone
	}{
		{
			name: "should balance pods across zones (required spread)",
			pool: st.NodePool("default"),
			pods: pods("web", 6, st.Labels(web), st.Requests("100m", "128Mi"), st.TopologySpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, web)),
			want: map[string]int{"us-east-1a": 2, "us-east-1b": 2, "us-east-1c": 2},
		},
		{
			name: "should balance pods across zones with existing pods counted",
			pool: st.NodePool("default"),
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", full, st.NodeType(m6iLarge, "us-east-1a", v1.CapacityTypeOnDemand), full),
				st.Pod("old-0", st.Labels(web)), st.Pod("old-1", st.Labels(web)))},
			pods: pods("web", 4, st.Labels(web), st.Requests("800m", "128Mi"), st.TopologySpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, web)),
			want: map[string]int{"us-east-1b": 2, "us-east-1c": 2},
		},
		{
			name: "should only spread across the zones the nodepool allows",
			pool: st.NodePool("default", st.PoolRequirement(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b")),
			pods: pods("web", 4, st.Labels(web), st.Requests("100m", "128Mi"), st.TopologySpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, web)),
			want: map[string]int{"us-east-1a": 2, "us-east-1b": 2},
		},
		{
			name: "should allow a larger skew with a larger maxSkew",
			pool: st.NodePool("default", st.PoolRequirement(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b")),
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeType(m6iLarge, "us-east-1a", v1.CapacityTypeOnDemand), full),
				st.Pod("old-0", st.Labels(web)), st.Pod("old-1", st.Labels(web)), st.Pod("old-2", st.Labels(web)))},
			pods: pods("web", 2, st.Labels(web), st.Requests("800m", "128Mi"), st.TopologySpread(v1.LabelTopologyZone, 2, corev1.DoNotSchedule, web)),
			want: map[string]int{"us-east-1b": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{tt.pool}, tt.pods, st.WithNodes(tt.nodes...))
			res := solve(t, in)
			if len(res.Unschedulable) != 0 {
				t.Fatalf("unschedulable: %v", res.Unschedulable)
			}
			if diff := cmp.Diff(tt.want, perZone(zoneOf(t, in, res))); diff != "" {
				t.Errorf("pods per zone mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSolveTopologyHostname(t *testing.T) {
	tests := []struct {
		name      string
		pods      []*corev1.Pod
		nodes     []scheduling.ExistingNode
		wantHosts int // distinct claims and nodes used
		wantUnsch int
	}{
		{
			name:      "should schedule pods with hostname anti-affinity on separate nodes",
			pods:      pods("web", 3, st.Labels(web), st.Requests("100m", "128Mi"), st.PodAntiAffinity(v1.LabelHostname, web)),
			wantHosts: 3,
		},
		{
			name:      "should spread pods across hostnames with maxSkew 1",
			pods:      pods("web", 3, st.Labels(web), st.Requests("100m", "128Mi"), st.TopologySpread(v1.LabelHostname, 1, corev1.DoNotSchedule, web)),
			wantHosts: 3,
		},
		{
			name:      "should put two pods per hostname with maxSkew 2",
			pods:      pods("web", 4, st.Labels(web), st.Requests("100m", "128Mi"), st.TopologySpread(v1.LabelHostname, 2, corev1.DoNotSchedule, web)),
			wantHosts: 2,
		},
		{
			name: "should co-locate pods with hostname pod affinity",
			pods: append(pods("db", 1, st.Labels(map[string]string{"app": "db"}), st.Requests("1", "1Gi")),
				pods("web", 2, st.Labels(web), st.Requests("100m", "128Mi"), st.PodAffinity(v1.LabelHostname, map[string]string{"app": "db"}))...),
			wantHosts: 1,
		},
		{
			name: "should not place a pod next to an existing pod whose required anti-affinity selects it",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("8", "32Gi", "100")),
				st.Pod("guard", st.Requests("100m", ""), st.PodAntiAffinity(v1.LabelHostname, web)))},
			pods:      pods("web", 1, st.Labels(web), st.Requests("100m", "128Mi")),
			wantHosts: 1, // a new claim, not n1
		},
		{
			name: "should not place a pod next to a pod of this round whose required anti-affinity selects it",
			pods: append(pods("guard", 1, st.Requests("1", "128Mi"), st.PodAntiAffinity(v1.LabelHostname, web)),
				pods("web", 1, st.Labels(web), st.Requests("100m", "128Mi"))...),
			wantHosts: 2,
		},
		{
			name: "should not place a pod with required pod affinity when no pod matches and it does not match itself",
			pods: pods("web", 1, st.Labels(web), st.Requests("100m", "128Mi"),
				st.PodAffinity(v1.LabelHostname, map[string]string{"app": "missing"})),
			wantUnsch: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{st.NodePool("default")}, tt.pods, st.WithNodes(tt.nodes...))
			res := solve(t, in)
			if len(res.Unschedulable) != tt.wantUnsch {
				t.Fatalf("unschedulable = %v, want %d pods", res.Unschedulable, tt.wantUnsch)
			}
			if tt.wantUnsch > 0 {
				return
			}
			if len(tt.nodes) > 0 && len(res.Placements) != 0 {
				t.Errorf("placements on existing nodes = %v, want none", res.Placements)
			}
			if hosts := hostsOf(in, res); len(hosts) != tt.wantHosts {
				t.Errorf("pods landed on %d hosts %v, want %d", len(hosts), hosts, tt.wantHosts)
			}
		})
	}
}

func TestSolveTopologyZoneAffinity(t *testing.T) {
	m6iLarge := testTypes()[1]
	db := map[string]string{"app": "db"}
	tests := []struct {
		name      string
		nodes     []scheduling.ExistingNode
		pods      []*corev1.Pod
		want      map[string]int
		wantUnsch []string // reason substrings, one pod
	}{
		{
			name: "should schedule pods with zone affinity to the zone of the matching pod",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeType(m6iLarge, "us-east-1b", v1.CapacityTypeOnDemand),
				st.NodeAllocatable("1", "1Gi", "10")), st.Pod("db-0", st.Labels(db)))},
			pods: pods("web", 3, st.Labels(web), st.Requests("500m", "128Mi"), st.PodAffinity(v1.LabelTopologyZone, db)),
			want: map[string]int{"us-east-1b": 3},
		},
		{
			name: "should keep a self-affine group in one zone",
			pods: pods("web", 4, st.Labels(web), st.Requests("1500m", "128Mi"), st.PodAffinity(v1.LabelTopologyZone, web)),
			want: map[string]int{"us-east-1a": 4},
		},
		{
			name:      "should not place more self anti-affine pods than zones",
			pods:      pods("web", 4, st.Labels(web), st.Requests("100m", "128Mi"), st.PodAntiAffinity(v1.LabelTopologyZone, web)),
			want:      map[string]int{"us-east-1a": 1, "us-east-1b": 1, "us-east-1c": 1},
			wantUnsch: []string{"pod anti-affinity on topology.kubernetes.io/zone", "every domain already has a matching pod"},
		},
		{
			name: "should treat fewer eligible zones than minDomains as a global minimum of 0",
			pods: pods("web", 4, st.Labels(web), st.Requests("100m", "128Mi"), st.SpreadConstraint(corev1.TopologySpreadConstraint{
				MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: web}, MinDomains: ptr(int32(5)),
			})),
			want:      map[string]int{"us-east-1a": 1, "us-east-1b": 1, "us-east-1c": 1},
			wantUnsch: []string{"topology spread on topology.kubernetes.io/zone", "cannot be satisfied"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{st.NodePool("default")}, tt.pods, st.WithNodes(tt.nodes...))
			res := solve(t, in)
			zones := zoneOf(t, in, res)
			for name := range zones {
				if !strings.HasPrefix(name, "web") {
					delete(zones, name)
				}
			}
			if diff := cmp.Diff(tt.want, perZone(zones)); diff != "" {
				t.Errorf("pods per zone mismatch (-want +got):\n%s", diff)
			}
			if len(tt.wantUnsch) == 0 {
				if len(res.Unschedulable) != 0 {
					t.Errorf("unschedulable = %v, want none", res.Unschedulable)
				}
				return
			}
			why := reasonOf(t, res)
			for _, w := range tt.wantUnsch {
				if !strings.Contains(why, w) {
					t.Errorf("reason = %q\nwant it to contain %q", why, w)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestSolveSpreadOverCapacityType(t *testing.T) {
	pool := st.NodePool("default")
	in := st.Input([]v1.NodePool{pool}, withSpot(testTypes(), 0.4),
		pods("web", 4, st.Labels(web), st.Requests("100m", "128Mi"), st.TopologySpread(v1.LabelCapacityType, 1, corev1.DoNotSchedule, web)))
	res := solve(t, in)
	got := map[string]int{}
	for _, c := range res.NewClaims {
		ct := strings.Join(c.CapacityTypes, ",")
		got[ct] += len(c.Pods)
	}
	want := map[string]int{"on-demand": 2, "spot": 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods per capacity type mismatch (-want +got):\n%s", diff)
	}
}

func TestSolveRelaxesScheduleAnywaySpread(t *testing.T) {
	// One node allowed: the hostname spread cannot hold for three pods, so
	// the ScheduleAnyway constraint is relaxed and they share the node.
	pool := st.NodePool("default", st.PoolLimits("nodes", "1"))
	in := input([]v1.NodePool{pool}, pods("web", 3, st.Labels(web), st.Requests("100m", "128Mi"),
		st.TopologySpread(v1.LabelHostname, 1, corev1.ScheduleAnyway, web)))
	res := solve(t, in)
	if len(res.Unschedulable) != 0 || len(res.NewClaims) != 1 {
		t.Fatalf("got %d claims, unschedulable %v; want one claim with every pod", len(res.NewClaims), res.Unschedulable)
	}
	if n := len(res.NewClaims[0].Pods); n != 3 {
		t.Errorf("claim holds %d pods, want 3", n)
	}
}

func TestSolveRelaxesPreferredAntiAffinityOnlyWhenNeeded(t *testing.T) {
	// Preferred hostname anti-affinity is hard until relaxed, and a new node
	// always satisfies it, so every pod gets its own node (Karpenter's
	// behaviour on the preference benchmark).
	in := input([]v1.NodePool{st.NodePool("default")}, pods("web", 3, st.Labels(web), st.Requests("100m", "128Mi"),
		st.PreferredPodAntiAffinity(1, v1.LabelHostname, web)))
	res := solve(t, in)
	if len(res.NewClaims) != 3 {
		t.Errorf("got %d claims, want 3 (one per pod)", len(res.NewClaims))
	}
}

func TestSolveNamespacesOfAffinityTerms(t *testing.T) {
	other := st.Pod("other-0", st.Namespace("other"), st.Labels(web), st.Requests("100m", "128Mi"))
	tests := []struct {
		name      string
		term      corev1.PodAffinityTerm
		wantHosts int
	}{
		{
			name:      "should only match pods of the owner's namespace by default",
			term:      corev1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: web}},
			wantHosts: 1,
		},
		{
			name:      "should match pods of every namespace with an empty namespace selector",
			term:      corev1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: web}, NamespaceSelector: &metav1.LabelSelector{}},
			wantHosts: 2,
		},
		{
			name:      "should match pods of listed namespaces",
			term:      corev1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: web}, Namespaces: []string{"other"}},
			wantHosts: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard := st.Pod("guard", st.Requests("100m", "128Mi"), func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{tt.term}}}
			})
			in := input([]v1.NodePool{st.NodePool("default")}, []*corev1.Pod{guard, other.DeepCopy()})
			res := solve(t, in)
			if got := len(res.NewClaims); got != tt.wantHosts {
				t.Errorf("got %d claims, want %d", got, tt.wantHosts)
			}
		})
	}
}

func TestSolveHostPorts(t *testing.T) {
	agentPort := []st.PodOption{st.Requests("10m", ""), st.HostPort(9100, corev1.ProtocolTCP), st.Toleration("", "", "")}
	inFlight := st.InFlight(st.NodeClaim("default-x", st.ClaimType(testTypes()[0], "us-east-1a", v1.CapacityTypeOnDemand)))
	tests := []struct {
		name      string
		pool      []st.NodePoolOption
		pods      []*corev1.Pod
		ds        []st.PodOption
		nodes     []scheduling.ExistingNode
		wantHosts int
		wantUnsch string
	}{
		{
			name:      "should leave pending, naming port and DaemonSet, a pod whose host port a tolerate-everything daemonset binds on a tainted pool",
			pool:      []st.NodePoolOption{st.PoolTaint("dedicated", "web", corev1.TaintEffectNoSchedule)},
			pods:      pods("web", 1, st.Requests("100m", "128Mi"), st.HostPort(9100, corev1.ProtocolTCP), st.Toleration("dedicated", "web", corev1.TaintEffectNoSchedule)),
			ds:        agentPort,
			wantUnsch: "host port 0.0.0.0:9100/TCP is taken by DaemonSet kube-system/agent",
		},
		{
			name: "should not add a pod to a planned claim whose daemonset binds its host port",
			pods: append(pods("big", 1, st.Requests("1", "1Gi")),
				pods("web", 1, st.Requests("100m", "128Mi"), st.HostPort(9100, corev1.ProtocolTCP))...),
			ds:        agentPort,
			wantUnsch: "host port 0.0.0.0:9100/TCP is taken by DaemonSet kube-system/agent",
		},
		{
			name:      "should not nominate a pod to an in-flight claim whose daemonset pod, not bound yet, will bind its host port",
			nodes:     []scheduling.ExistingNode{inFlight},
			pods:      pods("web", 1, st.Requests("100m", "128Mi"), st.HostPort(9100, corev1.ProtocolTCP)),
			ds:        agentPort,
			wantUnsch: "host port 0.0.0.0:9100/TCP is taken by DaemonSet kube-system/agent",
		},
		{
			name:      "should not place a pod on a registered node whose daemonset pod is not bound yet but will bind its host port",
			nodes:     []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("8", "32Gi", "100")))},
			pods:      pods("web", 1, st.Requests("100m", "128Mi"), st.HostPort(9100, corev1.ProtocolTCP)),
			ds:        agentPort,
			wantUnsch: "host port 0.0.0.0:9100/TCP is taken by DaemonSet kube-system/agent",
		},
		{
			name:      "should place a pod on a node whose daemonset binds other host ports",
			nodes:     []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("8", "32Gi", "100")))},
			pods:      pods("web", 1, st.Requests("100m", "128Mi"), st.HostPort(9101, corev1.ProtocolTCP)),
			ds:        agentPort,
			wantHosts: 1,
		},
		{
			name:      "should not schedule pods with the same host port on one node",
			pods:      pods("web", 2, st.Requests("100m", "128Mi"), st.HostPort(80, corev1.ProtocolTCP)),
			wantHosts: 2,
		},
		{
			name: "should schedule pods with the same host port and different protocols on one node",
			pods: append(pods("tcp", 1, st.Requests("100m", "128Mi"), st.HostPort(53, corev1.ProtocolTCP)),
				pods("udp", 1, st.Requests("100m", "128Mi"), st.HostPort(53, corev1.ProtocolUDP))...),
			wantHosts: 1,
		},
		{
			name:      "should not schedule a pod whose host port a daemonset takes",
			pods:      pods("web", 1, st.Requests("100m", "128Mi"), st.HostPort(9100, corev1.ProtocolTCP)),
			ds:        []st.PodOption{st.Requests("10m", ""), st.HostPort(9100, corev1.ProtocolTCP)},
			wantUnsch: "host port 0.0.0.0:9100/TCP is taken by DaemonSet kube-system/agent",
		},
		{
			name: "should not schedule to an existing node whose pods use the host port",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("8", "32Gi", "100")),
				st.Pod("old", st.Requests("100m", ""), st.HostPort(80, corev1.ProtocolTCP)))},
			pods:      pods("web", 1, st.Requests("100m", "128Mi"), st.HostPort(80, corev1.ProtocolTCP)),
			wantHosts: 1, // a new claim; n1 keeps only its own pod
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []st.InputOption{st.WithNodes(tt.nodes...)}
			if tt.ds != nil {
				opts = append(opts, st.WithDaemonSets(st.DaemonSet("agent", tt.ds...)))
			}
			in := input([]v1.NodePool{st.NodePool("default", tt.pool...)}, tt.pods, opts...)
			res := solve(t, in)
			if tt.wantUnsch != "" {
				if why := reasonOf(t, res); !strings.Contains(why, tt.wantUnsch) {
					t.Errorf("reason = %q, want it to contain %q", why, tt.wantUnsch)
				}
				return
			}
			if len(res.Unschedulable) != 0 {
				t.Fatalf("unschedulable = %v", res.Unschedulable)
			}
			if got := len(hostsOf(in, res)); got != tt.wantHosts {
				t.Errorf("pods on %d hosts, want %d (%v)", got, tt.wantHosts, hostsOf(in, res))
			}
		})
	}
}

func TestSolveAntiAffinityIgnoresNodesWithoutTheKey(t *testing.T) {
	db := map[string]string{"app": "db"}
	// n1 has no zone label: it shares no zone with anyone, so zone
	// anti-affinity to the db pod on it does not keep the pod away.
	in := input([]v1.NodePool{st.NodePool("default")},
		pods("web", 1, st.Labels(web), st.Requests("100m", "128Mi"), st.PodAntiAffinity(v1.LabelTopologyZone, db)),
		st.WithNodes(st.Existing(st.Node("n1", st.NodeAllocatable("4", "8Gi", "20")), st.Pod("db-0", st.Labels(db)))))
	res := solve(t, in)
	if diff := cmp.Diff(map[string]string{"web-0": "n1"}, viewOf(in, res).Placements); diff != "" {
		t.Errorf("placements mismatch (-want +got):\n%s", diff)
	}
}

func TestSolveSpreadPolicies(t *testing.T) {
	arm := st.Node("n1", st.NodeType(testTypes()[8], "us-east-1a", v1.CapacityTypeOnDemand), st.NodeAllocatable("1", "1Gi", "10"))
	old := func(i int, rev string) *corev1.Pod {
		return st.Pod(fmt.Sprintf("old-%d", i), st.Labels(map[string]string{"app": "web", "rev": rev}))
	}
	spread := func(affinityPolicy *corev1.NodeInclusionPolicy, matchLabelKeys ...string) st.PodOption {
		return st.SpreadConstraint(corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: web}, NodeAffinityPolicy: affinityPolicy, MatchLabelKeys: matchLabelKeys,
		})
	}
	ignore := corev1.NodeInclusionPolicyIgnore
	tests := []struct {
		name      string
		pods      []*corev1.Pod
		wantZoneA bool // some new pod lands in us-east-1a
	}{
		{
			name:      "should count existing pods in the spread",
			pods:      pods("web", 3, st.Labels(map[string]string{"app": "web", "rev": "2"}), st.Requests("100m", "128Mi"), spread(nil)),
			wantZoneA: false,
		},
		{
			name:      "should only count pods with the owner's matchLabelKeys values",
			pods:      pods("web", 3, st.Labels(map[string]string{"app": "web", "rev": "2"}), st.Requests("100m", "128Mi"), spread(nil, "rev")),
			wantZoneA: true,
		},
		{
			name: "should not count pods on nodes the owner's node affinity excludes (nodeAffinityPolicy Honor)",
			pods: pods("web", 3, st.Labels(map[string]string{"app": "web", "rev": "2"}), st.Requests("100m", "128Mi"),
				st.NodeSelector(map[string]string{v1.LabelArch: "amd64"}), spread(nil)),
			wantZoneA: true,
		},
		{
			name: "should count pods on every node with nodeAffinityPolicy Ignore",
			pods: pods("web", 3, st.Labels(map[string]string{"app": "web", "rev": "2"}), st.Requests("100m", "128Mi"),
				st.NodeSelector(map[string]string{v1.LabelArch: "amd64"}), spread(&ignore)),
			wantZoneA: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{st.NodePool("default")}, tt.pods,
				st.WithNodes(st.Existing(arm.DeepCopy(), old(0, "1"), old(1, "1"), old(2, "1"))))
			res := solve(t, in)
			if len(res.Unschedulable) != 0 {
				t.Fatalf("unschedulable: %v", res.Unschedulable)
			}
			zones := zoneOf(t, in, res)
			gotA := false
			for _, z := range zones {
				gotA = gotA || z == "us-east-1a"
			}
			if gotA != tt.wantZoneA {
				t.Errorf("a new pod in us-east-1a = %v, want %v (zones %v)", gotA, tt.wantZoneA, zones)
			}
		})
	}
}

func TestSolveIgnoresPreferencesWithPolicyIgnore(t *testing.T) {
	in := input([]v1.NodePool{st.NodePool("default")}, pods("web", 3, st.Labels(web), st.Requests("100m", "128Mi"),
		st.PreferredPodAntiAffinity(1, v1.LabelHostname, web), st.PreferredNodeAffinity(1, st.Term(st.In(v1.LabelTopologyZone, "us-east-1z")))),
		st.WithOptions(scheduling.Options{PreferencePolicy: scheduling.PreferencePolicyIgnore}))
	res := solve(t, in)
	if len(res.NewClaims) != 1 || len(res.NewClaims[0].Pods) != 3 {
		t.Errorf("got %d claims, want one holding all three pods", len(res.NewClaims))
	}
}

// TestSolveSpreadHonorsNodeAffinityAcrossNodePools checks
// nodeAffinityPolicy Honor (the default) in its documented meaning: a zone
// only a NodePool the pod's selector excludes can offer is not a domain of
// the spread, so pods are not left pending for it. Karpenter v1.14.1 counts
// it (its fixes were reverted); this is listed as doing better.
func TestSolveSpreadHonorsNodeAffinityAcrossNodePools(t *testing.T) {
	web := map[string]string{"app": "web"}
	pools := []v1.NodePool{
		st.NodePool("web", st.PoolLabels(map[string]string{"team": "web"}),
			st.PoolRequirement(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b")),
		st.NodePool("other", st.PoolRequirement(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c")),
	}
	ignore := corev1.NodeInclusionPolicyIgnore
	tests := []struct {
		name      string
		policy    *corev1.NodeInclusionPolicy
		nodes     []scheduling.ExistingNode
		wantUnsch int
		wantZones map[string]int
	}{
		{
			name:      "should spread over the zones of the NodePools the pod's nodeSelector admits",
			wantZones: map[string]int{"us-east-1a": 2, "us-east-1b": 2},
		},
		{
			name:  "should not count a zone whose only existing node the nodeSelector excludes",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n-c", st.NodeType(testTypes()[0], "us-east-1d", v1.CapacityTypeOnDemand)))},
			// the node's zone us-east-1d is no domain: 2/2 as above
			wantZones: map[string]int{"us-east-1a": 2, "us-east-1b": 2},
		},
		{
			name:      "should count every NodePool's zones with nodeAffinityPolicy Ignore, leaving pods pending",
			policy:    &ignore,
			wantUnsch: 2,
			wantZones: map[string]int{"us-east-1a": 1, "us-east-1b": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := pods("web", 4, st.Labels(web), st.Requests("500m", "1Gi"), st.NodeSelector(map[string]string{"team": "web"}),
				st.TopologySpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, web), func(p *corev1.Pod) {
					p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = tt.policy
				})
			in := input(pools, ps, st.WithNodes(tt.nodes...))
			res := solve(t, in)
			if len(res.Unschedulable) != tt.wantUnsch {
				t.Errorf("unschedulable = %v, want %d pods", res.Unschedulable, tt.wantUnsch)
			}
			zones := map[string]int{}
			for _, c := range res.NewClaims {
				zones[c.Expected.Zone] += len(c.Pods)
			}
			if diff := cmp.Diff(tt.wantZones, zones); diff != "" {
				t.Errorf("pods per zone (-want +got):\n%s", diff)
			}
		})
	}
}
