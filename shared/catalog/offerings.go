package catalog

import (
	"cmp"
	"slices"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Available returns the offerings that are available, in their original
// order, as a new slice (nil when none is). Karpenter:
// pkg/cloudprovider/types.go Offerings.Available.
func (ofs Offerings) Available() Offerings {
	n := 0
	for i := range ofs {
		if ofs[i].Available {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(Offerings, 0, n)
	for i := range ofs {
		if ofs[i].Available {
			out = append(out, ofs[i])
		}
	}
	return out
}

// Cheapest returns the lowest-priced offering of ofs, available or not (call
// it on Available() or Compatible(...) to restrict it); among equal prices
// the first in order wins, so the result is deterministic. ok is false when
// ofs is empty.
func (ofs Offerings) Cheapest() (cheapest Offering, ok bool) {
	best := -1
	for i := range ofs {
		if best < 0 || ofs[i].Price < ofs[best].Price {
			best = i
		}
	}
	if best < 0 {
		return Offering{}, false
	}
	return ofs[best], true
}

// Compatible returns the offerings whose zone satisfies zone and whose
// capacity type satisfies capacityType, in order, as a new slice (nil when
// none does). A nil predicate accepts every value. A requirement's Has
// method (shared/requirements) fits either predicate.
func (ofs Offerings) Compatible(zone, capacityType func(string) bool) Offerings {
	var out Offerings
	for i := range ofs {
		if ofs[i].matches(zone, capacityType) {
			out = append(out, ofs[i])
		}
	}
	return out
}

// CheapestAvailable returns the cheapest available offering compatible with
// the zone and capacity-type predicates (nil accepts all), without
// allocating: the price Karpenter orders instance types by
// (pkg/cloudprovider/types.go OrderByPrice). Ties go to the first in order;
// ok is false when no offering qualifies.
func (ofs Offerings) CheapestAvailable(zone, capacityType func(string) bool) (cheapest Offering, ok bool) {
	best := -1
	for i := range ofs {
		if !ofs[i].Available || !ofs[i].matches(zone, capacityType) {
			continue
		}
		if best < 0 || ofs[i].Price < ofs[best].Price {
			best = i
		}
	}
	if best < 0 {
		return Offering{}, false
	}
	return ofs[best], true
}

// HasAvailable reports whether some available offering is compatible with
// the predicates (nil accepts all), without allocating.
func (ofs Offerings) HasAvailable(zone, capacityType func(string) bool) bool {
	_, ok := ofs.CheapestAvailable(zone, capacityType)
	return ok
}

func (o *Offering) matches(zone, capacityType func(string) bool) bool {
	return (zone == nil || zone(o.Zone)) && (capacityType == nil || capacityType(o.CapacityType))
}

// offeringPricer prices offerings for one Resolve call.
type offeringPricer struct {
	table     *priceTable
	spotRatio float64
	// onDemand, spot and offered are the live parts (nil: not loaded).
	onDemand map[string]float64
	spot     map[string]map[string]float64
	offered  map[string][]string
}

func newOfferingPricer(table *priceTable, opts Options) offeringPricer {
	p := offeringPricer{table: table, spotRatio: opts.SpotPriceRatio}
	if l := opts.Live; l != nil {
		if l.OnDemandPrices != nil {
			p.onDemand = l.OnDemandPrices.Prices
			if p.onDemand == nil {
				p.onDemand = map[string]float64{}
			}
		}
		if l.SpotPrices != nil {
			p.spot = l.SpotPrices.Prices
			if p.spot == nil {
				p.spot = map[string]map[string]float64{}
			}
		}
		if l.Offerings != nil {
			p.offered = l.Offerings.Zones
			if p.offered == nil {
				p.offered = map[string][]string{}
			}
		}
	}
	return p
}

// onDemandPrice is the type's on-demand price: live when loaded, else the
// embedded table's.
func (p offeringPricer) onDemandPrice(name string) (float64, bool) {
	if p.onDemand != nil {
		price, ok := p.onDemand[name]
		return price, ok
	}
	return p.table.price(name)
}

// offerings builds the type's offerings in zone order, on-demand first,
// following Karpenter's offering rules (spec §3.4; aws:
// pkg/providers/instancetype/offering):
//   - zones are the class's zones, and with live offerings only those
//     where DescribeInstanceTypeOfferings lists the type (no offering at
//     all elsewhere);
//   - on-demand is available when the type is compatible with the node
//     class, has an on-demand price and unavailable does not report it;
//   - with live Spot prices there is one Spot offering per zone, priced at
//     that zone's price and unavailable when the zone has none (Karpenter:
//     once Spot prices are loaded, no price means unavailable); without
//     them Spot is on-demand × spotRatio when spotRatio > 0, else absent.
func (p offeringPricer) offerings(name string, zones, zoneIDs []string, compatible bool,
	unavailable func(instanceType, zone, capacityType string) bool) Offerings {
	price, hasPrice := p.onDemandPrice(name)
	withSpot := p.spot != nil || p.spotRatio > 0
	perZone := 1
	if withSpot {
		perZone = 2
	}
	var offered []string
	if p.offered != nil {
		offered = p.offered[name]
	}
	out := make(Offerings, 0, len(zones)*perZone)
	for i, zone := range zones {
		if p.offered != nil && !slices.Contains(offered, zone) {
			continue
		}
		ok := func(ct string) bool { return compatible && (unavailable == nil || !unavailable(name, zone, ct)) }
		out = append(out, Offering{Zone: zone, ZoneID: zoneIDs[i], CapacityType: v1.CapacityTypeOnDemand, Price: price,
			Available: hasPrice && ok(v1.CapacityTypeOnDemand)})
		if !withSpot {
			continue
		}
		o := Offering{Zone: zone, ZoneID: zoneIDs[i], CapacityType: v1.CapacityTypeSpot}
		if p.spot != nil {
			sp, has := p.spot[name][zone]
			o.Price, o.Available = sp, has && ok(v1.CapacityTypeSpot)
		} else {
			o.Price, o.Available = price*p.spotRatio, hasPrice && ok(v1.CapacityTypeSpot)
		}
		out = append(out, o)
	}
	return out
}

// ReservedPriceDivisor is what a reserved offering's price divides the
// type's on-demand price by: near zero, so a reservation is always
// preferred, while reservations of different types keep their on-demand
// order (aws: pkg/providers/instancetype/offering/provider.go prices
// reserved offerings at the on-demand price / 10,000,000).
const ReservedPriceDivisor = 10_000_000

// reservedOfferings returns one reserved offering per reservation of
// reservations for instance type name (karpenter-spec §3.5: offerings per
// capacity reservation), in their order, with ReservationID,
// ReservationCapacity (opts.ReservationCapacity), ReservationType and
// Interruptible set, priced at the on-demand price / ReservedPriceDivisor.
// A reservation in a zone outside zones, or not active (an expiring
// capacity block: v1.CapacityReservation.StateAt at opts.Now, or its
// recorded State when opts.Now is zero), offers nothing. The
// offering is available when the type has a price, is compatible, the
// reservation has capacity left and opts.Unavailable does not report the
// (type, zone, reserved) offering.
func (p offeringPricer) reservedOfferings(name string, reservations []v1.CapacityReservation, zones, zoneIDs []string, compatible bool, opts Options) Offerings {
	var out Offerings
	for _, r := range reservations {
		state := r.State
		if !opts.Now.IsZero() {
			state = r.StateAt(opts.Now)
		}
		if r.InstanceType != name || (state != "" && state != v1.ReservationStateActive) {
			continue
		}
		zi := slices.Index(zones, r.AvailabilityZone)
		if zi < 0 {
			continue
		}
		price, hasPrice := p.onDemandPrice(name)
		capacity := opts.ReservationCapacity[r.ID]
		available := hasPrice && compatible && capacity > 0 &&
			(opts.Unavailable == nil || !opts.Unavailable(name, r.AvailabilityZone, v1.CapacityTypeReserved))
		out = append(out, Offering{
			Zone: r.AvailabilityZone, ZoneID: zoneIDs[zi], CapacityType: v1.CapacityTypeReserved,
			Price: price / ReservedPriceDivisor, Available: available,
			ReservationID: r.ID, ReservationCapacity: max(capacity, 0),
			ReservationType: cmp.Or(r.ReservationType, v1.ReservationTypeDefault), Interruptible: r.Interruptible,
		})
	}
	return out
}
