package catalog

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// fallbackPriceRegion is the price table used for regions the embedded
// table lacks.
const fallbackPriceRegion = "us-east-1"

// PriceSource says where prices came from, for output that must state it.
type PriceSource struct {
	// Description is one human-readable sentence, e.g. "on-demand prices:
	// embedded table for us-east-1 (USD per hour, generated
	// 2026-07-20T13:44:30Z); no spot offerings".
	Description string
	// Region is the region whose table priced the offerings; it differs from
	// Options.Region when Fallback is set.
	Region string
	// Currency is the table's currency: "USD", or "CNY" for cn- regions.
	Currency string
	// GeneratedAt is when the table was generated (RFC 3339).
	GeneratedAt string
	// Fallback is true when Options.Region has no embedded table and
	// us-east-1 prices were used instead.
	Fallback bool
	// SpotPriceRatio is Options.SpotPriceRatio: spot offerings are priced at
	// on-demand × this ratio (0: no spot offerings) unless Options.Live
	// holds Spot prices.
	SpotPriceRatio float64
	// Parts says, when Options.Live is set, where each part of the data
	// came from and how old it is, in Parts order; nil without
	// Options.Live (everything embedded, as Description says).
	Parts []PartSource
	// Stale is true when some live part is older than StaleAfter.
	Stale bool
}

// PartSource is where one part of the data Resolve used came from.
type PartSource struct {
	Part Part
	// Live is true when the part came from the region's API (Source names
	// the call), false when embedded data or an estimate stood in.
	Live bool
	// Source is the API ("DescribeInstanceTypes",
	// "DescribeInstanceTypeOfferings", "Pricing GetProducts",
	// "DescribeSpotPriceHistory") or the stand-in, in words.
	Source string
	// FetchedAt is when the live part was fetched; zero otherwise.
	FetchedAt time.Time
	// Age is Options.Now − FetchedAt (0 when either is zero).
	Age time.Duration
	// Stale is true when Age exceeds StaleAfter.
	Stale bool
}

// Resolve returns every instance type of the embedded catalog as it would
// launch with nodeClass, sorted by name, each a new value the caller may
// keep or change. It follows karpenter-provider-aws v1.14
// (pkg/providers/instancetype/types.go, offering/base_resolver.go; spec §3.4,
// §3.5):
//   - Labels: the type's well-known labels (see InstanceType.Labels).
//   - Capacity and Overhead: per the node class's AMI family, kubelet,
//     blockDeviceMappings, instanceStorePolicy and networkInterfaces, with
//     opts.ReservedENIs and opts.VMMemoryOverheadPercent.
//   - Offerings: one per zone × capacity type (on-demand; spot too when
//     opts.SpotPriceRatio > 0), in zone order, on-demand first. Zones are
//     opts.Zones, else the zones of status.subnets, else every zone of
//     opts.Region from a small embedded table (us-east-1, us-east-2,
//     us-west-2, ca-central-1, sa-east-1, eu-west-1/2/3, eu-central-1,
//     eu-north-1, ap-northeast-1/2, ap-southeast-1/2, ap-south-1,
//     us-gov-east-1, us-gov-west-1, cn-north-1, cn-northwest-1). On-demand
//     prices come from the embedded table for opts.Region, or us-east-1's
//     when the table lacks the region (the returned PriceSource says which).
//     After them, one reserved offering per active entry of
//     status.capacityReservations for the type in one of the zones (see
//     reservedOfferings).
//
// An offering is unavailable when the type has no price, when
// opts.Unavailable reports it, or when the type is incompatible with the
// node class: a1.* with AL2023, or spec.networkInterfaces asking for a
// network card, a card-0 device index or more efa-only interfaces than the
// type has, or spec.cpuOptions.nestedVirtualization "enabled" on a type
// that does not support it (ProcessorInfo.SupportedFeatures of the live
// instance types; without them no type is known to, and every offering of
// such a class is unavailable). Incompatible types stay in the list with
// every offering unavailable, as Karpenter keeps them. Types that cannot run the family at
// all are omitted: arm64 types for Windows families (Karpenter gives them no
// kubernetes.io/os value).
//
// The data does not model per-zone type availability, supported usage
// classes, placement groups, nested virtualization (live data does) or ENA
// support: every type is offered in every zone and for both capacity types.
//
// Errors name the field at fault: a nil node class, a missing or unknown
// AMI family, an invalid kubelet quantity, evictionHard value or
// instanceStorePolicy, a missing Region, a zone outside Region, a negative
// SpotPriceRatio or ReservedENIs, or a region with no known zones when
// neither opts.Zones nor status.subnets gives any.
func Resolve(nodeClass *v1.EC2NodeClass, opts Options) ([]*InstanceType, PriceSource, error) {
	if nodeClass == nil {
		return nil, PriceSource{}, errors.New("node class: nil")
	}
	if opts.Region == "" {
		return nil, PriceSource{}, errors.New("options.Region: required")
	}
	if r := opts.SpotPriceRatio; math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		return nil, PriceSource{}, fmt.Errorf("options.SpotPriceRatio %v: want a finite value >= 0", r)
	}
	cfg, err := newLaunchConfig(nodeClass, opts)
	if err != nil {
		return nil, PriceSource{}, fmt.Errorf("ec2nodeclass %s: %w", nodeClass.Name, err)
	}
	for i, z := range opts.Zones {
		if !strings.HasPrefix(z, opts.Region) || len(z) == len(opts.Region) {
			return nil, PriceSource{}, fmt.Errorf("options.Zones[%d] %q: not a zone of region %q", i, z, opts.Region)
		}
	}
	zoneIDByZone := map[string]string{}
	var subnetZones []string
	for _, s := range nodeClass.Status.Subnets {
		if s.Zone == "" {
			continue
		}
		subnetZones = append(subnetZones, s.Zone)
		if zoneIDByZone[s.Zone] == "" {
			zoneIDByZone[s.Zone] = s.ZoneID
		}
	}
	zones, ok := offeringZones(opts.Zones, subnetZones, opts.Region)
	if !ok {
		return nil, PriceSource{}, fmt.Errorf("options.Region %q: zones unknown; set Options.Zones or the node class's status.subnets", opts.Region)
	}
	zoneIDs := make([]string, len(zones))
	for i, z := range zones {
		zoneIDs[i] = zoneIDByZone[z]
	}

	if opts.Live != nil {
		if err := opts.Live.Validate(opts.Region); err != nil {
			return nil, PriceSource{}, fmt.Errorf("options.Live: %w", err)
		}
	}
	src, table := priceSource(opts.Region, opts.SpotPriceRatio)
	if opts.Live != nil {
		src = livePriceSource(src, opts)
	}
	pricer := newOfferingPricer(table, opts)

	records := typeRecords(opts.Live)
	nested := nestedVirtualizationTypes(opts.Live)
	backing := make([]InstanceType, 0, len(records))
	for i := range records {
		t := &records[i]
		if cfg.family.windows() && t.arch == "arm64" {
			continue
		}
		capacity := capacity(t, &cfg)
		backing = append(backing, InstanceType{
			Name:     t.name,
			Labels:   labels(t, cfg.family, opts.Region),
			Capacity: capacity,
			Overhead: overhead(t, &cfg, capacity),
			Offerings: append(pricer.offerings(t.name, zones, zoneIDs, compatible(t, &cfg, nested), opts.Unavailable),
				pricer.reservedOfferings(t.name, nodeClass.Status.CapacityReservations, zones, zoneIDs, compatible(t, &cfg, nested), opts)...),
		})
	}
	out := make([]*InstanceType, len(backing))
	for i := range backing {
		out[i] = &backing[i]
	}
	return out, src, nil
}

