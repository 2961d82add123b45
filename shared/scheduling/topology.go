package scheduling

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// This file is the topology model: spread constraints, pod affinity and
// anti-affinity (karpenter: pkg/controllers/provisioning/scheduling/
// topology.go, topologygroup.go; karpenter-spec §2). A group is one distinct
// term; it counts the pods its selector matches per domain of its key.
// Hostname domains are hosts (existing nodes and claims); their counts live
// on the host.

type gkind uint8

const (
	gSpread gkind = iota
	gAffinity
	gAnti
)

func (k gkind) String() string {
	switch k {
	case gSpread:
		return "topology spread"
	case gAffinity:
		return "pod affinity"
	default:
		return "pod anti-affinity"
	}
}

// topoKey is a topology key and its domain dictionary. Domain indices
// follow sorted domain names once the universe is built.
type topoKey struct {
	idx      int
	name     string
	hostname bool
	values   []string
	dict     map[string]int32
	// providers lists, per domain, the taint sets of the pools and nodes
	// that provide it (indices into solver.taintSets), for
	// nodeTaintsPolicy Honor.
	providers [][]int32
}

func (k *topoKey) domain(v string) int32 {
	if d, ok := k.dict[v]; ok {
		return d
	}
	return -1
}

// group is one topology term shared by every pod that owns an identical one.
type group struct {
	id    int32
	kind  gkind
	key   *topoKey
	nsAll bool
	ns    map[string]bool
	sel   labels.Selector
	// Spread only.
	maxSkew       int32
	minDomains    int32
	honorAffinity bool
	honorTaints   bool
	filter        []requirements.Requirements // nil: every node matches
	tols          []corev1.Toleration
	// counts and owners are per domain for non-hostname keys; owners counts
	// the pods owning an anti-affinity term (inverse anti-affinity).
	counts []int32
	owners []int32
	// total counts every recorded matching pod, any domain.
	total int32
	desc  string
}

// selects reports whether the group's selector and namespaces match a pod.
func (g *group) selects(ns string, lbls labels.Set) bool {
	if !g.nsAll && !g.ns[ns] {
		return false
	}
	return g.sel.Matches(lbls)
}

// owned is a group term a pod class owns.
type owned struct {
	g    *group
	self bool
	// required is set for required pod (anti-)affinity terms; only those
	// block other pods (inverse anti-affinity), as in kube-scheduler.
	// Preferred terms bind only their owner, until relaxed.
	required bool
	// eligible are the domains that count for the spread minimum:
	// universe domains the owner's node requirements allow
	// (nodeAffinityPolicy Honor) provided by a node or pool whose taints it
	// tolerates (nodeTaintsPolicy Honor).
	eligible []int32
}

// hcount is a host's count for a hostname group.
type hcount struct {
	g             int32
	count, owners int32
}

// host is an existing node or a new claim: a hostname domain.
type host struct {
	id    int32
	name  string
	node  *enode
	claim *nclaim
	hc    []hcount
}

func (h *host) counts(g int32) (count, owners int32) {
	for i := range h.hc {
		if h.hc[i].g == g {
			return h.hc[i].count, h.hc[i].owners
		}
	}
	return 0, 0
}

func (h *host) inc(g int32, dc, do int32) {
	for i := range h.hc {
		if h.hc[i].g == g {
			h.hc[i].count += dc
			h.hc[i].owners += do
			return
		}
	}
	h.hc = append(h.hc, hcount{g: g, count: dc, owners: do})
}

// recEntry is one count a placement added, so that a move can undo it.
type recEntry struct {
	g     int32
	d     int32 // domain, or -1 for the hostname domain of the host
	owner bool
}

// keyFor returns the topology key, registering it.
func (s *solver) keyFor(name string) *topoKey {
	if k, ok := s.keyByName[name]; ok {
		return k
	}
	k := &topoKey{idx: len(s.keys), name: name, hostname: name == v1.LabelHostname, dict: map[string]int32{}}
	s.keys = append(s.keys, k)
	s.keyByName[name] = k
	return k
}

