package provisioning

import (
	"context"
	"time"

	"github.com/nodewright/nodewright/shared/launch"
)

// subnetCache is the unavailable-subnets cache (DynamoDB with a TTL
// attribute in production): subnets that failed a launch with
// InsufficientFreeAddressesInSubnet are not used for UnavailableOfferingsTTL
// (karpenter-spec section 4 step 5, 11.3 item 14).
type subnetCache interface {
	// UnavailableSubnets returns the IDs of the subnets still unavailable
	// at now.
	UnavailableSubnets(ctx context.Context, now time.Time) ([]string, error)
	// MarkSubnetUnavailable records that subnetID cannot take instances
	// until now+ttl, replacing any earlier entry; code is the EC2 error
	// code.
	MarkSubnetUnavailable(ctx context.Context, subnetID, code string, now time.Time, ttl time.Duration) error
}

// markSubnets sets Unavailable on the subnets listed in unavailable and
// returns the zones all of whose subnets are unavailable: a zone is
// unavailable only when every subnet in it is (karpenter-spec 11.3 item 14).
func markSubnets(subnets []launch.Subnet, unavailable map[string]bool) map[string]bool {
	usable := map[string]bool{}
	zones := map[string]bool{}
	for i := range subnets {
		s := &subnets[i]
		s.Unavailable = unavailable[s.ID]
		zones[s.Zone] = true
		if !s.Unavailable {
			usable[s.Zone] = true
		}
	}
	full := map[string]bool{}
	for z := range zones {
		if !usable[z] {
			full[z] = true
		}
	}
	return full
}

// withFullZones extends an offering predicate (nil: nothing unavailable)
// to every offering in the zones of full.
func withFullZones(pred func(instanceType, zone, capacityType string) bool, full map[string]bool) func(instanceType, zone, capacityType string) bool {
	if len(full) == 0 {
		return pred
	}
	return func(instanceType, zone, capacityType string) bool {
		return full[zone] || (pred != nil && pred(instanceType, zone, capacityType))
	}
}
