package requirements

import (
	"slices"
	"strconv"
	"strings"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// IncompatibleError is returned by Requirements.Intersects, Compatible and
// MatchesLabels. It lists every reason, in sorted key order, and formats its
// message only when Error is called, so failing checks in the solver's hot
// loops stay cheap. Its message is meant for FailedScheduling events, e.g.
//
//	label "tema" does not have known values (typo of "team"?); requirement "karpenter.k8s.aws/instance-category In [c m r]" conflicts with "karpenter.k8s.aws/instance-category In [p]"
type IncompatibleError struct {
	// Undefined lists, sorted, the custom (not well-known) keys the incoming
	// side constrains with In, Exists or bounds that the receiver does not
	// define (Compatible only).
	Undefined []string
	// Conflicts lists, sorted by key, the keys on which no value satisfies
	// both sides.
	Conflicts []Conflict

	// known is the receiver's key set (sorted) at the time of the check,
	// used for typo hints.
	known []string
}

// Conflict is one key on which two Requirements share no value.
type Conflict struct {
	Key string
	// Existing is the receiver's requirement (e.g. the NodePool's or
	// NodeClaim's); Incoming is the argument's (e.g. the pod's, or the
	// instance type's labels as In/DoesNotExist).
	Existing, Incoming *Requirement
}

// Error renders every reason, separated by "; ": `label "k" does not have
// known values` (with a ` (typo of "x"?)` hint when a well-known or defined
// key is close, as Karpenter's labelHint does) and `requirement "<existing>"
// conflicts with "<incoming>"`.
func (e *IncompatibleError) Error() string {
	var b strings.Builder
	for _, key := range e.Undefined {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("label ")
		b.WriteString(strconv.Quote(key))
		b.WriteString(" does not have known values")
		if hint := typoOf(key, e.known); hint != "" {
			b.WriteString(" (typo of ")
			b.WriteString(strconv.Quote(hint))
			b.WriteString("?)")
		}
	}
	for _, c := range e.Conflicts {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("requirement ")
		b.WriteString(strconv.Quote(c.Existing.String()))
		b.WriteString(" conflicts with ")
		b.WriteString(strconv.Quote(c.Incoming.String()))
	}
	return b.String()
}

// typoOf returns the well-known or known key that key most likely
// misspells, or "" (always for a well-known key). A candidate qualifies, best first, when its edit
// distance to key (with transpositions) is at most max(1, len(candidate)/5),
// when its name after the prefix "/" equals key's, or when it contains key
// (at least three characters); within a kind the closest candidate wins,
// ties going to well-known keys, then to the smaller key. (karpenter:
// pkg/scheduling/requirements.go labelHint applies the same three tests with
// a stricter distance threshold, in map order.)
func typoOf(key string, known []string) string {
	if v1.WellKnownLabels[key] {
		return "" // undefined on purpose (StrictlyCompatible), not a typo
	}
	best, bestKind, bestDist := "", 0, 0
	consider := func(c string) {
		if c == key {
			return
		}
		d := editDistance(key, c)
		kind := 0
		switch {
		case d <= max(1, len(c)/5):
			kind = 1
		case name(c) == name(key):
			kind = 2
		case len(key) >= 3 && strings.Contains(c, key):
			kind = 3
		default:
			return
		}
		if best == "" || kind < bestKind || (kind == bestKind && d < bestDist) {
			best, bestKind, bestDist = c, kind, d
		}
	}
	for _, c := range sortedWellKnown() {
		consider(c)
	}
	for _, c := range known {
		if !v1.WellKnownLabels[c] {
			consider(c)
		}
	}
	return best
}

// name is the part of a label key after its prefix.
func name(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// sortedWellKnown returns v1.WellKnownLabels' keys sorted.
func sortedWellKnown() []string {
	keys := make([]string, 0, len(v1.WellKnownLabels))
	for k := range v1.WellKnownLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// editDistance is the optimal-string-alignment distance between a and b:
// insertions, deletions, substitutions and adjacent transpositions, by byte.
func editDistance(a, b string) int {
	if len(a) == 0 {
		return len(b)
	}
	if len(b) == 0 {
		return len(a)
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
