package scheduling

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// reqTable interns requirement sets so that the solver compares small
// integers instead of maps in its hot loops: pods of one class, and claims
// narrowed the same way, share one id. Merges and narrowings are memoized.
type reqTable struct {
	sets   []requirements.Requirements
	byKey  map[string]int32
	merged map[uint64]mergeResult
	narrow map[narrowKey]int32
}

type mergeResult struct {
	id  int32 // -1 when incompatible
	err error
}

type narrowKey struct {
	id  int32
	key string
	dom string
}

func newReqTable() *reqTable {
	return &reqTable{byKey: map[string]int32{}, merged: map[uint64]mergeResult{}, narrow: map[narrowKey]int32{}}
}

// intern returns the id of r, registering it (r must not be mutated after).
func (t *reqTable) intern(r requirements.Requirements) int32 {
	k := canonical(r)
	if id, ok := t.byKey[k]; ok {
		return id
	}
	id := int32(len(t.sets))
	t.sets = append(t.sets, r)
	t.byKey[k] = id
	return id
}

func (t *reqTable) get(id int32) requirements.Requirements { return t.sets[id] }

// merge intersects the incoming set (a pod's) into the receiving set (a
// NodePool's or NodeClaim's) after Karpenter's Compatible check: custom keys
// the incoming side requires must be defined by the receiver, and shared
// keys must intersect (karpenter: NodeClaim.CanAdd). The result is memoized.
func (t *reqTable) merge(receiver, incoming int32) mergeResult {
	mk := uint64(uint32(receiver))<<32 | uint64(uint32(incoming))
	if m, ok := t.merged[mk]; ok {
		return m
	}
	r, o := t.sets[receiver], t.sets[incoming]
	var m mergeResult
	if err := r.Compatible(o); err != nil {
		m = mergeResult{id: -1, err: err}
	} else if len(o) == 0 {
		m = mergeResult{id: receiver}
	} else {
		c := r.Clone()
		for _, k := range o.Keys() {
			c.Add(o[k])
		}
		m = mergeResult{id: t.intern(c)}
	}
	t.merged[mk] = m
	return m
}

// narrowTo intersects key In values into set id (values sorted).
func (t *reqTable) narrowTo(id int32, key string, values []string) int32 {
	nk := narrowKey{id: id, key: key, dom: strings.Join(values, "\x00")}
	if n, ok := t.narrow[nk]; ok {
		return n
	}
	r := t.sets[id]
	var n int32
	if cur, ok := r[key]; ok && cur.Operator() == corev1.NodeSelectorOpIn && sameStrings(cur.Values(), values) {
		n = id
	} else {
		c := r.Clone()
		c.Add(requirements.New(key, corev1.NodeSelectorOpIn, values...))
		n = t.intern(c)
	}
	t.narrow[nk] = n
	return n
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// canonical renders r deterministically and completely (unlike String,
// which abbreviates long value lists).
func canonical(r requirements.Requirements) string {
	var b strings.Builder
	for _, nsr := range r.NodeSelectorRequirements() {
		writeNSR(&b, nsr)
	}
	return b.String()
}

func writeNSR(b *strings.Builder, nsr v1.NodeSelectorRequirementWithMinValues) {
	b.WriteString(nsr.Key)
	b.WriteByte(0)
	b.WriteString(string(nsr.Operator))
	for _, v := range nsr.Values {
		b.WriteByte(0)
		b.WriteString(v)
	}
	if nsr.MinValues != nil {
		b.WriteString("\x00#")
		b.WriteString(strconv.Itoa(*nsr.MinValues))
	}
	b.WriteByte(1)
}

// negative reports whether req is NotIn or DoesNotExist: a node without the
// label satisfies it.
func negative(req *requirements.Requirement) bool {
	op := req.Operator()
	return op == corev1.NodeSelectorOpNotIn || op == corev1.NodeSelectorOpDoesNotExist
}

// strictMismatch checks pod requirements against an existing node's
// requirements the way the kubelet's node affinity does: a key the node does
// not define satisfies only NotIn and DoesNotExist, and a defined key must
// share a value (karpenter: ExistingNode.CanAdd uses Compatible without
// AllowUndefinedWellKnownLabels). It returns the first failing pod
// requirement and the node's side (nil when undefined), or nils.
func strictMismatch(node, pod requirements.Requirements) (podReq, nodeReq *requirements.Requirement) {
	for _, k := range pod.Keys() {
		pr := pod[k]
		nr, ok := node[k]
		if !ok {
			if !negative(pr) {
				return pr, nil
			}
			continue
		}
		if negative(pr) && negative(nr) {
			continue
		}
		if !intersectsReq(nr, pr) {
			return pr, nr
		}
	}
	return nil, nil
}

// intersectsReq reports whether some value satisfies both requirements.
func intersectsReq(a, b *requirements.Requirement) bool {
	return requirements.NewRequirements(a).Intersects(requirements.NewRequirements(b)) == nil
}
