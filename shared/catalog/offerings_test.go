package catalog_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

func od(zone string, price float64, available bool) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: available}
}

func spot(zone string, price float64, available bool) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: v1.CapacityTypeSpot, Price: price, Available: available}
}

func TestResolveOfferings(t *testing.T) {
	tests := []struct {
		name     string
		nc       *v1.EC2NodeClass
		opts     catalog.Options
		instance string
		want     catalog.Offerings
	}{
		{
			name: "should offer on-demand in every zone of the region by default", nc: nodeClass(), opts: defaultOptions, instance: "m5.large",
			want: catalog.Offerings{
				od("us-east-1a", 0.096, true), od("us-east-1b", 0.096, true), od("us-east-1c", 0.096, true),
				od("us-east-1d", 0.096, true), od("us-east-1e", 0.096, true), od("us-east-1f", 0.096, true),
			},
		},
		{
			name: "should use the zones of status.subnets, with their zone IDs",
			nc:   nodeClass(subnets("us-east-1c", "us-east-1a", "us-east-1c")), opts: defaultOptions, instance: "m5.large",
			want: catalog.Offerings{
				{Zone: "us-east-1a", ZoneID: "use1-az2", CapacityType: "on-demand", Price: 0.096, Available: true},
				{Zone: "us-east-1c", ZoneID: "use1-az1", CapacityType: "on-demand", Price: 0.096, Available: true},
			},
		},
		{
			name: "should prefer Options.Zones over status.subnets",
			nc:   nodeClass(subnets("us-east-1a", "us-east-1b")),
			opts: catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1b", "us-east-1d"}}, instance: "m5.large",
			want: catalog.Offerings{
				{Zone: "us-east-1b", ZoneID: "use1-az2", CapacityType: "on-demand", Price: 0.096, Available: true},
				od("us-east-1d", 0.096, true),
			},
		},
		{
			name: "should add spot offerings priced at on-demand x SpotPriceRatio",
			nc:   nodeClass(), opts: catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1a", "us-east-1b"}, SpotPriceRatio: 0.5},
			instance: "m5.large",
			want: catalog.Offerings{
				od("us-east-1a", 0.096, true), spot("us-east-1a", 0.048, true),
				od("us-east-1b", 0.096, true), spot("us-east-1b", 0.048, true),
			},
		},
		{
			name: "should mark the offerings Unavailable reports as unavailable",
			nc:   nodeClass(), instance: "m5.large",
			opts: catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1a", "us-east-1b"}, SpotPriceRatio: 0.5,
				Unavailable: func(it, zone, ct string) bool { return it == "m5.large" && zone == "us-east-1b" && ct == "spot" }},
			want: catalog.Offerings{
				od("us-east-1a", 0.096, true), spot("us-east-1a", 0.048, true),
				od("us-east-1b", 0.096, true), spot("us-east-1b", 0.048, false),
			},
		},
		{
			name: "should price from the region's own table", nc: nodeClass(subnets("us-gov-west-1a")),
			opts: catalog.Options{Region: "us-gov-west-1"}, instance: "m5.large",
			want: catalog.Offerings{{Zone: "us-gov-west-1a", ZoneID: "use1-az1", CapacityType: "on-demand", Price: 0.121, Available: true}},
		},
		{
			name: "should fall back to us-east-1 prices for a region without a table", nc: nodeClass(),
			opts: catalog.Options{Region: "ap-northeast-1"}, instance: "m5.large",
			want: catalog.Offerings{od("ap-northeast-1a", 0.096, true), od("ap-northeast-1c", 0.096, true), od("ap-northeast-1d", 0.096, true)},
		},
		{
			name: "should make offerings of a type without a price unavailable", nc: nodeClass(),
			opts: catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1a"}, SpotPriceRatio: 0.3}, instance: "hpc6a.48xlarge",
			want: catalog.Offerings{od("us-east-1a", 0, false), spot("us-east-1a", 0, false)},
		},
		{
			name: "should not offer a1 instance types with AL2023", nc: nodeClass(),
			opts: catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1a"}}, instance: "a1.large",
			want: catalog.Offerings{od("us-east-1a", 0.051, false)},
		},
		{
			name: "should offer a1 instance types with Bottlerocket", nc: nodeClass(alias("bottlerocket@latest")),
			opts: catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1a"}}, instance: "a1.large",
			want: catalog.Offerings{od("us-east-1a", 0.051, true)},
		},
		{
			name: "should offer a1 instance types with a Custom AMI", nc: nodeClass(amiFamily(v1.AMIFamilyCustom)),
			opts: catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1a"}}, instance: "a1.large",
			want: catalog.Offerings{od("us-east-1a", 0.051, true)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolveType(t, tt.nc, tt.opts, tt.instance).Offerings
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s offerings (-want +got):\n%s", tt.instance, diff)
			}
		})
	}
}

