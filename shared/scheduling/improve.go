package scheduling

import (
	"context"
	"sort"
)

// The improvement pass runs after the queue. It moves pods between this
// round's claims when that lowers the plan's price, never onto a claim of a
// NodePool lighter than the pod's (lighter): it tries to empty each
// claim into the free room of others, then to shrink each claim to a
// cheaper instance type by moving a few of its pods out. Every move is
// validated like a placement (requirements, taints, ports, resources,
// minValues, the pod's own topology terms and the inverse anti-affinity of
// others) and must also keep every other pod's constraints: it may not
// change any zone-like (non-hostname) topology count, may not take a pod
// that a hostname pod-affinity term selects away from its host, and may
// not push a hostname spread count above its maxSkew. Moves that do not
// all succeed are rolled back. The pass is deterministic.

const (
	improveRounds    = 4
	improveMaxEvict  = 4
	improveMaxEmpty  = 24
	improveTargets   = 2
	improveMinSaving = 1e-9
	// improveMergeWidth bounds how many claims one merge may absorb.
	improveMergeWidth = 6
)

// claimSnap is a claim's mutable state, for rollback.
type claimSnap struct {
	c          *nclaim
	capUsed    vec
	reqID      int32
	tl         *typeList
	cur        int
	price      float64
	used, free vec
	pods       []int32
	ports      []hostPort
	relaxedMin bool
	removed    bool
	held       int32
}

// txn records a batch of moves so that it can be undone.
type txn struct {
	snaps []claimSnap
	pools []poolSnap
	moved []movedPod
	// rsvLeft is the reservations' budgets before the first move.
	rsvLeft []int
}

// poolSnap is a pool's limit accounting, for rollback.
type poolSnap struct {
	p     *pool
	usage vec
	nodes int64
}

type movedPod struct {
	pi      *podInfo
	from    *host
	fromRec []recEntry
}

func (s *solver) snap(t *txn, c *nclaim) {
	if s.rsv != nil && t.rsvLeft == nil {
		t.rsvLeft = append([]int{}, s.rsv.left...)
	}
	t.snap(c)
}

func (t *txn) snap(c *nclaim) {
	for i := range t.snaps {
		if t.snaps[i].c == c {
			return
		}
	}
	known := false
	for i := range t.pools {
		known = known || t.pools[i].p == c.pool
	}
	if !known {
		t.pools = append(t.pools, poolSnap{p: c.pool, usage: c.pool.usage, nodes: c.pool.nodes})
	}
	t.snaps = append(t.snaps, claimSnap{
		c: c, capUsed: c.capUsed, reqID: c.reqID, tl: c.tl, cur: c.cur, price: c.price, used: c.used, free: c.free,
		pods: append([]int32(nil), c.pods...), ports: append([]hostPort(nil), c.ports...),
		relaxedMin: c.minValuesRelaxed, removed: c.removed, held: c.held,
	})
}

func (s *solver) unindex(c *nclaim) {
	c.pool.byCPU.remove(c)
	c.pool.byMemory.remove(c)
	if s.strategy != stratCost {
		s.byPods.remove(c)
	}
}

func (s *solver) reindex(c *nclaim) {
	c.pool.byCPU.insert(c)
	c.pool.byMemory.insert(c)
	if s.strategy != stratCost {
		s.byPods.insert(c)
	}
}

// rollback undoes every move of t, newest first.
func (s *solver) rollback(t *txn) {
	for i := len(t.moved) - 1; i >= 0; i-- {
		m := t.moved[i]
		s.unrecord(m.pi.host, m.pi.rec)
	}
	for _, sn := range t.snaps {
		c := sn.c
		if !c.removed {
			s.unindex(c)
		}
		c.reqID, c.tl, c.cur, c.price, c.used, c.free, c.capUsed = sn.reqID, sn.tl, sn.cur, sn.price, sn.used, sn.free, sn.capUsed
		c.pods, c.ports, c.minValuesRelaxed, c.removed = sn.pods, sn.ports, sn.relaxedMin, sn.removed
		c.held = sn.held
		if !c.removed {
			s.reindex(c)
		}
	}
	for _, ps := range t.pools {
		ps.p.usage, ps.p.nodes = ps.usage, ps.nodes
	}
	if t.rsvLeft != nil {
		s.rsv.restore(t.rsvLeft)
	}
	for i := len(t.moved) - 1; i >= 0; i-- {
		m := t.moved[i]
		s.apply(m.from, m.fromRec, 1)
		m.pi.host, m.pi.rec = m.from, m.fromRec
	}
}

