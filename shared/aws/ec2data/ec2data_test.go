package ec2data_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ec2data"
	"github.com/nodewright/nodewright/shared/catalog"
)

const region = "ap-northeast-1"

var now = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ec2Server answers the EC2 Query API with the captured fixtures, by Action.
func ec2Server(t *testing.T) *ec2.Client {
	t.Helper()
	bodies := map[string][]byte{
		"DescribeInstanceTypes":         fixture(t, "describe-instance-types-ap-northeast-1-selected.xml"),
		"DescribeInstanceTypeOfferings": fixture(t, "describe-instance-type-offerings-ap-northeast-1-availability-zone.xml"),
		"DescribeSpotPriceHistory":      fixture(t, "describe-spot-price-history-ap-northeast-1.xml"),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, ok := bodies[r.PostForm.Get("Action")]
		if !ok {
			http.Error(w, "unsupported action", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	// Retries on, as in production: the SDK over a loopback httptest
	// server sometimes reads a 200 answer on a connection its transport
	// has closed ("use of closed network connection", aws-sdk-go-v2
	// issues 1825 and 2737), about one call in two with these bodies.
	return ec2.New(ec2.Options{Region: region, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), RetryMaxAttempts: 3})
}

// pricingServer answers GetProducts (JSON 1.1 protocol) with the two
// fixture pages, following NextToken, and records the requests.
func pricingServer(t *testing.T) (*pricing.Client, *[]map[string]any) {
	t.Helper()
	page1, page2 := fixture(t, "get-products-page1.json"), fixture(t, "get-products-page2.json")
	var mu sync.Mutex
	var requests []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AWSPriceListService.GetProducts" {
			http.Error(w, "unsupported target", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		requests = append(requests, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if req["NextToken"] != nil {
			_, _ = w.Write(page2)
			return
		}
		_, _ = w.Write(page1)
	}))
	t.Cleanup(srv.Close)
	return pricing.New(pricing.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), RetryMaxAttempts: 1}), &requests
}

func tokyoClass() *v1.EC2NodeClass {
	nc := &v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-test",
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"k": "v"}}},
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"k": "v"}}},
		},
	}
	nc.Status.Subnets = []v1.Subnet{{ID: "subnet-a", Zone: "ap-northeast-1a"}, {ID: "subnet-c", Zone: "ap-northeast-1c"}, {ID: "subnet-d", Zone: "ap-northeast-1d"}}
	return nc
}

// noBandwidth are the captured types whose embedded record lacks the
// network bandwidth DescribeInstanceTypes reports.
var noBandwidth = map[string]bool{"c3.large": true, "t2.nano": true}

func TestInstanceTypesOfACapturedAnswerResolveAsTheEmbeddedCatalog(t *testing.T) {
	p, err := ec2data.New(ec2Server(t), nil, region)
	if err != nil {
		t.Fatal(err)
	}
	types, err := p.InstanceTypes(t.Context(), now)
	if err != nil {
		t.Fatalf("InstanceTypes() error = %v", err)
	}
	// The capture holds 20 types; mac1.metal (x86_64_mac) is neither
	// x86_64 nor arm64 and is skipped.
	if len(types.Types) != 19 || !types.FetchedAt.Equal(now) {
		t.Fatalf("InstanceTypes() = %d types fetched at %v, want the 19 x86_64/arm64 ones captured at %v", len(types.Types), types.FetchedAt, now)
	}
	live, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: region, Live: &catalog.LiveData{Region: region, InstanceTypes: types}})
	if err != nil {
		t.Fatal(err)
	}
	embedded, _, err := catalog.Resolve(tokyoClass(), catalog.Options{Region: region})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*catalog.InstanceType{}
	for _, it := range embedded {
		byName[it.Name] = it
	}
	for _, got := range live {
		want := byName[got.Name]
		if want == nil {
			t.Errorf("%s: not in the embedded catalog", got.Name)
			continue
		}
		wantLabels := want.Labels
		if noBandwidth[got.Name] {
			// The embedded table has no network bandwidth for these
			// previous-generation types; EC2 (and moto) report a
			// baseline, so the live label carries it.
			wantLabels = maps.Clone(want.Labels)
			wantLabels[v1.LabelInstanceNetworkBandwidth] = got.Labels[v1.LabelInstanceNetworkBandwidth]
		}
		if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
			t.Errorf("%s labels (-embedded +live):\n%s", got.Name, diff)
		}
		if diff := cmp.Diff(want.Allocatable(), got.Allocatable()); diff != "" {
			t.Errorf("%s allocatable (-embedded +live):\n%s", got.Name, diff)
		}
	}
}

