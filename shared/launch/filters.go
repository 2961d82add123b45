package launch

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/requirements"
)

// MaxInstanceTypes is the most instance types one launch lists (aws:
// pkg/cloudprovider maxInstanceTypes, what one CreateFleet call takes;
// karpenter-spec §4 step 3).
const MaxInstanceTypes = 60

// The filter names, as Plan.Rejected reports them.
const (
	// FilterCompatible removes types whose labels the requirements do not
	// admit.
	FilterCompatible = "compatible"
	// FilterFits removes types whose allocatable does not hold the requests.
	FilterFits = "fits"
	// FilterOffering removes types left with no available offering that the
	// zone, capacity-type and capacity-reservation requirements allow in a
	// launchable zone.
	FilterOffering = "offering"
	// FilterExotic removes GPU, accelerator and metal types when others
	// remain (aws: ExoticInstanceTypeFilter).
	FilterExotic = "exotic"
	// FilterSpotPrice removes spot offerings priced above the cheapest
	// on-demand offering when both capacity types are allowed, then types
	// left with none (aws: spot offering filter; karpenter-spec §11.3 item
	// 12).
	FilterSpotPrice = "spot-price"
	// FilterTruncate keeps the MaxInstanceTypes cheapest, keeping minValues
	// satisfiable.
	FilterTruncate = "truncate"
)

// claimLevelKeys are well-known keys whose value is chosen per launch (zone,
// capacity type, reservation, tenancy, placement group) or per pool
// (nodepool, node class, region, hostname), not per instance type.
var claimLevelKeys = map[string]bool{
	v1.LabelNodePool: true, v1.LabelEC2NodeClass: true, v1.LabelTopologyZone: true,
	v1.LabelTopologyRegion: true, v1.LabelZoneID: true, v1.LabelCapacityType: true,
	v1.LabelInstanceTenancy: true, v1.LabelCapacityReservationID: true,
	v1.LabelCapacityReservationType: true, v1.LabelCapacityReservationInterruptible: true,
	v1.LabelPlacementGroupID: true, v1.LabelPlacementGroupPartition: true,
	v1.LabelHostname: true,
}

// TypeKeys are the well-known keys every instance type defines: a key
// absent from its labels behaves as DoesNotExist (karpenter-spec §2). It is
// v1.WellKnownLabels minus the per-launch and per-pool keys. Read only.
var TypeKeys = func() map[string]bool {
	out := map[string]bool{}
	for k := range v1.WellKnownLabels {
		if !claimLevelKeys[k] {
			out[k] = true
		}
	}
	return out
}()

// AdmitsType reports whether r admits the instance type's labels, a key of
// TypeKeys it lacks counting as DoesNotExist (the compatible filter).
func AdmitsType(r requirements.Requirements, it *catalog.InstanceType) bool {
	return r.AdmitsLabels(it.Labels, TypeKeys)
}

// OfferFilter holds the requirements that decide which offerings a
// requirement set allows: zone, capacity type and capacity reservation.
// The zero value allows every offering.
type OfferFilter struct {
	zone, capacityType, reservation *requirements.Requirement
	reservationType, interruptible  *requirements.Requirement
}

// NewOfferFilter returns the offering filter of r.
func NewOfferFilter(r requirements.Requirements) OfferFilter {
	return OfferFilter{zone: r[v1.LabelTopologyZone], capacityType: r[v1.LabelCapacityType], reservation: r[v1.LabelCapacityReservationID],
		reservationType: r[v1.LabelCapacityReservationType], interruptible: r[v1.LabelCapacityReservationInterruptible]}
}

