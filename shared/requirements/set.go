package requirements

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Requirements is a conjunction of requirements keyed by label key.
type Requirements map[string]*Requirement

// NewRequirements intersects rs into one Requirements.
func NewRequirements(rs ...*Requirement) Requirements {
	r := make(Requirements, len(rs))
	r.Add(rs...)
	return r
}

// FromNodeSelector converts NodePool/NodeClaim requirements (with minValues).
// Deprecated label keys are normalized (v1.NormalizedLabels).
//
// Entries sharing a key are intersected (minValues is the largest). The
// result holds its own copy of each MinValues.
func FromNodeSelector(reqs []v1.NodeSelectorRequirementWithMinValues) Requirements {
	r := make(Requirements, len(reqs))
	for _, req := range reqs {
		n := New(req.Key, req.Operator, req.Values...)
		if req.MinValues != nil {
			mv := *req.MinValues
			n.MinValues = &mv
		}
		r.Add(n)
	}
	return r
}

// addCore intersects core node selector requirements (a pod's
// node-affinity term) into r.
func (r Requirements) addCore(reqs []corev1.NodeSelectorRequirement) {
	for _, req := range reqs {
		r.Add(New(req.Key, req.Operator, req.Values...))
	}
}

// FromLabels turns labels into single-valued In requirements.
// Deprecated keys are normalized, as in New.
func FromLabels(labels map[string]string) Requirements {
	r := make(Requirements, len(labels))
	for k, v := range labels {
		r.Add(New(k, corev1.NodeSelectorOpIn, v))
	}
	return r
}

// FromInstanceLabels builds an instance type's requirements the way
// Karpenter's instance types carry them: each label as a single-valued In,
// and each key of defined that labels lacks as DoesNotExist (aws:
// pkg/providers/instancetype/types.go computeRequirements; karpenter-spec §2).
// defined is typically v1.WellKnownLabels minus the keys the caller handles
// elsewhere (zone and capacity type come from offerings). In hot loops
// prefer AdmitsLabels or MatchesLabels: r.Intersects(FromInstanceLabels(l,
// d)) == nil exactly when r.AdmitsLabels(l, d), without building anything.
func FromInstanceLabels(labels map[string]string, defined map[string]bool) Requirements {
	r := FromLabels(labels)
	for k, ok := range defined {
		if _, has := r[k]; ok && !has {
			r[k] = New(k, corev1.NodeSelectorOpDoesNotExist)
		}
	}
	return r
}

// Add intersects rs into r in place.
func (r Requirements) Add(rs ...*Requirement) {
	for _, req := range rs {
		if existing, ok := r[req.Key]; ok {
			req = existing.Intersection(req)
		}
		r[req.Key] = req
	}
}

// Get returns the requirement for key, or an Exists requirement when r does
// not constrain key.
func (r Requirements) Get(key string) *Requirement {
	if req, ok := r[key]; ok {
		return req
	}
	return &Requirement{Key: key, complement: true}
}

// Has reports whether r constrains key (karpenter: Requirements.Has).
func (r Requirements) Has(key string) bool {
	_, ok := r[key]
	return ok
}

// Keys returns the constrained keys sorted.
func (r Requirements) Keys() []string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pairOK is Karpenter's per-key intersection test: some value satisfies
// both, or both are NotIn/DoesNotExist (a node without the label satisfies
// both).
func pairOK(existing, incoming *Requirement) bool {
	return existing.intersects(incoming) || (existing.negative() && incoming.negative())
}

// Intersects returns nil when, for every key both constrain, some value
// satisfies both (two NotIn/DoesNotExist sides always intersect); otherwise an
// error naming the key and both requirements.
//
// The error is an *IncompatibleError listing every conflicting key in sorted
// order, r's requirement first (karpenter: Requirements.Intersects). Keys
// only one side constrains are unconstrained. It allocates only on failure.
func (r Requirements) Intersects(o Requirements) error {
	small, large := r, o
	if len(o) < len(r) {
		small, large = o, r
	}
	for key, a := range small {
		if b, ok := large[key]; ok && !pairOK(a, b) {
			return r.incompatible(o, false, false)
		}
	}
	return nil
}

// Compatible is Karpenter's pod-to-NodePool check: every key o constrains
// that is not well-known (v1.WellKnownLabels) must be defined by r unless o's
// operator is NotIn or DoesNotExist (error `label "team" does not have known
// values`), and then r and o must intersect.
//
// The error is an *IncompatibleError carrying every undefined key (with a
// typo hint when a well-known or defined key is close) and every conflict,
// in sorted order (karpenter: Requirements.Compatible with
// AllowUndefinedWellKnownLabels). It allocates only on failure.
func (r Requirements) Compatible(o Requirements) error {
	return r.compatible(o, true)
}

// StrictlyCompatible is Compatible without the well-known exemption: every
// key o constrains with In, Exists or bounds must be defined by r, well-known
// or not. It is Karpenter's check of a pod against an existing or in-flight
// node, whose labels are all it has (karpenter: ExistingNode.CanAdd calls
// Compatible without AllowUndefinedWellKnownLabels). Errors are as for
// Compatible. It allocates only on failure.
func (r Requirements) StrictlyCompatible(o Requirements) error {
	return r.compatible(o, false)
}

