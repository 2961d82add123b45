package adapters_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/internal/adapters"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// fieldCase sets one EC2NodeClass spec field to a realistic value. Either
// the requests the adapters send for a launch (DescribeSubnets,
// DescribeSecurityGroups, DescribeImages, DescribeCapacityReservations,
// CreateLaunchTemplate with its
// user data decoded, CreateFleet) then contain every want string, which
// the same launch without the field does not, or Validate refuses the
// class naming the field (refused).
type fieldCase struct {
	set     func(*v1.EC2NodeClass)
	want    []string
	refused bool
}

// fieldCases is keyed by the spec field's JSON name; every field of
// v1.EC2NodeClassSpec must have a case.
var fieldCases = map[string]fieldCase{
	"subnetSelectorTerms": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{Tags: map[string]string{"fields-test": "subnets"}}}
	}, want: []string{`"Values":["subnets"]`, `"SubnetId":"subnet-0fields"`}},
	"securityGroupSelectorTerms": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{ID: "sg-0fields"}}
	}, want: []string{`"SecurityGroupIds":["sg-0fields"]`}},
	"capacityReservationSelectorTerms": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{ID: "cr-0123456789abcdef0"}}
	}, want: []string{`"CapacityReservationIds":["cr-0123456789abcdef0"]`}},
	"placementGroupSelector": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: "training-cluster"}
	}, refused: true},
	"associatePublicIPAddress": {set: func(nc *v1.EC2NodeClass) { nc.Spec.AssociatePublicIPAddress = aws.Bool(true) },
		want: []string{`"AssociatePublicIpAddress":true`}},
	"ipPrefixCount": {set: func(nc *v1.EC2NodeClass) { nc.Spec.IPPrefixCount = aws.Int32(3) },
		want: []string{`"Ipv4PrefixCount":3`}},
	"amiSelectorTerms": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Tags: map[string]string{"fields-test": "fields-ami"}}}
	}, want: []string{`"Values":["fields-ami"]`, `"ImageId":"ami-0fields"`}},
	"amiFamily": {set: func(nc *v1.EC2NodeClass) { nc.Spec.AMIFamily = aws.String(v1.AMIFamilyBottlerocket) },
		want: []string{`[settings.kubernetes]`}},
	"userData": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.UserData = aws.String("#!/bin/bash\necho fields-test-user-data\n")
	}, want: []string{`echo fields-test-user-data`}},
	"role": {set: func(nc *v1.EC2NodeClass) { nc.Spec.Role = "KarpenterNodeRole-fields" },
		want: []string{`"IamInstanceProfile":{"Arn":null,"Name":"KarpenterNodeRole-fields"}`}},
	"instanceProfile": {set: func(nc *v1.EC2NodeClass) { nc.Spec.Role, nc.Spec.InstanceProfile = "", aws.String("fields-profile") },
		want: []string{`"IamInstanceProfile":{"Arn":null,"Name":"fields-profile"}`}},
	"tags": {set: func(nc *v1.EC2NodeClass) { nc.Spec.Tags = map[string]string{"cost-center": "fields-42"} },
		want: []string{`{"Key":"cost-center","Value":"fields-42"}`}},
	"kubelet": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.Kubelet = &v1.KubeletConfiguration{
			ClusterDNS:   []string{"10.100.0.53"},
			EvictionHard: map[string]string{"memory.available": "7%"},
		}
	}, want: []string{`10.100.0.53`, `7%`}},
	"blockDeviceMappings": {set: func(nc *v1.EC2NodeClass) {
		size := resource.MustParse("123Gi")
		nc.Spec.BlockDeviceMappings = []*v1.BlockDeviceMapping{{
			DeviceName: aws.String("/dev/xvdf"), RootVolume: true,
			EBS: &v1.BlockDevice{VolumeSize: &size, VolumeType: aws.String("io2"), IOPS: aws.Int64(4000), Encrypted: aws.Bool(true)},
		}}
	}, want: []string{`"DeviceName":"/dev/xvdf"`, `"VolumeSize":123`, `"Iops":4000`, `"VolumeType":"io2"`}},
	"instanceStorePolicy": {set: func(nc *v1.EC2NodeClass) { nc.Spec.InstanceStorePolicy = aws.String("RAID0") },
		want: []string{`RAID0`}},
	"networkInterfaces": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.NetworkInterfaces = []v1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"},
			{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"},
		}
	}, want: []string{`"InterfaceType":"efa-only"`, `"NetworkCardIndex":1`}},
	"detailedMonitoring": {set: func(nc *v1.EC2NodeClass) { nc.Spec.DetailedMonitoring = aws.Bool(true) },
		want: []string{`"Monitoring":{"Enabled":true`}},
	"metadataOptions": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.MetadataOptions = &v1.MetadataOptions{HTTPPutResponseHopLimit: aws.Int64(2), HTTPTokens: aws.String("optional"), HTTPProtocolIPv6: aws.String("enabled")}
	}, want: []string{`"HttpPutResponseHopLimit":2`, `"HttpTokens":"optional"`, `"HttpProtocolIpv6":"enabled"`}},
	"connectionTracking": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.ConnectionTracking = &v1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(3600), UDPStreamTimeout: aws.Int32(120), UDPTimeout: aws.Int32(45)}
	}, want: []string{`"ConnectionTrackingSpecification":{"TcpEstablishedTimeout":3600,"UdpStreamTimeout":120,"UdpTimeout":45}`}},
	"context": {set: func(nc *v1.EC2NodeClass) { nc.Spec.Context = aws.String("c-0fields") },
		want: []string{`"Context":"c-0fields"`}},
	"cpuOptions": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.CPUOptions = &v1.CPUOptions{NestedVirtualization: aws.String("enabled")}
	}, want: []string{`"CpuOptions":{"AmdSevSnp":"","CoreCount":null,"NestedVirtualization":"enabled"`}},
}