// Allows reports whether o satisfies the zone, capacity-type and
// capacity-reservation requirements (karpenter.k8s.aws/capacity-
// reservation-id, -type and -interruptible, whose values for a reserved
// offering are its ReservationID, ReservationType and Interruptible). A
// reserved offering without a reservation ID is never allowed; an offering
// without a reservation satisfies a reservation requirement only when it is
// NotIn or DoesNotExist (the offering lacks the labels). Availability is not
// checked.
func (f *OfferFilter) Allows(o *catalog.Offering) bool {
	if f.zone != nil && !f.zone.Has(o.Zone) {
		return false
	}
	if f.capacityType != nil && !f.capacityType.Has(o.CapacityType) {
		return false
	}
	if o.CapacityType == v1.CapacityTypeReserved && o.ReservationID == "" {
		return false
	}
	if f.reservation == nil && f.reservationType == nil && f.interruptible == nil {
		return true
	}
	for _, c := range []struct {
		req   *requirements.Requirement
		value string
	}{
		{f.reservation, o.ReservationID},
		{f.reservationType, o.ReservationType},
		{f.interruptible, strconv.FormatBool(o.Interruptible)},
	} {
		if c.req == nil {
			continue
		}
		if o.ReservationID == "" {
			if op := c.req.Operator(); op != corev1.NodeSelectorOpNotIn && op != corev1.NodeSelectorOpDoesNotExist {
				return false
			}
			continue
		}
		if !c.req.Has(c.value) {
			return false
		}
	}
	return true
}

// Allowed returns the offerings of offers that f allows and keep (nil
// accepts all) reports true for, as a new slice (nil when none), in
// Arrange's layout.
func (f *OfferFilter) Allowed(offers catalog.Offerings, keep func(*catalog.Offering) bool) catalog.Offerings {
	var out catalog.Offerings
	for i := range offers {
		o := &offers[i]
		if !f.Allows(o) || keep != nil && !keep(o) {
			continue
		}
		if out == nil {
			out = make(catalog.Offerings, 0, len(offers)-i)
		}
		out = append(out, *o)
	}
	Arrange(out)
	return out
}

// Arrange reorders offers in place: non-spot offerings first in their
// order, then spot offerings cheapest first. The order of a candidate's
// offerings does not change any plan; this layout lets Narrow's spot-price
// filter trim a candidate's spot offerings by reslicing instead of
// copying.
func Arrange(offers catalog.Offerings) {
	slices.SortStableFunc(offers, func(a, b catalog.Offering) int {
		as, bs := a.CapacityType == v1.CapacityTypeSpot, b.CapacityType == v1.CapacityTypeSpot
		switch {
		case as && bs:
			return cmp.Compare(a.Price, b.Price)
		case as:
			return 1
		case bs:
			return -1
		}
		return 0
	})
}

// Candidate is an instance type and its offerings still in play.
type Candidate struct {
	Type *catalog.InstanceType
	// Offerings are the type's available offerings the requirements allow.
	Offerings catalog.Offerings
	// Ref is the caller's own index for the type, carried through
	// unchanged.
	Ref int
}

// Price is the price of the candidate's cheapest offering (0 with none).
func (c *Candidate) Price() float64 {
	o, _ := c.Offerings.Cheapest()
	return o.Price
}

// Rejection names a filter and the instance types it removed.
type Rejection struct {
	Filter        string
	InstanceTypes []string
}

// Narrow runs the filters after fits on cands, whose offerings must
// already be the allowed, available ones: exotic and spot-price (both
// skipped when r carries minValues, which they could break), a sort by
// cheapest offering then name, and truncate to max (MaxInstanceTypes when
// max <= 0) keeping every minValues key of r satisfiable when cands
// satisfied it. It may reorder cands and replace a candidate's Offerings
// with a new, shorter slice, but never writes to the storage of an
// Offerings slice, so candidates may share their type's offerings. The
// result shares cands' backing storage. When rej is not nil, each filter
// that removed types appends a Rejection naming them; with nil, no
// rejection is built (the solver's hot path).
func Narrow(r requirements.Requirements, cands []Candidate, max int, rej *[]Rejection) []Candidate {
	if max <= 0 {
		max = MaxInstanceTypes
	}
	if !hasMinValues(r) {
		cands = dropExotic(cands, rej)
		if ct := r[v1.LabelCapacityType]; ct == nil || ct.Has(v1.CapacityTypeSpot) && ct.Has(v1.CapacityTypeOnDemand) {
			cands = dropPricierSpot(cands, rej)
		}
	}
	sortByPrice(cands)
	kept := truncate(r, cands, max)
	if rej != nil && len(kept) < len(cands) {
		in := make(map[*catalog.InstanceType]bool, len(kept))
		for _, c := range kept {
			in[c.Type] = true
		}
		var names []string
		for _, c := range cands {
			if !in[c.Type] {
				names = append(names, c.Type.Name)
			}
		}
		*rej = append(*rej, Rejection{Filter: FilterTruncate, InstanceTypes: names})
	}
	return kept
}

