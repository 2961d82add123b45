package catalog

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RefreshInterval is how old a part of LiveData may grow before the
// refresher fetches it again: Karpenter refreshes on-demand prices, Spot
// prices and instance types (with their per-zone offerings) every 12 hours
// (karpenter-spec section 1.3 timers, section 3.4; aws:
// pkg/controllers/providers/pricing and .../instancetype).
const RefreshInterval = 12 * time.Hour

// StaleAfter is the age past which a part of LiveData is reported stale
// (two missed refreshes). Stale data is still used, as Karpenter keeps its
// last answer when a refresh fails; the PriceSource says so.
const StaleAfter = 2 * RefreshInterval

// LiveData is what one region's EC2 and Pricing APIs answered, converted to
// catalog facts, for Resolve (Options.Live). Each part is optional: nil
// means "not loaded" and Resolve falls back to the embedded tables for that
// part only. Every part records when it was fetched. The value is JSON-safe
// (the refresher stores it in DynamoDB) and Resolve never changes it.
type LiveData struct {
	// Region is the region the data describes, e.g. "ap-northeast-1".
	Region string `json:"region"`
	// InstanceTypes are the region's types from DescribeInstanceTypes
	// (hvm, x86_64 or arm64).
	InstanceTypes *LiveInstanceTypes `json:"instanceTypes,omitempty"`
	// Offerings are DescribeInstanceTypeOfferings by availability zone.
	Offerings *LiveOfferings `json:"offerings,omitempty"`
	// OnDemandPrices are the Pricing API's on-demand Linux prices of the
	// region (shared tenancy).
	OnDemandPrices *LivePrices `json:"onDemandPrices,omitempty"`
	// SpotPrices are DescribeSpotPriceHistory's latest Linux/UNIX price
	// per type and zone.
	SpotPrices *LiveSpotPrices `json:"spotPrices,omitempty"`
}

// LiveInstanceTypes is the instance-type part of LiveData.
type LiveInstanceTypes struct {
	FetchedAt time.Time   `json:"fetchedAt"`
	Types     []TypeFacts `json:"types"`
}

// LiveOfferings is the offering part of LiveData: for each instance type,
// the zones (names, e.g. "ap-northeast-1a") that offer it.
type LiveOfferings struct {
	FetchedAt time.Time           `json:"fetchedAt"`
	Zones     map[string][]string `json:"zones"`
}

// LivePrices is the on-demand price part of LiveData: price per
// instance-hour by instance type, in Currency ("USD"; "CNY" in cn-
// regions).
type LivePrices struct {
	FetchedAt time.Time          `json:"fetchedAt"`
	Currency  string             `json:"currency"`
	Prices    map[string]float64 `json:"prices"`
}

// LiveSpotPrices is the Spot part of LiveData: price per instance-hour (in
// the on-demand part's currency) by instance type, then zone name.
type LiveSpotPrices struct {
	FetchedAt time.Time                     `json:"fetchedAt"`
	Prices    map[string]map[string]float64 `json:"prices"`
}

