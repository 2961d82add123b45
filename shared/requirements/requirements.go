// Package requirements is the node-label requirement algebra Karpenter
// schedules with: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte over label
// keys, intersection, compatibility between a pod and a NodePool (well-known
// versus custom keys) and minValues (karpenter: pkg/scheduling/requirement.go,
// requirements.go; karpenter-spec §2).
//
// A Requirement is immutable once built: every operation returns a new value
// (or one of its inputs unchanged), so Requirements may share *Requirement
// pointers freely. Only the exported MinValues field may be written by
// callers, and only on a Requirement they built themselves.
//
// All output is deterministic: keys and values come back sorted, and errors
// list keys in sorted order. Reading Requirements from several goroutines is
// safe; Add writes the map and needs exclusive access. Checks used in the
// solver's hot loops (Has, Intersects, Compatible, AdmitsLabels) do not
// allocate unless they fail.
package requirements

import (
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Requirement is the set of values allowed for one label key: a finite set
// (In), the complement of a finite set (NotIn, Exists), optionally bounded by
// integer bounds (Gt/Lt/Gte/Lte), plus an optional minValues. The zero value
// is not valid; build one with New.
//
// Invariants (karpenter: pkg/scheduling/requirement.go): bounds only ever sit
// on complement sets; values is sorted and free of duplicates; a complement
// with bounds lists only excluded values that lie within the bounds.
type Requirement struct {
	Key string
	// MinValues is the minimum number of distinct values the launch
	// candidates must provide for Key; nil when unset.
	MinValues *int

	complement bool
	// values is the finite set (In) or the excluded set (complement),
	// sorted ascending, without duplicates. It is never mutated after
	// construction and may be shared between requirements.
	values []string
	// gte and lte are inclusive integer bounds, valid when hasGte/hasLte.
	gte, lte       int64
	hasGte, hasLte bool
}

// New builds a requirement from a node selector operator (including
// Karpenter's Gte and Lte). Gt N becomes Gte N+1 and Lt N becomes Lte N-1.
// Values that an operator does not use are ignored; a non-integer bound
// yields a requirement no value satisfies. It never panics.
//
// Deprecated keys are normalized to their stable form (v1.NormalizedLabels,
// e.g. beta.kubernetes.io/arch becomes kubernetes.io/arch), as Karpenter's
// NewRequirement does. Gt/Lt/Gte/Lte read only values[0]; Gt math.MaxInt64
// and Lt math.MinInt64 allow nothing. An unknown operator also yields a
// requirement no value satisfies (it reports DoesNotExist); validation
// (ValidatePod, NodePool validation) rejects such operators before this.
func New(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	if normalized, ok := v1.NormalizedLabels[key]; ok {
		key = normalized
	}
	r := &Requirement{Key: key}
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values = sortedSet(values)
	case corev1.NodeSelectorOpNotIn:
		r.complement = true
		r.values = sortedSet(values)
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
		n, ok := bound(op, values)
		if !ok {
			return r // nothing satisfies: DoesNotExist
		}
		r.complement = true
		if op == corev1.NodeSelectorOpGt || op == v1.NodeSelectorOpGte {
			r.gte, r.hasGte = n, true
		} else {
			r.lte, r.hasLte = n, true
		}
	}
	return r
}

// bound returns the inclusive bound of a Gt/Lt/Gte/Lte operator, or false
// when no value can satisfy it (missing or non-integer value, Gt MaxInt64,
// Lt MinInt64).
func bound(op corev1.NodeSelectorOperator, values []string) (int64, bool) {
	if len(values) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(values[0], 10, 64)
	if err != nil {
		return 0, false
	}
	switch op {
	case corev1.NodeSelectorOpGt:
		if n == math.MaxInt64 {
			return 0, false
		}
		return n + 1, true
	case corev1.NodeSelectorOpLt:
		if n == math.MinInt64 {
			return 0, false
		}
		return n - 1, true
	}
	return n, true
}

// bounded reports whether r carries an integer bound.
func (r *Requirement) bounded() bool { return r.hasGte || r.hasLte }

// Operator is the canonical operator of r: In, NotIn, Exists or
// DoesNotExist (bounded requirements report Exists with bounds).
func (r *Requirement) Operator() corev1.NodeSelectorOperator {
	switch {
	case r.complement && len(r.values) > 0 && !r.bounded():
		return corev1.NodeSelectorOpNotIn
	case r.complement:
		return corev1.NodeSelectorOpExists
	case len(r.values) > 0:
		return corev1.NodeSelectorOpIn
	default:
		return corev1.NodeSelectorOpDoesNotExist
	}
}

