package schedulingtest

import (
	"fmt"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// launchOption is one (NodePool, instance type) a new node could be, with
// what it offers pods once the pool's daemonsets are running.
type launchOption struct {
	pool      *v1.NodePool
	it        *catalog.InstanceType
	labels    map[string]string // type + pool labels, no zone/capacity type
	skip      map[string]bool   // keys the pool constrains but the labels cannot show
	offerings catalog.Offerings // available, allowed by the pool
	free      corev1.ResourceList
}

// CatalogLowerBound is an honest lower bound, in $/h, on the cost of new
// capacity for in.Pods on any catalog (the embedded EC2 one included):
//
//   - A launch option is a (NodePool, instance type) pair the pool's
//     requirements allow, with at least one available offering they allow;
//     its free capacity is allocatable minus the requests of the DaemonSets
//     that tolerate the pool's taints and whose required node affinity the
//     type satisfies.
//   - For each pod and resource r (cpu, memory, extended resources), rate_r
//     is the lowest price / free_r over the options the pod could use (taints
//     tolerated, nodeSelector and required node affinity satisfied, the pod
//     alone fits). Any node hosting the pod costs at least the sum over its
//     pods of request_r x rate_r, so sum_p request_r(p) x rate_r(p) bounds the
//     cost for every r, and so does their maximum.
//   - Pods whose option sets are disjoint run on disjoint nodes, so the
//     bound is summed over connected groups of options.
//   - A group of K pods that must each have their own node (SeparateNodes)
//     costs at least K x the cheapest option one of them can use.
//
// Existing capacity and host ports are ignored, spread and affinity beyond
// hostname anti-affinity are ignored, and pods no option can host count for
// nothing: all of which can only lower the bound. Custom label keys that a
// pool constrains to several values are assumed satisfiable. On
// FakeInstanceTypes it is about 3% below LowerBound, which charges the
// 0.1 CPU reserve of each of the K anti-affinity nodes on top.
func CatalogLowerBound(in scheduling.Input) float64 {
	opts := launchOptions(in)
	type podClass struct {
		pods    []*corev1.Pod
		req     corev1.ResourceList
		options []int
	}
	classes := map[string]*podClass{}
	var order []string
	for _, p := range in.Pods {
		req := PodRequests(p)
		key := schedulingKey(p, req)
		c, ok := classes[key]
		if !ok {
			c = &podClass{req: req}
			need := mergeList(nil, req)
			need[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
			for i, o := range opts {
				if !tolerates(p.Spec.Tolerations, o.pool.Spec.Template.Spec.Taints) {
					continue
				}
				if _, ok := fits(need, o.free); !ok {
					continue
				}
				if cheapestFor(p, o) < math.Inf(1) {
					c.options = append(c.options, i)
				}
			}
			classes[key] = c
			order = append(order, key)
		}
		c.pods = append(c.pods, p)
	}

	// Connect options used by the same pod class.
	parent := make([]int, len(opts))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for _, key := range order {
		c := classes[key]
		for _, o := range c.options[min(1, len(c.options)):] {
			parent[find(o)] = find(c.options[0])
		}
	}

	type group struct {
		byResource map[corev1.ResourceName]float64
		pods       []*corev1.Pod
		minPrice   map[*corev1.Pod]float64
	}
	groups := map[int]*group{}
	for _, key := range order {
		c := classes[key]
		if len(c.options) == 0 {
			continue
		}
		root := find(c.options[0])
		g, ok := groups[root]
		if !ok {
			g = &group{byResource: map[corev1.ResourceName]float64{}, minPrice: map[*corev1.Pod]float64{}}
			groups[root] = g
		}
		prices := make([]float64, len(c.options))
		cheapest := math.Inf(1)
		for j, i := range c.options {
			prices[j] = cheapestFor(c.pods[0], opts[i])
			cheapest = min(cheapest, prices[j])
		}
		for r, q := range c.req {
			if q.IsZero() {
				continue
			}
			rate := math.Inf(1)
			for j, i := range c.options {
				free := opts[i].free[r]
				if free.Sign() > 0 {
					rate = min(rate, prices[j]/free.AsApproximateFloat64())
				}
			}
			if !math.IsInf(rate, 1) {
				g.byResource[r] += rate * q.AsApproximateFloat64() * float64(len(c.pods))
			}
		}
		for _, p := range c.pods {
			g.pods = append(g.pods, p)
			g.minPrice[p] = cheapest
		}
	}

	total := 0.0
	for _, g := range groups {
		best := 0.0
		for _, v := range g.byResource {
			best = max(best, v)
		}
		best = max(best, separateNodesCost(g.pods, g.minPrice))
		total += best
	}
	return total
}

// separateNodesCost is, over groups of pods that must each have their own
// node, the largest sum of each member's cheapest node price.
func separateNodesCost(pods []*corev1.Pod, minPrice map[*corev1.Pod]float64) float64 {
	costs := map[string]float64{}
	best := 0.0
	for _, p := range pods {
		if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
			continue
		}
		for _, t := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t.TopologyKey != v1.LabelHostname || !selects(t.LabelSelector, p.Labels) {
				continue
			}
			key := p.Namespace + "\x00" + t.LabelSelector.String()
			costs[key] += minPrice[p]
			best = max(best, costs[key])
		}
	}
	return best
}

