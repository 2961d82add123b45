package ec2sim

import (
	"encoding/xml"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// AddInstanceType makes the simulator serve one more instance type, as
// EC2 does when a type launches that the embedded catalog (and so every
// other simulator type) predates. item is the type exactly as
// DescribeInstanceTypes returns it: one <item> of instanceTypeSet, EC2's
// XML (InstanceTypeInfo); DescribeInstanceTypes serves it verbatim from
// then on. onDemand is its on-demand Linux price per hour, which the
// Pricing API serves unchanged; Spot pools are priced from it as for every
// type, and the world decides the zones that offer it
// (DescribeInstanceTypeOfferings, Offered), so CreateFleet launches it
// wherever it is offered. Only this simulator changes.
//
// Errors name the field: XML that does not parse, an instanceType without
// "<family>.<size>" or one the simulator already serves, an architecture
// other than x86_64 or arm64, a non-positive vCPU count, memory size or
// onDemand.
func (s *Server) AddInstanceType(item []byte, onDemand float64) error {
	var x instanceTypeXML
	if err := xml.Unmarshal(item, &x); err != nil {
		return fmt.Errorf("add instance type: %w", err)
	}
	f, err := factsOfXML(&x)
	if err != nil {
		return fmt.Errorf("add instance type: %w", err)
	}
	if math.IsNaN(onDemand) || math.IsInf(onDemand, 0) || onDemand <= 0 {
		return fmt.Errorf("add instance type %s: onDemand %v: want a positive price per hour", f.name, onDemand)
	}
	f.onDemand, f.served = onDemand, &x
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.types.byName[f.name] != nil {
		return fmt.Errorf("add instance type: instanceType %q: the simulator already serves it", f.name)
	}
	// The table is shared by every simulator of the region: copy it.
	t := &typeTable{byName: maps.Clone(s.types.byName), names: slices.Clone(s.types.names), fallbackPrices: s.types.fallbackPrices}
	t.byName[f.name] = f
	t.names = append(t.names, f.name)
	slices.Sort(t.names)
	s.types = t
	return nil
}

// factsOfXML reads the facts the simulator acts on (filters, pricing,
// launch) from a DescribeInstanceTypes item.
func factsOfXML(x *instanceTypeXML) (*typeFacts, error) {
	family, size, ok := strings.Cut(x.InstanceType, ".")
	if !ok || family == "" || size == "" {
		return nil, fmt.Errorf("instanceType %q: want <family>.<size>", x.InstanceType)
	}
	f := &typeFacts{
		name: x.InstanceType, family: family, size: size,
		vcpu: x.VCpuInfo.DefaultVCpus, memoryMiB: x.MemoryInfo.SizeInMiB,
		cpuManufacturer: strings.ToLower(x.ProcessorInfo.Manufacturer),
		clockMHz:        int64(math.Round(x.ProcessorInfo.SustainedClockSpeedInGhz * 1000)),
		hypervisor:      x.Hypervisor, bareMetal: x.BareMetal, burstable: x.BurstablePerformanceSupported,
		encryptionInTransit: x.NetworkInfo.EncryptionInTransitSupported,
		maxENIs:             x.NetworkInfo.MaximumNetworkInterfaces, ipv4PerENI: x.NetworkInfo.Ipv4AddressesPerInterface,
	}
	for _, a := range x.ProcessorInfo.SupportedArchitectures {
		if a == "x86_64" || a == "arm64" {
			f.arch = a
			break
		}
	}
	switch {
	case f.arch == "":
		return nil, fmt.Errorf("instance type %s: processorInfo.supportedArchitectures %q: want x86_64 or arm64", f.name, x.ProcessorInfo.SupportedArchitectures)
	case f.vcpu <= 0:
		return nil, fmt.Errorf("instance type %s: vCpuInfo.defaultVCpus %d: must be positive", f.name, f.vcpu)
	case f.memoryMiB <= 0:
		return nil, fmt.Errorf("instance type %s: memoryInfo.sizeInMiB %d: must be positive", f.name, f.memoryMiB)
	}
	if s := x.InstanceStorageInfo; s != nil && s.NvmeSupport != "unsupported" {
		f.nvmeGB = s.TotalSizeInGB
	}
	if e := x.EbsInfo.EbsOptimizedInfo; e != nil {
		f.ebsMbps = e.MaximumBandwidthInMbps
	}
	for _, c := range x.NetworkInfo.NetworkCards {
		f.networkMbps += int64(math.Round(c.BaselineBandwidthInGbps * 1000))
	}
	if e := x.NetworkInfo.EfaInfo; e != nil {
		f.efa = e.MaximumEfaInterfaces
	}
	if g := x.GpuInfo; g != nil && len(g.Gpus) > 0 {
		f.gpuName, f.gpuMfr = strings.ToLower(g.Gpus[0].Name), strings.ToLower(g.Gpus[0].Manufacturer)
		f.gpuCount, f.gpuMemoryMiB = g.Gpus[0].Count, g.Gpus[0].MemoryInfo.SizeInMiB
	}
	if n := x.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		d := n.NeuronDevices[0]
		f.accName, f.accMfr, f.accCount = strings.ToLower(d.Name), "aws", d.Count
		if d.CoreInfo != nil {
			f.neuronCores = d.Count * d.CoreInfo.Count
		}
	}
	return f, nil
}
