package catalog

import v1 "github.com/nodewright/nodewright/shared/apis/v1"

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
}

// offerings builds one offering per (zone × capacity type): on-demand, and
// spot when spotRatio > 0, in zone order. An offering is available when the
// type is compatible with the node class, has an on-demand price, and
// unavailable does not report it (spec §3.4).
func (p offeringPricer) offerings(name string, zones, zoneIDs []string, compatible bool,
	unavailable func(instanceType, zone, capacityType string) bool) Offerings {
	price, hasPrice := p.table.price(name)
	perZone := 1
	if p.spotRatio > 0 {
		perZone = 2
	}
	capacityTypes := [...]string{v1.CapacityTypeOnDemand, v1.CapacityTypeSpot}
	out := make(Offerings, 0, len(zones)*perZone)
	for i, zone := range zones {
		for _, ct := range capacityTypes[:perZone] {
			o := Offering{Zone: zone, ZoneID: zoneIDs[i], CapacityType: ct, Price: price}
			if ct == v1.CapacityTypeSpot {
				o.Price = price * p.spotRatio
			}
			o.Available = compatible && hasPrice && (unavailable == nil || !unavailable(name, zone, ct))
			out = append(out, o)
		}
	}
	return out
}
