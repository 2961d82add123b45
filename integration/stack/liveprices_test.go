package stack_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// liveSpotPool is a Spot-only NodePool over many c/m/r types, so that
// spot-to-spot consolidation has the 15 cheaper types Karpenter requires,
// consolidating as soon as it is cheaper.
const liveSpotPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: spot
spec:
  template:
    spec:
      requirements:
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ['c', 'm', 'r']
        - key: karpenter.sh/capacity-type
          operator: In
          values: ['spot']
        - key: kubernetes.io/arch
          operator: In
          values: ['amd64']
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: production
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
`

// launchedInstances returns the simulator's pending or running instances.
func launchedInstances(s *stack.Stack) []ec2sim.Instance {
	var out []ec2sim.Instance
	for _, in := range s.Sim.Instances() {
		if in.State == ec2sim.StatePending || in.State == ec2sim.StateRunning {
			out = append(out, in)
		}
	}
	return out
}

// aheadClock is time.Now moved ahead by Advance, shared by gc and the
// simulator (stack.Options.GCClock, SimClock).
type aheadClock struct{ d atomic.Int64 }

func (c *aheadClock) Now() time.Time          { return time.Now().Add(time.Duration(c.d.Load())) }
func (c *aheadClock) Advance(d time.Duration) { c.d.Add(int64(d)) }

// refreshEC2Data runs one gc pass and fails t unless it fetched and
// stored every part of the live EC2 data and cleaned nothing up (the
// scenario's nodes are registered and healthy: a cleanup would replace
// them for a reason other than the one under test).
func refreshEC2Data(t *testing.T, s *stack.Stack) {
	t.Helper()
	out, err := s.RunGC(t.Context())
	if err != nil {
		t.Fatalf("RunGC() error = %v", err)
	}
	if out.EC2Data == nil || out.EC2Data.Error != "" || !slices.Equal(out.EC2Data.Stored, catalog.Parts) {
		t.Fatalf("RunGC() EC2Data = %+v, want every part (%v) stored", out.EC2Data, catalog.Parts)
	}
	if len(out.Cleanups) != 0 {
		t.Fatalf("RunGC() Cleanups = %+v, want none", out.Cleanups)
	}
}

// assertOnlyOfferedPools fails t for any CreateFleet override in a zone
// that does not offer its type: the product must read the region's
// offerings, not assume every type everywhere.
func assertOnlyOfferedPools(t *testing.T, s *stack.Stack) {
	t.Helper()
	zones := subnetZones(s)
	for _, c := range s.Sim.CallsTo("CreateFleet") {
		for _, p := range fleetPools(c, zones) {
			if !s.Sim.Offered(p.InstanceType, p.Zone) {
				t.Errorf("CreateFleet asked for %s in %s, which the zone does not offer", p.InstanceType, p.Zone)
			}
		}
	}
}

// TestLivePricesAndOfferingsDriveLaunchAndSpotConsolidation runs the
// simulator's realistic ap-northeast-1 (a region the embedded price table
// lacks): the first launch is a type the chosen zone offers, at the
// simulator's price, in the zone the simulator made cheapest; after the
// simulator raises that pool's Spot price, the next evaluation's
// spot-to-spot consolidation replaces the node at the new prices; and no
// CreateFleet ever names a zone that does not offer the type.
func TestLivePricesAndOfferingsDriveLaunchAndSpotConsolidation(t *testing.T) {
	// This scenario needs its own stack: the package's other tests run the
	// uniform world in the default region, and this one needs the
	// realistic ap-northeast-1 with a clock shared by gc and the simulator
	// (one extra stack, no more).
	ahead := &aheadClock{}
	s := startStack(t, func(o *stack.Options) {
		o.Disruption = true
		o.Region = "ap-northeast-1"
		o.SimWorld = ec2sim.WorldRealistic
		o.GCClock = ahead.Now
		o.SimClock = ahead
		o.FeatureGates = "SpotToSpotConsolidation=true" // off by default, as in Karpenter
	})
	// The refresher runs first, as gc's schedule runs it: nothing is stored
	// yet, so every part is due and fetched from the simulator.
	refreshEC2Data(t, s)
	zones := s.Sim.Zones()
	// Make one zone the cheapest: cut every Spot pool there to a twentieth
	// of its price. A type's pools differ by a factor of two at most in
	// the realistic world, so every type the zone offers is cheapest
	// there, and the cheapest fitting pool is in this zone unless the
	// types it offers all cost twenty times one it lacks (halving only
	// some types left cheaper previous-generation types elsewhere).
	cheap := zones[len(zones)-1]
	for _, typ := range s.Sim.InstanceTypes() {
		if p, ok := s.Sim.Price(typ, cheap, v1.CapacityTypeSpot); ok && s.Sim.Offered(typ, cheap) {
			s.Sim.SetSpotPrice(typ, cheap, p/20)
		}
	}
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(t.Context(), []byte(liveSpotPool)); err != nil {
		t.Fatalf("Apply(spot NodePool) error = %v", err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(t.Context(), deployment("web", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var first ec2sim.Instance
	eventually(t, s, 3*time.Minute, "one Spot instance", func(context.Context, stack.Status) bool {
		ins := launchedInstances(s)
		if len(ins) != 1 {
			return false
		}
		first = ins[0]
		return true
	})
	if !s.Sim.Offered(first.InstanceType, first.Zone) {
		t.Fatalf("first launch %s in %s: the zone does not offer it", first.InstanceType, first.Zone)
	}
	if first.Zone != cheap {
		t.Errorf("first launch in %s, want %s, the zone the simulator made cheapest", first.Zone, cheap)
	}
	paid, _ := s.Sim.Price(first.InstanceType, first.Zone, v1.CapacityTypeSpot)
	for _, z := range zones {
		if other, ok := s.Sim.Price(first.InstanceType, z, v1.CapacityTypeSpot); ok && s.Sim.Offered(first.InstanceType, z) && other < paid {
			t.Errorf("%s costs %v in %s, less than the %v paid in %s", first.InstanceType, other, z, paid, first.Zone)
		}
	}

	// The class says where its data came from: every part live and fresh
	// (the informational EC2DataLive condition; Ready does not read it).
	eventually(t, s, time.Minute, "EC2NodeClass production EC2DataLive=True (Live)", func(context.Context, stack.Status) bool {
		var class v1.EC2NodeClassStatus
		readStatus(t, s, "ec2nodeclass", &class)
		for _, c := range class.Conditions {
			if c.Type == v1.ConditionTypeEC2DataLive {
				return c.Status == metav1.ConditionTrue && c.Reason == v1.ConditionReasonEC2DataLive
			}
		}
		return false
	})

	// gc's clock is about to jump ahead: the node must be registered
	// first, or gc would rightly replace it for not registering within
	// RegistrationTimeout, and the replacement would not be the
	// consolidation under test.
	eventually(t, s, 2*time.Minute, "the first instance's node registered", func(context.Context, stack.Status) bool {
		for _, n := range nodeList(t, s) {
			if _, id, err := v1.ParseProviderID(n.Spec.ProviderID); err == nil && id == first.ID {
				return n.Labels[v1.LabelRegistered] == "true"
			}
		}
		return false
	})
	// A Spot spike in the launched pool: ten times its price before the
	// cut (paid is a twentieth of it). Consolidation prices a replacement
	// type at its worst case, the most expensive offering the replacement
	// may launch as (Karpenter's filterByPrice), so a spot-to-spot move
	// needs 15 types whose dearest allowed pool, in any zone, is below
	// the candidate's price; a spike this size leaves dozens, and the
	// next evaluation replaces the node with one of them.
	raised := paid * 200
	s.Sim.SetSpotPrice(first.InstanceType, first.Zone, raised)
	// The stored Spot prices are minutes old: gc refetches them only once
	// they are RefreshInterval old. Run gc (and the simulator, whose now is
	// DescribeSpotPriceHistory's) that far ahead instead of waiting.
	ahead.Advance(catalog.RefreshInterval + time.Minute)
	refreshEC2Data(t, s)
	var second ec2sim.Instance
	eventually(t, s, 5*time.Minute, "spot-to-spot consolidation replacing the node", func(context.Context, stack.Status) bool {
		for _, in := range launchedInstances(s) {
			if in.ID != first.ID {
				second = in
			}
		}
		inst, ok := s.Sim.Instance(first.ID)
		return second.ID != "" && ok && inst.State != ec2sim.StateRunning
	})
	if n := startedExecutions(s, "consolidate-"); n != 1 {
		t.Errorf("%d consolidation executions, want the 1 that replaced the node (executions %+v)", n, s.Executions())
	}
	newPrice, _ := s.Sim.Price(second.InstanceType, second.Zone, v1.CapacityTypeSpot)
	if newPrice >= raised {
		t.Errorf("replacement %s in %s costs %v, not less than the raised %v", second.InstanceType, second.Zone, newPrice, raised)
	}
	if !s.Sim.Offered(second.InstanceType, second.Zone) {
		t.Errorf("replacement %s in %s: the zone does not offer it", second.InstanceType, second.Zone)
	}
	for _, z := range zones {
		if other, ok := s.Sim.Price(second.InstanceType, z, v1.CapacityTypeSpot); ok && s.Sim.Offered(second.InstanceType, z) && other < newPrice {
			t.Errorf("replacement %s costs %v in %s, less than the %v paid in %s", second.InstanceType, other, z, newPrice, second.Zone)
		}
	}
	assertOnlyOfferedPools(t, s)
}
