package provisioning_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// subnets is the unavailable-subnets cache with TTLs.
type subnets struct {
	mu    sync.Mutex
	until map[string]time.Time
	marks []string
}

func (s *subnets) UnavailableSubnets(_ context.Context, now time.Time) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, until := range s.until {
		if until.After(now) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (s *subnets) MarkSubnetUnavailable(_ context.Context, id, code string, now time.Time, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[string]time.Time{}
	}
	s.until[id] = now.Add(ttl)
	s.marks = append(s.marks, id+" "+code+" "+now.Add(ttl).Format(time.RFC3339))
	return nil
}

// extraSubnet adds a subnet to what the fake resolver returns.
type extraSubnet struct {
	*resolver
	add []launch.Subnet
}

func (r extraSubnet) ResolveNodeClass(ctx context.Context, nc v1.EC2NodeClass) (provisioning.ResolvedNodeClass, error) {
	res, err := r.resolver.ResolveNodeClass(ctx, nc)
	res.Subnets = append(res.Subnets, r.add...)
	return res, err
}

func TestProvisionMarksSubnetsOutOfAddresses(t *testing.T) {
	full := &launch.InsufficientCapacityError{Reason: "subnet full", Offerings: []launch.UnavailableOffering{{
		OfferingKey: catalog.OfferingKey{CapacityType: v1.CapacityTypeOnDemand, InstanceType: "m5.large", Zone: "us-east-1a"},
		Code:        "InsufficientFreeAddressesInSubnet", SubnetID: "subnet-a",
	}}}
	tests := []struct {
		name string
		// extra subnets besides subnet-a (us-east-1a) and subnet-b
		// (us-east-1b).
		extra []launch.Subnet
		// at is when the second round runs.
		at              time.Duration
		wantUnavailable []string
		wantZoneA       bool
	}{
		{
			name:            "should leave the zone out while its only subnet is marked",
			at:              time.Minute,
			wantUnavailable: []string{"subnet-a"},
			wantZoneA:       false,
		},
		{
			name:            "should keep the zone while another subnet there has addresses",
			extra:           []launch.Subnet{{ID: "subnet-a2", Zone: "us-east-1a", ZoneID: "use1-az1", AvailableIPs: 10}},
			at:              time.Minute,
			wantUnavailable: []string{"subnet-a"},
			wantZoneA:       true,
		},
		{
			name:      "should use the subnet again after three minutes",
			at:        3 * time.Minute,
			wantZoneA: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := nodePool(t, "default", `
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}`)
			e := newEnv([]v1.NodePool{pool}, []v1.EC2NodeClass{nodeClass(t)})
			sc := &subnets{}
			p, err := provisioning.NewProvisioner(provisioning.ProvisionerPorts{
				Claims: e.store, Config: e.config, NodeClass: extraSubnet{resolver: e.resolver, add: tt.extra}, Cluster: e.cluster,
				Offerings: e.offerings, Batches: e.store, Launcher: e.ec2, Subnets: sc,
			}, provisioning.ProvisionerOptions{Cluster: testCluster, Region: testRegion, SpotPriceRatio: 0.35})
			if err != nil {
				t.Fatal(err)
			}
			e.ec2.errs = []error{full}
			if _, err := p.Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0); err != nil {
				t.Fatalf("first Provision() error = %v", err)
			}
			if diff := cmp.Diff([]string{"subnet-a InsufficientFreeAddressesInSubnet " + t0.Add(3*time.Minute).Format(time.RFC3339)}, sc.marks); diff != "" {
				t.Errorf("subnet marks mismatch (-want +got):\n%s", diff)
			}
			if len(e.offerings.marks) != 0 {
				t.Errorf("offering marks = %+v, want none for a full subnet", e.offerings.marks)
			}

			if _, err := p.Provision(t.Context(), podBatch("batch-2", podSummary("a", "1")), t0.Add(tt.at)); err != nil {
				t.Fatalf("second Provision() error = %v", err)
			}
			req := e.ec2.requests[len(e.ec2.requests)-1]
			var unavailable []string
			for _, s := range req.Subnets {
				if s.Unavailable {
					unavailable = append(unavailable, s.ID)
				}
			}
			if diff := cmp.Diff(tt.wantUnavailable, unavailable); diff != "" {
				t.Errorf("subnets marked in the launch request mismatch (-want +got):\n%s", diff)
			}
			zoneA := false
			for _, it := range req.InstanceTypes {
				for _, o := range it.Offerings {
					if o.Zone == "us-east-1a" && o.Available {
						zoneA = true
					}
				}
			}
			if zoneA != tt.wantZoneA {
				t.Errorf("us-east-1a offerings available = %v, want %v", zoneA, tt.wantZoneA)
			}
		})
	}
}