// sortByPrice sorts cands by their cheapest offering, then name, stably.
// Callers usually pass cands already in that order, which costs one pass.
func sortByPrice(cands []Candidate) {
	order := func(a, b *Candidate) int {
		return cmp.Or(cmp.Compare(a.Price(), b.Price()), strings.Compare(a.Type.Name, b.Type.Name))
	}
	for i := 1; i < len(cands); i++ {
		if order(&cands[i-1], &cands[i]) > 0 {
			slices.SortStableFunc(cands, func(a, b Candidate) int { return order(&a, &b) })
			return
		}
	}
}

func hasMinValues(r requirements.Requirements) bool {
	for _, req := range r {
		if req.MinValues != nil {
			return true
		}
	}
	return false
}

// Exotic reports whether an instance type has GPUs or accelerators or is
// bare metal (aws: instance/filter/filter.go ExoticInstanceTypeFilter).
func Exotic(it *catalog.InstanceType) bool {
	_, gpu := it.Labels[v1.LabelInstanceGPUCount]
	_, acc := it.Labels[v1.LabelInstanceAcceleratorCount]
	return gpu || acc || strings.Contains(it.Labels[v1.LabelInstanceSize], "metal")
}

// dropExotic removes exotic types unless nothing else is left, naming
// them in rej when it is not nil. Exotic is evaluated once per candidate.
func dropExotic(cands []Candidate, rej *[]Rejection) []Candidate {
	var exotic []bool
	n := 0
	for i, c := range cands {
		if Exotic(c.Type) {
			if exotic == nil {
				exotic = make([]bool, len(cands))
			}
			exotic[i] = true
			n++
		}
	}
	if n == 0 || n == len(cands) {
		return cands
	}
	var names []string
	if rej != nil {
		names = make([]string, 0, n)
	}
	out := cands[:0]
	for i, c := range cands {
		switch {
		case !exotic[i]:
			out = append(out, c)
		case rej != nil:
			names = append(names, c.Type.Name)
		}
	}
	clear(cands[len(out):])
	if rej != nil {
		*rej = append(*rej, Rejection{Filter: FilterExotic, InstanceTypes: names})
	}
	return out
}

// dropPricierSpot removes spot offerings priced above the cheapest
// on-demand offering of any candidate, then candidates left with none,
// naming those in rej when it is not nil. With no on-demand offering it
// changes nothing. A candidate that loses offerings gets a new Offerings
// slice; the old one's storage is not written (Narrow's contract).
func dropPricierSpot(cands []Candidate, rej *[]Rejection) []Candidate {
	od, found := 0.0, false
	for _, c := range cands {
		for _, o := range c.Offerings {
			if o.CapacityType == v1.CapacityTypeOnDemand && (!found || o.Price < od) {
				od, found = o.Price, true
			}
		}
	}
	if !found {
		return cands
	}
	pricier := func(o catalog.Offering) bool { return o.CapacityType == v1.CapacityTypeSpot && o.Price > od }
	var names []string
	out := cands[:0]
	for _, c := range cands {
		if first := slices.IndexFunc(c.Offerings, pricier); first >= 0 {
			if rest := c.Offerings[first:]; !slices.ContainsFunc(rest, func(o catalog.Offering) bool { return !pricier(o) }) {
				// The pricier offerings are a suffix (OfferFilter.Allowed's
				// layout): reslice.
				c.Offerings = c.Offerings[:first:first]
			} else {
				kept := make(catalog.Offerings, 0, len(c.Offerings))
				for _, o := range c.Offerings {
					if !pricier(o) {
						kept = append(kept, o)
					}
				}
				c.Offerings = kept
			}
		}
		if len(c.Offerings) > 0 {
			out = append(out, c)
		} else if rej != nil {
			names = append(names, c.Type.Name)
		}
	}
	if len(names) > 0 {
		*rej = append(*rej, Rejection{Filter: FilterSpotPrice, InstanceTypes: names})
	}
	return out
}