// groupSpec is what identifies a group.
type groupSpec struct {
	kind          gkind
	key           string
	nsAll         bool
	ns            []string
	sel           labels.Selector
	maxSkew       int32
	minDomains    int32
	honorAffinity bool
	honorTaints   bool
	filter        []requirements.Requirements
	tols          []corev1.Toleration
}

func (gs *groupSpec) identity() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%s|%v|%s|%s|%d|%d|%v|%v|", gs.kind, gs.key, gs.nsAll, strings.Join(gs.ns, ","), gs.sel.String(), gs.maxSkew, gs.minDomains, gs.honorAffinity, gs.honorTaints)
	for _, f := range gs.filter {
		b.WriteString(canonical(f))
		b.WriteByte('|')
	}
	for _, t := range gs.tols {
		fmt.Fprintf(&b, "%s/%s/%s/%s;", t.Key, t.Operator, t.Value, t.Effect)
	}
	return b.String()
}

func (s *solver) groupFor(gs *groupSpec) *group {
	id := gs.identity()
	if g, ok := s.groupByID[id]; ok {
		return g
	}
	g := &group{
		id: int32(len(s.groups)), kind: gs.kind, key: s.keyFor(gs.key), nsAll: gs.nsAll,
		sel: gs.sel, maxSkew: gs.maxSkew, minDomains: gs.minDomains, honorAffinity: gs.honorAffinity,
		honorTaints: gs.honorTaints, filter: gs.filter, tols: gs.tols,
	}
	if !gs.nsAll {
		g.ns = map[string]bool{}
		for _, n := range gs.ns {
			g.ns[n] = true
		}
	}
	sel := gs.sel.String()
	if sel == "" {
		sel = "every pod"
	}
	ns := "namespaces " + strings.Join(gs.ns, ",")
	if gs.nsAll {
		ns = "all namespaces"
	}
	switch gs.kind {
	case gSpread:
		g.desc = fmt.Sprintf("topology spread on %s (maxSkew %d, selector %s)", gs.key, gs.maxSkew, sel)
	default:
		g.desc = fmt.Sprintf("%s on %s (selector %s, %s)", gs.kind, gs.key, sel, ns)
	}
	s.groups = append(s.groups, g)
	s.groupByID[id] = g
	return g
}

