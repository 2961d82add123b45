package ec2sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// typeFacts is what DescribeInstanceTypes reports about one instance type,
// recovered from the embedded catalog (shared/catalog). Zero numbers mean
// "not stated by the catalog".
type typeFacts struct {
	name, family, size  string
	arch                string // EC2 spelling: x86_64 or arm64
	vcpu                int64
	memoryMiB           int64
	cpuManufacturer     string
	clockMHz            int64
	hypervisor          string
	bareMetal           bool
	burstable           bool
	gpuName, gpuMfr     string
	gpuCount            int64
	gpuMemoryMiB        int64 // per GPU, as Karpenter's instance-gpu-memory label
	accName, accMfr     string
	accCount            int64
	neuronCores         int64
	nvmeGB              int64
	ebsMbps             int64
	networkMbps         int64
	encryptionInTransit bool
	maxENIs, ipv4PerENI int64
	efa                 int64
	// onDemand is the on-demand price per hour; 0 when the catalog has none.
	onDemand float64
	// served, for a type AddInstanceType added, is its DescribeInstanceTypes
	// item, served verbatim, and onDemand its exact price; nil for the
	// catalog's types.
	served *instanceTypeXML
}

// typeTable is the catalog as the simulator serves it: immutable once
// built, shared by every simulator of the same region.
type typeTable struct {
	byName map[string]*typeFacts
	names  []string // sorted
	// fallbackPrices is true when the catalog has no price table for the
	// region and priced it from us-east-1's.
	fallbackPrices bool
}

var (
	typeTablesMu sync.Mutex
	typeTables   = map[string]*typeTable{}
)

// loadTypes builds (or reuses) the type table of region. zones only need to
// be valid for the region; prices do not vary by zone in the catalog.
func loadTypes(region string, zones []string) (*typeTable, error) {
	typeTablesMu.Lock()
	defer typeTablesMu.Unlock()
	if t, ok := typeTables[region]; ok {
		return t, nil
	}
	t, err := buildTypes(region, zones)
	if err != nil {
		return nil, err
	}
	typeTables[region] = t
	return t, nil
}

// buildTypes resolves the catalog for an AL2023 node class twice, with 0
// and 1 reserved ENIs, to recover the ENI facts DescribeInstanceTypes
// reports: the ENI-limited pod count is enis × (ipv4PerENI − 1) + 2
// (karpenter-provider-aws pkg/providers/instancetype/types.go
// ENILimitedPods), so the difference of the two counts is ipv4PerENI − 1.
func buildTypes(region string, zones []string) (*typeTable, error) {
	family := v1.AMIFamilyAL2023
	nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMIFamily: &family}}
	nc.Name = "ec2sim"
	base, src, err := catalog.Resolve(nc, catalog.Options{Region: region, Zones: zones})
	if err != nil {
		return nil, fmt.Errorf("resolve catalog: %w", err)
	}
	reserved, _, err := catalog.Resolve(nc, catalog.Options{Region: region, Zones: zones, ReservedENIs: 1})
	if err != nil {
		return nil, fmt.Errorf("resolve catalog: %w", err)
	}
	podsWithOneReserved := map[string]int64{}
	for _, it := range reserved {
		podsWithOneReserved[it.Name] = capacityInt(it.Capacity, corev1.ResourcePods)
	}
	t := &typeTable{byName: make(map[string]*typeFacts, len(base)), fallbackPrices: src.Fallback}
	for _, it := range base {
		f := factsOf(it)
		f.maxENIs, f.ipv4PerENI = eniFacts(capacityInt(it.Capacity, corev1.ResourcePods), podsWithOneReserved[it.Name])
		t.byName[f.name] = f
		t.names = append(t.names, f.name)
	}
	slices.Sort(t.names)
	return t, nil
}

// eniFacts inverts the ENI-limited pod formula from the pod counts with 0
// (p0) and 1 (p1) reserved ENIs. Both are 0 when the catalog gives only a
// listed pod count (p0 == p1).
func eniFacts(p0, p1 int64) (maxENIs, ipv4PerENI int64) {
	switch {
	case p0 == p1 || p0 < 2:
		return 0, 0
	case p1 == 0: // one ENI: p0 = ipv4PerENI − 1 + 2
		return 1, p0 - 1
	}
	d := p0 - p1
	return (p0 - 2) / d, d + 1
}

