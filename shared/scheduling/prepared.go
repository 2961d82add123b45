package scheduling

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/requirements"
)

// Prepared is the part of a solve that depends only on an Input's
// NodePools, NodeClasses, InstanceTypes, DaemonSets and Nodes: each
// usable pool's admitted instance types with their daemonset overhead,
// and each existing node's availability and the pools' usage. It lets
// many solves over the same cluster (a disruption evaluation simulates
// one per consolidation candidate) skip that work. It is read-only once
// built; nothing in it outlives its owner.
type Prepared struct {
	// names are the resource slots the types were computed with.
	names []corev1.ResourceName
	// types maps a pool name to its instance types (pool.types).
	types map[string][]*ptype
	// nodes are Prepare's Input.Nodes, index for index.
	nodes []preparedNode
	// usage is every pool's usage over all of nodes (marked or not).
	usage map[string]poolUsage
	// claimNames are claimNames(Prepare's Input.Nodes).
	claimNames map[string]bool
	// mu guards lists, the candidate lists solves built from types, by
	// pool name and canonical requirements: a list depends only on those
	// and on the pool's types.
	mu    sync.Mutex
	lists map[listKey]*typeList
	// allowed are the prepared types' allowed offerings by canonical
	// requirements (claimCandidates), guarded by mu: the simulations of
	// one disruption evaluation ask for the same sets again and again.
	allowed map[allowedSharedKey]catalog.Offerings
	// owned are the types of types, for allowedOffers.
	owned map[*ptype]bool
}

// allowedSharedKey names a prepared type's allowed offerings under one
// requirement set, across solves (a solver's reqIDs are its own).
type allowedSharedKey struct {
	reqs string
	t    *ptype
}

// listKey identifies a candidate list of a pool.
type listKey struct{ pool, reqs string }

// preparedNode is what Prepare measured of one existing node.
type preparedNode struct {
	// node, claim and pods identify the ExistingNode measured.
	node  *corev1.Node
	claim *v1.NodeClaim
	pods  []*corev1.Pod
	// avail is the node's availability when usable (enode.avail).
	avail vec
	// anti is set when an active bound pod has a required pod
	// anti-affinity term (a topology group of every solve).
	anti bool
	// labels and reqs are the node's labels and requirements
	// (solver.nodeLabels), shared read-only by every solve of the node.
	labels map[string]string
	reqs   requirements.Requirements
}

// poolUsage is the capacity and count of a pool's existing nodes.
type poolUsage struct {
	capacity vec
	nodes    int64
}

// Prepare builds a Prepared from in. Its Pods are not looked at; its
// error is Solve's for the same NodePools, NodeClasses, InstanceTypes,
// DaemonSets, Nodes and Options.
func Prepare(ctx context.Context, in Input) (*Prepared, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	in.Pods = nil
	s, err := newSolver(&in)
	if err != nil {
		return nil, err
	}
	p := &Prepared{names: slices.Clone(s.res.names), types: make(map[string][]*ptype, len(s.pools)),
		nodes: make([]preparedNode, len(in.Nodes)), usage: map[string]poolUsage{}, lists: map[listKey]*typeList{}, allowed: map[allowedSharedKey]catalog.Offerings{}, owned: map[*ptype]bool{},
		claimNames: claimNames(in.Nodes)}
	for _, pl := range s.pools {
		// A pool skipped before its types were built is skipped the same
		// way in every solve of the same pools: its entry is never read.
		p.types[pl.name] = pl.types
		for _, t := range pl.types {
			p.owned[t] = true
		}
		p.usage[pl.name] = poolUsage{capacity: pl.usage, nodes: pl.nodes}
	}
	for i := range in.Nodes {
		en := &in.Nodes[i]
		built := s.newNode(i, en)
		pn := preparedNode{node: en.Node, claim: en.NodeClaim, pods: en.Pods, avail: built.avail, labels: built.labels, reqs: built.reqs}
		for _, pod := range en.Pods {
			if activePod(pod) && pod.Spec.Affinity != nil && pod.Spec.Affinity.PodAntiAffinity != nil &&
				len(pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
				pn.anti = true
			}
		}
		p.nodes[i] = pn
	}
	return p, nil
}

