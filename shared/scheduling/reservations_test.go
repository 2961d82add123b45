package scheduling_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// reservation is one capacity reservation of a test: instance type, zone,
// ID and how many instances it can still take.
type reservation struct {
	typ, zone, id string
	free          int
}

// withReservations adds, per reservation, a reserved offering to its
// instance type, priced as the catalog prices one (on-demand price /
// catalog.ReservedPriceDivisor).
func withReservations(types []*catalog.InstanceType, rs ...reservation) []*catalog.InstanceType {
	for _, r := range rs {
		for _, it := range types {
			if it.Name != r.typ {
				continue
			}
			od := 0.0
			for _, o := range it.Offerings {
				if o.CapacityType == v1.CapacityTypeOnDemand {
					od = o.Price
				}
			}
			it.Offerings = append(it.Offerings, catalog.Offering{
				Zone: r.zone, CapacityType: v1.CapacityTypeReserved, Price: od / catalog.ReservedPriceDivisor,
				Available: r.free > 0, ReservationID: r.id, ReservationCapacity: r.free, ReservationType: v1.ReservationTypeDefault,
			})
		}
	}
	return types
}

// soloPods are n pods of 1 cpu / 1Gi that each need a node of their own
// (required hostname anti-affinity among themselves).
func soloPods(prefix string, n int) []*corev1.Pod {
	return pods(prefix, n, st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": prefix}),
		st.PodAntiAffinity(v1.LabelHostname, map[string]string{"app": prefix}))
}

// claimRequirement returns the claim's requirement on key (nil when absent).
func claimRequirement(c scheduling.NewClaim, key string) *v1.NodeSelectorRequirementWithMinValues {
	for i := range c.NodeClaim.Spec.Requirements {
		if r := &c.NodeClaim.Spec.Requirements[i]; r.Key == key {
			return r
		}
	}
	return nil
}

// heldReservation is the reservation a claim was tightened to
// (capacity-reservation-id In [one]), "" when none.
func heldReservation(t *testing.T, c scheduling.NewClaim) string {
	t.Helper()
	r := claimRequirement(c, v1.LabelCapacityReservationID)
	if r == nil || r.Operator != corev1.NodeSelectorOpIn {
		if c.Expected.CapacityType == v1.CapacityTypeReserved {
			t.Errorf("claim %s expects a reserved offering but names no reservation (requirements %v)", c.NodeClaim.Name, c.NodeClaim.Spec.Requirements)
		}
		return ""
	}
	if len(r.Values) != 1 {
		t.Fatalf("claim %s: reservation requirement %v, want one reservation", c.NodeClaim.Name, r.Values)
	}
	return r.Values[0]
}

// checkReservations asserts the reservation invariants of a plan: each
// reservation takes at most its free instances; a claim that names a
// reservation expects it (capacity type reserved, its type and zone, and
// nothing else in its capacity types); a claim that names none lists no
// reserved capacity type.
func checkReservations(t *testing.T, rs []reservation, res scheduling.Result) map[string]int {
	t.Helper()
	byID := map[string]reservation{}
	for _, r := range rs {
		byID[r.id] = r
	}
	taken := map[string]int{}
	for _, c := range res.NewClaims {
		id := heldReservation(t, c)
		if id == "" {
			if slices.Contains(c.CapacityTypes, v1.CapacityTypeReserved) {
				t.Errorf("claim %s holds no reservation but lists capacity types %v", c.NodeClaim.Name, c.CapacityTypes)
			}
			continue
		}
		taken[id]++
		r := byID[id]
		if c.Expected.CapacityType != v1.CapacityTypeReserved || c.Expected.InstanceType != r.typ || c.Expected.Zone != r.zone {
			t.Errorf("claim %s holds %s (%s in %s) but expects %+v", c.NodeClaim.Name, id, r.typ, r.zone, c.Expected)
		}
		if !slices.Equal(c.CapacityTypes, []string{v1.CapacityTypeReserved}) || !slices.Equal(c.InstanceTypes, []string{r.typ}) {
			t.Errorf("claim %s holds %s but lists capacity types %v and instance types %v", c.NodeClaim.Name, id, c.CapacityTypes, c.InstanceTypes)
		}
	}
	for id, n := range taken {
		if n > byID[id].free {
			t.Errorf("reservation %s has %d free instances but %d claims hold it", id, byID[id].free, n)
		}
	}
	return taken
}

