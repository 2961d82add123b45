package scheduling_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// randomWorkload draws a cluster: up to three NodePools (taints, arch and
// zone requirements, capacity types, limits), a few existing nodes with
// bound pods, DaemonSets, and Deployment-like groups of pending pods with
// every kind of constraint the solver handles.
func randomWorkload(r *rand.Rand) scheduling.Input {
	pick := func(xs ...string) string { return xs[r.Intn(len(xs))] }
	types := withSpot(testTypes(), 0.3+0.5*r.Float64())
	var pools []v1.NodePool
	for i := 0; i < 1+r.Intn(3); i++ {
		var opts []st.NodePoolOption
		if r.Intn(3) == 0 {
			opts = append(opts, st.PoolTaint("dedicated", fmt.Sprintf("p%d", i), corev1.TaintEffectNoSchedule))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, st.PoolTaint("soft", "", corev1.TaintEffectPreferNoSchedule))
		}
		if r.Intn(2) == 0 {
			opts = append(opts, st.PoolRequirement(v1.LabelArch, corev1.NodeSelectorOpIn, pick("amd64", "arm64")))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, st.PoolRequirement(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, pick(testZones...), pick(testZones...)))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, pick(v1.CapacityTypeSpot, v1.CapacityTypeOnDemand)))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, st.PoolLabels(map[string]string{"team": pick("a", "b")}))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, st.PoolLimits("cpu", fmt.Sprint(8+r.Intn(40))))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, st.PoolLimits("nodes", fmt.Sprint(1+r.Intn(6))))
		}
		if r.Intn(2) == 0 {
			opts = append(opts, st.PoolWeight(int32(1+r.Intn(50))))
		}
		pools = append(pools, st.NodePool(fmt.Sprintf("pool-%d", i), opts...))
	}
	// Weight against price (issue 19 item 8): the first pool is the
	// heaviest and a cpu limit stops it after a node or two, so the
	// plan checker's weights invariant meets pools that fill up.
	if len(pools) > 1 && r.Intn(3) == 0 {
		w := int32(100)
		pools[0].Spec.Weight = &w
		pools[0].Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse(fmt.Sprint(4 + r.Intn(12)))}
	}
	var dss []appsv1.DaemonSet
	for i := 0; i < r.Intn(3); i++ {
		opts := []st.PodOption{st.Requests(pick("50m", "100m", "250m"), pick("64Mi", "128Mi"))}
		if r.Intn(2) == 0 {
			opts = append(opts, st.Toleration("", "", ""))
		}
		if r.Intn(3) == 0 {
			opts = append(opts, st.NodeSelector(map[string]string{v1.LabelArch: pick("amd64", "arm64")}))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, st.HostPort(int32(9100+i), corev1.ProtocolTCP))
		}
		dss = append(dss, st.DaemonSet(fmt.Sprintf("ds-%d", i), opts...))
	}
	var nodes []scheduling.ExistingNode
	var vol scheduling.Volumes
	for i := 0; i < r.Intn(4); i++ {
		it := types[r.Intn(len(types))]
		name := fmt.Sprintf("node-%d", i)
		nodeZone := pick(testZones...)
		opts := []st.NodeOption{st.NodeType(it, nodeZone, v1.CapacityTypeOnDemand)}
		// Existing nodes belong to pools without limits, so that the
		// existing state never exceeds a limit on its own.
		if p := pools[r.Intn(len(pools))]; len(p.Spec.Limits) == 0 && r.Intn(2) == 0 {
			opts = append(opts, st.ManagedBy(p.Name))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, st.NodeTaint("dedicated", "p0", corev1.TaintEffectNoSchedule))
		}
		// Bound pods are consistent among themselves: unique app labels,
		// anti-affinity only to pending apps, one host port user per node.
		var bound []*corev1.Pod
		for j := 0; j < r.Intn(3); j++ {
			bopts := []st.PodOption{st.Requests(pick("100m", "500m"), pick("128Mi", "1Gi")), st.Labels(map[string]string{"app": fmt.Sprintf("bound-%d-%d", i, j)})}
			if r.Intn(3) == 0 {
				bopts = append(bopts, st.PodAntiAffinity(pick(v1.LabelHostname, v1.LabelTopologyZone), map[string]string{"app": pick("web", "app-1")}))
			}
			if j == 0 && r.Intn(4) == 0 {
				bopts = append(bopts, st.HostPort(8080, corev1.ProtocolTCP))
			}
			bound = append(bound, st.Pod(fmt.Sprintf("bound-%d-%d", i, j), bopts...))
		}
		// CSI attach limits (issue 19 item 5): the node's CSINode allows
		// 1 to 3 EBS volumes and a bound pod holds one already.
		var limits map[string]int
		if r.Intn(2) == 0 {
			limits = map[string]int{"ebs.csi.aws.com": 1 + r.Intn(3)}
			claim := "data-" + name
			bound = append(bound, st.Pod("db-"+name, st.Requests("100m", "128Mi"), st.WithClaim(claim)))
			vol.Claims = append(vol.Claims, st.BoundClaim("default", claim, "pv-"+name))
			vol.PersistentVolumes = append(vol.PersistentVolumes, st.ZonalVolume("pv-"+name, nodeZone))
		}
		en := st.Existing(st.Node(name, opts...), bound...)
		en.VolumeLimits = limits
		nodes = append(nodes, en)
	}
	var ps []*corev1.Pod
	for g := 0; g < 2+r.Intn(6); g++ {
		app := fmt.Sprintf("app-%d", g)
		self := map[string]string{"app": app}
		opts := []st.PodOption{st.Labels(self), st.Requests(pick("100m", "250m", "500m", "1", "1500m", "3"), pick("128Mi", "512Mi", "1Gi", "4Gi", "12Gi"))}
		if r.Intn(3) == 0 {
			opts = append(opts, st.Toleration("dedicated", fmt.Sprintf("p%d", r.Intn(3)), corev1.TaintEffectNoSchedule))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, st.NodeSelector(map[string]string{v1.LabelArch: pick("amd64", "arm64")}))
		}
		if r.Intn(6) == 0 {
			opts = append(opts, st.NodeSelector(map[string]string{"team": pick("a", "b")}))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, st.RequiredNodeAffinity(st.Term(st.In(v1.LabelTopologyZone, pick(testZones...))), st.Term(st.In(v1.LabelInstanceFamily, "m6i"))))
		}
		if r.Intn(4) == 0 {
			opts = append(opts, st.PreferredNodeAffinity(int32(1+r.Intn(50)), st.Term(st.In(v1.LabelInstanceFamily, pick("r6i", "c6i", "x9")))))
		}
		switch r.Intn(9) {
		case 0:
			opts = append(opts, st.TopologySpread(v1.LabelTopologyZone, int32(1+r.Intn(2)), corev1.DoNotSchedule, self))
			if r.Intn(2) == 0 {
				// Honor (the default): only the zones of the pools
				// labelled team=a count.
				opts = append(opts, st.NodeSelector(map[string]string{"team": "a"}))
			}
		case 1:
			opts = append(opts, st.TopologySpread(v1.LabelHostname, int32(1+r.Intn(2)), corev1.DoNotSchedule, self))
		case 2:
			opts = append(opts, st.TopologySpread(pick(v1.LabelTopologyZone, v1.LabelHostname), 1, corev1.ScheduleAnyway, self))
		case 3:
			opts = append(opts, st.PodAntiAffinity(pick(v1.LabelHostname, v1.LabelTopologyZone), self))
		case 4:
			opts = append(opts, st.PodAffinity(pick(v1.LabelHostname, v1.LabelTopologyZone), self))
		case 5:
			opts = append(opts, st.PodAntiAffinity(v1.LabelHostname, map[string]string{"app": pick("web", "db", "app-0")}))
		case 6:
			opts = append(opts, st.PreferredPodAntiAffinity(int32(1+r.Intn(10)), v1.LabelHostname, self))
		case 7:
			// 9100 is the port ds-0 may bind on every node.
			opts = append(opts, st.HostPort([]int32{8080, 8081, 9100}[r.Intn(3)], corev1.ProtocolTCP))
		}
		if r.Intn(5) == 0 {
			opts = append(opts, st.Labels(map[string]string{"app": "web"}), st.Labels(self))
		}
		if r.Intn(8) == 0 {
			opts = append(opts, st.InitContainer("init", pick("2", "4"), "1Gi"))
		}
		if r.Intn(10) == 0 {
			opts = append(opts, st.Resources(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}))
		}
		// Volumes (issue 19 item 5): a StatefulSet-like group whose pods
		// each have a claim, bound to a zonal PersistentVolume or unbound
		// with a WaitForFirstConsumer class restricted to one zone, the
		// same zone for the whole group (pods of one group in different
		// volume zones would make self pod affinity on zone ambiguous:
		// each zone's class may seed a domain).
		volumes := r.Intn(4)
		zone := pick(testZones...)
		for i := 0; i < 1+r.Intn(25); i++ {
			p := st.Pod(fmt.Sprintf("%s-%d", app, i), opts...)
			if volumes < 2 {
				claim := "data-" + p.Name
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
				if volumes == 0 {
					vol.Claims = append(vol.Claims, st.BoundClaim(p.Namespace, claim, "pv-"+p.Name))
					vol.PersistentVolumes = append(vol.PersistentVolumes, st.ZonalVolume("pv-"+p.Name, zone))
				} else {
					vol.Claims = append(vol.Claims, st.UnboundClaim(p.Namespace, claim, "zonal-"+zone))
				}
			}
			ps = append(ps, p)
		}
	}
	for _, z := range testZones {
		vol.StorageClasses = append(vol.StorageClasses, st.ZonalClass("zonal-"+z, z))
	}
	opts := []st.InputOption{st.WithNodes(nodes...), st.WithDaemonSets(dss...), func(in *scheduling.Input) { in.Volumes = vol }}
	o := scheduling.Options{}
	if r.Intn(4) == 0 {
		o.PreferencePolicy = scheduling.PreferencePolicyIgnore
	}
	if r.Intn(4) == 0 {
		o.MaxInstanceTypes = 1 + r.Intn(5)
	}
	opts = append(opts, st.WithOptions(o))
	return st.Input(pools, types, ps, opts...)
}

