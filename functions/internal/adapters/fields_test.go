package adapters_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
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
// what a launch of the class observably sends or decides then contains
// every want string, which the launch of fieldsClass does not, or
// Validate refuses the class naming the field (refused). What a launch
// sends: the requests of the adapters (DescribeSubnets,
// DescribeSecurityGroups, DescribeImages, DescribeCapacityReservations,
// DescribePlacementGroups,
// SSM GetParameter, CreateLaunchTemplate with its user data decoded,
// CreateFleet); what it decides: the capacity of the instance type the
// NodeClaim launches as (catalog.Resolve over the resolved class), which
// is where Karpenter applies the fields no request carries (rootVolume:
// the ephemeral-storage capacity).
type fieldCase struct {
	set     func(*v1.EC2NodeClass)
	want    []string
	refused bool
	// instanceType is the type the NodeClaim launches as; "" is m5.large.
	// Fields that only some types support (more network cards, EFA) name
	// one that does.
	instanceType string
}

// fieldCases is keyed by the field's path under spec: JSON names joined
// by dots, list elements unindexed ("blockDeviceMappings.ebs.iops"). Every
// leaf field of v1.EC2NodeClassSpec, nested structs included, must have a
// case, unless a case refuses a field that contains it.
var fieldCases = map[string]fieldCase{
	"subnetSelectorTerms.tags": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{Tags: map[string]string{"fields-test": "subnets"}}}
	}, want: []string{`"Values":["subnets"]`, `"SubnetId":"subnet-0fields"`}},
	"subnetSelectorTerms.id": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{ID: "subnet-0fields"}}
	}, want: []string{`"Name":"subnet-id","Values":["subnet-0fields"]`, `"SubnetId":"subnet-0fields"`}},
	"securityGroupSelectorTerms.id": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{ID: "sg-0fields"}}
	}, want: []string{`"Name":"group-id","Values":["sg-0fields"]`, `"SecurityGroupIds":["sg-0fields"]`}},
	"securityGroupSelectorTerms.tags": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"fields-test": "groups"}}}
	}, want: []string{`"Values":["groups"]`, `"SecurityGroupIds":["sg-0fields"]`}},
	"securityGroupSelectorTerms.name": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{Name: "fields"}}
	}, want: []string{`"Name":"group-name","Values":["fields"]`, `"SecurityGroupIds":["sg-0fields"]`}},
	// The reserved case: the selected reservation is discovered, its
	// offering chosen, and the launch targets it.
	"capacityReservationSelectorTerms.id": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{ID: fieldsReservation}}
	}, want: []string{`"CapacityReservationIds":["` + fieldsReservation + `"]`, fieldsTarget}},
	"capacityReservationSelectorTerms.tags": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{Tags: map[string]string{"fields-test": "reservations"}}}
	}, want: []string{`"Name":"tag:fields-test","Values":["reservations"]`, fieldsTarget}},
	"capacityReservationSelectorTerms.ownerID": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{Tags: map[string]string{"fields-test": "reservations"}, OwnerID: "210987654321"}}
	}, want: []string{`"Name":"owner-id","Values":["210987654321"]`, fieldsTarget}},
	"capacityReservationSelectorTerms.instanceMatchCriteria": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "targeted"}}
	}, want: []string{`"Name":"instance-match-criteria","Values":["targeted"]`, fieldsTarget}},
	// The group is discovered and the launch template places the
	// instance in it by ID.
	"placementGroupSelector.name": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: "training-cluster"}
	}, want: []string{`"Name":"group-name","Values":["training-cluster"]`, `"AvailabilityZoneId":null,"GroupId":"pg-0fields"`}},
	"placementGroupSelector.id": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{ID: "pg-0fields"}
	}, want: []string{`"GroupIds":["pg-0fields"]`, `"AvailabilityZoneId":null,"GroupId":"pg-0fields"`}},
	"associatePublicIPAddress": {set: func(nc *v1.EC2NodeClass) { nc.Spec.AssociatePublicIPAddress = aws.Bool(true) },
		want: []string{`"AssociatePublicIpAddress":true`}},
	"ipPrefixCount": {set: func(nc *v1.EC2NodeClass) { nc.Spec.IPPrefixCount = aws.Int32(3) },
		want: []string{`"Ipv4PrefixCount":3`}},
	"amiSelectorTerms.tags": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Tags: map[string]string{"fields-test": "fields-ami"}}}
	}, want: []string{`"Values":["fields-ami"]`, `"ImageId":"ami-0fields"`}},
	"amiSelectorTerms.id": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{ID: "ami-0fields"}}
	}, want: []string{`"Name":"image-id","Values":["ami-0fields"]`, `"ImageId":"ami-0fields"`}},
	"amiSelectorTerms.name": {set: func(nc *v1.EC2NodeClass) {
		// Without an owner Karpenter looks only at self and amazon images.
		nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Name: "fields-ami-x86_64", Owner: "111122223333"}}
	}, want: []string{`"Name":"name","Values":["fields-ami-x86_64"]`, `"ImageId":"ami-0fields"`}},
	"amiSelectorTerms.owner": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Name: "fields-ami-x86_64", Owner: "111122223333"}}
	}, want: []string{`"Owners":["111122223333"]`, `"ImageId":"ami-0fields"`}},
	"amiSelectorTerms.ssmParameter": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{SSMParameter: "/fields/node-image"}}
	}, want: []string{`"Name":"/fields/node-image"`, `"ImageId":"ami-0fields"`}},
	"amiSelectorTerms.alias": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.AMIFamily = nil
		nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "bottlerocket@v1.40.0"}}
	}, want: []string{`"Name":"/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.40.0/image_id"`, `"ImageId":"ami-0alias"`, `[settings.kubernetes]`}},
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
	"kubelet.clusterDNS": {set: kubelet(func(k *v1.KubeletConfiguration) { k.ClusterDNS = []string{"10.100.0.53"} }),
		want: []string{`10.100.0.53`}},
	"kubelet.maxPods": {set: kubelet(func(k *v1.KubeletConfiguration) { k.MaxPods = aws.Int32(17) }),
		want: []string{`"pods":"17"`, `maxPods: 17`}},
	"kubelet.podsPerCore": {set: kubelet(func(k *v1.KubeletConfiguration) { k.PodsPerCore = aws.Int32(3) }),
		want: []string{`"pods":"6"`, `podsPerCore: 3`}},
	"kubelet.systemReserved": {set: kubelet(func(k *v1.KubeletConfiguration) { k.SystemReserved = map[string]string{"cpu": "123m"} }),
		want: []string{`123m`}},
	"kubelet.kubeReserved": {set: kubelet(func(k *v1.KubeletConfiguration) { k.KubeReserved = map[string]string{"memory": "321Mi"} }),
		want: []string{`321Mi`}},
	"kubelet.evictionHard": {set: kubelet(func(k *v1.KubeletConfiguration) { k.EvictionHard = map[string]string{"memory.available": "7%"} }),
		want: []string{`7%`}},
	"kubelet.evictionSoft": {set: kubelet(func(k *v1.KubeletConfiguration) {
		k.EvictionSoft = map[string]string{"nodefs.available": "13%"}
		k.EvictionSoftGracePeriod = map[string]v1.Duration{"nodefs.available": {Duration: 77 * time.Second}}
	}), want: []string{`13%`}},
	"kubelet.evictionSoftGracePeriod": {set: kubelet(func(k *v1.KubeletConfiguration) {
		k.EvictionSoft = map[string]string{"nodefs.available": "13%"}
		k.EvictionSoftGracePeriod = map[string]v1.Duration{"nodefs.available": {Duration: 77 * time.Second}}
	}), want: []string{`1m17s`}},
	"kubelet.evictionMaxPodGracePeriod": {set: kubelet(func(k *v1.KubeletConfiguration) { k.EvictionMaxPodGracePeriod = aws.Int32(47) }),
		want: []string{`evictionMaxPodGracePeriod: 47`}},
	"kubelet.imageGCHighThresholdPercent": {set: kubelet(func(k *v1.KubeletConfiguration) { k.ImageGCHighThresholdPercent = aws.Int32(83) }),
		want: []string{`imageGCHighThresholdPercent: 83`}},
	"kubelet.imageGCLowThresholdPercent": {set: kubelet(func(k *v1.KubeletConfiguration) { k.ImageGCLowThresholdPercent = aws.Int32(37) }),
		want: []string{`imageGCLowThresholdPercent: 37`}},
	"kubelet.cpuCFSQuota": {set: kubelet(func(k *v1.KubeletConfiguration) { k.CPUCFSQuota = aws.Bool(false) }),
		want: []string{`cpuCFSQuota: false`}},
	"blockDeviceMappings.deviceName": {set: ebs(func(b *v1.BlockDeviceMapping) { b.DeviceName = aws.String("/dev/xvdq") }),
		want: []string{`"DeviceName":"/dev/xvdq"`}},
	"blockDeviceMappings.rootVolume": {set: ebs(func(b *v1.BlockDeviceMapping) { b.RootVolume = true }),
		want: []string{`"ephemeral-storage":"123Gi"`}},
	"blockDeviceMappings.ebs.deleteOnTermination": {set: ebs(func(b *v1.BlockDeviceMapping) { b.EBS.DeleteOnTermination = aws.Bool(false) }),
		want: []string{`"DeleteOnTermination":false`}},
	"blockDeviceMappings.ebs.encrypted": {set: ebs(func(b *v1.BlockDeviceMapping) { b.EBS.Encrypted = aws.Bool(false) }),
		want: []string{`"Encrypted":false`}},
	"blockDeviceMappings.ebs.iops": {set: ebs(func(b *v1.BlockDeviceMapping) { b.EBS.IOPS = aws.Int64(4000) }),
		want: []string{`"Iops":4000`}},
	"blockDeviceMappings.ebs.kmsKeyID": {set: ebs(func(b *v1.BlockDeviceMapping) {
		b.EBS.KMSKeyID = aws.String("arn:aws:kms:us-east-1:111122223333:key/fields")
	}),
		want: []string{`"KmsKeyId":"arn:aws:kms:us-east-1:111122223333:key/fields"`}},
	"blockDeviceMappings.ebs.snapshotID": {set: ebs(func(b *v1.BlockDeviceMapping) { b.EBS.SnapshotID = aws.String("snap-0fields") }),
		want: []string{`"SnapshotId":"snap-0fields"`}},
	"blockDeviceMappings.ebs.throughput": {set: ebs(func(b *v1.BlockDeviceMapping) { b.EBS.Throughput = aws.Int64(321) }),
		want: []string{`"Throughput":321`}},
	"blockDeviceMappings.ebs.volumeInitializationRate": {set: ebs(func(b *v1.BlockDeviceMapping) {
		b.EBS.SnapshotID, b.EBS.VolumeInitializationRate = aws.String("snap-0fields"), aws.Int32(150)
	}), want: []string{`"VolumeInitializationRate":150`}},
	"blockDeviceMappings.ebs.volumeSize": {set: ebs(func(*v1.BlockDeviceMapping) {}),
		want: []string{`"VolumeSize":123`}},
	"blockDeviceMappings.ebs.volumeType": {set: ebs(func(b *v1.BlockDeviceMapping) { b.EBS.VolumeType = aws.String("io2") }),
		want: []string{`"VolumeType":"io2"`}},
	"instanceStorePolicy": {set: func(nc *v1.EC2NodeClass) { nc.Spec.InstanceStorePolicy = aws.String("RAID0") },
		want: []string{`RAID0`}},
	"networkInterfaces.networkCardIndex": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.NetworkInterfaces = []v1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"},
			{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "interface"},
		}
	}, want: []string{`"NetworkCardIndex":1`}, instanceType: "c6in.32xlarge"},
	"networkInterfaces.deviceIndex": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.NetworkInterfaces = []v1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "interface"},
		}
	}, want: []string{`"DeviceIndex":1`}},
	"networkInterfaces.interfaceType": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.NetworkInterfaces = []v1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"},
		}
	}, want: []string{`"InterfaceType":"efa-only"`}, instanceType: "c5n.18xlarge"},
	"detailedMonitoring": {set: func(nc *v1.EC2NodeClass) { nc.Spec.DetailedMonitoring = aws.Bool(true) },
		want: []string{`"Monitoring":{"Enabled":true`}},
	"metadataOptions.httpEndpoint": {set: metadata(func(m *v1.MetadataOptions) { m.HTTPEndpoint = aws.String("disabled") }),
		want: []string{`"HttpEndpoint":"disabled"`}},
	"metadataOptions.httpProtocolIPv6": {set: metadata(func(m *v1.MetadataOptions) { m.HTTPProtocolIPv6 = aws.String("enabled") }),
		want: []string{`"HttpProtocolIpv6":"enabled"`}},
	"metadataOptions.httpPutResponseHopLimit": {set: metadata(func(m *v1.MetadataOptions) { m.HTTPPutResponseHopLimit = aws.Int64(2) }),
		want: []string{`"HttpPutResponseHopLimit":2`}},
	"metadataOptions.httpTokens": {set: metadata(func(m *v1.MetadataOptions) { m.HTTPTokens = aws.String("optional") }),
		want: []string{`"HttpTokens":"optional"`}},
	"connectionTracking.tcpEstablishedTimeout": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.ConnectionTracking = &v1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(3600)}
	}, want: []string{`"TcpEstablishedTimeout":3600`}},
	"connectionTracking.udpStreamTimeout": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.ConnectionTracking = &v1.ConnectionTracking{UDPStreamTimeout: aws.Int32(120)}
	}, want: []string{`"UdpStreamTimeout":120`}},
	"connectionTracking.udpTimeout": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.ConnectionTracking = &v1.ConnectionTracking{UDPTimeout: aws.Int32(45)}
	}, want: []string{`"UdpTimeout":45`}},
	"context": {set: func(nc *v1.EC2NodeClass) { nc.Spec.Context = aws.String("c-0fields") },
		want: []string{`"Context":"c-0fields"`}},
	"cpuOptions.nestedVirtualization": {set: func(nc *v1.EC2NodeClass) {
		nc.Spec.CPUOptions = &v1.CPUOptions{NestedVirtualization: aws.String("disabled")}
	}, want: []string{`"NestedVirtualization":"disabled"`}},
}

