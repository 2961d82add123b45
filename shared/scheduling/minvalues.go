package scheduling

import (
	"sort"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// typeValues returns the values instance type t offers for key under
// requirements r: its label (the name for the instance-type key), or the
// zones / capacity types of its allowed available offerings.
func typeValues(r requirements.Requirements, t *ptype, key string) []string {
	switch key {
	case v1.LabelInstanceType:
		return []string{t.name}
	case v1.LabelTopologyZone, v1.LabelCapacityType:
		var out []string
		for i := range t.offers {
			o := &t.offers[i]
			if !offerAllowed(r, o) {
				continue
			}
			v := o.Zone
			if key == v1.LabelCapacityType {
				v = o.CapacityType
			}
			out = append(out, v)
		}
		return out
	}
	if v, ok := t.it.Labels[key]; ok {
		return []string{v}
	}
	return nil
}

// minValuesShortfall returns the first key (sorted) whose minValues the
// types do not reach, with the wanted and available counts (karpenter:
// InstanceTypes.SatisfiesMinValues).
func minValuesShortfall(r requirements.Requirements, types []*ptype) (key string, want, have int) {
	for _, k := range r.Keys() {
		req := r[k]
		if req.MinValues == nil {
			continue
		}
		seen := map[string]bool{}
		for _, t := range types {
			for _, v := range typeValues(r, t, k) {
				if req.Has(v) {
					seen[v] = true
				}
			}
		}
		if len(seen) < *req.MinValues {
			return k, *req.MinValues, len(seen)
		}
	}
	return "", 0, 0
}

// truncate keeps at most max types, cheapest first, but makes sure every
// minValues key keeps enough distinct values when the full list had them:
// for each such key it first takes the cheapest type of each missing value,
// then fills by price (karpenter: InstanceTypes.Truncate keeps the cheapest
// and errs when that breaks minValues; nodewright keeps minValues instead).
// types are in price order; the result is too.
func truncate(r requirements.Requirements, types []*ptype, max int) []*ptype {
	if len(types) <= max {
		return types
	}
	if k, _, _ := minValuesShortfall(r, types[:max]); k == "" {
		return types[:max]
	}
	chosen := make([]bool, len(types))
	count := 0
	for _, k := range r.Keys() {
		req := r[k]
		if req.MinValues == nil {
			continue
		}
		have := map[string]bool{}
		for i, t := range types {
			if !chosen[i] {
				continue
			}
			for _, v := range typeValues(r, t, k) {
				have[v] = true
			}
		}
		for i, t := range types {
			if len(have) >= *req.MinValues || count >= max {
				break
			}
			if chosen[i] {
				continue
			}
			adds := false
			for _, v := range typeValues(r, t, k) {
				if req.Has(v) && !have[v] {
					adds = true
				}
			}
			if adds {
				chosen[i] = true
				count++
				for _, v := range typeValues(r, t, k) {
					have[v] = true
				}
			}
		}
	}
	for i := range types {
		if count >= max {
			break
		}
		if !chosen[i] {
			chosen[i] = true
			count++
		}
	}
	out := make([]*ptype, 0, max)
	for i, t := range types {
		if chosen[i] {
			out = append(out, t)
		}
	}
	return out
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
