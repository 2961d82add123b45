package requirements

import (
	"slices"
)

// Value sets are sorted, duplicate-free string slices. Building and
// intersecting them costs one allocation and no hashing, they are already in
// the deterministic order every output needs, and membership is a scan
// (small sets) or a binary search. A map answers membership in a large set
// faster (BenchmarkMembership: about 15 ns against 55 ns at 600 values), but
// the solver builds and intersects sets far more often than it probes big
// ones.

// linearMax is the set size up to which contains scans instead of searching.
const linearMax = 8

// sortedSet returns values sorted and without duplicates, in a new slice;
// nil when values is empty.
func sortedSet(values []string) []string {
	switch len(values) {
	case 0:
		return nil
	case 1:
		return []string{values[0]}
	}
	out := slices.Clone(values)
	slices.Sort(out)
	return slices.Compact(out)
}

// contains reports whether sorted set s holds v.
func contains(s []string, v string) bool {
	if len(s) <= linearMax {
		for _, x := range s {
			if x == v {
				return true
			}
		}
		return false
	}
	_, found := slices.BinarySearch(s, v)
	return found
}

// skewed reports whether probing b once per element of a beats a merge:
// a is small and b much larger (an instance-type list, say).
func skewed(a, b []string) bool {
	return len(a) <= linearMax && len(b) > 4*linearMax
}

// intersect returns the values in both sorted sets a and b.
func intersect(a, b []string) []string {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	if skewed(a, b) {
		var out []string
		for _, v := range a {
			if contains(b, v) {
				out = append(out, v)
			}
		}
		return out
	}
	var out []string
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			if out == nil {
				out = make([]string, 0, min(len(a)-i, len(b)-j))
			}
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// overlaps reports whether sorted sets a and b share a value.
func overlaps(a, b []string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if skewed(a, b) {
		for _, v := range a {
			if contains(b, v) {
				return true
			}
		}
		return false
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			return true
		}
	}
	return false
}

// difference returns the values of sorted set a not in sorted set b. It
// returns a itself when nothing is removed (sets are never mutated).
func difference(a, b []string) []string {
	if len(a) == 0 || len(b) == 0 {
		return a
	}
	if skewed(a, b) {
		for i, v := range a {
			if !contains(b, v) {
				continue
			}
			out := make([]string, i, len(a)-1)
			copy(out, a[:i])
			for _, w := range a[i+1:] {
				if !contains(b, w) {
					out = append(out, w)
				}
			}
			return out
		}
		return a
	}
	var out []string
	i, j := 0, 0
	for i < len(a) {
		switch {
		case j >= len(b) || a[i] < b[j]:
			if out != nil {
				out = append(out, a[i])
			}
			i++
		case a[i] > b[j]:
			j++
		default:
			if out == nil {
				out = make([]string, i, len(a)-1)
				copy(out, a[:i])
			}
			i++
			j++
		}
	}
	if out == nil {
		return a
	}
	return out
}

// union returns the values in either sorted set. It returns one of its
// inputs when the other adds nothing.
func union(a, b []string) []string {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0:
		return b
	}
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// filterWithin returns the values of sorted set s within the inclusive
// integer bounds; s itself when all are.
func filterWithin(s []string, gte, lte int64, hasGte, hasLte bool) []string {
	for i, v := range s {
		if withinBounds(v, gte, lte, hasGte, hasLte) {
			continue
		}
		out := make([]string, i, len(s)-1)
		copy(out, s[:i])
		for _, w := range s[i+1:] {
			if withinBounds(w, gte, lte, hasGte, hasLte) {
				out = append(out, w)
			}
		}
		return out
	}
	return s
}
