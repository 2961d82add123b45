package fleet_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// randomCluster builds a disruption snapshot over randomTypes and
// randomPools: one to six launched, initialized nodes of random types and
// offerings (spot, on-demand or reserved, in any zone), each running a few
// small pods, so that consolidation finds cheaper replacements; in half of
// the clusters one NodeClaim carries a stale NodePool hash, so that
// drift replaces it. Every pool's budget allows all nodes at once;
// SpotToSpotConsolidation is on in half the clusters.
func randomCluster(rng *rand.Rand) disruption.Input {
	types := randomTypes(rng, 4+rng.IntN(30))
	pools := randomPools(rng)
	for i := range pools {
		pools[i].Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	}
	in := disruption.Input{
		Now:           st.Epoch.Add(time.Hour),
		NodePools:     pools,
		NodeClasses:   []v1.EC2NodeClass{st.EC2NodeClass(st.DefaultNodeClass)},
		InstanceTypes: map[string][]*catalog.InstanceType{st.DefaultNodeClass: types},
		FeatureGates:  disruption.FeatureGates{SpotToSpotConsolidation: rng.IntN(2) == 0},
	}
	drifted := -1
	nodes := 1 + rng.IntN(6)
	if rng.IntN(2) == 0 {
		drifted = rng.IntN(nodes)
	}
	for i := range nodes {
		it := types[rng.IntN(len(types))]
		if len(it.Offerings) == 0 {
			continue // a type no zone offers runs no node
		}
		o := it.Offerings[rng.IntN(len(it.Offerings))]
		pool := pools[rng.IntN(len(pools))].Name
		name := fmt.Sprintf("%s-%d", pool, i)
		nodeName := "node-" + name
		claim := st.NodeClaim(name, st.ClaimType(it, o.Zone, o.CapacityType), st.ClaimPool(pool), st.ClaimNode(nodeName))
		claim.Status.ProviderID = "aws:///" + o.Zone + "/i-" + name
		claim.Status.Conditions = append(claim.Status.Conditions,
			metav1.Condition{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.NewTime(st.Epoch)},
			metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(st.Epoch)})
		if i == drifted {
			if claim.Annotations == nil {
				claim.Annotations = map[string]string{}
			}
			claim.Annotations[v1.AnnotationNodePoolHash] = "stale"
			claim.Annotations[v1.AnnotationNodePoolHashVersion] = v1.NodePoolHashVersion
		}
		n := st.Node(nodeName, st.NodeType(it, o.Zone, o.CapacityType), st.ManagedBy(pool))
		n.Spec.ProviderID = claim.Status.ProviderID
		in.NodeClaims = append(in.NodeClaims, *claim)
		in.Nodes = append(in.Nodes, *n)
		for j := range 1 + rng.IntN(3) {
			p := st.Pod(fmt.Sprintf("pod-%d-%d", i, j), st.Requests(fmt.Sprintf("%dm", 100+rng.IntN(900)), fmt.Sprintf("%dMi", 128+rng.IntN(2000))), st.BoundTo(nodeName))
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			in.Pods = append(in.Pods, *p)
		}
	}
	return in
}

// TestFleetLaunchesWhatDisruptionPlanned checks, over random NodePools,
// instance types (unavailable, reserved, GPU and metal offerings among
// them), nodes and pods, that for every replacement a disruption
// evaluation plans (consolidation and drift), the CreateFleet request the
// fleet adapter renders for the replacement NodeClaim lists the
// replacement's expected offering first, requests its capacity type and
// requests exactly its instance types as the launch plan's candidates.
func TestFleetLaunchesWhatDisruptionPlanned(t *testing.T) {
	replacements := map[disruption.Method]int{}
	for seed := range uint64(600) {
		rng := rand.New(rand.NewPCG(seed, 1616))
		in := randomCluster(rng)
		res, err := disruption.Evaluate(t.Context(), in)
		if err != nil {
			t.Fatalf("seed %d: Evaluate() error = %v", seed, err)
		}
		for _, c := range res.Commands {
			for _, r := range c.Replacements {
				replacements[c.Method]++
				nc := scheduling.NewClaim{NodeClaim: r.NodeClaim, InstanceTypes: r.InstanceTypes, Expected: r.Expected}
				checkLaunch(t, fmt.Sprintf("seed %d %s replacement %s", seed, c.ID, r.NodeClaim.Name), nc, in.InstanceTypes[st.DefaultNodeClass])
			}
		}
	}
	t.Logf("replacements checked: %v", replacements)
	if replacements[disruption.MethodUnderutilized] < 50 || replacements[disruption.MethodDrifted] < 50 {
		t.Fatalf("replacements planned over all seeds %v, want at least 50 consolidation and 50 drift ones; the generator no longer exercises replacements", replacements)
	}
}
