package disruption

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// defaultSimulationTypes is the instance-type list length of a
// replacement NodeClaim (Karpenter's MaxInstanceTypes, 600).
const defaultSimulationTypes = 600

// simulation is the outcome of rescheduling some candidates' pods.
type simulation struct {
	// claims are the solver's new NodeClaims that host at least one pod of
	// the candidates, in the solver's order.
	claims []scheduling.NewClaim
}

// simulate asks the solver whether the reschedulable pods of cands fit on
// the rest of the cluster (karpenter: SimulateScheduling; karpenter-spec
// §6.4). The solver sees every node except cands and the nodes already
// leaving (those stay in Input.Nodes marked for deletion, so NodePool
// limits still count them, as Karpenter's do), and places the pending
// pods, the candidates' pods and the pods of nodes already leaving. It
// returns why the candidates cannot go, or "": every pod of cands and of
// leaving nodes must be placed, and none of the candidates' pods on an
// uninitialized node. New NodeClaims that only pending pods need are the
// provisioner's business and are not counted.
func (e *evaluation) simulate(ctx context.Context, cands []*node) (simulation, string, error) {
	in := scheduling.Input{
		Now: e.now, NodePools: e.poolList, NodeClasses: e.in.NodeClasses, InstanceTypes: e.in.InstanceTypes,
		DaemonSets: e.in.DaemonSets, Options: e.in.Options.Scheduling, Nodes: e.simNodes(), Volumes: e.in.Volumes,
	}
	if in.Options.MaxInstanceTypes == 0 {
		in.Options.MaxInstanceTypes = defaultSimulationTypes
	}
	leaving := make(map[*node]bool, len(cands))
	out := append([]int(nil), e.sim.leaving...)
	for _, n := range cands {
		leaving[n] = true
		out = append(out, n.idx)
		// Marked for this simulation only; restored before returning.
		in.Nodes[n.idx].MarkedForDeletion = true
	}
	defer func() {
		for _, n := range cands {
			in.Nodes[n.idx].MarkedForDeletion = n.deleting
		}
	}()
	sort.Ints(out)
	candidatePod := map[string]*corev1.Pod{}
	mustPlace := map[string]string{} // pod key → message prefix
	for i, idx := range out {
		if i > 0 && out[i-1] == idx {
			continue
		}
		n := e.nodes[idx]
		for _, p := range n.reschedulable {
			moved := *p
			moved.Spec.NodeName = ""
			moved.Status.NominatedNodeName = ""
			in.Pods = append(in.Pods, &moved)
			key := podKey(p)
			if leaving[n] {
				candidatePod[key] = p
				mustPlace[key] = fmt.Sprintf("pod %s cannot be rescheduled", podName(p))
			} else {
				mustPlace[key] = fmt.Sprintf("pod %s of leaving node %s cannot be rescheduled", podName(p), n.name())
			}
		}
	}
	in.Pods = append(in.Pods, e.pending...)
	res, err := e.solve(ctx, in)
	if err != nil {
		return simulation{}, "", fmt.Errorf("simulate rescheduling of %s: %w", names(cands), err)
	}
	e.solves++
	keys := make([]string, 0, len(mustPlace))
	for k := range mustPlace {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if why, ok := res.Unschedulable[k]; ok {
			return simulation{}, fmt.Sprintf("%s: %s", mustPlace[k], why), nil
		}
	}
	for _, k := range keys {
		target, ok := res.Placements[k]
		if !ok || candidatePod[k] == nil {
			continue
		}
		if t := e.byName[target]; t != nil && !t.initialized {
			return simulation{}, fmt.Sprintf("pod %s would move to node %s, which is not initialized yet", podName(candidatePod[k]), target), nil
		}
	}
	var sim simulation
	for _, nc := range res.NewClaims {
		for _, k := range nc.Pods {
			if candidatePod[k] != nil {
				sim.claims = append(sim.claims, nc)
				break
			}
		}
	}
	return sim, "", nil
}

// simState is what every simulation of an evaluation shares.
type simState struct {
	// nodes is the solver's view of the cluster: e.nodes (index for
	// index) then the unmanaged nodes, with the nodes already leaving
	// marked for deletion. A simulation marks its candidates too, and
	// unmarks them before it returns. Every simulation passes the same
	// Nodes, Pods lists and all, so that the solver's preparation of the
	// nodes is reused (scheduling.Prepared).
	nodes []scheduling.ExistingNode
	// leaving are the indexes in e.nodes of the nodes already leaving.
	leaving []int
}

// simNodes returns e.sim.nodes, built on first use.
func (e *evaluation) simNodes() []scheduling.ExistingNode {
	if e.sim.nodes != nil {
		return e.sim.nodes
	}
	nodes := make([]scheduling.ExistingNode, 0, len(e.nodes)+len(e.unmanaged))
	for i, n := range e.nodes {
		en := scheduling.ExistingNode{
			Node: n.node, NodeClaim: n.claim, Pods: append(append([]*corev1.Pod(nil), n.pods...), n.nominated...),
			MarkedForDeletion: n.deleting,
		}
		if n.node != nil {
			en.VolumeLimits = e.in.VolumeLimits[n.node.Name]
		}
		nodes = append(nodes, en)
		if n.deleting {
			e.sim.leaving = append(e.sim.leaving, i)
		}
	}
	for _, k := range e.unmanaged {
		nodes = append(nodes, scheduling.ExistingNode{Node: k, Pods: e.hosted[k.Name], MarkedForDeletion: k.DeletionTimestamp != nil,
			VolumeLimits: e.in.VolumeLimits[k.Name]})
	}
	e.sim.nodes = nodes
	return nodes
}

