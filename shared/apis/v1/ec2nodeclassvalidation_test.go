package v1_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func TestEC2NodeClassValidate(t *testing.T) {
	tests := []struct {
		name string
		give *v1.EC2NodeClass
	}{
		{name: "should accept a minimal alias class", give: nodeClass()},
		{name: "should accept amiFamily Custom with an alias", give: nodeClass(func(nc *v1.EC2NodeClass) { nc.Spec.AMIFamily = ptr("Custom") })},
		{name: "should accept amiFamily equal to the alias family", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMIFamily = ptr("Bottlerocket")
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "bottlerocket@v1.20.0"}}
		})},
		{name: "should accept windows@latest", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "windows2022@latest"}}
		})},
		{name: "should accept several non-alias AMI terms with an amiFamily", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMIFamily = ptr("AL2023")
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{ID: "ami-0123abc"}, {Name: "my-ami-*", Owner: "self"}, {Tags: map[string]string{"a": "*"}}, {SSMParameter: "/my/ami"}}
		})},
		{name: "should accept an instance profile, selector ids and names", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.Role = ""
			nc.Spec.InstanceProfile = ptr("KarpenterProfile")
			nc.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{ID: "subnet-0a1b"}}
			nc.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{ID: "sg-0a1b"}, {Name: "default"}}
		})},
		{name: "should accept a placement group selector by id", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{ID: "pg-0a1b"}
		})},
		{name: "should accept a placement group selector by name", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: "training"}
		})},
		{name: "should accept a full kubelet, disks and interfaces", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.Kubelet = &v1.KubeletConfiguration{
				MaxPods: ptr(int32(110)), PodsPerCore: ptr(int32(0)),
				SystemReserved:              map[string]string{"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi", "pid": "100"},
				KubeReserved:                map[string]string{"cpu": "200m"},
				EvictionHard:                map[string]string{"memory.available": "5%", "nodefs.available": "10%", "pid.available": "100"},
				EvictionSoft:                map[string]string{"memory.available": "500Mi"},
				EvictionSoftGracePeriod:     map[string]v1.Duration{"memory.available": {Raw: "1m30s"}},
				ImageGCHighThresholdPercent: ptr(int32(85)), ImageGCLowThresholdPercent: ptr(int32(80)),
			}
			nc.Spec.BlockDeviceMappings = []*v1.BlockDeviceMapping{
				{DeviceName: ptr("/dev/xvda"), RootVolume: true, EBS: &v1.BlockDevice{VolumeSize: quantity("59000Gi"), VolumeType: ptr("gp3")}},
				{DeviceName: ptr("/dev/xvdb"), EBS: &v1.BlockDevice{SnapshotID: ptr("snap-1"), VolumeInitializationRate: ptr(int32(300))}},
				{DeviceName: ptr("/dev/xvdc"), EBS: &v1.BlockDevice{VolumeSize: quantity("64T")}},
			}
			nc.Spec.NetworkInterfaces = []v1.NetworkInterface{{InterfaceType: "interface"}, {NetworkCardIndex: 1, InterfaceType: "efa-only"}}
			nc.Spec.InstanceStorePolicy = ptr("RAID0")
			nc.Spec.Tags = map[string]string{"team": "a", "kubernetes.io/role": "ok"}
			nc.Spec.MetadataOptions.HTTPPutResponseHopLimit = ptr(int64(64))
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.give.Validate(); err != nil {
				t.Errorf("Validate() error:\n%v", err)
			}
		})
	}
}