// sameNodes reports whether in's Nodes are Prepare's, entry for entry
// (the same Node, NodeClaim and pod list; MarkedForDeletion may differ),
// with no required anti-affinity on a pod of a node in use: then the
// solve may take the nodes' measurements from p (buildNodesFrom).
func (p *Prepared) sameNodes(in *Input) bool {
	if p == nil || len(in.Nodes) != len(p.nodes) {
		return false
	}
	for i := range in.Nodes {
		en, pn := &in.Nodes[i], &p.nodes[i]
		if en.Node != pn.node || en.NodeClaim != pn.claim || len(en.Pods) != len(pn.pods) ||
			(len(en.Pods) > 0 && &en.Pods[0] != &pn.pods[0]) || (pn.anti && !en.MarkedForDeletion) {
			return false
		}
	}
	return true
}

// Solve is Solve(ctx, in) with the prepared work reused: the Result and
// error are the same. in must carry the NodePools, NodeClasses,
// InstanceTypes and DaemonSets given to Prepare (they are not compared);
// its Pods, Nodes (including MarkedForDeletion) and Options may differ.
// When the resources in play differ from the prepared ones (a node
// brings a resource no instance type has), nothing is reused.
func (p *Prepared) Solve(ctx context.Context, in Input) (Result, error) {
	same := p.sameNodes(&in)
	best, err := p.solveWith(ctx, &in, stratCost, same)
	if err != nil {
		return Result{}, err
	}
	alt, err := p.solveWith(ctx, &in, stratFirstFit, same)
	if err != nil {
		return Result{}, err
	}
	bu, bp := best.outcome()
	au, ap := alt.outcome()
	if au < bu || (au == bu && ap < bp-priceEps) {
		best = alt
	}
	return best.result(), nil
}

// solveWith is solveWith on a prepared solver; same is sameNodes(in).
func (p *Prepared) solveWith(ctx context.Context, in *Input, st strategy, same bool) (*solver, error) {
	s, err := newPreparedSolver(in, p, same)
	if err != nil {
		return nil, err
	}
	s.strategy = st
	s.byPods.slot = byPodCount
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// poolTypes returns the prepared instance types of pool pl for solver s;
// ok is false when p is nil, does not know the pool, or was built with
// other resource slots.
func (p *Prepared) poolTypes(s *solver, pl *pool) (types []*ptype, ok bool) {
	if p == nil || !slices.Equal(p.names, s.res.names) {
		return nil, false
	}
	types, ok = p.types[pl.name]
	return types, ok
}

// list returns the candidate list of pool pl under requirements r, built
// by build on first use; without prepared types for pl (ok false from
// poolTypes) it is build's, uncached. Lists are read-only once built.
func (p *Prepared) list(s *solver, pl *pool, r requirements.Requirements, build func() *typeList) *typeList {
	if _, ok := p.poolTypes(s, pl); !ok {
		return build()
	}
	return memo(&p.mu, p.lists, listKey{pool: pl.name, reqs: canonical(r)}, build)
}

// memo returns m[k] under mu, building and storing it (outside mu) on
// first use; two racing builds store equal values.
func memo[K comparable, V any](mu *sync.Mutex, m map[K]V, k K, build func() V) V {
	mu.Lock()
	v, ok := m[k]
	mu.Unlock()
	if ok {
		return v
	}
	v = build()
	mu.Lock()
	m[k] = v
	mu.Unlock()
	return v
}

// allowedOffers returns t's allowed offerings under s's requirement set
// reqID, computed by build once per Prepared (p nil: build's answer, not
// kept). Only types p prepared are kept: another solve's types are its own
// pointers and would only grow the map.
func (p *Prepared) allowedOffers(s *solver, reqID int32, t *ptype, build func() catalog.Offerings) catalog.Offerings {
	if p == nil || !p.owned[t] {
		return build()
	}
	if s.reqCanon == nil {
		s.reqCanon = map[int32]string{}
	}
	c, ok := s.reqCanon[reqID]
	if !ok {
		c = canonical(s.reqs.get(reqID))
		s.reqCanon[reqID] = c
	}
	return memo(&p.mu, p.allowed, allowedSharedKey{reqs: c, t: t}, build)
}
