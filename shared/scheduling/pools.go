package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

// pool is a NodePool prepared for one solve.
type pool struct {
	idx       int
	np        *v1.NodePool
	name      string
	className string
	weight    int32
	// labels are the template labels plus karpenter.sh/nodepool and the node
	// class label (karpenter: NodeClaimTemplate).
	labels map[string]string
	reqID  int32
	taints []corev1.Taint
	// skip is why the pool cannot launch anything ("" when usable).
	skip string
	// noTypes is set when skip is that the pool's requirements filter out
	// every instance type with an available offering.
	noTypes bool
	// types are the instance types the pool's requirements admit that have
	// an available offering the requirements allow, in input order.
	types []*ptype
	// hasPreferNoSchedule enables relaxation step 6.
	hasPreferNoSchedule bool
	hasMinValues        bool
	// limits: limited[s] says slot s is capped at limit[s]; nodesLimit < 0
	// means no cap on the node count.
	limited    [maxResources]bool
	anyLimit   bool
	limit      vec
	nodesLimit int64
	// usage is the summed capacity of the pool's existing nodes and of the
	// claims created in this solve (pessimistic: the largest candidate).
	usage vec
	nodes int64
	// daemons lists the DaemonSets that fit the pool (taints, requirements).
	daemons []*daemon
	// byCPU and byMemory index the pool's claims by free capacity.
	byCPU, byMemory claimIndex
	// lists caches candidate lists by requirement-set id.
	lists map[int32]*typeList
	// universe caches the topology domains the pool can provide, per key.
	universe map[string][]string
}

// ptype is one instance type as seen through one pool: allocatable net of
// the daemonset overhead of the DaemonSets that would run on it.
type ptype struct {
	it       *catalog.InstanceType
	name     string
	capacity vec
	// alloc is allocatable minus the daemonset overhead (may be negative).
	alloc vec
	// ds is the daemonset overhead (requests, plus one pod per DaemonSet).
	ds     vec
	ports  []hostPort
	offers []catalog.Offering
	// exotic is launch.Exotic of the type, computed once.
	exotic bool
	// reserved is set when offers has a reserved offering.
	reserved bool
}

// daemon is a DaemonSet reduced to what overhead needs.
type daemon struct {
	name  string
	pod   *corev1.Pod
	req   vec
	ports []hostPort
	// terms are the requirement sets of its strict node requirements, one
	// per required node-affinity term (nodeSelector included in each).
	terms []requirements.Requirements
}

// typeList is a pool's candidate instance types for one requirement set,
// sorted by price (cheapest available compatible offering), then name.
type typeList struct {
	types  []*ptype
	prices []float64
	// maxCap and maxAlloc are the element-wise largest capacity and net
	// allocatable: a need above maxAlloc fits no type of the list (nor of
	// any narrower list).
	maxCap, maxAlloc vec
	// minValues is true when the requirement set carries minValues.
	minValues bool
	// resvIDs are the capacity reservations of the types' allowed reserved
	// offerings, sorted; resv, when any type is priced by a reserved
	// offering, holds per type the reservations of its cheapest allowed
	// offerings when those are reserved (reservationsAt).
	resvIDs []string
	resv    [][]string
}

// poolOrder sorts pools by weight desc, then name desc (karpenter:
// pkg/utils/nodepool OrderByWeight).
func poolOrder(pools []*pool) {
	sort.SliceStable(pools, func(i, j int) bool {
		if pools[i].weight != pools[j].weight {
			return pools[i].weight > pools[j].weight
		}
		return pools[i].name > pools[j].name
	})
}

func conditionFalse(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t && conds[i].Status == metav1.ConditionFalse {
			return &conds[i]
		}
	}
	return nil
}

