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
type OfferingKey struct {
	// CapacityType is "spot", "on-demand" or "reserved".
	CapacityType string
	// InstanceType is an EC2 instance type, e.g. "c5.large".
	InstanceType string
	// Zone is an availability-zone name, e.g. "us-east-1a".
	Zone string
}

// String renders k as "capacityType/instanceType/zone", with "*" for an
// empty field.
func (k OfferingKey) String() string {
	parts := []string{k.CapacityType, k.InstanceType, k.Zone}
	for i, p := range parts {
		if p == "" {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, "/")
}

// Matches reports whether k, possibly with empty fields, covers the
// concrete offering (instanceType, zone, capacityType).
func (k OfferingKey) Matches(instanceType, zone, capacityType string) bool {
	return (k.CapacityType == "" || k.CapacityType == capacityType) &&
		(k.InstanceType == "" || k.InstanceType == instanceType) &&
		(k.Zone == "" || k.Zone == zone)
}

// UnavailableFunc turns unavailable-offerings cache entries into
// Options.Unavailable: the returned function reports whether some entry
// matches the offering. It is nil when keys is empty (nothing is
// unavailable).
func UnavailableFunc(keys []OfferingKey) func(instanceType, zone, capacityType string) bool {
	if len(keys) == 0 {
		return nil
	}
	exact := map[OfferingKey]bool{}
	var partial []OfferingKey
	for _, k := range keys {
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