func (r Requirements) compatible(o Requirements, allowWellKnown bool) error {
	for key, b := range o {
		a, ok := r[key]
		if !ok {
			if (!allowWellKnown || !v1.WellKnownLabels[key]) && !b.negative() {
				return r.incompatible(o, true, allowWellKnown)
			}
			continue
		}
		if !pairOK(a, b) {
			return r.incompatible(o, true, allowWellKnown)
		}
	}
	return nil
}

// incompatible builds the full, sorted error once a check has failed.
// checkUndefined reports keys r lacks; allowWellKnown exempts well-known
// ones.
func (r Requirements) incompatible(o Requirements, checkUndefined, allowWellKnown bool) error {
	e := &IncompatibleError{}
	for _, key := range o.Keys() {
		b := o[key]
		a, ok := r[key]
		switch {
		case ok && !pairOK(a, b):
			e.Conflicts = append(e.Conflicts, Conflict{Key: key, Existing: a, Incoming: b})
		case !ok && checkUndefined && (!allowWellKnown || !v1.WellKnownLabels[key]) && !b.negative():
			e.Undefined = append(e.Undefined, key)
		}
	}
	if len(e.Undefined) > 0 {
		e.known = r.Keys()
	}
	return e
}

// AdmitsLabels reports whether an instance type with labels satisfies r,
// treating each key of defined that labels lacks as DoesNotExist and any
// other absent key as unconstrained. It is Intersects against
// FromInstanceLabels(labels, defined), without allocating: the hot-loop
// form for filtering instance types (karpenter-spec §2, e.g.
// `instance-gpu-count Exists` excludes non-GPU types).
func (r Requirements) AdmitsLabels(labels map[string]string, defined map[string]bool) bool {
	for key, req := range r {
		if v, ok := labels[key]; ok {
			if !req.Has(v) {
				return false
			}
			continue
		}
		if defined[key] && !req.negative() {
			return false
		}
	}
	return true
}

// MatchesLabels is AdmitsLabels returning nil or an *IncompatibleError whose
// conflicts show the instance type's side as `key In [value]` or
// `key DoesNotExist`. It allocates only on failure.
func (r Requirements) MatchesLabels(labels map[string]string, defined map[string]bool) error {
	if r.AdmitsLabels(labels, defined) {
		return nil
	}
	e := &IncompatibleError{}
	for _, key := range r.Keys() {
		req := r[key]
		if v, ok := labels[key]; ok {
			if !req.Has(v) {
				e.Conflicts = append(e.Conflicts, Conflict{Key: key, Existing: req, Incoming: &Requirement{Key: key, values: []string{v}}})
			}
			continue
		}
		if defined[key] && !req.negative() {
			e.Conflicts = append(e.Conflicts, Conflict{Key: key, Existing: req, Incoming: &Requirement{Key: key}})
		}
	}
	return e
}

// Labels returns the keys constrained to exactly one value, as node labels.
func (r Requirements) Labels() map[string]string {
	labels := map[string]string{}
	for k, req := range r {
		if !req.complement && len(req.values) == 1 {
			labels[k] = req.values[0]
		}
	}
	return labels
}

// NodeSelectorRequirements renders r back to API form, sorted by key;
// bounds are emitted as Gte/Lte.
//
// A bounded complement renders as NotIn (when it excludes values), Gte and
// Lte entries for the same key, in that order; MinValues sits on the key's
// first entry. FromNodeSelector of the result equals r.
func (r Requirements) NodeSelectorRequirements() []v1.NodeSelectorRequirementWithMinValues {
	out := make([]v1.NodeSelectorRequirementWithMinValues, 0, len(r))
	for _, k := range r.Keys() {
		out = r[k].nodeSelectorRequirements(out)
	}
	return out
}

// Clone returns a deep copy.
func (r Requirements) Clone() Requirements {
	if r == nil {
		return nil
	}
	c := make(Requirements, len(r))
	for k, req := range r {
		c[k] = req.clone()
	}
	return c
}

// Canonical renders r completely and deterministically, for use as a map
// key when interning requirement sets: two Requirements have the same
// Canonical exactly when they hold the same keys, each allowing the same
// values with the same MinValues. Unlike String it never abbreviates value
// lists; its format is otherwise unspecified.
func (r Requirements) Canonical() string {
	var b strings.Builder
	for _, k := range r.Keys() {
		req := r[k]
		b.WriteString(k)
		if req.complement {
			b.WriteString("\x00!")
		} else {
			b.WriteString("\x00=")
		}
		if req.hasGte {
			b.WriteString("\x00>")
			b.WriteString(strconv.FormatInt(req.gte, 10))
		}
		if req.hasLte {
			b.WriteString("\x00<")
			b.WriteString(strconv.FormatInt(req.lte, 10))
		}
		if req.MinValues != nil {
			b.WriteString("\x00#")
			b.WriteString(strconv.Itoa(*req.MinValues))
		}
		for _, v := range req.values {
			b.WriteString("\x00:")
			b.WriteString(v)
		}
		b.WriteByte(1)
	}
	return b.String()
}

// String renders every requirement in key order, separated by ", ".
func (r Requirements) String() string {
	var b strings.Builder
	for i, k := range r.Keys() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r[k].String())
	}
	return b.String()
}
