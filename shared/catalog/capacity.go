package catalog

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

const (
	mi = int64(1) << 20
	// arm64MemoryReservedMiB is the CMA memory Graviton types cannot use
	// (aws: pkg/providers/instancetype/types.go memory).
	arm64MemoryReservedMiB = 64
	// DefaultVMMemoryOverheadPercent is VM_MEMORY_OVERHEAD_PERCENT's default
	// (spec §10.3).
	DefaultVMMemoryOverheadPercent = 0.075
	// InstanceStorePolicyRAID0 is the only spec.instanceStorePolicy value.
	InstanceStorePolicyRAID0 = "RAID0"
	// Eviction signals that affect allocatable (spec §3.5).
	evictionMemoryAvailable = "memory.available"
	evictionNodeFSAvailable = "nodefs.available"
	// Network interface types of spec.networkInterfaces.
	interfaceTypeEFAOnly = "efa-only"
)

// launchConfig is what Resolve reads from a node class and Options, parsed
// and validated once for all instance types.
type launchConfig struct {
	family amiFamily
	// nestedVirtualization: spec.cpuOptions.nestedVirtualization is
	// "enabled", so only types supporting it are offered.
	nestedVirtualization bool
	vmOverhead           float64
	reservedENIs         int64
	maxPods              *int64
	podsPerCore          int64
	// kubeReserved and systemReserved are the kubelet maps, parsed.
	kubeReserved, systemReserved corev1.ResourceList
	// evictionMemory and evictionNodeFS are evictionHard overrides; nil when unset.
	evictionMemory, evictionNodeFS *evictionSignal
	raid0                          bool
	blockDeviceMappings            []*v1.BlockDeviceMapping
	// networkInterfaces is spec.networkInterfaces; when non-empty it sets
	// the EFA count and the ENI-limited pod count loses efa-only card-0 NIs.
	networkInterfaces []v1.NetworkInterface
	efaOnly           int64
	efaOnlyCard0      int64
}

// evictionSignal is one evictionHard value: a percentage of capacity or an
// absolute quantity.
type evictionSignal struct {
	percent  float64
	relative bool
	absolute resource.Quantity
}

// newLaunchConfig validates and parses everything Resolve needs from nc and
// opts. Errors name the offending field.
func newLaunchConfig(nc *v1.EC2NodeClass, opts Options) (launchConfig, error) {
	fam, err := resolveFamily(nc)
	if err != nil {
		return launchConfig{}, err
	}
	cfg := launchConfig{family: fam, vmOverhead: DefaultVMMemoryOverheadPercent, reservedENIs: int64(opts.ReservedENIs)}
	if p := opts.VMMemoryOverheadPercent; p != nil {
		if math.IsNaN(*p) || *p < 0 || *p >= 1 {
			return launchConfig{}, fmt.Errorf("options.VMMemoryOverheadPercent %v: want 0 <= value < 1", *p)
		}
		cfg.vmOverhead = *p
	}
	if opts.ReservedENIs < 0 {
		return launchConfig{}, fmt.Errorf("options.ReservedENIs %d: must not be negative", opts.ReservedENIs)
	}
	if p := nc.Spec.InstanceStorePolicy; p != nil {
		if *p != InstanceStorePolicyRAID0 {
			return launchConfig{}, fmt.Errorf("spec.instanceStorePolicy %q: want %s", *p, InstanceStorePolicyRAID0)
		}
		cfg.raid0 = true
	}
	if c := nc.Spec.CPUOptions; c != nil && c.NestedVirtualization != nil && *c.NestedVirtualization == "enabled" {
		cfg.nestedVirtualization = true
	}
	cfg.blockDeviceMappings = nc.Spec.BlockDeviceMappings
	cfg.networkInterfaces = nc.Spec.NetworkInterfaces
	for _, ni := range nc.Spec.NetworkInterfaces {
		if ni.InterfaceType == interfaceTypeEFAOnly {
			cfg.efaOnly++
			if ni.NetworkCardIndex == 0 {
				cfg.efaOnlyCard0++
			}
		}
	}
	if kc := nc.Spec.Kubelet; kc != nil {
		if kc.MaxPods != nil {
			if *kc.MaxPods < 0 {
				return launchConfig{}, fmt.Errorf("spec.kubelet.maxPods %d: must not be negative", *kc.MaxPods)
			}
			n := int64(*kc.MaxPods)
			cfg.maxPods = &n
		}
		if kc.PodsPerCore != nil {
			if *kc.PodsPerCore < 0 {
				return launchConfig{}, fmt.Errorf("spec.kubelet.podsPerCore %d: must not be negative", *kc.PodsPerCore)
			}
			cfg.podsPerCore = int64(*kc.PodsPerCore)
		}
		if cfg.kubeReserved, err = parseReserved("spec.kubelet.kubeReserved", kc.KubeReserved); err != nil {
			return launchConfig{}, err
		}
		if cfg.systemReserved, err = parseReserved("spec.kubelet.systemReserved", kc.SystemReserved); err != nil {
			return launchConfig{}, err
		}
		if v, ok := kc.EvictionHard[evictionMemoryAvailable]; ok {
			if cfg.evictionMemory, err = parseEvictionSignal("spec.kubelet.evictionHard["+evictionMemoryAvailable+"]", v); err != nil {
				return launchConfig{}, err
			}
		}
		if v, ok := kc.EvictionHard[evictionNodeFSAvailable]; ok {
			if cfg.evictionNodeFS, err = parseEvictionSignal("spec.kubelet.evictionHard["+evictionNodeFSAvailable+"]", v); err != nil {
				return launchConfig{}, err
			}
		}
	}
	return cfg, nil
}

