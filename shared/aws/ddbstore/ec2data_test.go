package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/internal/measure"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/catalog"
)

// regionData is a region's worth of live data at fetchedAt: types
// instance types (the size of a large commercial region: ~900), each
// offered in zones zones with an on-demand price and a Spot price per
// zone.
func regionData(region string, types, zones int, fetchedAt time.Time) catalog.LiveData {
	d := catalog.LiveData{
		Region:         region,
		InstanceTypes:  &catalog.LiveInstanceTypes{FetchedAt: fetchedAt},
		Offerings:      &catalog.LiveOfferings{FetchedAt: fetchedAt, Zones: map[string][]string{}},
		OnDemandPrices: &catalog.LivePrices{FetchedAt: fetchedAt, Currency: "USD", Prices: map[string]float64{}},
		SpotPrices:     &catalog.LiveSpotPrices{FetchedAt: fetchedAt, Prices: map[string]map[string]float64{}},
	}
	sizes := []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"}
	for i := range types {
		size := sizes[i%len(sizes)]
		name := fmt.Sprintf("m%d%c.%s", 5+i/len(sizes)%4, 'a'+rune(i/len(sizes)/4%26), size)
		vcpu := int64(2) << (i % len(sizes))
		d.InstanceTypes.Types = append(d.InstanceTypes.Types, catalog.TypeFacts{
			Name: name, Architecture: "x86_64", VCPUs: vcpu, MemoryMiB: vcpu * 4096, CPUManufacturer: "Intel",
			SustainedClockGHz: 3.1, NetworkBandwidthMbps: 750 * vcpu / 2, EBSBandwidthMbps: 4750, Hypervisor: "nitro",
			MaxENIs: 3, DefaultCardMaxENIs: 3, IPv4PerENI: 10, NetworkCards: 1,
		})
		d.OnDemandPrices.Prices[name] = 0.048 * float64(vcpu)
		d.SpotPrices.Prices[name] = map[string]float64{}
		for z := range zones {
			zone := fmt.Sprintf("%s%c", region, 'a'+rune(z))
			d.Offerings.Zones[name] = append(d.Offerings.Zones[name], zone)
			d.SpotPrices.Prices[name][zone] = 0.017*float64(vcpu) + 0.001*float64(z)
		}
	}
	return d
}

func TestEC2DataRoundTrip(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, testCluster)
	want := regionData("ap-northeast-1", 40, 3, t0)
	if err := s.PutEC2Data(ctx, want); err != nil {
		t.Fatalf("PutEC2Data() error = %v", err)
	}
	got, err := s.EC2Data(ctx, "ap-northeast-1", t0.Add(time.Hour))
	if err != nil {
		t.Fatalf("EC2Data() error = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EC2Data() (-want +got):\n%s", diff)
	}
	if other, err := e.store(t, "other-cluster").EC2Data(ctx, "ap-northeast-1", t0); err != nil || other.InstanceTypes != nil {
		t.Errorf("another cluster's EC2Data() = %+v, %v; want nothing", other, err)
	}
}

func TestEC2DataPartsAreReplacedOneByOne(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, testCluster)
	first := regionData("ap-northeast-1", 10, 3, t0)
	if err := s.PutEC2Data(ctx, first); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(13 * time.Hour)
	spotOnly := catalog.LiveData{Region: "ap-northeast-1", SpotPrices: &catalog.LiveSpotPrices{FetchedAt: later,
		Prices: map[string]map[string]float64{"m5a.large": {"ap-northeast-1a": 0.02}}}}
	if err := s.PutEC2Data(ctx, spotOnly); err != nil {
		t.Fatal(err)
	}
	got, err := s.EC2Data(ctx, "ap-northeast-1", later)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spotOnly.SpotPrices, got.SpotPrices); diff != "" {
		t.Errorf("spot prices after a spot-only refresh (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(first.InstanceTypes, got.InstanceTypes); diff != "" {
		t.Errorf("instance types changed by a spot-only refresh (-want +got):\n%s", diff)
	}
}

func TestEC2DataAbsentParts(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		put    *catalog.LiveData
		region string
		now    time.Time
	}{
		{name: "should read nothing before the first refresh", region: "ap-northeast-1", now: t0},
		{name: "should ignore another region's data", put: ptr(regionData("us-east-1", 5, 2, t0)), region: "ap-northeast-1", now: t0},
		{name: "should drop data past its retention", put: ptr(regionData("ap-northeast-1", 5, 2, t0)), region: "ap-northeast-1",
			now: t0.Add(ddbstore.EC2DataRetention)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t, testCluster)
			if tt.put != nil {
				if err := s.PutEC2Data(ctx, *tt.put); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.EC2Data(ctx, tt.region, tt.now)
			if err != nil {
				t.Fatalf("EC2Data() error = %v", err)
			}
			if diff := cmp.Diff(catalog.LiveData{Region: tt.region}, got); diff != "" {
				t.Errorf("EC2Data() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPutEC2DataRejectsDataWithoutRegion(t *testing.T) {
	e := newEnv(t)
	if err := e.store(t, testCluster).PutEC2Data(context.Background(), catalog.LiveData{}); !errors.Is(err, ddbstore.ErrInvalid) {
		t.Errorf("PutEC2Data() error = %v, want ErrInvalid", err)
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkEC2DataColdStart measures what every Lambda cold start (and
// every invocation: nothing is cached in memory) pays to read the region's
// live EC2 data: four blob reads from DynamoDB, inflate and JSON-decode, for
// 900 instance types offered in 4 zones with on-demand and per-zone Spot
// prices. DynamoDB is kumo in process, so the time includes the server's
// work and no network.
func BenchmarkEC2DataColdStart(b *testing.B) {
	const types, zones = 900, 4
	e := newEnv(b)
	s := e.store(b, testCluster)
	ctx := context.Background()
	if err := s.PutEC2Data(ctx, regionData("ap-northeast-1", types, zones, t0)); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("types=%d/zones=%d", types, zones), func(b *testing.B) {
		b.ReportAllocs()
		stop := measure.LiveHeap()
		cpu := measure.CPU()
		for b.Loop() {
			d, err := s.EC2Data(ctx, "ap-northeast-1", t0)
			if err != nil {
				b.Fatal(err)
			}
			if len(d.InstanceTypes.Types) != types || len(d.SpotPrices.Prices) != types {
				b.Fatalf("EC2Data() = %d types, %d spot-priced; want %d", len(d.InstanceTypes.Types), len(d.SpotPrices.Prices), types)
			}
		}
		b.ReportMetric(cpu().Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(stop()), "peak-live-B")
	})
}
