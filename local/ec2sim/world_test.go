package ec2sim_test

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/local/ec2sim"
)

// zoneOfferings pages DescribeInstanceTypeOfferings (availability-zone)
// through the SDK paginator and returns type → offered zones, and the
// number of pages.
func zoneOfferings(t *testing.T, e *env, maxResults int32, filters ...ec2types.Filter) (map[string][]string, int) {
	t.Helper()
	out := map[string][]string{}
	pages := 0
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(e.ec2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone, MaxResults: aws.Int32(maxResults), Filters: filters})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("DescribeInstanceTypeOfferings page %d: %v", pages+1, err)
		}
		pages++
		for _, o := range page.InstanceTypeOfferings {
			out[string(o.InstanceType)] = append(out[string(o.InstanceType)], aws.ToString(o.Location))
		}
	}
	return out, pages
}

func TestRealisticWorldLeavesSomeTypesOutOfSomeZonesButEveryTypeSomewhere(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	offered, pages := zoneOfferings(t, e, 1000)
	if pages < 2 {
		t.Errorf("pages = %d, want the offerings to span several pages of 1000", pages)
	}
	zones := e.sim.Zones()
	missing := 0
	for typ, zs := range offered {
		if len(zs) == 0 {
			t.Errorf("%s offered in no zone", typ)
		}
		missing += len(zones) - len(zs)
		for _, z := range zones {
			if got, want := slices.Contains(zs, z), e.sim.Offered(typ, z); got != want {
				t.Errorf("%s in %s: listed = %v, Offered = %v", typ, z, got, want)
			}
		}
	}
	total := len(offered) * len(zones)
	if missing == 0 || missing > total/3 {
		t.Errorf("%d of %d pools missing, want some but well under a third", missing, total)
	}
	// The region lists every type once.
	reg, err := e.ec2.DescribeInstanceTypeOfferings(t.Context(), &ec2.DescribeInstanceTypeOfferingsInput{
		Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.large"}}}})
	if err != nil || len(reg.InstanceTypeOfferings) != 1 || aws.ToString(reg.InstanceTypeOfferings[0].Location) != "ap-northeast-1" {
		t.Errorf("region offerings of m5.large = %+v, %v; want one in ap-northeast-1", reg, err)
	}
}

func TestRealisticWorldIsTheSameOnEveryStart(t *testing.T) {
	a, _ := zoneOfferings(t, newEnv(t, ec2sim.Options{Region: "ap-northeast-1"}), 1000)
	b, _ := zoneOfferings(t, newEnv(t, ec2sim.Options{Region: "ap-northeast-1"}), 1000)
	for typ, zs := range a {
		if !slices.Equal(zs, b[typ]) {
			t.Fatalf("%s: zones %v then %v", typ, zs, b[typ])
		}
	}
}

func TestUniformWorldOffersEveryTypeInEveryZone(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	offered, _ := zoneOfferings(t, e, 1000)
	for typ, zs := range offered {
		if len(zs) != 3 {
			t.Fatalf("%s offered in %v, want all three zones", typ, zs)
		}
	}
	opted := newEnv(t, ec2sim.Options{World: ec2sim.WorldRealistic})
	o2, _ := zoneOfferings(t, opted, 1000)
	short := 0
	for _, zs := range o2 {
		if len(zs) < 3 {
			short++
		}
	}
	if short == 0 {
		t.Error("us-east-1 with WorldRealistic: every type in every zone, want some missing")
	}
}

func TestNewRejectsAnUnknownWorldNamingTheField(t *testing.T) {
	_, err := ec2sim.New(ec2sim.Options{World: "mirror"})
	if err == nil || !strings.Contains(err.Error(), "options.World") {
		t.Fatalf("New(World: mirror) error = %v, want one naming options.World", err)
	}
}

// missingPool returns a type not offered in one zone but offered in
// another, and both zones.
func missingPool(t *testing.T, sim *ec2sim.Server, prefix string) (typ, missing, offered string) {
	t.Helper()
	for _, name := range []string{"large", "xlarge", "2xlarge", "4xlarge"} {
		for _, fam := range []string{"m5", "m6i", "c5", "c6i", "r5", "r6i", "m5a", "c5a", "m7i", "c7i", "r7i", "m6a", "c6a"} {
			typ := fam + "." + name
			if !strings.HasPrefix(typ, prefix) {
				continue
			}
			var in, out []string
			for _, z := range sim.Zones() {
				if sim.Offered(typ, z) {
					in = append(in, z)
				} else {
					out = append(out, z)
				}
			}
			if len(in) > 0 && len(out) > 0 {
				return typ, out[0], in[0]
			}
		}
	}
	t.Fatal("no common x86 type is missing from a zone")
	return "", "", ""
}

func TestCreateFleetRefusesAPoolTheZoneDoesNotOfferWithUnsupported(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	typ, missing, offered := missingPool(t, e.sim, "")
	e.createLT(t, "nodes", e.al2023(t, "x86_64"), "")
	sn := e.subnets()
	for _, capacity := range []string{"on-demand", "spot"} {
		// Only the missing pool: nothing launches, one Unsupported error.
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput("nodes", capacity, 1, []string{typ}, []string{sn[missing]}))
		if err != nil {
			t.Fatalf("CreateFleet(%s in %s) error = %v", typ, missing, err)
		}
		if got := fleetErrors(out); len(out.Instances) != 0 || len(got) != 1 || !strings.HasPrefix(got[0], "Unsupported "+typ+"/"+missing) {
			t.Fatalf("%s: launched %v, errors %v; want none launched and Unsupported for %s/%s", capacity, launched(out), got, typ, missing)
		}
		if msg := aws.ToString(out.Errors[0].ErrorMessage); !strings.Contains(msg, offered) {
			t.Errorf("message %q does not name the offering zone %s", msg, offered)
		}
		// With the offering zone too: launches there.
		out, err = e.ec2.CreateFleet(t.Context(), fleetInput("nodes", capacity, 1, []string{typ}, []string{sn[missing], sn[offered]}))
		if err != nil {
			t.Fatalf("CreateFleet error = %v", err)
		}
		if got := launched(out); len(got) != 1 || !strings.HasPrefix(got[0], typ+"/"+offered+"/") {
			t.Errorf("%s: launched %v, want one %s in %s", capacity, got, typ, offered)
		}
	}
}

// spotNow returns zone → current Spot price of typ (StartTime = now).
func spotNow(t *testing.T, e *env, typ string) map[string]float64 {
	t.Helper()
	out, err := e.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(typ)}, StartTime: aws.Time(e.clock.Now()),
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}})
	if err != nil {
		t.Fatalf("DescribeSpotPriceHistory(%s) error = %v", typ, err)
	}
	got := map[string]float64{}
	for _, p := range out.SpotPriceHistory {
		z := aws.ToString(p.AvailabilityZone)
		if _, dup := got[z]; dup {
			t.Fatalf("%s in %s: two points in effect at now: %+v", typ, z, out.SpotPriceHistory)
		}
		v, err := strconv.ParseFloat(aws.ToString(p.SpotPrice), 64)
		if err != nil {
			t.Fatalf("spot price %q: %v", aws.ToString(p.SpotPrice), err)
		}
		got[z] = v
	}
	return got
}

