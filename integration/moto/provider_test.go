package moto_test

import (
	"encoding/xml"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/nodewright/nodewright/local/moto"
	"github.com/nodewright/nodewright/shared/aws/ec2data"
)

// motoRaw sends one EC2 Query request to moto in region by hand (no SDK,
// no provider code) and decodes the XML answer into v.
func motoRaw(t *testing.T, m *moto.Server, form url.Values, v any) {
	t.Helper()
	if err := xml.Unmarshal(m.Query(t, region, form), v); err != nil {
		t.Fatalf("%s: %v", form.Get("Action"), err)
	}
}

type motoType struct {
	Name   string   `xml:"instanceType"`
	Arch   []string `xml:"processorInfo>supportedArchitectures>item"`
	Virt   []string `xml:"supportedVirtualizationTypes>item"`
	VCPUs  int64    `xml:"vCpuInfo>defaultVCpus"`
	Memory int64    `xml:"memoryInfo>sizeInMiB"`
}

// TestLiveProviderTypesAndOfferingsEqualMotosAnswers is the issue's
// independent check of the live EC2 data provider: run against moto in
// ap-northeast-1, its instance types are exactly the hvm x86_64/arm64
// types moto describes (with moto's vCPUs, memory and architecture), and
// its offerings exactly moto's (type, zone) pairs by availability zone.
func TestLiveProviderTypesAndOfferingsEqualMotosAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	m := moto.Start(t)
	ec2API, _ := clients(m)
	p, err := ec2data.New(ec2API, nil, region)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	var described struct {
		Types []motoType `xml:"instanceTypeSet>item"`
	}
	motoRaw(t, m, url.Values{"Action": {"DescribeInstanceTypes"}}, &described)
	want := map[string]motoType{}
	multiArch := 0
	for _, it := range described.Types {
		if !slices.Contains(it.Virt, "hvm") || !slices.Contains(it.Arch, "x86_64") && !slices.Contains(it.Arch, "arm64") {
			continue
		}
		if len(it.Arch) > 1 {
			// EC2 matches the processor-info.supported-architecture filter
			// against any listed architecture, so it returns t2.nano
			// (i386, x86_64) for x86_64; moto 5.2.1 drops such types.
			multiArch++
			continue
		}
		want[it.Name] = it
	}
	types, err := p.InstanceTypes(t.Context(), now)
	if err != nil {
		t.Fatalf("provider InstanceTypes against moto: %v", err)
	}
	got := map[string]bool{}
	for _, f := range types.Types {
		got[f.Name] = true
		w, ok := want[f.Name]
		switch {
		case !ok:
			t.Errorf("provider lists %s, which moto does not describe as hvm x86_64/arm64", f.Name)
		case f.VCPUs != w.VCPUs || f.MemoryMiB != w.Memory || !slices.Contains(w.Arch, f.Architecture):
			t.Errorf("%s: provider %d vCPU %d MiB %s, moto %d vCPU %d MiB %v", f.Name, f.VCPUs, f.MemoryMiB, f.Architecture, w.VCPUs, w.Memory, w.Arch)
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("moto describes %s, the provider lost it", name)
		}
	}
	if len(want) < 500 {
		t.Errorf("moto described %d types; expected its full data", len(want))
	}

	var offered struct {
		Offerings []struct {
			Name string `xml:"instanceType"`
			Zone string `xml:"location"`
		} `xml:"instanceTypeOfferingSet>item"`
	}
	motoRaw(t, m, url.Values{"Action": {"DescribeInstanceTypeOfferings"}, "LocationType": {"availability-zone"}}, &offered)
	wantPairs := map[string]bool{}
	for _, o := range offered.Offerings {
		wantPairs[o.Name+"/"+o.Zone] = true
	}
	offs, err := p.Offerings(t.Context(), now)
	if err != nil {
		t.Fatalf("provider Offerings against moto: %v", err)
	}
	gotPairs := map[string]bool{}
	for name, zones := range offs.Zones {
		for _, z := range zones {
			gotPairs[name+"/"+z] = true
			if !wantPairs[name+"/"+z] {
				t.Errorf("provider offers %s in %s; moto does not", name, z)
			}
		}
	}
	for pair := range wantPairs {
		if !gotPairs[pair] {
			t.Errorf("moto offers %s; the provider lost it", pair)
		}
	}
	// The region's data is heterogeneous: some type misses a zone.
	partial := 0
	for _, zones := range offs.Zones {
		if len(zones) < 3 {
			partial++
		}
	}
	if partial == 0 {
		t.Error("every type offered in every zone: moto's per-zone data did not come through")
	}
	t.Logf("moto %s: %d types described (%d i386+x86_64 types left out: moto filters them away), %d (type, zone) offerings, %d types missing from some zone",
		region, len(want), multiArch, len(wantPairs), partial)
}