// solve is scheduling.Solve(ctx, in) reusing, across the evaluation's
// simulations, the solver's preparation of the pools' instance types
// (every simulation has the same pools, classes, types, DaemonSets and
// nodes; only the pods and the nodes marked for deletion change). When
// preparing fails, Solve reports the same error.
func (e *evaluation) solve(ctx context.Context, in scheduling.Input) (scheduling.Result, error) {
	if e.prepared == nil {
		p, err := scheduling.Prepare(ctx, in)
		if err != nil {
			return scheduling.Solve(ctx, in)
		}
		e.prepared = p
	}
	return e.prepared.Solve(ctx, in)
}

// replacement turns a solver NewClaim into a Replacement whose instance
// types and expected offering are the launch model's plan for it
// (launch.New, the call the fleet adapter makes at launch): the same
// filters, capacity-type choice and MaxInstanceTypes cap as a provisioned
// NodeClaim. With types nil, the plan is over the claim's own candidates
// and requirements (drift); else over types under reqs, the claim's
// requirements after consolidation's price filter and any capacity-type
// narrowing. The NodeClaim's instance-type requirement lists the plan's
// candidates (minValues kept) and carries the NodePool and EC2NodeClass
// hash annotations, so it does not drift at once. why is set, with no
// error, when the launch model finds nothing to launch.
func (e *evaluation) replacement(nc scheduling.NewClaim, types []*catalog.InstanceType, reqs requirements.Requirements) (Replacement, string, error) {
	claim := nc.NodeClaim
	claim.Annotations = maps.Clone(claim.Annotations)
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	if np := e.pools[nc.NodePool]; np != nil {
		h, err := e.nodePoolHash(np)
		if err != nil {
			return Replacement{}, "", err
		}
		claim.Annotations[v1.AnnotationNodePoolHash] = h
		claim.Annotations[v1.AnnotationNodePoolHashVersion] = v1.NodePoolHashVersion
	}
	if class := e.classes[nc.NodeClass]; class != nil {
		h, ver, err := e.nodeClassHash(class)
		if err != nil {
			return Replacement{}, "", err
		}
		claim.Annotations[v1.AnnotationEC2NodeClassHash] = h
		claim.Annotations[v1.AnnotationEC2NodeClassHashVersion] = ver
	}
	narrowed := types != nil
	if narrowed {
		reqs = withInstanceTypes(reqs, types)
	} else {
		types = e.typesOf(nc.NodeClass, nc.InstanceTypes)
		reqs = requirements.FromNodeSelector(claim.Spec.Requirements)
	}
	plan, err := launch.New(launch.Request{Requirements: reqs, Requests: claim.Spec.Resources.Requests, InstanceTypes: types})
	if err != nil {
		return Replacement{}, fmt.Sprintf("its replacement NodeClaim cannot launch: %v", err), nil
	}
	r := Replacement{InstanceTypes: plan.InstanceTypes(), Expected: scheduling.Expected(&plan)}
	if narrowed || !slices.Equal(r.InstanceTypes, nc.InstanceTypes) {
		kept := make([]*catalog.InstanceType, len(plan.Candidates))
		for i, c := range plan.Candidates {
			kept[i] = c.Type
		}
		claim.Spec.Requirements = withInstanceTypes(reqs, kept).NodeSelectorRequirements()
	}
	r.NodeClaim = claim
	return r, "", nil
}

// withInstanceTypes returns a copy of reqs whose instance-type requirement
// is In types (in that order), keeping its minValues.
func withInstanceTypes(reqs requirements.Requirements, types []*catalog.InstanceType) requirements.Requirements {
	reqs = reqs.Clone()
	names := make([]string, len(types))
	for i, it := range types {
		names[i] = it.Name
	}
	narrowed := requirements.New(v1.LabelInstanceType, corev1.NodeSelectorOpIn, names...)
	if old := reqs[v1.LabelInstanceType]; old != nil && old.MinValues != nil {
		mv := *old.MinValues
		narrowed.MinValues = &mv
	}
	reqs[v1.LabelInstanceType] = narrowed
	return reqs
}

// allowed returns whether a launch under reqs may get an offering: it is
// available and the launch model's offering filter (zone, capacity type,
// capacity reservation) allows it.
func allowed(reqs requirements.Requirements) func(*catalog.Offering) bool {
	f := launch.NewOfferFilter(reqs)
	return func(o *catalog.Offering) bool { return o.Available && f.Allows(o) }
}

// launchPrice is the price an instance type is ordered by: its cheapest
// allowed offering under reqs (karpenter: OrderByPrice); +Inf when none.
func launchPrice(it *catalog.InstanceType, reqs requirements.Requirements) float64 {
	ok := allowed(reqs)
	best := math.Inf(1)
	for i := range it.Offerings {
		if o := &it.Offerings[i]; ok(o) && o.Price < best {
			best = o.Price
		}
	}
	return best
}

// worstLaunchPrice is the most expensive allowed offering under reqs of
// the capacity type a launch would use: reserved if any, else spot, else
// on-demand (karpenter: Offerings.WorstLaunchPrice); +Inf when none.
func worstLaunchPrice(it *catalog.InstanceType, reqs requirements.Requirements) float64 {
	ok := allowed(reqs)
	for _, want := range []string{v1.CapacityTypeReserved, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand} {
		worst, found := 0.0, false
		for i := range it.Offerings {
			if o := &it.Offerings[i]; o.CapacityType == want && ok(o) {
				worst, found = math.Max(worst, o.Price), true
			}
		}
		if found {
			return worst
		}
	}
	return math.Inf(1)
}