// priceSource picks the price table for region and describes it.
func priceSource(region string, spotRatio float64) (PriceSource, *priceTable) {
	table, ok := lookupPriceTable(region)
	if !ok {
		// fallbackPriceRegion is in the generated table; the tests prove it.
		table, _ = lookupPriceTable(fallbackPriceRegion)
	}
	src := PriceSource{
		Region:         table.region,
		Currency:       table.currency,
		GeneratedAt:    table.generatedAt,
		Fallback:       !ok,
		SpotPriceRatio: spotRatio,
	}
	var b strings.Builder
	fmt.Fprintf(&b, "on-demand prices: embedded table for %s (%s per hour, generated %s)", table.region, table.currency, table.generatedAt)
	if !ok {
		fmt.Fprintf(&b, ", used because the table has no %s prices", region)
	}
	if spotRatio > 0 {
		fmt.Fprintf(&b, "; spot prices estimated as on-demand x %s (no spot price data)", strconv.FormatFloat(spotRatio, 'g', -1, 64))
	} else {
		b.WriteString("; no spot offerings")
	}
	src.Description = b.String()
	return src, table
}

// compatible reports whether Karpenter would offer t with the node class
// (aws: pkg/providers/instancetype/compatibility/compatibility.go), as far
// as the data allows: a1 types cannot run AL2023; spec.networkInterfaces
// must fit the type's network cards, its default card's ENIs (card 0 only:
// the data gives no per-card count for other cards) and its maximum EFA
// interfaces; spec.cpuOptions.nestedVirtualization enabled needs a type in
// nested (the types DescribeInstanceTypes says support it).
func compatible(t *typeInfo, cfg *launchConfig, nested map[string]bool) bool {
	if t.family == "a1" && cfg.family.name == v1.AMIFamilyAL2023 {
		return false
	}
	if cfg.nestedVirtualization && !nested[t.name] {
		return false
	}
	if len(cfg.networkInterfaces) == 0 {
		return true
	}
	for _, ni := range cfg.networkInterfaces {
		if t.networkCards != absent && int64(ni.NetworkCardIndex) >= t.networkCards {
			return false
		}
		if ni.NetworkCardIndex == 0 && t.defaultCardMaxENIs != absent && int64(ni.DeviceIndex) >= t.defaultCardMaxENIs {
			return false
		}
	}
	return cfg.efaOnly <= t.efa
}