// fieldsClass is a valid AL2023 class selecting the base subnet, security
// group and AMI of fieldsEC2.
func fieldsClass() v1.EC2NodeClass {
	return v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}, Spec: v1.EC2NodeClassSpec{
		AMIFamily:                  aws.String(v1.AMIFamilyAL2023),
		AMISelectorTerms:           []v1.AMISelectorTerm{{ID: "ami-0base"}},
		Role:                       "KarpenterNodeRole-base",
		SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
		SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
	}}
}

// fieldsEC2 holds a base subnet, security group and AMI, and one of each
// that only a field's case selects.
func fieldsEC2(t *testing.T) *awstest.EC2 {
	e := awstest.NewEC2(t)
	e.AddSubnet("subnet-0base", "us-east-1a", "use1-az1", 4000, map[string]string{"karpenter.sh/discovery": "prod"})
	e.AddSubnet("subnet-0fields", "us-east-1a", "use1-az1", 4000, map[string]string{"fields-test": "subnets"})
	e.AddSecurityGroup("sg-0base", "nodes", map[string]string{"karpenter.sh/discovery": "prod"})
	e.AddSecurityGroup("sg-0fields", "fields", nil)
	for _, id := range []string{"ami-0base", "ami-0fields"} {
		e.AddImage(ec2types.Image{
			ImageId: aws.String(id), Name: aws.String(strings.Replace(id, "ami-0", "", 1) + "-ami-x86_64"), Architecture: ec2types.ArchitectureValuesX8664,
			CreationDate: aws.String("2026-11-01T00:00:00Z"), OwnerId: aws.String("111122223333"), State: ec2types.ImageStateAvailable,
			Tags: []ec2types.Tag{{Key: aws.String("fields-test"), Value: aws.String(strings.TrimPrefix(id, "ami-0") + "-ami")}},
		})
	}
	return e
}

