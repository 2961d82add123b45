package ec2sim_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/aws/awserr"
)

// Catalog on-demand prices (us-east-1) the cases below rely on:
// t3.large 0.0832 < c5.large 0.085 < m5.large 0.096; c6g.large (arm64) 0.068.

func TestCreateFleet(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(t *testing.T, e *env)
		input       func(t *testing.T, e *env) *ec2.CreateFleetInput
		want        []string // type/zone/lifecycle per instance
		wantErrors  []string // code type/zone/lifecycle
		wantEntries int      // len(Instances) when > 0
	}{
		{
			name: "on-demand lowest-price launches the cheapest override",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				return fleetInput("amd64", "on-demand", 1, []string{"m5.large", "c5.large", "t3.large"}, []string{e.subnets()["us-east-1a"]})
			},
			want: []string{"t3.large/us-east-1a/on-demand"},
		},
		{
			name:  "spot price-capacity-optimized launches the cheapest spot pool across zones",
			setup: func(t *testing.T, e *env) { e.sim.SetSpotPrice("c5.large", "us-east-1b", 0.02) },
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				sn := e.subnets()
				return fleetInput("amd64", "spot", 1, []string{"m5.large", "c5.large"}, []string{sn["us-east-1a"], sn["us-east-1b"], sn["us-east-1c"]})
			},
			want: []string{"c5.large/us-east-1b/spot"},
		},
		{
			name: "spot pools without a set price cost on-demand times the ratio and ties keep request order",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				sn := e.subnets()
				return fleetInput("amd64", "spot", 1, []string{"m5.large", "c5.large"}, []string{sn["us-east-1c"], sn["us-east-1a"]})
			},
			want: []string{"c5.large/us-east-1c/spot"},
		},
		{
			name: "prioritized on-demand follows Priority rather than price",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				in := fleetInput("amd64", "on-demand", 1, []string{"m5.large", "t3.large"}, []string{e.subnets()["us-east-1a"]})
				in.OnDemandOptions.AllocationStrategy = ec2types.FleetOnDemandAllocationStrategyPrioritized
				in.LaunchTemplateConfigs[0].Overrides[0].Priority = aws.Float64(1)
				in.LaunchTemplateConfigs[0].Overrides[1].Priority = aws.Float64(2)
				return in
			},
			want: []string{"m5.large/us-east-1a/on-demand"},
		},
		{
			name: "several instances of one call share the cheapest pool and one Instances entry",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				return fleetInput("amd64", "on-demand", 3, []string{"m5.large", "t3.large"}, []string{e.subnets()["us-east-1a"]})
			},
			want:        []string{"t3.large/us-east-1a/on-demand", "t3.large/us-east-1a/on-demand", "t3.large/us-east-1a/on-demand"},
			wantEntries: 1,
		},
		{
			name: "explicit on-demand and spot target capacities split the launch",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				in := fleetInput("amd64", "spot", 2, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]})
				in.TargetCapacitySpecification.OnDemandTargetCapacity = aws.Int32(1)
				return in
			},
			want: []string{"c5.large/us-east-1a/on-demand", "c5.large/us-east-1a/spot"},
		},
		{
			name: "an insufficient-capacity pool yields an error and the next cheapest pool launches in the same call",
			setup: func(t *testing.T, e *env) {
				e.sim.SetUnavailable(ec2sim.Offering{InstanceType: "t3.large", Zone: "us-east-1a", CapacityType: "on-demand"}, "")
			},
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				return fleetInput("amd64", "on-demand", 1, []string{"m5.large", "c5.large", "t3.large"}, []string{e.subnets()["us-east-1a"]})
			},
			want:       []string{"c5.large/us-east-1a/on-demand"},
			wantErrors: []string{"InsufficientInstanceCapacity t3.large/us-east-1a/on-demand"},
		},
		{
			name:  "spot exhausted everywhere returns one error per override and no instance",
			setup: func(t *testing.T, e *env) { e.sim.SetUnavailable(ec2sim.Offering{CapacityType: "spot"}, "") },
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				sn := e.subnets()
				return fleetInput("amd64", "spot", 1, []string{"c5.large"}, []string{sn["us-east-1a"], sn["us-east-1b"]})
			},
			wantErrors: []string{"InsufficientInstanceCapacity c5.large/us-east-1a/spot", "InsufficientInstanceCapacity c5.large/us-east-1b/spot"},
		},
		{
			name: "spot insufficient capacity leaves on-demand of the same pool launchable",
			setup: func(t *testing.T, e *env) {
				e.sim.SetUnavailable(ec2sim.Offering{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "spot"}, "")
			},
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				return fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]})
			},
			want: []string{"c5.large/us-east-1a/on-demand"},
		},
		{
			name: "an injected fleet error code is reported as given",
			setup: func(t *testing.T, e *env) {
				e.sim.SetUnavailable(ec2sim.Offering{InstanceType: "t3.large"}, "VcpuLimitExceeded")
			},
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				return fleetInput("amd64", "on-demand", 1, []string{"t3.large", "m5.large"}, []string{e.subnets()["us-east-1b"]})
			},
			want:       []string{"m5.large/us-east-1b/on-demand"},
			wantErrors: []string{"VcpuLimitExceeded t3.large/us-east-1b/on-demand"},
		},
		{
			name: "a subnet without free addresses fails its override and the next zone launches",
			setup: func(t *testing.T, e *env) {
				if err := e.sim.SetAvailableIPs(e.subnets()["us-east-1a"], 0); err != nil {
					t.Fatalf("SetAvailableIPs() error = %v", err)
				}
			},
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				sn := e.subnets()
				return fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{sn["us-east-1a"], sn["us-east-1b"]})
			},
			want:       []string{"c5.large/us-east-1b/on-demand"},
			wantErrors: []string{"InsufficientFreeAddressesInSubnet c5.large/us-east-1a/on-demand"},
		},
		{
			name: "overrides of several launch-template configs compete on price",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				e.createLT(t, "arm64", e.al2023(t, "arm64"), "")
				in := fleetInput("amd64", "on-demand", 1, []string{"c5.large", "m5.large"}, []string{e.subnets()["us-east-1a"]})
				arm := fleetInput("arm64", "on-demand", 1, []string{"m6g.large", "c6g.large"}, []string{e.subnets()["us-east-1c"]})
				in.LaunchTemplateConfigs = append(in.LaunchTemplateConfigs, arm.LaunchTemplateConfigs...)
				return in
			},
			want: []string{"c6g.large/us-east-1c/on-demand"},
		},
		{
			name: "an override whose AMI architecture does not match fails and the next one launches",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				return fleetInput("amd64", "on-demand", 1, []string{"c6g.large", "c5.large"}, []string{e.subnets()["us-east-1a"]})
			},
			want:       []string{"c5.large/us-east-1a/on-demand"},
			wantErrors: []string{"InvalidParameterValue c6g.large/us-east-1a/on-demand"},
		},
		{
			name: "an override's ImageId replaces the template's image",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				in := fleetInput("amd64", "on-demand", 1, []string{"c6g.large"}, []string{e.subnets()["us-east-1a"]})
				in.LaunchTemplateConfigs[0].Overrides[0].ImageId = aws.String(e.al2023(t, "arm64"))
				return in
			},
			want: []string{"c6g.large/us-east-1a/on-demand"},
		},
		{
			name: "spot request tags on an on-demand launch fail every override",
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				in := fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]})
				in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSpotInstancesRequest,
					Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")}}}}
				return in
			},
			wantErrors: []string{"InvalidParameterValue c5.large/us-east-1a/on-demand"},
		},
		{
			name: "an override without subnet or zone is tried in every zone",
			setup: func(t *testing.T, e *env) {
				e.sim.SetUnavailable(ec2sim.Offering{Zone: "us-east-1a"}, "")
			},
			input: func(t *testing.T, e *env) *ec2.CreateFleetInput {
				in := fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{"x"})
				in.LaunchTemplateConfigs[0].Overrides[0].SubnetId = nil
				return in
			},
			want:       []string{"c5.large/us-east-1b/on-demand"},
			wantErrors: []string{"InsufficientInstanceCapacity c5.large/us-east-1a/on-demand"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, ec2sim.Options{})
			e.createLT(t, "amd64", e.al2023(t, "x86_64"), "#!/bin/bash\necho hello\n")
			if tt.setup != nil {
				tt.setup(t, e)
			}
			out, err := e.ec2.CreateFleet(t.Context(), tt.input(t, e))
			if err != nil {
				t.Fatalf("CreateFleet() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, launched(out)); diff != "" {
				t.Errorf("launched instances mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErrors, fleetErrors(out)); diff != "" {
				t.Errorf("fleet errors mismatch (-want +got):\n%s", diff)
			}
			if tt.wantEntries > 0 && len(out.Instances) != tt.wantEntries {
				t.Errorf("len(Instances) = %d, want %d", len(out.Instances), tt.wantEntries)
			}
			if got := len(e.sim.Instances()); got != len(tt.want) {
				t.Errorf("simulator holds %d instances, want %d", got, len(tt.want))
			}
			if !strings.HasPrefix(aws.ToString(out.FleetId), "fleet-") {
				t.Errorf("FleetId = %q, want fleet-...", aws.ToString(out.FleetId))
			}
		})
	}
}

