package catalog_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

var liveFetched = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

// m5LargeFacts is m5.large as DescribeInstanceTypes describes it (the
// values of shared/aws/ec2data/testdata/describe-instance-types-ap-northeast-1-selected.xml).
func m5LargeFacts() catalog.TypeFacts {
	return catalog.TypeFacts{
		Name: "m5.large", Architecture: "x86_64", VCPUs: 2, MemoryMiB: 8192, CPUManufacturer: "Intel",
		SustainedClockGHz: 3.1, NetworkBandwidthMbps: 750, EBSBandwidthMbps: 4750, Hypervisor: "nitro",
		MaxENIs: 3, DefaultCardMaxENIs: 3, IPv4PerENI: 10, NetworkCards: 1,
	}
}

// liveOnly is a type the embedded catalog lacks.
func liveOnly() catalog.TypeFacts {
	return catalog.TypeFacts{
		Name: "zz9g.xlarge", Architecture: "arm64", VCPUs: 4, MemoryMiB: 16384, CPUManufacturer: "AWS",
		SustainedClockGHz: 2.8, NetworkBandwidthMbps: 1875, EBSBandwidthMbps: 10000, Hypervisor: "nitro",
		MaxENIs: 4, DefaultCardMaxENIs: 4, IPv4PerENI: 15, NetworkCards: 1,
	}
}

func liveData(types ...catalog.TypeFacts) *catalog.LiveData {
	return &catalog.LiveData{
		Region:        "ap-northeast-1",
		InstanceTypes: &catalog.LiveInstanceTypes{FetchedAt: liveFetched, Types: types},
		Offerings: &catalog.LiveOfferings{FetchedAt: liveFetched, Zones: map[string][]string{
			"m5.large":    {"ap-northeast-1a", "ap-northeast-1c", "ap-northeast-1d"},
			"zz9g.xlarge": {"ap-northeast-1a", "ap-northeast-1c"},
		}},
		OnDemandPrices: &catalog.LivePrices{FetchedAt: liveFetched, Currency: "USD", Prices: map[string]float64{
			"m5.large": 0.124, "zz9g.xlarge": 0.2,
		}},
		SpotPrices: &catalog.LiveSpotPrices{FetchedAt: liveFetched, Prices: map[string]map[string]float64{
			"m5.large":    {"ap-northeast-1a": 0.05, "ap-northeast-1c": 0.041},
			"zz9g.xlarge": {"ap-northeast-1a": 0.07, "ap-northeast-1c": 0.09},
		}},
	}
}

func tokyoClass() *v1.EC2NodeClass {
	return nodeClass(func(nc *v1.EC2NodeClass) {
		nc.Status.Subnets = []v1.Subnet{
			{ID: "subnet-a", Zone: "ap-northeast-1a", ZoneID: "apne1-az4"},
			{ID: "subnet-c", Zone: "ap-northeast-1c", ZoneID: "apne1-az1"},
			{ID: "subnet-d", Zone: "ap-northeast-1d", ZoneID: "apne1-az2"},
		}
	})
}

func findType(types []*catalog.InstanceType, name string) *catalog.InstanceType {
	for _, it := range types {
		if it.Name == name {
			return it
		}
	}
	return nil
}

func TestResolveLiveTypesUseTheEmbeddedFormulas(t *testing.T) {
	embedded, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: "ap-northeast-1"})
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: "ap-northeast-1", Live: liveData(m5LargeFacts(), liveOnly())})
	if err != nil {
		t.Fatal(err)
	}
	want, got := findType(embedded, "m5.large"), findType(live, "m5.large")
	if got == nil {
		t.Fatal("m5.large missing from the live resolution")
	}
	if diff := cmp.Diff(want.Labels, got.Labels); diff != "" {
		t.Errorf("labels of a DescribeInstanceTypes answer differ from the embedded record's (-embedded +live):\n%s", diff)
	}
	if diff := cmp.Diff(want.Allocatable(), got.Allocatable()); diff != "" {
		t.Errorf("allocatable differs (-embedded +live):\n%s", diff)
	}
	if diff := cmp.Diff(want.Capacity, got.Capacity); diff != "" {
		t.Errorf("capacity differs (-embedded +live):\n%s", diff)
	}
	if len(live) != 2 {
		t.Errorf("live resolution has %d types, want only the 2 the region answered", len(live))
	}
}