func TestReservationTakesAsManyClaimsAsItHasInstances(t *testing.T) {
	rs := []reservation{{typ: "m6i.large", zone: "us-east-1a", id: "cr-0a1", free: 2}}
	for _, tc := range []struct {
		name     string
		capTypes []string
		spot     bool
		// third is the expected offering of the claim beyond the
		// reservation: the pool's next capacity type, cheapest type.
		third scheduling.ExpectedOffering
	}{
		{name: "reserved then on-demand", capTypes: []string{v1.CapacityTypeReserved, v1.CapacityTypeOnDemand},
			third: scheduling.ExpectedOffering{InstanceType: "m6g.large", Zone: "us-east-1a", CapacityType: v1.CapacityTypeOnDemand, PricePerHour: 0.077}},
		{name: "reserved then spot before on-demand", capTypes: []string{v1.CapacityTypeReserved, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}, spot: true,
			third: scheduling.ExpectedOffering{InstanceType: "m6g.large", Zone: "us-east-1a", CapacityType: v1.CapacityTypeSpot, PricePerHour: 0.0231}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			types := testTypes()
			if tc.spot {
				types = withSpot(types, 0.3)
			}
			pool := st.NodePool("default", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, tc.capTypes...))
			in := st.Input([]v1.NodePool{pool}, withReservations(types, rs...), soloPods("web", 3))
			res := solve(t, in)
			if len(res.NewClaims) != 3 || len(res.Unschedulable) != 0 {
				t.Fatalf("want 3 claims and every pod placed, got %d claims, unschedulable %v", len(res.NewClaims), res.Unschedulable)
			}
			taken := checkReservations(t, rs, res)
			if taken["cr-0a1"] != 2 {
				t.Errorf("reservation cr-0a1 (2 free) holds %d claims, want 2", taken["cr-0a1"])
			}
			var others []scheduling.ExpectedOffering
			for _, c := range res.NewClaims {
				if heldReservation(t, c) == "" {
					others = append(others, c.Expected)
					if r := claimRequirement(c, v1.LabelCapacityType); r == nil || slices.Contains(r.Values, v1.CapacityTypeReserved) {
						t.Errorf("claim %s beyond the reservation keeps capacity-type %v", c.NodeClaim.Name, r)
					}
				}
			}
			if len(others) != 1 || others[0] != tc.third {
				t.Errorf("claims beyond the reservation expect %+v, want [%+v]", others, tc.third)
			}
		})
	}
}

func TestReservedOfferingIsChosenFirstAtNearZeroPrice(t *testing.T) {
	// m6i.xlarge costs 2.5 times m6g.large on demand; its reservation is still
	// chosen first, priced at on-demand / ReservedPriceDivisor (aws:
	// offering/provider.go), as Karpenter orders reserved offerings.
	rs := []reservation{{typ: "m6i.xlarge", zone: "us-east-1b", id: "cr-0b1", free: 1}}
	pool := st.NodePool("default", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeReserved, v1.CapacityTypeOnDemand))
	in := st.Input([]v1.NodePool{pool}, withReservations(testTypes(), rs...), soloPods("web", 2))
	res := solve(t, in)
	checkReservations(t, rs, res)
	var got []scheduling.ExpectedOffering
	for _, c := range res.NewClaims {
		got = append(got, c.Expected)
	}
	slices.SortFunc(got, func(a, b scheduling.ExpectedOffering) int { return strings.Compare(a.CapacityType, b.CapacityType) })
	want := []scheduling.ExpectedOffering{
		{InstanceType: "m6g.large", Zone: "us-east-1a", CapacityType: v1.CapacityTypeOnDemand, PricePerHour: 0.077},
		{InstanceType: "m6i.xlarge", Zone: "us-east-1b", CapacityType: v1.CapacityTypeReserved, PricePerHour: 0.192 / catalog.ReservedPriceDivisor},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expected offerings %+v, want %+v", got, want)
	}
}

func TestTwoReservationsOfDifferentTypesEachTakeTheirCount(t *testing.T) {
	rs := []reservation{
		{typ: "m6i.large", zone: "us-east-1a", id: "cr-0a1", free: 1},
		{typ: "r6i.large", zone: "us-east-1c", id: "cr-0c1", free: 2},
	}
	pool := st.NodePool("default", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeReserved, v1.CapacityTypeOnDemand))
	in := st.Input([]v1.NodePool{pool}, withReservations(testTypes(), rs...), soloPods("web", 5))
	res := solve(t, in)
	if len(res.NewClaims) != 5 {
		t.Fatalf("want 5 claims, got %d (unschedulable %v)", len(res.NewClaims), res.Unschedulable)
	}
	taken := checkReservations(t, rs, res)
	if want := map[string]int{"cr-0a1": 1, "cr-0c1": 2}; !reflect.DeepEqual(taken, want) {
		t.Errorf("reservations held %v, want %v", taken, want)
	}
	onDemand := 0
	for _, c := range res.NewClaims {
		if c.Expected.CapacityType == v1.CapacityTypeOnDemand {
			onDemand++
		}
	}
	if onDemand != 2 {
		t.Errorf("%d on-demand claims, want 2 beyond the reservations' 3 instances", onDemand)
	}
}