// fieldsReservation is the capacity reservation fieldsEC2 answers every
// DescribeCapacityReservations call with; fieldsTarget is how a launch
// template targets it.
const (
	fieldsReservation = "cr-0123456789abcdef0"
	fieldsTarget      = `"CapacityReservationPreference":"capacity-reservations-only","CapacityReservationTarget":{"CapacityReservationId":"cr-0123456789abcdef0"`
)

// kubelet returns a case setter of spec.kubelet with only what edit sets.
func kubelet(edit func(*v1.KubeletConfiguration)) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) {
		nc.Spec.Kubelet = &v1.KubeletConfiguration{}
		edit(nc.Spec.Kubelet)
	}
}

// ebs returns a case setter of one 123Gi EBS mapping at /dev/xvdf,
// edited by edit.
func ebs(edit func(*v1.BlockDeviceMapping)) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) {
		size := resource.MustParse("123Gi")
		b := &v1.BlockDeviceMapping{DeviceName: aws.String("/dev/xvdf"), EBS: &v1.BlockDevice{VolumeSize: &size}}
		edit(b)
		nc.Spec.BlockDeviceMappings = []*v1.BlockDeviceMapping{b}
	}
}

// metadata returns a case setter of spec.metadataOptions with only what
// edit sets.
func metadata(edit func(*v1.MetadataOptions)) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) {
		nc.Spec.MetadataOptions = &v1.MetadataOptions{}
		edit(nc.Spec.MetadataOptions)
	}
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