// TestSolveProperties solves random workloads (fixed seeds) and checks that
// every placement satisfies every hard constraint and that every pod is
// placed exactly once or has a reason.
func TestSolveProperties(t *testing.T) {
	for seed := int64(1); seed <= 150; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			in := randomWorkload(rand.New(rand.NewSource(seed)))
			strategies := []struct {
				name  string
				solve func(context.Context, scheduling.Input) (scheduling.Result, error)
			}{
				{"Solve", scheduling.Solve},
				{"cost-driven", scheduling.SolveCostOnly},
				{"first-fit", scheduling.SolveFirstFitOnly},
			}
			for _, sv := range strategies {
				res, err := sv.solve(t.Context(), in)
				if err != nil {
					t.Fatalf("%s error = %v", sv.name, err)
				}
				again, err := sv.solve(t.Context(), randomWorkload(rand.New(rand.NewSource(seed))))
				if err != nil {
					t.Fatalf("%s error = %v", sv.name, err)
				}
				if diff := cmp.Diff(res, again); diff != "" {
					t.Fatalf("%s is not deterministic (-first +second):\n%s", sv.name, diff)
				}
				if err := st.CheckResult(in, res); err != nil {
					t.Fatalf("%s broke a plan invariant: %v", sv.name, err)
				}
				checkAccounting(t, in, res)
				checkDaemonOverhead(t, in, res)
				checkExistingNodes(t, in, res)
				checkSpread(t, in, res)
			}
		})
	}
}