func TestRealisticSpotPricesDifferByZoneAndMoveOnTheClock(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	types := []string{"m5.large", "c5.xlarge", "r5.2xlarge", "m6g.large", "c6i.4xlarge"}
	differ, moved := 0, 0
	before := map[string]map[string]float64{}
	for _, typ := range types {
		p := spotNow(t, e, typ)
		before[typ] = p
		seen := map[float64]bool{}
		for z, v := range p {
			if want, ok := e.sim.Price(typ, z, "spot"); !ok || want != v {
				t.Errorf("%s in %s: history %v, Price %v", typ, z, v, want)
			}
			seen[v] = true
		}
		if len(seen) > 1 {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("every type has one Spot price in all zones: %v", before)
	}
	e.clock.Advance(6 * time.Hour)
	for _, typ := range types {
		for z, v := range spotNow(t, e, typ) {
			if before[typ][z] != v {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Error("no Spot price moved in six hours")
	}
	// The history since the start has the older points too, newest first.
	out, err := e.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, StartTime: aws.Time(epoch), EndTime: aws.Time(e.clock.Now())})
	if err != nil {
		t.Fatal(err)
	}
	perZone := map[string]int{}
	for i, p := range out.SpotPriceHistory {
		perZone[aws.ToString(p.AvailabilityZone)]++
		if i > 0 && aws.ToTime(p.Timestamp).After(aws.ToTime(out.SpotPriceHistory[i-1].Timestamp)) {
			t.Fatalf("history not newest first at %d: %+v", i, out.SpotPriceHistory)
		}
	}
	if len(out.SpotPriceHistory) <= len(perZone) {
		t.Errorf("history over six hours has %d points for %d pools, want changes", len(out.SpotPriceHistory), len(perZone))
	}
}

func TestUniformSpotPricesAreOnDemandTimesTheRatioAndConstant(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	od, _ := e.sim.Price("m5.large", "us-east-1a", "on-demand")
	for _, step := range []time.Duration{0, 5 * time.Hour} {
		e.clock.Advance(step)
		for z, v := range spotNow(t, e, "m5.large") {
			if want := math.Round(od*ec2sim.DefaultSpotPriceRatio*1e4) / 1e4; v != want {
				t.Errorf("after %v: m5.large spot in %s = %v, want %v", step, z, v, want)
			}
		}
	}
}

func TestSetSpotPriceIsANewHistoryPointAndFleetsFollowIt(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	typ := "m5.large"
	var zones []string
	for _, z := range e.sim.Zones() {
		if e.sim.Offered(typ, z) {
			zones = append(zones, z)
		}
	}
	if len(zones) < 2 {
		t.Skipf("%s offered in %v only", typ, zones)
	}
	e.createLT(t, "nodes", e.al2023(t, "x86_64"), "")
	sn := e.subnets()
	var subnets []string
	for _, z := range zones {
		subnets = append(subnets, sn[z])
	}
	for _, cheap := range []string{zones[len(zones)-1], zones[0]} {
		e.clock.Advance(time.Minute)
		body := `{"instanceType":"` + typ + `","zone":"` + cheap + `","price":0.0123}`
		resp, err := http.Post(e.url+"/_sim/spot-price", "application/json", bytes.NewBufferString(body))
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST /_sim/spot-price: %v %v", resp, err)
		}
		resp.Body.Close()
		for _, z := range zones {
			if z != cheap {
				e.sim.SetSpotPrice(typ, z, 0.05)
			}
		}
		if got := spotNow(t, e, typ)[cheap]; got != 0.0123 {
			t.Errorf("spot price in %s = %v, want the set 0.0123", cheap, got)
		}
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput("nodes", "spot", 1, []string{typ}, subnets))
		if err != nil {
			t.Fatal(err)
		}
		if got := launched(out); len(got) != 1 || !strings.HasPrefix(got[0], typ+"/"+cheap+"/") {
			t.Errorf("launched %v, want the cheapest zone %s", got, cheap)
		}
	}
	hist, err := e.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(typ)}, AvailabilityZone: aws.String(zones[0]), StartTime: aws.Time(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(hist.SpotPriceHistory); n < 3 || aws.ToString(hist.SpotPriceHistory[0].SpotPrice) != "0.012300" {
		t.Errorf("history of %s in %s = %d points, newest %v; want the model price, 0.05 and then 0.0123", typ, zones[0], n, hist.SpotPriceHistory)
	}
}

