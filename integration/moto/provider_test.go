package moto_test

import "testing"

// TestLiveProviderTypesAndOfferingsEqualMotosAnswers is the issue's
// independent check of the live EC2 data provider: run against moto in
// ap-northeast-1, its instance types must be exactly the types moto offers
// in the region (DescribeInstanceTypeOfferings LocationType region, with
// moto's DescribeInstanceTypes facts), and its offerings exactly moto's
// (type, zone) pairs (LocationType availability-zone) in the node class's
// subnet zones, for both capacity types.
func TestLiveProviderTypesAndOfferingsEqualMotosAnswers(t *testing.T) {
	t.Skip("waits for the live EC2 data provider (branch live17: DescribeInstanceTypes/DescribeInstanceTypeOfferings through aws-sdk-go-v2); " +
		"moto_server and the fixtures under shared/aws/ec2data/testdata/moto are ready for it")
}
