package nodeclass_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/catalog"
)

func itype(name, arch string, pods int64, gpus ...bool) *catalog.InstanceType {
	it := &catalog.InstanceType{
		Name:     name,
		Labels:   map[string]string{v1.LabelInstanceType: name, v1.LabelArch: arch, v1.LabelOS: "linux"},
		Capacity: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)},
	}
	if len(gpus) > 0 && gpus[0] {
		it.Labels[v1.LabelInstanceGPUCount] = "1"
	}
	return it
}

func standardReqs(arch string) []v1.NodeSelectorRequirementWithMinValues {
	return []v1.NodeSelectorRequirementWithMinValues{
		{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
		{Key: v1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
	}
}

// resolvedClass is an AL2023 node class with its status resolved.
func resolvedClass() *v1.EC2NodeClass {
	return &v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.EC2NodeClassSpec{
			AMISelectorTerms: []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:             "KarpenterNodeRole-prod",
			Tags:             map[string]string{"team": "platform"},
		},
		Status: v1.EC2NodeClassStatus{
			SecurityGroups:  []v1.SecurityGroup{{ID: "sg-1"}, {ID: "sg-2"}},
			InstanceProfile: "prod_123",
			AMIs: []v1.AMI{
				{ID: "ami-amd", Requirements: standardReqs("amd64")},
				{ID: "ami-arm", Requirements: standardReqs("arm64")},
			},
		},
	}
}

func claim() *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelEC2NodeClass: "default"}},
		Spec: v1.NodeClaimSpec{
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "startup", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

func templateRequest() nodeclass.TemplateRequest {
	return nodeclass.TemplateRequest{
		Cluster:      nodeclass.Cluster{Name: "prod", Endpoint: "https://prod.example", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16", DNS: "10.100.0.10"},
		NodeClass:    resolvedClass(),
		NodeClaim:    claim(),
		CapacityType: v1.CapacityTypeSpot,
		InstanceTypes: []*catalog.InstanceType{
			itype("m6g.large", "arm64", 29), itype("m5.large", "amd64", 29), itype("m5.xlarge", "amd64", 58),
			itype("g4dn.xlarge", "amd64", 29, true), itype("c5.large", "amd64", 29),
		},
	}
}

var wantTags = []ec2types.Tag{
	{Key: aws.String("eks:eks-cluster-name"), Value: aws.String("prod")},
	{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")},
	{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")},
	{Key: aws.String("kubernetes.io/cluster/prod"), Value: aws.String("owned")},
	{Key: aws.String("nodewright.dev/owner"), Value: aws.String("prod")},
	{Key: aws.String("team"), Value: aws.String("platform")},
}

func TestEnsureLaunchTemplatesGroupsByAMIAndMaxPods(t *testing.T) {
	e := awstest.NewEC2(t)
	got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), templateRequest())
	if err != nil {
		t.Fatalf("EnsureLaunchTemplates() error = %v", err)
	}
	type group struct {
		Image string
		Types []string
	}
	var groups []group
	for _, lt := range got {
		if !strings.HasPrefix(lt.Name, nodeclass.NamePrefix) || len(lt.Name) != len(nodeclass.NamePrefix)+32 {
			t.Errorf("name %q: want %s and 32 hex digits", lt.Name, nodeclass.NamePrefix)
		}
		groups = append(groups, group{lt.ImageID, lt.InstanceTypes})
	}
	want := []group{
		{"ami-arm", []string{"m6g.large"}},
		{"ami-amd", []string{"m5.large", "c5.large"}},
		{"ami-amd", []string{"m5.xlarge"}},
	}
	if diff := cmp.Diff(want, groups); diff != "" {
		t.Errorf("groups mismatch (-want +got):\n%s", diff)
	}
	if n := e.On.CreateLaunchTemplate.Count(); n != 3 {
		t.Errorf("CreateLaunchTemplate calls = %d, want 3", n)
	}
}

func TestEnsureLaunchTemplatesData(t *testing.T) {
	e := awstest.NewEC2(t)
	req := templateRequest()
	req.InstanceTypes = req.InstanceTypes[1:2]
	got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsureLaunchTemplates() error = %v", err)
	}
	data, tags, ok := e.LaunchTemplateData(got[0].Name)
	if !ok {
		t.Fatalf("launch template %s not created", got[0].Name)
	}
	if diff := cmp.Diff(wantTags, tags, sdkOpts); diff != "" {
		t.Errorf("launch template tags mismatch (-want +got):\n%s", diff)
	}
	userData, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if err != nil {
		t.Fatalf("user data is not base64: %v", err)
	}
	for _, want := range []string{
		"kind: NodeConfig", "name: prod", "apiServerEndpoint: https://prod.example", "cidr: 10.100.0.0/16", "maxPods: 29",
		"karpenter.sh/capacity-type=spot", "karpenter.sh/nodepool=default", "key: dedicated", "key: startup", "key: karpenter.sh/unregistered",
	} {
		if !strings.Contains(string(userData), want) {
			t.Errorf("user data lacks %q:\n%s", want, userData)
		}
	}
	data.UserData = nil
	want := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String("ami-amd"),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("prod_123")},
		Monitoring:         &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(false)},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint: "enabled", HttpProtocolIpv6: "disabled", HttpPutResponseHopLimit: aws.Int32(1), HttpTokens: "required", InstanceMetadataTags: "disabled",
		},
		CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{CapacityReservationPreference: "none"},
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: wantTags},
			{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: wantTags},
		},
		BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
			DeviceName: aws.String("/dev/xvda"),
			Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination: aws.Bool(true), Encrypted: aws.Bool(true), VolumeSize: aws.Int32(20), VolumeType: "gp3",
			},
		}},
		SecurityGroupIds: []string{"sg-1", "sg-2"},
	}
	if diff := cmp.Diff(want, data, sdkOpts); diff != "" {
		t.Errorf("launch template data mismatch (-want +got):\n%s", diff)
	}
}