// Network interface compatibility (aws: compatibility.go), via availability.
func TestResolveNetworkInterfaceCompatibility(t *testing.T) {
	primary := v1.NetworkInterface{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"}
	tests := []struct {
		name     string
		nis      []v1.NetworkInterface
		instance string
		want     bool
	}{
		{name: "should be compatible with EFA support and a single EFA interface", instance: "p4d.24xlarge", want: true,
			nis: []v1.NetworkInterface{primary, {NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"}}},
		{name: "should be compatible with EFA support and multiple EFA interfaces", instance: "p4d.24xlarge", want: true,
			nis: []v1.NetworkInterface{primary, {NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"},
				{NetworkCardIndex: 2, DeviceIndex: 0, InterfaceType: "efa-only"}, {NetworkCardIndex: 3, DeviceIndex: 0, InterfaceType: "efa-only"}}},
		{name: "should be incompatible when EFA interfaces exceed the maximum", instance: "hpc6a.48xlarge", want: false,
			nis: []v1.NetworkInterface{primary, {NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"},
				{NetworkCardIndex: 0, DeviceIndex: 2, InterfaceType: "efa-only"}}},
		{name: "should be incompatible when the instance does not support EFA", instance: "m5.large", want: false,
			nis: []v1.NetworkInterface{primary, {NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"}}},
		{name: "should be incompatible when the network card index exceeds the cards", instance: "m5.large", want: false,
			nis: []v1.NetworkInterface{primary, {NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "interface"}}},
		{name: "should be incompatible when the device index exceeds the maximum ENIs", instance: "m5.large", want: false,
			nis: []v1.NetworkInterface{primary, {NetworkCardIndex: 0, DeviceIndex: 3, InterfaceType: "interface"}}},
		{name: "should be compatible when the device index fits", instance: "m5.large", want: true,
			nis: []v1.NetworkInterface{primary, {NetworkCardIndex: 0, DeviceIndex: 2, InterfaceType: "interface"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := catalog.Options{Region: "us-gov-west-1", Zones: []string{"us-gov-west-1a"}}
			got := resolveType(t, nodeClass(networkInterfaces(tt.nis...)), opts, tt.instance).Offerings
			if len(got) != 1 || got[0].Available != tt.want {
				t.Errorf("%s offerings = %+v, want one with Available %t", tt.instance, got, tt.want)
			}
		})
	}
}

func TestResolvePriceSource(t *testing.T) {
	tests := []struct {
		name string
		opts catalog.Options
		want catalog.PriceSource
	}{
		{
			name: "region with a table and no spot", opts: catalog.Options{Region: "us-east-1"},
			want: catalog.PriceSource{
				Description: "on-demand prices: embedded table for us-east-1 (USD per hour, generated 2026-07-20T13:44:30Z); no spot offerings",
				Region:      "us-east-1", Currency: "USD", GeneratedAt: "2026-07-20T13:44:30Z",
			},
		},
		{
			name: "region without a table falls back to us-east-1, spot estimated", opts: catalog.Options{Region: "eu-west-1", SpotPriceRatio: 0.35},
			want: catalog.PriceSource{
				Description: "on-demand prices: embedded table for us-east-1 (USD per hour, generated 2026-07-20T13:44:30Z), used because the table has no eu-west-1 prices; spot prices estimated as on-demand x 0.35 (no spot price data)",
				Region:      "us-east-1", Currency: "USD", GeneratedAt: "2026-07-20T13:44:30Z", Fallback: true, SpotPriceRatio: 0.35,
			},
		},
		{
			name: "China prices are in CNY", opts: catalog.Options{Region: "cn-north-1"},
			want: catalog.PriceSource{
				Description: "on-demand prices: embedded table for cn-north-1 (CNY per hour, generated 2024-11-06T01:00:11Z); no spot offerings",
				Region:      "cn-north-1", Currency: "CNY", GeneratedAt: "2024-11-06T01:00:11Z",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := catalog.Resolve(nodeClass(), tt.opts)
			if err != nil {
				t.Fatalf("Resolve() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PriceSource (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveAvailableTypeCounts(t *testing.T) {
	// data/README.md: 1345 of 1363 types have a us-east-1 price; a1 (6
	// types) is incompatible with AL2023.
	tests := []struct {
		name string
		nc   *v1.EC2NodeClass
		want int
	}{
		{name: "AL2023 excludes unpriced and a1 types", nc: nodeClass(), want: 1345 - 6},
		{name: "Bottlerocket excludes unpriced types only", nc: nodeClass(alias("bottlerocket@latest")), want: 1345},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			for _, it := range mustResolve(t, tt.nc, defaultOptions) {
				if it.Offerings.HasAvailable(nil, nil) {
					n++
				}
			}
			if n != tt.want {
				t.Errorf("types with an available offering = %d, want %d", n, tt.want)
			}
		})
	}
}

func TestOfferingsHelpers(t *testing.T) {
	ofs := catalog.Offerings{
		od("us-east-1a", 0.10, true), spot("us-east-1a", 0.03, false),
		od("us-east-1b", 0.10, true), spot("us-east-1b", 0.04, true),
		od("us-east-1c", 0.09, false), spot("us-east-1c", 0.04, true),
	}
	in := func(values ...string) func(string) bool {
		return func(v string) bool { return slices.Contains(values, v) }
	}
	type result struct {
		Offering catalog.Offering
		OK       bool
	}
	cheapest := func(o catalog.Offering, ok bool) result { return result{o, ok} }

	tests := []struct {
		name string
		got  any
		want any
	}{
		{name: "Available keeps available offerings in order",
			got:  ofs.Available(),
			want: catalog.Offerings{ofs[0], ofs[2], ofs[3], ofs[5]}},
		{name: "Available of nothing available is nil",
			got:  catalog.Offerings{spot("us-east-1a", 1, false)}.Available(),
			want: catalog.Offerings(nil)},
		{name: "Cheapest ignores availability",
			got:  cheapest(ofs.Cheapest()),
			want: result{ofs[1], true}},
		{name: "Cheapest breaks ties by order",
			got:  cheapest(ofs.Available().Cheapest()),
			want: result{ofs[3], true}},
		{name: "Cheapest of none is not ok",
			got:  cheapest(catalog.Offerings(nil).Cheapest()),
			want: result{}},
		{name: "Compatible filters by zone and capacity type",
			got:  ofs.Compatible(in("us-east-1b", "us-east-1c"), in(v1.CapacityTypeOnDemand)),
			want: catalog.Offerings{ofs[2], ofs[4]}},
		{name: "Compatible with nil predicates keeps everything",
			got:  ofs.Compatible(nil, nil),
			want: ofs},
		{name: "CheapestAvailable skips unavailable offerings",
			got:  cheapest(ofs.CheapestAvailable(nil, nil)),
			want: result{ofs[3], true}},
		{name: "CheapestAvailable honours the zone predicate",
			got:  cheapest(ofs.CheapestAvailable(in("us-east-1c"), nil)),
			want: result{ofs[5], true}},
		{name: "CheapestAvailable honours the capacity-type predicate",
			got:  cheapest(ofs.CheapestAvailable(in("us-east-1a", "us-east-1c"), in(v1.CapacityTypeOnDemand))),
			want: result{ofs[0], true}},
		{name: "CheapestAvailable with nothing compatible is not ok",
			got:  cheapest(ofs.CheapestAvailable(in("us-east-1d"), nil)),
			want: result{}},
		{name: "HasAvailable reports a compatible available offering",
			got:  []bool{ofs.HasAvailable(in("us-east-1c"), in(v1.CapacityTypeSpot)), ofs.HasAvailable(in("us-east-1c"), in(v1.CapacityTypeOnDemand))},
			want: []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
