package catalog_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

func TestResolveReservedOfferings(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	nc := nodeClass(subnets("us-east-1a", "us-east-1b"), func(nc *v1.EC2NodeClass) {
		nc.Status.CapacityReservations = []v1.CapacityReservation{
			{ID: "cr-odcr", AvailabilityZone: "us-east-1a", InstanceType: "m5.large", OwnerID: "123456789012", ReservationType: v1.ReservationTypeDefault, State: v1.ReservationStateActive},
			{ID: "cr-full", AvailabilityZone: "us-east-1b", InstanceType: "m5.large", OwnerID: "123456789012", Interruptible: true, State: v1.ReservationStateActive},
			{ID: "cr-block", AvailabilityZone: "us-east-1b", InstanceType: "m5.large", OwnerID: "123456789012", ReservationType: v1.ReservationTypeCapacityBlock,
				EndTime: &metav1.Time{Time: now.Add(2 * time.Hour)}, State: v1.ReservationStateActive},
			// Ends in 30 minutes: expiring at now, though recorded active.
			{ID: "cr-ending", AvailabilityZone: "us-east-1a", InstanceType: "m5.large", OwnerID: "123456789012", ReservationType: v1.ReservationTypeCapacityBlock,
				EndTime: &metav1.Time{Time: now.Add(30 * time.Minute)}, State: v1.ReservationStateActive},
			{ID: "cr-otherzone", AvailabilityZone: "us-east-1c", InstanceType: "m5.large", OwnerID: "123456789012", State: v1.ReservationStateActive},
			{ID: "cr-othertype", AvailabilityZone: "us-east-1a", InstanceType: "c5.large", OwnerID: "123456789012", State: v1.ReservationStateActive},
		}
	})
	opts := catalog.Options{Region: "us-east-1", Now: now, ReservationCapacity: map[string]int{"cr-odcr": 2, "cr-full": 0, "cr-block": 4, "cr-ending": 1, "cr-otherzone": 3}}
	it := resolveType(t, nc, opts, "m5.large")
	var reserved catalog.Offerings
	for _, o := range it.Offerings {
		if o.CapacityType == v1.CapacityTypeReserved {
			reserved = append(reserved, o)
		}
	}
	price := 0.096 / catalog.ReservedPriceDivisor
	want := catalog.Offerings{
		{Zone: "us-east-1a", ZoneID: "use1-az1", CapacityType: "reserved", Price: price, Available: true, ReservationID: "cr-odcr", ReservationCapacity: 2, ReservationType: "default"},
		{Zone: "us-east-1b", ZoneID: "use1-az2", CapacityType: "reserved", Price: price, Available: false, ReservationID: "cr-full", ReservationType: "default", Interruptible: true},
		{Zone: "us-east-1b", ZoneID: "use1-az2", CapacityType: "reserved", Price: price, Available: true, ReservationID: "cr-block", ReservationCapacity: 4, ReservationType: "capacity-block"},
	}
	if diff := cmp.Diff(want, reserved); diff != "" {
		t.Errorf("reserved offerings (-want +got):\n%s", diff)
	}
	for _, o := range reserved {
		if o.Price <= 0 || o.Price >= 0.096/1000 {
			t.Errorf("reserved price %v: want near zero, below every on-demand price", o.Price)
		}
	}
	// Without counts (a CLI reading manifests) nothing reserved is
	// available; with opts.Unavailable the reserved pool is marked.
	opts.ReservationCapacity = nil
	for _, o := range resolveType(t, nc, opts, "m5.large").Offerings {
		if o.CapacityType == v1.CapacityTypeReserved && o.Available {
			t.Errorf("reservation %s available without a count", o.ReservationID)
		}
	}
	opts.ReservationCapacity = map[string]int{"cr-odcr": 2}
	opts.Unavailable = func(instanceType, zone, capacityType string) bool { return capacityType == v1.CapacityTypeReserved }
	for _, o := range resolveType(t, nc, opts, "m5.large").Offerings {
		if o.CapacityType == v1.CapacityTypeReserved && o.Available {
			t.Errorf("reservation %s available though marked unavailable", o.ReservationID)
		}
	}
}