// selectorFor converts a label selector, merging matchLabelKeys (the
// owner's values, In) and mismatchLabelKeys (NotIn) as Kubernetes does. A
// nil selector matches nothing.
func selectorFor(ls *metav1.LabelSelector, podLabels map[string]string, match, mismatch []string) labels.Selector {
	if ls == nil {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	for _, k := range match {
		if v, ok := podLabels[k]; ok {
			if r, err := labels.NewRequirement(k, selection.In, []string{v}); err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	for _, k := range mismatch {
		if v, ok := podLabels[k]; ok {
			if r, err := labels.NewRequirement(k, selection.NotIn, []string{v}); err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	return sel
}

// termNamespaces resolves an affinity term's namespaces: the owner's own
// namespace when neither namespaces nor namespaceSelector is set; else the
// listed ones plus those matching the selector (an empty selector matches
// every namespace; others are matched against Input.Namespaces).
func (s *solver) termNamespaces(term *corev1.PodAffinityTerm, podNS string) (all bool, ns []string) {
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		return false, []string{podNS}
	}
	set := map[string]bool{}
	for _, n := range term.Namespaces {
		set[n] = true
	}
	if term.NamespaceSelector != nil {
		if len(term.NamespaceSelector.MatchLabels) == 0 && len(term.NamespaceSelector.MatchExpressions) == 0 {
			return true, nil
		}
		if sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector); err == nil {
			for i := range s.in.Namespaces {
				n := &s.in.Namespaces[i]
				if sel.Matches(labels.Set(n.Labels)) {
					set[n.Name] = true
				}
			}
		}
	}
	return false, sortedKeys(set)
}

// nodeFilter is the topology node filter of a spread owner: its
// nodeSelector with each required node-affinity term as alternatives
// (karpenter: TopologyNodeFilter). nil means every node.
func nodeFilter(pod *corev1.Pod) []requirements.Requirements {
	var terms []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(pod.Spec.NodeSelector) == 0 && len(terms) == 0 {
		return nil
	}
	base := requirements.FromLabels(pod.Spec.NodeSelector)
	if len(terms) == 0 {
		return []requirements.Requirements{base}
	}
	out := make([]requirements.Requirements, 0, len(terms))
	for _, t := range terms {
		r := base.Clone()
		for _, e := range t.MatchExpressions {
			r.Add(requirements.New(e.Key, e.Operator, e.Values...))
		}
		out = append(out, r)
	}
	return out
}

// ownedGroups returns the group terms a (relaxed) pod owns: its spread
// constraints, and its required and preferred pod affinity and
// anti-affinity terms (preferred terms are hard until relaxed).
func (s *solver) ownedGroups(pod *corev1.Pod) []owned {
	var out []owned
	for i := range pod.Spec.TopologySpreadConstraints {
		tsc := &pod.Spec.TopologySpreadConstraints[i]
		gs := &groupSpec{
			kind: gSpread, key: tsc.TopologyKey, ns: []string{pod.Namespace},
			sel:     selectorFor(tsc.LabelSelector, pod.Labels, tsc.MatchLabelKeys, nil),
			maxSkew: tsc.MaxSkew, honorAffinity: true,
		}
		if tsc.MinDomains != nil {
			gs.minDomains = *tsc.MinDomains
		}
		if tsc.NodeAffinityPolicy != nil && *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore {
			gs.honorAffinity = false
		}
		if tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
			gs.honorTaints = true
			gs.tols = pod.Spec.Tolerations
		}
		if gs.honorAffinity {
			gs.filter = nodeFilter(pod)
		}
		out = append(out, owned{g: s.groupFor(gs)})
	}
	add := func(kind gkind, term *corev1.PodAffinityTerm, required bool) {
		all, ns := s.termNamespaces(term, pod.Namespace)
		gs := &groupSpec{kind: kind, key: term.TopologyKey, nsAll: all, ns: ns,
			sel: selectorFor(term.LabelSelector, pod.Labels, term.MatchLabelKeys, term.MismatchLabelKeys)}
		out = append(out, owned{g: s.groupFor(gs), required: required})
	}
	if a := pod.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				add(gAffinity, &pa.RequiredDuringSchedulingIgnoredDuringExecution[i], true)
			}
			for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
				add(gAffinity, &pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm, false)
			}
		}
		if pa := a.PodAntiAffinity; pa != nil {
			for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				add(gAnti, &pa.RequiredDuringSchedulingIgnoredDuringExecution[i], true)
			}
			for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
				add(gAnti, &pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm, false)
			}
		}
	}
	// Deduplicate identical terms; evaluate affinity and anti-affinity
	// before spread so that spread picks within the domains they allow.
	seen := map[int32]int{}
	uniq := out[:0]
	for _, o := range out {
		if i, ok := seen[o.g.id]; ok {
			uniq[i].required = uniq[i].required || o.required
			continue
		}
		seen[o.g.id] = len(uniq)
		uniq = append(uniq, o)
	}
	sort.SliceStable(uniq, func(i, j int) bool { return uniq[i].g.kind > uniq[j].g.kind })
	return uniq
}

// registerDomain adds value to key's universe with a provider taint set.
func (s *solver) registerDomain(k *topoKey, value string, taintSet int32) {
	if k.hostname {
		return
	}
	if s.universe[k.idx] == nil {
		s.universe[k.idx] = map[string][]int32{}
	}
	s.universe[k.idx][value] = append(s.universe[k.idx][value], taintSet)
}

