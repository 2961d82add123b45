package ddbstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func TestUnavailableSubnets(t *testing.T) {
	ctx := context.Background()
	const code = "InsufficientFreeAddressesInSubnet"
	ttl := 3 * time.Minute
	type mark struct {
		subnet string
		at     time.Time
	}
	tests := []struct {
		name  string
		marks []mark
		now   time.Time
		want  []ddbstore.UnavailableSubnet
	}{
		{
			name:  "should list a subnet until its TTL",
			marks: []mark{{subnet: "subnet-a", at: t0}},
			now:   t0.Add(ttl - time.Millisecond),
			want:  []ddbstore.UnavailableSubnet{{SubnetID: "subnet-a", Reason: code, Until: t0.Add(ttl)}},
		},
		{
			name:  "should drop a subnet at its deadline even before DynamoDB deletes it",
			marks: []mark{{subnet: "subnet-a", at: t0}},
			now:   t0.Add(ttl),
			want:  []ddbstore.UnavailableSubnet{},
		},
		{
			name:  "should extend a subnet marked again and sort by subnet ID",
			marks: []mark{{subnet: "subnet-b", at: t0}, {subnet: "subnet-a", at: t0.Add(30 * time.Second)}, {subnet: "subnet-b", at: t0.Add(2 * time.Minute)}},
			now:   t0.Add(3*time.Minute + 10*time.Second),
			want: []ddbstore.UnavailableSubnet{
				{SubnetID: "subnet-a", Reason: code, Until: t0.Add(3*time.Minute + 30*time.Second)},
				{SubnetID: "subnet-b", Reason: code, Until: t0.Add(5 * time.Minute)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t, testCluster)
			for _, m := range tt.marks {
				if err := s.MarkSubnetUnavailable(ctx, m.subnet, code, m.at, ttl); err != nil {
					t.Fatalf("MarkSubnetUnavailable(%s) error = %v", m.subnet, err)
				}
			}
			if other, err := e.store(t, "other-cluster").ListUnavailableSubnets(ctx, tt.now); err != nil || len(other) != 0 {
				t.Errorf("another cluster's ListUnavailableSubnets() = %v, %v; want nothing", other, err)
			}
			if offerings, err := s.ListUnavailable(ctx, tt.now); err != nil || len(offerings) != 0 {
				t.Errorf("ListUnavailable() = %v, %v; want no offering from a subnet mark", offerings, err)
			}
			got, err := s.ListUnavailableSubnets(ctx, tt.now)
			if err != nil {
				t.Fatalf("ListUnavailableSubnets() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListUnavailableSubnets() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMarkSubnetUnavailableErrors(t *testing.T) {
	tests := []struct {
		name   string
		subnet string
		ttl    time.Duration
	}{
		{name: "should refuse an empty subnet ID", subnet: "", ttl: time.Minute},
		{name: "should refuse a subnet ID containing the key separator", subnet: "subnet#a", ttl: time.Minute},
		{name: "should refuse a zero TTL", subnet: "subnet-a", ttl: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			if err := s.MarkSubnetUnavailable(context.Background(), tt.subnet, "x", t0, tt.ttl); !errors.Is(err, ddbstore.ErrInvalid) {
				t.Errorf("MarkSubnetUnavailable() error = %v, want ErrInvalid", err)
			}
			if got, err := s.ListUnavailableSubnets(context.Background(), t0); err != nil || len(got) != 0 {
				t.Errorf("ListUnavailableSubnets() = %v, %v; want nothing stored", got, err)
			}
		})
	}
}