// fieldsEC2 holds a base subnet, security group and AMI, one of each that
// only a field's case selects, and the image of the bottlerocket alias;
// it answers each of the calls a class's capacityReservationSelectorTerms
// make with fieldsReservation (m5.large in us-east-1a, 2 free).
func fieldsEC2(t *testing.T, nc v1.EC2NodeClass) *awstest.EC2 {
	e := awstest.NewEC2(t)
	e.AddSubnet("subnet-0base", "us-east-1a", "use1-az1", 4000, map[string]string{"karpenter.sh/discovery": "prod"})
	e.AddSubnet("subnet-0fields", "us-east-1a", "use1-az1", 4000, map[string]string{"fields-test": "subnets"})
	e.AddSecurityGroup("sg-0base", "nodes", map[string]string{"karpenter.sh/discovery": "prod"})
	e.AddSecurityGroup("sg-0fields", "fields", map[string]string{"fields-test": "groups"})
	e.AddPlacementGroup(ec2types.PlacementGroup{GroupId: aws.String("pg-0fields"), GroupName: aws.String("training-cluster"), Strategy: ec2types.PlacementStrategyCluster})
	for _, id := range []string{"ami-0base", "ami-0fields", "ami-0alias"} {
		e.AddImage(ec2types.Image{
			ImageId: aws.String(id), Name: aws.String(strings.Replace(id, "ami-0", "", 1) + "-ami-x86_64"), Architecture: ec2types.ArchitectureValuesX8664,
			CreationDate: aws.String("2026-11-01T00:00:00Z"), OwnerId: aws.String("111122223333"), State: ec2types.ImageStateAvailable,
			Tags: []ec2types.Tag{{Key: aws.String("fields-test"), Value: aws.String(strings.TrimPrefix(id, "ami-0") + "-ami")}},
		})
	}
	calls, byID := 0, false
	for _, term := range nc.Spec.CapacityReservationSelectorTerms {
		if term.ID != "" {
			byID = true
		} else {
			calls++
		}
	}
	if byID {
		calls++
	}
	for range calls {
		e.On.DescribeCapacityReservations.Push(&ec2.DescribeCapacityReservationsOutput{
			CapacityReservations: []ec2types.CapacityReservation{{
				CapacityReservationId: aws.String(fieldsReservation), AvailabilityZone: aws.String("us-east-1a"), InstanceType: aws.String("m5.large"),
				OwnerId: aws.String("210987654321"), InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted,
				ReservationType: ec2types.CapacityReservationTypeDefault, AvailableInstanceCount: aws.Int32(2), State: ec2types.CapacityReservationStateActive,
			}},
		}, nil)
	}
	return e
}