// finishUniverse assigns domain indices in sorted order and sizes counts.
func (s *solver) finishUniverse() {
	for _, k := range s.keys {
		if k.hostname {
			continue
		}
		vals := sortedKeys(s.universe[k.idx])
		k.values = vals
		k.providers = make([][]int32, len(vals))
		for i, v := range vals {
			k.dict[v] = int32(i)
			k.providers[i] = s.universe[k.idx][v]
		}
	}
	for _, g := range s.groups {
		if !g.key.hostname {
			g.counts = make([]int32, len(g.key.values))
			g.owners = make([]int32, len(g.key.values))
		}
	}
}

// eligibleDomains computes an owned spread term's eligible domains. With
// nodeAffinityPolicy Honor (the default) a domain counts only when the
// pod's requirements allow its value and some provider of it is compatible
// with the pod's nodeSelector and required node affinity: a NodePool whose
// requirements intersect the pod's, or an existing node that satisfies
// them (Kubernetes' documented meaning of Honor; Karpenter v1.14.1 counts
// every NodePool's domains). podReqID is podReqs' reqTable id.
func (s *solver) eligibleDomains(o *owned, podReqID int32, podReqs requirements.Requirements, tols []corev1.Toleration) []int32 {
	k := o.g.key
	if k.hostname {
		return nil
	}
	var compat map[int32]bool // provider -> compatible, computed once
	compatible := func(ts int32) bool {
		if v, ok := compat[ts]; ok {
			return v
		}
		var ok bool
		if pr := s.provPool[ts]; pr >= 0 {
			ok = s.reqs.merge(pr, podReqID).id >= 0
		} else {
			ok = nodeAdmits(s.provNode[ts], podReqs)
		}
		if compat == nil {
			compat = map[int32]bool{}
		}
		compat[ts] = ok
		return ok
	}
	var out []int32
	for d, v := range k.values {
		if o.g.honorAffinity {
			if r, ok := podReqs[k.name]; ok && !r.Has(v) {
				continue
			}
			if !slices.ContainsFunc(k.providers[d], compatible) {
				continue
			}
		}
		if o.g.honorTaints {
			ok := false
			for _, ts := range k.providers[d] {
				if untolerated(s.taintSets[ts], tols) == nil {
					ok = true
					break
				}
			}
			if !ok {
				continue
			}
		}
		out = append(out, int32(d))
	}
	return out
}

// claimDomains returns the domains of key a claim of pool p with
// requirement set id may land in: the pool's domains the set allows.
func (s *solver) claimDomains(p *pool, id int32, k *topoKey) []int32 {
	ck := domKey{pool: int32(p.idx), req: id, key: int32(k.idx)}
	if d, ok := s.domCache[ck]; ok {
		return d
	}
	r := s.reqs.get(id)
	req, constrained := r[k.name]
	var out []int32
	for _, v := range s.domainsOf(p, k.name) {
		if constrained && !req.Has(v) {
			continue
		}
		if d := k.domain(v); d >= 0 {
			out = append(out, d)
		}
	}
	s.domCache[ck] = out
	return out
}

type domKey struct{ pool, req, key int32 }

// narrow is the domain restriction topology puts on one key of a claim.
type narrow struct {
	key  *topoKey
	doms []int32
}

// topoFail describes why topology rejected a placement.
type topoFail struct {
	g       *group
	inverse bool
}

// fail returns the solver's scratch failure (valid until the next check),
// so that rejections in hot loops do not allocate.
func (s *solver) fail(g *group, inverse bool) *topoFail {
	s.failBuf = topoFail{g: g, inverse: inverse}
	return &s.failBuf
}

func (f *topoFail) String() string {
	if f.inverse {
		return fmt.Sprintf("%s of already placed pods forbids every domain it could use", f.g.desc)
	}
	switch f.g.kind {
	case gSpread:
		return fmt.Sprintf("%s cannot be satisfied", f.g.desc)
	case gAffinity:
		return fmt.Sprintf("%s has no domain with a matching pod", f.g.desc)
	default:
		return fmt.Sprintf("%s: every domain already has a matching pod", f.g.desc)
	}
}