func TestOfferingsOfACapturedAnswerArePerZone(t *testing.T) {
	p, _ := ec2data.New(ec2Server(t), nil, region)
	got, err := p.Offerings(t.Context(), now)
	if err != nil {
		t.Fatalf("Offerings() error = %v", err)
	}
	// moto's (AWS's) ap-northeast-1: these five types skip zone d, every
	// other captured type is in all three zones.
	twoZones := []string{"c3.large", "g5.xlarge", "inf2.xlarge", "mac1.metal", "p5.48xlarge"}
	want := map[string][]string{}
	for _, n := range strings.Fields(string(fixture(t, "types.txt"))) {
		want[n] = []string{"ap-northeast-1a", "ap-northeast-1c", "ap-northeast-1d"}
		if slices.Contains(twoZones, n) {
			want[n] = []string{"ap-northeast-1a", "ap-northeast-1c"}
		}
	}
	if diff := cmp.Diff(want, got.Zones); diff != "" {
		t.Errorf("Offerings() zones (-want +got):\n%s", diff)
	}
}

func TestSpotPricesOfACapturedAnswer(t *testing.T) {
	p, _ := ec2data.New(ec2Server(t), nil, region)
	got, err := p.SpotPrices(t.Context(), now)
	if err != nil {
		t.Fatalf("SpotPrices() error = %v", err)
	}
	all := map[string]float64{"ap-northeast-1a": 0.00001, "ap-northeast-1c": 0.00001, "ap-northeast-1d": 0.00001}
	want := map[string]map[string]float64{"m5.large": all, "m6g.medium": all}
	if diff := cmp.Diff(want, got.Prices); diff != "" {
		t.Errorf("SpotPrices() (-want +got):\n%s", diff)
	}
}

func TestOnDemandPricesParsePriceListAcrossPages(t *testing.T) {
	client, requests := pricingServer(t)
	p, _ := ec2data.New(ec2Server(t), client, region)
	got, err := p.OnDemandPrices(t.Context(), now)
	if err != nil {
		t.Fatalf("OnDemandPrices() error = %v", err)
	}
	want := &catalog.LivePrices{FetchedAt: now, Currency: "USD", Prices: map[string]float64{"m5.large": 0.124, "m6g.medium": 0.0495, "g5.xlarge": 1.459}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OnDemandPrices() (-want +got):\n%s", diff)
	}
	// Two product families, two pages each.
	if len(*requests) != 4 {
		t.Fatalf("GetProducts calls = %d, want 4 (2 product families x 2 pages)", len(*requests))
	}
	filters := map[string]string{}
	for _, f := range (*requests)[0]["Filters"].([]any) {
		m := f.(map[string]any)
		filters[m["Field"].(string)] = m["Value"].(string)
	}
	wantFilters := map[string]string{"regionCode": region, "productFamily": "Compute Instance", "operatingSystem": "Linux",
		"tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
	if diff := cmp.Diff(wantFilters, filters); diff != "" {
		t.Errorf("GetProducts filters (-want +got):\n%s", diff)
	}
}

func TestPricingRegion(t *testing.T) {
	for give, want := range map[string]string{
		"us-east-1": "us-east-1", "ap-northeast-1": "us-east-1", "eu-west-1": "us-east-1",
		"cn-north-1": "ap-south-1", "cn-northwest-1": "ap-south-1", "iso-east-1": "ap-south-1", "isob-east-1": "ap-south-1",
	} {
		if got := ec2data.PricingRegion(give); got != want {
			t.Errorf("PricingRegion(%q) = %q, want %q", give, got, want)
		}
	}
}

// pagingEC2 is an EC2API double that pages like EC2 does: it splits its
// items into pages of pageSize and hands out NextToken until the last
// page, failing page failPage (1-based; 0: none) with failErr.
type pagingEC2 struct {
	types     []ec2types.InstanceTypeInfo
	offerings []ec2types.InstanceTypeOffering
	spot      []ec2types.SpotPrice
	pageSize  int
	failPage  int
	failErr   error
	calls     map[string]int
	inputs    []any
}

func page[T any](items []T, size int, token *string) ([]T, *string) {
	start := 0
	if token != nil {
		start = int((*token)[0] - 'a')
	}
	end := min(start+size, len(items))
	if end < len(items) {
		return items[start:end], aws.String(string(rune('a' + end)))
	}
	return items[start:end], nil
}

func (f *pagingEC2) call(op string, in any) error {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	f.inputs = append(f.inputs, in)
	if f.failPage != 0 && f.calls[op] == f.failPage {
		return f.failErr
	}
	return nil
}

func (f *pagingEC2) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	if err := f.call("DescribeInstanceTypes", in); err != nil {
		return nil, err
	}
	items, next := page(f.types, f.pageSize, in.NextToken)
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: items, NextToken: next}, nil
}