// fieldsSSM holds the parameter of the ssmParameter case and the
// bottlerocket alias's image parameter.
func fieldsSSM(t *testing.T) *awstest.SSM {
	s := awstest.NewSSM(t)
	s.Put("/fields/node-image", "ami-0fields")
	s.Put("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.40.0/image_id", "ami-0alias")
	return s
}

// launchRequests resolves nc and launches one NodeClaim of it as
// instanceType ("" is m5.large) through the adapters (NodeClasses,
// catalog.Resolve, Launcher with fleet.Client and nodeclass.Resolver),
// returning the JSON of every request they sent, the launch-template user
// data decoded, and the capacity of the instance type launched.
// resolveAndLaunch resolves nc with resolver (as NodeClasses does) and
// launches one NodeClaim of it as instanceType ("" is m5.large) through
// Launcher with fleet.Client over e, returning the instance type launched.
func resolveAndLaunch(t *testing.T, e *awstest.EC2, resolver *nodeclass.Resolver, nc v1.EC2NodeClass, instanceType string) *catalog.InstanceType {
	t.Helper()
	res, it := resolveOffering(t, resolver, nc, instanceType)
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
	return it
}

// resolveOffering resolves nc with resolver through NodeClasses and
// returns it with its instance type name ("" is m5.large) as
// catalog.Resolve offers it, reserved offerings counted from the
// resolution's ReservationCapacity.
func resolveOffering(t *testing.T, resolver *nodeclass.Resolver, nc v1.EC2NodeClass, instanceType string) (provisioning.ResolvedNodeClass, *catalog.InstanceType) {
	t.Helper()
	res, err := adapters.NodeClasses{Resolver: resolver, KubernetesVersion: "1.33"}.ResolveNodeClass(context.Background(), nc)
	if err != nil {
		t.Fatalf("ResolveNodeClass() error = %v", err)
	}
	if r := res.NodeClass.Status.Conditions; len(r) != 1 || r[0].Status != metav1.ConditionTrue {
		t.Fatalf("ResolveNodeClass() conditions = %+v; want Ready", r)
	}
	types, _, err := catalog.Resolve(&res.NodeClass, catalog.Options{Region: "us-east-1", ReservationCapacity: res.ReservationCapacity})
	if err != nil {
		t.Fatalf("catalog.Resolve() error = %v", err)
	}
	name := cmp.Or(instanceType, "m5.large")
	i := slices.IndexFunc(types, func(it *catalog.InstanceType) bool { return it.Name == name })
	if i < 0 {
		t.Fatalf("catalog.Resolve() offers no %s for the class", name)
	}
	return res, types[i]
}

