package catalog

import (
	"strings"
	"time"
)

// UnavailableOfferingsTTL is how long an offering that failed with an
// insufficient-capacity error is left out of solving and launching, and
// how long a full subnet is not used (karpenter-spec section 4 steps 5
// and 9; aws: pkg/cache UnavailableOfferingsTTL).
const UnavailableOfferingsTTL = 3 * time.Minute

// OfferingKey names one purchasable pool of EC2 capacity, the unit the
// unavailable-offerings cache works in (karpenter-spec section 4 step 9):
// the one key of the cache's store (shared/aws/ddbstore), provisioning and
// the launch outcome. An empty field matches every value of that field:
// {CapacityType: "spot"} stands for every spot offering (Karpenter marks
// all spot unavailable on AuthFailure.ServiceLinkedRoleCreationNotPermitted).
// A key with a ReservationID names the reserved offerings of that one
// capacity reservation instead (Karpenter marks a reclaimed interruptible
// reservation unavailable, not every reserved offering of its type and
// zone); its other fields only describe it.
type OfferingKey struct {
	// CapacityType is "spot", "on-demand" or "reserved".
	CapacityType string
	// InstanceType is an EC2 instance type, e.g. "c5.large".
	InstanceType string
	// Zone is an availability-zone name, e.g. "us-east-1a".
	Zone string
	// ReservationID, when set, is the capacity reservation (cr-...) whose
	// offerings the key names; see ReservationsUnavailable.
	ReservationID string
}

// String renders k as "capacityType/instanceType/zone", with "*" for an
// empty field, and "/reservationID" after it when set.
func (k OfferingKey) String() string {
	parts := []string{k.CapacityType, k.InstanceType, k.Zone}
	for i, p := range parts {
		if p == "" {
			parts[i] = "*"
		}
	}
	if k.ReservationID != "" {
		parts = append(parts, k.ReservationID)
	}
	return strings.Join(parts, "/")
}

// Matches reports whether k, possibly with empty fields, covers the
// concrete offering (instanceType, zone, capacityType). A key with a
// ReservationID never matches here: it names one reservation's offerings,
// which ReservationsUnavailable marks.
func (k OfferingKey) Matches(instanceType, zone, capacityType string) bool {
	return k.ReservationID == "" && (k.CapacityType == "" || k.CapacityType == capacityType) &&
		(k.InstanceType == "" || k.InstanceType == instanceType) &&
		(k.Zone == "" || k.Zone == zone)
}

// UnavailableFunc turns unavailable-offerings cache entries into
// Options.Unavailable: the returned function reports whether some entry
// matches the offering. It is nil when keys is empty (nothing is
// unavailable). Entries with a ReservationID are left to
// ReservationsUnavailable.
func UnavailableFunc(keys []OfferingKey) func(instanceType, zone, capacityType string) bool {
	if len(keys) == 0 {
		return nil
	}
	exact := map[OfferingKey]bool{}
	var partial []OfferingKey
	for _, k := range keys {
		if k.ReservationID != "" {
			continue
		}
		if k.CapacityType != "" && k.InstanceType != "" && k.Zone != "" {
			exact[k] = true
			continue
		}
		partial = append(partial, k)
	}
	return func(instanceType, zone, capacityType string) bool {
		if exact[OfferingKey{CapacityType: capacityType, InstanceType: instanceType, Zone: zone}] {
			return true
		}
		for _, k := range partial {
			if k.Matches(instanceType, zone, capacityType) {
				return true
			}
		}
		return false
	}
}

// ReservationsUnavailable marks unavailable every offering of types whose
// ReservationID one of keys names (OfferingKey.ReservationID), and returns
// types: the instance types it changes are copies with their own
// Offerings, so types may share instance types with a cache. Keys without
// a ReservationID are ignored (UnavailableFunc applies them).
func ReservationsUnavailable(types []*InstanceType, keys []OfferingKey) []*InstanceType {
	gone := map[string]bool{}
	for _, k := range keys {
		if k.ReservationID != "" {
			gone[k.ReservationID] = true
		}
	}
	if len(gone) == 0 {
		return types
	}
	out := types
	copied := false
	for i, it := range types {
		hit := false
		for _, o := range it.Offerings {
			hit = hit || (o.ReservationID != "" && o.Available && gone[o.ReservationID])
		}
		if !hit {
			continue
		}
		if !copied {
			out, copied = append([]*InstanceType(nil), types...), true
		}
		c := *it
		c.Offerings = append(Offerings(nil), it.Offerings...)
		for j := range c.Offerings {
			if gone[c.Offerings[j].ReservationID] {
				c.Offerings[j].Available = false
			}
		}
		out[i] = &c
	}
	return out
}
