package ec2sim_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
)

func TestDescribeSubnets(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ClusterName: "prod"})
	net := e.sim.Network()
	tests := []struct {
		name  string
		input *ec2.DescribeSubnetsInput
		want  []string // zone/cidr
	}{
		{
			name:  "karpenter discovery tag selects the private subnet of every zone",
			input: &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"prod"}}}},
			want:  []string{"us-east-1a/10.0.0.0/20", "us-east-1b/10.0.16.0/20", "us-east-1c/10.0.32.0/20"},
		},
		{
			name:  "the discovery tag of another cluster selects nothing",
			input: &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"staging"}}}},
		},
		{
			name: "public subnets by role tag and zone",
			input: &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"kubernetes.io/role/elb"}},
				{Name: aws.String("availability-zone"), Values: []string{"us-east-1b"}}}},
			want: []string{"us-east-1b/10.0.132.0/22"},
		},
		{
			name:  "by ID",
			input: &ec2.DescribeSubnetsInput{SubnetIds: []string{net.Subnets[2].ID}},
			want:  []string{"us-east-1c/10.0.32.0/20"},
		},
		{
			name:  "by zone ID",
			input: &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone-id"), Values: []string{"use1-az1"}}}},
			want:  []string{"us-east-1a/10.0.0.0/20", "us-east-1a/10.0.128.0/22"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeSubnets(t.Context(), tt.input)
			if err != nil {
				t.Fatalf("DescribeSubnets() error = %v", err)
			}
			var got []string
			for _, sn := range out.Subnets {
				got = append(got, aws.ToString(sn.AvailabilityZone)+"/"+aws.ToString(sn.CidrBlock))
				if aws.ToString(sn.VpcId) != net.VPCID || aws.ToInt32(sn.AvailableIpAddressCount) == 0 {
					t.Errorf("subnet %s: vpc %s, free %d", aws.ToString(sn.SubnetId), aws.ToString(sn.VpcId), aws.ToInt32(sn.AvailableIpAddressCount))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("subnets mismatch (-want +got):\n%s", diff)
			}
		})
	}
	_, err := e.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0123456789abcdef0"}})
	if code, _ := apiCode(err); code != "InvalidSubnetID.NotFound" {
		t.Errorf("DescribeSubnets(unknown ID) error = %v, want InvalidSubnetID.NotFound", err)
	}
}

func TestDescribeSecurityGroups(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ClusterName: "prod"})
	tests := []struct {
		name  string
		input *ec2.DescribeSecurityGroupsInput
		want  []string
	}{
		{
			name:  "karpenter discovery tag selects the node group",
			input: &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"prod"}}}},
			want:  []string{"prod-node"},
		},
		{
			name:  "the cluster ownership tag selects the EKS cluster group",
			input: &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:kubernetes.io/cluster/prod"), Values: []string{"owned"}}}},
			want:  []string{"eks-cluster-sg-prod-"},
		},
		{
			name:  "group-name filter",
			input: &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"default"}}}},
			want:  []string{"default"},
		},
		{
			name:  "every group of the VPC",
			input: &ec2.DescribeSecurityGroupsInput{},
			want:  []string{"default", "eks-cluster-sg-prod-", "prod-node"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeSecurityGroups(t.Context(), tt.input)
			if err != nil {
				t.Fatalf("DescribeSecurityGroups() error = %v", err)
			}
			if len(out.SecurityGroups) != len(tt.want) {
				t.Fatalf("got %d groups, want %v", len(out.SecurityGroups), tt.want)
			}
			for i, g := range out.SecurityGroups {
				if !strings.HasPrefix(aws.ToString(g.GroupName), tt.want[i]) || !strings.HasPrefix(aws.ToString(g.GroupId), "sg-") {
					t.Errorf("group %d = %s (%s), want %s...", i, aws.ToString(g.GroupName), aws.ToString(g.GroupId), tt.want[i])
				}
			}
		})
	}
	_, err := e.ec2.DescribeSecurityGroups(t.Context(), &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0123456789abcdef0"}})
	if code, _ := apiCode(err); code != "InvalidGroup.NotFound" {
		t.Errorf("DescribeSecurityGroups(unknown ID) error = %v, want InvalidGroup.NotFound", err)
	}
}

func TestRegionAndZones(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	out, err := e.ec2.DescribeAvailabilityZones(t.Context(), &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		t.Fatalf("DescribeAvailabilityZones() error = %v", err)
	}
	var got []string
	for _, z := range out.AvailabilityZones {
		got = append(got, aws.ToString(z.ZoneName)+"="+aws.ToString(z.ZoneId))
	}
	if diff := cmp.Diff([]string{"ap-northeast-1a=apne1-az1", "ap-northeast-1c=apne1-az2", "ap-northeast-1d=apne1-az3"}, got); diff != "" {
		t.Errorf("zones mismatch (-want +got):\n%s", diff)
	}
	id := e.launch(t, "on-demand", "c5.large", "ap-northeast-1d", 1, nil)[0]
	in := e.describe(t, id)[id]
	if name := aws.ToString(in.PrivateDnsName); !strings.HasSuffix(name, ".ap-northeast-1.compute.internal") {
		t.Errorf("PrivateDnsName = %s, want ip-...ap-northeast-1.compute.internal", name)
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts ec2sim.Options
	}{
		{name: "zone outside the region", opts: ec2sim.Options{Region: "us-east-1", Zones: []string{"us-west-2a"}}},
		{name: "duplicate zone", opts: ec2sim.Options{Zones: []string{"us-east-1a", "us-east-1a"}}},
		{name: "more than 8 zones", opts: ec2sim.Options{Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f", "us-east-1g", "us-east-1h", "us-east-1i"}}},
		{name: "malformed kubernetes version", opts: ec2sim.Options{KubernetesVersions: []string{"v1.33"}}},
		{name: "negative boot delay", opts: ec2sim.Options{BootDelay: -1}},
		{name: "negative spot price ratio", opts: ec2sim.Options{SpotPriceRatio: -0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ec2sim.New(tt.opts); err == nil {
				t.Error("New() error = nil, want one")
			}
		})
	}
}
