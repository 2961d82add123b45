package disruption

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/shared/requirements"
)

// amount is cpu (millicores), memory (bytes) and a pod count, the three
// resources the necessary-condition check of cannotConsolidate compares.
// A bound may be +Inf: nothing known limits it.
type amount [3]float64

var unbounded = amount{math.Inf(1), math.Inf(1), math.Inf(1)}

func (a *amount) add(b amount) {
	for i := range a {
		a[i] += b[i]
	}
}

// holds reports whether need fits in the room a in every dimension need
// uses.
func (a amount) holds(need amount) bool {
	for i := range need {
		if need[i] > 0 && need[i] > a[i] {
			return false
		}
	}
	return true
}

// roomOf is an upper bound of rl's cpu, memory and pods, in the units
// package scheduling converts them to; a resource rl lacks is unbounded.
func roomOf(rls ...corev1.ResourceList) amount {
	var out amount
	for i, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		found := false
		for _, rl := range rls {
			q, ok := rl[name]
			if !ok {
				continue
			}
			v := float64(q.Value())
			if i == 0 {
				v = float64(q.MilliValue())
			}
			if !found || v > out[i] {
				out[i], found = v, true
			}
		}
		if !found {
			out[i] = math.Inf(1)
		}
	}
	return out
}

// podFloor is a lower bound of the requests package scheduling counts for
// a pod: its containers' requests (a limit standing in for a missing
// request), plus one pod. ok is false when a quantity anywhere in the pod
// is negative: the solver's own total may then be lower still.
func podFloor(p *corev1.Pod) (need amount, ok bool) {
	need[2] = 1
	neg := func(rl corev1.ResourceList) bool {
		for _, q := range rl {
			if q.Sign() < 0 {
				return true
			}
		}
		return false
	}
	add := func(i int, q resource.Quantity) {
		if i == 0 {
			need[0] += float64(q.MilliValue())
		} else {
			need[1] += float64(q.Value())
		}
	}
	for _, c := range p.Spec.Containers {
		if neg(c.Resources.Requests) || neg(c.Resources.Limits) {
			return need, false
		}
		for i, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, found := c.Resources.Requests[name]; found {
				add(i, q)
			} else if q, found := c.Resources.Limits[name]; found {
				add(i, q)
			}
		}
	}
	for _, c := range p.Spec.InitContainers {
		if neg(c.Resources.Requests) || neg(c.Resources.Limits) {
			return need, false
		}
	}
	return need, !neg(p.Spec.Overhead)
}

// usedBy is a lower bound of what the active pods among pods take from
// a node for the solver; ok is false when one of them has a negative
// quantity.
func usedBy(pods []*corev1.Pod) (used amount, ok bool) {
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue // scheduling's activePod
		}
		need, ok := podFloor(p)
		if !ok {
			return used, false
		}
		used.add(need)
	}
	return used, true
}

// freeRoom is an upper bound of the room the solver sees on a node with
// the given allocatable lists and pods: allocatable (the larger of the
// lists) minus the pods' requests, never below zero in the sum the
// aggregate check takes.
func freeRoom(pods []*corev1.Pod, allocatable ...corev1.ResourceList) amount {
	used, ok := usedBy(pods)
	if !ok {
		return unbounded
	}
	room := roomOf(allocatable...)
	for i := range room {
		room[i] -= used[i]
	}
	return room
}

// launchOption is an instance type some NodePool could launch for a
// replacement: the cheapest available offering its requirements allow,
// and its capacity.
type launchOption struct {
	price    float64
	capacity amount
}

// bounds is what cannotConsolidate needs, computed once per evaluation.
type bounds struct {
	// free is each managed node's room (e.nodes order); unmanaged is the
	// room of the unmanaged nodes not being deleted.
	free      []amount
	unmanaged []amount
	// options are every pool's launch options by price; widest[i] is the
	// element-wise largest capacity of options[:i+1].
	options []launchOption
	widest  []amount
}