func TestReservedOnlyPoolLeavesThePodBeyondTheReservationPending(t *testing.T) {
	rs := []reservation{{typ: "m6i.large", zone: "us-east-1a", id: "cr-0a1", free: 2}}
	pool := st.NodePool("reserved", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeReserved))
	in := st.Input([]v1.NodePool{pool}, withReservations(testTypes(), rs...), soloPods("web", 3))
	res := solve(t, in)
	if len(res.NewClaims) != 2 {
		t.Fatalf("want 2 claims, got %d", len(res.NewClaims))
	}
	checkReservations(t, rs, res)
	why := reasonOf(t, res)
	for _, want := range []string{`NodePool "reserved"`, "cr-0a1 (2 instances)", "no instance left in this round", "allow no other offering"} {
		if !strings.Contains(why, want) {
			t.Errorf("reason %q lacks %q", why, want)
		}
	}
}

func TestReservationSharedByPodsThatFitOneNode(t *testing.T) {
	// Pods that fit together take one reserved instance, not one each.
	rs := []reservation{{typ: "m6i.large", zone: "us-east-1a", id: "cr-0a1", free: 2}}
	pool := st.NodePool("default", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeReserved, v1.CapacityTypeOnDemand))
	in := st.Input([]v1.NodePool{pool}, withReservations(testTypes(), rs...), pods("small", 4, st.Requests("250m", "512Mi")))
	res := solve(t, in)
	if len(res.NewClaims) != 1 || heldReservation(t, res.NewClaims[0]) != "cr-0a1" {
		t.Fatalf("want one claim in cr-0a1, got %+v", viewOf(in, res).Claims)
	}
	checkReservations(t, rs, res)
}

func TestWithoutReservationsPlansAreUnchanged(t *testing.T) {
	// A reservation with no instance left offers nothing (unavailable),
	// and the plan is the one without it.
	pool := st.NodePool("default", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeReserved, v1.CapacityTypeOnDemand))
	plain := solve(t, st.Input([]v1.NodePool{pool}, testTypes(), soloPods("web", 3)))
	full := solve(t, st.Input([]v1.NodePool{pool}, withReservations(testTypes(), reservation{typ: "m6i.large", zone: "us-east-1a", id: "cr-0a1"}), soloPods("web", 3)))
	if !reflect.DeepEqual(plain, full) {
		t.Errorf("a full reservation changed the plan:\n%+v\nwant\n%+v", full.NewClaims, plain.NewClaims)
	}
}

// TestReservationCountsHoldOnRandomPlans solves random workloads over
// random reservations (both packing strategies, the improvement pass's
// moves and the pool fallbacks among them) and checks that no reservation
// takes more claims than it has instances, that a reservation that still
// has instances is not passed over for an on-demand claim of its own
// type and zone, and that solving is deterministic.
func TestReservationCountsHoldOnRandomPlans(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		names := []string{"c6i.large", "m6i.large", "r6i.large", "c6i.xlarge", "m6i.xlarge"}
		var rs []reservation
		for i := range 1 + r.Intn(4) {
			rs = append(rs, reservation{typ: names[r.Intn(len(names))], zone: testZones[r.Intn(len(testZones))], id: fmt.Sprintf("cr-%02d", i), free: r.Intn(4)})
		}
		var ps []*corev1.Pod
		for i := range 5 + r.Intn(30) {
			cpu := []string{"250m", "500m", "1", "1500m", "3"}[r.Intn(5)]
			mem := []string{"512Mi", "1Gi", "3Gi", "6Gi"}[r.Intn(4)]
			opts := []st.PodOption{st.Requests(cpu, mem)}
			switch r.Intn(3) {
			case 0:
				opts = append(opts, st.Labels(map[string]string{"app": "solo"}), st.PodAntiAffinity(v1.LabelHostname, map[string]string{"app": "solo"}))
			case 1:
				opts = append(opts, st.Labels(map[string]string{"app": "spread"}), st.TopologySpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, map[string]string{"app": "spread"}))
			}
			ps = append(ps, st.Pod(fmt.Sprintf("p-%d", i), opts...))
		}
		capTypes := [][]string{
			{v1.CapacityTypeReserved, v1.CapacityTypeOnDemand},
			{v1.CapacityTypeReserved, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand},
			{v1.CapacityTypeReserved},
		}[r.Intn(3)]
		pool := st.NodePool("default", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, capTypes...))
		in := st.Input([]v1.NodePool{pool}, withReservations(withSpot(testTypes(), 0.4), rs...), ps)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			res := solve(t, in)
			taken := checkReservations(t, rs, res)
			again := solve(t, in)
			if !reflect.DeepEqual(res, again) {
				t.Fatalf("two solves of one input differ")
			}
			left := map[string]int{}
			for _, rv := range rs {
				left[rv.id] = rv.free - taken[rv.id]
			}
			for _, c := range res.NewClaims {
				if c.Expected.CapacityType == v1.CapacityTypeReserved {
					continue
				}
				for _, rv := range rs {
					if left[rv.id] > 0 && slices.Contains(c.InstanceTypes, rv.typ) && slices.Contains(c.Zones, rv.zone) && claimRequirement(c, v1.LabelTopologyZone) == nil {
						t.Errorf("claim %s launches %s while reservation %s (%s in %s) has %d left", c.NodeClaim.Name, c.Expected.CapacityType, rv.id, rv.typ, rv.zone, left[rv.id])
					}
				}
			}
		})
	}
}
