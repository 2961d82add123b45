package disruption

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/requirements"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// minSpotToSpotTypes is how many cheaper instance types single-node
// spot-to-spot consolidation needs, and how many it launches with
// (karpenter: MinInstanceTypesForSpotToSpotConsolidation).
const minSpotToSpotTypes = 15

// consolidationCandidates are the nodes multi- and single-node
// consolidation may take, by savings ratio; the others get their reason.
func (e *evaluation) consolidationCandidates() []*node {
	var out []*node
	for _, n := range e.nodes {
		if n.deleting || n.block != "" || n.empty {
			continue
		}
		if why, event := e.consolidationBlock(n, true); why != "" {
			if n.drift == "" { // a drifted node's drift outcome says more
				n.note(event, "%s", why)
			}
			continue
		}
		out = append(out, n)
	}
	bySavings(out)
	return out
}

// consolidate computes the command that removes cands, or why there is
// none, a reason for EventUnconsolidatable (karpenter:
// computeConsolidation; karpenter-spec §6.4):
//
//   - every pod of cands (and of nodes already leaving) must reschedule,
//     none onto an uninitialized node;
//   - no new NodeClaim: delete;
//   - more than one: nothing (never one node into several);
//   - exactly one: replace, if cheaper. Its instance types are ordered by
//     price and kept only while their worst-case launch price is below the
//     candidates' summed price (and minValues still hold); when it may be
//     spot or on-demand it is narrowed to spot so a spot shortage never
//     launches a pricier on-demand node. When every candidate is spot and
//     the replacement may be spot, the SpotToSpotConsolidation gate
//     decides: off, nothing; on, spot only, and a single candidate needs
//     at least 15 cheaper types and launches with the 15 cheapest (or as
//     many as minValues need).
//
// Multi-node commands also drop replacement types that are no cheaper than
// a candidate of the same type; Balanced pools must approve the move.
func (e *evaluation) consolidate(ctx context.Context, cands []*node) (*Command, string, error) {
	sim, why, err := e.simulate(ctx, cands)
	if err != nil || why != "" {
		return nil, why, err
	}
	price := 0.0
	for _, n := range cands {
		price += n.price
	}
	c := &Command{Method: MethodUnderutilized, Decision: DecisionDelete, Budgeted: true, SavingsPerHour: price}
	switch len(sim.claims) {
	case 0:
		c.Reason = fmt.Sprintf("the pods of %s fit on the remaining nodes; deleting saves %.4f/h", names(cands), price)
	case 1:
		r, why, err := e.cheaperReplacement(sim.claims[0], cands, price)
		if err != nil || why != "" {
			return nil, why, err
		}
		c.Decision = DecisionReplace
		c.Replacements = []Replacement{r}
		c.SavingsPerHour = price - r.Expected.PricePerHour
		c.Reason = fmt.Sprintf("the pods of %s fit on the remaining nodes plus one %s %s in %s at %.4f/h instead of %.4f/h",
			names(cands), r.Expected.CapacityType, r.Expected.InstanceType, r.Expected.Zone, r.Expected.PricePerHour, price)
	default:
		return nil, fmt.Sprintf("its pods would need %d new NodeClaims; consolidation never replaces nodes with more than one", len(sim.claims)), nil
	}
	if why := e.balanced(c, cands); why != "" {
		return nil, why, nil
	}
	return c, "", nil
}

// cheaperReplacement applies consolidation's price rules to the one new
// NodeClaim of a simulation.
func (e *evaluation) cheaperReplacement(nc scheduling.NewClaim, cands []*node, price float64) (Replacement, string, error) {
	reqs := requirements.FromNodeSelector(nc.NodeClaim.Spec.Requirements)
	options := e.typesOf(nc.NodeClass, nc.InstanceTypes)
	prices := make(map[*catalog.InstanceType]float64, len(options))
	for _, it := range options {
		prices[it] = launchPrice(it, reqs)
	}
	sort.SliceStable(options, func(i, j int) bool { return prices[options[i]] < prices[options[j]] })

	allSpot := true
	for _, n := range cands {
		allSpot = allSpot && n.labels[v1.LabelCapacityType] == v1.CapacityTypeSpot
	}
	if allSpot && reqs.Get(v1.LabelCapacityType).Has(v1.CapacityTypeSpot) {
		if !e.in.FeatureGates.SpotToSpotConsolidation {
			return Replacement{}, "SpotToSpotConsolidation is disabled, so a spot node is not replaced by a spot node", nil
		}
		reqs.Add(requirements.New(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeSpot))
		cheaper, why := filterByPrice(options, reqs, price)
		if why != "" {
			return Replacement{}, why, nil
		}
		if len(cheaper) == 0 {
			return Replacement{}, fmt.Sprintf("no spot replacement is cheaper than %.4f/h", price), nil
		}
		if len(cands) == 1 {
			if len(cheaper) < minSpotToSpotTypes {
				return Replacement{}, fmt.Sprintf("SpotToSpotConsolidation needs %d cheaper instance types than the candidate, found %d", minSpotToSpotTypes, len(cheaper)), nil
			}
			keep := minSpotToSpotTypes
			if need, ok := minValuesPrefix(cheaper, reqs); ok && need > keep {
				keep = need
			}
			cheaper = cheaper[:min(keep, len(cheaper))]
		}
		return e.replacement(nc, cheaper, reqs)
	}
	cheaper, why := filterByPrice(options, reqs, price)
	if why != "" {
		return Replacement{}, why, nil
	}
	if len(cheaper) == 0 {
		return Replacement{}, fmt.Sprintf("can't replace with a cheaper node: every option's worst-case launch price is at least %.4f/h", price), nil
	}
	if ct := reqs.Get(v1.LabelCapacityType); ct.Has(v1.CapacityTypeSpot) && ct.Has(v1.CapacityTypeOnDemand) {
		reqs.Add(requirements.New(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeSpot))
	}
	if len(cands) > 1 {
		cheaper = filterOutSameType(cheaper, cands, reqs)
		if len(cheaper) == 0 {
			return Replacement{}, "the only replacements are no cheaper than a candidate of the same instance type (deleting the others would do as well)", nil
		}
	}
	return e.replacement(nc, cheaper, reqs)
}

