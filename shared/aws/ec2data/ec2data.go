// Package ec2data reads one region's instance types, per-zone offerings,
// on-demand prices and Spot prices from the EC2 and Pricing APIs and turns
// them into catalog.LiveData parts, the way Karpenter's AWS provider reads
// them (karpenter-spec section 3.4; aws: pkg/providers/instancetype,
// pkg/providers/pricing):
//   - DescribeInstanceTypes filtered to supported-virtualization-type=hvm
//     and processor-info.supported-architecture x86_64 or arm64;
//   - DescribeInstanceTypeOfferings with LocationType availability-zone;
//   - Pricing GetProducts for AmazonEC2 on-demand Linux, shared tenancy,
//     no pre-installed software, capacity status Used, of the region
//     (product families "Compute Instance" and "Compute Instance (bare
//     metal)"), through the endpoint region PricingRegion names;
//   - DescribeSpotPriceHistory for Linux/UNIX (and its Amazon VPC variant)
//     from now, keeping the latest price per type and zone.
//
// Every call pages to the end. A part is returned whole or not at all: an
// error on any page (throttling once the SDK's retries are spent, an
// unreachable endpoint, an answer that does not parse) fails that part and
// leaves the others, so a caller keeps its previous copy of the failed part.
// The package decides nothing: the catalog owns what the facts mean.
package ec2data

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/nodewright/nodewright/shared/catalog"
)

// EC2API is the EC2 client as the provider uses it (*ec2.Client).
type EC2API interface {
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// PricingAPI is the Pricing client as the provider uses it
// (*pricing.Client, configured for PricingRegion's endpoint).
type PricingAPI interface {
	GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

var (
	_ EC2API     = (*ec2.Client)(nil)
	_ PricingAPI = (*pricing.Client)(nil)
)

// Provider fetches the parts of catalog.LiveData for one region. It holds
// no state between calls.
type Provider struct {
	ec2     EC2API
	pricing PricingAPI
	region  string
}

// New returns a Provider for region. pricingAPI may be nil (isolated VPCs
// have no Pricing endpoint): on-demand prices are then never fetched.
func New(ec2API EC2API, pricingAPI PricingAPI, region string) (*Provider, error) {
	if ec2API == nil {
		return nil, errors.New("ec2data: EC2 client: required")
	}
	if region == "" {
		return nil, errors.New("ec2data: region: required")
	}
	return &Provider{ec2: ec2API, pricing: pricingAPI, region: region}, nil
}

// PricingRegion is the region whose Pricing API endpoint serves region's
// prices: ap-south-1 for China (cn-) and isolated (iso) partitions,
// us-east-1 otherwise (karpenter-spec section 3.4; the Pricing API has
// endpoints in a few regions only).
func PricingRegion(region string) string {
	if strings.HasPrefix(region, "cn-") || strings.HasPrefix(region, "iso") {
		return "ap-south-1"
	}
	return "us-east-1"
}

// Currency is the currency the Pricing API quotes region in: CNY for
// China regions, USD elsewhere.
func Currency(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return "CNY"
	}
	return "USD"
}

// ErrNoPricing is returned for on-demand prices when the Provider has no
// Pricing client.
var ErrNoPricing = errors.New("no Pricing API client (isolated VPC)")

// Fetch fetches parts at now and returns them in a LiveData for the
// provider's region (parts not asked for, or that failed, are nil), with
// an error joining each failed part's error ("<part>: <cause>").
func (p *Provider) Fetch(ctx context.Context, parts []catalog.Part, now time.Time) (catalog.LiveData, error) {
	out := catalog.LiveData{Region: p.region}
	var errs []error
	for _, part := range parts {
		var err error
		switch part {
		case catalog.PartInstanceTypes:
			out.InstanceTypes, err = p.InstanceTypes(ctx, now)
		case catalog.PartOfferings:
			out.Offerings, err = p.Offerings(ctx, now)
		case catalog.PartOnDemandPrices:
			out.OnDemandPrices, err = p.OnDemandPrices(ctx, now)
		case catalog.PartSpotPrices:
			out.SpotPrices, err = p.SpotPrices(ctx, now)
		default:
			err = errors.New("unknown part")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", part, err))
		}
	}
	return out, errors.Join(errs...)
}

// InstanceTypes pages through DescribeInstanceTypes (hvm, x86_64 or
// arm64) and converts each answer to catalog.TypeFacts, skipping a type
// that supports neither architecture (Karpenter's filter). A type the
// catalog cannot describe (catalog.TypeFacts.Validate) is an error: the
// part is not returned half-converted.
func (p *Provider) InstanceTypes(ctx context.Context, now time.Time) (*catalog.LiveInstanceTypes, error) {
	in := &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		{Name: aws.String("supported-virtualization-type"), Values: []string{"hvm"}},
		{Name: aws.String("processor-info.supported-architecture"), Values: []string{"x86_64", "arm64"}},
	}}
	out := &catalog.LiveInstanceTypes{FetchedAt: now}
	pages := ec2.NewDescribeInstanceTypesPaginator(p.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe instance types: %w", err)
		}
		for i := range page.InstanceTypes {
			f := Facts(&page.InstanceTypes[i])
			if f.Architecture == "" {
				continue // neither x86_64 nor arm64: not a type nodewright launches
			}
			if err := f.Validate(); err != nil {
				return nil, fmt.Errorf("describe instance types: %w", err)
			}
			out.Types = append(out.Types, f)
		}
	}
	return out, nil
}

