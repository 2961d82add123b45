package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
)

var launchTags = []ec2types.Tag{
	{Key: aws.String("eks:eks-cluster-name"), Value: aws.String("prod")},
	{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")},
	{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")},
	{Key: aws.String("kubernetes.io/cluster/prod"), Value: aws.String("owned")},
	{Key: aws.String("nodewright.dev/owner"), Value: aws.String("prod")},
	{Key: aws.String("team"), Value: aws.String("platform")},
}

func override(instanceType, zone, subnet string, price float64) ec2types.FleetLaunchTemplateOverridesRequest {
	return ec2types.FleetLaunchTemplateOverridesRequest{
		InstanceType: ec2types.InstanceType(instanceType), AvailabilityZone: aws.String(zone), SubnetId: aws.String(subnet),
		ImageId: aws.String("ami-123"), Priority: aws.Float64(price),
	}
}

// TestLaunchRequestShape asserts the exact CreateFleetInput EC2 receives.
func TestLaunchRequestShape(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	claim := nodeClaim(req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b"))
	r := request(ec2api, claim, instanceType("m5.xlarge", 4, 0.192, 0.08), instanceType("m5.large", 2, 0.096, 0.04))
	r.NodeClass.Spec.Context = aws.String("ctx-1")
	if _, err := fleet.New(ec2api).Launch(t.Context(), r); err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	want := &ec2.CreateFleetInput{
		Type:        ec2types.FleetTypeInstant,
		ClientToken: aws.String(fleet.ClientToken(claim)),
		Context:     aws.String("ctx-1"),
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand,
		},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: aws.String("nodewright/test-on-demand"), Version: aws.String("$Latest"),
			},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{
				override("m5.large", "us-east-1a", "subnet-a2", 0.096),
				override("m5.large", "us-east-1b", "subnet-b1", 0.096),
				override("m5.xlarge", "us-east-1a", "subnet-a2", 0.192),
				override("m5.xlarge", "us-east-1b", "subnet-b1", 0.192),
			},
		}},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: launchTags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: launchTags},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: launchTags},
		},
	}
	ins := ec2api.On.CreateFleet.Inputs()
	if len(ins) != 1 {
		t.Fatalf("CreateFleet calls = %d, want 1", len(ins))
	}
	if diff := cmp.Diff(want, ins[0], sdkOpts); diff != "" {
		t.Errorf("CreateFleet input mismatch (-want +got):\n%s", diff)
	}
}