// typesOf resolves instance type names of a node class, keeping order.
func (e *evaluation) typesOf(class string, names []string) []*catalog.InstanceType {
	byName := e.typeIndex[class]
	if byName == nil {
		byName = map[string]*catalog.InstanceType{}
		for _, it := range e.in.InstanceTypes[class] {
			byName[it.Name] = it
		}
		e.typeIndex[class] = byName
	}
	out := make([]*catalog.InstanceType, 0, len(names))
	for _, n := range names {
		if it := byName[n]; it != nil {
			out = append(out, it)
		}
	}
	return out
}

// priceEpsilon absorbs floating-point error in summed prices (8 × 0.3456
// is not exactly 2.7648), so that an equal price never counts as cheaper.
const priceEpsilon = 1e-9

// filterByPrice keeps the types whose worst-case launch price under reqs
// is strictly below price, in order; why is set when the survivors no
// longer satisfy a minValues requirement (karpenter: filterByPrice).
func filterByPrice(types []*catalog.InstanceType, reqs requirements.Requirements, price float64) ([]*catalog.InstanceType, string) {
	var out []*catalog.InstanceType
	for _, it := range types {
		if worstLaunchPrice(it, reqs) < price-priceEpsilon {
			out = append(out, it)
		}
	}
	if len(out) > 0 {
		if _, ok := minValuesPrefix(out, reqs); !ok {
			return nil, fmt.Sprintf("the %d cheaper instance types do not satisfy the NodePool's minValues", len(out))
		}
	}
	return out, ""
}

// minValuesPrefix returns how many of types, in order, it takes to offer
// every requirement's minValues distinct values; ok is false when all of
// them do not (karpenter: InstanceTypes.SatisfiesMinValues). Without
// minValues it returns 0, true.
func minValuesPrefix(types []*catalog.InstanceType, reqs requirements.Requirements) (int, bool) {
	want := map[string]int{}
	for k, r := range reqs {
		if r.MinValues != nil {
			want[k] = *r.MinValues
		}
	}
	if len(want) == 0 {
		return 0, true
	}
	seen := map[string]map[string]bool{}
	for i, it := range types {
		done := true
		for k, mv := range want {
			v := it.Labels[k]
			if k == v1.LabelInstanceType {
				v = it.Name
			}
			if v != "" {
				if seen[k] == nil {
					seen[k] = map[string]bool{}
				}
				seen[k][v] = true
			}
			done = done && len(seen[k]) >= mv
		}
		if done {
			return i + 1, true
		}
	}
	return 0, false
}

// filterOutSameType handles a multi-node replacement whose options include
// a candidate's own instance type: keeping that candidate and deleting the
// others is at least as good, so only options cheaper than the cheapest
// such candidate survive. [t3a.2xlarge, t3a.2xlarge, t3a.small] → {small,
// xlarge, 2xlarge} is rejected; → {nano, small, ...} keeps nano
// (karpenter: multinodeconsolidation.go filterOutSameType).
func filterOutSameType(types []*catalog.InstanceType, cands []*node, reqs requirements.Requirements) []*catalog.InstanceType {
	cheapestOf := map[string]float64{}
	for _, n := range cands {
		if !n.priced || n.it == nil {
			continue
		}
		if p, ok := cheapestOf[n.it.Name]; !ok || n.price < p {
			cheapestOf[n.it.Name] = n.price
		}
	}
	limit, found := 0.0, false
	for _, it := range types {
		if p, ok := cheapestOf[it.Name]; ok && (!found || p < limit) {
			limit, found = p, true
		}
	}
	if !found {
		return types
	}
	out, _ := filterByPrice(types, reqs, limit)
	return out
}