// launchOptions lists every (pool, type) with an available allowed offering,
// pools in input order, types in catalog order.
func launchOptions(in scheduling.Input) []launchOption {
	var out []launchOption
	for i := range in.NodePools {
		np := &in.NodePools[i]
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil {
			continue
		}
		base := poolLabels(np)
		for _, it := range in.InstanceTypes[ref.Name] {
			labels := merged(it.Labels, base)
			skip := map[string]bool{v1.LabelHostname: true}
			ok := true
			for _, r := range np.Spec.Template.Spec.Requirements {
				key := normalized(r.Key)
				if key == v1.LabelTopologyZone || key == v1.LabelCapacityType {
					continue
				}
				if _, has := labels[key]; !has && !v1.WellKnownLabels[key] {
					skip[key] = true
					continue
				}
				if !matches(key, r.Operator, r.Values, labels) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			var offerings catalog.Offerings
			for _, o := range it.Offerings {
				if o.Available && poolAllowsOffering(np, o.Zone, o.CapacityType) {
					offerings = append(offerings, o)
				}
			}
			if len(offerings) == 0 {
				continue
			}
			free := it.Allocatable()
			for j := range in.DaemonSets {
				ds := &in.DaemonSets[j]
				dp := &corev1.Pod{Spec: ds.Spec.Template.Spec}
				if tolerates(dp.Spec.Tolerations, np.Spec.Template.Spec.Taints) && podAccepts(dp, labels, skip) {
					sub(free, PodRequests(dp))
				}
			}
			out = append(out, launchOption{pool: np, it: it, labels: labels, skip: skip, offerings: offerings, free: free})
		}
	}
	return out
}

// poolAllowsOffering reports whether np's zone and capacity-type
// requirements allow an offering.
func poolAllowsOffering(np *v1.NodePool, zone, capacityType string) bool {
	l := map[string]string{v1.LabelTopologyZone: zone, v1.LabelCapacityType: capacityType}
	for _, r := range np.Spec.Template.Spec.Requirements {
		key := normalized(r.Key)
		if (key == v1.LabelTopologyZone || key == v1.LabelCapacityType) && !matches(key, r.Operator, r.Values, l) {
			return false
		}
	}
	return true
}

// cheapestFor is the lowest price of an offering of o that p's node
// requirements accept, or +Inf.
func cheapestFor(p *corev1.Pod, o launchOption) float64 {
	best := math.Inf(1)
	for _, off := range o.offerings {
		if off.Price < best && podAccepts(p, withOffering(o.labels, off.Zone, off.CapacityType), o.skip) {
			best = off.Price
		}
	}
	return best
}

// schedulingKey groups pods that CatalogLowerBound treats alike.
func schedulingKey(p *corev1.Pod, req corev1.ResourceList) string {
	names := make([]string, 0, len(req))
	for k := range req {
		names = append(names, string(k))
	}
	sort.Strings(names)
	key := ""
	for _, k := range names {
		q := req[corev1.ResourceName(k)]
		key += k + "=" + q.String() + ";"
	}
	sel := make([]string, 0, len(p.Spec.NodeSelector))
	for k, v := range p.Spec.NodeSelector {
		sel = append(sel, k+"="+v)
	}
	slices.Sort(sel)
	var aff string
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		aff = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.String()
	}
	return fmt.Sprintf("%s|%v|%s|%v", key, sel, aff, p.Spec.Tolerations)
}

func sub(dst, src corev1.ResourceList) {
	for k, v := range src {
		q, ok := dst[k]
		if !ok {
			continue
		}
		q.Sub(v)
		if q.Sign() < 0 {
			q = resource.Quantity{}
		}
		dst[k] = q
	}
}