// topoView abstracts the host a placement is evaluated against: an
// existing node (fixed domains), a claim, or a claim about to be created
// (h nil).
type topoView struct {
	h     *host
	node  *enode
	pool  *pool
	reqID int32
}

func (s *solver) viewDomains(v *topoView, k *topoKey, narrowed []narrow) []int32 {
	for i := range narrowed {
		if narrowed[i].key == k {
			return narrowed[i].doms
		}
	}
	if v.node != nil {
		return v.node.doms[k.idx]
	}
	if c := v.h.claimOrNil(); c != nil && c.reqID == v.reqID {
		if c.domsReq != c.reqID || c.doms == nil {
			c.doms = make([][]int32, len(s.keys))
			c.domsOK = make([]bool, len(s.keys))
			c.domsReq = c.reqID
		}
		if !c.domsOK[k.idx] {
			c.doms[k.idx] = s.claimDomains(v.pool, v.reqID, k)
			c.domsOK[k.idx] = true
		}
		return c.doms[k.idx]
	}
	return s.claimDomains(v.pool, v.reqID, k)
}

func (h *host) claimOrNil() *nclaim {
	if h == nil {
		return nil
	}
	return h.claim
}

func (s *solver) hostCounts(v *topoView, g int32) (int32, int32) {
	if v.h == nil {
		return 0, 0
	}
	return v.h.counts(g)
}

// appendOwnedOptions appends to s.domArena the domains of doms a host may
// take for the pod's owned affinity or anti-affinity term o (not hostname,
// not spread): for affinity, the domains where a selected pod runs, or
// when none runs in a domain the pod allows and the term selects the pod
// itself, the first domain it allows; for anti-affinity, one free domain.
func (s *solver) appendOwnedOptions(o *owned, podReqs requirements.Requirements, doms []int32) {
	g := o.g
	if g.kind != gAffinity {
		// Pin the host to one free domain: an anti-affinity owner is
		// recorded in every domain its host may land in, so leaving
		// the claim flexible would block those domains for every pod
		// the term selects (e.g. self anti-affinity on zone would
		// place one pod instead of one per zone). Karpenter keeps the
		// claim flexible here; pinning admits strictly more plans.
		for _, d := range doms {
			if g.counts[d] == 0 {
				s.domArena = append(s.domArena, d)
				break
			}
		}
		return
	}
	any := false
	for d, c := range g.counts {
		if c > 0 && domainAllowed(podReqs, g.key, int32(d)) {
			any = true
			break
		}
	}
	if any {
		for _, d := range doms {
			if g.counts[d] > 0 {
				s.domArena = append(s.domArena, d)
			}
		}
	} else if o.self {
		for _, d := range doms {
			if domainAllowed(podReqs, g.key, d) {
				s.domArena = append(s.domArena, d)
				break
			}
		}
	}
}