// buildPools prepares every NodePool: ordering, requirements, taints,
// instance types, daemonset overhead and limits.
func (s *solver) buildPools() error {
	classes := map[string]*v1.EC2NodeClass{}
	for i := range s.in.NodeClasses {
		classes[s.in.NodeClasses[i].Name] = &s.in.NodeClasses[i]
	}
	seen := map[string]bool{}
	for i := range s.in.NodePools {
		np := &s.in.NodePools[i]
		if np.Name == "" {
			return fmt.Errorf("nodepool %d: metadata.name is empty", i)
		}
		if seen[np.Name] {
			return fmt.Errorf("nodepool %s: duplicate name", np.Name)
		}
		seen[np.Name] = true
		p := &pool{np: np, name: np.Name, nodesLimit: -1, lists: map[int32]*typeList{}, universe: map[string][]string{},
			byCPU: claimIndex{slot: resCPU}, byMemory: claimIndex{slot: resMemory}}
		if np.Spec.Weight != nil {
			p.weight = *np.Spec.Weight
		}
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			p.className = ref.Name
		}
		p.labels = map[string]string{}
		for k, v := range np.Spec.Template.ObjectMeta.Labels {
			p.labels[k] = v
		}
		p.labels[v1.LabelNodePool] = np.Name
		if p.className != "" {
			p.labels[v1.LabelEC2NodeClass] = p.className
		}
		reqs := requirements.FromNodeSelector(np.Spec.Template.Spec.Requirements)
		for _, k := range sortedKeys(p.labels) {
			reqs.Add(requirements.New(k, corev1.NodeSelectorOpIn, p.labels[k]))
		}
		for _, r := range reqs {
			if r.MinValues != nil {
				p.hasMinValues = true
			}
		}
		p.reqID = s.reqs.intern(reqs)
		p.taints = np.Spec.Template.Spec.Taints
		for _, t := range p.taints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule {
				p.hasPreferNoSchedule = true
			}
		}
		switch {
		case np.DeletionTimestamp != nil:
			p.skip = "is being deleted"
		case np.Spec.Replicas != nil:
			p.skip = "is static (spec.replicas is set); static pools do not provision for pending pods"
		case np.Spec.Template.Spec.NodeClassRef == nil:
			p.skip = "has no spec.template.spec.nodeClassRef"
		case conditionFalse(np.Status.Conditions, "Ready") != nil:
			c := conditionFalse(np.Status.Conditions, "Ready")
			p.skip = fmt.Sprintf("is not ready (Ready=False, %s: %s)", c.Reason, c.Message)
		}
		if p.skip == "" {
			if nc, ok := classes[p.className]; ok && nc.DeletionTimestamp != nil {
				p.skip = fmt.Sprintf("uses EC2NodeClass %q, which is being deleted", p.className)
			} else if ok && conditionFalse(nc.Status.Conditions, "Ready") != nil {
				c := conditionFalse(nc.Status.Conditions, "Ready")
				p.skip = fmt.Sprintf("uses EC2NodeClass %q, which is not ready (Ready=False, %s: %s)", p.className, c.Reason, c.Message)
			} else if _, ok := s.in.InstanceTypes[p.className]; !ok {
				p.skip = fmt.Sprintf("uses EC2NodeClass %q, which has no resolved instance types", p.className)
			}
		}
		if err := s.buildLimits(p); err != nil {
			return err
		}
		s.pools = append(s.pools, p)
	}
	poolOrder(s.pools)
	for i, p := range s.pools {
		p.idx = i
	}
	for _, p := range s.pools {
		if p.skip != "" {
			continue
		}
		p.daemons = s.poolDaemons(p)
		s.buildPoolTypes(p)
		if len(p.types) == 0 {
			p.skip = "has no compatible instance type: " + s.diagnoseNoTypes(p)
			p.noTypes = true
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (s *solver) buildLimits(p *pool) error {
	for name, q := range p.np.Spec.Limits {
		if name == "nodes" {
			p.nodesLimit = q.Value()
			p.anyLimit = true
			continue
		}
		slot, ok := s.res.slot[name]
		if !ok {
			return fmt.Errorf("nodepool %s: spec.limits.%s: resource not registered", p.name, name)
		}
		p.limited[slot] = true
		p.limit[slot] = quantity(slot, q)
		p.anyLimit = true
	}
	return nil
}

// offerAllowed reports whether offering o satisfies the zone, capacity-type
// and capacity-reservation requirements of r (launch.OfferFilter).
func offerAllowed(r requirements.Requirements, o *catalog.Offering) bool {
	f := launch.NewOfferFilter(r)
	return f.Allows(o)
}

// typeAdmits reports whether r admits the instance type: its labels, and
// at least one available offering r allows. It returns the cheapest such
// offering's price.
func typeAdmits(r requirements.Requirements, t *ptype) (float64, bool) {
	if !launch.AdmitsType(r, t.it) {
		return 0, false
	}
	f := launch.NewOfferFilter(r)
	best, ok := 0.0, false
	for i := range t.offers {
		o := &t.offers[i]
		if !f.Allows(o) {
			continue
		}
		if !ok || o.Price < best {
			best, ok = o.Price, true
		}
	}
	return best, ok
}

// buildPoolTypes filters the node class's instance types by the pool's
// requirements and computes each one's daemonset overhead.
func (s *solver) buildPoolTypes(p *pool) {
	if types, ok := s.prep.poolTypes(s, p); ok {
		p.types = types
		return
	}
	r := s.reqs.get(p.reqID)
	n := s.res.n()
	for _, it := range s.in.InstanceTypes[p.className] {
		if it == nil {
			continue
		}
		t := &ptype{it: it, name: it.Name, exotic: launch.Exotic(it)}
		for _, o := range it.Offerings {
			if o.Available {
				t.offers = append(t.offers, o)
				t.reserved = t.reserved || o.CapacityType == v1.CapacityTypeReserved
			}
		}
		if _, ok := typeAdmits(r, t); !ok {
			continue
		}
		// In the launch model's layout, so that a claim whose requirements
		// allow every offering shares them (claimCandidates).
		launch.Arrange(t.offers)
		t.capacity, t.alloc = s.typeVectors(it)
		for _, d := range p.daemons {
			if !daemonFitsType(d, t) {
				continue
			}
			t.ds.add(&d.req, n)
			t.ports = append(t.ports, d.ports...)
		}
		t.alloc.sub(&t.ds, n)
		p.types = append(p.types, t)
	}
}

// typeVectors returns an instance type's capacity and allocatable
// (capacity minus kube-reserved, system-reserved and the eviction threshold,
// floored at zero, as catalog.InstanceType.Allocatable computes it) as
// vectors, cached per type: pools sharing a node class share the work.
func (s *solver) typeVectors(it *catalog.InstanceType) (capacity, alloc vec) {
	if v, ok := s.typeVecs[it]; ok {
		return v[0], v[1]
	}
	n := s.res.n()
	capacity, _ = s.res.vector(it.Capacity)
	alloc = capacity
	for _, l := range []corev1.ResourceList{it.Overhead.KubeReserved, it.Overhead.SystemReserved, it.Overhead.EvictionThreshold} {
		for name, q := range l {
			if slot, ok := s.res.slot[name]; ok {
				if _, inCap := it.Capacity[name]; inCap {
					alloc[slot] -= quantity(slot, q)
				}
			}
		}
	}
	alloc.floorZero(n)
	s.typeVecs[it] = [2]vec{capacity, alloc}
	return capacity, alloc
}

// daemonFitsType reports whether a DaemonSet compatible with the pool also
// runs on instance type t: one of its requirement terms admits t's labels
// and some offering (karpenter: daemonset overhead per instance-type group).
func daemonFitsType(d *daemon, t *ptype) bool {
	for _, term := range d.terms {
		if !launch.AdmitsType(term, t.it) {
			continue
		}
		for i := range t.offers {
			if offerAllowed(term, &t.offers[i]) {
				return true
			}
		}
	}
	return false
}

// buildDaemons turns DaemonSets into synthetic daemon pods.
func (s *solver) buildDaemons(dss []appsv1.DaemonSet) error {
	for i := range dss {
		ds := &dss[i]
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
			Spec:       *ds.Spec.Template.Spec.DeepCopy(),
		}
		req, missing := s.res.podRequestVector(&pod.Spec)
		if len(missing) > 0 {
			return fmt.Errorf("daemonset %s/%s: resources %v not registered", ds.Namespace, ds.Name, missing)
		}
		req[resPods]++
		d := &daemon{name: ds.Namespace + "/" + ds.Name, pod: pod, req: req, ports: podHostPorts(&pod.Spec)}
		// Terms: the nodeSelector with each required node-affinity term in
		// turn (karpenter: isDaemonPodCompatible relaxes terms one by one).
		base := requirements.FromLabels(pod.Spec.NodeSelector)
		var terms []corev1.NodeSelectorTerm
		if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		}
		if len(terms) == 0 {
			d.terms = append(d.terms, base)
		}
		for _, term := range terms {
			r := base.Clone()
			for _, e := range term.MatchExpressions {
				r.Add(requirements.New(e.Key, e.Operator, e.Values...))
			}
			d.terms = append(d.terms, r)
		}
		s.daemons = append(s.daemons, d)
	}
	return nil
}

