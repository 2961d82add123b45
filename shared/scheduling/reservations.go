package scheduling

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// Capacity-reservation counting. A reserved offering
// (catalog.Offering.ReservationID) may take only as many of this round's
// claims as its reservation has instances left (ReservationCapacity: EC2's
// AvailableInstanceCount, shared by every instance type and zone the
// reservation covers). The solver holds one budget per reservation ID for
// the round:
//
//   - A claim holds at most one reservation: the one its cursor type (the
//     cheapest type that fits its pods) would launch into, when that
//     type's cheapest allowed offering is reserved. Holding takes one
//     instance from the budget; the claim keeps it while its cursor type
//     stays on that reservation, and gives it back when a pod makes it
//     grow to another type, when the improvement pass moves its pods off,
//     or when it is emptied (Karpenter: ReservationManager Reserve and
//     Release per NodeClaim; karpenter-spec §3.3 steps 3 and 6).
//   - Other claims see a reservation's offerings only while its budget
//     lasts: once it reaches 0 they price their types without it
//     (requirement karpenter.k8s.aws/capacity-reservation-id NotIn [full
//     reservations], on the candidate list only, never on the claim), so
//     the next claim falls back to the next reservation, then to spot,
//     then to on-demand, as the NodePool allows (launch.Choose's order).
//   - When the plan is written, a claim that holds a reservation is
//     tightened to karpenter.sh/capacity-type In [reserved] and
//     karpenter.k8s.aws/capacity-reservation-id In [its reservation], so
//     CreateFleet targets exactly the instance the round counted; a claim
//     that holds none is tightened to capacity-type NotIn [reserved], so it
//     never launches into a reservation the round did not count it
//     against.
//
// Where Karpenter differs: it reserves, per NodeClaim, one instance of
// every reservation the claim could launch into (it does not know which
// the launch will get), and in its provisioning mode a pod whose claim
// could use a reservation that is already spoken for waits for the next
// round instead of falling back. A claim here holds exactly the one
// reservation it launches into, so the counts are exact and a round falls
// back to spot or on-demand at once.

// reservations is one solve's budget per capacity reservation.
type reservations struct {
	// ids are the reservation IDs, sorted; index maps an ID to its
	// position.
	ids   []string
	index map[string]int32
	// left is, per reservation, the instances no claim of this round
	// holds yet; full counts the reservations with none left.
	left []int
	full int
	// budget is, per reservation, the instances it had for the round.
	budget []int
	// version changes whenever the set of full reservations does, so
	// that candidate lists built for an older set are rebuilt.
	version int
	// lists caches claimList's answers per (pool, requirement set, held
	// reservation, version).
	lists map[rsvListKey]*typeList
	// excluded caches the requirement set with NotIn [full reservations]
	// per (requirement set, those reservations).
	excluded map[string]int32
	keyBuf   []byte
}

type rsvListKey struct {
	pool    int
	reqID   int32
	held    int32
	version int
}

// buildReservations sets up the round's budgets from the reserved
// offerings of every node class's instance types: a reservation's budget
// is the smallest ReservationCapacity any of its offerings reports
// (several classes may select one reservation, resolved at different
// times; karpenter: NewReservationManager). Without reserved offerings
// s.rsv stays nil and nothing below costs anything.
func (s *solver) buildReservations() {
	budget := map[string]int{}
	for _, types := range s.in.InstanceTypes {
		for _, it := range types {
			if it == nil {
				continue
			}
			for i := range it.Offerings {
				o := &it.Offerings[i]
				if o.CapacityType != v1.CapacityTypeReserved || o.ReservationID == "" {
					continue
				}
				if cur, ok := budget[o.ReservationID]; !ok || o.ReservationCapacity < cur {
					budget[o.ReservationID] = max(o.ReservationCapacity, 0)
				}
			}
		}
	}
	if len(budget) == 0 {
		return
	}
	r := &reservations{index: map[string]int32{}, lists: map[rsvListKey]*typeList{}, excluded: map[string]int32{}}
	r.ids = sortedKeys(budget)
	for i, id := range r.ids {
		r.index[id] = int32(i)
		r.left = append(r.left, budget[id])
		r.budget = append(r.budget, budget[id])
		if budget[id] == 0 {
			r.full++
		}
	}
	s.rsv = r
}