func TestSpotPriceHistoryPagesAndFilters(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	in := &ec2.DescribeSpotPriceHistoryInput{StartTime: aws.Time(epoch), MaxResults: aws.Int32(5),
		Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.*"}}}}
	p := ec2.NewDescribeSpotPriceHistoryPaginator(e.ec2, in)
	pages, points := 0, 0
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		points += len(page.SpotPriceHistory)
		for _, sp := range page.SpotPriceHistory {
			if !strings.HasPrefix(string(sp.InstanceType), "m5.") || sp.ProductDescription != ec2types.RIProductDescription("Linux/UNIX") {
				t.Fatalf("point %+v outside the filter", sp)
			}
		}
	}
	if pages < 2 || points <= 5 {
		t.Errorf("%d pages, %d points; want several pages of 5", pages, points)
	}
	win, err := e.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Windows"}})
	if err != nil || len(win.SpotPriceHistory) != 0 {
		t.Errorf("Windows history = %d points, %v; want none (Linux/UNIX only)", len(win.SpotPriceHistory), err)
	}
	typ, missing, _ := missingPool(t, e.sim, "")
	out, err := e.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(typ)}, AvailabilityZone: aws.String(missing)})
	if err != nil || len(out.SpotPriceHistory) != 0 {
		t.Errorf("history of %s in %s (not offered) = %v, %v; want none", typ, missing, out.SpotPriceHistory, err)
	}
}

func TestRealisticOnDemandPricesAreTheRegionsOwnNotTheUSEast1Table(t *testing.T) {
	tokyo := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	virginia := newEnv(t, ec2sim.Options{})
	differ := 0
	for _, typ := range []string{"m5.large", "c5.xlarge", "r6i.2xlarge", "m6g.large", "t3.medium"} {
		z := tokyo.sim.Zones()[0]
		jp, ok1 := tokyo.sim.Price(typ, z, "on-demand")
		us, ok2 := virginia.sim.Price(typ, "us-east-1a", "on-demand")
		if !ok1 || !ok2 {
			t.Fatalf("%s: no price (%v, %v)", typ, ok1, ok2)
		}
		if r := jp / us; r < 1.29*0.959 || r > 1.29*1.041 {
			t.Errorf("%s: ap-northeast-1 %v / us-east-1 %v = %.3f, want 1.29 ± 4%%", typ, jp, us, r)
		}
		if math.Abs(jp/us-1.29) > 1e-3 {
			differ++
		}
	}
	if differ == 0 {
		t.Error("every type is exactly 1.29 × us-east-1: the per-type variation is missing")
	}
}