func TestEnsureLaunchTemplatesNetworkInterfacesAndVolumes(t *testing.T) {
	e := awstest.NewEC2(t)
	req := templateRequest()
	req.InstanceTypes = req.InstanceTypes[1:2]
	req.CapacityType = v1.CapacityTypeOnDemand
	req.NodeClass.Spec.AssociatePublicIPAddress = aws.Bool(true)
	req.NodeClass.Spec.IPPrefixCount = aws.Int32(2)
	size := resource.MustParse("100G") // 93.13 GiB, rounded up
	req.NodeClass.Spec.BlockDeviceMappings = []*v1.BlockDeviceMapping{{
		DeviceName: aws.String("/dev/xvda"),
		EBS:        &v1.BlockDevice{VolumeSize: &size, VolumeType: aws.String("io2"), IOPS: aws.Int64(3000), Encrypted: aws.Bool(true)},
	}}
	got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsureLaunchTemplates() error = %v", err)
	}
	data, _, _ := e.LaunchTemplateData(got[0].Name)
	wantNIs := []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
		NetworkCardIndex: aws.Int32(0), DeviceIndex: aws.Int32(0), Groups: []string{"sg-1", "sg-2"}, DeleteOnTermination: aws.Bool(true),
		AssociatePublicIpAddress: aws.Bool(true), Ipv4PrefixCount: aws.Int32(2),
	}}
	if diff := cmp.Diff(wantNIs, data.NetworkInterfaces, sdkOpts); diff != "" {
		t.Errorf("network interfaces mismatch (-want +got):\n%s", diff)
	}
	if data.SecurityGroupIds != nil {
		t.Errorf("SecurityGroupIds = %v, want none beside network interfaces", data.SecurityGroupIds)
	}
	wantBDMs := []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
		DeviceName: aws.String("/dev/xvda"),
		Ebs:        &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(94), VolumeType: "io2", Iops: aws.Int32(3000), Encrypted: aws.Bool(true)},
	}}
	if diff := cmp.Diff(wantBDMs, data.BlockDeviceMappings, sdkOpts); diff != "" {
		t.Errorf("block devices mismatch (-want +got):\n%s", diff)
	}
}