func capacityInt(rl corev1.ResourceList, name corev1.ResourceName) int64 {
	q, ok := rl[name]
	if !ok {
		return 0
	}
	return q.Value()
}

func labelInt(l map[string]string, key string) int64 {
	n, err := strconv.ParseInt(l[key], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func factsOf(it *catalog.InstanceType) *typeFacts {
	l := it.Labels
	arch := "x86_64"
	if l[v1.LabelArch] == "arm64" {
		arch = "arm64"
	}
	f := &typeFacts{
		name:                it.Name,
		family:              l[v1.LabelInstanceFamily],
		size:                l[v1.LabelInstanceSize],
		arch:                arch,
		vcpu:                labelInt(l, v1.LabelInstanceCPU),
		memoryMiB:           labelInt(l, v1.LabelInstanceMemory),
		cpuManufacturer:     l[v1.LabelInstanceCPUManufacturer],
		clockMHz:            labelInt(l, v1.LabelInstanceCPUSustainedClockSpeedMhz),
		hypervisor:          l[v1.LabelInstanceHypervisor],
		bareMetal:           strings.Contains(l[v1.LabelInstanceSize], "metal"),
		burstable:           burstableFamily(l[v1.LabelInstanceFamily]),
		gpuName:             l[v1.LabelInstanceGPUName],
		gpuMfr:              l[v1.LabelInstanceGPUManufacturer],
		gpuCount:            labelInt(l, v1.LabelInstanceGPUCount),
		gpuMemoryMiB:        labelInt(l, v1.LabelInstanceGPUMemory),
		accName:             l[v1.LabelInstanceAcceleratorName],
		accMfr:              l[v1.LabelInstanceAcceleratorManufacturer],
		accCount:            labelInt(l, v1.LabelInstanceAcceleratorCount),
		neuronCores:         capacityInt(it.Capacity, catalog.ResourceAWSNeuronCore),
		nvmeGB:              labelInt(l, v1.LabelInstanceLocalNVME),
		ebsMbps:             labelInt(l, v1.LabelInstanceEBSBandwidth),
		networkMbps:         labelInt(l, v1.LabelInstanceNetworkBandwidth),
		encryptionInTransit: l[v1.LabelInstanceEncryptionInTransit] == "true",
		efa:                 capacityInt(it.Capacity, catalog.ResourceEFA),
	}
	for _, o := range it.Offerings {
		if o.CapacityType == v1.CapacityTypeOnDemand && o.Price > 0 {
			f.onDemand = o.Price
			break
		}
	}
	return f
}

// burstableFamily reports whether a family is a burstable T family (t2,
// t3, t3a, t4g, ...), as opposed to trn*, the other family starting with t.
func burstableFamily(family string) bool {
	return len(family) >= 2 && family[0] == 't' && family[1] >= '0' && family[1] <= '9'
}

// price returns the hourly price of a pool now, or +Inf when the type has
// no price (such pools sort last): onDemandPrice, or spotPriceAt the
// simulator clock.
func (s *Server) price(f *typeFacts, zone, capacityType string) float64 {
	if capacityType == v1.CapacityTypeSpot {
		p, _, ok := s.spotPriceAt(f, zone, s.clock.Now())
		if !ok {
			return math.Inf(1)
		}
		return p
	}
	if od := s.onDemandPrice(f); od > 0 {
		return od
	}
	return math.Inf(1)
}

// Price returns the hourly price the simulator charges now for one
// instance of instanceType in zone with capacityType ("spot" or
// "on-demand"), in USD (the currency of the region's embedded table);
// ok is false for an unknown type or a type without a price.
func (s *Server) Price(instanceType, zone, capacityType string) (price float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.types.byName[instanceType]
	if f == nil {
		return 0, false
	}
	p := s.price(f, zone, capacityType)
	return p, !math.IsInf(p, 1)
}

// InstanceTypes returns the names of every instance type the simulator
// knows (what DescribeInstanceTypes can answer), sorted.
func (s *Server) InstanceTypes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.types.names)
}

