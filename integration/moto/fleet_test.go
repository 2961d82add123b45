// Package moto_test runs nodewright's EC2 adapters against moto_server,
// an AWS emulator nobody here wrote (local/moto), in ap-northeast-1: the
// region the embedded price table lacks.
package moto_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/local/moto"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
)

const (
	region  = "ap-northeast-1"
	cluster = "moto"
)

// clients returns EC2 and SSM clients for moto in region.
func clients(m *moto.Server) (*ec2.Client, *ssm.Client) {
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	hc := &http.Client{Timeout: time.Minute}
	return ec2.New(ec2.Options{Region: region, BaseEndpoint: aws.String(m.URL), Credentials: creds, HTTPClient: hc}),
		ssm.New(ssm.Options{Region: region, BaseEndpoint: aws.String(m.URL), Credentials: creds, HTTPClient: hc})
}

// seedNetwork creates, in moto, what a cluster's node class selects: a VPC
// with one subnet per zone and a security group, all tagged for discovery.
// It returns the zones.
func seedNetwork(t *testing.T, api *ec2.Client) []string {
	t.Helper()
	ctx := t.Context()
	discovery := []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(cluster)}}
	vpc, err := api.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatalf("CreateVpc: %v", err)
	}
	vpcID := vpc.Vpc.VpcId
	zones := []string{region + "a", region + "c", region + "d"}
	for i, z := range zones {
		_, err := api.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpcID, AvailabilityZone: aws.String(z),
			CidrBlock:         aws.String("10.0." + string(rune('0'+i*2)) + ".0/23"),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: discovery}}})
		if err != nil {
			t.Fatalf("CreateSubnet(%s): %v", z, err)
		}
	}
	_, err = api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes"), Description: aws.String("nodes"),
		VpcId: vpcID, TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: discovery}}})
	if err != nil {
		t.Fatalf("CreateSecurityGroup: %v", err)
	}
	return zones
}

// x86Image returns one of moto's seeded x86_64 images.
func x86Image(t *testing.T, api *ec2.Client) string {
	t.Helper()
	out, err := api.DescribeImages(t.Context(), &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil || len(out.Images) == 0 {
		t.Fatalf("DescribeImages: %d images, %v", len(out.Images), err)
	}
	return aws.ToString(out.Images[0].ImageId)
}

// TestMotoAcceptsTheFleetAndLaunchTemplateRequestsTheAdaptersBuild
// resolves a node class with the nodeclass adapter, lets it create its
// launch templates, and launches on-demand and Spot NodeClaims with the
// fleet adapter, all against moto in ap-northeast-1: moto must accept
// every request and launch one instance per claim in a node-class zone.
func TestMotoAcceptsTheFleetAndLaunchTemplateRequestsTheAdaptersBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	m := moto.Start(t)
	ec2API, ssmAPI := clients(m)
	zones := seedNetwork(t, ec2API)
	image := x86Image(t, ec2API)

	family := v1.AMIFamilyAL2023
	nc := &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.EC2NodeClassSpec{
		AMIFamily:                  &family,
		AMISelectorTerms:           []v1.AMISelectorTerm{{ID: image}},
		SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
		SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
		InstanceProfile:            aws.String("nodewright-nodes"),
	}}
	resolver := nodeclass.New(ec2API, ssmAPI, time.Now)
	res, err := resolver.Resolve(t.Context(), nc, "1.34")
	if err != nil {
		t.Fatalf("resolve node class against moto: %v", err)
	}
	res.ApplyTo(&nc.Status)
	nc.Status.InstanceProfile = "nodewright-nodes"
	if len(res.Subnets) != len(zones) {
		t.Fatalf("resolved subnets %+v, want one per zone %v", res.Subnets, zones)
	}
	its, _, err := catalog.Resolve(nc, catalog.Options{Region: region, Zones: zones, SpotPriceRatio: 0.35})
	if err != nil {
		t.Fatal(err)
	}
	subnets := res.Subnets
	fl := fleet.New(ec2API)
	for i, capacity := range []string{v1.CapacityTypeOnDemand, v1.CapacityTypeSpot} {
		claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + capacity, UID: types.UID("uid-" + capacity),
			Labels: map[string]string{v1.LabelNodePool: "default"}}}
		claim.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "c5.large", "t3.medium"}},
			{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{capacity}},
		}
		templates := fleet.TemplateFunc(func(ctx context.Context, r fleet.TemplateRequest) ([]launch.Template, error) {
			return resolver.EnsureLaunchTemplates(ctx, nodeclass.TemplateRequest{
				Cluster:   nodeclass.Cluster{Name: cluster, Endpoint: "https://example.invalid", CABundle: "Y2E=", ServiceCIDR: "10.96.0.0/12"},
				NodeClass: nc, NodeClaim: claim, CapacityType: r.CapacityType, InstanceTypes: r.InstanceTypes})
		})
		got, err := fl.Launch(t.Context(), fleet.Request{ClusterName: cluster, NodeClaim: claim, NodeClass: nc,
			InstanceTypes: its, Subnets: subnets, Templates: templates})
		if err != nil {
			t.Fatalf("%s launch against moto: %v", capacity, err)
		}
		if got.Instance.ID == "" || !contains(zones, got.Instance.Zone) {
			t.Errorf("%s launch %d: instance %+v, want one in %v", capacity, i, got.Instance, zones)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
