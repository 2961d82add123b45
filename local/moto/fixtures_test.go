package moto_test

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/local/moto"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

var update = flag.Bool("update", false, "rewrite the moto fixtures from the running moto_server")

// fixtureDir is where the live EC2 data provider's unit tests read moto's
// answers from.
var fixtureDir = filepath.Join("..", "..", "shared", "aws", "ec2data", "testdata")

// fixtureRegion is the seed guide's region, which the embedded price
// table lacks.
const fixtureRegion = "ap-northeast-1"

// fixtureTypes are the instance types the DescribeInstanceTypes fixtures
// cover: common x86 and Graviton sizes, burstables, a flex type, GPU,
// Inferentia and local-NVMe types, bare metal, previous-generation types
// that list two architectures (t2.nano, c3.large: i386 and x86_64), and
// (added by the capture) the first type moto lists in the region that the
// embedded catalog lacks.
var fixtureTypes = []string{"c3.large", "c6g.large", "c6g.xlarge", "c7g.medium", "c7i-flex.large", "g5.xlarge", "i4i.large",
	"inf2.xlarge", "m5.2xlarge", "m5.large", "m5.metal", "m5.xlarge", "m6g.medium", "m6i.metal", "m7i.large", "p5.48xlarge",
	"r6i.large", "t2.nano", "t3.medium"}

// spotFixture is the DescribeSpotPriceHistory fixture's request: two
// types in every zone of the region (moto's prices are a constant
// placeholder).
var spotFixture = url.Values{"Action": {"DescribeSpotPriceHistory"}, "InstanceType.1": {"m5.large"}, "InstanceType.2": {"m6g.medium"}}

type typesPage struct {
	Types []struct {
		Name string `xml:"instanceType"`
	} `xml:"instanceTypeSet>item"`
	NextToken string `xml:"nextToken"`
}

type offeringsPage struct {
	Offerings []struct {
		Name     string `xml:"instanceType"`
		Location string `xml:"location"`
	} `xml:"instanceTypeOfferingSet>item"`
}

// motoOfferedTypes lists the types moto offers in region (LocationType
// region). moto describes every type it knows in any region; the
// offerings say which the region has.
func motoOfferedTypes(t *testing.T, m *moto.Server, region string) []string {
	t.Helper()
	var p offeringsPage
	if err := xml.Unmarshal(m.Query(t, region, url.Values{"Action": {"DescribeInstanceTypeOfferings"}, "LocationType": {"region"}}), &p); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range p.Offerings {
		names = append(names, o.Name)
	}
	return names
}

// onlyInMoto returns the first type (by name) moto offers in region that
// the embedded catalog lacks.
func onlyInMoto(t *testing.T, names []string) string {
	t.Helper()
	family := v1.AMIFamilyAL2023
	nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMIFamily: &family}}
	nc.Name = "moto"
	its, _, err := catalog.Resolve(nc, catalog.Options{Region: fixtureRegion})
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, it := range its {
		known[it.Name] = true
	}
	slices.Sort(names)
	for _, n := range names {
		if !known[n] && strings.Contains(n, ".") {
			return n
		}
	}
	t.Fatal("moto lists no type the embedded catalog lacks")
	return ""
}

// captures returns the fixtures, file name → body: DescribeInstanceTypes
// of fixtureTypes, DescribeInstanceTypeOfferings by availability zone and
// by region for the same types, and DescribeSpotPriceHistory of
// spotFixture.
func captures(t *testing.T, m *moto.Server) map[string][]byte {
	t.Helper()
	types := append(slices.Clone(fixtureTypes), onlyInMoto(t, motoOfferedTypes(t, m, fixtureRegion)))
	slices.Sort(types)
	out := map[string][]byte{}
	// moto answers every type in one page whatever MaxResults says
	// (see README.md); pagination is tested on the simulator.
	form := url.Values{"Action": {"DescribeInstanceTypes"}}
	for i, n := range types {
		form.Set("InstanceType."+strconv.Itoa(i+1), n)
	}
	out[fmt.Sprintf("describe-instance-types-%s-selected.xml", fixtureRegion)] = m.Query(t, fixtureRegion, form)
	for _, loc := range []string{"availability-zone", "region"} {
		form := url.Values{"Action": {"DescribeInstanceTypeOfferings"}, "LocationType": {loc},
			"Filter.1.Name": {"instance-type"}}
		for i, n := range types {
			form.Set("Filter.1.Value."+strconv.Itoa(i+1), n)
		}
		out[fmt.Sprintf("describe-instance-type-offerings-%s-%s.xml", fixtureRegion, loc)] = m.Query(t, fixtureRegion, form)
	}
	out[fmt.Sprintf("describe-spot-price-history-%s.xml", fixtureRegion)] = m.Query(t, fixtureRegion, spotFixture)
	out["types.txt"] = []byte(strings.Join(types, "\n") + "\n")
	return out
}

// TestMotoFixturesAreMotosCurrentAnswers proves the committed fixtures are
// what moto_server answers (byte for byte), so they are never hand-edited;
// -update rewrites them.
func TestMotoFixturesAreMotosCurrentAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	m := moto.Start(t)
	got := captures(t, m)
	if *update {
		if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range got {
			if err := os.WriteFile(filepath.Join(fixtureDir, name), body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, body := range got {
		want, err := os.ReadFile(filepath.Join(fixtureDir, name))
		if err != nil {
			t.Fatalf("fixture %s: %v (run with -update)", name, err)
		}
		if !bytes.Equal(body, want) {
			t.Errorf("fixture %s differs from moto's answer (moto upgraded? run with -update)", name)
		}
	}
}

// TestMotoIgnoresMaxResultsOnDescribeInstanceTypes pins the moto
// limitation README.md states, so the note goes stale loudly when moto
// starts paging.
func TestMotoIgnoresMaxResultsOnDescribeInstanceTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	m := moto.Start(t)
	var p typesPage
	if err := xml.Unmarshal(m.Query(t, fixtureRegion, url.Values{"Action": {"DescribeInstanceTypes"}, "MaxResults": {"5"}}), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Types) <= 100 || p.NextToken != "" {
		t.Errorf("moto answered %d types with NextToken %q; README.md says it ignores MaxResults", len(p.Types), p.NextToken)
	}
}
