package fleet_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// randomTypes builds n instance types with heterogeneous zones and prices:
// each type lacks some zones, spot may be priced above on-demand, some
// offerings are unavailable, some types carry a reservation, some are GPU
// or metal types.
func randomTypes(rng *rand.Rand, n int) []*catalog.InstanceType {
	families := []string{"m5", "c5", "r5", "p3", "g4dn"}
	sizes := []string{"large", "xlarge", "2xlarge", "4xlarge", "metal"}
	var out []*catalog.InstanceType
	seen := map[string]bool{}
	for len(out) < n {
		fam, size := families[rng.IntN(len(families))], sizes[rng.IntN(len(sizes))]
		name := fam + "." + size
		if seen[name] {
			name = fmt.Sprintf("%s%d.%s", fam, len(out), size)
		}
		seen[name] = true
		cpu := int64(2 << rng.IntN(5))
		od := float64(cpu) * (0.03 + rng.Float64()*0.03)
		var offers []catalog.Offering
		for _, z := range zones {
			if rng.IntN(4) == 0 {
				continue // this zone lacks the type
			}
			zod := od * (0.9 + rng.Float64()*0.2) // prices differ by zone
			offers = append(offers, catalog.Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: zod, Available: rng.IntN(6) != 0})
			if rng.IntN(3) != 0 {
				offers = append(offers, catalog.Offering{Zone: z, CapacityType: v1.CapacityTypeSpot, Price: zod * (0.2 + rng.Float64()*1.2), Available: rng.IntN(5) != 0})
			}
			if rng.IntN(10) == 0 {
				offers = append(offers, catalog.Offering{Zone: z, CapacityType: v1.CapacityTypeReserved, Price: zod * 0.01, Available: rng.IntN(3) != 0,
					ReservationID: fmt.Sprintf("cr-%s-%s", name, z[len(z)-1:])})
			}
		}
		opts := []st.InstanceTypeOption{st.TypeOfferings(offers...), st.TypeLabels(map[string]string{
			v1.LabelInstanceCPU: strconv.FormatInt(cpu, 10), v1.LabelTopologyRegion: "us-east-1"})}
		if fam == "p3" || fam == "g4dn" {
			opts = append(opts, st.TypeLabels(map[string]string{v1.LabelInstanceGPUCount: "1"}),
				st.TypeResources(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}))
		}
		out = append(out, st.InstanceType(name, strconv.FormatInt(cpu, 10), strconv.FormatInt(cpu*4, 10)+"Gi", "58", od, opts...))
	}
	return out
}

func randomInput(rng *rand.Rand) scheduling.Input {
	types := randomTypes(rng, 4+rng.IntN(30))
	pools := randomPools(rng)
	var pods []*corev1.Pod
	for i := range 1 + rng.IntN(25) {
		opts := []st.PodOption{st.Requests(fmt.Sprintf("%dm", 100+rng.IntN(6000)), fmt.Sprintf("%dMi", 128+rng.IntN(16000)))}
		switch rng.IntN(8) {
		case 0:
			opts = append(opts, st.NodeSelector(map[string]string{v1.LabelTopologyZone: zones[rng.IntN(len(zones))]}))
		case 1:
			opts = append(opts, st.Resources(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}))
		}
		pods = append(pods, st.Pod(fmt.Sprintf("pod-%d", i), opts...))
	}
	return st.Input(pools, types, pods)
}

// randomPools builds one or two NodePools with random capacity-type and
// zone requirements, minValues and weights.
func randomPools(rng *rand.Rand) []v1.NodePool {
	var pools []v1.NodePool
	for i := range 1 + rng.IntN(2) {
		var opts []st.NodePoolOption
		switch rng.IntN(4) {
		case 0:
			opts = append(opts, st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand))
		case 1:
			opts = append(opts, st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand))
		case 2:
			opts = append(opts, st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeReserved, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, st.PoolRequirement(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones[:1+rng.IntN(2)]...))
		}
		if rng.IntN(4) == 0 {
			opts = append(opts, st.PoolRequirementMinValues(1+rng.IntN(3), v1.LabelInstanceFamily, corev1.NodeSelectorOpExists))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, st.PoolWeight(int32(rng.IntN(10))))
		}
		pools = append(pools, st.NodePool(fmt.Sprintf("pool-%d", i), opts...))
	}
	return pools
}

// TestFleetLaunchesWhatTheSolverPlanned checks, over random NodePools,
// instance types (unavailable, reserved, GPU and metal offerings among
// them) and pods, that for every claim the solver plans, the CreateFleet
// request the fleet adapter renders lists the solver's expected offering
// first, requests its capacity type, and requests exactly the solver's
// candidates that have an offering of that capacity type.
func TestFleetLaunchesWhatTheSolverPlanned(t *testing.T) {
	claims := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 16))
		in := randomInput(rng)
		res, err := scheduling.Solve(t.Context(), in)
		if err != nil {
			t.Fatalf("seed %d: Solve() error = %v", seed, err)
		}
		for _, nc := range res.NewClaims {
			claims++
			checkLaunch(t, fmt.Sprintf("seed %d claim %s", seed, nc.NodeClaim.Name), nc, in.InstanceTypes[nc.NodeClass])
		}
	}
	if claims < 300 {
		t.Fatalf("only %d claims planned over all seeds; the generator no longer exercises the launch", claims)
	}
}

// checkLaunch launches nc through the fleet adapter with a subnet in every
// zone and compares the CreateFleet request with the solver's plan.
func checkLaunch(t *testing.T, name string, nc scheduling.NewClaim, catalogTypes []*catalog.InstanceType) {
	t.Helper()
	ec2api := awstest.NewEC2(t)
	claim := nc.NodeClaim
	claim.UID = "uid-" + types.UID(claim.Name)
	r := request(ec2api, &claim, catalogTypes...)
	got, err := fleet.New(ec2api).Launch(t.Context(), r)
	if err != nil {
		t.Errorf("%s: Launch() error = %v; solver planned %v expecting %+v", name, err, nc.InstanceTypes, nc.Expected)
		return
	}
	ins := ec2api.On.CreateFleet.Inputs()
	if len(ins) == 0 {
		t.Errorf("%s: no CreateFleet call", name)
		return
	}
	first := ins[0].LaunchTemplateConfigs[0].Overrides[0]
	if string(first.InstanceType) != nc.Expected.InstanceType || *first.AvailabilityZone != nc.Expected.Zone {
		t.Errorf("%s: first override = %s %s, solver expected %s %s", name, first.InstanceType, *first.AvailabilityZone, nc.Expected.InstanceType, nc.Expected.Zone)
	}
	if got.CapacityType != nc.Expected.CapacityType {
		t.Errorf("%s: capacity type = %s, solver expected %s", name, got.CapacityType, nc.Expected.CapacityType)
	}
	if !slices.Equal(got.Candidates, nc.InstanceTypes) {
		t.Errorf("%s: launch plan candidates %v, solver's candidates %v", name, got.Candidates, nc.InstanceTypes)
	}
	for _, ty := range got.InstanceTypes {
		if !slices.Contains(nc.InstanceTypes, ty) {
			t.Errorf("%s: requested %s, not a solver candidate %v", name, ty, nc.InstanceTypes)
		}
	}
}
