package catalog_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// nodeClass builds an EC2NodeClass named "default" using the AL2023 alias,
// as most user manifests do; mods adjust it.
func nodeClass(mods ...func(*v1.EC2NodeClass)) *v1.EC2NodeClass {
	nc := &v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-test",
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		},
	}
	for _, m := range mods {
		m(nc)
	}
	return nc
}

func alias(a string) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) { nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: a}} }
}

func amiFamily(f string) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) {
		nc.Spec.AMIFamily = &f
		nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}
	}
}

func kubelet(mod func(*v1.KubeletConfiguration)) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) {
		if nc.Spec.Kubelet == nil {
			nc.Spec.Kubelet = &v1.KubeletConfiguration{}
		}
		mod(nc.Spec.Kubelet)
	}
}

func maxPods(n int32) func(*v1.EC2NodeClass) {
	return kubelet(func(kc *v1.KubeletConfiguration) { kc.MaxPods = &n })
}

func podsPerCore(n int32) func(*v1.EC2NodeClass) {
	return kubelet(func(kc *v1.KubeletConfiguration) { kc.PodsPerCore = &n })
}

func bdm(device, size string, root bool) *v1.BlockDeviceMapping {
	q := resource.MustParse(size)
	return &v1.BlockDeviceMapping{DeviceName: &device, EBS: &v1.BlockDevice{VolumeSize: &q}, RootVolume: root}
}

func blockDevices(bdms ...*v1.BlockDeviceMapping) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) { nc.Spec.BlockDeviceMappings = bdms }
}

func raid0(nc *v1.EC2NodeClass) {
	p := catalog.InstanceStorePolicyRAID0
	nc.Spec.InstanceStorePolicy = &p
}

func networkInterfaces(nis ...v1.NetworkInterface) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) { nc.Spec.NetworkInterfaces = nis }
}

func subnets(zones ...string) func(*v1.EC2NodeClass) {
	return func(nc *v1.EC2NodeClass) {
		for i, z := range zones {
			nc.Status.Subnets = append(nc.Status.Subnets, v1.Subnet{ID: "subnet-" + string(rune('a'+i)), Zone: z, ZoneID: "use1-az" + string(rune('1'+i))})
		}
	}
}

var defaultOptions = catalog.Options{Region: "us-east-1"}