func TestEnsureLaunchTemplatesIsIdempotent(t *testing.T) {
	e := awstest.NewEC2(t)
	r := nodeclass.New(e, awstest.NewSSM(t), clock)
	first, err := r.EnsureLaunchTemplates(t.Context(), templateRequest())
	if err != nil {
		t.Fatalf("first EnsureLaunchTemplates() error = %v", err)
	}
	second, err := r.EnsureLaunchTemplates(t.Context(), templateRequest())
	if err != nil {
		t.Fatalf("second EnsureLaunchTemplates() error = %v", err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second call differs (-first +second):\n%s", diff)
	}
	if n := e.On.CreateLaunchTemplate.Count(); n != 3 {
		t.Errorf("CreateLaunchTemplate calls = %d, want 3 (none on the second call)", n)
	}
	onDemand := templateRequest()
	onDemand.CapacityType = v1.CapacityTypeOnDemand
	third, err := r.EnsureLaunchTemplates(t.Context(), onDemand)
	if err != nil {
		t.Fatalf("on-demand EnsureLaunchTemplates() error = %v", err)
	}
	if third[0].Name == first[0].Name {
		t.Errorf("the capacity-type label did not change the template name")
	}
}

func TestEnsureLaunchTemplatesToleratesAConcurrentCreator(t *testing.T) {
	e := awstest.NewEC2(t)
	req := templateRequest()
	req.InstanceTypes = req.InstanceTypes[1:2]
	// Another invocation creates the template between our Describe and Create.
	e.On.DescribeLaunchTemplates.Push(&ec2.DescribeLaunchTemplatesOutput{}, nil)
	r := nodeclass.New(e, awstest.NewSSM(t), clock)
	want, err := r.EnsureLaunchTemplates(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsureLaunchTemplates() error = %v", err)
	}
	e.On.DescribeLaunchTemplates.Push(&ec2.DescribeLaunchTemplatesOutput{}, nil)
	e.On.CreateLaunchTemplate.Push(nil, awstest.APIError("InvalidLaunchTemplateName.AlreadyExistsException", "taken"))
	got, err := r.EnsureLaunchTemplates(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsureLaunchTemplates() after a concurrent create error = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestEnsureLaunchTemplatesErrors(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*nodeclass.TemplateRequest)
		wantErr error
		wantMsg string
	}{
		{name: "no node class", mutate: func(r *nodeclass.TemplateRequest) { r.NodeClass = nil }, wantMsg: "node class: nil"},
		{name: "no instance profile", mutate: func(r *nodeclass.TemplateRequest) { r.NodeClass.Status.InstanceProfile = "" }, wantMsg: "instance profile"},
		{name: "no security groups", mutate: func(r *nodeclass.TemplateRequest) { r.NodeClass.Status.SecurityGroups = nil }, wantErr: nodeclass.ErrSecurityGroupsNotFound},
		{name: "no AMIs", mutate: func(r *nodeclass.TemplateRequest) { r.NodeClass.Status.AMIs = nil }, wantErr: nodeclass.ErrAMIsNotFound},
		{name: "no AMI for any type", mutate: func(r *nodeclass.TemplateRequest) {
			r.InstanceTypes = []*catalog.InstanceType{itype("g4dn.xlarge", "amd64", 29, true)}
		}, wantErr: nodeclass.ErrAMIsNotFound},
		{name: "restricted tags", mutate: func(r *nodeclass.TemplateRequest) {
			r.NodeClass.Spec.Tags = map[string]string{"eks:eks-cluster-name": "x"}
		}, wantMsg: "restricted"},
		{name: "AL2023 without a service CIDR", mutate: func(r *nodeclass.TemplateRequest) { r.Cluster.ServiceCIDR = "" }, wantMsg: "service CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := awstest.NewEC2(t)
			req := templateRequest()
			tt.mutate(&req)
			_, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
			if err == nil {
				t.Fatal("EnsureLaunchTemplates() error = nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error = %q, want it to mention %q", err, tt.wantMsg)
			}
			if n := e.On.CreateLaunchTemplate.Count(); n != 0 {
				t.Errorf("CreateLaunchTemplate calls = %d, want 0", n)
			}
		})
	}
}

func TestEnsureLaunchTemplatesCustomFamily(t *testing.T) {
	e := awstest.NewEC2(t)
	req := templateRequest()
	req.InstanceTypes = req.InstanceTypes[1:2]
	req.NodeClass.Spec.AMIFamily = aws.String(v1.AMIFamilyCustom)
	got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsureLaunchTemplates() error = %v", err)
	}
	data, _, _ := e.LaunchTemplateData(got[0].Name)
	if data.UserData != nil || data.BlockDeviceMappings != nil {
		t.Errorf("Custom without userData or blockDeviceMappings: user data %v, block devices %v; want neither", data.UserData, data.BlockDeviceMappings)
	}
	req.NodeClass.Spec.UserData = aws.String("#!/bin/bash\n/opt/boot.sh\n")
	got, err = nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsureLaunchTemplates() error = %v", err)
	}
	data, _, _ = e.LaunchTemplateData(got[0].Name)
	if b, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData)); string(b) != "#!/bin/bash\n/opt/boot.sh\n" {
		t.Errorf("Custom user data = %q, want it verbatim", b)
	}
}