// preferNoScheduleToleration is the toleration relaxation adds, and that
// daemon pods get implicitly (karpenter: toleratePreferNoScheduleTaints).
var preferNoScheduleToleration = corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule}

// poolDaemons returns the DaemonSets that would run on the pool's nodes:
// they tolerate its taints (PreferNoSchedule implicitly) and one of their
// requirement terms is compatible with the pool's requirements plus the
// registered and initialized labels (karpenter: isDaemonPodCompatible).
func (s *solver) poolDaemons(p *pool) []*daemon {
	r := s.reqs.get(p.reqID).Clone()
	r.Add(requirements.New(v1.LabelRegistered, corev1.NodeSelectorOpIn, "true"))
	r.Add(requirements.New(v1.LabelInitialized, corev1.NodeSelectorOpIn, "true"))
	var out []*daemon
	for _, d := range s.daemons {
		tols := append(append([]corev1.Toleration{}, d.pod.Spec.Tolerations...), preferNoScheduleToleration)
		if untolerated(p.taints, tols) != nil {
			continue
		}
		var ok []requirements.Requirements
		for _, term := range d.terms {
			if r.Compatible(term) == nil {
				ok = append(ok, term)
			}
		}
		if len(ok) == 0 {
			continue
		}
		out = append(out, &daemon{name: d.name, pod: d.pod, req: d.req, ports: d.ports, terms: ok})
	}
	return out
}