func TestResolveLiveOnlyTypeIsUsable(t *testing.T) {
	types, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: "ap-northeast-1", Live: liveData(liveOnly())})
	if err != nil {
		t.Fatal(err)
	}
	it := findType(types, "zz9g.xlarge")
	if it == nil {
		t.Fatal("a type only in the live answer is missing")
	}
	wantLabels := map[string]string{
		v1.LabelArch: "arm64", v1.LabelInstanceCategory: "zz", v1.LabelInstanceFamily: "zz9g",
		v1.LabelInstanceGeneration: "9", v1.LabelInstanceSize: "xlarge", v1.LabelInstanceCPU: "4",
		v1.LabelInstanceMemory: "16384", v1.LabelInstanceCPUManufacturer: "aws",
	}
	for k, v := range wantLabels {
		if it.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, it.Labels[k], v)
		}
	}
	// ENI-limited pods: 4 × (15 − 1) + 2.
	if got := it.Capacity.Pods().Value(); got != 58 {
		t.Errorf("pods capacity = %d, want 58", got)
	}
	if _, ok := it.Offerings.CheapestAvailable(nil, nil); !ok {
		t.Error("a live-only type has no available offering")
	}
}

func TestResolveLiveOfferings(t *testing.T) {
	types, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: "ap-northeast-1", Live: liveData(m5LargeFacts(), liveOnly())})
	if err != nil {
		t.Fatal(err)
	}
	type off struct {
		Zone, CapacityType string
		Price              float64
		Available          bool
	}
	summarize := func(ofs catalog.Offerings) []off {
		var out []off
		for _, o := range ofs {
			out = append(out, off{o.Zone, o.CapacityType, o.Price, o.Available})
		}
		return out
	}
	tests := []struct {
		name, instanceType string
		want               []off
	}{
		{
			name: "should not offer a type in a zone the region does not offer it in", instanceType: "zz9g.xlarge",
			want: []off{
				{"ap-northeast-1a", "on-demand", 0.2, true}, {"ap-northeast-1a", "spot", 0.07, true},
				{"ap-northeast-1c", "on-demand", 0.2, true}, {"ap-northeast-1c", "spot", 0.09, true},
			},
		},
		{
			name: "should make a spot offering without a spot price unavailable", instanceType: "m5.large",
			want: []off{
				{"ap-northeast-1a", "on-demand", 0.124, true}, {"ap-northeast-1a", "spot", 0.05, true},
				{"ap-northeast-1c", "on-demand", 0.124, true}, {"ap-northeast-1c", "spot", 0.041, true},
				{"ap-northeast-1d", "on-demand", 0.124, true}, {"ap-northeast-1d", "spot", 0, false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarize(findType(types, tt.instanceType).Offerings)); diff != "" {
				t.Errorf("offerings (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("should limit offerings to the class's subnet zones", func(t *testing.T) {
		nc := tokyoClass()
		nc.Status.Subnets = nc.Status.Subnets[1:2]
		types, _, err := catalog.Resolve(nc, catalog.Options{Region: "ap-northeast-1", Live: liveData(m5LargeFacts())})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range types[0].Offerings {
			if o.Zone != "ap-northeast-1c" {
				t.Errorf("offering in %s, outside the class's subnet zones", o.Zone)
			}
		}
	})
	t.Run("should price spot at the ratio only while no spot prices are loaded", func(t *testing.T) {
		l := liveData(m5LargeFacts())
		l.SpotPrices = nil
		types, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: "ap-northeast-1", Live: l, SpotPriceRatio: 1})
		if err != nil {
			t.Fatal(err)
		}
		spot := types[0].Offerings.Compatible(nil, func(ct string) bool { return ct == "spot" })
		if len(spot) != 3 || spot[0].Price != 0.124 || !spot[0].Available {
			t.Errorf("spot offerings before spot prices load = %+v, want 3 at the on-demand price", spot)
		}
	})
	t.Run("should make a type without a live on-demand price unavailable on demand", func(t *testing.T) {
		l := liveData(m5LargeFacts())
		l.OnDemandPrices.Prices = map[string]float64{}
		types, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: "ap-northeast-1", Live: l})
		if err != nil {
			t.Fatal(err)
		}
		if types[0].Offerings.HasAvailable(nil, func(ct string) bool { return ct == "on-demand" }) {
			t.Error("on-demand offering available without a price")
		}
	})
}