func TestEnsureLaunchTemplatesConnectionTrackingOnEveryInterface(t *testing.T) {
	for name, nis := range map[string][]v1.NetworkInterface{
		"no spec.networkInterfaces": nil,
		"two network cards": {
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"},
			{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := awstest.NewEC2(t)
			req := templateRequest()
			req.InstanceTypes = req.InstanceTypes[1:2]
			req.NodeClass.Spec.NetworkInterfaces = nis
			req.NodeClass.Spec.ConnectionTracking = &v1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(3600), UDPTimeout: aws.Int32(45)}
			got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
			if err != nil {
				t.Fatalf("EnsureLaunchTemplates() error = %v", err)
			}
			data, _, _ := e.LaunchTemplateData(got[0].Name)
			want := max(len(nis), 1)
			if len(data.NetworkInterfaces) != want || data.SecurityGroupIds != nil {
				t.Fatalf("network interfaces = %d, security group ids = %v; want %d interfaces carrying the groups", len(data.NetworkInterfaces), data.SecurityGroupIds, want)
			}
			wantCT := &ec2types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: aws.Int32(3600), UdpTimeout: aws.Int32(45)}
			for i, ni := range data.NetworkInterfaces {
				if diff := cmp.Diff(wantCT, ni.ConnectionTrackingSpecification, sdkOpts); diff != "" {
					t.Errorf("interface %d connection tracking mismatch (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestEnsureLaunchTemplatesPlacementTenancy(t *testing.T) {
	for tenancy, want := range map[string]*ec2types.LaunchTemplatePlacementRequest{
		"":          nil,
		"default":   nil,
		"dedicated": {Tenancy: ec2types.TenancyDedicated},
	} {
		e := awstest.NewEC2(t)
		req := templateRequest()
		req.InstanceTypes = req.InstanceTypes[1:2]
		req.Tenancy = tenancy
		got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
		if err != nil {
			t.Fatalf("EnsureLaunchTemplates(tenancy %q) error = %v", tenancy, err)
		}
		data, _, _ := e.LaunchTemplateData(got[0].Name)
		if diff := cmp.Diff(want, data.Placement, sdkOpts); diff != "" {
			t.Errorf("tenancy %q: placement mismatch (-want +got):\n%s", tenancy, diff)
		}
	}
}

func TestEnsureLaunchTemplatesPlacementGroup(t *testing.T) {
	tests := []struct {
		name    string
		tenancy string
		want    *ec2types.LaunchTemplatePlacementRequest
	}{
		{name: "should name the resolved placement group by id", want: &ec2types.LaunchTemplatePlacementRequest{GroupId: aws.String("pg-0a1")}},
		{name: "should keep a dedicated tenancy beside the group", tenancy: "dedicated",
			want: &ec2types.LaunchTemplatePlacementRequest{GroupId: aws.String("pg-0a1"), Tenancy: ec2types.TenancyDedicated}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := awstest.NewEC2(t)
			req := templateRequest()
			req.InstanceTypes = req.InstanceTypes[1:2]
			req.Tenancy = tt.tenancy
			req.NodeClass.Status.PlacementGroup = &v1.PlacementGroup{ID: "pg-0a1", Name: "kafka", Strategy: "partition", PartitionCount: 3}
			got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
			if err != nil {
				t.Fatalf("EnsureLaunchTemplates() error = %v", err)
			}
			data, _, _ := e.LaunchTemplateData(got[0].Name)
			if diff := cmp.Diff(tt.want, data.Placement, sdkOpts); diff != "" {
				t.Errorf("placement mismatch (-want +got):\n%s", diff)
			}
			userData, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(userData), "karpenter.k8s.aws/placement-group-id=pg-0a1") {
				t.Errorf("user data registers no placement-group-id label:\n%s", userData)
			}
		})
	}
}

func TestEnsureLaunchTemplatesCPUOptions(t *testing.T) {
	for _, v := range []string{"enabled", "disabled"} {
		e := awstest.NewEC2(t)
		req := templateRequest()
		req.InstanceTypes = req.InstanceTypes[1:2]
		req.NodeClass.Spec.CPUOptions = &v1.CPUOptions{NestedVirtualization: aws.String(v)}
		got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
		if err != nil {
			t.Fatalf("EnsureLaunchTemplates(%s) error = %v", v, err)
		}
		data, _, _ := e.LaunchTemplateData(got[0].Name)
		want := &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(v)}
		if diff := cmp.Diff(want, data.CpuOptions, sdkOpts); diff != "" {
			t.Errorf("nestedVirtualization %s: cpu options mismatch (-want +got):\n%s", v, diff)
		}
	}
}

func TestEnsureLaunchTemplatesReservationMarketTypeAndLabels(t *testing.T) {
	for _, tc := range []struct {
		name          string
		resType       string
		interruptible bool
		wantMarket    *ec2types.LaunchTemplateInstanceMarketOptionsRequest
		wantLabels    []string
	}{
		{name: "on-demand capacity reservation has no market type", resType: v1.ReservationTypeDefault,
			wantLabels: []string{"karpenter.k8s.aws/capacity-reservation-type=default"}},
		{name: "reservation type unset is an on-demand capacity reservation",
			wantLabels: []string{"karpenter.k8s.aws/capacity-reservation-type=default"}},
		{name: "capacity block launches with market type capacity-block", resType: v1.ReservationTypeCapacityBlock,
			wantMarket: &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock},
			wantLabels: []string{"karpenter.k8s.aws/capacity-reservation-type=capacity-block"}},
		{name: "interruptible reservation launches with its market type", resType: v1.ReservationTypeDefault, interruptible: true,
			wantMarket: &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeInterruptibleCapacityReservation},
			wantLabels: []string{"karpenter.k8s.aws/capacity-reservation-type=default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := awstest.NewEC2(t)
			req := templateRequest()
			req.InstanceTypes = req.InstanceTypes[1:2]
			req.CapacityType = v1.CapacityTypeReserved
			req.ReservationID, req.ReservationType, req.ReservationInterruptible = "cr-0123", tc.resType, tc.interruptible
			got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
			if err != nil {
				t.Fatalf("EnsureLaunchTemplates() error = %v", err)
			}
			data, _, _ := e.LaunchTemplateData(got[0].Name)
			if diff := cmp.Diff(tc.wantMarket, data.InstanceMarketOptions, sdkOpts); diff != "" {
				t.Errorf("market options mismatch (-want +got):\n%s", diff)
			}
			wantSpec := &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
				CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
				CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String("cr-0123")},
			}
			if diff := cmp.Diff(wantSpec, data.CapacityReservationSpecification, sdkOpts); diff != "" {
				t.Errorf("capacity reservation specification mismatch (-want +got):\n%s", diff)
			}
			userData, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
			for _, want := range append([]string{"karpenter.sh/capacity-type=reserved", "karpenter.k8s.aws/capacity-reservation-id=cr-0123"}, tc.wantLabels...) {
				if !strings.Contains(string(userData), want) {
					t.Errorf("user data lacks node label %q:\n%s", want, userData)
				}
			}
			// Karpenter labels a reserved node with the reservation's ID
			// and type only (aws: pkg/cloudprovider/cloudprovider.go).
			if strings.Contains(string(userData), v1.LabelCapacityReservationInterruptible) {
				t.Errorf("user data carries %s:\n%s", v1.LabelCapacityReservationInterruptible, userData)
			}
		})
	}
}

func TestEnsureLaunchTemplatesWithoutReservationHasNoMarketType(t *testing.T) {
	e := awstest.NewEC2(t)
	req := templateRequest()
	req.InstanceTypes = req.InstanceTypes[1:2]
	req.CapacityType = v1.CapacityTypeOnDemand
	req.ReservationType = v1.ReservationTypeCapacityBlock // ignored without a reservation
	got, err := nodeclass.New(e, awstest.NewSSM(t), clock).EnsureLaunchTemplates(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsureLaunchTemplates() error = %v", err)
	}
	data, _, _ := e.LaunchTemplateData(got[0].Name)
	if data.InstanceMarketOptions != nil {
		t.Errorf("InstanceMarketOptions = %+v, want none for an on-demand launch", data.InstanceMarketOptions)
	}
	userData, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if strings.Contains(string(userData), "capacity-reservation") {
		t.Errorf("user data of an on-demand launch carries reservation labels:\n%s", userData)
	}
}
