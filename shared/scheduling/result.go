package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/requirements"
)

func zeroQuantity() *resource.Quantity { return resource.NewQuantity(0, resource.DecimalSI) }

func replaceAll(s, old, new string) string { return strings.ReplaceAll(s, old, new) }

// result assembles the plan.
func (s *solver) result() Result {
	res := Result{Placements: map[string]string{}, Unschedulable: map[string]string{}}
	for _, pi := range s.pods {
		switch {
		case pi.ignored != "":
			res.Unschedulable[pi.key] = pi.ignored
		case pi.host == nil:
			res.Unschedulable[pi.key] = s.explain(pi)
		case pi.host.node != nil:
			res.Placements[pi.key] = pi.host.node.name
		}
	}
	claims := make([]*nclaim, 0, len(s.claims))
	for _, c := range s.claims {
		if !c.removed && len(c.pods) > 0 {
			claims = append(claims, c)
		}
	}
	sort.SliceStable(claims, func(i, j int) bool {
		if claims[i].pool.idx != claims[j].pool.idx {
			return claims[i].pool.idx < claims[j].pool.idx
		}
		return claims[i].seq < claims[j].seq
	})
	taken := map[string]bool{}
	for i := range s.in.Nodes {
		if en := &s.in.Nodes[i]; en.NodeClaim != nil {
			taken[en.NodeClaim.Name] = true
		}
	}
	perPool := map[string]int{}
	// slack is what each limited pool has left beyond its claims' cheapest
	// types; claims widen their candidate lists into it in order.
	slack := map[*pool]vec{}
	for _, c := range claims {
		if _, ok := slack[c.pool]; !ok && c.pool.anyLimit {
			var sl vec
			for i := 0; i < s.res.n(); i++ {
				if c.pool.limited[i] {
					sl[i] = c.pool.limit[i] - c.pool.usage[i]
				}
			}
			slack[c.pool] = sl
		}
	}
	for _, c := range claims {
		name := ""
		for {
			perPool[c.pool.name]++
			name = fmt.Sprintf("%s-%d", c.pool.name, perPool[c.pool.name])
			if !taken[name] {
				break
			}
		}
		res.NewClaims = append(res.NewClaims, s.newClaim(c, name, slack))
	}
	return res
}

// restrictedNodeLabel reports whether Karpenter keeps key out of the labels
// it derives from requirements: well-known keys, and keys in the
// kubernetes.io, k8s.io, karpenter.sh and karpenter.k8s.aws domains except
// node.kubernetes.io, node-restriction.kubernetes.io and kops.k8s.io
// (karpenter: pkg/apis/v1/labels.go IsRestrictedNodeLabel).
func restrictedNodeLabel(key string) bool {
	if v1.WellKnownLabels[key] || key == v1.LabelHostname {
		return true
	}
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return false
	}
	domain := key[:i]
	for _, ex := range []string{"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"} {
		if domain == ex || strings.HasSuffix(domain, "."+ex) {
			return false
		}
	}
	for _, r := range []string{"kubernetes.io", "k8s.io", v1.Group, v1.AWSGroup} {
		if domain == r || strings.HasSuffix(domain, "."+r) {
			return true
		}
	}
	return false
}

