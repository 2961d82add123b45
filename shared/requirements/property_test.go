package requirements

import (
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// The property tests check the algebra against its definition: a
// requirement is the set of strings Has accepts, and Intersection must be
// set intersection. Requirements are drawn from small pools so that values,
// excluded values and bounds collide often.

var (
	propOps = []corev1.NodeSelectorOperator{
		corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
		corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt,
		v1.NodeSelectorOpGte, v1.NodeSelectorOpLte,
	}
	// propValues feed In/NotIn: words, integers, and odd spellings of them.
	propValues = []string{"a", "b", "c", "-1", "0", "1", "2", "3", "4", "5", "8", "16", "05", "+3", "x1", ""}
	// propBounds feed Gt/Lt/Gte/Lte, including extremes and a non-integer.
	propBounds = []string{"-1", "0", "1", "2", "3", "4", "5", "8", "16", "9223372036854775807", "-9223372036854775808", "four"}
	// probes are the values every property is checked on.
	probes = append(slices.Clone(propValues), "6", "7", "15", "17", "100", "-2", "004",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", "z", "1.5")
)

// genRequirement draws a requirement of key "k": one operator, or the
// intersection of two, so that NotIn-with-bounds and crossing bounds occur.
func genRequirement(rng *rand.Rand) *Requirement {
	one := func() *Requirement {
		op := propOps[rng.IntN(len(propOps))]
		var values []string
		switch op {
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
			values = []string{propBounds[rng.IntN(len(propBounds))]}
		default:
			for range rng.IntN(5) {
				values = append(values, propValues[rng.IntN(len(propValues))])
			}
		}
		r := New("k", op, values...)
		if rng.IntN(4) == 0 {
			mv := 1 + rng.IntN(3)
			r.MinValues = &mv
		}
		return r
	}
	r := one()
	if rng.IntN(2) == 0 {
		r = r.Intersection(one())
	}
	return r
}

// checkInvariants reports a broken representation invariant, or "".
func checkInvariants(r *Requirement) string {
	if !slices.IsSorted(r.values) || len(slices.Compact(slices.Clone(r.values))) != len(r.values) {
		return "values not sorted and unique"
	}
	if !r.complement && r.bounded() {
		return "bounds on a finite set"
	}
	if r.hasGte && r.hasLte && r.gte > r.lte {
		return "crossing bounds kept"
	}
	for _, v := range r.values {
		if r.bounded() && !r.within(v) {
			return "excluded value outside the bounds kept"
		}
	}
	return ""
}

// checkIntersection verifies every property of a ∩ b; it reports through t.
func checkIntersection(t *testing.T, a, b *Requirement) {
	t.Helper()
	ab, ba := a.Intersection(b), b.Intersection(a)
	for _, r := range []*Requirement{ab, ba} {
		if msg := checkInvariants(r); msg != "" {
			t.Fatalf("(%s).Intersection(%s) = %s: %s", a, b, r, msg)
		}
	}
	if ca, cb := (Requirements{"k": ab}).Canonical(), (Requirements{"k": ba}).Canonical(); ca != cb {
		t.Fatalf("a∩b and b∩a have different canonical forms: %q, %q", ca, cb)
	}
	witness := false
	for _, v := range probes {
		want := a.Has(v) && b.Has(v)
		if got := ab.Has(v); got != want {
			t.Fatalf("(%s).Intersection(%s) = %s; Has(%q) = %t, want %t", a, b, ab, v, got, want)
		}
		if got := ba.Has(v); got != want {
			t.Fatalf("(%s).Intersection(%s) = %s; Has(%q) = %t, want %t", b, a, ba, v, got, want)
		}
		witness = witness || want
	}
	nonEmpty := ab.complement || len(ab.values) > 0
	if witness && !nonEmpty {
		t.Fatalf("(%s).Intersection(%s) = %s is empty, but a probe satisfies both", a, b, ab)
	}
	if got := a.intersects(b); got != nonEmpty {
		t.Fatalf("(%s).intersects(%s) = %t, want %t (Intersection = %s)", a, b, got, nonEmpty, ab)
	}
	if got := b.intersects(a); got != nonEmpty {
		t.Fatalf("(%s).intersects(%s) = %t, want %t", b, a, got, nonEmpty)
	}
	if v := ab.Any(); v != "" && (!a.Has(v) || !b.Has(v)) {
		t.Fatalf("(%s).Intersection(%s).Any() = %q, which is not in both", a, b, v)
	}
	if ab.bounded() && (!ab.hasGte || !ab.hasLte) && ab.Any() == "" {
		t.Fatalf("(%s).Any() = \"\" for a half-bounded set", ab)
	}
	wantMin := maxPtr(a.MinValues, b.MinValues)
	if (wantMin == nil) != (ab.MinValues == nil) || (wantMin != nil && *wantMin != *ab.MinValues) {
		t.Fatalf("(%s).Intersection(%s).MinValues wrong: %s", a, b, ab)
	}
	// Intersects on single-key Requirements is pairOK, and symmetric.
	ra, rb := Requirements{"k": a}, Requirements{"k": b}
	wantOK := nonEmpty || (a.negative() && b.negative())
	if got := ra.Intersects(rb) == nil; got != wantOK {
		t.Fatalf("(%s).Intersects(%s) ok = %t, want %t", a, b, got, wantOK)
	}
	if got := rb.Intersects(ra) == nil; got != wantOK {
		t.Fatalf("(%s).Intersects(%s) ok = %t, want %t", b, a, got, wantOK)
	}
	// The API form denotes the same set.
	back := FromNodeSelector(Requirements{"k": ab}.NodeSelectorRequirements())["k"]
	for _, v := range probes {
		if back.Has(v) != ab.Has(v) {
			t.Fatalf("round trip of %s = %s; Has(%q) differs", ab, back, v)
		}
	}
	if back.String() != ab.String() {
		t.Fatalf("round trip of %s = %s", ab, back)
	}
}

func TestIntersectionProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		checkIntersection(t, genRequirement(rng), genRequirement(rng))
	}
}

