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

func TestReservationsUnavailable(t *testing.T) {
	shared := &catalog.InstanceType{Name: "p5.48xlarge", Offerings: catalog.Offerings{
		{Zone: "us-east-1a", CapacityType: v1.CapacityTypeOnDemand, Price: 98, Available: true},
		{Zone: "us-east-1a", CapacityType: v1.CapacityTypeReserved, Price: 0.00001, Available: true, ReservationID: "cr-gone"},
		{Zone: "us-east-1a", CapacityType: v1.CapacityTypeReserved, Price: 0.00001, Available: true, ReservationID: "cr-kept"},
	}}
	other := &catalog.InstanceType{Name: "m5.large", Offerings: catalog.Offerings{{Zone: "us-east-1a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.096, Available: true}}}
	types := []*catalog.InstanceType{shared, other}
	keys := []catalog.OfferingKey{
		{CapacityType: v1.CapacityTypeReserved, InstanceType: "p5.48xlarge", Zone: "us-east-1a", ReservationID: "cr-gone"},
		{CapacityType: v1.CapacityTypeSpot},
	}
	got := catalog.ReservationsUnavailable(types, keys)
	var avail []bool
	for _, o := range got[0].Offerings {
		avail = append(avail, o.Available)
	}
	if want := []bool{true, false, true}; len(avail) != 3 || avail[0] != want[0] || avail[1] != want[1] || avail[2] != want[2] {
		t.Errorf("p5.48xlarge offerings available = %v, want %v (only cr-gone's offering marked)", avail, want)
	}
	if got[1] != other {
		t.Errorf("an instance type without the reservation was copied")
	}
	if !shared.Offerings[1].Available || types[0] != shared {
		t.Errorf("ReservationsUnavailable modified its input")
	}
	if f := catalog.UnavailableFunc(keys[:1]); f != nil && f("p5.48xlarge", "us-east-1a", v1.CapacityTypeReserved) {
		t.Errorf("UnavailableFunc applied a reservation's key to every reserved offering of its type and zone")
	}
	if got := catalog.ReservationsUnavailable(types, keys[1:]); &got[0] != &types[0] {
		t.Errorf("ReservationsUnavailable without reservation keys did not return types as is")
	}
}