func (f *pagingEC2) DescribeInstanceTypeOfferings(_ context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	if err := f.call("DescribeInstanceTypeOfferings", in); err != nil {
		return nil, err
	}
	items, next := page(f.offerings, f.pageSize, in.NextToken)
	return &ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: items, NextToken: next}, nil
}

func (f *pagingEC2) DescribeSpotPriceHistory(_ context.Context, in *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	if err := f.call("DescribeSpotPriceHistory", in); err != nil {
		return nil, err
	}
	items, next := page(f.spot, f.pageSize, in.NextToken)
	return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: items, NextToken: next}, nil
}

func typeInfo(name string) ec2types.InstanceTypeInfo {
	return ec2types.InstanceTypeInfo{
		InstanceType:  ec2types.InstanceType(name),
		ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{"x86_64"}, Manufacturer: aws.String("Intel")},
		VCpuInfo:      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(2)},
		MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(8192)},
		NetworkInfo:   &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(3), Ipv4AddressesPerInterface: aws.Int32(10), MaximumNetworkCards: aws.Int32(1)},
	}
}

func offering(name, zone string) ec2types.InstanceTypeOffering {
	return ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(name), Location: aws.String(zone), LocationType: ec2types.LocationTypeAvailabilityZone}
}

func spot(name, zone, price string, at time.Time) ec2types.SpotPrice {
	return ec2types.SpotPrice{InstanceType: ec2types.InstanceType(name), AvailabilityZone: aws.String(zone), SpotPrice: aws.String(price), Timestamp: aws.Time(at)}
}

func newPaging() *pagingEC2 {
	return &pagingEC2{
		pageSize: 2,
		types:    []ec2types.InstanceTypeInfo{typeInfo("m5.large"), typeInfo("m5.xlarge"), typeInfo("c5.large"), typeInfo("zz1.large"), typeInfo("r5.large")},
		offerings: []ec2types.InstanceTypeOffering{offering("m5.large", "ap-northeast-1a"), offering("m5.large", "ap-northeast-1c"),
			offering("c5.large", "ap-northeast-1d"), offering("m5.large", "ap-northeast-1d"), offering("zz1.large", "ap-northeast-1a")},
		spot: []ec2types.SpotPrice{
			spot("m5.large", "ap-northeast-1a", "0.0410", now.Add(-time.Hour)),
			spot("m5.large", "ap-northeast-1a", "0.0380", now.Add(-3*time.Hour)),
			spot("m5.large", "ap-northeast-1c", "0.0520", now.Add(-2*time.Hour)),
			spot("c5.large", "ap-northeast-1d", "0.0300", now.Add(-5*time.Minute)),
			spot("m5.large", "ap-northeast-1a", "0.0395", now.Add(-30*time.Minute)),
		},
	}
}