// checkAccounting: every pending pod is placed once or has a reason.
func checkAccounting(t *testing.T, in scheduling.Input, res scheduling.Result) {
	t.Helper()
	seen := map[string]int{}
	for uid := range res.Placements {
		seen[uid]++
	}
	for _, c := range res.NewClaims {
		for _, uid := range c.Pods {
			seen[uid]++
		}
	}
	for uid, why := range res.Unschedulable {
		if why == "" {
			t.Errorf("pod %s is unschedulable without a reason", uid)
		}
		seen[uid]++
	}
	for _, p := range in.Pods {
		if n := seen[string(p.UID)]; n != 1 {
			t.Errorf("pod %s appears %d times in the plan, want once", p.Name, n)
		}
	}
}

// daemonFits reports whether a DaemonSet runs on an instance type of pool:
// it tolerates the pool's taints (PreferNoSchedule implicitly) and its node
// selector matches the type and pool labels. The random DaemonSets only use
// tolerations and an arch node selector.
func daemonFits(ds *appsv1.DaemonSet, pool *v1.NodePool, it *catalog.InstanceType) bool {
	for _, taint := range pool.Spec.Template.Spec.Taints {
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for _, tol := range ds.Spec.Template.Spec.Tolerations {
			if tol.Operator == corev1.TolerationOpExists && tol.Key == "" {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	for k, v := range ds.Spec.Template.Spec.NodeSelector {
		if it.Labels[k] != v {
			return false
		}
	}
	for _, req := range pool.Spec.Template.Spec.Requirements {
		if req.Key == v1.LabelArch && ds.Spec.Template.Spec.NodeSelector[v1.LabelArch] != "" &&
			ds.Spec.Template.Spec.NodeSelector[v1.LabelArch] != req.Values[0] {
			return false
		}
	}
	return true
}

// checkDaemonOverhead: every candidate of every claim holds the claim's
// pods plus the DaemonSets that would run on it.
func checkDaemonOverhead(t *testing.T, in scheduling.Input, res scheduling.Result) {
	t.Helper()
	pods := map[string]*corev1.Pod{}
	for _, p := range in.Pods {
		pods[string(p.UID)] = p
	}
	for _, c := range res.NewClaims {
		var pool *v1.NodePool
		for i := range in.NodePools {
			if in.NodePools[i].Name == c.NodePool {
				pool = &in.NodePools[i]
			}
		}
		types := map[string]*catalog.InstanceType{}
		for _, it := range in.InstanceTypes[c.NodeClass] {
			types[it.Name] = it
		}
		for _, name := range c.InstanceTypes {
			it := types[name]
			need := corev1.ResourceList{}
			for _, uid := range c.Pods {
				addTo(need, st.PodRequests(pods[uid]))
				addTo(need, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
			}
			for i := range in.DaemonSets {
				if daemonFits(&in.DaemonSets[i], pool, it) {
					addTo(need, st.PodRequests(&corev1.Pod{Spec: in.DaemonSets[i].Spec.Template.Spec}))
					addTo(need, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
				}
			}
			alloc := it.Allocatable()
			for k, q := range need {
				if a := alloc[k]; q.Cmp(a) > 0 {
					t.Errorf("claim %s: candidate %s has %s %s allocatable, pods and daemonsets need %s", c.NodeClaim.Name, name, k, a.String(), q.String())
				}
			}
		}
	}
}

func addTo(dst, src corev1.ResourceList) {
	for k, v := range src {
		q := dst[k]
		q.Add(v)
		dst[k] = q
	}
}

// checkExistingNodes: pods placed on existing nodes fit beside the bound
// pods.
func checkExistingNodes(t *testing.T, in scheduling.Input, res scheduling.Result) {
	t.Helper()
	placed := map[string][]*corev1.Pod{}
	for _, p := range in.Pods {
		if node, ok := res.Placements[string(p.UID)]; ok {
			placed[node] = append(placed[node], p)
		}
	}
	for _, en := range in.Nodes {
		if en.Node == nil || len(placed[en.Node.Name]) == 0 {
			continue
		}
		need := corev1.ResourceList{}
		for _, p := range append(append([]*corev1.Pod(nil), en.Pods...), placed[en.Node.Name]...) {
			addTo(need, st.PodRequests(p))
			addTo(need, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
		}
		for k, q := range need {
			if a := en.Node.Status.Allocatable[k]; q.Cmp(a) > 0 {
				t.Errorf("node %s: %s %s allocatable, pods need %s", en.Node.Name, k, a.String(), q.String())
			}
		}
	}
}

// checkSpread checks the final state of DoNotSchedule spread groups whose
// selector matches only pods carrying the same constraint: at most maxSkew
// of them per host for hostname spread, and for zone spread no zone with
// more than maxSkew pods above another zone that got pods (implied by the
// placement-time rule, since counts and the global minimum only grow).
func checkSpread(t *testing.T, in scheduling.Input, res scheduling.Result) {
	t.Helper()
	host := map[string]string{}
	zone := map[string]string{}
	for uid, node := range res.Placements {
		host[uid] = "node/" + node
		for _, en := range in.Nodes {
			if en.Node != nil && en.Node.Name == node {
				zone[uid] = en.Node.Labels[v1.LabelTopologyZone]
			}
		}
	}
	for i, c := range res.NewClaims {
		for _, uid := range c.Pods {
			host[uid] = fmt.Sprintf("claim/%d", i)
			if len(c.Zones) == 1 {
				zone[uid] = c.Zones[0]
			}
		}
	}
	checked := map[string]bool{}
	for _, p := range in.Pods {
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			app := tsc.LabelSelector.MatchLabels["app"]
			if tsc.WhenUnsatisfiable != corev1.DoNotSchedule || checked[app+tsc.TopologyKey] || !selfOnly(in, app, tsc) {
				continue
			}
			checked[app+tsc.TopologyKey] = true
			domain := host
			if tsc.TopologyKey == v1.LabelTopologyZone {
				domain = zone
			}
			counts := map[string]int32{}
			for _, q := range in.Pods {
				if q.Labels["app"] != app {
					continue
				}
				if _, placed := host[string(q.UID)]; !placed {
					continue
				}
				d, ok := domain[string(q.UID)]
				if !ok || d == "" {
					t.Errorf("pod %s of %s spread group is on a host without a single %s", q.Name, app, tsc.TopologyKey)
					continue
				}
				counts[d]++
			}
			lo, hi := int32(1<<30), int32(0)
			for _, n := range counts {
				lo, hi = min(lo, n), max(hi, n)
			}
			switch {
			case tsc.TopologyKey == v1.LabelHostname && hi > tsc.MaxSkew:
				t.Errorf("group %s: %d pods on one host, maxSkew %d (%v)", app, hi, tsc.MaxSkew, counts)
			case tsc.TopologyKey == v1.LabelTopologyZone && len(counts) > 1 && hi-lo > tsc.MaxSkew:
				t.Errorf("group %s: zone counts %v differ by more than maxSkew %d", app, counts, tsc.MaxSkew)
			}
		}
	}
}

// selfOnly reports whether every pending pod labelled app carries the same
// spread constraint (so the group counts only its owners).
func selfOnly(in scheduling.Input, app string, tsc corev1.TopologySpreadConstraint) bool {
	for _, q := range in.Pods {
		if q.Labels["app"] != app {
			continue
		}
		if q.Spec.Affinity != nil && q.Spec.Affinity.NodeAffinity != nil {
			return false // relaxation may give its pods different groups
		}
		found := false
		for _, c := range q.Spec.TopologySpreadConstraints {
			if c.TopologyKey == tsc.TopologyKey && c.MaxSkew == tsc.MaxSkew && c.WhenUnsatisfiable == tsc.WhenUnsatisfiable {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	for _, en := range in.Nodes {
		for _, b := range en.Pods {
			if b.Labels["app"] == app {
				return false
			}
		}
	}
	return true
}