// list returns the pool's candidate list for requirement set id.
func (s *solver) list(p *pool, id int32) *typeList {
	if tl, ok := p.lists[id]; ok {
		return tl
	}
	r := s.reqs.get(id)
	build := func() *typeList { return s.buildList(p, r) }
	var tl *typeList
	if s.prep != nil {
		tl = s.prep.list(s, p, r, build)
	} else {
		tl = build()
	}
	p.lists[id] = tl
	return tl
}

// buildList is the candidate list of p under r: its admitted types by
// price, then name.
func (s *solver) buildList(p *pool, r requirements.Requirements) *typeList {
	tl := &typeList{}
	type priced struct {
		t     *ptype
		price float64
	}
	var ps []priced
	for _, t := range p.types {
		if price, ok := typeAdmits(r, t); ok {
			ps = append(ps, priced{t, price})
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].price != ps[j].price {
			return ps[i].price < ps[j].price
		}
		return ps[i].t.name < ps[j].t.name
	})
	n := s.res.n()
	for i := 0; i < n; i++ {
		tl.maxAlloc[i] = math.MinInt64
	}
	var f *launch.OfferFilter
	for i, x := range ps {
		tl.maxAlloc.maxWith(&x.t.alloc, n)
		tl.types = append(tl.types, x.t)
		tl.prices = append(tl.prices, x.price)
		tl.maxCap.maxWith(&x.t.capacity, n)
		if !x.t.reserved {
			continue
		}
		if f == nil {
			nf := launch.NewOfferFilter(r)
			f = &nf
		}
		var pricing []string
		for j := range x.t.offers {
			o := &x.t.offers[j]
			if o.CapacityType != v1.CapacityTypeReserved || !f.Allows(o) {
				continue
			}
			tl.noteReservation(o.ReservationID)
			if o.Price == x.price {
				pricing = append(pricing, o.ReservationID)
			}
		}
		tl.pricedBy(i, pricing)
	}
	for _, req := range r {
		if req.MinValues != nil {
			tl.minValues = true
		}
	}
	return tl
}