// TypeFacts is one DescribeInstanceTypes answer in the terms the catalog
// computes labels, capacity and allocatable from (the same facts the
// embedded table holds, before the catalog's formulas). Zero means "not
// stated" for every number except the GPU/accelerator/EFA counts, where it
// means none. The adapter copies fields; the rules (name parsing, EC2
// architecture and manufacturer names, the ENI-limited pod count) live in
// the catalog.
type TypeFacts struct {
	// Name is InstanceType, e.g. "m5.large".
	Name string `json:"n"`
	// Architecture is the first of ProcessorInfo.SupportedArchitectures
	// that is x86_64 or arm64 (ec2data.Facts), as EC2 names
	// it: "x86_64" or "arm64".
	Architecture string `json:"a"`
	// VCPUs is VCpuInfo.DefaultVCpus; MemoryMiB is MemoryInfo.SizeInMiB.
	VCPUs     int64 `json:"c"`
	MemoryMiB int64 `json:"m"`
	// CPUManufacturer is ProcessorInfo.Manufacturer ("Intel", "AMD", "AWS").
	CPUManufacturer string `json:"cm,omitempty"`
	// SustainedClockGHz is ProcessorInfo.SustainedClockSpeedInGhz.
	SustainedClockGHz float64 `json:"ck,omitempty"`
	// GPUs: GpuInfo.Gpus[0] count, name, manufacturer, memory (MiB).
	GPUCount        int64  `json:"gc,omitempty"`
	GPUName         string `json:"gn,omitempty"`
	GPUManufacturer string `json:"gm,omitempty"`
	GPUMemoryMiB    int64  `json:"gmm,omitempty"`
	// Neuron accelerators: NeuronInfo.NeuronDevices[0] count, name and
	// cores per device.
	NeuronCount          int64  `json:"nc,omitempty"`
	NeuronName           string `json:"nn,omitempty"`
	NeuronCoresPerDevice int64  `json:"ncd,omitempty"`
	// LocalNVMeGB is InstanceStorageInfo.TotalSizeInGB when NVMe is
	// supported; 0 without NVMe instance store.
	LocalNVMeGB int64 `json:"nvme,omitempty"`
	// NetworkBandwidthMbps is the sum of the network cards'
	// BaselineBandwidthInGbps × 1000.
	NetworkBandwidthMbps int64 `json:"nb,omitempty"`
	// EBSBandwidthMbps is EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps.
	EBSBandwidthMbps int64 `json:"eb,omitempty"`
	// Hypervisor is "nitro", "xen" or "" (bare metal).
	Hypervisor string `json:"h,omitempty"`
	BareMetal  bool   `json:"bm,omitempty"`
	// EncryptionInTransit is NetworkInfo.EncryptionInTransitSupported.
	EncryptionInTransit bool `json:"eit,omitempty"`
	// MaxENIs is NetworkInfo.MaximumNetworkInterfaces, DefaultCardMaxENIs
	// the default network card's MaximumNetworkInterfaces, IPv4PerENI
	// NetworkInfo.Ipv4AddressesPerInterface, NetworkCards
	// NetworkInfo.MaximumNetworkCards.
	MaxENIs            int64 `json:"en"`
	DefaultCardMaxENIs int64 `json:"den"`
	IPv4PerENI         int64 `json:"ip"`
	NetworkCards       int64 `json:"ncards"`
	// EFAMaxInterfaces is NetworkInfo.EfaInfo.MaximumEfaInterfaces.
	EFAMaxInterfaces int64 `json:"efa,omitempty"`
	// NestedVirtualization: ProcessorInfo.SupportedFeatures lists
	// "nested-virtualization".
	NestedVirtualization bool `json:"nv,omitempty"`
}

// typeNameScheme splits a family into category and generation, as
// Karpenter's instance-type provider parses names (aws:
// pkg/providers/instancetype/types.go instanceTypeScheme): "m5" -> m, 5;
// "u-3tb1" -> u, 1; "c7i-flex" -> c, 7.
var typeNameScheme = regexp.MustCompile(`^([a-z]+)(-[0-9]+tb)?([0-9]+)`)

// Validate reports the first fact that cannot describe an instance
// type, naming the field: a name without "<family>.<size>", an
// architecture other than x86_64/arm64, or a non-positive vCPU or memory.
func (f *TypeFacts) Validate() error {
	family, size, ok := strings.Cut(f.Name, ".")
	switch {
	case !ok || family == "" || size == "":
		return fmt.Errorf("instanceType %q: want <family>.<size>", f.Name)
	case f.Architecture != "x86_64" && f.Architecture != "arm64":
		return fmt.Errorf("instance type %s: processorInfo.supportedArchitectures %q: want x86_64 or arm64", f.Name, f.Architecture)
	case f.VCPUs <= 0:
		return fmt.Errorf("instance type %s: vCpuInfo.defaultVCpus %d: must be positive", f.Name, f.VCPUs)
	case f.MemoryMiB <= 0:
		return fmt.Errorf("instance type %s: memoryInfo.sizeInMiB %d: must be positive", f.Name, f.MemoryMiB)
	}
	return nil
}

