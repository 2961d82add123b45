package ddbstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/catalog"
)

func TestUnavailableOfferings(t *testing.T) {
	ctx := context.Background()
	spotC5 := catalog.OfferingKey{CapacityType: "spot", InstanceType: "c5.large", Zone: "us-east-1a"}
	odM5 := catalog.OfferingKey{CapacityType: "on-demand", InstanceType: "m5.large", Zone: "us-east-1b"}
	allSpot := catalog.OfferingKey{CapacityType: "spot"}
	ttl := catalog.UnavailableOfferingsTTL

	type mark struct {
		key    catalog.OfferingKey
		reason string
		at     time.Time
		ttl    time.Duration
	}
	tests := []struct {
		name  string
		marks []mark
		now   time.Time
		want  []ddbstore.UnavailableOffering
	}{
		{
			name:  "should list an offering marked unavailable until its TTL",
			marks: []mark{{key: spotC5, reason: "InsufficientInstanceCapacity", at: t0, ttl: ttl}},
			now:   t0.Add(ttl - time.Millisecond),
			want:  []ddbstore.UnavailableOffering{{OfferingKey: spotC5, Reason: "InsufficientInstanceCapacity", Until: t0.Add(ttl)}},
		},
		{
			name: "should keep a capacity reservation's mark apart from its type and zone's reserved offering",
			marks: []mark{
				{key: catalog.OfferingKey{CapacityType: "reserved", InstanceType: "m5.large", Zone: "us-east-1a", ReservationID: "cr-0a1"}, reason: "capacity_reservation_interrupted", at: t0, ttl: ttl},
				{key: catalog.OfferingKey{CapacityType: "reserved", InstanceType: "m5.large", Zone: "us-east-1a", ReservationID: "cr-0b2"}, reason: "capacity_reservation_interrupted", at: t0, ttl: ttl},
			},
			now: t0,
			want: []ddbstore.UnavailableOffering{
				{OfferingKey: catalog.OfferingKey{CapacityType: "reserved", InstanceType: "m5.large", Zone: "us-east-1a", ReservationID: "cr-0a1"}, Reason: "capacity_reservation_interrupted", Until: t0.Add(ttl)},
				{OfferingKey: catalog.OfferingKey{CapacityType: "reserved", InstanceType: "m5.large", Zone: "us-east-1a", ReservationID: "cr-0b2"}, Reason: "capacity_reservation_interrupted", Until: t0.Add(ttl)},
			},
		},
		{
			name:  "should drop an offering at its deadline even before DynamoDB deletes it",
			marks: []mark{{key: spotC5, at: t0, ttl: ttl}},
			now:   t0.Add(ttl),
			want:  []ddbstore.UnavailableOffering{},
		},
		{
			name: "should keep only the unexpired offerings, in key order",
			marks: []mark{
				{key: spotC5, reason: "InsufficientInstanceCapacity", at: t0, ttl: ttl},
				{key: odM5, reason: "InsufficientInstanceCapacity", at: t0.Add(2 * time.Minute), ttl: ttl},
				{key: allSpot, reason: "AuthFailure.ServiceLinkedRoleCreationNotPermitted", at: t0.Add(time.Minute), ttl: ttl},
			},
			now: t0.Add(3*time.Minute + time.Second),
			want: []ddbstore.UnavailableOffering{
				{OfferingKey: odM5, Reason: "InsufficientInstanceCapacity", Until: t0.Add(5 * time.Minute)},
				{OfferingKey: allSpot, Reason: "AuthFailure.ServiceLinkedRoleCreationNotPermitted", Until: t0.Add(4 * time.Minute)},
			},
		},
		{
			name: "should extend an offering marked again, with the latest reason",
			marks: []mark{
				{key: spotC5, reason: "InsufficientInstanceCapacity", at: t0, ttl: ttl},
				{key: spotC5, reason: "MaxSpotInstanceCountExceeded", at: t0.Add(2 * time.Minute), ttl: ttl},
			},
			now:  t0.Add(4 * time.Minute),
			want: []ddbstore.UnavailableOffering{{OfferingKey: spotC5, Reason: "MaxSpotInstanceCountExceeded", Until: t0.Add(5 * time.Minute)}},
		},
		{
			name:  "should keep millisecond precision",
			marks: []mark{{key: spotC5, at: t0.Add(1500 * time.Microsecond), ttl: time.Second}},
			now:   t0.Add(time.Second),
			want:  []ddbstore.UnavailableOffering{{OfferingKey: spotC5, Until: t0.Add(time.Second + time.Millisecond)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t, testCluster)
			for _, m := range tt.marks {
				if err := s.MarkUnavailable(ctx, m.key, m.reason, m.at, m.ttl); err != nil {
					t.Fatalf("MarkUnavailable(%+v) error = %v", m.key, err)
				}
			}
			other, err := e.store(t, "other-cluster").ListUnavailable(ctx, tt.now)
			if err != nil || len(other) != 0 {
				t.Errorf("another cluster's ListUnavailable() = %v, %v; want nothing", other, err)
			}
			got, err := s.ListUnavailable(ctx, tt.now)
			if err != nil {
				t.Fatalf("ListUnavailable() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListUnavailable() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMarkUnavailableErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		key  catalog.OfferingKey
		ttl  time.Duration
	}{
		{name: "should refuse an offering with no field set", key: catalog.OfferingKey{}, ttl: time.Minute},
		{name: "should refuse a literal wildcard", key: catalog.OfferingKey{CapacityType: "spot", Zone: "*"}, ttl: time.Minute},
		{name: "should refuse a field containing the key separator", key: catalog.OfferingKey{InstanceType: "c5#large"}, ttl: time.Minute},
		{name: "should refuse a zero TTL", key: catalog.OfferingKey{CapacityType: "spot"}, ttl: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			if err := s.MarkUnavailable(ctx, tt.key, "x", t0, tt.ttl); !errors.Is(err, ddbstore.ErrInvalid) {
				t.Errorf("MarkUnavailable() error = %v, want ErrInvalid", err)
			}
			got, err := s.ListUnavailable(ctx, t0)
			if err != nil || len(got) != 0 {
				t.Errorf("ListUnavailable() = %v, %v; want nothing stored", got, err)
			}
		})
	}
}
