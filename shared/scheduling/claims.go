package scheduling

import "math"

// nclaim is a NodeClaim this solve creates.
type nclaim struct {
	h     *host
	seq   int
	pool  *pool
	reqID int32
	tl    *typeList
	// cur indexes the cheapest type of tl that fits used and the limits.
	cur   int
	price float64
	used  vec
	// free is the cursor type's net allocatable minus used; the pool's
	// indexes sort on it.
	free  vec
	pods  []int32
	ports []hostPort
	// capUsed is the capacity of the cursor type: what the claim counts
	// against its pool's limits while the solve runs.
	capUsed vec
	// minValuesRelaxed is set when BestEffort lowered a minValues.
	minValuesRelaxed bool
	// held is the capacity reservation (reservations.ids index) the claim
	// holds an instance of, -1 for none (reservations.go).
	held int32
	// doms caches claimDomains per topology key for requirement set domsReq.
	doms    [][]int32
	domsOK  []bool
	domsReq int32
	// failed holds, per improvement move (empty, shrink, merge), the
	// improvement epoch of the claim's last failed attempt: while no move
	// has succeeded since, the same attempt would fail again.
	failed [3]int
	// removed marks a claim emptied by the improvement pass.
	removed bool
	// noFit records the claim's last failed fitFrom: no type of noFit.tl
	// from noFit.start fits noFit.need within noFit.cap. Any call with the
	// same list, a start, need and cap at least as strict fails as well
	// (a larger need or a smaller cap only removes types), so pods of other
	// classes rejected for the same reason, e.g. a binding limit, skip the
	// scan.
	noFit claimNoFit
}

// claimNoFit is one failed fitFrom on a claim.
type claimNoFit struct {
	tl      *typeList
	start   int
	limited bool
	need    vec
	cap     vec
}

// covers reports whether the recorded failure implies that fitFrom(tl,
// start, need, limited, limitCap) fails too.
func (f *claimNoFit) covers(tl *typeList, start int, need *vec, limited bool, limitCap *vec, n int) bool {
	if f.tl == nil || f.tl != tl || start < f.start || !leq(&f.need, need, n) {
		return false
	}
	if !limited {
		return !f.limited
	}
	return !f.limited || leq(limitCap, &f.cap, n)
}

// fitFrom returns the first index >= start of tl whose type fits need
// (allocatable net of daemonset overhead) within the claim's limit cap, or -1.
func (s *solver) fitFrom(tl *typeList, start int, need *vec, limited bool, limitCap *vec) int {
	n := s.res.n()
	for i := start; i < len(tl.types); i++ {
		t := tl.types[i]
		if !leq(need, &t.alloc, n) {
			continue
		}
		if limited && !s.withinLimit(&t.capacity, limitCap) {
			continue
		}
		return i
	}
	return -1
}

// capFor returns the largest capacity a candidate of a claim of pool p may
// have when the claim already counts capUsed against the limits: its own
// share plus what the pool has left (max int64 in unlimited slots).
func (s *solver) capFor(p *pool, capUsed *vec) (bool, vec) {
	var c vec
	for i := range c {
		c[i] = math.MaxInt64
	}
	if !p.anyLimit {
		return false, c
	}
	for i := 0; i < s.res.n(); i++ {
		if p.limited[i] {
			c[i] = capUsed[i] + p.limit[i] - p.usage[i]
		}
	}
	return true, c
}

// withinLimit reports whether capacity fits under limitCap in the slots
// the pools limit (limitCap holds max int64 elsewhere).
func (s *solver) withinLimit(capacity, limitCap *vec) bool {
	return leq(capacity, limitCap, s.res.n())
}

// fitting returns every type of tl from index start that fits need within
// the limit cap, in price order.
func (s *solver) fitting(tl *typeList, start int, need *vec, limited bool, limitCap *vec) []*ptype {
	return s.fittingUpTo(tl, start, need, limited, limitCap, len(tl.types))
}

// fittingUpTo is fitting stopped after max types.
func (s *solver) fittingUpTo(tl *typeList, start int, need *vec, limited bool, limitCap *vec, max int) []*ptype {
	out := make([]*ptype, 0, min(max, len(tl.types)-start))
	n := s.res.n()
	for i := start; i < len(tl.types) && len(out) < max; i++ {
		t := tl.types[i]
		if leq(need, &t.alloc, n) && (!limited || s.withinLimit(&t.capacity, limitCap)) {
			out = append(out, t)
		}
	}
	return out
}

// claimIndex keeps a pool's claims sorted by free capacity (at the current
// cheapest fitting type) in one resource slot, then by sequence, so that a
// pod looks first at the claims whose spare room in its dominant resource
// is the smallest that still holds it (best fit), and just below that at
// the claims that would grow least.
type claimIndex struct {
	// slot is the resource slot the index sorts on, or byPodCount.
	slot int
	list []*nclaim
}

// byPodCount makes a claimIndex sort on the claims' pod counts
// (Karpenter's order for in-flight claims).
const byPodCount = -1

func (ix *claimIndex) key(c *nclaim) int64 {
	if ix.slot == byPodCount {
		return int64(len(c.pods))
	}
	return c.free[ix.slot]
}

func (ix *claimIndex) less(a *nclaim, free int64, seq int) bool {
	if k := ix.key(a); k != free {
		return k < free
	}
	return a.seq < seq
}

// search returns the first position whose claim is not before (free, seq).
func (ix *claimIndex) search(free int64, seq int) int {
	lo, hi := 0, len(ix.list)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ix.less(ix.list[m], free, seq) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (ix *claimIndex) insert(c *nclaim) {
	i := ix.search(ix.key(c), c.seq)
	ix.list = append(ix.list, nil)
	copy(ix.list[i+1:], ix.list[i:])
	ix.list[i] = c
}

// pos returns c's position; call it while c's key is still the one it
// was indexed under.
func (ix *claimIndex) pos(c *nclaim) int {
	i := ix.search(ix.key(c), c.seq)
	if i < len(ix.list) && ix.list[i] == c {
		return i
	}
	return -1
}

// searchIn is search restricted to list[lo:hi].
func (ix *claimIndex) searchIn(lo, hi int, free int64, seq int) int {
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ix.less(ix.list[m], free, seq) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// fix moves c, found at position i before its key changed, to where its
// new key belongs, shifting only the claims in between.
func (ix *claimIndex) fix(c *nclaim, i int) {
	if i < 0 {
		ix.insert(c)
		return
	}
	free := ix.key(c)
	switch {
	case i > 0 && !ix.less(ix.list[i-1], free, c.seq):
		j := ix.searchIn(0, i, free, c.seq)
		copy(ix.list[j+1:i+1], ix.list[j:i])
		ix.list[j] = c
	case i+1 < len(ix.list) && ix.less(ix.list[i+1], free, c.seq):
		j := ix.searchIn(i+1, len(ix.list), free, c.seq)
		copy(ix.list[i:j-1], ix.list[i+1:j])
		ix.list[j-1] = c
	}
}

// removeAt removes the claim at position i (from pos); -1 does nothing.
func (ix *claimIndex) removeAt(i int) {
	if i >= 0 {
		ix.list = append(ix.list[:i], ix.list[i+1:]...)
	}
}

func (ix *claimIndex) remove(c *nclaim) {
	i := ix.search(ix.key(c), c.seq)
	if i < len(ix.list) && ix.list[i] == c {
		ix.list = append(ix.list[:i], ix.list[i+1:]...)
	}
}