// checkTopology evaluates a pod's owned terms and the inverse
// anti-affinity of placed pods against a host. It returns the domain
// restrictions a claim must take (appended to buf), or the failing term.
func (s *solver) checkTopology(e *effClass, v *topoView, buf []narrow) ([]narrow, *topoFail) {
	narrowed := buf[:0]
	set := func(k *topoKey, doms []int32) {
		for i := range narrowed {
			if narrowed[i].key == k {
				narrowed[i].doms = doms
				return
			}
		}
		narrowed = append(narrowed, narrow{key: k, doms: doms})
	}
	podReqs := s.reqs.get(e.reqID)
	s.domArena = s.domArena[:0]
	// take returns the domains appended to the arena since start as a
	// capacity-limited slice, so later appends never overwrite it.
	take := func(start int) []int32 {
		return s.domArena[start:len(s.domArena):len(s.domArena)]
	}
	for i := range e.owned {
		o := &e.owned[i]
		g := o.g
		if g.kind == gSpread {
			continue
		}
		if g.key.hostname {
			c, _ := s.hostCounts(v, g.id)
			if g.kind == gAffinity {
				if c == 0 && (g.total != 0 || !o.self) {
					return narrowed, s.fail(g, false)
				}
			} else if c > 0 {
				return narrowed, s.fail(g, false)
			}
			continue
		}
		doms := s.viewDomains(v, g.key, narrowed)
		if len(doms) == 0 && g.kind == gAnti {
			continue // a host without the key shares no domain with anyone
		}
		start := len(s.domArena)
		s.appendOwnedOptions(o, podReqs, doms)
		opts := take(start)
		if len(opts) == 0 {
			return narrowed, s.fail(g, false)
		}
		if len(opts) != len(doms) {
			set(g.key, opts)
		}
	}
	for _, g := range e.cls.inverse {
		if !s.anyOwners(g) {
			continue
		}
		if g.key.hostname {
			if _, ow := s.hostCounts(v, g.id); ow > 0 {
				return narrowed, s.fail(g, true)
			}
			continue
		}
		doms := s.viewDomains(v, g.key, narrowed)
		if len(doms) == 0 {
			continue
		}
		start := len(s.domArena)
		for _, d := range doms {
			if g.owners[d] == 0 {
				s.domArena = append(s.domArena, d)
			}
		}
		opts := take(start)
		if len(opts) == 0 {
			return narrowed, s.fail(g, true)
		}
		if len(opts) != len(doms) {
			set(g.key, opts)
		}
	}
	for i := range e.owned {
		o := &e.owned[i]
		g := o.g
		if g.kind != gSpread {
			continue
		}
		self := int32(0)
		if o.self {
			self = 1
		}
		if g.key.hostname {
			c, _ := s.hostCounts(v, g.id)
			if c+self > g.maxSkew {
				return narrowed, s.fail(g, false)
			}
			continue
		}
		doms := s.viewDomains(v, g.key, narrowed)
		minCount := s.spreadMin(o)
		best, bestCount := int32(-1), int32(0)
		for _, d := range doms {
			c := g.counts[d] + self
			if c-minCount <= g.maxSkew && (best < 0 || c < bestCount) {
				best, bestCount = d, c
			}
		}
		if best < 0 {
			return narrowed, s.fail(g, false)
		}
		if len(doms) != 1 {
			start := len(s.domArena)
			s.domArena = append(s.domArena, best)
			set(g.key, take(start))
		}
	}
	return narrowed, nil
}

// anyOwners reports whether an anti-affinity group has placed owners.
func (s *solver) anyOwners(g *group) bool {
	return s.ownerTotal[g.id] > 0
}

func domainAllowed(podReqs requirements.Requirements, k *topoKey, d int32) bool {
	r, ok := podReqs[k.name]
	return !ok || r.Has(k.values[d])
}

// spreadMin is the global minimum a spread owner compares against: the
// smallest count among its eligible domains, or 0 when fewer eligible
// domains than minDomains exist; hostname spread always uses 0 (a new node
// is always possible).
func (s *solver) spreadMin(o *owned) int32 {
	g := o.g
	if g.key.hostname || len(o.eligible) == 0 {
		return 0
	}
	if g.minDomains > 0 && int32(len(o.eligible)) < g.minDomains {
		return 0
	}
	m := g.counts[o.eligible[0]]
	for _, d := range o.eligible[1:] {
		if g.counts[d] < m {
			m = g.counts[d]
		}
	}
	return m
}

// spreadCounts reports whether a placed pod counts for spread group g on
// host view v: the owner's node filter and, with nodeTaintsPolicy Honor,
// the host's taints (karpenter: TopologyGroup.Counts).
func (s *solver) spreadCounts(g *group, v *topoView) bool {
	if g.honorTaints {
		taints := v.pool.taintsOrNil()
		if v.node != nil {
			taints = v.node.taints
		}
		if untolerated(taints, g.tols) != nil {
			return false
		}
	}
	if g.filter == nil {
		return true
	}
	for _, alt := range g.filter {
		if v.node != nil {
			if p, _ := strictMismatch(v.node.reqs, alt); p == nil {
				return true
			}
		} else if s.reqs.get(v.reqID).Intersects(alt) == nil {
			return true
		}
	}
	return false
}

