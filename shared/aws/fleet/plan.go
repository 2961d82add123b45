package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/requirements"
)

// MaxInstanceTypes is the most instance types one CreateFleet call lists
// (aws: pkg/cloudprovider maxInstanceTypes; karpenter-spec §4 step 3).
const MaxInstanceTypes = 60

// claimLevelKeys are well-known keys set per launch or per pool, not per
// instance type (zone, capacity type, reservation, tenancy, placement group,
// nodepool, node class, region, hostname). Every other well-known key an
// instance type lacks counts as DoesNotExist (karpenter-spec §2).
var claimLevelKeys = map[string]bool{
	v1.LabelNodePool: true, v1.LabelEC2NodeClass: true, v1.LabelTopologyZone: true,
	v1.LabelTopologyRegion: true, v1.LabelZoneID: true, v1.LabelCapacityType: true,
	v1.LabelInstanceTenancy: true, v1.LabelCapacityReservationID: true,
	v1.LabelCapacityReservationType: true, v1.LabelCapacityReservationInterruptible: true,
	v1.LabelPlacementGroupID: true, v1.LabelPlacementGroupPartition: true,
	v1.LabelHostname: true,
}

// typeKeys are the keys every instance type defines.
var typeKeys = func() map[string]bool {
	out := map[string]bool{}
	for k := range v1.WellKnownLabels {
		if !claimLevelKeys[k] {
			out[k] = true
		}
	}
	return out
}()

// candidate is an instance type and its offerings still in play.
type candidate struct {
	it     *catalog.InstanceType
	offers catalog.Offerings
	price  float64 // cheapest of offers
}

// plan is the pure part of a launch (karpenter-spec §4 steps 2-5).
type plan struct {
	capacityType string
	// candidates are cheapest first, at most MaxInstanceTypes; their offers
	// are of capacityType only, in zones with a subnet, sorted by zone.
	candidates []candidate
	// subnets maps a zone to the subnet used there.
	subnets map[string]Subnet
}

// newPlan filters the instance types of req in Karpenter's order:
// compatible-available, exotic, spot-priced-above-on-demand, truncation to
// 60, then the capacity type and one subnet per zone.
func newPlan(req *Request) (plan, error) {
	reqs := requirements.FromNodeSelector(req.NodeClaim.Spec.Requirements)
	subnets := subnetPerZone(req.Subnets)
	zoneReq, ctReq, resReq := reqs.Get(v1.LabelTopologyZone), reqs.Get(v1.LabelCapacityType), reqs.Get(v1.LabelCapacityReservationID)
	requests := req.NodeClaim.Spec.Resources.Requests

	reqVec, vectorOK := catalog.NewVector(requests)
	cands := make([]candidate, 0, len(req.InstanceTypes))
	// One backing array holds every candidate's offers; each candidate owns
	// its own region of it, so later filters may rewrite it in place.
	n := 0
	for _, it := range req.InstanceTypes {
		if it != nil {
			n += len(it.Offerings)
		}
	}
	backing := make(catalog.Offerings, 0, n)
	for _, it := range req.InstanceTypes {
		if it == nil || !reqs.AdmitsLabels(it.Labels, typeKeys) {
			continue
		}
		if vectorOK && !reqVec.Fits(it.AllocatableVector()) || !vectorOK && !fits(requests, it.Allocatable()) {
			continue
		}
		start := len(backing)
		for _, o := range it.Offerings {
			_, hasSubnet := subnets[o.Zone]
			if !o.Available || !hasSubnet || !zoneReq.Has(o.Zone) || !ctReq.Has(o.CapacityType) {
				continue
			}
			if o.CapacityType == v1.CapacityTypeReserved && (o.ReservationID == "" || reqs.Has(v1.LabelCapacityReservationID) && !resReq.Has(o.ReservationID)) {
				continue
			}
			backing = append(backing, o)
		}
		if len(backing) > start {
			cands = append(cands, candidate{it: it, offers: backing[start:len(backing):len(backing)]})
		}
	}
	if len(cands) == 0 {
		return plan{}, &InsufficientCapacityError{
			Reason: fmt.Sprintf("no instance type of %d satisfies the nodeclaim's requirements and requests with an available offering in a zone with a subnet", len(req.InstanceTypes)),
			err:    ErrNoCompatibleOffering,
		}
	}
	minValues := hasMinValues(reqs)
	if !minValues {
		cands = dropExotic(cands)
		if ctReq.Has(v1.CapacityTypeSpot) && ctReq.Has(v1.CapacityTypeOnDemand) {
			cands = dropPricierSpot(cands)
		}
	}
	for i := range cands {
		cands[i].price = cheapest(cands[i].offers)
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.price, b.price), strings.Compare(a.it.Name, b.it.Name))
	})
	cands, err := truncate(cands, reqs, MaxInstanceTypes)
	if err != nil {
		return plan{}, err
	}
	p := plan{capacityType: capacityType(cands), subnets: subnets}
	for _, c := range cands {
		var offers catalog.Offerings
		for _, o := range c.offers {
			if o.CapacityType == p.capacityType {
				offers = append(offers, o)
			}
		}
		if p.capacityType == v1.CapacityTypeReserved {
			offers = onePerZone(offers)
		}
		slices.SortStableFunc(offers, func(a, b catalog.Offering) int { return strings.Compare(a.Zone, b.Zone) })
		if len(offers) > 0 {
			p.candidates = append(p.candidates, candidate{it: c.it, offers: offers, price: cheapest(offers)})
		}
	}
	return p, nil
}