// TestOperatorAgreesWithSet checks that Operator, Len and negative describe
// the set Has accepts.
func TestOperatorAgreesWithSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		r := genRequirement(rng)
		op := r.Operator()
		if r.negative() != (op == corev1.NodeSelectorOpNotIn || op == corev1.NodeSelectorOpDoesNotExist) {
			t.Fatalf("(%s).negative() disagrees with Operator() %s", r, op)
		}
		if op == corev1.NodeSelectorOpDoesNotExist {
			for _, v := range probes {
				if r.Has(v) {
					t.Fatalf("%s reports DoesNotExist but Has(%q)", r, v)
				}
			}
		}
		if op == corev1.NodeSelectorOpIn && r.Len() != len(r.Values()) {
			t.Fatalf("(%s).Len() = %d, want %d", r, r.Len(), len(r.Values()))
		}
	}
}

// FuzzIntersection drives the same properties from fuzzer-chosen bytes:
// each byte pair picks an operator and a value or bound.
func FuzzIntersection(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{4, 5})
	f.Add([]byte{4, 9, 5, 1}, []byte{1, 2, 6, 3})
	f.Add([]byte{6, 8, 7, 8}, []byte{0, 8, 1, 12})
	f.Fuzz(func(t *testing.T, x, y []byte) {
		checkIntersection(t, fromBytes(x), fromBytes(y))
	})
}

// fromBytes decodes byte pairs (operator, operand) into the intersection of
// at most four requirements on key "k"; no pairs mean Exists.
func fromBytes(b []byte) *Requirement {
	r := New("k", corev1.NodeSelectorOpExists)
	for i := 0; i+1 < len(b) && i < 8; i += 2 {
		op := propOps[int(b[i])%len(propOps)]
		var operand string
		switch op {
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
			operand = propBounds[int(b[i+1])%len(propBounds)]
		default:
			operand = propValues[int(b[i+1])%len(propValues)]
		}
		r = r.Intersection(New("k", op, operand))
	}
	return r
}
