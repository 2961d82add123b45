package nodeclass_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	smithydocument "github.com/aws/smithy-go/document"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/launch"
)

var sdkOpts = cmp.Options{cmpopts.IgnoreTypes(smithydocument.NoSerde{})}

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func network(t *testing.T) *awstest.EC2 {
	e := awstest.NewEC2(t)
	e.AddSubnet("subnet-a", "us-east-1a", "use1-az1", 100, map[string]string{"karpenter.sh/discovery": "prod", "tier": "private"})
	e.AddSubnet("subnet-b", "us-east-1b", "use1-az2", 4000, map[string]string{"karpenter.sh/discovery": "prod", "tier": "private"})
	e.AddSubnet("subnet-c", "us-east-1c", "use1-az3", 100, map[string]string{"karpenter.sh/discovery": "prod", "tier": "public"})
	e.AddSubnet("subnet-x", "us-east-1a", "use1-az1", 9000, map[string]string{"karpenter.sh/discovery": "staging"})
	e.AddSecurityGroup("sg-2", "eks-cluster-sg-prod", map[string]string{"karpenter.sh/discovery": "prod"})
	e.AddSecurityGroup("sg-1", "nodes", map[string]string{"karpenter.sh/discovery": "prod"})
	e.AddSecurityGroup("sg-3", "other", nil)
	return e
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

func TestSubnets(t *testing.T) {
	tests := []struct {
		name        string
		terms       []v1.SubnetSelectorTerm
		want        []launch.Subnet
		wantFilters [][]ec2types.Filter
	}{
		{
			name:  "should select subnets by tags, most free addresses first",
			terms: []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod", "tier": "private"}}},
			want: []launch.Subnet{
				{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2", AvailableIPs: 4000},
				{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1", AvailableIPs: 100},
			},
			wantFilters: [][]ec2types.Filter{{filter("tag:karpenter.sh/discovery", "prod"), filter("tag:tier", "private")}},
		},
		{
			name:  "should match any value of a tag given as *",
			terms: []v1.SubnetSelectorTerm{{Tags: map[string]string{"tier": "*"}}},
			want: []launch.Subnet{
				{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2", AvailableIPs: 4000},
				{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1", AvailableIPs: 100},
				{ID: "subnet-c", Zone: "us-east-1c", ZoneID: "use1-az3", AvailableIPs: 100},
			},
			wantFilters: [][]ec2types.Filter{{filter("tag-key", "tier")}},
		},
		{
			name: "should union terms, merge id terms into one call and de-duplicate",
			terms: []v1.SubnetSelectorTerm{
				{ID: "subnet-c"}, {Tags: map[string]string{"tier": "public"}}, {ID: "subnet-x"}, {Tags: map[string]string{"karpenter.sh/discovery": "staging"}},
			},
			want: []launch.Subnet{
				{ID: "subnet-x", Zone: "us-east-1a", ZoneID: "use1-az1", AvailableIPs: 9000},
				{ID: "subnet-c", Zone: "us-east-1c", ZoneID: "use1-az3", AvailableIPs: 100},
			},
			wantFilters: [][]ec2types.Filter{
				{filter("tag:tier", "public")},
				{filter("tag:karpenter.sh/discovery", "staging")},
				{filter("subnet-id", "subnet-c", "subnet-x")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := network(t)
			nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{SubnetSelectorTerms: tt.terms}}
			got, err := nodeclass.New(e, awstest.NewSSM(t), clock).Subnets(t.Context(), nc)
			if err != nil {
				t.Fatalf("Subnets() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Subnets() mismatch (-want +got):\n%s", diff)
			}
			var filters [][]ec2types.Filter
			for _, in := range e.On.DescribeSubnets.Inputs() {
				filters = append(filters, in.Filters)
			}
			if diff := cmp.Diff(tt.wantFilters, filters, sdkOpts); diff != "" {
				t.Errorf("DescribeSubnets filters mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecurityGroups(t *testing.T) {
	tests := []struct {
		name  string
		terms []v1.SecurityGroupSelectorTerm
		want  []v1.SecurityGroup
	}{
		{name: "should select by tags, sorted by id", terms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
			want: []v1.SecurityGroup{{ID: "sg-1", Name: "nodes"}, {ID: "sg-2", Name: "eks-cluster-sg-prod"}}},
		{name: "should select by group name", terms: []v1.SecurityGroupSelectorTerm{{Name: "other"}},
			want: []v1.SecurityGroup{{ID: "sg-3", Name: "other"}}},
		{name: "should union id and name terms", terms: []v1.SecurityGroupSelectorTerm{{ID: "sg-3"}, {Name: "nodes"}, {ID: "sg-1"}},
			want: []v1.SecurityGroup{{ID: "sg-1", Name: "nodes"}, {ID: "sg-3", Name: "other"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := network(t)
			nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{SecurityGroupSelectorTerms: tt.terms}}
			got, err := nodeclass.New(e, awstest.NewSSM(t), clock).SecurityGroups(t.Context(), nc)
			if err != nil {
				t.Fatalf("SecurityGroups() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SecurityGroups() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiscoveryErrors(t *testing.T) {
	e := network(t)
	r := nodeclass.New(e, awstest.NewSSM(t), clock)
	none := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{
		SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "nope"}}},
		SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Name: "nope"}},
	}}
	if _, err := r.Subnets(t.Context(), none); !errors.Is(err, nodeclass.ErrSubnetsNotFound) {
		t.Errorf("Subnets() error = %v, want ErrSubnetsNotFound", err)
	}
	if _, err := r.SecurityGroups(t.Context(), none); !errors.Is(err, nodeclass.ErrSecurityGroupsNotFound) {
		t.Errorf("SecurityGroups() error = %v, want ErrSecurityGroupsNotFound", err)
	}
	e.On.DescribeSubnets.Err = awstest.APIError("RequestLimitExceeded", "slow down")
	if _, err := r.Subnets(t.Context(), none); awserr.Classify(err) != awserr.Throttled {
		t.Errorf("Subnets() error = %v, want a throttled error", err)
	}
}

func TestResolveAppliesToStatus(t *testing.T) {
	e, s := network(t), awstest.NewSSM(t)
	s.Put("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id", "ami-br")
	e.AddImage(ec2types.Image{ImageId: aws.String("ami-br"), Name: aws.String("bottlerocket"), Architecture: "x86_64", CreationDate: aws.String("2025-12-01T00:00:00Z")})
	nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{
		SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{ID: "subnet-a"}, {ID: "subnet-b"}},
		SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{ID: "sg-3"}},
		AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "bottlerocket@latest"}},
	}}
	res, err := nodeclass.New(e, s, clock).Resolve(t.Context(), nc, "1.33")
	if err != nil {
		t.Fatalf("Resolve() error = %v", err)
	}
	status := v1.EC2NodeClassStatus{InstanceProfile: "kept"}
	res.ApplyTo(&status)
	if diff := cmp.Diff([]v1.Subnet{{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2"}, {ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1"}}, status.Subnets); diff != "" {
		t.Errorf("status.subnets mismatch (-want +got):\n%s", diff)
	}
	if len(status.SecurityGroups) != 1 || status.InstanceProfile != "kept" {
		t.Errorf("status = %+v", status)
	}
	// The x86_64 Bottlerocket image serves standard and Neuron types: two entries.
	if len(status.AMIs) != 2 || status.AMIs[0].ID != "ami-br" || status.AMIs[1].ID != "ami-br" {
		t.Errorf("status.amis = %+v, want ami-br twice", status.AMIs)
	}
}