// domainsOf returns the values of topology key the pool can provide, sorted:
// zones and capacity types from its types' available offerings, instance
// labels from its types, other keys from its labels and finite requirements
// (karpenter-spec §2: domains come from NodePool requirements intersected
// with instance-type requirements).
func (s *solver) domainsOf(p *pool, key string) []string {
	if d, ok := p.universe[key]; ok {
		return d
	}
	r := s.reqs.get(p.reqID)
	set := map[string]bool{}
	switch key {
	case v1.LabelTopologyZone, v1.LabelCapacityType:
		for _, t := range p.types {
			for i := range t.offers {
				o := &t.offers[i]
				if !offerAllowed(r, o) {
					continue
				}
				if key == v1.LabelTopologyZone {
					set[o.Zone] = true
				} else {
					set[o.CapacityType] = true
				}
			}
		}
	default:
		for _, t := range p.types {
			if v, ok := t.it.Labels[key]; ok {
				set[v] = true
			}
		}
		if req, ok := r[key]; len(set) == 0 && ok && req.Operator() == corev1.NodeSelectorOpIn {
			for _, v := range req.Values() {
				set[v] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		if req, ok := r[key]; !ok || req.Has(v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	p.universe[key] = out
	return out
}

// quoteList renders names for reasons.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// diagnoseNoTypes says why a pool's requirements admit no instance type:
// the requirement that alone excludes everything the others allow (with
// the values on offer for zone and capacity type), or all of them.
func (s *solver) diagnoseNoTypes(p *pool) string {
	types := s.in.InstanceTypes[p.className]
	r := s.reqs.get(p.reqID)
	admits := func(r requirements.Requirements) bool {
		for _, it := range types {
			if it == nil {
				continue
			}
			t := &ptype{it: it}
			for _, o := range it.Offerings {
				if o.Available {
					t.offers = append(t.offers, o)
				}
			}
			if _, ok := typeAdmits(r, t); ok {
				return true
			}
		}
		return false
	}
	for _, k := range r.Keys() {
		rest := r.Clone()
		delete(rest, k)
		if !admits(rest) {
			continue
		}
		if msg := emptyIntersection(r, k, poolWritten(p)); msg != "" {
			return msg
		}
		msg := fmt.Sprintf("requirement %q excludes every instance type of EC2NodeClass %q that its other requirements allow", r[k].String(), p.className)
		if k == v1.LabelTopologyZone || k == v1.LabelCapacityType {
			offered := map[string]bool{}
			for _, it := range types {
				for _, o := range it.Offerings {
					if o.Available {
						if k == v1.LabelTopologyZone {
							offered[o.Zone] = true
						} else {
							offered[o.CapacityType] = true
						}
					}
				}
			}
			msg += fmt.Sprintf(" (available offerings are in %s)", strings.Join(sortedKeys(offered), ", "))
		}
		return msg
	}
	return fmt.Sprintf("its requirements (%s) leave none of the %d instance types of EC2NodeClass %q with an available offering",
		r.String(), len(types), p.className)
}

// poolWritten returns the NodePool's requirements as written.
func poolWritten(p *pool) []corev1.NodeSelectorRequirement {
	if p.np == nil {
		return nil
	}
	out := make([]corev1.NodeSelectorRequirement, 0, len(p.np.Spec.Template.Spec.Requirements))
	for _, r := range p.np.Spec.Template.Spec.Requirements {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	return out
}

// writtenRequirement renders one requirement as the user wrote it, e.g.
// "karpenter.k8s.aws/instance-cpu Gt 3" or "team In [a b]".
func writtenRequirement(r corev1.NodeSelectorRequirement) string {
	switch r.Operator {
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		return r.Key + " " + string(r.Operator)
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		return fmt.Sprintf("%s %s [%s]", r.Key, r.Operator, strings.Join(r.Values, " "))
	default:
		return fmt.Sprintf("%s %s %s", r.Key, r.Operator, strings.Join(r.Values, " "))
	}
}

// emptyIntersection returns, when the requirements written for key (two or
// more, none DoesNotExist) admit no value together, e.g. "Gt 3" and "Lt 4"
// on karpenter.k8s.aws/instance-cpu, a reason quoting them as written;
// otherwise "". (The merged requirement of such a pair is an empty set,
// which reads as DoesNotExist; the user never wrote that.)
func emptyIntersection(r requirements.Requirements, key string, written []corev1.NodeSelectorRequirement) string {
	req, ok := r[key]
	if !ok || req.Operator() != corev1.NodeSelectorOpDoesNotExist {
		return ""
	}
	var mine []string
	for _, w := range written {
		if w.Key != key {
			continue
		}
		if w.Operator == corev1.NodeSelectorOpDoesNotExist {
			return ""
		}
		mine = append(mine, strconv.Quote(writtenRequirement(w)))
	}
	if len(mine) < 2 {
		return ""
	}
	return fmt.Sprintf("requirements %s allow no value together", strings.Join(mine, " and "))
}