// info converts f to the catalog's record with the embedded table's
// conventions (data/README.md): labels lower-case, clock in MHz, absent
// numbers -1, the ENI-limited pod count as Karpenter lists it
// (default-card ENIs × (IPv4 per ENI − 1) + 2). Facts DescribeInstanceTypes
// does not carry (pod-ENI branch interfaces and trunking, from the VPC
// resource controller's limits table) come from known, the embedded record
// of the same name, when there is one. f must be valid (Validate).
func (f *TypeFacts) info(known *typeInfo) typeInfo {
	family, size, _ := strings.Cut(f.Name, ".")
	t := typeInfo{
		name: f.Name, family: family, size: size, generation: absent,
		arch: "amd64", vcpu: f.VCPUs, memoryMiB: f.MemoryMiB,
		cpuManufacturer: strings.ToLower(f.CPUManufacturer),
		clockMHz:        int64(math.Round(f.SustainedClockGHz * 1000)),
		flex:            strings.HasSuffix(family, "-flex"),
		gpuCount:        absent, gpuMemoryMiB: absent, acceleratorCount: absent,
		localNVMeGB: absent, networkBandwidthMbps: absent, ebsBandwidthMbps: absent,
		hypervisor: f.Hypervisor, bareMetal: f.BareMetal, encryptionInTransit: f.EncryptionInTransit,
		maxENIs: absent, defaultCardMaxENIs: absent, ipv4PerENI: absent, branchENIs: absent,
		networkCards: absent, efa: f.EFAMaxInterfaces,
	}
	if f.Architecture == "arm64" {
		t.arch = "arm64"
	}
	if m := typeNameScheme.FindStringSubmatch(family); m != nil {
		t.category = m[1]
		t.generation, _ = strconv.ParseInt(m[3], 10, 64)
	}
	if f.GPUCount > 0 {
		t.gpuCount, t.gpuName, t.gpuMfr = f.GPUCount, strings.ToLower(f.GPUName), strings.ToLower(f.GPUManufacturer)
		if f.GPUMemoryMiB > 0 {
			t.gpuMemoryMiB = f.GPUMemoryMiB
		}
		switch t.gpuMfr {
		case "nvidia":
			t.nvidiaGPU = f.GPUCount
		case "amd":
			t.amdGPU = f.GPUCount
		}
	}
	if f.NeuronCount > 0 {
		t.acceleratorCount, t.acceleratorName, t.accMfr = f.NeuronCount, strings.ToLower(f.NeuronName), "aws"
		t.neuron, t.neuronCore = f.NeuronCount, f.NeuronCount*f.NeuronCoresPerDevice
	}
	positive := func(n int64) int64 {
		if n > 0 {
			return n
		}
		return absent
	}
	t.localNVMeGB = positive(f.LocalNVMeGB)
	t.networkBandwidthMbps = positive(f.NetworkBandwidthMbps)
	t.ebsBandwidthMbps = positive(f.EBSBandwidthMbps)
	t.maxENIs, t.defaultCardMaxENIs = positive(f.MaxENIs), positive(f.DefaultCardMaxENIs)
	t.ipv4PerENI, t.networkCards = positive(f.IPv4PerENI), positive(f.NetworkCards)
	if t.defaultCardMaxENIs != absent && t.ipv4PerENI != absent {
		t.maxPods = t.defaultCardMaxENIs*(t.ipv4PerENI-1) + 2
	}
	if known != nil {
		t.branchENIs, t.trunkingCompatible = known.branchENIs, known.trunkingCompatible
		if t.maxPods == 0 {
			t.maxPods = known.maxPods
		}
		if t.networkBandwidthMbps == absent {
			t.networkBandwidthMbps = known.networkBandwidthMbps
		}
	}
	return t
}