func TestResolveLivePriceSource(t *testing.T) {
	now := liveFetched.Add(30 * time.Hour)
	l := liveData(m5LargeFacts())
	l.SpotPrices = nil
	_, src, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: "ap-northeast-1", Live: l, Now: now, SpotPriceRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := "instance-types: DescribeInstanceTypes in ap-northeast-1, fetched 2026-12-02T03:00:00Z (30h0m0s ago, stale); " +
		"offerings: DescribeInstanceTypeOfferings in ap-northeast-1, fetched 2026-12-02T03:00:00Z (30h0m0s ago, stale); " +
		"on-demand-prices: Pricing GetProducts in ap-northeast-1, fetched 2026-12-02T03:00:00Z (30h0m0s ago, stale), USD per hour; " +
		"spot-prices: on-demand price (Karpenter's pricing until Spot prices load) (live data not loaded)"
	if src.Description != want {
		t.Errorf("Description =\n%s\nwant\n%s", src.Description, want)
	}
	if !src.Stale || src.Region != "ap-northeast-1" || src.Fallback || src.Currency != "USD" {
		t.Errorf("PriceSource = %+v, want stale live ap-northeast-1 USD prices", src)
	}
	if len(src.Parts) != 4 || src.Parts[3].Live || !src.Parts[0].Live || src.Parts[0].Age != 30*time.Hour {
		t.Errorf("Parts = %+v", src.Parts)
	}
}

func TestLiveDataDue(t *testing.T) {
	full := liveData(m5LargeFacts())
	tests := []struct {
		name     string
		data     *catalog.LiveData
		now      time.Time
		isolated bool
		want     []catalog.Part
	}{
		{name: "nothing loaded: every part is due", data: nil, now: liveFetched, want: catalog.Parts},
		{name: "fresh data: nothing is due", data: full, now: liveFetched.Add(11 * time.Hour)},
		{name: "12 hours old: every part is due", data: full, now: liveFetched.Add(12 * time.Hour), want: catalog.Parts},
		{name: "isolated VPC never fetches on-demand prices", data: nil, now: liveFetched, isolated: true,
			want: []catalog.Part{catalog.PartInstanceTypes, catalog.PartOfferings, catalog.PartSpotPrices}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.data.Due(tt.now, tt.isolated)); diff != "" {
				t.Errorf("Due (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveLiveDataErrors(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*catalog.LiveData)
		wantErr string
	}{
		{name: "other region", mod: func(l *catalog.LiveData) { l.Region = "us-east-1" }, wantErr: `options.Live: live data region "us-east-1"`},
		{name: "bad architecture", mod: func(l *catalog.LiveData) { l.InstanceTypes.Types[0].Architecture = "i386" },
			wantErr: "instanceTypes[0]: instance type m5.large: processorInfo.supportedArchitectures"},
		{name: "zone of another region", mod: func(l *catalog.LiveData) { l.Offerings.Zones["m5.large"] = []string{"us-east-1a"} },
			wantErr: `offerings[m5.large]: zone "us-east-1a"`},
		{name: "negative spot price", mod: func(l *catalog.LiveData) { l.SpotPrices.Prices["m5.large"]["ap-northeast-1a"] = -1 },
			wantErr: "spotPrices[m5.large][ap-northeast-1a] -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := liveData(m5LargeFacts())
			tt.mod(l)
			_, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: "ap-northeast-1", Live: l})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Resolve() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestResolveNestedVirtualizationOffersOnlyTypesSupportingIt(t *testing.T) {
	nested := liveOnly()
	nested.NestedVirtualization = true
	enabled := func(v string) *v1.EC2NodeClass {
		nc := tokyoClass()
		nc.Spec.CPUOptions = &v1.CPUOptions{NestedVirtualization: &v}
		return nc
	}
	available := func(t *testing.T, nc *v1.EC2NodeClass, live *catalog.LiveData, name string) bool {
		t.Helper()
		types, _, err := catalog.Resolve(nc, catalog.Options{Region: "ap-northeast-1", Live: live})
		if err != nil {
			t.Fatal(err)
		}
		it := findType(types, name)
		if it == nil {
			t.Fatalf("type %s missing", name)
		}
		_, ok := it.Offerings.CheapestAvailable(nil, nil)
		return ok
	}
	live := liveData(m5LargeFacts(), nested)
	for _, tc := range []struct {
		what string
		nc   *v1.EC2NodeClass
		live *catalog.LiveData
		typ  string
		want bool
	}{
		{"should offer a type supporting nested virtualization when enabled", enabled("enabled"), live, "zz9g.xlarge", true},
		{"should not offer a type without it when enabled", enabled("enabled"), live, "m5.large", false},
		{"should offer a type without it when disabled", enabled("disabled"), live, "m5.large", true},
		{"should offer a type without it when unset", tokyoClass(), live, "m5.large", true},
		{"should offer no embedded type when enabled (the table does not carry the feature)", enabled("enabled"), nil, "m5.large", false},
	} {
		if got := available(t, tc.nc, tc.live, tc.typ); got != tc.want {
			t.Errorf("%s: %s available = %v, want %v", tc.what, tc.typ, got, tc.want)
		}
	}
}