// values returns the values candidate c offers for key under r: its name
// for the instance-type key, the zones or capacity types of its offerings,
// or its label.
func values(c *Candidate, key string) []string {
	switch key {
	case v1.LabelInstanceType:
		return []string{c.Type.Name}
	case v1.LabelTopologyZone, v1.LabelCapacityType:
		out := make([]string, 0, len(c.Offerings))
		for _, o := range c.Offerings {
			if key == v1.LabelTopologyZone {
				out = append(out, o.Zone)
			} else {
				out = append(out, o.CapacityType)
			}
		}
		return out
	}
	if v, ok := c.Type.Labels[key]; ok {
		return []string{v}
	}
	return nil
}

// DistinctValues counts the distinct values of key that cands offer and
// r's requirement on key admits (karpenter: InstanceTypes.SatisfiesMinValues
// counts them the same way).
func DistinctValues(r requirements.Requirements, cands []Candidate, key string) int {
	req := r[key]
	seen := map[string]bool{}
	for i := range cands {
		for _, v := range values(&cands[i], key) {
			if req == nil || req.Has(v) {
				seen[v] = true
			}
		}
	}
	return len(seen)
}

// MinValuesShortfall returns the first key (sorted) of r whose minValues
// cands do not reach, with the wanted and available counts, or "".
func MinValuesShortfall(r requirements.Requirements, cands []Candidate) (key string, want, have int) {
	for _, k := range r.Keys() {
		req := r[k]
		if req.MinValues == nil {
			continue
		}
		if n := DistinctValues(r, cands, k); n < *req.MinValues {
			return k, *req.MinValues, n
		}
	}
	return "", 0, 0
}

// truncate keeps at most max candidates (sorted cheapest first), but makes
// sure every minValues key keeps enough distinct values when the full list
// had them: for each such key it first takes the cheapest candidate of each
// missing value, then fills by price. The result stays in price order.
func truncate(r requirements.Requirements, cands []Candidate, max int) []Candidate {
	if len(cands) <= max {
		return cands
	}
	if k, _, _ := MinValuesShortfall(r, cands[:max]); k == "" {
		return cands[:max]
	}
	chosen := make([]bool, len(cands))
	count := 0
	for _, k := range r.Keys() {
		req := r[k]
		if req.MinValues == nil {
			continue
		}
		have := map[string]bool{}
		for i := range cands {
			if chosen[i] {
				for _, v := range values(&cands[i], k) {
					have[v] = true
				}
			}
		}
		for i := range cands {
			if len(have) >= *req.MinValues || count >= max {
				break
			}
			if chosen[i] {
				continue
			}
			vs := values(&cands[i], k)
			if slices.ContainsFunc(vs, func(v string) bool { return req.Has(v) && !have[v] }) {
				chosen[i] = true
				count++
				for _, v := range vs {
					have[v] = true
				}
			}
		}
	}
	for i := range cands {
		if count >= max {
			break
		}
		if !chosen[i] {
			chosen[i] = true
			count++
		}
	}
	out := cands[:0:0]
	for i := range cands {
		if chosen[i] {
			out = append(out, cands[i])
		}
	}
	return out
}

// fits reports whether every request fits the allocatable amount (a
// resource missing from allocatable has none).
func fits(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		a := allocatable[name]
		if q.Cmp(a) > 0 {
			return false
		}
	}
	return true
}

// quote renders a rejection list for errors.
func (r Rejection) String() string {
	return fmt.Sprintf("%s: %s", r.Filter, strings.Join(r.InstanceTypes, ", "))
}
