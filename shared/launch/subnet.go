package launch

// Subnet is a subnet a launch may place an instance in: the one subnet
// type of the node-class resolver (shared/aws/nodeclass), provisioning's
// launch state and the fleet adapter, which renders the subnet
// SubnetPerZone picks into each override.
type Subnet struct {
	ID     string
	Zone   string
	ZoneID string
	// AvailableIPs is the subnet's free IPv4 address count
	// (AvailableIpAddressCount).
	AvailableIPs int64
	// Unavailable marks a subnet that recently failed a launch with
	// InsufficientFreeAddressesInSubnet: it is never chosen, and a zone
	// whose subnets are all unavailable is left out of the launch
	// (karpenter-spec §4 step 5, §11.3 item 14). The resolver leaves it
	// false; provisioning sets it from its unavailable-subnets cache.
	Unavailable bool
}

// SubnetPerZone picks, per zone, the subnet with the most free addresses
// among those not marked unavailable; ties keep input order. A subnet
// without an ID or zone is skipped. A zone whose subnets are all
// unavailable gets none, so its offerings are left out of the launch
// (Request.Zones; karpenter-spec §4 step 5, §11.3 item 14).
func SubnetPerZone(subnets []Subnet) map[string]Subnet {
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