func TestCreateFleetErrorsAreUnfulfillableForKarpenter(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "amd64", e.al2023(t, "x86_64"), "")
	for _, code := range []string{"InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "UnfulfillableCapacity", "Unsupported"} {
		e.sim.SetUnavailable(ec2sim.Offering{InstanceType: "c5.large"}, code)
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput("amd64", "spot", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]}))
		if err != nil {
			t.Fatalf("CreateFleet() error = %v", err)
		}
		if len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != code {
			t.Fatalf("Errors = %v, want one %s", fleetErrors(out), code)
		}
		if got := awserr.ClassifyCode(aws.ToString(out.Errors[0].ErrorCode)); got != awserr.Unfulfillable {
			t.Errorf("ClassifyCode(%s) = %v, want Unfulfillable", code, got)
		}
	}
}

func TestCreateFleetFailsTheWholeCall(t *testing.T) {
	tests := []struct {
		name      string
		input     func(e *env) *ec2.CreateFleetInput
		wantCode  string
		wantClass awserr.Class
	}{
		{
			name: "unknown launch template name",
			input: func(e *env) *ec2.CreateFleetInput {
				return fleetInput("missing", "on-demand", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]})
			},
			wantCode: "InvalidLaunchTemplateName.NotFoundException", wantClass: awserr.NotFound,
		},
		{
			name: "unknown subnet",
			input: func(e *env) *ec2.CreateFleetInput {
				return fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{"subnet-0123456789abcdef0"})
			},
			wantCode: "InvalidSubnetID.NotFound", wantClass: awserr.NotFound,
		},
		{
			name: "maintain fleets are not simulated",
			input: func(e *env) *ec2.CreateFleetInput {
				in := fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]})
				in.Type = ec2types.FleetTypeMaintain
				return in
			},
			wantCode: "UnsupportedOperation", wantClass: awserr.Unknown,
		},
		{
			name: "tag keys starting with aws: are reserved",
			input: func(e *env) *ec2.CreateFleetInput {
				in := fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]})
				in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
					Tags: []ec2types.Tag{{Key: aws.String("aws:owner"), Value: aws.String("me")}}}}
				return in
			},
			wantCode: "InvalidParameterValue", wantClass: awserr.Unknown,
		},
		{
			name: "on-demand plus spot capacity above the total",
			input: func(e *env) *ec2.CreateFleetInput {
				in := fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]})
				in.TargetCapacitySpecification.SpotTargetCapacity = aws.Int32(2)
				return in
			},
			wantCode: "InvalidParameterValue", wantClass: awserr.Unknown,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, ec2sim.Options{})
			e.createLT(t, "amd64", e.al2023(t, "x86_64"), "")
			_, err := e.ec2.CreateFleet(t.Context(), tt.input(e))
			if err == nil {
				t.Fatal("CreateFleet() error = nil, want one")
			}
			if code, status := apiCode(err); code != tt.wantCode || status != 400 {
				t.Errorf("error code, status = %s, %d; want %s, 400 (%v)", code, status, tt.wantCode, err)
			}
			if got := awserr.Classify(err); got != tt.wantClass {
				t.Errorf("Classify() = %v, want %v", got, tt.wantClass)
			}
			if n := len(e.sim.Instances()); n != 0 {
				t.Errorf("%d instances launched by a failed call, want 0", n)
			}
		})
	}
}