// newClaim renders a claim as Karpenter would create it (karpenter:
// scheduling/nodeclaim.go FinalizeScheduling, nodeclaimtemplate.go
// ToNodeClaim; karpenter-spec §1.2, §3.3 steps 3-4).
func (s *solver) newClaim(c *nclaim, name string, slack map[*pool]vec) NewClaim {
	n := s.res.n()
	p := c.pool
	tmpl := &p.np.Spec.Template
	r := s.reqs.get(c.reqID).Clone()
	limited, limitCap := false, vec{}
	for i := range limitCap {
		limitCap[i] = math.MaxInt64
	}
	if p.anyLimit {
		limited = true
		sl := slack[p]
		for i := 0; i < n; i++ {
			if p.limited[i] {
				limitCap[i] = c.capUsed[i] + sl[i]
			}
		}
	}
	// Without minValues the cheapest maxTypes fitting types are the list;
	// with minValues truncate may need more to choose from.
	upTo := s.maxTypes
	if c.tl.minValues {
		upTo = len(c.tl.types)
	}
	types := truncate(r, s.fittingUpTo(c.tl, c.cur, &c.used, limited, &limitCap, upTo), s.maxTypes)
	if p.anyLimit {
		var largest vec
		for _, t := range types {
			largest.maxWith(&t.capacity, n)
		}
		sl := slack[p]
		for i := 0; i < n; i++ {
			if p.limited[i] {
				sl[i] -= largest[i] - c.capUsed[i]
			}
		}
		slack[p] = sl
	}
	relaxed := c.minValuesRelaxed
	lowered := map[string]int{}
	if relaxed || s.bestEffort {
		// BestEffort: lower each unreachable minValues to what remains.
		for _, k := range r.Keys() {
			req := r[k]
			if req.MinValues == nil {
				continue
			}
			seen := map[string]bool{}
			for _, t := range types {
				for _, v := range typeValues(r, t, k) {
					if req.Has(v) {
						seen[v] = true
					}
				}
			}
			if len(seen) < *req.MinValues {
				lowered[k] = len(seen)
				relaxed = true
			}
		}
	}
	names := make([]string, len(types))
	var zones, capTypes []string
	minDS := vec{}
	for i := range minDS {
		minDS[i] = math.MaxInt64
	}
	for i, t := range types {
		names[i] = t.name
		minDS.minWith(&t.ds, n)
		for j := range t.offers {
			o := &t.offers[j]
			if offerAllowed(r, o) {
				zones = append(zones, o.Zone)
				capTypes = append(capTypes, o.CapacityType)
			}
		}
	}
	if len(types) == 0 {
		minDS = vec{}
	}
	zones, capTypes = sortedUnique(zones), sortedUnique(capTypes)
	expected := s.expectedOffering(r, types, capTypes)
	r.Add(requirements.New(v1.LabelInstanceType, corev1.NodeSelectorOpIn, names...))
	r.Add(requirements.New(v1.LabelCapacityType, corev1.NodeSelectorOpIn, capTypes...))

	labels := map[string]string{}
	for k, v := range p.labels {
		labels[k] = v
	}
	for _, k := range r.Keys() {
		req := r[k]
		if restrictedNodeLabel(k) || req.Operator() != corev1.NodeSelectorOpIn {
			continue
		}
		if _, ok := labels[k]; !ok {
			labels[k] = req.Any()
		}
	}
	annotations := map[string]string{}
	for k, v := range tmpl.ObjectMeta.Annotations {
		annotations[k] = v
	}
	for _, k := range []string{v1.AnnotationNodePoolHash, v1.AnnotationNodePoolHashVersion} {
		if v, ok := p.np.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	annotations[v1.AnnotationNodeClaimMinValuesRelaxed] = strconv.FormatBool(relaxed)

	requests := c.used
	requests.add(&minDS, n)
	nc := v1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.Group + "/v1", Kind: v1.KindNodeClaim},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: p.name + "-", Labels: labels, Annotations: annotations,
			CreationTimestamp: metav1.NewTime(s.in.Now),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.Group + "/v1", Kind: v1.KindNodePool, Name: p.name, UID: p.np.UID,
				BlockOwnerDeletion: ptrTo(true),
			}},
		},
		Spec: v1.NodeClaimSpec{
			Taints:                 tmpl.Spec.Taints,
			StartupTaints:          tmpl.Spec.StartupTaints,
			Requirements:           lowerMinValues(r.NodeSelectorRequirements(), lowered),
			Resources:              v1.ResourceRequirements{Requests: s.res.list(requests)},
			NodeClassRef:           tmpl.Spec.NodeClassRef,
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
		},
	}
	pods := make([]string, len(c.pods))
	for i, idx := range c.pods {
		pods[i] = s.pods[idx].key
	}
	return NewClaim{
		NodeClaim: nc, NodePool: p.name, NodeClass: p.className, InstanceTypes: names,
		Zones: zones, CapacityTypes: capTypes, Expected: expected, Pods: pods,
	}
}

func ptrTo[T any](v T) *T { return &v }

// expectedOffering is the offering CreateFleet would pick. When both spot
// and on-demand are allowed, spot offerings pricier than the cheapest
// on-demand one are dropped first (aws: instance/filter spot-offering
// filter); then the capacity type is reserved if any reserved offering is
// available, else spot if any remains, else on-demand (aws: instance.go
// getCapacityType); then the cheapest offering of that type, ties by
// instance type order and zone.
func (s *solver) expectedOffering(r requirements.Requirements, types []*ptype, capTypes []string) ExpectedOffering {
	has := map[string]bool{}
	for _, ct := range capTypes {
		has[ct] = true
	}
	cheapestOD := math.Inf(1)
	for _, t := range types {
		for j := range t.offers {
			if o := &t.offers[j]; o.CapacityType == v1.CapacityTypeOnDemand && offerAllowed(r, o) && o.Price < cheapestOD {
				cheapestOD = o.Price
			}
		}
	}
	spotOK := func(o *catalog.Offering) bool {
		return !has[v1.CapacityTypeOnDemand] || o.Price <= cheapestOD
	}
	want := v1.CapacityTypeOnDemand
	switch {
	case has[v1.CapacityTypeReserved]:
		want = v1.CapacityTypeReserved
	case has[v1.CapacityTypeSpot]:
		for _, t := range types {
			for j := range t.offers {
				if o := &t.offers[j]; o.CapacityType == v1.CapacityTypeSpot && offerAllowed(r, o) && spotOK(o) {
					want = v1.CapacityTypeSpot
				}
			}
		}
	}
	var best ExpectedOffering
	found := false
	for _, t := range types {
		for j := range t.offers {
			o := &t.offers[j]
			if o.CapacityType != want || !offerAllowed(r, o) || (want == v1.CapacityTypeSpot && !spotOK(o)) {
				continue
			}
			if !found || o.Price < best.PricePerHour || (o.Price == best.PricePerHour && t.name == best.InstanceType && o.Zone < best.Zone) {
				best = ExpectedOffering{InstanceType: t.name, Zone: o.Zone, CapacityType: o.CapacityType, PricePerHour: o.Price}
				found = true
			}
		}
	}
	return best
}

// lowerMinValues rewrites the minValues of the listed keys.
func lowerMinValues(reqs []v1.NodeSelectorRequirementWithMinValues, lowered map[string]int) []v1.NodeSelectorRequirementWithMinValues {
	for i := range reqs {
		if mv, ok := lowered[reqs[i].Key]; ok && reqs[i].MinValues != nil {
			reqs[i].MinValues = ptrTo(mv)
		}
	}
	return reqs
}