// negative reports whether r's operator is NotIn or DoesNotExist: the
// operators an absent label satisfies.
func (r *Requirement) negative() bool {
	if r.complement {
		return len(r.values) > 0 && !r.bounded()
	}
	return len(r.values) == 0
}

// Has reports whether value satisfies r. With bounds, value must parse as a
// base-10 int64 (strconv.ParseInt: an optional sign and leading zeros are
// accepted) within them.
func (r *Requirement) Has(value string) bool {
	if r.complement {
		return !contains(r.values, value) && r.within(value)
	}
	return contains(r.values, value)
}

// within reports whether value lies within r's bounds; true without bounds.
func (r *Requirement) within(value string) bool {
	if !r.hasGte && !r.hasLte {
		return true
	}
	return withinBounds(value, r.gte, r.lte, r.hasGte, r.hasLte)
}

func withinBounds(value string, gte, lte int64, hasGte, hasLte bool) bool {
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return false
	}
	return (!hasGte || n >= gte) && (!hasLte || n <= lte)
}

// Values returns the finite value set sorted (empty for complements). The
// slice is a fresh copy the caller owns.
func (r *Requirement) Values() []string {
	if r.complement || len(r.values) == 0 {
		return []string{}
	}
	return slices.Clone(r.values)
}

// Len is the number of allowed values, or math.MaxInt for complement sets.
func (r *Requirement) Len() int {
	if r.complement {
		return math.MaxInt
	}
	return len(r.values)
}

// Any returns one allowed value deterministically (the smallest for finite
// sets), or "" when none exists or the set is a complement without bounds.
//
// For a bounded complement it returns the smallest allowed integer at or
// above the lower bound or, with only an upper bound, the largest allowed
// integer at or below it, formatted in base 10.
func (r *Requirement) Any() string {
	if !r.complement {
		if len(r.values) == 0 {
			return ""
		}
		return r.values[0]
	}
	switch {
	case r.hasGte:
		for n := r.gte; !r.hasLte || n <= r.lte; n++ {
			if s := strconv.FormatInt(n, 10); !contains(r.values, s) {
				return s
			}
			if n == math.MaxInt64 {
				break
			}
		}
	case r.hasLte:
		for n := r.lte; ; n-- {
			if s := strconv.FormatInt(n, 10); !contains(r.values, s) {
				return s
			}
			if n == math.MinInt64 {
				break
			}
		}
	}
	return ""
}

// Intersection returns the requirement allowing exactly the values both
// allow; MinValues is the larger of the two.
//
// Following Karpenter: the result is a complement only when both are;
// bounds combine as max(gte) and min(lte), and crossing bounds (gte > lte)
// yield DoesNotExist; a finite result keeps only the values within the
// bounds and drops the bounds. The result takes r's Key. When the result
// equals r (for example o is an unbounded Exists), r itself is returned.
func (r *Requirement) Intersection(o *Requirement) *Requirement {
	minValues := maxPtr(r.MinValues, o.MinValues)
	// Fast paths: intersecting with "anything" is the identity.
	if o.universal() && minValues == r.MinValues {
		return r
	}
	if r.universal() && minValues == o.MinValues && o.Key == r.Key {
		return o
	}
	out := &Requirement{Key: r.Key, MinValues: minValues}
	gte, hasGte := r.gte, r.hasGte
	if o.hasGte && (!hasGte || o.gte > gte) {
		gte, hasGte = o.gte, true
	}
	lte, hasLte := r.lte, r.hasLte
	if o.hasLte && (!hasLte || o.lte < lte) {
		lte, hasLte = o.lte, true
	}
	if hasGte && hasLte && gte > lte {
		return out // DoesNotExist
	}
	var values []string
	switch {
	case r.complement && o.complement:
		out.complement = true
		values = union(r.values, o.values)
	case r.complement:
		values = difference(o.values, r.values)
	case o.complement:
		values = difference(r.values, o.values)
	default:
		values = intersect(r.values, o.values)
	}
	if hasGte || hasLte {
		values = filterWithin(values, gte, lte, hasGte, hasLte)
	}
	out.values = values
	if out.complement {
		out.gte, out.hasGte, out.lte, out.hasLte = gte, hasGte, lte, hasLte
	}
	return out
}

// universal reports whether r allows every value (unbounded Exists).
func (r *Requirement) universal() bool {
	return r.complement && len(r.values) == 0 && !r.bounded()
}