// lookupType returns the embedded record of name.
func lookupType(name string) (*typeInfo, bool) {
	i := sort.Search(len(catalogTypes), func(i int) bool { return catalogTypes[i].name >= name })
	if i < len(catalogTypes) && catalogTypes[i].name == name {
		return &catalogTypes[i], true
	}
	return nil, false
}

// Part names one part of LiveData.
type Part string

// The parts of LiveData, each fetched and stored on its own.
const (
	PartInstanceTypes  Part = "instance-types"
	PartOfferings      Part = "offerings"
	PartOnDemandPrices Part = "on-demand-prices"
	PartSpotPrices     Part = "spot-prices"
)

// Parts lists every part in a fixed order.
var Parts = []Part{PartInstanceTypes, PartOfferings, PartOnDemandPrices, PartSpotPrices}

// FetchedAt returns when part was fetched; ok is false when d (which may be
// nil) does not hold it.
func (d *LiveData) FetchedAt(part Part) (t time.Time, ok bool) {
	if d == nil {
		return time.Time{}, false
	}
	switch part {
	case PartInstanceTypes:
		if d.InstanceTypes != nil {
			return d.InstanceTypes.FetchedAt, true
		}
	case PartOfferings:
		if d.Offerings != nil {
			return d.Offerings.FetchedAt, true
		}
	case PartOnDemandPrices:
		if d.OnDemandPrices != nil {
			return d.OnDemandPrices.FetchedAt, true
		}
	case PartSpotPrices:
		if d.SpotPrices != nil {
			return d.SpotPrices.FetchedAt, true
		}
	}
	return time.Time{}, false
}

// Due returns the parts a refresher should fetch at now: those d lacks or
// fetched RefreshInterval or longer ago, in Parts order. With isolatedVPC
// the on-demand prices are never due (Karpenter's ISOLATED_VPC skips the
// Pricing API, which has no VPC endpoint).
func (d *LiveData) Due(now time.Time, isolatedVPC bool) []Part {
	var due []Part
	for _, p := range Parts {
		if p == PartOnDemandPrices && isolatedVPC {
			continue
		}
		if at, ok := d.FetchedAt(p); !ok || now.Sub(at) >= RefreshInterval {
			due = append(due, p)
		}
	}
	return due
}

// Validate reports the first part of d that cannot be used, naming the
// field: a region mismatch, an invalid instance type, a zone outside the
// region, or a negative, NaN or infinite price.
func (d *LiveData) Validate(region string) error {
	if d.Region != region {
		return fmt.Errorf("live data region %q: want %q", d.Region, region)
	}
	if d.InstanceTypes != nil {
		for i := range d.InstanceTypes.Types {
			if err := d.InstanceTypes.Types[i].Validate(); err != nil {
				return fmt.Errorf("live data instanceTypes[%d]: %w", i, err)
			}
		}
	}
	badZone := func(z string) bool { return !strings.HasPrefix(z, region) || len(z) == len(region) }
	if d.Offerings != nil {
		for it, zones := range d.Offerings.Zones {
			for _, z := range zones {
				if badZone(z) {
					return fmt.Errorf("live data offerings[%s]: zone %q: not a zone of region %q", it, z, region)
				}
			}
		}
	}
	badPrice := func(p float64) bool { return math.IsNaN(p) || math.IsInf(p, 0) || p < 0 }
	if d.OnDemandPrices != nil {
		for it, p := range d.OnDemandPrices.Prices {
			if badPrice(p) {
				return fmt.Errorf("live data onDemandPrices[%s] %v: want a finite price >= 0", it, p)
			}
		}
	}
	if d.SpotPrices != nil {
		for it, byZone := range d.SpotPrices.Prices {
			for z, p := range byZone {
				if badZone(z) {
					return fmt.Errorf("live data spotPrices[%s]: zone %q: not a zone of region %q", it, z, region)
				}
				if badPrice(p) {
					return fmt.Errorf("live data spotPrices[%s][%s] %v: want a finite price >= 0", it, z, p)
				}
			}
		}
	}
	return nil
}

