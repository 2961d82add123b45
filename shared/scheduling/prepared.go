package scheduling

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Prepared is the part of a solve that depends only on an Input's
// NodePools, NodeClasses, InstanceTypes and DaemonSets: each usable
// pool's admitted instance types with their daemonset overhead. It lets
// many solves over the same cluster (a disruption evaluation simulates
// one per consolidation candidate) skip that work. It is read-only once
// built; nothing in it outlives its owner.
type Prepared struct {
	// names are the resource slots the types were computed with.
	names []corev1.ResourceName
	// types maps a pool name to its instance types (pool.types).
	types map[string][]*ptype
}

// Prepare builds a Prepared from in. Its Pods are not looked at; its
// error is Solve's for the same NodePools, NodeClasses, InstanceTypes,
// DaemonSets, Nodes and Options.
func Prepare(ctx context.Context, in Input) (*Prepared, error) {
	in.Pods = nil
	s, err := newSolver(ctx, &in)
	if err != nil {
		return nil, err
	}
	p := &Prepared{names: slices.Clone(s.res.names), types: make(map[string][]*ptype, len(s.pools))}
	for _, pl := range s.pools {
		// A pool skipped before its types were built is skipped the same
		// way in every solve of the same pools: its entry is never read.
		p.types[pl.name] = pl.types
	}
	return p, nil
}

// Solve is Solve(ctx, in) with the prepared work reused: the Result and
// error are the same. in must carry the NodePools, NodeClasses,
// InstanceTypes and DaemonSets given to Prepare (they are not compared);
// its Pods, Nodes (including MarkedForDeletion) and Options may differ.
// When the resources in play differ from the prepared ones (a node
// brings a resource no instance type has), nothing is reused.
func (p *Prepared) Solve(ctx context.Context, in Input) (Result, error) {
	best, err := p.solveWith(ctx, &in, stratCost)
	if err != nil {
		return Result{}, err
	}
	alt, err := p.solveWith(ctx, &in, stratFirstFit)
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

// solveWith is solveWith on a prepared solver.
func (p *Prepared) solveWith(ctx context.Context, in *Input, st strategy) (*solver, error) {
	s, err := newPreparedSolver(ctx, in, p)
	if err != nil {
		return nil, err
	}
	s.strategy = st
	s.byPods.slot = byPodCount
	if err := s.run(); err != nil {
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