// intersects reports whether some value satisfies both r and o, without
// allocating. Two complements always share a value: the string space is
// infinite and, with non-crossing bounds, so are the integer spellings
// within them ("5", "05", "+5").
func (r *Requirement) intersects(o *Requirement) bool {
	switch {
	case r.complement && o.complement:
		gte, hasGte := r.gte, r.hasGte
		if o.hasGte && (!hasGte || o.gte > gte) {
			gte, hasGte = o.gte, true
		}
		lte, hasLte := r.lte, r.hasLte
		if o.hasLte && (!hasLte || o.lte < lte) {
			lte, hasLte = o.lte, true
		}
		return !hasGte || !hasLte || gte <= lte
	case r.complement:
		return o.anyOutside(r)
	case o.complement:
		return r.anyOutside(o)
	default:
		return overlaps(r.values, o.values)
	}
}

// Overlaps reports whether some value satisfies both r and o; keys are not
// compared. Unlike Requirements.Intersects it makes no exception for two
// NotIn/DoesNotExist sides (use Negative for that). It does not allocate.
func (r *Requirement) Overlaps(o *Requirement) bool { return r.intersects(o) }

// Negative reports whether r's operator is NotIn or DoesNotExist: the
// requirements a node without the label satisfies.
func (r *Requirement) Negative() bool { return r.negative() }

// anyOutside reports whether a value of finite r satisfies complement c.
func (r *Requirement) anyOutside(c *Requirement) bool {
	for _, v := range r.values {
		if !contains(c.values, v) && c.within(v) {
			return true
		}
	}
	return false
}

// String renders r as Karpenter prints it, e.g. `karpenter.sh/capacity-type In [on-demand spot]`.
//
// Finite sets list at most five values followed by "and N others"; bounds
// follow as inclusive " >=N" / " <=N" after Exists (or after "NotIn [...]"
// when values are also excluded), so `instance-cpu Gt 4` prints as
// `karpenter.k8s.aws/instance-cpu Exists >=5`; a set minValues adds
// " minValues N" (karpenter: pkg/scheduling/requirement.go String).
func (r *Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Key)
	b.WriteByte(' ')
	switch {
	case r.complement && len(r.values) > 0:
		b.WriteString(string(corev1.NodeSelectorOpNotIn))
		b.WriteByte(' ')
		writeValues(&b, r.values)
	case r.complement:
		b.WriteString(string(corev1.NodeSelectorOpExists))
	case len(r.values) > 0:
		b.WriteString(string(corev1.NodeSelectorOpIn))
		b.WriteByte(' ')
		writeValues(&b, r.values)
	default:
		b.WriteString(string(corev1.NodeSelectorOpDoesNotExist))
	}
	if r.hasGte {
		b.WriteString(" >=")
		b.WriteString(strconv.FormatInt(r.gte, 10))
	}
	if r.hasLte {
		b.WriteString(" <=")
		b.WriteString(strconv.FormatInt(r.lte, 10))
	}
	if r.MinValues != nil {
		b.WriteString(" minValues ")
		b.WriteString(strconv.Itoa(*r.MinValues))
	}
	return b.String()
}

// writeValues writes values as "[a b c d e and N others]".
func writeValues(b *strings.Builder, values []string) {
	const shown = 5
	b.WriteByte('[')
	for i, v := range values {
		if i == shown {
			b.WriteString(" and ")
			b.WriteString(strconv.Itoa(len(values) - shown))
			b.WriteString(" others")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v)
	}
	b.WriteByte(']')
}

// nodeSelectorRequirements renders r in API form: one entry, or for a
// bounded complement a NotIn entry (when values are excluded) followed by
// Gte and Lte entries. MinValues rides on the first entry.
func (r *Requirement) nodeSelectorRequirements(out []v1.NodeSelectorRequirementWithMinValues) []v1.NodeSelectorRequirementWithMinValues {
	start := len(out)
	if r.bounded() {
		if len(r.values) > 0 {
			out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: corev1.NodeSelectorOpNotIn, Values: slices.Clone(r.values)})
		}
		if r.hasGte {
			out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: v1.NodeSelectorOpGte, Values: []string{strconv.FormatInt(r.gte, 10)}})
		}
		if r.hasLte {
			out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: v1.NodeSelectorOpLte, Values: []string{strconv.FormatInt(r.lte, 10)}})
		}
	} else {
		req := v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator()}
		if len(r.values) > 0 {
			req.Values = slices.Clone(r.values)
		}
		out = append(out, req)
	}
	if r.MinValues != nil {
		mv := *r.MinValues
		out[start].MinValues = &mv
	}
	return out
}

// clone returns a copy of r that shares only the immutable value slice.
func (r *Requirement) clone() *Requirement {
	c := *r
	if r.MinValues != nil {
		mv := *r.MinValues
		c.MinValues = &mv
	}
	return &c
}

// maxPtr returns the pointer holding the larger value; nil only when both
// are nil. On a tie it returns a.
func maxPtr(a, b *int) *int {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case *b > *a:
		return b
	default:
		return a
	}
}
