package catalog

import (
	"strconv"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// labels returns t's well-known labels as a launch with family would carry
// them: the data's label table (aws: pkg/providers/instancetype/types.go
// computeRequirements; keys the data leaves null are absent), with
// kubernetes.io/os=windows and node.kubernetes.io/windows-build for Windows
// families, plus topology.kubernetes.io/region when region is set.
func labels(t *typeInfo, f amiFamily, region string) map[string]string {
	l := make(map[string]string, 24)
	l[v1.LabelInstanceType] = t.name
	l[v1.LabelArch] = t.arch
	l[v1.LabelOS] = "linux"
	if f.windows() {
		l[v1.LabelOS] = "windows"
		l[v1.LabelWindowsBuild] = f.windowsBuild
	}
	if region != "" {
		l[v1.LabelTopologyRegion] = region
	}
	l[v1.LabelInstanceCategory] = t.category
	l[v1.LabelInstanceFamily] = t.family
	l[v1.LabelInstanceGeneration] = strconv.FormatInt(t.generation, 10)
	l[v1.LabelInstanceSize] = t.size
	l[v1.LabelInstanceCPU] = strconv.FormatInt(t.vcpu, 10)
	l[v1.LabelInstanceCPUManufacturer] = t.cpuManufacturer
	l[v1.LabelInstanceCPUSustainedClockSpeedMhz] = strconv.FormatInt(t.clockMHz, 10)
	l[v1.LabelInstanceMemory] = strconv.FormatInt(t.memoryMiB, 10)
	l[v1.LabelInstanceHypervisor] = t.hypervisor
	l[v1.LabelInstanceEncryptionInTransit] = strconv.FormatBool(t.encryptionInTransit)
	l[v1.LabelInstanceCapabilityFlex] = strconv.FormatBool(t.flex)
	setCount(l, v1.LabelInstanceEBSBandwidth, t.ebsBandwidthMbps)
	setCount(l, v1.LabelInstanceNetworkBandwidth, t.networkBandwidthMbps)
	setCount(l, v1.LabelInstanceLocalNVME, t.localNVMeGB)
	setCount(l, v1.LabelInstanceGPUCount, t.gpuCount)
	setCount(l, v1.LabelInstanceGPUMemory, t.gpuMemoryMiB)
	setString(l, v1.LabelInstanceGPUName, t.gpuName)
	setString(l, v1.LabelInstanceGPUManufacturer, t.gpuMfr)
	setCount(l, v1.LabelInstanceAcceleratorCount, t.acceleratorCount)
	setString(l, v1.LabelInstanceAcceleratorName, t.acceleratorName)
	setString(l, v1.LabelInstanceAcceleratorManufacturer, t.accMfr)
	return l
}

func setCount(l map[string]string, key string, n int64) {
	if n != absent {
		l[key] = strconv.FormatInt(n, 10)
	}
}

func setString(l map[string]string, key, s string) {
	if s != "" {
		l[key] = s
	}
}
