// Package requirements is the node-label requirement algebra Karpenter
// schedules with: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte over label
// keys, intersection, compatibility between a pod and a NodePool (well-known
// versus custom keys) and minValues (karpenter: pkg/scheduling/requirement.go,
// requirements.go; karpenter-spec §2).
//
// CONTRACT SKETCH: the exported API below is what the solver codes against.
// Bodies marked "not implemented" are being written.
package requirements

import (
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Requirement is the set of values allowed for one label key: a finite set
// (In), the complement of a finite set (NotIn, Exists), optionally bounded by
// integer bounds (Gt/Lt/Gte/Lte), plus an optional minValues. The zero value
// is not valid; build one with New.
type Requirement struct {
	Key string
	// MinValues is the minimum number of distinct values the launch
	// candidates must provide for Key; nil when unset.
	MinValues *int

	complement bool
	values     map[string]struct{}
	gte, lte   *int64
}

// New builds a requirement from a node selector operator (including
// Karpenter's Gte and Lte). Gt N becomes Gte N+1 and Lt N becomes Lte N-1.
// Values that an operator does not use are ignored; a non-integer bound
// yields a requirement no value satisfies. It never panics.
func New(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	panic("requirements: not implemented")
}

// Operator is the canonical operator of r: In, NotIn, Exists or
// DoesNotExist (bounded requirements report Exists with bounds).
func (r *Requirement) Operator() corev1.NodeSelectorOperator { panic("not implemented") }

// Has reports whether value satisfies r.
func (r *Requirement) Has(value string) bool { panic("not implemented") }

// Values returns the finite value set sorted (empty for complements).
func (r *Requirement) Values() []string { panic("not implemented") }

// Len is the number of allowed values, or math.MaxInt for complement sets.
func (r *Requirement) Len() int { panic("not implemented") }

// Any returns one allowed value deterministically (the smallest for finite
// sets), or "" when none exists or the set is a complement without bounds.
func (r *Requirement) Any() string { panic("not implemented") }

// Intersection returns the requirement allowing exactly the values both
// allow; MinValues is the larger of the two.
func (r *Requirement) Intersection(o *Requirement) *Requirement { panic("not implemented") }

// String renders r as Karpenter prints it, e.g. `karpenter.sh/capacity-type In [on-demand spot]`.
func (r *Requirement) String() string { panic("not implemented") }

// Requirements is a conjunction of requirements keyed by label key.
type Requirements map[string]*Requirement

// NewRequirements intersects rs into one Requirements.
func NewRequirements(rs ...*Requirement) Requirements { panic("not implemented") }

// FromNodeSelector converts NodePool/NodeClaim requirements (with minValues).
// Deprecated label keys are normalized (v1.NormalizedLabels).
func FromNodeSelector(reqs []v1.NodeSelectorRequirementWithMinValues) Requirements {
	panic("not implemented")
}

// FromLabels turns labels into single-valued In requirements.
func FromLabels(labels map[string]string) Requirements { panic("not implemented") }

// ForPod returns a pod's strict node requirements: nodeSelector (as In), the
// first term of required node affinity, and, when respectPreferences, the
// heaviest preferred node-affinity term treated as required (karpenter-spec §2).
func ForPod(pod *corev1.Pod, respectPreferences bool) Requirements { panic("not implemented") }

// Add intersects rs into r in place.
func (r Requirements) Add(rs ...*Requirement) { panic("not implemented") }

// Get returns the requirement for key, or an Exists requirement when r does
// not constrain key.
func (r Requirements) Get(key string) *Requirement { panic("not implemented") }

// Keys returns the constrained keys sorted.
func (r Requirements) Keys() []string { panic("not implemented") }

// Intersects returns nil when, for every key both constrain, some value
// satisfies both (two NotIn/DoesNotExist sides always intersect); otherwise an
// error naming the key and both requirements.
func (r Requirements) Intersects(o Requirements) error { panic("not implemented") }

// Compatible is Karpenter's pod-to-NodePool check: every key o constrains
// that is not well-known (v1.WellKnownLabels) must be defined by r unless o's
// operator is NotIn or DoesNotExist (error `label "team" does not have known
// values`), and then r and o must intersect.
func (r Requirements) Compatible(o Requirements) error { panic("not implemented") }

// Labels returns the keys constrained to exactly one value, as node labels.
func (r Requirements) Labels() map[string]string { panic("not implemented") }

// NodeSelectorRequirements renders r back to API form, sorted by key;
// bounds are emitted as Gte/Lte.
func (r Requirements) NodeSelectorRequirements() []v1.NodeSelectorRequirementWithMinValues {
	panic("not implemented")
}

// Clone returns a deep copy.
func (r Requirements) Clone() Requirements { panic("not implemented") }