func TestFetchPagesEveryCallToTheEnd(t *testing.T) {
	f := newPaging()
	p, _ := ec2data.New(f, nil, region)
	got, err := p.Fetch(t.Context(), []catalog.Part{catalog.PartInstanceTypes, catalog.PartOfferings, catalog.PartSpotPrices}, now)
	if err != nil {
		t.Fatalf("Fetch() error = %v", err)
	}
	if n := len(got.InstanceTypes.Types); n != 5 {
		t.Errorf("instance types = %d, want all 5 across 3 pages", n)
	}
	wantZones := map[string][]string{"m5.large": {"ap-northeast-1a", "ap-northeast-1c", "ap-northeast-1d"}, "c5.large": {"ap-northeast-1d"}, "zz1.large": {"ap-northeast-1a"}}
	if diff := cmp.Diff(wantZones, got.Offerings.Zones); diff != "" {
		t.Errorf("offerings (-want +got):\n%s", diff)
	}
	wantSpot := map[string]map[string]float64{"m5.large": {"ap-northeast-1a": 0.0395, "ap-northeast-1c": 0.052}, "c5.large": {"ap-northeast-1d": 0.03}}
	if diff := cmp.Diff(wantSpot, got.SpotPrices.Prices); diff != "" {
		t.Errorf("spot prices: want the latest per type and zone (-want +got):\n%s", diff)
	}
	if got.OnDemandPrices != nil {
		t.Error("on-demand prices fetched although not asked for")
	}
	for op, n := range f.calls {
		if n != 3 {
			t.Errorf("%s called %d times, want 3 (5 items in pages of 2)", op, n)
		}
	}
	first := f.inputs[0].(*ec2.DescribeInstanceTypesInput)
	wantFilters := []ec2types.Filter{
		{Name: aws.String("supported-virtualization-type"), Values: []string{"hvm"}},
		{Name: aws.String("processor-info.supported-architecture"), Values: []string{"x86_64", "arm64"}},
	}
	if diff := cmp.Diff(wantFilters, first.Filters, cmp.AllowUnexported(ec2types.Filter{})); diff != "" {
		t.Errorf("DescribeInstanceTypes filters (-want +got):\n%s", diff)
	}
}

func TestFetchDropsAPartWhoseLaterPageFails(t *testing.T) {
	throttled := &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
	f := newPaging()
	f.failPage, f.failErr = 2, throttled
	p, _ := ec2data.New(f, nil, region)
	got, err := p.Fetch(t.Context(), []catalog.Part{catalog.PartInstanceTypes, catalog.PartOnDemandPrices}, now)
	if !errors.As(err, new(*smithy.GenericAPIError)) || !strings.Contains(err.Error(), "instance-types: describe instance types") {
		t.Fatalf("Fetch() error = %v, want the throttling error of the instance-types part", err)
	}
	if !errors.Is(err, ec2data.ErrNoPricing) {
		t.Errorf("Fetch() error = %v, want ErrNoPricing for on-demand prices without a Pricing client", err)
	}
	if got.InstanceTypes != nil {
		t.Errorf("instance types = %d after a failed second page, want the part dropped whole", len(got.InstanceTypes.Types))
	}
}

func TestFetchFailsWhenTheEndpointIsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	client := ec2.New(ec2.Options{Region: region, BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), RetryMaxAttempts: 1})
	p, _ := ec2data.New(client, nil, region)
	got, err := p.Fetch(t.Context(), []catalog.Part{catalog.PartOfferings, catalog.PartSpotPrices}, now)
	if err == nil || !strings.Contains(err.Error(), "offerings:") || !strings.Contains(err.Error(), "spot-prices:") {
		t.Fatalf("Fetch() error = %v, want both parts failed", err)
	}
	if got.Offerings != nil || got.SpotPrices != nil {
		t.Error("parts returned from an unreachable endpoint")
	}
}