func TestLaunch(t *testing.T) {
	type want struct {
		capacityType string
		strategy     string
		overrides    []string
		instanceType string
		zone         string
	}
	tests := []struct {
		name  string
		claim *v1.NodeClaim
		types []*catalog.InstanceType
		setup func(*awstest.EC2)
		want  want
	}{
		{
			name:  "should launch spot with price-capacity-optimized when spot is allowed and available",
			claim: nodeClaim(),
			types: []*catalog.InstanceType{instanceType("m5.large", 2, 0.096, 0.04)},
			want: want{capacityType: "spot", strategy: "price-capacity-optimized", instanceType: "m5.large", zone: "us-east-1a",
				overrides: []string{"m5.large us-east-1a subnet-a2", "m5.large us-east-1b subnet-b1", "m5.large us-east-1c subnet-c1"}},
		},
		{
			name:  "should launch on-demand with lowest-price when the claim excludes spot",
			claim: nodeClaim(req(v1.LabelCapacityType, corev1.NodeSelectorOpNotIn, v1.CapacityTypeSpot)),
			types: []*catalog.InstanceType{instanceType("m5.large", 2, 0.096, 0.04)},
			want: want{capacityType: "on-demand", strategy: "lowest-price", instanceType: "m5.large", zone: "us-east-1a",
				overrides: []string{"m5.large us-east-1a subnet-a2", "m5.large us-east-1b subnet-b1", "m5.large us-east-1c subnet-c1"}},
		},
		{
			name:  "should fall back to on-demand when no spot offering is available",
			claim: nodeClaim(req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b")),
			types: []*catalog.InstanceType{instanceType("m5.large", 2, 0.096, 0.04, unavailableIn("us-east-1b", "spot"))},
			want: want{capacityType: "on-demand", strategy: "lowest-price", instanceType: "m5.large", zone: "us-east-1b",
				overrides: []string{"m5.large us-east-1b subnet-b1"}},
		},
		{
			name:  "should not offer spot priced above the cheapest on-demand offering",
			claim: nodeClaim(),
			types: []*catalog.InstanceType{
				instanceType("m5.large", 2, 0.096, 0.05),
				instanceType("c5.large", 2, 0.085, 0.03),
				instanceType("r5.large", 2, 0.126, 0.09),
			},
			want: want{capacityType: "spot", strategy: "price-capacity-optimized", instanceType: "c5.large", zone: "us-east-1a",
				overrides: []string{
					"c5.large us-east-1a subnet-a2", "c5.large us-east-1b subnet-b1", "c5.large us-east-1c subnet-c1",
					"m5.large us-east-1a subnet-a2", "m5.large us-east-1b subnet-b1", "m5.large us-east-1c subnet-c1",
				}},
		},
		{
			name:  "should not launch exotic instance types when others fit",
			claim: nodeClaim(req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c")),
			types: []*catalog.InstanceType{
				instanceType("g4dn.xlarge", 4, 0.05, 0, gpu),
				instanceType("m5.metal", 96, 0.06, 0),
				instanceType("m5.large", 2, 0.096, 0),
			},
			want: want{capacityType: "on-demand", strategy: "lowest-price", instanceType: "m5.large", zone: "us-east-1c",
				overrides: []string{"m5.large us-east-1c subnet-c1"}},
		},
		{
			name:  "should launch exotic instance types when nothing else fits",
			claim: nodeClaim(req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c")),
			types: []*catalog.InstanceType{instanceType("g4dn.xlarge", 4, 0.526, 0, gpu)},
			want: want{capacityType: "on-demand", strategy: "lowest-price", instanceType: "g4dn.xlarge", zone: "us-east-1c",
				overrides: []string{"g4dn.xlarge us-east-1c subnet-c1"}},
		},
		{
			name: "should skip instance types whose allocatable cannot hold the requests",
			claim: func() *v1.NodeClaim {
				c := nodeClaim(req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c"))
				c.Spec.Resources.Requests[corev1.ResourceCPU] = *resourceQuantity("3")
				return c
			}(),
			types: []*catalog.InstanceType{instanceType("m5.large", 2, 0.096, 0), instanceType("m5.xlarge", 4, 0.192, 0)},
			want: want{capacityType: "on-demand", strategy: "lowest-price", instanceType: "m5.xlarge", zone: "us-east-1c",
				overrides: []string{"m5.xlarge us-east-1c subnet-c1"}},
		},
		{
			name:  "should skip instance types the claim's requirements exclude",
			claim: nodeClaim(req(v1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.xlarge"), req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c")),
			types: []*catalog.InstanceType{instanceType("m5.large", 2, 0.096, 0), instanceType("m5.xlarge", 4, 0.192, 0)},
			want: want{capacityType: "on-demand", strategy: "lowest-price", instanceType: "m5.xlarge", zone: "us-east-1c",
				overrides: []string{"m5.xlarge us-east-1c subnet-c1"}},
		},
		{
			name:  "should launch in the next cheapest override when one pool has insufficient capacity",
			claim: nodeClaim(req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeSpot), req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a")),
			types: []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03), instanceType("m5.large", 2, 0.096, 0.04)},
			setup: func(e *awstest.EC2) {
				e.SetUnavailable(false, awstest.Pool{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "spot"})
			},
			want: want{capacityType: "spot", strategy: "price-capacity-optimized", instanceType: "m5.large", zone: "us-east-1a",
				overrides: []string{"c5.large us-east-1a subnet-a2", "m5.large us-east-1a subnet-a2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ec2api := awstest.NewEC2(t)
			if tt.setup != nil {
				tt.setup(ec2api)
			}
			res, err := fleet.New(ec2api).Launch(t.Context(), request(ec2api, tt.claim, tt.types...))
			if err != nil {
				t.Fatalf("Launch() error = %v", err)
			}
			in := ec2api.On.CreateFleet.Inputs()[0]
			got := want{
				capacityType: string(in.TargetCapacitySpecification.DefaultTargetCapacityType),
				overrides:    overrideKeys(t, ec2api),
				instanceType: res.Instance.InstanceType,
				zone:         res.Instance.Zone,
			}
			if in.SpotOptions != nil {
				got.strategy = string(in.SpotOptions.AllocationStrategy)
			}
			if in.OnDemandOptions != nil {
				if got.strategy != "" {
					t.Errorf("both spot and on-demand options set")
				}
				got.strategy = string(in.OnDemandOptions.AllocationStrategy)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Launch() mismatch (-want +got):\n%s", diff)
			}
			if res.CapacityType != tt.want.capacityType || res.Instance.CapacityType != tt.want.capacityType {
				t.Errorf("Result capacity type = %q, instance %q, want %q", res.CapacityType, res.Instance.CapacityType, tt.want.capacityType)
			}
		})
	}
}

func TestLaunchCapsOverridesAtSixtyCheapestTypesAndOneSubnetPerZone(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	var types []*catalog.InstanceType
	for i := range 100 {
		// Declared from most to least expensive, so order must come from price.
		types = append(types, instanceType(fmt.Sprintf("m5.t%03d", i), 2, 1.0-float64(i)/1000, 0))
	}
	res, err := fleet.New(ec2api).Launch(t.Context(), request(ec2api, nodeClaim(), types...))
	if err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	if len(res.InstanceTypes) != fleet.MaxInstanceTypes {
		t.Fatalf("instance types = %d, want %d", len(res.InstanceTypes), fleet.MaxInstanceTypes)
	}
	if res.InstanceTypes[0] != "m5.t099" || res.InstanceTypes[59] != "m5.t040" {
		t.Errorf("instance types run %s..%s, want the 60 cheapest m5.t099..m5.t040", res.InstanceTypes[0], res.InstanceTypes[59])
	}
	keys := overrideKeys(t, ec2api)
	if len(keys) != 60*3 {
		t.Errorf("overrides = %d, want 60 types x 3 zones", len(keys))
	}
	typesSeen, subnetPerZone := map[string]bool{}, map[string]map[string]bool{}
	for _, k := range keys {
		f := strings.Fields(k)
		typesSeen[f[0]] = true
		if subnetPerZone[f[1]] == nil {
			subnetPerZone[f[1]] = map[string]bool{}
		}
		subnetPerZone[f[1]][f[2]] = true
	}
	if len(typesSeen) > fleet.MaxInstanceTypes {
		t.Errorf("distinct override types = %d, want <= 60", len(typesSeen))
	}
	want := map[string]map[string]bool{"us-east-1a": {"subnet-a2": true}, "us-east-1b": {"subnet-b1": true}, "us-east-1c": {"subnet-c1": true}}
	if diff := cmp.Diff(want, subnetPerZone); diff != "" {
		t.Errorf("subnets per zone mismatch (-want +got):\n%s", diff)
	}
}

func TestLaunchTruncationPreservesMinValues(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	var types []*catalog.InstanceType
	for i := range 70 {
		types = append(types, instanceType(fmt.Sprintf("m5.t%03d", i), 2, 0.1+float64(i)/1000, 0))
	}
	// The only other families are the most expensive.
	types = append(types, instanceType("c5.large", 2, 5, 0), instanceType("r5.large", 2, 6, 0), instanceType("x1.large", 2, 7, 0))
	minValues := 3
	claim := nodeClaim(v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpExists, MinValues: &minValues})
	res, err := fleet.New(ec2api).Launch(t.Context(), request(ec2api, claim, types...))
	if err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	if len(res.InstanceTypes) != fleet.MaxInstanceTypes {
		t.Fatalf("instance types = %d, want %d", len(res.InstanceTypes), fleet.MaxInstanceTypes)
	}
	families := map[string]bool{}
	for _, name := range res.InstanceTypes {
		families[strings.Split(name, ".")[0]] = true
	}
	if len(families) < minValues {
		t.Errorf("families = %v, want at least %d", families, minValues)
	}
	// The two cheapest types of new families join 58 m5 types, in price
	// order; the fourth family is not needed.
	if diff := cmp.Diff([]string{"m5.t057", "c5.large", "r5.large"}, res.InstanceTypes[57:]); diff != "" {
		t.Errorf("most expensive types mismatch (-want +got):\n%s", diff)
	}
}

func TestLaunchClientTokenIsStableAcrossRetries(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	claim := nodeClaim()
	c := fleet.New(ec2api)
	types := []*catalog.InstanceType{instanceType("m5.large", 2, 0.096, 0.04)}
	first, err := c.Launch(t.Context(), request(ec2api, claim, types...))
	if err != nil {
		t.Fatalf("first Launch() error = %v", err)
	}
	retry, err := c.Launch(t.Context(), request(ec2api, claim, types...))
	if err != nil {
		t.Fatalf("retried Launch() error = %v", err)
	}
	ins := ec2api.On.CreateFleet.Inputs()
	if len(ins) != 2 || *ins[0].ClientToken != *ins[1].ClientToken {
		t.Fatalf("client tokens differ across retries")
	}
	if first.Instance.ID != retry.Instance.ID {
		t.Errorf("retry launched %s, first %s: want the same instance", retry.Instance.ID, first.Instance.ID)
	}
	if n := len(ec2api.Instances()); n != 1 {
		t.Errorf("instances = %d, want 1", n)
	}
	other := nodeClaim()
	other.UID = "8d3c2f5e-0000-4000-8000-000000000002"
	if _, err := c.Launch(t.Context(), request(ec2api, other, types...)); err != nil {
		t.Fatalf("Launch() of another claim error = %v", err)
	}
	if n := len(ec2api.Instances()); n != 2 {
		t.Errorf("instances after a second claim = %d, want 2", n)
	}
}

func TestClientToken(t *testing.T) {
	a, b := nodeClaim(), nodeClaim()
	b.UID = "other"
	noUID := nodeClaim()
	noUID.UID = ""
	for _, c := range []*v1.NodeClaim{a, b, noUID} {
		tok := fleet.ClientToken(c)
		if len(tok) > 64 || strings.Trim(tok, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			t.Errorf("ClientToken() = %q: want <= 64 lower-case ASCII characters", tok)
		}
	}
	if fleet.ClientToken(a) == fleet.ClientToken(b) || fleet.ClientToken(a) == fleet.ClientToken(noUID) {
		t.Error("different claims share a client token")
	}
	if fleet.ClientToken(a) != fleet.ClientToken(nodeClaim()) {
		t.Error("the same claim got two client tokens")
	}
}

func TestLaunchOmitsContextWhenMinValuesWereRelaxed(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	claim := nodeClaim()
	claim.Annotations = map[string]string{v1.AnnotationNodeClaimMinValuesRelaxed: "true"}
	r := request(ec2api, claim, instanceType("m5.large", 2, 0.096, 0.04))
	r.NodeClass.Spec.Context = aws.String("ctx-1")
	if _, err := fleet.New(ec2api).Launch(t.Context(), r); err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	if got := ec2api.On.CreateFleet.Inputs()[0].Context; got != nil {
		t.Errorf("Context = %q, want none", *got)
	}
}

func TestLaunchFoldsCapacityErrors(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	ec2api.SetUnavailable(false,
		awstest.Pool{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "spot"},
		awstest.Pool{InstanceType: "c5.large", Zone: "us-east-1b", CapacityType: "spot"},
	)
	claim := nodeClaim(req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b"))
	res, err := fleet.New(ec2api).Launch(t.Context(), request(ec2api, claim, instanceType("c5.large", 2, 0.085, 0.03), instanceType("m5.large", 2, 0.096, 0.04)))
	if err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	want := []launch.UnavailableOffering{
		{OfferingKey: catalog.OfferingKey{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "spot"}, Code: "InsufficientInstanceCapacity", SubnetID: "subnet-a2"},
		{OfferingKey: catalog.OfferingKey{InstanceType: "c5.large", Zone: "us-east-1b", CapacityType: "spot"}, Code: "InsufficientInstanceCapacity", SubnetID: "subnet-b1"},
	}
	if diff := cmp.Diff(want, res.Unavailable); diff != "" {
		t.Errorf("Unavailable mismatch (-want +got):\n%s", diff)
	}
	if res.Instance.InstanceType != "m5.large" || res.Instance.ProviderID() != "aws:///us-east-1a/"+res.Instance.ID {
		t.Errorf("instance = %+v, want m5.large in us-east-1a", res.Instance)
	}
}

func TestLaunchErrors(t *testing.T) {
	only := func(e *awstest.EC2, pools ...awstest.Pool) { e.SetUnavailable(false, pools...) }
	tests := []struct {
		name            string
		claim           *v1.NodeClaim
		types           []*catalog.InstanceType
		setup           func(*awstest.EC2)
		mutate          func(*fleet.Request)
		wantICE         bool
		wantNoOffering  bool
		wantOfferings   []launch.UnavailableOffering
		wantClass       awserr.Class
		wantCode        string
		wantFleetCalls  int
		wantMsgContains string
	}{
		{
			name:  "should return an insufficient capacity error when every override has insufficient capacity",
			claim: nodeClaim(req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeSpot), req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a")),
			types: []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			setup: func(e *awstest.EC2) {
				only(e, awstest.Pool{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "spot"})
			},
			wantICE:        true,
			wantOfferings:  []launch.UnavailableOffering{{OfferingKey: catalog.OfferingKey{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "spot"}, Code: "InsufficientInstanceCapacity", SubnetID: "subnet-a2"}},
			wantClass:      awserr.Unfulfillable,
			wantCode:       "InsufficientInstanceCapacity",
			wantFleetCalls: 1,
		},
		{
			name:           "should not call EC2 when no offering is compatible",
			claim:          nodeClaim(req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1d")),
			types:          []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			wantICE:        true,
			wantNoOffering: true,
		},
		{
			name:           "should not launch in a zone without a subnet",
			claim:          nodeClaim(),
			types:          []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			mutate:         func(r *fleet.Request) { r.Subnets = nil },
			wantICE:        true,
			wantNoOffering: true,
		},
		{
			name:           "should not launch offerings marked unavailable",
			claim:          nodeClaim(req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a")),
			types:          []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03, unavailableIn("us-east-1a", "spot"), unavailableIn("us-east-1a", "on-demand"))},
			wantICE:        true,
			wantNoOffering: true,
		},
		{
			name:  "should mark every spot offering unavailable when the spot service-linked role is missing",
			claim: nodeClaim(req(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b")),
			types: []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			setup: func(e *awstest.EC2) {
				e.On.CreateFleet.Output = &ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{{
					ErrorCode: aws.String(awserr.CodeServiceLinkedRoleCreationNotPermitted), ErrorMessage: aws.String("no role"), Lifecycle: ec2types.InstanceLifecycleSpot,
				}}}
			},
			wantICE: true,
			wantOfferings: []launch.UnavailableOffering{
				{OfferingKey: catalog.OfferingKey{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "spot"}, Code: awserr.CodeServiceLinkedRoleCreationNotPermitted, SubnetID: "subnet-a2"},
				{OfferingKey: catalog.OfferingKey{InstanceType: "c5.large", Zone: "us-east-1b", CapacityType: "spot"}, Code: awserr.CodeServiceLinkedRoleCreationNotPermitted, SubnetID: "subnet-b1"},
			},
			wantFleetCalls: 1,
		},
		{
			name:  "should return a launch template still missing after the one retry, classified by code",
			claim: nodeClaim(),
			types: []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			mutate: func(r *fleet.Request) {
				r.Templates = fleet.TemplateFunc(func(_ context.Context, tr fleet.TemplateRequest) ([]launch.Template, error) {
					return []launch.Template{{Name: "nodewright/gone", ImageID: "ami-1", InstanceTypes: []string{"c5.large"}}}, nil
				})
			},
			wantClass:      awserr.NotFound,
			wantCode:       awserr.CodeLaunchTemplateNameNotFound,
			wantFleetCalls: 2,
		},
		{
			name:  "should return a throttled CreateFleet call",
			claim: nodeClaim(),
			types: []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			setup: func(e *awstest.EC2) {
				e.On.CreateFleet.Err = awstest.APIError(awserr.CodeRequestLimitExceeded, "slow down")
			},
			wantClass:      awserr.Throttled,
			wantCode:       awserr.CodeRequestLimitExceeded,
			wantFleetCalls: 1,
		},
		{
			name:            "should reject restricted node class tags",
			claim:           nodeClaim(),
			types:           []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			mutate:          func(r *fleet.Request) { r.NodeClass.Spec.Tags = map[string]string{"karpenter.sh/nodepool": "x"} },
			wantMsgContains: "restricted",
		},
		{
			name:  "should fail when no launch template serves the types",
			claim: nodeClaim(),
			types: []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			mutate: func(r *fleet.Request) {
				r.Templates = fleet.TemplateFunc(func(context.Context, fleet.TemplateRequest) ([]launch.Template, error) { return nil, nil })
			},
			wantMsgContains: "none serves",
		},
		{
			name:            "should fail without a cluster name",
			claim:           nodeClaim(),
			types:           []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			mutate:          func(r *fleet.Request) { r.ClusterName = "" },
			wantMsgContains: "cluster name",
		},
		{
			name:            "should fail without a node claim",
			types:           []*catalog.InstanceType{instanceType("c5.large", 2, 0.085, 0.03)},
			wantMsgContains: "nodeclaim: nil",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ec2api := awstest.NewEC2(t)
			if tt.setup != nil {
				tt.setup(ec2api)
			}
			r := request(ec2api, tt.claim, tt.types...)
			if tt.mutate != nil {
				tt.mutate(&r)
			}
			res, err := fleet.New(ec2api).Launch(t.Context(), r)
			if err == nil {
				t.Fatalf("Launch() = %+v, want an error", res.Instance)
			}
			var ice *launch.InsufficientCapacityError
			if got := errors.As(err, &ice); got != tt.wantICE {
				t.Fatalf("Launch() error = %v; insufficient capacity = %v, want %v", err, got, tt.wantICE)
			}
			if tt.wantICE {
				if diff := cmp.Diff(tt.wantOfferings, ice.Offerings); diff != "" {
					t.Errorf("InsufficientCapacityError.Offerings mismatch (-want +got):\n%s", diff)
				}
				if got := errors.Is(err, launch.ErrNoCompatibleOffering); got != tt.wantNoOffering {
					t.Errorf("errors.Is(ErrNoCompatibleOffering) = %v, want %v", got, tt.wantNoOffering)
				}
			}
			if tt.wantCode != "" {
				if got := awserr.Code(err); got != tt.wantCode {
					t.Errorf("awserr.Code() = %q, want %q", got, tt.wantCode)
				}
				if got := awserr.Classify(err); got != tt.wantClass {
					t.Errorf("awserr.Classify() = %v, want %v", got, tt.wantClass)
				}
			}
			if tt.wantMsgContains != "" && !strings.Contains(err.Error(), tt.wantMsgContains) {
				t.Errorf("Launch() error = %q, want it to mention %q", err, tt.wantMsgContains)
			}
			if got := ec2api.On.CreateFleet.Count(); got != tt.wantFleetCalls {
				t.Errorf("CreateFleet calls = %d, want %d", got, tt.wantFleetCalls)
			}
			if n := len(ec2api.Instances()); n != 0 {
				t.Errorf("instances = %d, want none", n)
			}
		})
	}
}

func TestLaunchReservedCapacityFirst(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	reserved := func(it *catalog.InstanceType) {
		it.Offerings = append(it.Offerings, catalog.Offering{Zone: "us-east-1b", CapacityType: v1.CapacityTypeReserved, Price: 0.0001, Available: true, ReservationID: "cr-1"})
	}
	tmpl := &templates{ec2: ec2api}
	r := request(ec2api, nodeClaim(), instanceType("c5.large", 2, 0.085, 0.03), instanceType("m5.large", 2, 0.096, 0.04, reserved))
	r.Templates = tmpl
	res, err := fleet.New(ec2api).Launch(t.Context(), r)
	if err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	if diff := cmp.Diff([]string{"m5.large us-east-1b subnet-b1"}, overrideKeys(t, ec2api)); diff != "" {
		t.Errorf("overrides mismatch (-want +got):\n%s", diff)
	}
	if len(tmpl.requests) != 1 || tmpl.requests[0].ReservationID != "cr-1" || tmpl.requests[0].CapacityType != v1.CapacityTypeReserved {
		t.Errorf("template requests = %+v, want one for reservation cr-1", tmpl.requests)
	}
	if res.Instance.CapacityType != v1.CapacityTypeReserved || res.Instance.ReservationID != "cr-1" {
		t.Errorf("instance = %+v, want reserved in cr-1", res.Instance)
	}
}

func TestLaunchCapacityBlockAsCapacityBlock(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	reserved := func(it *catalog.InstanceType) {
		it.Offerings = append(it.Offerings,
			catalog.Offering{Zone: "us-east-1b", CapacityType: v1.CapacityTypeReserved, Price: 0.00001, Available: true, ReservationID: "cr-block", ReservationType: v1.ReservationTypeCapacityBlock},
			catalog.Offering{Zone: "us-east-1a", CapacityType: v1.CapacityTypeReserved, Price: 0.00002, Available: true, ReservationID: "cr-odcr", ReservationType: v1.ReservationTypeDefault})
	}
	r := request(ec2api, nodeClaim(), instanceType("m5.large", 2, 0.096, 0.04, reserved))
	tmpl := &templates{ec2: ec2api}
	r.Templates = tmpl
	res, err := fleet.New(ec2api).Launch(t.Context(), r)
	if err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	in := ec2api.On.CreateFleet.Inputs()[0]
	if got := in.TargetCapacitySpecification.DefaultTargetCapacityType; got != ec2types.DefaultTargetCapacityTypeCapacityBlock || in.OnDemandOptions != nil {
		t.Errorf("DefaultTargetCapacityType = %q, OnDemandOptions %+v; want capacity-block without on-demand options", got, in.OnDemandOptions)
	}
	// The templates are asked for the block's type: they set the market
	// type capacity-block, which EC2 requires.
	want := []fleet.TemplateRequest{{CapacityType: v1.CapacityTypeReserved, ReservationID: "cr-block", ReservationType: v1.ReservationTypeCapacityBlock, Tenancy: "default"}}
	if diff := cmp.Diff(want, tmpl.requests, cmpopts.IgnoreFields(fleet.TemplateRequest{}, "InstanceTypes")); diff != "" {
		t.Errorf("template requests mismatch (-want +got):\n%s", diff)
	}
	if i := res.Instance; i.ReservationID != "cr-block" || i.ReservationType != v1.ReservationTypeCapacityBlock {
		t.Errorf("instance reservation = %q %q, want cr-block capacity-block", i.ReservationID, i.ReservationType)
	}
	// The ODCR is another kind of reservation: not in the same fleet.
	if diff := cmp.Diff([]string{"m5.large us-east-1b subnet-b1"}, overrideKeys(t, ec2api)); diff != "" {
		t.Errorf("overrides mismatch (-want +got):\n%s", diff)
	}
}

func TestLaunchInterruptibleReservationAsReservedCapacity(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	reserved := func(it *catalog.InstanceType) {
		it.Offerings = append(it.Offerings,
			catalog.Offering{Zone: "us-east-1b", CapacityType: v1.CapacityTypeReserved, Price: 0.00001, Available: true, ReservationID: "cr-int", ReservationType: v1.ReservationTypeDefault, Interruptible: true},
			catalog.Offering{Zone: "us-east-1a", CapacityType: v1.CapacityTypeReserved, Price: 0.00002, Available: true, ReservationID: "cr-odcr", ReservationType: v1.ReservationTypeDefault})
	}
	r := request(ec2api, nodeClaim(), instanceType("m5.large", 2, 0.096, 0.04, reserved))
	tmpl := &templates{ec2: ec2api}
	r.Templates = tmpl
	res, err := fleet.New(ec2api).Launch(t.Context(), r)
	if err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	in := ec2api.On.CreateFleet.Inputs()[0]
	if got := in.TargetCapacitySpecification.DefaultTargetCapacityType; got != ec2types.DefaultTargetCapacityTypeReservedCapacity {
		t.Errorf("DefaultTargetCapacityType = %q, want reserved-capacity", got)
	}
	wantOpts := &ec2types.ReservedCapacityOptionsRequest{ReservationTypes: []ec2types.FleetReservationType{ec2types.FleetReservationTypeInterruptibleCapacityReservation}}
	if diff := cmp.Diff(wantOpts, in.ReservedCapacityOptions, cmpopts.IgnoreUnexported(ec2types.ReservedCapacityOptionsRequest{})); diff != "" {
		t.Errorf("ReservedCapacityOptions mismatch (-want +got):\n%s", diff)
	}
	// An interruptible reservation and an ODCR are different kinds: one
	// fleet holds one.
	if diff := cmp.Diff([]string{"m5.large us-east-1b subnet-b1"}, overrideKeys(t, ec2api)); diff != "" {
		t.Errorf("overrides mismatch (-want +got):\n%s", diff)
	}
	if len(tmpl.requests) != 1 || tmpl.requests[0].ReservationID != "cr-int" || !tmpl.requests[0].ReservationInterruptible {
		t.Errorf("template requests = %+v, want one for interruptible cr-int", tmpl.requests)
	}
	if res.Instance.ReservationID != "cr-int" || res.Instance.ReservationType != v1.ReservationTypeDefault {
		t.Errorf("instance = %+v, want one in reservation cr-int of type default", res.Instance)
	}
}

func resourceQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestLaunchTenancyIsDedicatedOnlyWhenTheClaimAllowsOnlyDedicated(t *testing.T) {
	for _, tc := range []struct {
		name string
		reqs []v1.NodeSelectorRequirementWithMinValues
		want string
	}{
		{"no tenancy requirement", nil, "default"},
		{"default or dedicated", []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceTenancy, corev1.NodeSelectorOpIn, "default", "dedicated")}, "default"},
		{"dedicated only", []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceTenancy, corev1.NodeSelectorOpIn, "dedicated")}, "dedicated"},
		{"not default", []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceTenancy, corev1.NodeSelectorOpNotIn, "default")}, "dedicated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec2api := awstest.NewEC2(t)
			r := request(ec2api, nodeClaim(tc.reqs...), instanceType("m5.large", 2, 0.096, 0.04))
			res, err := fleet.New(ec2api).Launch(t.Context(), r)
			if err != nil {
				t.Fatalf("Launch() error = %v", err)
			}
			reqs := r.Templates.(*templates).requests
			if len(reqs) != 1 || reqs[0].Tenancy != tc.want {
				t.Errorf("template requests = %+v; want one with Tenancy %q", reqs, tc.want)
			}
			if res.Instance.Tenancy != tc.want {
				t.Errorf("Instance.Tenancy = %q, want %q", res.Instance.Tenancy, tc.want)
			}
		})
	}
}
