package scheduling

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
	// limitCap is the largest capacity a candidate may have (remaining pool
	// limits at creation); limited says which slots it caps.
	limited  bool
	limitCap vec
	// reserve is what the claim took from the pool's limits.
	reserve vec
	// minValuesRelaxed is set when BestEffort lowered a minValues.
	minValuesRelaxed bool
	// doms caches claimDomains per topology key for requirement set domsReq.
	doms    [][]int32
	domsOK  []bool
	domsReq int32
	// removed marks a claim emptied by the improvement pass.
	removed bool
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

// withinLimit reports whether capacity fits under limitCap in the slots
// the pools limit (limitCap holds max int64 elsewhere).
func (s *solver) withinLimit(capacity, limitCap *vec) bool {
	return leq(capacity, limitCap, s.res.n())
}

// fitting returns every type of tl from index start that fits need within
// the limit cap, in price order.
func (s *solver) fitting(tl *typeList, start int, need *vec, limited bool, limitCap *vec) []*ptype {
	var out []*ptype
	n := s.res.n()
	for i := start; i < len(tl.types); i++ {
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
	slot int
	list []*nclaim
}

func (ix *claimIndex) less(a *nclaim, free int64, seq int) bool {
	if a.free[ix.slot] != free {
		return a.free[ix.slot] < free
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
	i := ix.search(c.free[ix.slot], c.seq)
	ix.list = append(ix.list, nil)
	copy(ix.list[i+1:], ix.list[i:])
	ix.list[i] = c
}

// pos returns c's position; call it while c's key is still the one it
// was indexed under.
func (ix *claimIndex) pos(c *nclaim) int {
	i := ix.search(c.free[ix.slot], c.seq)
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
	free := c.free[ix.slot]
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

func (ix *claimIndex) remove(c *nclaim) {
	i := ix.search(c.free[ix.slot], c.seq)
	if i < len(ix.list) && ix.list[i] == c {
		ix.list = append(ix.list[:i], ix.list[i+1:]...)
	}
}