// detach takes pi off its claim: counts, resources, ports; the claim keeps
// its (narrowed) requirements and moves its cursor to the cheapest type
// that now fits.
func (s *solver) detach(t *txn, pi *podInfo) {
	c := pi.host.claim
	s.snap(t, c)
	t.moved = append(t.moved, movedPod{pi: pi, from: pi.host, fromRec: pi.rec})
	s.unrecord(pi.host, pi.rec)
	pi.rec = nil
	n := s.res.n()
	iCPU, iMem := c.pool.byCPU.pos(c), c.pool.byMemory.pos(c)
	c.used.sub(&pi.req, n)
	for i, idx := range c.pods {
		if idx == pi.idx {
			c.pods = append(c.pods[:i:i], c.pods[i+1:]...)
			break
		}
	}
	for _, hp := range pi.cls.ports {
		for i := range c.ports {
			if c.ports[i] == hp {
				c.ports = append(c.ports[:i:i], c.ports[i+1:]...)
				break
			}
		}
	}
	if len(c.pods) == 0 {
		c.pool.byCPU.removeAt(iCPU)
		c.pool.byMemory.removeAt(iMem)
		c.removed = true
		c.price = 0
		s.setCapUsed(c, &vec{})
		c.pool.nodes--
		s.rebook(c)
		return
	}
	limited, limitCap := s.capFor(c.pool, &c.capUsed)
	tl := c.tl
	idx := s.fitFrom(tl, 0, &c.used, limited, &limitCap)
	if idx >= 0 && s.rsv != nil && !s.usable(tl, idx, c.held) {
		tl, idx = s.fitUsable(c.pool, c.reqID, c.held, &c.used, limited, &limitCap)
	}
	if idx >= 0 {
		c.tl, c.cur = tl, idx
		c.price = c.tl.prices[idx]
	}
	c.free = c.tl.types[c.cur].alloc
	c.free.sub(&c.used, n)
	s.setCapUsed(c, &c.tl.types[c.cur].capacity)
	s.rebook(c)
	c.pool.byCPU.fix(c, iCPU)
	c.pool.byMemory.fix(c, iMem)
}

// lighter reports whether pool p weighs less than the pool of claim from:
// no move goes there, so the pass never trades NodePool weight for price
// (karpenter-spec §3.3: the heavier NodePool takes every pod it can, a
// lighter one only the rest). Moves among pools of equal weight, and to
// heavier ones, are priced freely.
func lighter(p *pool, from *nclaim) bool {
	return from != nil && p.weight < from.pool.weight
}

// movable reports whether moving pi may leave others' constraints intact:
// no hostname pod-affinity term selects it.
func movable(pi *podInfo) bool {
	for _, g := range pi.cls.selectedBy {
		if g.kind == gAffinity && g.key.hostname {
			return false
		}
	}
	return true
}