// resolveType resolves nc and returns the named type.
func resolveType(t *testing.T, nc *v1.EC2NodeClass, opts catalog.Options, name string) *catalog.InstanceType {
	t.Helper()
	its, _, err := catalog.Resolve(nc, opts)
	if err != nil {
		t.Fatalf("Resolve() error = %v", err)
	}
	for _, it := range its {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("Resolve() has no %s", name)
	return nil
}

// strs renders a resource list as canonical quantity strings.
func strs(rl corev1.ResourceList) map[string]string {
	if rl == nil {
		return nil
	}
	out := make(map[string]string, len(rl))
	for k, q := range rl {
		out[string(k)] = q.String()
	}
	return out
}

// shape is an instance type's resources as strings, for readable diffs.
type shape struct {
	Capacity, KubeReserved, SystemReserved, EvictionThreshold, Allocatable map[string]string
}

func shapeOf(it *catalog.InstanceType) shape {
	return shape{
		Capacity:          strs(it.Capacity),
		KubeReserved:      strs(it.Overhead.KubeReserved),
		SystemReserved:    strs(it.Overhead.SystemReserved),
		EvictionThreshold: strs(it.Overhead.EvictionThreshold),
		Allocatable:       strs(it.Allocatable()),
	}
}

// m5Large is m5.large under AL2023 defaults (spec §3.6, first row); cases
// below state how their node class changes it.
func m5Large() shape {
	return shape{
		Capacity:          map[string]string{"cpu": "2", "memory": "7577Mi", "ephemeral-storage": "20Gi", "pods": "29", "vpc.amazonaws.com/pod-eni": "9"},
		KubeReserved:      map[string]string{"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"},
		EvictionThreshold: map[string]string{"memory": "100Mi", "ephemeral-storage": "2Gi"},
		Allocatable:       map[string]string{"cpu": "1930m", "memory": "6903Mi", "ephemeral-storage": "17Gi", "pods": "29", "vpc.amazonaws.com/pod-eni": "9"},
	}
}

func with(s shape, mod func(*shape)) shape {
	mod(&s)
	return s
}

// Spec §3.6 worked vectors, and the §3.5 rules behind them per AMI family.
func TestResolveWorkedVectors(t *testing.T) {
	tests := []struct {
		name     string
		nc       *v1.EC2NodeClass
		opts     catalog.Options
		instance string
		want     shape
	}{
		{
			name: "should compute m5.large allocatable for AL2023 defaults", nc: nodeClass(), instance: "m5.large",
			want: m5Large(),
		},
		{
			name: "should compute m5.xlarge allocatable for AL2023 defaults", nc: nodeClass(), instance: "m5.xlarge",
			want: shape{
				Capacity:          map[string]string{"cpu": "4", "memory": "15155Mi", "ephemeral-storage": "20Gi", "pods": "58", "vpc.amazonaws.com/pod-eni": "18"},
				KubeReserved:      map[string]string{"cpu": "80m", "memory": "893Mi", "ephemeral-storage": "1Gi"},
				EvictionThreshold: map[string]string{"memory": "100Mi", "ephemeral-storage": "2Gi"},
				Allocatable:       map[string]string{"cpu": "3920m", "memory": "14162Mi", "ephemeral-storage": "17Gi", "pods": "58", "vpc.amazonaws.com/pod-eni": "18"},
			},
		},
		{
			name: "should reserve 64MiB more memory on arm64 (m6g.large AL2023)", nc: nodeClass(), instance: "m6g.large",
			want: with(m5Large(), func(s *shape) {
				s.Capacity["memory"] = "7518Mi"
				s.Allocatable["memory"] = "6844Mi"
			}),
		},
		{
			name: "should subtract RESERVED_ENIS from pods but not from the kube-reserved memory pod count",
			nc:   nodeClass(), opts: catalog.Options{Region: "us-east-1", ReservedENIs: 1}, instance: "m5.large",
			want: with(m5Large(), func(s *shape) {
				s.Capacity["pods"] = "20"
				s.Allocatable["pods"] = "20"
			}),
		},
		{
			name: "should use maxPods for pods but ENI-limited pods for kube-reserved memory on AL2023",
			nc:   nodeClass(maxPods(110)), instance: "m5.large",
			want: with(m5Large(), func(s *shape) {
				s.Capacity["pods"] = "110"
				s.Allocatable["pods"] = "110"
			}),
		},
		{
			name: "should use maxPods for kube-reserved memory on Bottlerocket",
			nc:   nodeClass(alias("bottlerocket@latest"), maxPods(110)), instance: "m5.large",
			want: with(m5Large(), func(s *shape) {
				s.Capacity["pods"] = "110"
				s.Allocatable["pods"] = "110"
				s.KubeReserved["memory"] = "1465Mi"
				s.Allocatable["memory"] = "6012Mi"
			}),
		},
		{
			name: "should use ENI-limited pods on Bottlerocket without maxPods", nc: nodeClass(alias("bottlerocket@latest")), instance: "m5.large",
			want: m5Large(),
		},
		{
			name: "should use 110 pods, a 50Gi root volume and PrivateIPv4Address on Windows2022",
			nc:   nodeClass(alias("windows2022@latest")), instance: "m5.large",
			want: shape{
				Capacity: map[string]string{"cpu": "2", "memory": "7577Mi", "ephemeral-storage": "50Gi", "pods": "110",
					"vpc.amazonaws.com/pod-eni": "9", "vpc.amazonaws.com/PrivateIPv4Address": "9"},
				KubeReserved:      map[string]string{"cpu": "70m", "memory": "1465Mi", "ephemeral-storage": "1Gi"},
				EvictionThreshold: map[string]string{"memory": "100Mi", "ephemeral-storage": "5Gi"},
				Allocatable: map[string]string{"cpu": "1930m", "memory": "6012Mi", "ephemeral-storage": "44Gi", "pods": "110",
					"vpc.amazonaws.com/pod-eni": "9", "vpc.amazonaws.com/PrivateIPv4Address": "9"},
			},
		},
		{
			name: "should cap pods at podsPerCore x vCPU without changing AL2023 kube-reserved memory",
			nc:   nodeClass(podsPerCore(4)), instance: "m5.large",
			want: with(m5Large(), func(s *shape) {
				s.Capacity["pods"] = "8"
				s.Allocatable["pods"] = "8"
			}),
		},
		{
			name: "should ignore podsPerCore on Bottlerocket",
			nc:   nodeClass(alias("bottlerocket@latest"), podsPerCore(4)), instance: "m5.large",
			want: m5Large(),
		},
		{
			name: "should cap Windows pods at podsPerCore and size kube-reserved memory from them",
			nc:   nodeClass(alias("windows2019@latest"), podsPerCore(4)), instance: "m5.large",
			want: shape{
				Capacity: map[string]string{"cpu": "2", "memory": "7577Mi", "ephemeral-storage": "50Gi", "pods": "8",
					"vpc.amazonaws.com/pod-eni": "9", "vpc.amazonaws.com/PrivateIPv4Address": "9"},
				KubeReserved:      map[string]string{"cpu": "70m", "memory": "343Mi", "ephemeral-storage": "1Gi"},
				EvictionThreshold: map[string]string{"memory": "100Mi", "ephemeral-storage": "5Gi"},
				Allocatable: map[string]string{"cpu": "1930m", "memory": "7134Mi", "ephemeral-storage": "44Gi", "pods": "8",
					"vpc.amazonaws.com/pod-eni": "9", "vpc.amazonaws.com/PrivateIPv4Address": "9"},
			},
		},
		{
			name: "should apply a VM_MEMORY_OVERHEAD_PERCENT of 0", nc: nodeClass(),
			opts: catalog.Options{Region: "us-east-1", VMMemoryOverheadPercent: new(0.0)}, instance: "m5.large",
			want: with(m5Large(), func(s *shape) {
				s.Capacity["memory"] = "8Gi"
				s.Allocatable["memory"] = "7518Mi"
			}),
		},
		{
			name: "should honour spec.amiFamily AL2 with a non-alias AMI", nc: nodeClass(amiFamily(v1.AMIFamilyAL2)), instance: "m5.large",
			want: m5Large(),
		},
		{
			name: "should compute ENI-limited pods for Custom", nc: nodeClass(amiFamily(v1.AMIFamilyCustom)), instance: "m5.large",
			want: m5Large(),
		},
		{
			name: "should list GPUs and EFA as extended resources", nc: nodeClass(), instance: "p4d.24xlarge",
			want: shape{
				Capacity: map[string]string{"cpu": "96", "memory": "1091174Mi", "ephemeral-storage": "20Gi", "pods": "737",
					"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4", "vpc.amazonaws.com/pod-eni": "62"},
				KubeReserved:      map[string]string{"cpu": "310m", "memory": "8362Mi", "ephemeral-storage": "1Gi"},
				EvictionThreshold: map[string]string{"memory": "100Mi", "ephemeral-storage": "2Gi"},
				Allocatable: map[string]string{"cpu": "95690m", "memory": "1082712Mi", "ephemeral-storage": "17Gi", "pods": "737",
					"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4", "vpc.amazonaws.com/pod-eni": "62"},
			},
		},
		{
			name: "should count efa-only interfaces as EFA and take card-0 ones from the pod count",
			nc: nodeClass(networkInterfaces(
				v1.NetworkInterface{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"},
				v1.NetworkInterface{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"},
				v1.NetworkInterface{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"},
			)),
			instance: "p4d.24xlarge",
			want: shape{
				// pods (15-1)*(50-1)+2 = 688; kube-reserved memory 11*688+255.
				Capacity: map[string]string{"cpu": "96", "memory": "1091174Mi", "ephemeral-storage": "20Gi", "pods": "688",
					"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "2", "vpc.amazonaws.com/pod-eni": "62"},
				KubeReserved:      map[string]string{"cpu": "310m", "memory": "7823Mi", "ephemeral-storage": "1Gi"},
				EvictionThreshold: map[string]string{"memory": "100Mi", "ephemeral-storage": "2Gi"},
				Allocatable: map[string]string{"cpu": "95690m", "memory": "1083251Mi", "ephemeral-storage": "17Gi", "pods": "688",
					"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "2", "vpc.amazonaws.com/pod-eni": "62"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts.Region == "" {
				opts = defaultOptions
			}
			got := shapeOf(resolveType(t, tt.nc, opts, tt.instance))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s mismatch (-want +got):\n%s", tt.instance, diff)
			}
		})
	}
}

// Spec §3.5 kubelet overrides, on m5.large AL2023.
func TestResolveKubeletOverrides(t *testing.T) {
	tests := []struct {
		name string
		kc   func(*v1.KubeletConfiguration)
		want shape
	}{
		{
			name: "should override kube-reserved per key and keep the other defaults",
			kc:   func(kc *v1.KubeletConfiguration) { kc.KubeReserved = map[string]string{"cpu": "200m", "memory": "1Gi"} },
			want: with(m5Large(), func(s *shape) {
				s.KubeReserved["cpu"] = "200m"
				s.KubeReserved["memory"] = "1Gi"
				s.Allocatable["cpu"] = "1800m"
				s.Allocatable["memory"] = "6453Mi"
			}),
		},
		{
			name: "should subtract system-reserved",
			kc: func(kc *v1.KubeletConfiguration) {
				kc.SystemReserved = map[string]string{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi", "pid": "1000"}
			},
			want: with(m5Large(), func(s *shape) {
				s.SystemReserved = map[string]string{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi", "pid": "1k"}
				s.Allocatable["cpu"] = "1830m"
				s.Allocatable["memory"] = "6703Mi"
				s.Allocatable["ephemeral-storage"] = "16Gi"
			}),
		},
		{
			name: "should take an absolute evictionHard memory.available as the memory threshold",
			kc:   func(kc *v1.KubeletConfiguration) { kc.EvictionHard = map[string]string{"memory.available": "500Mi"} },
			want: with(m5Large(), func(s *shape) {
				s.EvictionThreshold["memory"] = "500Mi"
				s.Allocatable["memory"] = "6503Mi"
			}),
		},
		{
			name: "should take a percentage evictionHard memory.available of memory capacity, rounded up",
			kc:   func(kc *v1.KubeletConfiguration) { kc.EvictionHard = map[string]string{"memory.available": "5%"} },
			want: with(m5Large(), func(s *shape) {
				// ceil(7577Mi x 5%) = ceil(397253017.6) bytes.
				s.EvictionThreshold["memory"] = "397253018"
				s.Allocatable["memory"] = "6945924710"
			}),
		},
		{
			name: "should take a percentage evictionHard nodefs.available of ephemeral-storage capacity",
			kc:   func(kc *v1.KubeletConfiguration) { kc.EvictionHard = map[string]string{"nodefs.available": "15%"} },
			want: with(m5Large(), func(s *shape) {
				s.EvictionThreshold["ephemeral-storage"] = "3Gi"
				s.Allocatable["ephemeral-storage"] = "16Gi"
			}),
		},
		{
			name: "should treat an evictionHard of 100% as no threshold",
			kc: func(kc *v1.KubeletConfiguration) {
				kc.EvictionHard = map[string]string{"memory.available": "100%", "nodefs.available": "100%"}
			},
			want: with(m5Large(), func(s *shape) {
				s.EvictionThreshold["memory"] = "0"
				s.EvictionThreshold["ephemeral-storage"] = "0"
				s.Allocatable["memory"] = "7003Mi"
				s.Allocatable["ephemeral-storage"] = "19Gi"
			}),
		},
		{
			name: "should not let evictionSoft or other evictionHard signals change allocatable",
			kc: func(kc *v1.KubeletConfiguration) {
				kc.EvictionSoft = map[string]string{"memory.available": "1Gi"}
				kc.EvictionHard = map[string]string{"imagefs.available": "50%", "pid.available": "10%"}
			},
			want: m5Large(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shapeOf(resolveType(t, nodeClass(kubelet(tt.kc)), defaultOptions, "m5.large"))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("m5.large mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Spec §3.5 ephemeral-storage sources, in precedence order.
func TestResolveEphemeralStorage(t *testing.T) {
	tests := []struct {
		name     string
		nc       *v1.EC2NodeClass
		instance string
		// capacity and allocatable ephemeral-storage
		wantCapacity, wantAllocatable string
	}{
		{name: "should default to a 20Gi root volume on AL2023", nc: nodeClass(), instance: "m5.large",
			wantCapacity: "20Gi", wantAllocatable: "17Gi"},
		{name: "should use the instance store total in GB with RAID0", nc: nodeClass(raid0), instance: "m5d.large",
			// 75G - 1Gi - 7.5G
			wantCapacity: "75G", wantAllocatable: "66426258176"},
		{name: "should prefer RAID0 instance store over a rootVolume mapping",
			nc: nodeClass(raid0, blockDevices(bdm("/dev/xvda", "100Gi", true))), instance: "p4d.24xlarge",
			wantCapacity: "8T", wantAllocatable: "7198926258176"},
		{name: "should fall back to EBS with RAID0 when the type has no instance store", nc: nodeClass(raid0), instance: "m5.large",
			wantCapacity: "20Gi", wantAllocatable: "17Gi"},
		{name: "should fall back to EBS with RAID0 on non-NVMe instance store the data cannot size", nc: nodeClass(raid0), instance: "d2.xlarge",
			wantCapacity: "20Gi", wantAllocatable: "17Gi"},
		{name: "should use the rootVolume mapping whatever its device",
			nc:       nodeClass(blockDevices(bdm("/dev/xvda", "50Gi", false), bdm("/dev/xvdz", "100Gi", true))),
			instance: "m5.large", wantCapacity: "100Gi", wantAllocatable: "89Gi"},
		{name: "should use the family's device mapping without a rootVolume",
			nc:       nodeClass(blockDevices(bdm("/dev/xvdb", "80Gi", false), bdm("/dev/xvda", "50Gi", false))),
			instance: "m5.large", wantCapacity: "50Gi", wantAllocatable: "44Gi"},
		{name: "should ignore mappings of other devices on AL2023",
			nc:       nodeClass(blockDevices(bdm("/dev/xvdb", "80Gi", false))),
			instance: "m5.large", wantCapacity: "20Gi", wantAllocatable: "17Gi"},
		{name: "should use /dev/xvdb on Bottlerocket",
			nc:       nodeClass(alias("bottlerocket@latest"), blockDevices(bdm("/dev/xvda", "4Gi", false), bdm("/dev/xvdb", "100Gi", false))),
			instance: "m5.large", wantCapacity: "100Gi", wantAllocatable: "89Gi"},
		{name: "should ignore /dev/xvda on Bottlerocket",
			nc:       nodeClass(alias("bottlerocket@latest"), blockDevices(bdm("/dev/xvda", "50Gi", false))),
			instance: "m5.large", wantCapacity: "20Gi", wantAllocatable: "17Gi"},
		{name: "should use /dev/sda1 on Windows",
			nc:       nodeClass(alias("windows2025@latest"), blockDevices(bdm("/dev/sda1", "80Gi", false))),
			instance: "m5.large", wantCapacity: "80Gi", wantAllocatable: "71Gi"},
		{name: "should use the last mapping for Custom",
			nc:       nodeClass(amiFamily(v1.AMIFamilyCustom), blockDevices(bdm("/dev/xvda", "10Gi", false), bdm("/dev/xvdc", "30Gi", false))),
			instance: "m5.large", wantCapacity: "30Gi", wantAllocatable: "26Gi"},
		{name: "should default to 20Gi for Custom without mappings", nc: nodeClass(amiFamily(v1.AMIFamilyCustom)),
			instance: "m5.large", wantCapacity: "20Gi", wantAllocatable: "17Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := resolveType(t, tt.nc, defaultOptions, tt.instance)
			got := []string{capacityOf(it, corev1.ResourceEphemeralStorage), allocatableOf(it, corev1.ResourceEphemeralStorage)}
			if diff := cmp.Diff([]string{tt.wantCapacity, tt.wantAllocatable}, got); diff != "" {
				t.Errorf("%s ephemeral-storage [capacity allocatable] (-want +got):\n%s", tt.instance, diff)
			}
		})
	}
}

func capacityOf(it *catalog.InstanceType, name corev1.ResourceName) string {
	q := it.Capacity[name]
	return q.String()
}

func allocatableOf(it *catalog.InstanceType, name corev1.ResourceName) string {
	q := it.Allocatable()[name]
	return q.String()
}

func TestResolveLabels(t *testing.T) {
	tests := []struct {
		name     string
		nc       *v1.EC2NodeClass
		instance string
		want     map[string]string
	}{
		{
			name: "should label a GPU type with its GPU and the region", nc: nodeClass(), instance: "g5.xlarge",
			want: map[string]string{
				"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "g5.xlarge",
				"topology.kubernetes.io/region":                              "us-east-1",
				"karpenter.k8s.aws/instance-capability-flex":                 "false",
				"karpenter.k8s.aws/instance-category":                        "g",
				"karpenter.k8s.aws/instance-cpu":                             "4",
				"karpenter.k8s.aws/instance-cpu-manufacturer":                "amd",
				"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz":   "3300",
				"karpenter.k8s.aws/instance-ebs-bandwidth":                   "3500",
				"karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
				"karpenter.k8s.aws/instance-family":                          "g5",
				"karpenter.k8s.aws/instance-generation":                      "5",
				"karpenter.k8s.aws/instance-gpu-count":                       "1",
				"karpenter.k8s.aws/instance-gpu-manufacturer":                "nvidia",
				"karpenter.k8s.aws/instance-gpu-memory":                      "22888",
				"karpenter.k8s.aws/instance-gpu-name":                        "a10g",
				"karpenter.k8s.aws/instance-hypervisor":                      "nitro",
				"karpenter.k8s.aws/instance-local-nvme":                      "250",
				"karpenter.k8s.aws/instance-memory":                          "16384",
				"karpenter.k8s.aws/instance-network-bandwidth":               "2500",
				"karpenter.k8s.aws/instance-size":                            "xlarge",
			},
		},
		{
			name: "should label Windows nodes with os windows and the windows build", nc: nodeClass(alias("windows2022@latest")), instance: "m5.large",
			want: map[string]string{
				"kubernetes.io/arch": "amd64", "kubernetes.io/os": "windows", "node.kubernetes.io/instance-type": "m5.large",
				"node.kubernetes.io/windows-build":                           "10.0.20348",
				"topology.kubernetes.io/region":                              "us-east-1",
				"karpenter.k8s.aws/instance-capability-flex":                 "false",
				"karpenter.k8s.aws/instance-category":                        "m",
				"karpenter.k8s.aws/instance-cpu":                             "2",
				"karpenter.k8s.aws/instance-cpu-manufacturer":                "intel",
				"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz":   "3100",
				"karpenter.k8s.aws/instance-ebs-bandwidth":                   "4750",
				"karpenter.k8s.aws/instance-encryption-in-transit-supported": "false",
				"karpenter.k8s.aws/instance-family":                          "m5",
				"karpenter.k8s.aws/instance-generation":                      "5",
				"karpenter.k8s.aws/instance-hypervisor":                      "nitro",
				"karpenter.k8s.aws/instance-memory":                          "8192",
				"karpenter.k8s.aws/instance-network-bandwidth":               "750",
				"karpenter.k8s.aws/instance-size":                            "large",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolveType(t, tt.nc, defaultOptions, tt.instance).Labels
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s labels (-want +got):\n%s", tt.instance, diff)
			}
		})
	}
}

func TestResolveTypeSet(t *testing.T) {
	tests := []struct {
		name      string
		nc        *v1.EC2NodeClass
		wantCount int
		wantArchs map[string]int
	}{
		{name: "should list every catalog type for Linux families", nc: nodeClass(),
			wantCount: 1363, wantArchs: map[string]int{"amd64": 967, "arm64": 396}},
		{name: "should omit arm64 types for Windows families", nc: nodeClass(alias("windows2022@latest")),
			wantCount: 967, wantArchs: map[string]int{"amd64": 967}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			its, _, err := catalog.Resolve(tt.nc, defaultOptions)
			if err != nil {
				t.Fatalf("Resolve() error = %v", err)
			}
			archs := map[string]int{}
			for i, it := range its {
				archs[it.Labels[v1.LabelArch]]++
				if i > 0 && its[i-1].Name >= it.Name {
					t.Errorf("not sorted by name: %s before %s", its[i-1].Name, it.Name)
				}
			}
			if diff := cmp.Diff([]any{tt.wantCount, tt.wantArchs}, []any{len(its), archs}); diff != "" {
				t.Errorf("[count archs] (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveIsIndependentPerCall(t *testing.T) {
	first := resolveType(t, nodeClass(), defaultOptions, "m5.large")
	first.Labels["team"] = "mutated"
	first.Capacity[corev1.ResourceCPU] = resource.MustParse("64")
	first.Offerings[0].Available = false
	second := resolveType(t, nodeClass(), defaultOptions, "m5.large")
	if diff := cmp.Diff(m5Large(), shapeOf(second)); diff != "" {
		t.Errorf("second Resolve() saw the first caller's changes (-want +got):\n%s", diff)
	}
	if _, ok := second.Labels["team"]; ok || !second.Offerings[0].Available {
		t.Errorf("second Resolve() shares labels or offerings with the first")
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name    string
		nc      *v1.EC2NodeClass
		opts    catalog.Options
		wantErr string
	}{
		{name: "nil node class", nc: nil, opts: defaultOptions, wantErr: "node class: nil"},
		{name: "missing region", nc: nodeClass(), opts: catalog.Options{}, wantErr: "options.Region: required"},
		{name: "unknown amiFamily", nc: nodeClass(amiFamily("Ubuntu")), opts: defaultOptions,
			wantErr: `ec2nodeclass default: spec.amiFamily "Ubuntu": want AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022 or Windows2025`},
		{name: "unknown alias family", nc: nodeClass(alias("ubuntu@latest")), opts: defaultOptions,
			wantErr: `ec2nodeclass default: spec.amiSelectorTerms[0].alias "ubuntu@latest": unknown family "ubuntu"`},
		{name: "neither amiFamily nor alias", nc: nodeClass(func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Tags: map[string]string{"a": "b"}}}
		}), opts: defaultOptions, wantErr: "ec2nodeclass default: spec.amiFamily: required unless an amiSelectorTerms alias names the family"},
		{name: "unparsable kubeReserved", nc: nodeClass(kubelet(func(kc *v1.KubeletConfiguration) {
			kc.KubeReserved = map[string]string{"memory": "lots"}
		})), opts: defaultOptions, wantErr: `ec2nodeclass default: spec.kubelet.kubeReserved[memory] "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{name: "negative systemReserved", nc: nodeClass(kubelet(func(kc *v1.KubeletConfiguration) {
			kc.SystemReserved = map[string]string{"cpu": "-1"}
		})), opts: defaultOptions, wantErr: `ec2nodeclass default: spec.kubelet.systemReserved[cpu] "-1": must not be negative`},
		{name: "bad evictionHard percentage", nc: nodeClass(kubelet(func(kc *v1.KubeletConfiguration) {
			kc.EvictionHard = map[string]string{"memory.available": "x%"}
		})), opts: defaultOptions, wantErr: `ec2nodeclass default: spec.kubelet.evictionHard[memory.available] "x%": percentage: strconv.ParseFloat: parsing "x": invalid syntax`},
		{name: "evictionHard percentage above 100", nc: nodeClass(kubelet(func(kc *v1.KubeletConfiguration) {
			kc.EvictionHard = map[string]string{"nodefs.available": "120%"}
		})), opts: defaultOptions, wantErr: `ec2nodeclass default: spec.kubelet.evictionHard[nodefs.available] "120%": percentage must be within 0%..100%`},
		{name: "negative maxPods", nc: nodeClass(maxPods(-1)), opts: defaultOptions,
			wantErr: "ec2nodeclass default: spec.kubelet.maxPods -1: must not be negative"},
		{name: "unknown instanceStorePolicy", nc: nodeClass(func(nc *v1.EC2NodeClass) {
			p := "RAID5"
			nc.Spec.InstanceStorePolicy = &p
		}), opts: defaultOptions, wantErr: `ec2nodeclass default: spec.instanceStorePolicy "RAID5": want RAID0`},
		{name: "negative reserved ENIs", nc: nodeClass(), opts: catalog.Options{Region: "us-east-1", ReservedENIs: -1},
			wantErr: "ec2nodeclass default: options.ReservedENIs -1: must not be negative"},
		{name: "VM memory overhead of 100%", nc: nodeClass(), opts: catalog.Options{Region: "us-east-1", VMMemoryOverheadPercent: new(1.0)},
			wantErr: "ec2nodeclass default: options.VMMemoryOverheadPercent 1: want 0 <= value < 1"},
		{name: "negative spot price ratio", nc: nodeClass(), opts: catalog.Options{Region: "us-east-1", SpotPriceRatio: -0.5},
			wantErr: "options.SpotPriceRatio -0.5: want a finite value >= 0"},
		{name: "zone outside the region", nc: nodeClass(), opts: catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1a", "eu-west-1a"}},
			wantErr: `options.Zones[1] "eu-west-1a": not a zone of region "us-east-1"`},
		{name: "region without known zones", nc: nodeClass(), opts: catalog.Options{Region: "mx-central-1"},
			wantErr: `options.Region "mx-central-1": zones unknown; set Options.Zones or the node class's status.subnets`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			its, _, err := catalog.Resolve(tt.nc, tt.opts)
			if err == nil {
				t.Fatalf("Resolve() = %d types, want error %q", len(its), tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantErr, err.Error()); diff != "" {
				t.Errorf("Resolve() error (-want +got):\n%s", diff)
			}
		})
	}
}

// Behaviour where the data is incomplete (data/README.md caveats).
func TestResolveDataGaps(t *testing.T) {
	tests := []struct {
		name     string
		nc       *v1.EC2NodeClass
		opts     catalog.Options
		instance string
		resource corev1.ResourceName
		want     string
	}{
		{name: "should keep the listed pods of a type vpclimits lacks despite RESERVED_ENIS", nc: nodeClass(),
			opts: catalog.Options{Region: "us-east-1", ReservedENIs: 1}, instance: "hpc6a.48xlarge", resource: corev1.ResourcePods, want: "100"},
		{name: "should give no PrivateIPv4Address on Windows to a type vpclimits lacks", nc: nodeClass(alias("windows2022@latest")),
			opts: defaultOptions, instance: "hpc6a.48xlarge", resource: catalog.ResourcePrivateIPv4Address, want: "0"},
		{name: "should take pod-eni from vpclimits where the listing has none", nc: nodeClass(),
			opts: defaultOptions, instance: "c9g.large", resource: catalog.ResourceAWSPodENI, want: "9"},
		{name: "should give no pod-eni to a type that is not trunking compatible", nc: nodeClass(),
			opts: defaultOptions, instance: "d2.xlarge", resource: catalog.ResourceAWSPodENI, want: "0"},
		{name: "should give fractional-GPU types no GPU resource", nc: nodeClass(),
			opts: defaultOptions, instance: "g6f.large", resource: catalog.ResourceNVIDIAGPU, want: "0"},
		{name: "should give no pods when RESERVED_ENIS uses every ENI", nc: nodeClass(),
			opts: catalog.Options{Region: "us-east-1", ReservedENIs: 3}, instance: "m5.large", resource: corev1.ResourcePods, want: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := capacityOf(resolveType(t, tt.nc, tt.opts, tt.instance), tt.resource)
			if got != tt.want {
				t.Errorf("%s capacity %s = %s, want %s", tt.instance, tt.resource, got, tt.want)
			}
		})
	}
}
