package catalog

import "slices"

// regionZones returns the availability-zone names of region, sorted, or nil
// when the region is not in the table. The table covers the regions of the
// embedded price data plus commonly used commercial regions. Names follow
// AWS's public zone naming (region + letter) as EC2 DescribeAvailabilityZones
// lists them for these regions; an account may be offered a subset (zone
// letters map to physical zones per account). The result is a fresh slice.
func regionZones(region string) []string {
	var letters string
	switch region {
	case "us-east-1":
		letters = "abcdef"
	case "us-east-2", "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1",
		"ap-southeast-1", "ap-southeast-2", "ap-south-1", "sa-east-1",
		"us-gov-east-1", "us-gov-west-1", "cn-northwest-1":
		letters = "abc"
	case "us-west-2":
		letters = "abcd"
	case "ap-northeast-1":
		letters = "acd"
	case "ap-northeast-2":
		letters = "abcd"
	case "ca-central-1", "cn-north-1":
		letters = "abd"
	default:
		return nil
	}
	zones := make([]string, len(letters))
	for i := range letters {
		zones[i] = region + letters[i:i+1]
	}
	return zones
}

// offeringZones picks the zones offerings are generated for: opts.Zones,
// else the zones of the node class's status.subnets, else every zone of the
// region. The result is sorted and free of duplicates; ok is false when no
// source names any zone.
func offeringZones(explicit []string, subnetZones []string, region string) (zones []string, ok bool) {
	switch {
	case len(explicit) != 0:
		zones = slices.Clone(explicit)
	case len(subnetZones) != 0:
		zones = slices.Clone(subnetZones)
	default:
		zones = regionZones(region)
	}
	slices.Sort(zones)
	zones = slices.Compact(zones)
	return zones, len(zones) != 0
}