// roundPrice keeps 4 decimals, as DescribeSpotPriceHistory reports.
func roundPrice(p float64) float64 { return math.Round(p*1e4) / 1e4 }

// manufacturer turns a catalog label value (lower-kebab) back into EC2's
// spelling for the common vendors.
func manufacturer(label string) string {
	switch label {
	case "intel":
		return "Intel"
	case "amd":
		return "AMD"
	case "aws":
		return "AWS"
	case "nvidia":
		return "NVIDIA"
	case "habana":
		return "Habana"
	case "xilinx":
		return "Xilinx"
	case "apple":
		return "Apple"
	}
	return label
}

// instanceTypeXML is InstanceTypeInfo as DescribeInstanceTypes returns it.
type instanceTypeXML struct {
	InstanceType                  string                `xml:"instanceType"`
	CurrentGeneration             bool                  `xml:"currentGeneration"`
	FreeTierEligible              bool                  `xml:"freeTierEligible"`
	SupportedUsageClasses         []string              `xml:"supportedUsageClasses>item"`
	SupportedRootDeviceTypes      []string              `xml:"supportedRootDeviceTypes>item"`
	SupportedVirtualizationTypes  []string              `xml:"supportedVirtualizationTypes>item"`
	BareMetal                     bool                  `xml:"bareMetal"`
	Hypervisor                    string                `xml:"hypervisor,omitempty"`
	ProcessorInfo                 processorInfoXML      `xml:"processorInfo"`
	VCpuInfo                      vcpuInfoXML           `xml:"vCpuInfo"`
	MemoryInfo                    sizeXML               `xml:"memoryInfo"`
	InstanceStorageSupported      bool                  `xml:"instanceStorageSupported"`
	InstanceStorageInfo           *instanceStorageXML   `xml:"instanceStorageInfo,omitempty"`
	EbsInfo                       ebsInfoXML            `xml:"ebsInfo"`
	NetworkInfo                   networkInfoXML        `xml:"networkInfo"`
	GpuInfo                       *gpuInfoXML           `xml:"gpuInfo,omitempty"`
	InferenceAcceleratorInfo      *inferenceInfoXML     `xml:"inferenceAcceleratorInfo,omitempty"`
	NeuronInfo                    *neuronInfoXML        `xml:"neuronInfo,omitempty"`
	PlacementGroupInfo            placementGroupInfoXML `xml:"placementGroupInfo"`
	HibernationSupported          bool                  `xml:"hibernationSupported"`
	BurstablePerformanceSupported bool                  `xml:"burstablePerformanceSupported"`
	DedicatedHostsSupported       bool                  `xml:"dedicatedHostsSupported"`
	AutoRecoverySupported         bool                  `xml:"autoRecoverySupported"`
	SupportedBootModes            []string              `xml:"supportedBootModes>item"`
}

type processorInfoXML struct {
	SupportedArchitectures   []string `xml:"supportedArchitectures>item"`
	SustainedClockSpeedInGhz float64  `xml:"sustainedClockSpeedInGhz,omitempty"`
	Manufacturer             string   `xml:"manufacturer,omitempty"`
}

type vcpuInfoXML struct {
	DefaultVCpus          int64 `xml:"defaultVCpus"`
	DefaultCores          int64 `xml:"defaultCores"`
	DefaultThreadsPerCore int64 `xml:"defaultThreadsPerCore"`
}

type sizeXML struct {
	SizeInMiB int64 `xml:"sizeInMiB"`
}

type instanceStorageXML struct {
	TotalSizeInGB int64         `xml:"totalSizeInGB"`
	Disks         []diskInfoXML `xml:"disks>item"`
	NvmeSupport   string        `xml:"nvmeSupport"`
}

type diskInfoXML struct {
	SizeInGB int64  `xml:"sizeInGB"`
	Count    int64  `xml:"count"`
	Type     string `xml:"type"`
}

type ebsInfoXML struct {
	EbsOptimizedSupport string               `xml:"ebsOptimizedSupport"`
	EncryptionSupport   string               `xml:"encryptionSupport"`
	EbsOptimizedInfo    *ebsOptimizedInfoXML `xml:"ebsOptimizedInfo,omitempty"`
	NvmeSupport         string               `xml:"nvmeSupport"`
}