// Facts converts one DescribeInstanceTypes answer to catalog.TypeFacts,
// copying fields (see catalog.TypeFacts for which field is which).
func Facts(it *ec2types.InstanceTypeInfo) catalog.TypeFacts {
	f := catalog.TypeFacts{
		Name:       string(it.InstanceType),
		BareMetal:  aws.ToBool(it.BareMetal),
		Hypervisor: string(it.Hypervisor),
	}
	if pi := it.ProcessorInfo; pi != nil {
		f.Architecture = architecture(pi.SupportedArchitectures)
		f.CPUManufacturer = aws.ToString(pi.Manufacturer)
		f.SustainedClockGHz = aws.ToFloat64(pi.SustainedClockSpeedInGhz)
		f.NestedVirtualization = slices.Contains(pi.SupportedFeatures, ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization)
	}
	if v := it.VCpuInfo; v != nil {
		f.VCPUs = int64(aws.ToInt32(v.DefaultVCpus))
	}
	if m := it.MemoryInfo; m != nil {
		f.MemoryMiB = aws.ToInt64(m.SizeInMiB)
	}
	if g := it.GpuInfo; g != nil && len(g.Gpus) > 0 {
		gpu := g.Gpus[0]
		f.GPUCount = int64(aws.ToInt32(gpu.Count))
		f.GPUName = aws.ToString(gpu.Name)
		f.GPUManufacturer = aws.ToString(gpu.Manufacturer)
		if gpu.MemoryInfo != nil {
			f.GPUMemoryMiB = int64(aws.ToInt32(gpu.MemoryInfo.SizeInMiB))
		}
	}
	if n := it.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		d := n.NeuronDevices[0]
		f.NeuronCount = int64(aws.ToInt32(d.Count))
		f.NeuronName = aws.ToString(d.Name)
		if d.CoreInfo != nil {
			f.NeuronCoresPerDevice = int64(aws.ToInt32(d.CoreInfo.Count))
		}
	}
	if s := it.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported {
		f.LocalNVMeGB = aws.ToInt64(s.TotalSizeInGB)
	}
	if e := it.EbsInfo; e != nil && e.EbsOptimizedInfo != nil {
		f.EBSBandwidthMbps = int64(aws.ToInt32(e.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	if n := it.NetworkInfo; n != nil {
		f.EncryptionInTransit = aws.ToBool(n.EncryptionInTransitSupported)
		f.MaxENIs = int64(aws.ToInt32(n.MaximumNetworkInterfaces))
		f.IPv4PerENI = int64(aws.ToInt32(n.Ipv4AddressesPerInterface))
		f.NetworkCards = int64(aws.ToInt32(n.MaximumNetworkCards))
		f.DefaultCardMaxENIs = f.MaxENIs
		var gbps float64
		for _, c := range n.NetworkCards {
			gbps += aws.ToFloat64(c.BaselineBandwidthInGbps)
			if aws.ToInt32(c.NetworkCardIndex) == aws.ToInt32(n.DefaultNetworkCardIndex) {
				f.DefaultCardMaxENIs = int64(aws.ToInt32(c.MaximumNetworkInterfaces))
			}
		}
		f.NetworkBandwidthMbps = int64(gbps*1000 + 0.5)
		if n.EfaInfo != nil {
			f.EFAMaxInterfaces = int64(aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces))
		}
	}
	return f
}

// architecture returns the first of archs that is x86_64 or arm64, the
// two Karpenter maps to kubernetes.io/arch (amd64, arm64), or "" when
// there is neither. EC2 lists more than one for some types (t2.nano,
// t2.micro, c3.large, m1.*: i386 and x86_64), so the first entry is not
// the answer.
func architecture(archs []ec2types.ArchitectureType) string {
	for _, a := range archs {
		if a == ec2types.ArchitectureTypeX8664 || a == ec2types.ArchitectureTypeArm64 {
			return string(a)
		}
	}
	return ""
}

// Offerings pages through DescribeInstanceTypeOfferings by availability
// zone and returns, per instance type, the zones that offer it, in the
// order EC2 listed them.
func (p *Provider) Offerings(ctx context.Context, now time.Time) (*catalog.LiveOfferings, error) {
	in := &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone}
	out := &catalog.LiveOfferings{FetchedAt: now, Zones: map[string][]string{}}
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe instance type offerings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			name, zone := string(o.InstanceType), aws.ToString(o.Location)
			if name == "" || zone == "" {
				continue
			}
			out.Zones[name] = append(out.Zones[name], zone)
		}
	}
	return out, nil
}