// take gives one instance of reservation i to a claim.
func (r *reservations) take(i int32) {
	r.left[i]--
	if r.left[i] == 0 {
		r.full++
		r.version++
	}
}

// release returns one instance of reservation i.
func (r *reservations) release(i int32) {
	if r.left[i] == 0 {
		r.full--
		r.version++
	}
	r.left[i]++
}

// restore sets the budgets back to left (a rollback).
func (r *reservations) restore(left []int) {
	full := 0
	changed := false
	for i, n := range left {
		if (n == 0) != (r.left[i] == 0) {
			changed = true
		}
		if n == 0 {
			full++
		}
	}
	copy(r.left, left)
	r.full = full
	if changed {
		r.version++
	}
}

// claimList is the candidate list a claim of pool p with requirement set
// rid holding reservation held (-1: none) prices its types by: s.list(p,
// rid) without the offerings of reservations that have no instance left
// for it. Without reservations, or none full, it is s.list(p, rid).
func (s *solver) claimList(p *pool, rid, held int32) *typeList {
	tl := s.list(p, rid)
	r := s.rsv
	if r == nil || r.full == 0 || len(tl.resvIDs) == 0 {
		return tl
	}
	k := rsvListKey{pool: p.idx, reqID: rid, held: held, version: r.version}
	if out, ok := r.lists[k]; ok {
		return out
	}
	var full []string
	for _, id := range tl.resvIDs {
		if i := r.index[id]; i != held && r.left[i] == 0 {
			full = append(full, id)
		}
	}
	out := tl
	if len(full) > 0 {
		out = s.list(p, s.excludeReservations(rid, full))
	}
	r.lists[k] = out
	return out
}