func (p *pool) taintsOrNil() []corev1.Taint {
	if p == nil {
		return nil
	}
	return p.taints
}

// plan lists the counts placing a pod on host view v adds: every group
// that counts it and, for the anti-affinity terms it owns, the owners.
// Spread and affinity count only a single known domain; anti-affinity
// counts every domain the host may land in (karpenter: Topology.Record).
func (s *solver) plan(cls *class, e *effClass, v *topoView, out []recEntry) []recEntry {
	for _, g := range cls.selectedBy {
		if g.kind == gSpread && !s.spreadCounts(g, v) {
			continue
		}
		if g.key.hostname {
			out = append(out, recEntry{g: g.id, d: -1})
			continue
		}
		doms := s.viewDomains(v, g.key, nil)
		if g.kind == gAnti {
			for _, d := range doms {
				out = append(out, recEntry{g: g.id, d: d})
			}
			continue
		}
		if len(doms) == 1 {
			out = append(out, recEntry{g: g.id, d: doms[0]})
		}
	}
	if e != nil {
		for i := range e.owned {
			g := e.owned[i].g
			if g.kind != gAnti || !e.owned[i].required {
				continue
			}
			if g.key.hostname {
				out = append(out, recEntry{g: g.id, d: -1, owner: true})
				continue
			}
			for _, d := range s.viewDomains(v, g.key, nil) {
				out = append(out, recEntry{g: g.id, d: d, owner: true})
			}
		}
	}
	return out
}

// record applies plan and returns the entries, for undo.
func (s *solver) record(cls *class, e *effClass, v *topoView, out []recEntry) []recEntry {
	out = s.plan(cls, e, v, out)
	s.apply(v.h, out, 1)
	return out
}

// unrecord undoes record's entries for a pod on host h.
func (s *solver) unrecord(h *host, rec []recEntry) { s.apply(h, rec, -1) }

// apply adds sign times the entries; totals move once per distinct group
// and role.
func (s *solver) apply(h *host, rec []recEntry, sign int32) {
	for i, r := range rec {
		g := s.groups[r.g]
		switch {
		case r.d < 0:
			if r.owner {
				h.inc(r.g, 0, sign)
			} else {
				h.inc(r.g, sign, 0)
			}
		case r.owner:
			g.owners[r.d] += sign
		default:
			g.counts[r.d] += sign
		}
		first := true
		for _, q := range rec[:i] {
			if q.g == r.g && q.owner == r.owner {
				first = false
				break
			}
		}
		if first {
			if r.owner {
				s.ownerTotal[r.g] += sign
			} else {
				g.total += sign
			}
		}
	}
}

// domainValues renders domain indices as values.
func domainValues(k *topoKey, doms []int32) []string {
	out := make([]string, len(doms))
	for i, d := range doms {
		out[i] = k.values[d]
	}
	sort.Strings(out)
	return out
}

// labelClassKey identifies a pod's namespace and labels for selector caching.
func labelClassKey(ns string, lbls map[string]string) string {
	var b strings.Builder
	b.WriteString(ns)
	for _, k := range sortedKeys(lbls) {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(lbls[k])
	}
	return b.String()
}

// selectedBy returns the groups that count a pod with this namespace and
// labels, cached per label class.
func (s *solver) selectedBy(ns string, lbls map[string]string) []*group {
	key := labelClassKey(ns, lbls)
	if gs, ok := s.selCache[key]; ok {
		return gs
	}
	set := labels.Set(lbls)
	var out []*group
	for _, g := range s.groups {
		if g.selects(ns, set) {
			out = append(out, g)
		}
	}
	s.selCache[key] = out
	return out
}
