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
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

func zeroQuantity() *resource.Quantity { return resource.NewQuantity(0, resource.DecimalSI) }

func replaceAll(s, old, new string) string { return strings.ReplaceAll(s, old, new) }

// final is a claim as it will be written: its candidates and the offering
// CreateFleet is expected to pick, as the launch model plans them.
type final struct {
	c *nclaim
	// reqID is the claim's requirement set as written (finalReqID).
	reqID    int32
	types    []*ptype
	expected ExpectedOffering
}

// finalize computes, once, every live claim's candidate list and expected
// offering, in output order (pool order, then creation). Claims of a
// limited pool widen their lists in that order, only into what the pool's
// limits leave beyond every claim's cheapest type.
func (s *solver) finalize() []final {
	if s.finals != nil {
		return s.finals
	}
	n := s.res.n()
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
	for _, c := range claims {
		s.settle(c)
	}
	slack := map[*pool]vec{}
	s.finals = make([]final, 0, len(claims))
	for _, c := range claims {
		p := c.pool
		limited, limitCap := false, vec{}
		for i := range limitCap {
			limitCap[i] = math.MaxInt64
		}
		if p.anyLimit {
			sl, ok := slack[p]
			if !ok {
				for i := 0; i < n; i++ {
					if p.limited[i] {
						sl[i] = p.limit[i] - p.usage[i]
					}
				}
			}
			limited = true
			for i := 0; i < n; i++ {
				if p.limited[i] {
					limitCap[i] = c.capUsed[i] + sl[i]
				}
			}
			slack[p] = sl
		}
		// The launch model narrows every fitting type (exotic, spot-price,
		// truncate), so that the claim lists what a launch would consider.
		rid := s.finalReqID(c)
		types, cands := s.narrow(c, rid, limited, &limitCap)
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
		s.finals = append(s.finals, final{c: c, reqID: rid, types: types, expected: s.expectedOffering(cands)})
	}
	return s.finals
}

// narrow returns the claim's candidates as the launch model narrows its
// fitting types (launch.Narrow), without handing it every fitting type
// when a cheap prefix already settles the answer: fitting types come in
// tl's order, by cheapest allowed offering, and the filters only remove
// types or offerings, so a type further down is priced at least bound (the
// prefix's last price). The prefix's answer is the full list's when it has
// a non-exotic type (the exotic filter decides the same), its cheapest
// on-demand offering is at most bound (no later type lowers the spot-price
// threshold, when that filter applies), and it keeps maxTypes candidates
// all priced below bound. With minValues every fitting type is passed. The candidates returned live in
// a buffer the next call reuses.
func (s *solver) narrow(c *nclaim, rid int32, limited bool, limitCap *vec) ([]*ptype, []launch.Candidate) {
	r := s.reqs.get(rid)
	upTo := len(c.tl.types)
	if !c.tl.minValues {
		upTo = s.maxTypes + s.maxTypes/2 + 1
	}
	ct := r[v1.LabelCapacityType]
	spotFilter := ct == nil || ct.Has(v1.CapacityTypeSpot) && ct.Has(v1.CapacityTypeOnDemand)
	for {
		fitting := s.fittingUpTo(c.tl, c.cur, &c.used, limited, limitCap, upTo)
		cands := s.claimCandidates(rid, fitting)
		complete := len(fitting) < upTo || upTo >= len(c.tl.types)
		bound, plain, od := 0.0, false, math.Inf(1)
		if !complete && len(cands) > 0 {
			bound = cands[len(cands)-1].Price()
			for i := range cands {
				if fitting[cands[i].Ref].exotic {
					continue
				}
				plain = true
				for _, o := range cands[i].Offerings {
					if o.CapacityType == v1.CapacityTypeOnDemand && o.Price < od {
						od = o.Price
					}
				}
			}
		}
		kept := launch.Narrow(r, cands, s.maxTypes, nil)
		if complete || plain && (!spotFilter || od <= bound) && len(kept) == s.maxTypes && kept[len(kept)-1].Price() < bound {
			types := make([]*ptype, len(kept))
			for i, cd := range kept {
				types[i] = fitting[cd.Ref]
			}
			return types, kept
		}
		upTo *= 2
	}
}