// A launch into a capacity reservation lowers the count the next
// resolution offers before DescribeCapacityReservations is read again.
func TestLaunchIntoAReservationLowersItsCountUntilTheNextRead(t *testing.T) {
	nc := fieldsClass()
	nc.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{ID: fieldsReservation}}
	e, s := fieldsEC2(t, nc), fieldsSSM(t)
	resolver := nodeclass.New(e, s, func() time.Time { return t0 })
	resolveAndLaunch(t, e, resolver, nc, "")
	lts, err := json.Marshal(e.On.CreateLaunchTemplate.Inputs())
	if err != nil {
		t.Fatal(err)
	}
	if fleets := e.On.CreateFleet.Inputs(); len(fleets) != 1 || !strings.Contains(string(lts), fieldsTarget) {
		t.Fatalf("CreateFleet inputs = %d, launch templates %s; want one launch targeting %s", len(fleets), lts, fieldsReservation)
	}
	res, it := resolveOffering(t, resolver, nc, "")
	if !res.NodeClass.CapacityReservationsResolved() {
		t.Errorf("resolved class conditions %+v: CapacityReservationsResolved() = false, want true (demotion and CapacityReservationDrift read it)", res.NodeClass.Status.Conditions)
	}
	if got := res.ReservationCapacity[fieldsReservation]; got != 1 {
		t.Errorf("after one launch into a reservation of 2: ReservationCapacity = %d, want 1", got)
	}
	for _, o := range it.Offerings {
		if o.ReservationID == fieldsReservation && o.ReservationCapacity != 1 {
			t.Errorf("reserved offering %s/%s: capacity %d, want 1", it.Name, o.Zone, o.ReservationCapacity)
		}
	}
	if calls := e.On.DescribeCapacityReservations.Count(); calls != 1 {
		t.Errorf("DescribeCapacityReservations calls = %d, want 1 (the kept read, lowered)", calls)
	}
}