// bounds computes (once) the evaluation's bounds.
func (e *evaluation) bounds() *bounds {
	if e.bnd != nil {
		return e.bnd
	}
	b := &bounds{free: make([]amount, len(e.nodes))}
	for i, n := range e.nodes {
		lists := []corev1.ResourceList{n.claim.Status.Allocatable}
		if n.node != nil {
			lists = append(lists, n.node.Status.Allocatable)
		}
		b.free[i] = freeRoom(append(append([]*corev1.Pod(nil), n.pods...), n.nominated...), lists...)
	}
	for _, k := range e.unmanaged {
		if k.DeletionTimestamp == nil {
			b.unmanaged = append(b.unmanaged, freeRoom(e.hosted[k.Name], k.Status.Allocatable))
		}
	}
	for i := range e.poolList {
		np := &e.poolList[i]
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil {
			continue
		}
		reqs := requirements.FromNodeSelector(np.Spec.Template.Spec.Requirements)
		for _, it := range e.in.InstanceTypes[ref.Name] {
			if it == nil || !reqs.AdmitsLabels(it.Labels, nil) {
				continue
			}
			if price := launchPrice(it, reqs); !math.IsInf(price, 1) {
				b.options = append(b.options, launchOption{price: price, capacity: roomOf(it.Capacity)})
			}
		}
	}
	sort.SliceStable(b.options, func(i, j int) bool { return b.options[i].price < b.options[j].price })
	b.widest = make([]amount, len(b.options))
	var w amount
	for i, o := range b.options {
		for d := range w {
			w[d] = math.Max(w[d], o.capacity[d])
		}
		b.widest[i] = w
	}
	e.bnd = b
	return b
}

// cannotConsolidate reports that consolidating cands certainly fails, so
// that the simulation can be skipped; false means "simulate". It checks
// conditions every successful consolidate meets (karpenter-spec §6.4:
// the pods must fit on the other nodes plus at most one new NodeClaim
// strictly cheaper than the candidates), with every constraint but cpu,
// memory and pod count relaxed, so it is never wrong when it says yes:
//
//   - the candidates' reschedulable pods that fit on no remaining node
//     (each alone, in its free room) need a new NodeClaim: one instance
//     type some NodePool admits, with an available offering cheaper than
//     the candidates' summed price, must hold them all;
//   - all of their pods together must fit in the remaining nodes' free
//     room plus the largest such instance type.
//
// Only capacity-bound rejections are caught: the others (topology, PDBs,
// uninitialized targets, minValues) need the simulation.
func (e *evaluation) cannotConsolidate(cands []*node) bool {
	b := e.bounds()
	price := 0.0
	for _, n := range cands {
		price += n.price
	}
	leaving := make(map[*node]bool, len(cands))
	for _, n := range cands {
		leaving[n] = true
	}
	remaining := make([]amount, 0, len(b.free)+len(b.unmanaged))
	var total amount
	for i, n := range e.nodes {
		if leaving[n] || n.deleting {
			continue
		}
		remaining = append(remaining, b.free[i])
	}
	remaining = append(remaining, b.unmanaged...)
	for _, r := range remaining {
		for d := range total {
			total[d] += math.Max(r[d], 0)
		}
	}
	var all, homeless amount
	stranded := false
	for _, n := range cands {
		for _, p := range n.reschedulable {
			need, ok := podFloor(p)
			if !ok {
				need = amount{} // the solver rejects it; claim nothing
			}
			all.add(need)
			fits := false
			for _, r := range remaining {
				if r.holds(need) {
					fits = true
					break
				}
			}
			if !fits {
				homeless.add(need)
				stranded = true
			}
		}
	}
	// Options strictly cheaper than the candidates: a superset of those
	// filterByPrice keeps (worst-case launch price below price - epsilon).
	cheaper := sort.Search(len(b.options), func(i int) bool { return b.options[i].price >= price })
	if stranded {
		found := false
		for _, o := range b.options[:cheaper] {
			if o.capacity.holds(homeless) {
				found = true
				break
			}
		}
		if !found {
			return true
		}
	}
	if cheaper > 0 {
		total.add(b.widest[cheaper-1])
	}
	return !total.holds(all)
}

// cannotConsolidateKnown is cannotConsolidate once a simulation has
// succeeded in this evaluation: skipping simulations before that could
// hide an input the solver rejects (Evaluate's error).
func (e *evaluation) cannotConsolidateKnown(cands []*node) bool {
	return e.solves > 0 && !e.noBounds && e.cannotConsolidate(cands)
}
