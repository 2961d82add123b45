package catalog_test

import (
	"testing"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

func TestUnavailableFunc(t *testing.T) {
	keys := []catalog.OfferingKey{
		{CapacityType: v1.CapacityTypeOnDemand, InstanceType: "m5.large", Zone: "us-east-1a"},
		{CapacityType: v1.CapacityTypeSpot},
		{InstanceType: "c5.xlarge", Zone: "us-east-1b"},
	}
	tests := []struct {
		name                        string
		instanceType, zone, capType string
		want                        bool
	}{
		{"an exact entry marks its offering", "m5.large", "us-east-1a", v1.CapacityTypeOnDemand, true},
		{"an exact entry leaves another zone", "m5.large", "us-east-1b", v1.CapacityTypeOnDemand, false},
		{"an exact entry leaves another capacity type", "m5.large", "us-east-1a", v1.CapacityTypeReserved, false},
		{"a capacity-type entry marks every offering of it", "r5.2xlarge", "us-east-1c", v1.CapacityTypeSpot, true},
		{"a type-and-zone entry marks every capacity type there", "c5.xlarge", "us-east-1b", v1.CapacityTypeReserved, true},
		{"a type-and-zone entry leaves other zones", "c5.xlarge", "us-east-1a", v1.CapacityTypeOnDemand, false},
	}
	unavailable := catalog.UnavailableFunc(keys)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unavailable(tt.instanceType, tt.zone, tt.capType); got != tt.want {
				t.Errorf("unavailable(%s, %s, %s) = %v, want %v", tt.instanceType, tt.zone, tt.capType, got, tt.want)
			}
		})
	}
	if catalog.UnavailableFunc(nil) != nil {
		t.Error("UnavailableFunc(nil) is not nil; want nil (nothing unavailable)")
	}
	if got, want := (catalog.OfferingKey{CapacityType: v1.CapacityTypeSpot, Zone: "us-east-1a"}).String(), "spot/*/us-east-1a"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