func TestCreateFleetClientTokenIsIdempotent(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "amd64", e.al2023(t, "x86_64"), "")
	in := fleetInput("amd64", "spot", 2, []string{"c5.large", "m5.large"}, []string{e.subnets()["us-east-1a"]})
	in.ClientToken = aws.String("nodeclaim-default-x7k2p")

	first, err := e.ec2.CreateFleet(t.Context(), in)
	if err != nil {
		t.Fatalf("first CreateFleet() error = %v", err)
	}
	second, err := e.ec2.CreateFleet(t.Context(), in)
	if err != nil {
		t.Fatalf("retried CreateFleet() error = %v", err)
	}
	if aws.ToString(first.FleetId) != aws.ToString(second.FleetId) {
		t.Errorf("FleetId = %s then %s, want the same", aws.ToString(first.FleetId), aws.ToString(second.FleetId))
	}
	if diff := cmp.Diff(instanceIDs(first), instanceIDs(second)); diff != "" {
		t.Errorf("retried call instance IDs mismatch (-first +second):\n%s", diff)
	}
	if n := len(e.sim.Instances()); n != 2 {
		t.Errorf("simulator holds %d instances after a retried call, want 2", n)
	}

	other := fleetInput("amd64", "spot", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1b"]})
	other.ClientToken = in.ClientToken
	_, err = e.ec2.CreateFleet(t.Context(), other)
	if code, _ := apiCode(err); code != "IdempotentParameterMismatch" {
		t.Errorf("same token, other parameters: error = %v, want IdempotentParameterMismatch", err)
	}

	in.ClientToken = aws.String("nodeclaim-default-other")
	third, err := e.ec2.CreateFleet(t.Context(), in)
	if err != nil {
		t.Fatalf("CreateFleet() with a new token error = %v", err)
	}
	if aws.ToString(third.FleetId) == aws.ToString(first.FleetId) || len(e.sim.Instances()) != 4 {
		t.Errorf("a new token must launch again: fleet %s, %d instances", aws.ToString(third.FleetId), len(e.sim.Instances()))
	}
}