// spotProducts are the product descriptions of Linux Spot prices
// (Karpenter asks for both).
var spotProducts = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

// SpotPrices pages through DescribeSpotPriceHistory from now (EC2 then
// returns the price in force at now per type and zone) and keeps, per type
// and zone, the price with the latest timestamp. A price that does not
// parse is an error.
func (p *Provider) SpotPrices(ctx context.Context, now time.Time) (*catalog.LiveSpotPrices, error) {
	in := &ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: spotProducts, StartTime: aws.Time(now)}
	out := &catalog.LiveSpotPrices{FetchedAt: now, Prices: map[string]map[string]float64{}}
	latest := map[[2]string]time.Time{}
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe spot price history: %w", err)
		}
		for _, sp := range page.SpotPriceHistory {
			name, zone := string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)
			if name == "" || zone == "" {
				continue
			}
			price, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil {
				return nil, fmt.Errorf("describe spot price history: %s in %s: spotPrice %q: %w", name, zone, aws.ToString(sp.SpotPrice), err)
			}
			key, at := [2]string{name, zone}, aws.ToTime(sp.Timestamp)
			if prev, seen := latest[key]; seen && !at.After(prev) {
				continue
			}
			latest[key] = at
			if out.Prices[name] == nil {
				out.Prices[name] = map[string]float64{}
			}
			out.Prices[name][zone] = price
		}
	}
	return out, nil
}

// productFamilies are the Pricing API product families of EC2 instances.
var productFamilies = []string{"Compute Instance", "Compute Instance (bare metal)"}

// OnDemandPrices pages through Pricing GetProducts for the region's
// on-demand Linux prices (see the package doc for the filters) and returns
// the price per instance type in Currency(region). ErrNoPricing without a
// Pricing client.
func (p *Provider) OnDemandPrices(ctx context.Context, now time.Time) (*catalog.LivePrices, error) {
	if p.pricing == nil {
		return nil, ErrNoPricing
	}
	currency := Currency(p.region)
	out := &catalog.LivePrices{FetchedAt: now, Currency: currency, Prices: map[string]float64{}}
	for _, family := range productFamilies {
		in := &pricing.GetProductsInput{
			ServiceCode:   aws.String("AmazonEC2"),
			FormatVersion: aws.String("aws_v1"),
			Filters: []pricingtypes.Filter{
				termMatch("regionCode", p.region),
				termMatch("productFamily", family),
				termMatch("operatingSystem", "Linux"),
				termMatch("tenancy", "Shared"),
				termMatch("preInstalledSw", "NA"),
				termMatch("capacitystatus", "Used"),
			},
		}
		pages := pricing.NewGetProductsPaginator(p.pricing, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("pricing get products: %w", err)
			}
			for i, doc := range page.PriceList {
				name, price, ok, err := parseProduct(doc, currency)
				if err != nil {
					return nil, fmt.Errorf("pricing get products: PriceList[%d]: %w", i, err)
				}
				if ok {
					out.Prices[name] = price
				}
			}
		}
	}
	return out, nil
}

func termMatch(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

// product is the part of one PriceList document (a JSON string in the
// GetProducts answer, format aws_v1) the provider reads.
type product struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// parseProduct returns the hourly on-demand price of one PriceList
// document in currency. ok is false for a document with no instance type
// or no positive hourly price (Karpenter skips those); a document that is
// not JSON or whose price is not a number is an error.
func parseProduct(doc, currency string) (name string, price float64, ok bool, err error) {
	var pr product
	if err := json.Unmarshal([]byte(doc), &pr); err != nil {
		return "", 0, false, fmt.Errorf("decode: %w", err)
	}
	name = pr.Product.Attributes.InstanceType
	if name == "" {
		return "", 0, false, nil
	}
	for _, term := range pr.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			s, has := dim.PricePerUnit[currency]
			if !has || !strings.EqualFold(dim.Unit, "Hrs") {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return "", 0, false, fmt.Errorf("%s: pricePerUnit.%s %q: %w", name, currency, s, err)
			}
			if v > 0 {
				return name, v, true, nil
			}
		}
	}
	return name, 0, false, nil
}