func TestSpotPricesRejectAnUnparsablePrice(t *testing.T) {
	f := newPaging()
	f.spot = append(f.spot, spot("m5.large", "ap-northeast-1d", "n/a", now))
	p, _ := ec2data.New(f, nil, region)
	if _, err := p.SpotPrices(t.Context(), now); err == nil || !strings.Contains(err.Error(), `spotPrice "n/a"`) {
		t.Errorf("SpotPrices() error = %v, want one naming the spotPrice", err)
	}
}

func TestInstanceTypesRejectAnAnswerTheCatalogCannotDescribe(t *testing.T) {
	f := newPaging()
	f.types[4].VCpuInfo.DefaultVCpus = aws.Int32(0)
	p, _ := ec2data.New(f, nil, region)
	if _, err := p.InstanceTypes(t.Context(), now); err == nil || !strings.Contains(err.Error(), "r5.large: vCpuInfo.defaultVCpus") {
		t.Errorf("InstanceTypes() error = %v, want one naming the type and field", err)
	}
}

func TestInstanceTypesTakeX86OrArmFromSeveralArchitecturesAndSkipTypesWithNeither(t *testing.T) {
	p, _ := ec2data.New(ec2Server(t), nil, region)
	got, err := p.InstanceTypes(t.Context(), now)
	if err != nil {
		t.Fatalf("InstanceTypes() error = %v", err)
	}
	arch := map[string]string{}
	for _, f := range got.Types {
		arch[f.Name] = f.Architecture
	}
	// The captured answer lists t2.nano and c3.large as [i386, x86_64],
	// c6g.large as [arm64] and mac1.metal as [x86_64_mac].
	want := map[string]string{"t2.nano": "x86_64", "c3.large": "x86_64", "c6g.large": "arm64", "mac1.metal": ""}
	for name, w := range want {
		if arch[name] != w {
			t.Errorf("%s architecture = %q, want %q", name, arch[name], w)
		}
	}
	if _, ok := arch["mac1.metal"]; ok {
		t.Error("mac1.metal (x86_64_mac only) was kept, want it skipped")
	}
	// Order within SupportedArchitectures does not matter.
	f := newPaging()
	f.types[0].ProcessorInfo.SupportedArchitectures = []ec2types.ArchitectureType{"i386", "x86_64"}
	f.types[1].ProcessorInfo.SupportedArchitectures = []ec2types.ArchitectureType{"i386"}
	p, _ = ec2data.New(f, nil, region)
	paged, err := p.InstanceTypes(t.Context(), now)
	if err != nil {
		t.Fatalf("InstanceTypes() error = %v, want an i386-only type skipped, not an error", err)
	}
	if len(paged.Types) != 4 || paged.Types[0].Name != "m5.large" || paged.Types[0].Architecture != "x86_64" {
		t.Errorf("InstanceTypes() = %+v, want m5.large as x86_64 and m5.xlarge (i386 only) skipped", paged.Types)
	}
}

func TestFactsReadNestedVirtualizationFromTheProcessorsSupportedFeatures(t *testing.T) {
	for _, tc := range []struct {
		features []ec2types.SupportedAdditionalProcessorFeature
		want     bool
	}{
		{nil, false},
		{[]ec2types.SupportedAdditionalProcessorFeature{ec2types.SupportedAdditionalProcessorFeatureAmdSevSnp}, false},
		{[]ec2types.SupportedAdditionalProcessorFeature{ec2types.SupportedAdditionalProcessorFeatureAmdSevSnp, ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization}, true},
	} {
		f := ec2data.Facts(&ec2types.InstanceTypeInfo{InstanceType: "m8i.large", ProcessorInfo: &ec2types.ProcessorInfo{
			SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}, SupportedFeatures: tc.features}})
		if f.NestedVirtualization != tc.want {
			t.Errorf("Facts(supported features %v).NestedVirtualization = %v, want %v", tc.features, f.NestedVirtualization, tc.want)
		}
	}
}