// excludeReservations is requirement set id with
// karpenter.k8s.aws/capacity-reservation-id NotIn ids (sorted) added.
func (s *solver) excludeReservations(id int32, ids []string) int32 {
	r := s.rsv
	b := r.keyBuf[:0]
	b = append(b, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	for _, v := range ids {
		b = append(b, 0)
		b = append(b, v...)
	}
	r.keyBuf = b
	if out, ok := r.excluded[string(b)]; ok {
		return out
	}
	c := s.reqs.get(id).Clone()
	c.Add(requirements.New(v1.LabelCapacityReservationID, corev1.NodeSelectorOpNotIn, ids...))
	out := s.reqs.intern(c)
	r.excluded[string(b)] = out
	return out
}

// rebook makes claim c hold the reservation its cursor type launches
// into, if any: it keeps the one it holds when that is still among the
// type's reservations, else takes the one with the most instances left
// (then the lowest ID), and releases what it held otherwise. Every
// placement checks usable first, so a reservation the cursor type is
// priced by has an instance left or is the claim's own.
func (s *solver) rebook(c *nclaim) {
	r := s.rsv
	if r == nil {
		return
	}
	want := int32(-1)
	if !c.removed && len(c.pods) > 0 {
		for _, id := range c.tl.reservationsAt(c.cur) {
			i := r.index[id]
			if i == c.held {
				want = i
				break
			}
			if r.left[i] > 0 && (want < 0 || r.left[i] > r.left[want]) {
				want = i
			}
		}
	}
	if want != c.held {
		if c.held >= 0 {
			r.release(c.held)
		}
		if want >= 0 {
			r.take(want)
		}
		c.held = want
	}
}

// usable reports whether a claim holding held (-1: none) may launch type
// i of tl at its listed price: the type is not priced by a reservation,
// or one of its reservations is the claim's or has an instance left.
func (s *solver) usable(tl *typeList, i int, held int32) bool {
	ids := tl.reservationsAt(i)
	for _, id := range ids {
		if j := s.rsv.index[id]; j == held || s.rsv.left[j] > 0 {
			return true
		}
	}
	return len(ids) == 0
}

// fitUsable is fitFrom on the list claimList gives a claim of pool p with
// requirement set rid holding held: the cheapest type that fits need
// within the limit cap once full reservations are set aside. Callers first
// try the plain list and come here only when its cheapest fit is priced by
// a full reservation, so most evaluations never build a list without
// them.
func (s *solver) fitUsable(p *pool, rid, held int32, need *vec, limited bool, limitCap *vec) (*typeList, int) {
	tl := s.claimList(p, rid, held)
	return tl, s.fitFrom(tl, 0, need, limited, limitCap)
}

// settle re-evaluates claim c's cursor under the current budgets: the
// cheapest type that fits its pods and limits with a reservation it may
// use, or none. The plan's writer calls it on every claim in output
// order, so a claim left without a reservation takes one that moves made
// free.
func (s *solver) settle(c *nclaim) {
	if s.rsv == nil {
		return
	}
	tl := s.list(c.pool, c.reqID)
	limited, limitCap := s.capFor(c.pool, &c.capUsed)
	idx := s.fitFrom(tl, 0, &c.used, limited, &limitCap)
	if idx >= 0 && !s.usable(tl, idx, c.held) {
		tl, idx = s.fitUsable(c.pool, c.reqID, c.held, &c.used, limited, &limitCap)
	}
	if idx >= 0 && (tl != c.tl || idx != c.cur) {
		n := s.res.n()
		c.tl, c.cur, c.price = tl, idx, tl.prices[idx]
		c.free = tl.types[idx].alloc
		c.free.sub(&c.used, n)
		s.setCapUsed(c, &tl.types[idx].capacity)
	}
	s.rebook(c)
}

// finalReqID is the requirement set claim c is written with: its own,
// tightened to the reservation it holds (capacity type reserved, that
// reservation ID) or, when it holds none but its pool offers reservations,
// away from reserved offerings.
func (s *solver) finalReqID(c *nclaim) int32 {
	if s.rsv == nil || len(s.list(c.pool, c.reqID).resvIDs) == 0 {
		return c.reqID
	}
	r := s.reqs.get(c.reqID).Clone()
	if c.held >= 0 {
		r.Add(requirements.New(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeReserved))
		r.Add(requirements.New(v1.LabelCapacityReservationID, corev1.NodeSelectorOpIn, s.rsv.ids[c.held]))
	} else {
		r.Add(requirements.New(v1.LabelCapacityType, corev1.NodeSelectorOpNotIn, v1.CapacityTypeReserved))
	}
	return s.reqs.intern(r)
}

// reservationsAt returns the reservations whose offerings price type i of
// the list (its cheapest allowed offering is reserved), sorted; nil when
// the type is priced by another capacity type.
func (tl *typeList) reservationsAt(i int) []string {
	if i >= len(tl.resv) {
		return nil
	}
	return tl.resv[i]
}

// noteReservation adds reservation id to the list's resvIDs.
func (tl *typeList) noteReservation(id string) {
	if j := sort.SearchStrings(tl.resvIDs, id); j == len(tl.resvIDs) || tl.resvIDs[j] != id {
		tl.resvIDs = append(tl.resvIDs, "")
		copy(tl.resvIDs[j+1:], tl.resvIDs[j:])
		tl.resvIDs[j] = id
	}
}

// pricedBy records that type i of the list is priced by the reserved
// offerings of reservations ids (none: by another capacity type).
func (tl *typeList) pricedBy(i int, ids []string) {
	if len(ids) == 0 {
		return
	}
	for len(tl.resv) <= i {
		tl.resv = append(tl.resv, nil)
	}
	sort.Strings(ids)
	tl.resv[i] = slices.Compact(ids)
}

// explainReservations says why pool p takes no new claim for pi when
// the reason is that the capacity reservations it could use are full: the
// pool's list for rid with every reservation has a type that fits the pod
// alone, but none is left once full reservations are set aside. "" when
// that is not the reason.
func (s *solver) explainReservations(pi *podInfo, p *pool, rid int32, limitCap *vec) string {
	r := s.rsv
	if r == nil {
		return ""
	}
	base := s.list(p, rid)
	if len(base.resvIDs) == 0 || s.fitFrom(base, 0, &pi.req, p.anyLimit, limitCap) < 0 {
		return ""
	}
	var full []string
	for _, id := range base.resvIDs {
		if i := r.index[id]; r.left[i] == 0 {
			full = append(full, fmt.Sprintf("%s (%d %s)", id, r.budget[i], plural(r.budget[i], "instance", "instances")))
		}
	}
	if len(full) == 0 {
		return ""
	}
	return fmt.Sprintf("capacity %s %s %s no instance left in this round (each taken by one of the plan's NodeClaims), and the NodePool's requirements allow no other offering that fits the pod",
		plural(len(full), "reservation", "reservations"), strings.Join(full, ", "), plural(len(full), "has", "have"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
