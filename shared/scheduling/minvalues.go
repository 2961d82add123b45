package scheduling

import (
	"sort"

	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

// candidates are types as the launch model sees them: each with its
// available offerings that r allows (launch.OfferFilter.Allowed; types with
// none are left out), Ref indexing types.
func candidates(r requirements.Requirements, types []*ptype) []launch.Candidate {
	f := launch.NewOfferFilter(r)
	out := make([]launch.Candidate, 0, len(types))
	for i, t := range types {
		if offers := f.Allowed(t.offers, nil); len(offers) > 0 {
			out = append(out, launch.Candidate{Type: t.it, Offerings: offers, Ref: i})
		}
	}
	return out
}

// claimCandidates is candidates for a claim's requirement set: each type's
// allowed offerings are computed once per (requirement set, type) and
// shared by every claim with that set (launch.Narrow never writes to them;
// when the set allows all of a type's offerings, they are its own), and by
// every solve of a Prepared (Prepared.allowedOffers).
// The result lives in a buffer the next call reuses.
func (s *solver) claimCandidates(reqID int32, types []*ptype) []launch.Candidate {
	if s.allowed == nil {
		s.allowed = map[allowedKey]catalog.Offerings{}
	}
	var f launch.OfferFilter
	fset := false
	out := s.candBuf[:0]
	for i, t := range types {
		k := allowedKey{reqID: reqID, t: t}
		offers, ok := s.allowed[k]
		if !ok {
			if !fset {
				f, fset = launch.NewOfferFilter(s.reqs.get(reqID)), true
			}
			offers = s.prep.allowedOffers(s, reqID, t, func() catalog.Offerings {
				if allAllowed(&f, t.offers) {
					return t.offers
				}
				return f.Allowed(t.offers, nil)
			})
			s.allowed[k] = offers
		}
		if len(offers) > 0 {
			out = append(out, launch.Candidate{Type: t.it, Offerings: offers[:len(offers):len(offers)], Ref: i})
		}
	}
	s.candBuf = out
	return out
}

// allAllowed reports whether f allows every offering of offers.
func allAllowed(f *launch.OfferFilter, offers catalog.Offerings) bool {
	for i := range offers {
		if !f.Allows(&offers[i]) {
			return false
		}
	}
	return true
}

// allowedKey names a type's allowed offerings under one requirement set.
type allowedKey struct {
	reqID int32
	t     *ptype
}

// minValuesShortfall returns the first key (sorted) whose minValues the
// types do not reach, with the wanted and available counts
// (launch.MinValuesShortfall).
func minValuesShortfall(r requirements.Requirements, types []*ptype) (key string, want, have int) {
	return launch.MinValuesShortfall(r, candidates(r, types))
}

// sortedUnique sorts and deduplicates values.
func sortedUnique(vs []string) []string {
	sort.Strings(vs)
	out := vs[:0]
	for i, v := range vs {
		if i == 0 || v != vs[i-1] {
			out = append(out, v)
		}
	}
	return out
}