type ebsOptimizedInfoXML struct {
	BaselineBandwidthInMbps int64 `xml:"baselineBandwidthInMbps"`
	MaximumBandwidthInMbps  int64 `xml:"maximumBandwidthInMbps"`
}

type networkInfoXML struct {
	NetworkPerformance           string               `xml:"networkPerformance,omitempty"`
	MaximumNetworkInterfaces     int64                `xml:"maximumNetworkInterfaces,omitempty"`
	MaximumNetworkCards          int64                `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex      int64                `xml:"defaultNetworkCardIndex"`
	NetworkCards                 []networkCardInfoXML `xml:"networkCards>item"`
	Ipv4AddressesPerInterface    int64                `xml:"ipv4AddressesPerInterface,omitempty"`
	Ipv6AddressesPerInterface    int64                `xml:"ipv6AddressesPerInterface,omitempty"`
	Ipv6Supported                bool                 `xml:"ipv6Supported"`
	EnaSupport                   string               `xml:"enaSupport"`
	EfaSupported                 bool                 `xml:"efaSupported"`
	EfaInfo                      *efaInfoXML          `xml:"efaInfo,omitempty"`
	EncryptionInTransitSupported bool                 `xml:"encryptionInTransitSupported"`
}

type networkCardInfoXML struct {
	NetworkCardIndex         int64   `xml:"networkCardIndex"`
	NetworkPerformance       string  `xml:"networkPerformance,omitempty"`
	MaximumNetworkInterfaces int64   `xml:"maximumNetworkInterfaces,omitempty"`
	BaselineBandwidthInGbps  float64 `xml:"baselineBandwidthInGbps,omitempty"`
	PeakBandwidthInGbps      float64 `xml:"peakBandwidthInGbps,omitempty"`
}

type efaInfoXML struct {
	MaximumEfaInterfaces int64 `xml:"maximumEfaInterfaces"`
}

type gpuInfoXML struct {
	Gpus                []gpuDeviceXML `xml:"gpus>item"`
	TotalGpuMemoryInMiB int64          `xml:"totalGpuMemoryInMiB"`
}

type gpuDeviceXML struct {
	Name         string  `xml:"name"`
	Manufacturer string  `xml:"manufacturer"`
	Count        int64   `xml:"count"`
	MemoryInfo   sizeXML `xml:"memoryInfo"`
}

type inferenceInfoXML struct {
	Accelerators []inferenceDeviceXML `xml:"accelerators>item"`
}

type inferenceDeviceXML struct {
	Count        int64  `xml:"count"`
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
}

type neuronInfoXML struct {
	NeuronDevices []neuronDeviceXML `xml:"neuronDevices>item"`
}

type neuronDeviceXML struct {
	Count    int64          `xml:"count"`
	Name     string         `xml:"name"`
	CoreInfo *neuronCoreXML `xml:"coreInfo,omitempty"`
}

type neuronCoreXML struct {
	Count int64 `xml:"count"`
}

type placementGroupInfoXML struct {
	SupportedStrategies []string `xml:"supportedStrategies>item"`
}

// xml renders f as DescribeInstanceTypes does.
func (f *typeFacts) xml() instanceTypeXML {
	if f.served != nil {
		return *f.served
	}
	x := instanceTypeXML{
		InstanceType:                 f.name,
		CurrentGeneration:            true,
		FreeTierEligible:             f.name == "t2.micro" || f.name == "t3.micro",
		SupportedUsageClasses:        []string{"on-demand", "spot"},
		SupportedRootDeviceTypes:     []string{"ebs"},
		SupportedVirtualizationTypes: []string{"hvm"},
		BareMetal:                    f.bareMetal,
		ProcessorInfo: processorInfoXML{
			SupportedArchitectures:   []string{f.arch},
			SustainedClockSpeedInGhz: float64(f.clockMHz) / 1000,
			Manufacturer:             manufacturer(f.cpuManufacturer),
		},
		VCpuInfo:                      vcpuInfoXML{DefaultVCpus: f.vcpu, DefaultCores: f.vcpu, DefaultThreadsPerCore: 1},
		MemoryInfo:                    sizeXML{SizeInMiB: f.memoryMiB},
		InstanceStorageSupported:      f.nvmeGB > 0,
		BurstablePerformanceSupported: f.burstable,
		DedicatedHostsSupported:       !f.burstable,
		AutoRecoverySupported:         f.nvmeGB == 0,
		PlacementGroupInfo:            placementGroupInfoXML{SupportedStrategies: []string{"cluster", "partition", "spread"}},
		SupportedBootModes:            []string{"uefi"},
	}
	if f.arch == "x86_64" {
		x.SupportedBootModes = []string{"legacy-bios", "uefi"}
		if f.vcpu >= 2 && f.cpuManufacturer != "aws" {
			x.VCpuInfo.DefaultCores, x.VCpuInfo.DefaultThreadsPerCore = f.vcpu/2, 2
		}
	}
	if !f.bareMetal {
		x.Hypervisor = f.hypervisor
	}
	nvme := "required"
	if f.hypervisor == "xen" {
		nvme = "unsupported"
	}
	if f.nvmeGB > 0 {
		x.InstanceStorageInfo = &instanceStorageXML{
			TotalSizeInGB: f.nvmeGB,
			Disks:         []diskInfoXML{{SizeInGB: f.nvmeGB, Count: 1, Type: "ssd"}},
			NvmeSupport:   "required",
		}
	}
	x.EbsInfo = ebsInfoXML{EbsOptimizedSupport: "supported", EncryptionSupport: "supported", NvmeSupport: nvme}
	if f.ebsMbps > 0 {
		x.EbsInfo.EbsOptimizedSupport = "default"
		x.EbsInfo.EbsOptimizedInfo = &ebsOptimizedInfoXML{BaselineBandwidthInMbps: f.ebsMbps, MaximumBandwidthInMbps: f.ebsMbps}
	}
	perf := ""
	if f.networkMbps > 0 {
		perf = strconv.FormatFloat(float64(f.networkMbps)/1000, 'f', -1, 64) + " Gigabit"
	}
	ena := "required"
	if f.hypervisor == "xen" {
		ena = "supported"
	}
	x.NetworkInfo = networkInfoXML{
		NetworkPerformance:           perf,
		MaximumNetworkInterfaces:     f.maxENIs,
		MaximumNetworkCards:          1,
		NetworkCards:                 []networkCardInfoXML{{NetworkCardIndex: 0, NetworkPerformance: perf, MaximumNetworkInterfaces: f.maxENIs, BaselineBandwidthInGbps: float64(f.networkMbps) / 1000, PeakBandwidthInGbps: float64(f.networkMbps) / 1000}},
		Ipv4AddressesPerInterface:    f.ipv4PerENI,
		Ipv6AddressesPerInterface:    f.ipv4PerENI,
		Ipv6Supported:                true,
		EnaSupport:                   ena,
		EfaSupported:                 f.efa > 0,
		EncryptionInTransitSupported: f.encryptionInTransit,
	}
	if f.efa > 0 {
		x.NetworkInfo.EfaInfo = &efaInfoXML{MaximumEfaInterfaces: f.efa}
	}
	if f.gpuCount > 0 {
		x.GpuInfo = &gpuInfoXML{
			Gpus: []gpuDeviceXML{{Name: strings.ToUpper(f.gpuName), Manufacturer: manufacturer(f.gpuMfr), Count: f.gpuCount,
				MemoryInfo: sizeXML{SizeInMiB: f.gpuMemoryMiB}}},
			TotalGpuMemoryInMiB: f.gpuMemoryMiB * f.gpuCount,
		}
	}
	if f.accCount > 0 {
		name := f.accName
		if name != "" {
			name = strings.ToUpper(name[:1]) + name[1:]
		}
		if f.accMfr == "aws" {
			dev := neuronDeviceXML{Count: f.accCount, Name: name}
			if f.neuronCores > 0 {
				dev.CoreInfo = &neuronCoreXML{Count: f.neuronCores / f.accCount}
			}
			x.NeuronInfo = &neuronInfoXML{NeuronDevices: []neuronDeviceXML{dev}}
		} else {
			x.InferenceAcceleratorInfo = &inferenceInfoXML{Accelerators: []inferenceDeviceXML{{Count: f.accCount, Name: name, Manufacturer: manufacturer(f.accMfr)}}}
		}
	}
	return x
}