// fits reports whether every request fits the allocatable amount (a
// resource missing from allocatable has none); the slow path for requests
// of resources the catalog's Vector does not model.
func fits(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		a := allocatable[name]
		if q.Cmp(a) > 0 {
			return false
		}
	}
	return true
}

// subnetPerZone picks, per zone, the subnet with the most free addresses
// among those not marked unavailable; ties keep input order. A zone whose
// subnets are all unavailable gets none, so its offerings are left out
// (karpenter-spec §4 step 5, §11.3 item 14).
func subnetPerZone(subnets []Subnet) map[string]Subnet {
	out := map[string]Subnet{}
	for _, s := range subnets {
		if s.Zone == "" || s.ID == "" || s.Unavailable {
			continue
		}
		cur, ok := out[s.Zone]
		if !ok || s.AvailableIPs > cur.AvailableIPs {
			out[s.Zone] = s
		}
	}
	return out
}

func hasMinValues(reqs requirements.Requirements) bool {
	for _, r := range reqs {
		if r.MinValues != nil {
			return true
		}
	}
	return false
}

// exotic reports whether an instance type has GPUs or accelerators or is
// bare metal (aws: instance/filter/filter.go ExoticInstanceTypeFilter).
func exotic(it *catalog.InstanceType) bool {
	_, gpu := it.Labels[v1.LabelInstanceGPUCount]
	_, acc := it.Labels[v1.LabelInstanceAcceleratorCount]
	return gpu || acc || strings.Contains(it.Labels[v1.LabelInstanceSize], "metal")
}

// dropExotic removes exotic types unless nothing else is left.
func dropExotic(cands []candidate) []candidate {
	plain := slices.DeleteFunc(slices.Clone(cands), func(c candidate) bool { return exotic(c.it) })
	if len(plain) == 0 {
		return cands
	}
	return plain
}

// dropPricierSpot removes, in place, spot offerings priced above the
// cheapest on-demand offering of any candidate, then candidates left with no
// offering
// (aws: instance/filter/filter.go spot filter; karpenter-spec §11.3 item 12:
// no spot offering pricier than the cheapest on-demand one). With no
// on-demand offering it changes nothing.
func dropPricierSpot(cands []candidate) []candidate {
	od, found := 0.0, false
	for _, c := range cands {
		for _, o := range c.offers {
			if o.CapacityType == v1.CapacityTypeOnDemand && (!found || o.Price < od) {
				od, found = o.Price, true
			}
		}
	}
	if !found {
		return cands
	}
	out := cands[:0]
	for _, c := range cands {
		c.offers = slices.DeleteFunc(c.offers, func(o catalog.Offering) bool {
			return o.CapacityType == v1.CapacityTypeSpot && o.Price > od
		})
		if len(c.offers) > 0 {
			out = append(out, c)
		}
	}
	return out
}