// parseReserved parses a kubeReserved/systemReserved map. Keys are taken as
// resource names (cpu, memory, ephemeral-storage, pid); values must be
// non-negative quantities.
func parseReserved(field string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report the first bad key deterministically
	out := make(corev1.ResourceList, len(m))
	for _, k := range keys {
		q, err := resource.ParseQuantity(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s[%s] %q: %w", field, k, m[k], err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s[%s] %q: must not be negative", field, k, m[k])
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// parseEvictionSignal parses an evictionHard value: "N%" of capacity
// ("100%" disables the threshold, i.e. 0) or an absolute quantity
// (aws: pkg/providers/instancetype/types.go computeEvictionSignal).
func parseEvictionSignal(field, v string) (*evictionSignal, error) {
	if strings.HasSuffix(v, "%") {
		p, err := strconv.ParseFloat(strings.Trim(v, "%"), 64)
		if err != nil {
			return nil, fmt.Errorf("%s %q: percentage: %w", field, v, err)
		}
		if math.IsNaN(p) || p < 0 || p > 100 {
			return nil, fmt.Errorf("%s %q: percentage must be within 0%%..100%%", field, v)
		}
		if p == 100 {
			p = 0
		}
		return &evictionSignal{percent: p, relative: true}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", field, v, err)
	}
	if q.Sign() < 0 {
		return nil, fmt.Errorf("%s %q: must not be negative", field, v)
	}
	return &evictionSignal{absolute: q}, nil
}

// threshold returns the signal's amount for capacity: ceil(capacity ×
// percent / 100) bytes, computed in float64 as Karpenter does, or the
// absolute quantity.
func (s *evictionSignal) threshold(capacity resource.Quantity) resource.Quantity {
	if !s.relative {
		return s.absolute.DeepCopy()
	}
	return *resource.NewQuantity(int64(math.Ceil(capacity.AsApproximateFloat64()/100*s.percent)), capacity.Format)
}

// memoryCapacityMiB is the memory capacity in MiB: nominal MiB, less 64 MiB
// on arm64, less ceil(bytes × overhead) expressed in MiB (spec §3.5; the
// float64 evaluation order follows aws: pkg/providers/instancetype/types.go
// memory so results match to the MiB).
func memoryCapacityMiB(t *typeInfo, overhead float64) int64 {
	m := t.memoryMiB
	if t.arch == "arm64" {
		m -= arm64MemoryReservedMiB
	}
	return m - int64(math.Ceil(float64(m*mi)*overhead/1024/1024))
}

// ephemeralStorage is the ephemeral-storage capacity (spec §3.5): with
// RAID0, the NVMe instance store in decimal GB; else the rootVolume mapping's
// size; else, for Custom, the last mapping's size or 20Gi; else the mapping
// of the family's ephemeral device; else the family default (20Gi; Windows
// 50Gi). Non-NVMe instance store (d2, h1, x1, x1e) is not sized by the data,
// so RAID0 falls through to EBS for those types.
func ephemeralStorage(t *typeInfo, cfg *launchConfig) resource.Quantity {
	if cfg.raid0 && t.localNVMeGB > 0 {
		return *resource.NewQuantity(t.localNVMeGB*1000*1000*1000, resource.DecimalSI)
	}
	if bdms := cfg.blockDeviceMappings; len(bdms) != 0 {
		for _, bdm := range bdms {
			if bdm != nil && bdm.RootVolume {
				if size := volumeSize(bdm); size != nil {
					return size.DeepCopy()
				}
				break
			}
		}
		if cfg.family.name == v1.AMIFamilyCustom {
			if size := volumeSize(bdms[len(bdms)-1]); size != nil {
				return size.DeepCopy()
			}
			return gi(cfg.family.defaultEphemeralGi)
		}
		for _, bdm := range bdms {
			if bdm != nil && bdm.DeviceName != nil && *bdm.DeviceName == cfg.family.ephemeralDevice {
				if size := volumeSize(bdm); size != nil {
					return size.DeepCopy()
				}
				break
			}
		}
	}
	return gi(cfg.family.defaultEphemeralGi)
}

func volumeSize(bdm *v1.BlockDeviceMapping) *resource.Quantity {
	if bdm == nil || bdm.EBS == nil {
		return nil
	}
	return bdm.EBS.VolumeSize
}

// eniLimitedPods is the VPC CNI pod limit without prefix delegation:
// usable × (IPv4 per ENI − 1) + 2 with usable = default-card ENIs − reserved
// ENIs − efa-only interfaces on card 0, floored at 0, and 0 pods when no ENI
// is usable (spec §3.5). For the 8 types vpclimits lacks, the data gives only
// the listed count, which is returned unchanged (reserved ENIs and efa-only
// interfaces cannot be applied there).
func eniLimitedPods(t *typeInfo, reservedENIs, efaOnlyCard0 int64) int64 {
	if t.defaultCardMaxENIs == absent || t.ipv4PerENI == absent {
		return t.maxPods
	}
	usable := max(t.defaultCardMaxENIs-reservedENIs-efaOnlyCard0, 0)
	if usable == 0 {
		return 0
	}
	return usable*(t.ipv4PerENI-1) + 2
}

// pods is the pods capacity: kubelet.maxPods; else ENI-limited for families
// with ENI-limited density; else 110; then capped at podsPerCore × vCPU
// where the family honours podsPerCore (not Bottlerocket).
func pods(t *typeInfo, cfg *launchConfig) int64 {
	var n int64
	switch {
	case cfg.maxPods != nil:
		n = *cfg.maxPods
	case cfg.family.eniLimitedPodDensity:
		n = eniLimitedPods(t, cfg.reservedENIs, cfg.efaOnlyCard0)
	default:
		n = defaultPods
	}
	if cfg.podsPerCore > 0 && cfg.family.podsPerCore {
		n = min(n, cfg.podsPerCore*t.vcpu)
	}
	return n
}

// kubeReservedCPUMilli is kube-reserved CPU: 6% of the first core, 1% of
// the second, 0.5% of cores 3–4 and 0.25% of the rest, each tier truncated to
// whole millicores in float64 as Karpenter does (spec §3.5).
func kubeReservedCPUMilli(vcpu int64) int64 {
	cpu := vcpu * 1000
	var total int64
	for _, tier := range [...]struct {
		start, end int64
		fraction   float64
	}{
		{0, 1000, 0.06},
		{1000, 2000, 0.01},
		{2000, 4000, 0.005},
		{4000, 1 << 31, 0.0025},
	} {
		if cpu < tier.start {
			continue
		}
		r := float64(tier.end - tier.start)
		if cpu < tier.end {
			r = float64(cpu - tier.start)
		}
		total += int64(r * tier.fraction)
	}
	return total
}

// capacity returns the node capacity of t under cfg. Zero extended
// resources are omitted.
func capacity(t *typeInfo, cfg *launchConfig) corev1.ResourceList {
	rl := make(corev1.ResourceList, 8)
	rl[corev1.ResourceCPU] = *resource.NewQuantity(t.vcpu, resource.DecimalSI)
	rl[corev1.ResourceMemory] = *resource.NewQuantity(memoryCapacityMiB(t, cfg.vmOverhead)*mi, resource.BinarySI)
	rl[corev1.ResourceEphemeralStorage] = ephemeralStorage(t, cfg)
	rl[corev1.ResourcePods] = *resource.NewQuantity(pods(t, cfg), resource.DecimalSI)
	efa := t.efa
	if len(cfg.networkInterfaces) != 0 {
		efa = cfg.efaOnly
	}
	podENI := int64(0)
	if t.trunkingCompatible && t.branchENIs != absent {
		podENI = t.branchENIs
	}
	privateIPv4 := int64(0)
	if cfg.family.windows() && t.ipv4PerENI != absent {
		privateIPv4 = t.ipv4PerENI - 1
	}
	for _, x := range [...]struct {
		name corev1.ResourceName
		n    int64
	}{
		{ResourceAWSPodENI, podENI},
		{ResourceNVIDIAGPU, t.nvidiaGPU},
		{ResourceAMDGPU, t.amdGPU},
		{ResourceAWSNeuron, t.neuron},
		{ResourceAWSNeuronCore, t.neuronCore},
		{ResourceEFA, efa},
		{ResourcePrivateIPv4Address, privateIPv4},
	} {
		if x.n > 0 {
			rl[x.name] = *resource.NewQuantity(x.n, resource.DecimalSI)
		}
	}
	return rl
}

// overhead returns kube-reserved, system-reserved and the eviction
// threshold of t under cfg, given its capacity (spec §3.5).
func overhead(t *typeInfo, cfg *launchConfig, capacity corev1.ResourceList) Overhead {
	// kube-reserved memory: 11 MiB per pod + 255 MiB, where the pod count is
	// the ENI-limited count with no reserved ENIs for AL2/AL2023/Custom and
	// the pods capacity otherwise.
	p := pods(t, cfg)
	if cfg.family.eniLimitedMemoryOverhead {
		p = eniLimitedPods(t, 0, cfg.efaOnlyCard0)
	}
	kube := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(kubeReservedCPUMilli(t.vcpu), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((11*p+255)*mi, resource.BinarySI),
		corev1.ResourceEphemeralStorage: gi(1),
	}
	for k, q := range cfg.kubeReserved {
		kube[k] = q.DeepCopy()
	}
	var system corev1.ResourceList
	if len(cfg.systemReserved) != 0 {
		system = make(corev1.ResourceList, len(cfg.systemReserved))
		for k, q := range cfg.systemReserved {
			system[k] = q.DeepCopy()
		}
	}
	// Eviction: 100Mi memory and ceil(10% of ephemeral-storage bytes),
	// evaluated in float64 as Karpenter does; evictionHard overrides.
	storage := capacity[corev1.ResourceEphemeralStorage]
	eviction := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(100*mi, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(math.Ceil(float64(storage.Value())/100*10)), storage.Format),
	}
	if cfg.evictionMemory != nil {
		eviction[corev1.ResourceMemory] = cfg.evictionMemory.threshold(capacity[corev1.ResourceMemory])
	}
	if cfg.evictionNodeFS != nil {
		eviction[corev1.ResourceEphemeralStorage] = cfg.evictionNodeFS.threshold(storage)
	}
	return Overhead{KubeReserved: kube, SystemReserved: system, EvictionThreshold: eviction}
}