// launchRequests resolves nc and launches one NodeClaim through the
// adapters (NodeClasses, Launcher with fleet.Client and
// nodeclass.Resolver), returning the JSON of every request they sent with
// launch-template user data decoded.
func launchRequests(t *testing.T, nc v1.EC2NodeClass) string {
	t.Helper()
	e := fieldsEC2(t)
	resolver := nodeclass.New(e, awstest.NewSSM(t), func() time.Time { return t0 })
	res, err := adapters.NodeClasses{Resolver: resolver, KubernetesVersion: "1.33"}.ResolveNodeClass(context.Background(), nc)
	if err != nil {
		t.Fatalf("ResolveNodeClass() error = %v", err)
	}
	if r := res.NodeClass.Status.Conditions; len(r) != 1 || r[0].Status != metav1.ConditionTrue {
		t.Fatalf("ResolveNodeClass() conditions = %+v; want Ready", r)
	}
	it := &catalog.InstanceType{
		Name: "m5.large",
		Labels: map[string]string{
			v1.LabelInstanceType: "m5.large", v1.LabelArch: "amd64", v1.LabelOS: "linux", v1.LabelTopologyRegion: "us-east-1",
			v1.LabelInstanceFamily: "m5", v1.LabelInstanceSize: "large", v1.LabelInstanceCategory: "m", v1.LabelInstanceCPU: "2",
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29"),
		},
		Offerings: []catalog.Offering{{Zone: "us-east-1a", ZoneID: "use1-az1", CapacityType: v1.CapacityTypeOnDemand, Price: 0.096, Available: true}},
	}
	claim := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-fields", UID: "8d3c2f5e-0000-4000-8000-0000000000f1",
			Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelEC2NodeClass: "default"}},
		Spec: v1.NodeClaimSpec{
			Resources:    v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
		},
	}
	launcher := adapters.Launcher{
		Fleet: fleet.New(e), Templates: resolver,
		Cluster: nodeclass.Cluster{Name: "prod", Endpoint: "https://prod.example", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16", DNS: "10.100.0.10"},
	}
	if _, err := launcher.Launch(context.Background(), provisioning.LaunchRequest{
		NodeClaim: claim, NodeClass: res.NodeClass, Subnets: res.Subnets, InstanceTypes: []*catalog.InstanceType{it},
	}); err != nil {
		t.Fatalf("Launch() error = %v", err)
	}
	var sent []any
	for _, in := range e.On.DescribeSubnets.Inputs() {
		sent = append(sent, in)
	}
	for _, in := range e.On.DescribeSecurityGroups.Inputs() {
		sent = append(sent, in)
	}
	for _, in := range e.On.DescribeImages.Inputs() {
		sent = append(sent, in)
	}
	for _, in := range e.On.DescribeCapacityReservations.Inputs() {
		sent = append(sent, in)
	}
	var userData []string
	for _, in := range e.On.CreateLaunchTemplate.Inputs() {
		sent = append(sent, in)
		b, err := base64.StdEncoding.DecodeString(aws.ToString(in.LaunchTemplateData.UserData))
		if err != nil {
			t.Fatalf("launch template user data is not base64: %v", err)
		}
		userData = append(userData, string(b))
	}
	for _, in := range e.On.CreateFleet.Inputs() {
		sent = append(sent, in)
	}
	b, err := json.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n" + strings.Join(userData, "\n")
}

func TestEveryEC2NodeClassFieldReachesTheLaunchOrIsRefused(t *testing.T) {
	spec := reflect.TypeOf(v1.EC2NodeClassSpec{})
	fields := map[string]bool{}
	for i := range spec.NumField() {
		name, _, _ := strings.Cut(spec.Field(i).Tag.Get("json"), ",")
		fields[name] = true
		if _, ok := fieldCases[name]; !ok {
			t.Errorf("spec.%s has no case: show it reaches the launch or add it to v1.UnappliedFields", name)
		}
	}
	for name := range fieldCases {
		if !fields[name] {
			t.Errorf("case %q names no field of EC2NodeClassSpec", name)
		}
	}
	var unapplied []string
	for _, u := range v1.UnappliedFields {
		unapplied = append(unapplied, u.Path)
	}
	base := launchRequests(t, fieldsClass())
	for name, c := range fieldCases {
		t.Run(name, func(t *testing.T) {
			nc := fieldsClass()
			c.set(&nc)
			nc.SetDefaults()
			err := nc.Validate()
			path := "spec." + name
			if c.refused {
				if err == nil || !strings.Contains(err.Error(), path+": not supported") {
					t.Fatalf("Validate() error = %v; want it to refuse %s", err, path)
				}
				if !slices.Contains(unapplied, path) {
					t.Errorf("v1.UnappliedFields lacks %s", path)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() error = %v; want the realistic value accepted", err)
			}
			if slices.Contains(unapplied, path) {
				t.Errorf("v1.UnappliedFields lists %s, which reaches the launch", path)
			}
			got := launchRequests(t, nc)
			for _, w := range c.want {
				if strings.Contains(base, w) {
					t.Errorf("the launch without %s already sends %q; the case proves nothing", path, w)
				}
				if !strings.Contains(got, w) {
					t.Errorf("the launch with %s sends no %q; requests:\n%s", path, w, got)
				}
			}
		})
	}
}