func launchRequests(t *testing.T, nc v1.EC2NodeClass, instanceType string) string {
	t.Helper()
	e, s := fieldsEC2(t, nc), fieldsSSM(t)
	resolver := nodeclass.New(e, s, func() time.Time { return t0 })
	it := resolveAndLaunch(t, e, resolver, nc, instanceType)
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
	for _, in := range e.On.DescribePlacementGroups.Inputs() {
		sent = append(sent, in)
	}
	for _, in := range s.On.GetParameter.Inputs() {
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
	capacity, err := json.Marshal(it.Capacity)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n" + strings.Join(userData, "\n") + "\ncapacity " + string(capacity)
}

// specLeaves walks typ, a struct of package v1, and returns the path under
// spec of every leaf field (one that is not itself a struct of package v1,
// through pointers and slices) and every struct field whose path stop
// reports true, without descending below it. JSON names are the paths'
// elements; fields without a JSON name (json:"-") are skipped.
func specLeaves(typ reflect.Type, prefix string, stop func(string) bool) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Struct || ft.PkgPath() != reflect.TypeFor[v1.EC2NodeClassSpec]().PkgPath() || stop(path) {
			out = append(out, path)
			continue
		}
		out = append(out, specLeaves(ft, path, stop)...)
	}
	return out
}

func TestEveryEC2NodeClassFieldReachesTheLaunchOrIsRefused(t *testing.T) {
	refused := func(path string) bool { return fieldCases[path].refused }
	leaves := specLeaves(reflect.TypeFor[v1.EC2NodeClassSpec](), "", refused)
	for _, path := range leaves {
		if _, ok := fieldCases[path]; !ok {
			t.Errorf("spec.%s has no case: show it reaches the launch or add it to v1.UnappliedFields", path)
		}
	}
	for path := range fieldCases {
		if !slices.Contains(leaves, path) {
			t.Errorf("case %q names no leaf field of EC2NodeClassSpec (nor a refused struct)", path)
		}
	}
	var unapplied []string
	for _, u := range v1.UnappliedFields {
		unapplied = append(unapplied, u.Path)
	}
	base := launchRequests(t, fieldsClass(), "")
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
			got := launchRequests(t, nc, c.instanceType)
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
