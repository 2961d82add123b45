package schedulingtest

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// attachLimits checks that no existing node with CSI attach limits
// (ExistingNode.VolumeLimits) ends the plan with more distinct claims of a
// driver than its limit when placed pods added claims of that driver
// (Karpenter enforces the limits against existing nodes only). It resolves
// each claim's driver itself: the bound PersistentVolume's spec.csi.driver,
// else the claim's StorageClass provisioner.
func (c *checker) attachLimits() {
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for i := range c.in.Volumes.Claims {
		cl := &c.in.Volumes.Claims[i]
		claims[cl.Namespace+"/"+cl.Name] = cl
	}
	driver := func(cl *corev1.PersistentVolumeClaim) string {
		if cl.Spec.VolumeName != "" {
			for _, pv := range c.in.Volumes.PersistentVolumes {
				if pv.Name == cl.Spec.VolumeName && pv.Spec.CSI != nil {
					return pv.Spec.CSI.Driver
				}
			}
			return ""
		}
		for _, sc := range c.in.Volumes.StorageClasses {
			if cl.Spec.StorageClassName != nil && sc.Name == *cl.Spec.StorageClassName {
				return sc.Provisioner
			}
		}
		return ""
	}
	pending := map[*corev1.Pod]bool{}
	for _, p := range c.in.Pods {
		pending[p] = true
	}
	for _, n := range c.in.Nodes {
		if len(n.VolumeLimits) == 0 {
			continue
		}
		id := existingID(n)
		used := map[string]map[string]bool{} // driver -> claims
		added := map[string]bool{}           // drivers placed pods added claims of
		for _, p := range c.onNode[id] {
			for _, vol := range p.Spec.Volumes {
				if vol.PersistentVolumeClaim == nil {
					continue
				}
				key := p.Namespace + "/" + vol.PersistentVolumeClaim.ClaimName
				cl := claims[key]
				if cl == nil {
					continue
				}
				d := driver(cl)
				if d == "" {
					continue
				}
				if used[d] == nil {
					used[d] = map[string]bool{}
				}
				if pending[p] && !used[d][key] {
					added[d] = true
				}
				used[d][key] = true
			}
		}
		for _, d := range sortedKeys(used) {
			if limit, ok := n.VolumeLimits[d]; ok && added[d] && len(used[d]) > limit {
				c.fail("node %s: %d claims of CSI driver %s after the plan, attach limit %d", id, len(used[d]), d, limit)
			}
		}
	}
}

// weights checks that weight is never traded for price (Karpenter tries
// NodePools heaviest first; karpenter-spec section 3): no pod on a new
// claim of a pool could have gone to a claim of a heavier pool that the
// plan also launches for (so it is usable). It judges only pods whose
// placement nothing else steers: no topology spread, pod (anti-)affinity,
// host ports, volumes or preferred node affinity, and a heavier pool whose
// taints (PreferNoSchedule too) the pod tolerates; such a pool could take
// the pod when one of its instance types has an available offering the
// pool allows, meets the pod's node requirements and holds the pod's
// requests plus the requests of every DaemonSet tolerating the pool's
// taints.
//
// A heavier pool without limits fails the check for each such pod. A
// heavier pool with limits (issue 19 item 8: its limit stops some pods of
// a batch, which then go to a lighter pool) fails it for a claim only
// when every pod of the claim is judged and each could take a type whose
// capacity, added to the plan's usage of that pool (poolUsage: existing
// nodes plus the largest candidate of each of its new claims, one more
// node), stays within every limit. The whole claim is judged because the
// solver, like Karpenter, puts a pod into a claim already opened before it
// opens one of any pool, and the checker does not know which pod opened
// the claim; the plan's final usage bounds the usage the solver saw when
// that pod came.
func (c *checker) weights(res scheduling.Result) {
	// Only pools the plan launches for are known to be usable (not
	// deleting, not static, ready, with instance types left).
	usable := map[string]bool{}
	for i := range res.NewClaims {
		usable[res.NewClaims[i].NodePool] = true
	}
	usage := map[string]corev1.ResourceList{}
	for j := range c.in.NodePools {
		if q := &c.in.NodePools[j]; usable[q.Name] && len(q.Spec.Limits) > 0 {
			usage[q.Name] = c.poolUsage(q, res)
		}
	}
	for i := range res.NewClaims {
		cl := &res.NewClaims[i]
		np := c.pools[cl.NodePool]
		if np == nil {
			continue
		}
		for j := range c.in.NodePools {
			q := &c.in.NodePools[j]
			if !usable[q.Name] || weight(q) <= weight(np) {
				continue
			}
			if len(q.Spec.Limits) == 0 {
				for _, uid := range cl.Pods {
					if p := c.pods[uid]; p != nil && !steered(p) && c.couldTake(q, p, nil) {
						c.fail("pod %s is on a claim of NodePool %s (weight %d), but the heavier NodePool %s (weight %d, no limits) could take it",
							podKey(p), np.Name, weight(np), q.Name, weight(q))
					}
				}
				continue
			}
			all := len(cl.Pods) > 0
			for _, uid := range cl.Pods {
				if p := c.pods[uid]; p == nil || steered(p) || !c.couldTake(q, p, usage[q.Name]) {
					all = false
					break
				}
			}
			if all {
				c.fail("the pods of a claim of NodePool %s (weight %d) could each take a node of the heavier NodePool %s (weight %d) within its limits (the plan's usage of it plus one node)",
					np.Name, weight(np), q.Name, weight(q))
			}
		}
	}
}