// typeRecords returns the records Resolve builds instance types from,
// sorted by name: the live instance types when loaded (embedded facts
// filling what DescribeInstanceTypes lacks), else the embedded table. The
// result is read-only.
func typeRecords(live *LiveData) []typeInfo {
	if live == nil || live.InstanceTypes == nil {
		return catalogTypes[:]
	}
	out := make([]typeInfo, len(live.InstanceTypes.Types))
	for i := range live.InstanceTypes.Types {
		f := &live.InstanceTypes.Types[i]
		known, _ := lookupType(f.Name)
		out[i] = f.info(known)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return slices.CompactFunc(out, func(a, b typeInfo) bool { return a.name == b.name })
}

// nestedVirtualizationTypes are the names of the types live's
// DescribeInstanceTypes answer says support nested virtualization; none
// without live instance types (the embedded table does not carry the
// feature).
func nestedVirtualizationTypes(live *LiveData) map[string]bool {
	out := map[string]bool{}
	if live == nil || live.InstanceTypes == nil {
		return out
	}
	for _, f := range live.InstanceTypes.Types {
		if f.NestedVirtualization {
			out[f.Name] = true
		}
	}
	return out
}

// livePriceSource completes embedded, the embedded price source, with the
// parts opts.Live holds: per part where it came from and its age, and a
// Description naming every source.
func livePriceSource(embedded PriceSource, opts Options) PriceSource {
	l := opts.Live
	src := embedded
	part := func(p Part, api string, fallback string) PartSource {
		at, ok := l.FetchedAt(p)
		if !ok {
			return PartSource{Part: p, Source: fallback}
		}
		ps := PartSource{Part: p, Live: true, Source: api, FetchedAt: at}
		if !opts.Now.IsZero() && !at.IsZero() {
			ps.Age = opts.Now.Sub(at)
			ps.Stale = ps.Age > StaleAfter
		}
		return ps
	}
	embeddedOD := "embedded table for " + embedded.Region
	if embedded.Fallback {
		embeddedOD += " (the table has no " + opts.Region + " prices)"
	}
	spotFallback := "none (no spot offerings)"
	if opts.SpotPriceRatio == 1 {
		spotFallback = "on-demand price (Karpenter's pricing until Spot prices load)"
	} else if opts.SpotPriceRatio > 0 {
		spotFallback = "estimate: on-demand x " + strconv.FormatFloat(opts.SpotPriceRatio, 'g', -1, 64)
	}
	src.Parts = []PartSource{
		part(PartInstanceTypes, "DescribeInstanceTypes", "embedded catalog"),
		part(PartOfferings, "DescribeInstanceTypeOfferings", "embedded assumption: every type in every zone"),
		part(PartOnDemandPrices, "Pricing GetProducts", embeddedOD),
		part(PartSpotPrices, "DescribeSpotPriceHistory", spotFallback),
	}
	if l.OnDemandPrices != nil {
		src.Region, src.Fallback = opts.Region, false
		src.Currency = l.OnDemandPrices.Currency
		src.GeneratedAt = l.OnDemandPrices.FetchedAt.UTC().Format(time.RFC3339)
	}
	var b strings.Builder
	for i, ps := range src.Parts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(string(ps.Part))
		b.WriteString(": ")
		if !ps.Live {
			b.WriteString(ps.Source)
			if _, isLive := l.FetchedAt(ps.Part); !isLive {
				b.WriteString(" (live data not loaded)")
			}
			continue
		}
		fmt.Fprintf(&b, "%s in %s, fetched %s", ps.Source, opts.Region, ps.FetchedAt.UTC().Format(time.RFC3339))
		if ps.Age > 0 {
			fmt.Fprintf(&b, " (%s ago", ps.Age.Round(time.Minute))
			if ps.Stale {
				b.WriteString(", stale")
			}
			b.WriteString(")")
		}
		if ps.Part == PartOnDemandPrices {
			fmt.Fprintf(&b, ", %s per hour", src.Currency)
		}
		src.Stale = src.Stale || ps.Stale
	}
	src.Description = b.String()
	return src
}