func TestEC2NodeClassValidateErrors(t *testing.T) {
	tests := []struct {
		name string
		give *v1.EC2NodeClass
		want []string
	}{
		{name: "should fail when both role and instanceProfile are set", give: nodeClass(func(nc *v1.EC2NodeClass) { nc.Spec.InstanceProfile = ptr("p") }),
			want: []string{`spec: set exactly one of role or instanceProfile; both are set`}},
		{name: "should fail when neither role nor instanceProfile is set", give: nodeClass(func(nc *v1.EC2NodeClass) { nc.Spec.Role = "" }),
			want: []string{`spec: set exactly one of role or instanceProfile; neither is set`}},
		{name: "should fail for an alias combined with other terms", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "al2023@latest"}, {ID: "ami-1"}}
		}), want: []string{`spec.amiSelectorTerms[0].alias: an alias must be the only amiSelectorTerms entry`}},
		{name: "should fail for an alias combined with fields of its term", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "al2023@latest", Owner: "self"}}
		}), want: []string{`spec.amiSelectorTerms[0]: alias cannot be combined with tags, id, name, owner or ssmParameter`}},
		{name: "should fail for an unknown alias family", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "ubuntu@latest"}}
		}), want: []string{`spec.amiSelectorTerms[0].alias: family "ubuntu" is not one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025`}},
		{name: "should fail for a malformed alias", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "al2023"}}
		}), want: []string{`spec.amiSelectorTerms[0].alias: "al2023" is not of the form family@version, such as "al2023@latest"`}},
		{name: "should fail for a windows alias not at latest", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "windows2019@v1"}}
		}), want: []string{`spec.amiSelectorTerms[0].alias: windows families accept only version "latest" (windows2019@latest)`}},
		{name: "should fail for amiFamily mismatching the alias", give: nodeClass(func(nc *v1.EC2NodeClass) { nc.Spec.AMIFamily = ptr("AL2") }),
			want: []string{`spec.amiFamily: "AL2" does not match the alias family AL2023; use AL2023 or Custom, or omit amiFamily`}},
		{name: "should fail for an unknown amiFamily", give: nodeClass(func(nc *v1.EC2NodeClass) { nc.Spec.AMIFamily = ptr("Ubuntu") }),
			want: []string{`spec.amiFamily: "Ubuntu" is not one of AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025`}},
		{name: "should fail without amiFamily when no term is an alias", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{ID: "ami-1", Name: "x"}, {Owner: "self"}}
		}), want: []string{
			`spec.amiSelectorTerms[0]: id cannot be combined with tags, name or owner`,
			`spec.amiSelectorTerms[1]: set one of alias, tags, id, name or ssmParameter`,
			`spec.amiFamily: required unless amiSelectorTerms has an alias; one of AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025`,
		}},
		{name: "should fail for missing amiSelectorTerms", give: nodeClass(func(nc *v1.EC2NodeClass) { nc.Spec.AMISelectorTerms = nil; nc.Spec.AMIFamily = ptr("AL2023") }),
			want: []string{`spec.amiSelectorTerms: required: at least one term`}},
		{name: "should fail for empty subnetSelectorTerms and an empty term", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = nil
			nc.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{}}}
		}), want: []string{`spec.subnetSelectorTerms: required: at least one term`, `spec.securityGroupSelectorTerms[0]: set one of tags, id or name`}},
		{name: "should fail for a bad subnet id combined with tags", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{ID: "sn-123", Tags: map[string]string{"a": "b"}}}
		}), want: []string{`spec.subnetSelectorTerms[0]: id cannot be combined with tags`, `spec.subnetSelectorTerms[0].id: "sn-123" is not a subnet id (subnet-...)`}},
		{name: "should fail for a security group id and name together", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{ID: "sg-1", Name: "default"}, {Name: "x", Tags: map[string]string{"a": "b"}}}
		}), want: []string{`spec.securityGroupSelectorTerms[0]: id cannot be combined with tags or name`, `spec.securityGroupSelectorTerms[1]: name cannot be combined with tags`}},
		{name: "should fail for empty tag values and too many tags", give: nodeClass(func(nc *v1.EC2NodeClass) {
			tags := map[string]string{"empty": ""}
			for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"} {
				tags[k] = "v"
			}
			nc.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{Tags: tags}}
		}), want: []string{`spec.subnetSelectorTerms[0].tags: has 21 tags, at most 20 are allowed`, `spec.subnetSelectorTerms[0].tags[empty]: empty tag values are not supported; use "*" to match any value`}},
		{name: "should fail for capacity reservation and placement group rules", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{ID: "cr-1", OwnerID: "1"}, {OwnerID: "123456789012"}, {InstanceMatchCriteria: "any"}}
			nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: "a", ID: "pg-1"}
		}), want: []string{
			`spec.capacityReservationSelectorTerms[0]: id cannot be combined with tags, ownerID or instanceMatchCriteria`,
			`spec.capacityReservationSelectorTerms[0].ownerID: "1" is not a 12-digit AWS account id`,
			`spec.capacityReservationSelectorTerms[1]: set one of tags, id or instanceMatchCriteria`,
			`spec.capacityReservationSelectorTerms[2].instanceMatchCriteria: "any" is not one of open, targeted`,
			`spec.placementGroupSelector: set exactly one of name or id`,
		}},
		{name: "should fail for a placement group id that is not pg-...", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{ID: "training"}
		}), want: []string{`spec.placementGroupSelector.id: "training" is not a placement group id (pg-...)`}},
		{name: "should fail for restricted tag keys", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.Tags = map[string]string{"eks:eks-cluster-name": "a", "kubernetes.io/cluster/c": "owned", "karpenter.sh/nodepool": "x", "karpenter.sh/nodeclaim": "y", "karpenter.k8s.aws/ec2nodeclass": "z"}
		}), want: []string{
			`spec.tags[eks:eks-cluster-name]: tag "eks:eks-cluster-name" is restricted; Karpenter sets it`,
			`spec.tags[karpenter.k8s.aws/ec2nodeclass]: tag "karpenter.k8s.aws/ec2nodeclass" is restricted; Karpenter sets it`,
			`spec.tags[karpenter.sh/nodeclaim]: tag "karpenter.sh/nodeclaim" is restricted; Karpenter sets it`,
			`spec.tags[karpenter.sh/nodepool]: tag "karpenter.sh/nodepool" is restricted; Karpenter sets it`,
			`spec.tags[kubernetes.io/cluster/c]: tags starting with "kubernetes.io/cluster" are restricted; Karpenter sets the cluster tag`,
		}},
		{name: "should fail for two root volumes and a mapping without size or snapshot", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*v1.BlockDeviceMapping{
				{RootVolume: true, EBS: &v1.BlockDevice{VolumeSize: quantity("20Gi")}},
				{RootVolume: true, EBS: &v1.BlockDevice{VolumeType: ptr("gp3")}},
			}
		}), want: []string{
			`spec.blockDeviceMappings[1].rootVolume: only one mapping may be the root volume; spec.blockDeviceMappings[0] already is`,
			`spec.blockDeviceMappings[1].ebs: set volumeSize or snapshotID`,
		}},
		{name: "should fail for volume size, type and initialization rate rules", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*v1.BlockDeviceMapping{
				{EBS: &v1.BlockDevice{VolumeSize: quantity("59001Gi"), VolumeType: ptr("gp4")}},
				{EBS: &v1.BlockDevice{VolumeSize: quantity("100"), VolumeInitializationRate: ptr(int32(50))}},
			}
		}), want: []string{
			`spec.blockDeviceMappings[0].ebs.volumeSize: "59001Gi" is not a size from 1Gi to 59000Gi (or 1G to 64000G, 1Ti to 58Ti, 1T to 64T)`,
			`spec.blockDeviceMappings[0].ebs.volumeType: "gp4" is not one of standard, io1, io2, gp2, sc1, st1, gp3`,
			`spec.blockDeviceMappings[1].ebs.volumeSize: "100" is not a size from 1Gi to 59000Gi (or 1G to 64000G, 1Ti to 58Ti, 1T to 64T)`,
			`spec.blockDeviceMappings[1].ebs.volumeInitializationRate: 50 is out of range 100..300 (MiB/s)`,
			`spec.blockDeviceMappings[1].ebs.volumeInitializationRate: needs snapshotID`,
		}},
		{name: "should fail for metadata options out of range", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.MetadataOptions = &v1.MetadataOptions{HTTPEndpoint: ptr("on"), HTTPProtocolIPv6: ptr("yes"), HTTPPutResponseHopLimit: ptr(int64(65)), HTTPTokens: ptr("maybe")}
		}), want: []string{
			`spec.metadataOptions.httpEndpoint: "on" is not one of enabled, disabled`,
			`spec.metadataOptions.httpProtocolIPv6: "yes" is not one of enabled, disabled`,
			`spec.metadataOptions.httpPutResponseHopLimit: 65 is out of range 1..64`,
			`spec.metadataOptions.httpTokens: "maybe" is not one of required, optional`,
		}},
		{name: "should fail for network interface rules", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []v1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "efa-only"},
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "efa-only"},
				{NetworkCardIndex: -1, DeviceIndex: 1, InterfaceType: "eni"},
			}
		}), want: []string{
			`spec.networkInterfaces[1]: networkCardIndex 0 and deviceIndex 0 are already used by spec.networkInterfaces[0]`,
			`spec.networkInterfaces[1]: network card 0 already has an efa-only interface; at most one is allowed per card`,
			`spec.networkInterfaces[2].networkCardIndex: -1 is negative`,
			`spec.networkInterfaces[2].interfaceType: "eni" is not one of interface, efa-only`,
			`spec.networkInterfaces: must include the primary interface: networkCardIndex 0, deviceIndex 0, interfaceType interface`,
		}},
		{name: "should fail for connection tracking out of range or empty", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.ConnectionTracking = &v1.ConnectionTracking{TCPEstablishedTimeout: ptr(int32(59)), UDPStreamTimeout: ptr(int32(181)), UDPTimeout: ptr(int32(61))}
		}), want: []string{
			`spec.connectionTracking.tcpEstablishedTimeout: 59 is out of range 60..432000 (seconds)`,
			`spec.connectionTracking.udpStreamTimeout: 181 is out of range 60..180 (seconds)`,
			`spec.connectionTracking.udpTimeout: 61 is out of range 30..60 (seconds)`,
		}},
		{name: "should fail for kubelet rules", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.Kubelet = &v1.KubeletConfiguration{
				MaxPods:                     ptr(int32(-1)),
				KubeReserved:                map[string]string{"gpu": "1", "memory": "-1Gi"},
				EvictionHard:                map[string]string{"memory.free": "1Gi", "nodefs.available": "110%"},
				EvictionSoft:                map[string]string{"memory.available": "1Gi"},
				EvictionSoftGracePeriod:     map[string]v1.Duration{"nodefs.available": {Raw: "1 minute"}},
				ImageGCHighThresholdPercent: ptr(int32(50)), ImageGCLowThresholdPercent: ptr(int32(50)),
			}
		}), want: []string{
			`spec.kubelet.maxPods: -1 is negative`,
			`spec.kubelet.kubeReserved[gpu]: "gpu" is not one of cpu, memory, ephemeral-storage, pid`,
			`spec.kubelet.kubeReserved[memory]: "-1Gi" is negative`,
			`spec.kubelet.evictionHard[memory.free]: "memory.free" is not an eviction signal; one of memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available`,
			`spec.kubelet.evictionHard[nodefs.available]: "110%" is not a percentage from 0% to 100%`,
			`spec.kubelet.evictionSoftGracePeriod[nodefs.available]: "1 minute" is not a duration such as "1m30s"`,
			`spec.kubelet.evictionSoftGracePeriod[nodefs.available]: has no matching evictionSoft[nodefs.available]`,
			`spec.kubelet.evictionSoft[memory.available]: needs a matching evictionSoftGracePeriod[memory.available]`,
			`spec.kubelet.imageGCHighThresholdPercent: 50 must be greater than imageGCLowThresholdPercent (50)`,
		}},
		{name: "should fail for a negative ipPrefixCount and bad enums", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.IPPrefixCount = ptr(int32(-1))
			nc.Spec.InstanceStorePolicy = ptr("RAID1")
			nc.Spec.CPUOptions = &v1.CPUOptions{NestedVirtualization: ptr("on")}
		}), want: []string{
			`spec.ipPrefixCount: -1 is negative`,
			`spec.instanceStorePolicy: "RAID1" is not one of RAID0`,
			`spec.cpuOptions.nestedVirtualization: "on" is not one of enabled, disabled`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if err == nil {
				t.Fatalf("Validate() error = nil, want %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, lines(t, err)); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEC2NodeClassAMIFamily(t *testing.T) {
	tests := []struct {
		name string
		give *v1.EC2NodeClass
		want string
	}{
		{name: "should resolve the family of an alias", give: nodeClass(), want: "AL2023"},
		{name: "should prefer the alias family over amiFamily Custom", give: nodeClass(func(nc *v1.EC2NodeClass) { nc.Spec.AMIFamily = ptr("Custom") }), want: "AL2023"},
		{name: "should use amiFamily without an alias", give: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{ID: "ami-1"}}
			nc.Spec.AMIFamily = ptr("Bottlerocket")
		}), want: "Bottlerocket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.give.AMIFamily(); got != tt.want {
				t.Errorf("AMIFamily() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEC2NodeClassWarnings(t *testing.T) {
	nc := nodeClass(func(nc *v1.EC2NodeClass) { nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "al2@latest"}} })
	want := []v1.FieldError{{Path: "spec.amiSelectorTerms[0].alias", Message: "al2 AMIs are not published for Kubernetes 1.33 and later (Karpenter reports UnsupportedAlias there)"}}
	if diff := cmp.Diff(want, nc.Warnings()); diff != "" {
		t.Errorf("Warnings() mismatch (-want +got):\n%s", diff)
	}
}

func TestKubeletRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		give string
	}{
		{name: "should keep typed fields and their text", give: `{"maxPods":110,"evictionSoftGracePeriod":{"memory.available":"90s"}}`},
		{name: "should keep keys newer than v1.14.1", give: `{"maxPods":110,"registryPullQPS":5,"topologyManagerPolicy":"single-numa-node"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var k v1.KubeletConfiguration
			if err := json.Unmarshal([]byte(tt.give), &k); err != nil {
				t.Fatalf("Unmarshal() error = %v", err)
			}
			got, err := json.Marshal(k)
			if err != nil {
				t.Fatalf("Marshal() error = %v", err)
			}
			if diff := cmp.Diff(tt.give, string(got)); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