func cheapest(offers catalog.Offerings) float64 {
	o, _ := offers.Cheapest()
	return o.Price
}

// truncate keeps the max cheapest candidates (already sorted). When the
// requirements carry minValues and the cheapest max do not provide enough
// distinct values, it first takes, per key in order, the cheapest
// candidates that add a new value, then fills up by price; the result stays
// in price order. An error means minValues cannot be met within max types.
func truncate(cands []candidate, reqs requirements.Requirements, max int) ([]candidate, error) {
	if len(cands) <= max {
		return cands, nil
	}
	if !hasMinValues(reqs) || minValuesMet(cands[:max], reqs) == "" {
		return cands[:max], nil
	}
	chosen := make([]bool, len(cands))
	n := 0
	for _, key := range reqs.Keys() {
		r := reqs[key]
		if r.MinValues == nil {
			continue
		}
		seen := map[string]bool{}
		for i, c := range cands {
			if chosen[i] {
				seen[value(c.it, key)] = true
			}
		}
		for i, c := range cands {
			if len(seen) >= *r.MinValues {
				break
			}
			if v := value(c.it, key); !chosen[i] && !seen[v] {
				chosen[i], seen[v] = true, true
				n++
			}
		}
	}
	for i := range cands {
		if n >= max {
			break
		}
		if !chosen[i] {
			chosen[i] = true
			n++
		}
	}
	var out []candidate
	for i, c := range cands {
		if chosen[i] {
			out = append(out, c)
		}
	}
	if key := minValuesMet(out, reqs); key != "" || len(out) > max {
		return nil, fmt.Errorf("instance types: minValues of %q cannot be met by %d instance types", key, max)
	}
	return out, nil
}

// minValuesMet returns the first key (sorted) whose minValues cands do not
// meet, or "".
func minValuesMet(cands []candidate, reqs requirements.Requirements) string {
	for _, key := range reqs.Keys() {
		r := reqs[key]
		if r.MinValues == nil {
			continue
		}
		seen := map[string]bool{}
		for _, c := range cands {
			seen[value(c.it, key)] = true
		}
		if len(seen) < *r.MinValues {
			return key
		}
	}
	return ""
}

// value is an instance type's value for a label key.
func value(it *catalog.InstanceType, key string) string {
	if key == v1.LabelInstanceType {
		return it.Name
	}
	return it.Labels[key]
}

// capacityType is the first of reserved, spot and on-demand that some
// candidate offers (karpenter-spec §4 step 4). The offers were already
// limited to capacity types the claim allows.
func capacityType(cands []candidate) string {
	for _, ct := range []string{v1.CapacityTypeReserved, v1.CapacityTypeSpot} {
		for _, c := range cands {
			for _, o := range c.offers {
				if o.CapacityType == ct {
					return ct
				}
			}
		}
	}
	return v1.CapacityTypeOnDemand
}

// onePerZone keeps the cheapest reserved offering per zone, ties by
// reservation ID (Karpenter keeps the one with the most free capacity,
// which the catalog does not model).
func onePerZone(offers catalog.Offerings) catalog.Offerings {
	best := map[string]catalog.Offering{}
	for _, o := range offers {
		cur, ok := best[o.Zone]
		if !ok || o.Price < cur.Price || (o.Price == cur.Price && o.ReservationID < cur.ReservationID) {
			best[o.Zone] = o
		}
	}
	out := make(catalog.Offerings, 0, len(best))
	for _, o := range best {
		out = append(out, o)
	}
	return out
}