// outcome summarizes a solved plan for choosing between strategies: pods
// left unplaced, and the summed expected price of the new claims.
func (s *solver) outcome() (unplaced int, price float64) {
	for _, pi := range s.pods {
		if pi.host == nil {
			unplaced++
		}
	}
	for _, f := range s.finalize() {
		price += f.expected.PricePerHour
	}
	return unplaced, price
}

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
	var taken map[string]bool
	if s.sameNodes {
		taken = s.prep.claimNames
	} else {
		taken = claimNames(s.in.Nodes)
	}
	perPool := map[string]int{}
	for _, f := range s.finalize() {
		name := ""
		for {
			perPool[f.c.pool.name]++
			name = fmt.Sprintf("%s-%d", f.c.pool.name, perPool[f.c.pool.name])
			if !taken[name] {
				break
			}
		}
		res.NewClaims = append(res.NewClaims, s.newClaim(f, name))
	}
	for _, p := range s.pools {
		if p.noTypes {
			res.NoCompatibleInstanceTypes = append(res.NoCompatibleInstanceTypes, p.name)
		}
	}
	return res
}

// claimNames are the names of nodes' NodeClaims, which new claims must not
// take.
func claimNames(nodes []ExistingNode) map[string]bool {
	taken := map[string]bool{}
	for i := range nodes {
		if en := &nodes[i]; en.NodeClaim != nil {
			taken[en.NodeClaim.Name] = true
		}
	}
	return taken
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
func (s *solver) newClaim(f final, name string) NewClaim {
	n := s.res.n()
	c, types := f.c, f.types
	p := c.pool
	tmpl := &p.np.Spec.Template
	r := s.reqs.get(f.reqID).Clone()
	relaxed := c.minValuesRelaxed
	lowered := map[string]int{}
	if relaxed || s.bestEffort {
		// BestEffort: lower each unreachable minValues to what remains
		// (the spot-price filter never runs with minValues, so the
		// candidates' offerings are the allowed ones).
		var cands []launch.Candidate
		for _, k := range r.Keys() {
			req := r[k]
			if req.MinValues == nil {
				continue
			}
			if cands == nil {
				cands = candidates(r, types)
			}
			if n := launch.DistinctValues(r, cands, k); n < *req.MinValues {
				lowered[k] = n
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
	filter := launch.NewOfferFilter(r)
	for i, t := range types {
		names[i] = t.name
		minDS.minWith(&t.ds, n)
		for j := range t.offers {
			o := &t.offers[j]
			if filter.Allows(o) {
				zones = append(zones, o.Zone)
				capTypes = append(capTypes, o.CapacityType)
			}
		}
	}
	if len(types) == 0 {
		minDS = vec{}
	}
	zones, capTypes = sortedUnique(zones), sortedUnique(capTypes)
	expected := f.expected
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

// expectedOffering is the offering CreateFleet would pick: the first of
// the launch model's plan for the candidates (launch.Choose), zero with
// none. The plan's offerings are built in a buffer reused per claim.
func (s *solver) expectedOffering(cands []launch.Candidate) ExpectedOffering {
	p := launch.ChooseInto(s.offerBuf, cands)
	s.offerBuf = p.Offerings
	return Expected(&p)
}

// Expected is the expected offering of a launch plan (its first offering,
// launch.Plan.Expected) with the price rounded as every solver price is;
// the zero ExpectedOffering when the plan has no offering. Disruption's
// replacements report theirs through it too.
func Expected(p *launch.Plan) ExpectedOffering {
	o, ok := p.Expected()
	if !ok {
		return ExpectedOffering{}
	}
	return ExpectedOffering{InstanceType: o.InstanceType, Zone: o.Zone, CapacityType: o.CapacityType, PricePerHour: roundPrice(o.Price)}
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

// roundPrice rounds a USD price to 10 decimal places, far below any AWS
// price's precision, so that derived prices (e.g. on-demand x a spot ratio)
// render without float noise: 0.13248549999999998 becomes 0.1324855.
func roundPrice(p float64) float64 {
	return math.Round(p*1e10) / 1e10
}
