package scheduling

import (
	"sort"

	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

// candidates are types as the launch model sees them: each with its
// available offerings that r allows (types with none are left out), Ref
// indexing types.
func candidates(r requirements.Requirements, types []*ptype) []launch.Candidate {
	f := launch.NewOfferFilter(r)
	n := 0
	for _, t := range types {
		n += len(t.offers)
	}
	backing := make(catalog.Offerings, 0, n)
	out := make([]launch.Candidate, 0, len(types))
	for i, t := range types {
		start := len(backing)
		for j := range t.offers {
			if f.Allows(&t.offers[j]) {
				backing = append(backing, t.offers[j])
			}
		}
		if len(backing) > start {
			out = append(out, launch.Candidate{Type: t.it, Offerings: backing[start:len(backing):len(backing)], Ref: i})
		}
	}
	return out
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