func TestCreateFleetLaunchesDescribableInstances(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ClusterName: "prod"})
	sg := e.sim.Network().SecurityGroups[2].ID
	lt, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("karpenter.k8s.aws/1234567890"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:            aws.String(e.al2023(t, "x86_64")),
			UserData:           aws.String("IyEvYmluL2Jhc2gKZWNobyBoaQo="), // "#!/bin/bash\necho hi\n"
			SecurityGroupIds:   []string{sg},
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("KarpenterNodeInstanceProfile")},
			MetadataOptions:    &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1)},
			BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"),
				Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)}}},
		},
	})
	if err != nil {
		t.Fatalf("CreateLaunchTemplate() error = %v", err)
	}
	karpenterTags := []ec2types.Tag{
		{Key: aws.String("kubernetes.io/cluster/prod"), Value: aws.String("owned")},
		{Key: aws.String("eks:eks-cluster-name"), Value: aws.String("prod")},
		{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")},
		{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")},
	}
	in := fleetInput("karpenter.k8s.aws/1234567890", "spot", 1, []string{"m5.large"}, []string{e.subnets()["us-east-1b"]})
	in.TagSpecifications = []ec2types.TagSpecification{
		{ResourceType: ec2types.ResourceTypeInstance, Tags: karpenterTags},
		{ResourceType: ec2types.ResourceTypeVolume, Tags: karpenterTags},
		{ResourceType: ec2types.ResourceTypeFleet, Tags: karpenterTags},
		{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: karpenterTags},
	}
	out, err := e.ec2.CreateFleet(t.Context(), in)
	if err != nil {
		t.Fatalf("CreateFleet() error = %v", err)
	}
	ids := instanceIDs(out)
	if len(ids) != 1 {
		t.Fatalf("launched %v, want one instance (errors %v)", ids, fleetErrors(out))
	}
	id := ids[0]
	got := e.describe(t, id)[id]

	wantTags := map[string]string{
		"kubernetes.io/cluster/prod":     "owned",
		"eks:eks-cluster-name":           "prod",
		"karpenter.sh/nodepool":          "default",
		"karpenter.k8s.aws/ec2nodeclass": "default",
		"aws:ec2:fleet-id":               aws.ToString(out.FleetId),
		"aws:ec2launchtemplate:id":       aws.ToString(lt.LaunchTemplate.LaunchTemplateId),
		"aws:ec2launchtemplate:version":  "1",
	}
	gotTags := map[string]string{}
	for _, tag := range got.Tags {
		gotTags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if diff := cmp.Diff(wantTags, gotTags); diff != "" {
		t.Errorf("instance tags mismatch (-want +got):\n%s", diff)
	}
	ip := netip.MustParseAddr(aws.ToString(got.PrivateIpAddress))
	checks := []struct {
		what      string
		got, want any
	}{
		{"state", got.State.Name, ec2types.InstanceStateNameRunning},
		{"instance type", got.InstanceType, ec2types.InstanceTypeM5Large},
		{"lifecycle", got.InstanceLifecycle, ec2types.InstanceLifecycleTypeSpot},
		{"spot request ID set", strings.HasPrefix(aws.ToString(got.SpotInstanceRequestId), "sir-"), true},
		{"zone", aws.ToString(got.Placement.AvailabilityZone), "us-east-1b"},
		{"subnet", aws.ToString(got.SubnetId), e.subnets()["us-east-1b"]},
		{"private IP in the subnet", netip.MustParsePrefix("10.0.16.0/20").Contains(ip), true},
		{"private DNS name", aws.ToString(got.PrivateDnsName), "ip-" + strings.ReplaceAll(ip.String(), ".", "-") + ".ec2.internal"},
		{"image", aws.ToString(got.ImageId), e.al2023(t, "x86_64")},
		{"architecture", got.Architecture, ec2types.ArchitectureValuesX8664},
		{"launch time", got.LaunchTime.UTC(), epoch},
		{"security group", aws.ToString(got.SecurityGroups[0].GroupId), sg},
		{"instance profile", aws.ToString(got.IamInstanceProfile.Arn), "arn:aws:iam::111122223333:instance-profile/KarpenterNodeInstanceProfile"},
		{"http tokens", got.MetadataOptions.HttpTokens, ec2types.HttpTokensStateRequired},
		{"root volume", aws.ToString(got.BlockDeviceMappings[0].DeviceName), "/dev/xvda"},
		{"answer zone filled from the subnet", aws.ToString(out.Instances[0].LaunchTemplateAndOverrides.Overrides.AvailabilityZone), "us-east-1b"},
	}
	for _, c := range checks {
		if !cmp.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}

	snap, ok := e.sim.Instance(id)
	if !ok {
		t.Fatalf("Instance(%s) not found", id)
	}
	if string(snap.UserData) != "#!/bin/bash\necho hi\n" || snap.LaunchTemplateName != "karpenter.k8s.aws/1234567890" || snap.CapacityType != "spot" {
		t.Errorf("Instance() = user data %q, template %q, capacity %q", snap.UserData, snap.LaunchTemplateName, snap.CapacityType)
	}
	if len(snap.Volumes) != 1 || snap.Volumes[0].SizeGiB != 20 || snap.Volumes[0].VolumeType != "gp3" || !snap.Volumes[0].Encrypted ||
		snap.Volumes[0].Tags["karpenter.sh/nodepool"] != "default" {
		t.Errorf("Instance().Volumes = %+v, want one tagged encrypted 20 GiB gp3 volume", snap.Volumes)
	}
	fleets := e.sim.Fleets()
	if len(fleets) != 1 || fleets[0].Tags["eks:eks-cluster-name"] != "prod" {
		t.Errorf("Fleets() = %+v, want one fleet tagged for the cluster", fleets)
	}
	calls := e.sim.CallsTo("CreateFleet")
	if len(calls) != 1 || calls[0].Params.Get("LaunchTemplateConfigs.1.Overrides.1.InstanceType") != "m5.large" ||
		calls[0].Params.Get("SpotOptions.AllocationStrategy") != "price-capacity-optimized" {
		t.Errorf("recorded CreateFleet calls = %+v", calls)
	}
}

func TestCreateFleetLaunchesWithTheLaunchTemplatesTenancy(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ClusterName: "prod"})
	for _, tc := range []struct{ name, tenancy, want string }{
		{"nodewright/default-tenancy", "", "default"},
		{"nodewright/dedicated-tenancy", "dedicated", "dedicated"},
	} {
		data := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(e.al2023(t, "x86_64"))}
		if tc.tenancy != "" {
			data.Placement = &ec2types.LaunchTemplatePlacementRequest{Tenancy: ec2types.Tenancy(tc.tenancy)}
		}
		if _, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(tc.name), LaunchTemplateData: data}); err != nil {
			t.Fatalf("CreateLaunchTemplate(%s) error = %v", tc.name, err)
		}
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput(tc.name, "on-demand", 1, []string{"m5.large"}, []string{e.subnets()["us-east-1a"]}))
		if err != nil {
			t.Fatalf("CreateFleet(%s) error = %v", tc.name, err)
		}
		ids := instanceIDs(out)
		if len(ids) != 1 {
			t.Fatalf("CreateFleet(%s) launched %v (errors %v)", tc.name, ids, fleetErrors(out))
		}
		if got := e.describe(t, ids[0])[ids[0]].Placement.Tenancy; got != ec2types.Tenancy(tc.want) {
			t.Errorf("%s: Placement.Tenancy = %q, want %q", tc.name, got, tc.want)
		}
	}
	_, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("nodewright/bad-tenancy"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(e.al2023(t, "x86_64")), Placement: &ec2types.LaunchTemplatePlacementRequest{Tenancy: "shared"}}})
	if code, _ := apiCode(err); code != "InvalidParameterValue" {
		t.Errorf("CreateLaunchTemplate(tenancy shared) error = %v, want InvalidParameterValue", err)
	}
}