func weight(np *v1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

// steered reports whether something other than the pools' requirements,
// taints and weights may decide where p goes.
func steered(p *corev1.Pod) bool {
	if len(p.Spec.TopologySpreadConstraints) > 0 || len(p.Spec.Volumes) > 0 {
		return true
	}
	if a := p.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil ||
		(a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0)) {
		return true
	}
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, ct := range cs {
			for _, port := range ct.Ports {
				if port.HostPort != 0 {
					return true
				}
			}
		}
	}
	return false
}

// couldTake reports whether pool q could launch a node for p alone; with
// used non-nil, only with a type whose capacity plus used (and one more
// node) stays within every limit of q.
func (c *checker) couldTake(q *v1.NodePool, p *corev1.Pod, used corev1.ResourceList) bool {
	taints := q.Spec.Template.Spec.Taints
	for k := range taints {
		if !tolerated(p.Spec.Tolerations, &taints[k]) {
			return false
		}
	}
	ref := q.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return false
	}
	need := PodRequests(p)
	pods := int64(1)
	for _, ds := range c.in.DaemonSets {
		if tolerates(ds.Spec.Template.Spec.Tolerations, taints) {
			add(need, PodRequests(&corev1.Pod{Spec: ds.Spec.Template.Spec}))
			pods++
		}
	}
	need[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	base := poolLabels(q)
	names := make([]string, 0, len(c.types[ref.Name]))
	for name := range c.types[ref.Name] {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		it := c.types[ref.Name][name]
		if _, ok := fits(need, it.Allocatable()); !ok || (used != nil && !withinLimits(q, used, it.Capacity)) {
			continue
		}
		labels := merged(it.Labels, base)
		ok := true
		for _, r := range q.Spec.Template.Spec.Requirements {
			key := normalized(r.Key)
			if key == v1.LabelTopologyZone || key == v1.LabelCapacityType {
				continue
			}
			if _, has := labels[key]; (has || v1.WellKnownLabels[key]) && !matches(key, r.Operator, r.Values, labels) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		for k := range it.Offerings {
			o := &it.Offerings[k]
			if o.Available && poolAllowsOffering(q, o.Zone, o.CapacityType) && podAccepts(p, withOffering(labels, o.Zone, o.CapacityType), map[string]bool{v1.LabelHostname: true}) {
				return true
			}
		}
	}
	return false
}

// tolerated reports whether tolerations tolerate t, whatever its effect.
func tolerated(tolerations []corev1.Toleration, t *corev1.Taint) bool {
	for j := range tolerations {
		if toleratesTaint(&tolerations[j], t) {
			return true
		}
	}
	return false
}

// withinLimits reports whether used plus capacity, and one more node,
// stays within every limit of q (a resource q limits but capacity and
// used lack counts as zero).
func withinLimits(q *v1.NodePool, used, capacity corev1.ResourceList) bool {
	after := corev1.ResourceList{}
	add(after, used)
	add(after, capacity)
	nodes := after[corev1.ResourceName("nodes")]
	nodes.Add(*resource.NewQuantity(1, resource.DecimalSI))
	after[corev1.ResourceName("nodes")] = nodes
	for name, l := range q.Spec.Limits {
		if u, ok := after[corev1.ResourceName(name)]; ok && u.Cmp(l) > 0 {
			return false
		}
	}
	return true
}