// moveOK checks the extra conditions a move adds over a placement: the
// pod's non-hostname counts stay where they were, and no hostname spread
// count exceeds its maxSkew.
func (s *solver) moveOK(pi *podInfo, fromRec []recEntry, cd *cand) bool {
	c := cd.c
	for _, g := range pi.cls.selectedBy {
		if g.kind == gSpread && g.key.hostname {
			if cnt, _ := c.h.counts(g.id); cnt+1 > g.maxSkew {
				return false
			}
		}
	}
	planned := s.plan(pi.cls, pi.eff, &topoView{h: c.h, pool: c.pool, reqID: cd.reqID}, nil)
	var a, b []recEntry
	for _, r := range fromRec {
		if r.d >= 0 {
			a = append(a, r)
		}
	}
	for _, r := range planned {
		if r.d >= 0 {
			b = append(b, r)
		}
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// relocate detaches pi and places it on the best other claim whose
// marginal price is at most budget; it reports the price added.
func (s *solver) relocate(t *txn, pi *podInfo, budget float64) (float64, bool) {
	if !movable(pi) {
		return 0, false
	}
	from := pi.host.claim
	s.detach(t, pi)
	fromRec := t.moved[len(t.moved)-1].fromRec
	cd := s.searchMove(pi, from, fromRec)
	if !cd.ok || cd.delta > budget+priceEps {
		return 0, false
	}
	s.snap(t, cd.c)
	s.commit(pi, &cd)
	return cd.delta, true
}

// searchMove is searchClaims restricted to moves that keep others'
// constraints (moveOK).
func (s *solver) searchMove(pi *podInfo, exclude *nclaim, fromRec []recEntry) cand {
	var best cand
	slot := resCPU
	if float64(pi.req[resMemory])/s.memPerMilli > float64(pi.req[resCPU]) {
		slot = resMemory
	}
	for _, p := range s.pools {
		if lighter(p, exclude) || s.poolFit(pi.eff, p).reqID < 0 {
			continue
		}
		ix := &p.byCPU
		if slot == resMemory {
			ix = &p.byMemory
		}
		start := ix.search(pi.req[slot], -1)
		feasible := 0
		for i, examined := start, 0; i < len(ix.list) && examined < searchExamine && feasible < searchFeasible; i, examined = i+1, examined+1 {
			c := ix.list[i]
			if c == exclude {
				continue
			}
			cd := s.evalClaim(pi, c)
			if !cd.ok || !s.moveOK(pi, fromRec, &cd) {
				continue
			}
			if cd.delta <= priceEps {
				feasible++
			}
			if better(&cd, &best) {
				best = cd
			}
		}
	}
	return best
}

// improve runs the emptying and shrinking moves until a round changes
// nothing.
func (s *solver) improve(ctx context.Context) {
	for round := 0; round < improveRounds; round++ {
		if ctx.Err() != nil {
			return
		}
		changed := false
		order := s.liveClaims()
		// Small claims first: they are the easiest to empty.
		sort.SliceStable(order, func(i, j int) bool { return order[i].price < order[j].price })
		for _, c := range order {
			if !c.removed && s.tryEmpty(c) {
				changed = true
			}
		}
		for _, c := range s.liveClaims() {
			if s.tryShrink(c) {
				changed = true
			}
		}
		if s.tryMerges() {
			changed = true
		}
		if !changed {
			return
		}
	}
}

func (s *solver) liveClaims() []*nclaim {
	out := make([]*nclaim, 0, len(s.claims))
	for _, c := range s.claims {
		if !c.removed && len(c.pods) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// tryEmpty moves every pod of c elsewhere when the added prices are below
// c's own price.
func (s *solver) tryEmpty(c *nclaim) bool {
	if len(c.pods) > improveMaxEmpty || c.failed[0] == s.epoch {
		return false
	}
	c.failed[0] = s.epoch
	saving := c.price
	t := &txn{}
	pods := s.evictionOrder(c, nil)
	added := 0.0
	for _, pi := range pods {
		d, ok := s.relocate(t, pi, saving-added-improveMinSaving)
		if !ok {
			s.rollback(t)
			return false
		}
		added += d
	}
	if !c.removed || added >= saving-improveMinSaving {
		s.rollback(t)
		return false
	}
	s.epoch++
	return true
}

// evictionOrder lists c's pods largest first (cpu, then memory), or only
// those in subset when given.
func (s *solver) evictionOrder(c *nclaim, subset []int32) []*podInfo {
	idxs := c.pods
	if subset != nil {
		idxs = subset
	}
	out := make([]*podInfo, 0, len(idxs))
	for _, i := range idxs {
		out = append(out, s.pods[i])
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.req[resCPU] != b.req[resCPU] {
			return a.req[resCPU] > b.req[resCPU]
		}
		if a.req[resMemory] != b.req[resMemory] {
			return a.req[resMemory] > b.req[resMemory]
		}
		return a.idx < b.idx
	})
	return out
}

// tryShrink moves a few pods off c so that a cheaper instance type fits
// what remains, when the prices added elsewhere are below the saving.
func (s *solver) tryShrink(c *nclaim) bool {
	if c.failed[1] == s.epoch {
		return false
	}
	c.failed[1] = s.epoch
	n := s.res.n()
	for j, tries := c.cur-1, 0; j >= 0 && tries < improveTargets; j-- {
		target := c.tl.types[j]
		saving := c.price - c.tl.prices[j]
		if saving <= improveMinSaving {
			continue
		}
		tries++
		excess := c.used
		excess.sub(&target.alloc, n)
		evict := s.chooseEviction(c, &excess)
		if evict == nil {
			continue
		}
		t := &txn{}
		before := c.price
		added, ok := 0.0, true
		for _, pi := range evict {
			d, moved := s.relocate(t, pi, saving-added-improveMinSaving)
			if !moved {
				ok = false
				break
			}
			added += d
		}
		if ok && !c.removed && c.price+added < before-improveMinSaving {
			s.epoch++
			return true
		}
		s.rollback(t)
	}
	return false
}

// chooseEviction picks pods of c whose removal covers excess (positive
// entries): the smallest single pod that does, else the largest pods
// first, at most improveMaxEvict.
func (s *solver) chooseEviction(c *nclaim, excess *vec) []*podInfo {
	n := s.res.n()
	covers := func(v *vec) bool {
		for i := 0; i < n; i++ {
			if excess[i] > 0 && v[i] < excess[i] {
				return false
			}
		}
		return true
	}
	var single *podInfo
	size := func(pi *podInfo) float64 {
		return float64(pi.req[resCPU]) + float64(pi.req[resMemory])/s.memPerMilli
	}
	for _, idx := range c.pods {
		pi := s.pods[idx]
		if covers(&pi.req) && (single == nil || size(pi) < size(single)) {
			single = pi
		}
	}
	if single != nil {
		return []*podInfo{single}
	}
	var sum vec
	var out []*podInfo
	for _, pi := range s.evictionOrder(c, nil) {
		if len(out) == improveMaxEvict {
			return nil
		}
		out = append(out, pi)
		sum.add(&pi.req, n)
		if covers(&sum) {
			return out
		}
	}
	return nil
}

// moveTo moves pi from its claim onto dest, if that is a valid placement
// that keeps others' constraints.
func (s *solver) moveTo(t *txn, pi *podInfo, dest *nclaim) bool {
	if !movable(pi) || pi.host.claim == dest || lighter(dest.pool, pi.host.claim) {
		return false
	}
	s.detach(t, pi)
	fromRec := t.moved[len(t.moved)-1].fromRec
	cd := s.evalClaim(pi, dest)
	if !cd.ok || !s.moveOK(pi, fromRec, &cd) {
		return false
	}
	s.snap(t, dest)
	s.commit(pi, &cd)
	return true
}

// absorb moves every pod of the first k claims of from onto anchor and
// returns the change in the plan's price, or false when a move fails.
func (s *solver) absorb(t *txn, anchor *nclaim, from []*nclaim, k int) (float64, bool) {
	before := anchor.price
	removed := 0.0
	for _, c := range from[:k] {
		removed += c.price
		for _, pi := range s.evictionOrder(c, nil) {
			s.mergeBudget--
			if !s.moveTo(t, pi, anchor) {
				return 0, false
			}
		}
	}
	return anchor.price - before - removed, true
}

// tryMerges consolidates claims: for each claim (largest first) it tries to
// absorb the pods of up to improveMergeWidth of the pool's cheapest other
// claims and keeps the prefix that lowers the plan's price most. Growing
// one claim can beat several small ones when larger instance types are
// cheaper per unit, or when daemonset overhead and fragmentation waste the
// small ones.
func (s *solver) tryMerges() bool {
	changed := false
	anchors := s.liveClaims()
	cheapest := map[*pool][]*nclaim{}
	for _, c := range anchors {
		if len(c.pods) <= improveMaxEmpty {
			cheapest[c.pool] = append(cheapest[c.pool], c)
		}
	}
	for _, cs := range cheapest {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].price < cs[j].price })
	}
	sort.SliceStable(anchors, func(i, j int) bool { return anchors[i].price > anchors[j].price })
	for _, anchor := range anchors {
		if anchor.removed || s.mergeBudget <= 0 || anchor.failed[2] == s.epoch {
			continue
		}
		anchor.failed[2] = s.epoch
		from := make([]*nclaim, 0, improveMergeWidth)
		for _, c := range cheapest[anchor.pool] {
			if len(from) == improveMergeWidth {
				break
			}
			if c != anchor && !c.removed {
				from = append(from, c)
			}
		}
		bestK, bestDelta := 0, -improveMinSaving
		for k := 1; k <= len(from) && s.mergeBudget > 0; k++ {
			t := &txn{}
			delta, ok := s.absorb(t, anchor, from, k)
			s.rollback(t)
			if !ok {
				break
			}
			if delta < bestDelta {
				bestK, bestDelta = k, delta
			}
		}
		if bestK == 0 {
			continue
		}
		t := &txn{}
		if _, ok := s.absorb(t, anchor, from, bestK); !ok {
			s.rollback(t)
			continue
		}
		s.epoch++
		changed = true
	}
	return changed
}
