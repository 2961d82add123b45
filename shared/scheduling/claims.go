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
	pods  []int32
	ports []hostPort
	// limitCap is the largest capacity a candidate may have (remaining pool
	// limits at creation); limited says which slots it caps.
	limited  bool
	limitCap vec
	// minValuesRelaxed is set when BestEffort lowered a minValues.
	minValuesRelaxed bool
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