func TestCreateFleetRefusesAnInstanceProfileIAMDoesNotHave(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ClusterName: "prod"})
	e.sim.SetInstanceProfileLookup(func(name string) (string, bool) {
		if name == "present" {
			return "arn:aws:iam::111122223333:instance-profile/team/present", true
		}
		return "", false
	})
	for _, tt := range []struct {
		profile   string
		wantError string
	}{
		{"present", ""},
		{"absent", "InvalidParameterValue: Value (absent) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"},
	} {
		name := "lt-" + tt.profile
		if _, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
				ImageId:            aws.String(e.al2023(t, "x86_64")),
				IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(tt.profile)},
			},
		}); err != nil {
			t.Fatalf("CreateLaunchTemplate() error = %v", err)
		}
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput(name, "on-demand", 1, []string{"m5.large"}, []string{e.subnets()["us-east-1a"]}))
		if err != nil {
			t.Fatalf("CreateFleet() error = %v", err)
		}
		var errs []string
		for _, fe := range out.Errors {
			errs = append(errs, aws.ToString(fe.ErrorCode)+": "+aws.ToString(fe.ErrorMessage))
		}
		if tt.wantError == "" {
			ids := instanceIDs(out)
			if len(ids) != 1 {
				t.Fatalf("profile %s: launched %v (errors %v), want one instance", tt.profile, ids, errs)
			}
			if got := aws.ToString(e.describe(t, ids[0])[ids[0]].IamInstanceProfile.Arn); got != "arn:aws:iam::111122223333:instance-profile/team/present" {
				t.Errorf("instance profile ARN = %q, want IAM's, with its path", got)
			}
			continue
		}
		if len(instanceIDs(out)) != 0 || !slices.Contains(errs, tt.wantError) {
			t.Errorf("profile %s: launched %v, errors %v; want none launched and %q", tt.profile, instanceIDs(out), errs, tt.wantError)
		}
	}
}
