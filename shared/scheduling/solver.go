package scheduling

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

// Policy values of Options (karpenter-spec §10.3).
const (
	PreferencePolicyRespect = "Respect"
	PreferencePolicyIgnore  = "Ignore"
	MinValuesPolicyStrict   = "Strict"
	// MinValuesPolicyBestEffort lowers an unreachable minValues to what the
	// candidates offer and annotates the claim.
	MinValuesPolicyBestEffort = "BestEffort"
	// DefaultMaxInstanceTypes is the launch cap on candidate instance types
	// per NodeClaim (aws: CreateFleet overrides, maxInstanceTypes = 60).
	DefaultMaxInstanceTypes = 60
)

// ErrInvalidInput wraps every input validation error Solve returns.
var ErrInvalidInput = errors.New("invalid scheduling input")

// solver holds one solve's state. Nothing in it outlives Solve.
type solver struct {
	in *Input

	ignorePrefs         bool
	bestEffort          bool
	maxTypes            int
	anyPreferNoSchedule bool

	res     *resourceIndex
	reqs    *reqTable
	pools   []*pool
	daemons []*daemon

	pods    []*podInfo
	classes []*class
	// vols indexes in.Volumes; built at the first pod with volumes.
	vols *volumeIndex

	keys       []*topoKey
	keyByName  map[string]*topoKey
	groups     []*group
	groupByID  map[string]*group
	ownerTotal []int32
	universe   []map[string][]int32
	taintSets  [][]corev1.Taint
	// provReqs is, per taint set, the requirements of the pool (its
	// reqTable id) or node that provides domains with it, for
	// nodeAffinityPolicy Honor: provPool >= 0 names a pool set, else
	// provNode holds the node's requirements.
	provPool []int32
	provNode []requirements.Requirements
	selCache map[string][]*group
	domCache map[domKey][]int32

	hosts    []*host
	nodes    []*enode
	nodeTree *nodeTree
	nodePods [][]*corev1.Pod
	claims   []*nclaim

	placements map[string]string
	narrowBuf  []narrow
	domArena   []int32
	narrow1    map[narrow1Key]int32
	failBuf    topoFail
	// memPerMilli is the pending pods' bytes of memory per millicore, the
	// exchange rate slackScore uses.
	memPerMilli float64
	// mergeBudget bounds the pod moves the improvement pass's merges try.
	mergeBudget int
	// epoch counts the improvement pass's successful moves; it starts at 1
	// so that a claim's zero failure marks never match it.
	epoch int
	// typeVecs caches instance types' capacity and allocatable vectors.
	typeVecs map[*catalog.InstanceType][2]vec
	// finals caches finalize.
	finals []final
	// allowed caches each type's allowed offerings per requirement set
	// (claimCandidates).
	allowed map[allowedKey]catalog.Offerings
	// reqCanon caches canonical(reqs.get(id)) for Prepared.allowedOffers.
	reqCanon map[int32]string
	candBuf  []launch.Candidate
	// offerBuf holds the launch plan expectedOffering builds.
	offerBuf []launch.Offering
	// strategy selects how pods are ordered and packed onto new claims.
	strategy strategy
	// byPods indexes every claim by pod count (first-fit strategies).
	byPods claimIndex
	// changes counts placements (on existing nodes or claims) during run.
	changes int
	// noFit remembers, per class level and request vector, the value of
	// changes when place last failed: with no placement since, the state
	// place searches is unchanged and the answer is the same.
	noFit map[noFitKey]int
	// searches counts full placement searches, typeScans the claims'
	// candidate-list scans (tests only read them).
	searches  int
	typeScans int
	// prep, when set, supplies the pools' instance types (Prepared.Solve);
	// with sameNodes, the nodes' measurements too (Prepared.sameNodes).
	prep      *Prepared
	sameNodes bool
	// rsv counts capacity reservations' instances over the round; nil
	// when no offering is reserved (reservations.go).
	rsv *reservations
}

// noFitKey identifies pods that place treats identically: same class level
// (constraints) and same requests.
type noFitKey struct {
	e   *effClass
	req vec
}

// strategy is a packing strategy. Every strategy obeys the same
// semantics; they differ only in pod order and in which allowed claim a pod
// joins.
type strategy uint8

const (
	// stratCost: existing capacity first in Karpenter's order, then pods
	// that need a host of their own, then the rest, each on the claim where
	// its marginal price is lowest; then the improvement pass.
	stratCost strategy = iota
	// stratFirstFit: Karpenter's order and claim choice (the claim with the
	// fewest pods that can take the pod), evaluating at most searchExamine
	// claims per pod.
	stratFirstFit
	// stratKarpenter: Karpenter's packing exactly, without improvement; the
	// baseline tests compare against.
	stratKarpenter
)

// Solve places pods onto existing capacity or new NodeClaims. It performs no
// I/O; everything it needs is in Input, and Result is safe to marshal to JSON.
// The error return is for invalid input or cancellation only.
//
// It solves twice, with nodewright's cost-driven packing and with
// Karpenter's first-fit packing, and returns the plan that places more
// pods, then the cheaper one, then the cost-driven one: so a plan never
// places fewer pods, nor costs more, than Karpenter's way of packing the
// same pods would.
func Solve(ctx context.Context, in Input) (Result, error) {
	best, err := solveWith(ctx, &in, stratCost)
	if err != nil {
		return Result{}, err
	}
	alt, err := solveWith(ctx, &in, stratFirstFit)
	if err != nil {
		return Result{}, err
	}
	bu, bp := best.outcome()
	au, ap := alt.outcome()
	if au < bu || (au == bu && ap < bp-priceEps) {
		best = alt
	}
	return best.result(), nil
}

// solveWith runs one strategy; the caller renders the result.
func solveWith(ctx context.Context, in *Input, st strategy) (*solver, error) {
	s, err := newSolver(in)
	if err != nil {
		return nil, err
	}
	s.strategy = st
	s.byPods.slot = byPodCount
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

func newSolver(in *Input) (*solver, error) {
	return newPreparedSolver(in, nil, false)
}

// newPreparedSolver is newSolver taking the pools' instance types from
// prep when it has them (prep may be nil), and with sameNodes (prep's
// sameNodes(in)) the resource slots and the nodes' measurements too.
func newPreparedSolver(in *Input, prep *Prepared, sameNodes bool) (*solver, error) {
	s := &solver{
		in: in, reqs: newReqTable(), res: newResourceIndex(), prep: prep, sameNodes: sameNodes,
		keyByName: map[string]*topoKey{}, groupByID: map[string]*group{},
		selCache: map[string][]*group{}, domCache: map[domKey][]int32{},
		placements: map[string]string{}, narrow1: map[narrow1Key]int32{},
		typeVecs: map[*catalog.InstanceType][2]vec{}, noFit: map[noFitKey]int{},
	}
	switch in.Options.PreferencePolicy {
	case "", PreferencePolicyRespect:
	case PreferencePolicyIgnore:
		s.ignorePrefs = true
	default:
		return nil, invalid("options.preferencePolicy %q: want Respect or Ignore", in.Options.PreferencePolicy)
	}
	switch in.Options.MinValuesPolicy {
	case "", MinValuesPolicyStrict:
	case MinValuesPolicyBestEffort:
		s.bestEffort = true
	default:
		return nil, invalid("options.minValuesPolicy %q: want Strict or BestEffort", in.Options.MinValuesPolicy)
	}
	s.maxTypes = in.Options.MaxInstanceTypes
	if s.maxTypes < 0 {
		return nil, invalid("options.maxInstanceTypes %d: must not be negative", s.maxTypes)
	}
	if s.maxTypes == 0 {
		s.maxTypes = DefaultMaxInstanceTypes
	}
	if sameNodes {
		for _, name := range prep.names {
			s.res.add(name)
		}
	} else if err := s.registerResources(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if err := s.buildDaemons(in.DaemonSets); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if err := s.buildPools(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	s.buildReservations()
	for _, p := range s.pools {
		if p.hasPreferNoSchedule && p.skip == "" {
			s.anyPreferNoSchedule = true
		}
	}
	if sameNodes {
		// Prepare validated these nodes: no node error can precede the
		// pods'. Without topology groups, only the nodes some pod fits in
		// are needed.
		if err := s.buildPods(); err != nil {
			return nil, err
		}
		if len(s.groups) == 0 {
			s.buildNodesFrom(prep)
		} else if err := s.buildNodes(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
	} else {
		if err := s.buildNodes(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
		if err := s.buildPods(); err != nil {
			return nil, err
		}
	}
	s.buildTopology()
	return s, nil
}

// registerResources assigns vector slots to every resource name in play,
// in sorted order so that slots are deterministic.
func (s *solver) registerResources() error {
	names := map[corev1.ResourceName]bool{}
	note := func(rl corev1.ResourceList) {
		for n := range rl {
			names[n] = true
		}
	}
	for _, types := range s.in.InstanceTypes {
		for _, it := range types {
			if it != nil {
				note(it.Capacity)
			}
		}
	}
	for i := range s.in.Nodes {
		en := &s.in.Nodes[i]
		if en.Node != nil {
			note(en.Node.Status.Allocatable)
		}
		if en.NodeClaim != nil {
			note(en.NodeClaim.Status.Allocatable)
		}
	}
	for i := range s.in.NodePools {
		for n := range s.in.NodePools[i].Spec.Limits {
			if n != "nodes" {
				names[n] = true
			}
		}
	}
	rl := corev1.ResourceList{}
	for n := range names {
		rl[n] = *zeroQuantity()
	}
	return s.res.addAll(rl)
}

// buildPods validates pods, groups them into classes and orders them.
func (s *solver) buildPods() error {
	byKey := map[string]*class{}
	invalidByClass := map[string]string{}
	seen := map[string]bool{}
	for i, p := range s.in.Pods {
		if p == nil {
			return invalid("pods[%d]: nil pod", i)
		}
		key := string(p.UID)
		if key == "" {
			key = p.Namespace + "/" + p.Name
		}
		if seen[key] {
			return invalid("pod %s/%s: uid %q appears twice", p.Namespace, p.Name, key)
		}
		seen[key] = true
		pi := &podInfo{idx: int32(i), pod: p, key: key}
		s.pods = append(s.pods, pi)
		if why := notPending(p); why != "" {
			pi.ignored = why
			continue
		}
		var volReqs []corev1.NodeSelectorRequirement
		if len(p.Spec.Volumes) > 0 {
			r, why := s.volumeIndex().volumeRequirements(p)
			if why != "" {
				pi.ignored = why
				continue
			}
			volReqs = r
		}
		ck := classKey(p)
		if len(volReqs) > 0 {
			ck += "\x00v\x00" + volumeKey(volReqs)
		}
		why, checked := invalidByClass[ck]
		if !checked {
			why = invalidForProvisioner(p)
			invalidByClass[ck] = why
		}
		if why != "" {
			pi.ignored = why
			continue
		}
		if neg := podNegative(&p.Spec); len(neg) > 0 {
			pi.ignored = fmt.Sprintf("invalid pod spec (the API server rejects it): negative quantity for %s", resourceNames(resourceStrings(neg)))
			continue
		}
		if over := podOverflow(&p.Spec); len(over) > 0 {
			// Too large to hold: never let it wrap around to zero or below.
			pi.ignored = fmt.Sprintf("requests %s too large for any instance type or node (the total overflows a 64-bit count)", resourceNames(resourceStrings(over)))
			continue
		}
		req, missing := s.res.podRequestVector(&p.Spec)
		if len(missing) > 0 {
			// A resource nothing provides: the pod fits nowhere.
			pi.ignored = fmt.Sprintf("requests %s, which no instance type or node provides", resourceNames(sortedUnique(resourceStrings(missing))))
			continue
		}
		req[resPods]++
		pi.req = req
		c, ok := byKey[ck]
		if !ok {
			c = &class{id: len(s.classes), rep: p, ports: podHostPorts(&p.Spec), vol: volReqs}
			byKey[ck] = c
			s.classes = append(s.classes, c)
		}
		pi.cls = c
	}
	for _, c := range s.classes {
		s.buildClass(c)
	}
	var cpu, mem float64
	for _, pi := range s.pods {
		if pi.cls != nil {
			pi.eff = pi.cls.levels[0]
			cpu += float64(pi.req[resCPU])
			mem += float64(pi.req[resMemory])
		}
	}
	s.mergeBudget = 16 * len(s.pods)
	s.epoch = 1
	s.memPerMilli = 4 << 20 // 4GiB per core when the pods request no cpu
	if cpu > 0 && mem > 0 {
		s.memPerMilli = mem / cpu
	}
	return nil
}

func resourceStrings(ns []corev1.ResourceName) []string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = string(n)
	}
	return s
}

func resourceNames(ns []string) string { return quoteList(ns) }

// buildTopology registers groups of existing pods' anti-affinity, the domain
// universe, class selections and existing pods' counts.
func (s *solver) buildTopology() {
	for _, pods := range s.nodePods {
		for _, p := range pods {
			if !activePod(p) || p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
				continue
			}
			for i := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				term := &p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
				all, ns := s.termNamespaces(term, p.Namespace)
				s.groupFor(&groupSpec{kind: gAnti, key: term.TopologyKey, nsAll: all, ns: ns,
					sel: selectorFor(term.LabelSelector, p.Labels, term.MatchLabelKeys, term.MismatchLabelKeys)})
			}
		}
	}
	s.universe = make([]map[string][]int32, len(s.keys))
	for _, p := range s.pools {
		if p.skip != "" {
			continue
		}
		ts := s.taintSet(p.taints)
		s.provPool, s.provNode = append(s.provPool, p.reqID), append(s.provNode, nil)
		for _, k := range s.keys {
			if k.hostname {
				continue
			}
			for _, v := range s.domainsOf(p, k.name) {
				s.registerDomain(k, v, ts)
			}
		}
	}
	s.registerNodeDomains()
	s.finishUniverse()
	s.ownerTotal = make([]int32, len(s.groups))
	for _, c := range s.classes {
		s.finishClass(c)
	}
	s.finishNodes()
}

// queueOrder sorts pods as Karpenter's queue does: cpu desc, memory desc,
// creation time asc, UID asc (karpenter: scheduling/queue.go); the pod key
// breaks remaining ties.
func (s *solver) queueOrder() []*podInfo {
	var q []*podInfo
	for _, pi := range s.pods {
		if pi.ignored == "" {
			q = append(q, pi)
		}
	}
	sort.SliceStable(q, func(i, j int) bool {
		a, b := q[i], q[j]
		if a.req[resCPU] != b.req[resCPU] {
			return a.req[resCPU] > b.req[resCPU]
		}
		if a.req[resMemory] != b.req[resMemory] {
			return a.req[resMemory] > b.req[resMemory]
		}
		ta, tb := a.pod.CreationTimestamp.Time, b.pod.CreationTimestamp.Time
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		if a.pod.UID != b.pod.UID {
			return a.pod.UID < b.pod.UID
		}
		return a.key < b.key
	})
	return q
}

// run is Karpenter's scheduling loop: pop a pod, place it (existing nodes,
// then this round's claims, then a new claim), and on failure relax one
// preference and push it back; stop when a full pass makes no progress
// (karpenter: scheduler.go Solve, queue.go).
func (s *solver) run(ctx context.Context) error {
	queue := s.queueOrder()
	if s.strategy == stratCost {
		queue = s.packingOrder(s.placeExisting(queue))
	}
	type mark struct{ gen, n int }
	last := make([]mark, len(s.pods))
	gen := 1
	steps := 0
	for len(queue) > 0 {
		if steps++; steps%512 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("solve: %w", err)
			}
		}
		pi := queue[0]
		if m := last[pi.idx]; m.gen == gen && m.n == len(queue) {
			break
		}
		queue = queue[1:]
		if s.place(pi) {
			continue
		}
		relaxed := false
		if next := pi.eff.level + 1; next < len(pi.cls.levels) {
			pi.eff = pi.cls.levels[next]
			relaxed = true
		}
		queue = append(queue, pi)
		if relaxed {
			gen++
		} else {
			last[pi.idx] = mark{gen: gen, n: len(queue)}
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("solve: %w", err)
	}
	if s.strategy == stratCost {
		s.improve(ctx)
	}
	return nil
}

// placeExisting is the first phase: every pod, in Karpenter's queue order,
// tries the existing nodes and in-flight claims (first fit); the pods left
// over are returned in the same order. Doing this before any new claim is
// opened gives existing capacity exactly the pods Karpenter's interleaved
// loop would offer it first, and lets the second phase order the rest for
// packing.
func (s *solver) placeExisting(order []*podInfo) []*podInfo {
	if len(s.nodes) == 0 {
		return order
	}
	rest := order[:0:0]
	for _, pi := range order {
		if !s.firstFitExisting(pi) {
			rest = append(rest, pi)
		}
	}
	return rest
}

// firstFitExisting places pi on the first existing node, in order, that
// takes it; the node tree skips nodes without room.
func (s *solver) firstFitExisting(pi *podInfo) bool {
	if len(s.nodes) == 0 {
		return false
	}
	for i := s.nodeTree.next(0, &pi.req); i >= 0; i = s.nodeTree.next(i+1, &pi.req) {
		if s.tryNode(pi, s.nodes[i]) {
			return true
		}
	}
	return false
}

// packingOrder orders the pods that need new capacity: pods that must each
// have a host of their own (a self-selecting hostname anti-affinity term)
// first, so that the claims they force exist before other pods look for
// room, then the rest; Karpenter's order is kept within each part.
func (s *solver) packingOrder(pods []*podInfo) []*podInfo {
	sort.SliceStable(pods, func(i, j int) bool {
		return pods[i].eff.isolated() && !pods[j].eff.isolated()
	})
	return pods
}

// place tries existing capacity first (initialized nodes, then by name;
// first fit wins), then this round's claims and a new claim by cost.
//
// A failure is cached per class level and requests until the next
// placement: placement is the only change to the state place reads (node
// room, claims, pool usage, topology counts), so pods rejected for the same
// reason (e.g. a NodePool limit that binds) do not each search again.
func (s *solver) place(pi *podInfo) bool {
	k := noFitKey{e: pi.eff, req: pi.req}
	if at, ok := s.noFit[k]; ok && at == s.changes {
		return false
	}
	s.searches++
	if s.firstFitExisting(pi) || s.placeNew(pi) {
		return true
	}
	s.noFit[k] = s.changes
	return false
}

// tryNode places pi on an existing node when every check passes.
func (s *solver) tryNode(pi *podInfo, node *enode) bool {
	n := s.res.n()
	if !leq(&pi.req, &node.avail, n) {
		return false
	}
	e := pi.eff
	if untolerated(node.taints, e.tols) != nil {
		return false
	}
	if len(pi.cls.ports) > 0 && portConflict(node.ports, pi.cls.ports) != nil {
		return false
	}
	if !nodeAdmits(node.reqs, s.reqs.get(e.reqID)) {
		return false
	}
	var uses []volumeUse
	if node.vols != nil && len(pi.pod.Spec.Volumes) > 0 {
		uses = s.volumeIndex().volumeUses(pi.pod)
		if d, _ := node.vols.exceeds(uses); d != "" {
			return false
		}
	}
	view := &topoView{h: node.h, node: node}
	var fail *topoFail
	s.narrowBuf, fail = s.checkTopology(e, view, s.narrowBuf)
	if fail != nil {
		return false
	}
	node.avail.sub(&pi.req, n)
	s.nodeTree.update(node.idx, &node.avail)
	node.ports = append(node.ports, pi.cls.ports...)
	if len(uses) > 0 {
		node.vols.add(uses)
	}
	s.changes++
	pi.host = node.h
	pi.rec = s.record(pi.cls, e, view, nil)
	return true
}

// nodeAdmits is strictMismatch without allocation for the common case of
// label-only node requirements.
func nodeAdmits(node, pod requirements.Requirements) bool {
	for k, pr := range pod {
		nr, ok := node[k]
		if !ok {
			if !negative(pr) {
				return false
			}
			continue
		}
		if nr.Operator() == corev1.NodeSelectorOpIn && nr.Len() == 1 {
			if !pr.Has(nr.Any()) {
				return false
			}
			continue
		}
		if negative(pr) && negative(nr) {
			continue
		}
		if !intersectsReq(nr, pr) {
			return false
		}
	}
	return true
}

// poolFit returns whether class level e can use pool p at all: taints and
// requirements (cached).
func (s *solver) poolFit(e *effClass, p *pool) *poolFit {
	pf := &e.pools[p.idx]
	if pf.done {
		return pf
	}
	pf.done = true
	pf.reqID = -1
	if p.skip != "" {
		pf.reason = p.skip
		return pf
	}
	if t := untolerated(p.taints, e.tols); t != nil {
		pf.reason = fmt.Sprintf("taint %s not tolerated", taintString(t))
		return pf
	}
	m := s.reqs.merge(p.reqID, e.reqID)
	if m.id < 0 {
		pf.reason = poolConflictReason(p, m.err)
		return pf
	}
	if len(s.list(p, m.id).types) == 0 {
		pf.reason = s.diagnosePodTypes(p, e)
		return pf
	}
	pf.reqID = m.id
	return pf
}

// poolConflictReason renders a NodePool/pod requirement conflict; a
// conflict on a key the NodePool sets only through its template labels is
// described as that label (team=web), not as a requirement the user never
// wrote.
func poolConflictReason(p *pool, err error) string {
	msg := err.Error()
	var ie *requirements.IncompatibleError
	if errors.As(err, &ie) && p.np != nil {
		written := map[string]bool{}
		for _, r := range p.np.Spec.Template.Spec.Requirements {
			written[r.Key] = true
		}
		for _, c := range ie.Conflicts {
			v, ok := p.np.Spec.Template.ObjectMeta.Labels[c.Key]
			if !ok || written[c.Key] || c.Existing == nil || c.Incoming == nil {
				continue
			}
			old := "requirement " + strconv.Quote(c.Existing.String()) + " conflicts with " + strconv.Quote(c.Incoming.String())
			msg = replaceAll(msg, old, "template label "+c.Key+"="+v+" conflicts with pod's "+strconv.Quote(c.Incoming.String()))
		}
	}
	return replaceAll(msg, "\" conflicts with \"", "\" conflicts with pod's \"")
}

// diagnosePodTypes says why no instance type of pool p satisfies both the
// pool's and class level e's requirements: a zone no available offering of
// the pool's EC2NodeClass has, an instance type absent from that class's
// catalog, or (otherwise) the pod's requirements in general.
func (s *solver) diagnosePodTypes(p *pool, e *effClass) string {
	podReqs := s.reqs.get(e.reqID)
	written := podWritten(e.pod)
	for _, k := range podReqs.Keys() {
		if msg := emptyIntersection(podReqs, k, written); msg != "" {
			return "the pod's " + msg
		}
	}
	types := s.in.InstanceTypes[p.className]
	if zr, ok := podReqs[v1.LabelTopologyZone]; ok {
		offered := map[string]bool{}
		for _, it := range types {
			if it == nil {
				continue
			}
			for _, o := range it.Offerings {
				if o.Available {
					offered[o.Zone] = true
				}
			}
		}
		found := false
		for z := range offered {
			if zr.Has(z) {
				found = true
				break
			}
		}
		if !found {
			what := "zone requirement " + strconv.Quote(zr.String()) + " matches no zone that is"
			if zr.Operator() == corev1.NodeSelectorOpIn {
				if vs := zr.Values(); len(vs) == 1 {
					what = "zone " + vs[0] + " is"
				} else {
					what = "zones " + strings.Join(vs, ", ") + " are"
				}
			}
			return fmt.Sprintf("%s not offered by EC2NodeClass %s (offerings in %s)", what, p.className, strings.Join(sortedKeys(offered), ", "))
		}
	}
	if tr, ok := podReqs[v1.LabelInstanceType]; ok && tr.Operator() == corev1.NodeSelectorOpIn {
		known := map[string]bool{}
		for _, it := range types {
			if it != nil {
				known[it.Name] = true
			}
		}
		var missing []string
		for _, v := range tr.Values() {
			if !known[v] {
				missing = append(missing, v)
			}
		}
		if len(missing) == len(tr.Values()) && len(missing) > 0 {
			if len(missing) == 1 {
				return fmt.Sprintf("instance type %s is not in the catalog of EC2NodeClass %s", missing[0], p.className)
			}
			return fmt.Sprintf("instance types %s are not in the catalog of EC2NodeClass %s", strings.Join(missing, ", "), p.className)
		}
	}
	return fmt.Sprintf("no instance type satisfies both the NodePool's and the pod's requirements (%s)", podReqs.String())
}

// cand is one evaluated placement on a claim (c set) or a new claim of pool p.
type cand struct {
	ok    bool
	c     *nclaim
	p     *pool
	reqID int32
	tl    *typeList
	idx   int
	delta float64
	fit   float64
	// relaxedMin is set when BestEffort relaxed a minValues.
	relaxedMin bool
}

const priceEps = 1e-9

// better orders candidates: lower marginal price first, then tighter fit.
func better(a, b *cand) bool {
	if !b.ok {
		return a.ok
	}
	if !a.ok {
		return false
	}
	if d := a.delta - b.delta; d < -priceEps || d > priceEps {
		return d < 0
	}
	return a.fit < b.fit
}

// slackScore is the absolute room the chosen type keeps after placement:
// spare millicores plus spare memory converted to millicores at the
// workload's memory-per-cpu ratio. Best fit picks the smallest hole, leaving
// larger holes for pods to come (pods arrive largest first).
func (s *solver) slackScore(used, alloc *vec) float64 {
	return float64(alloc[resCPU]-used[resCPU]) + float64(alloc[resMemory]-used[resMemory])/s.memPerMilli
}

// Search bounds for this round's claims: a pod examines at most
// searchExamine claims at or above its best-fit position in a pool's index
// and stops after searchFeasible free fits (marginal price 0); it also
// evaluates up to searchGrow claims just below that position, the ones that
// would grow least. The bounds keep the cost per pod independent of the
// number of claims; they only affect packing, never validity.
const (
	searchExamine  = 256
	searchFeasible = 16
	searchGrow     = 8
)

// placeNew places pi on the claim of this round where its marginal price is
// lowest, or on a new claim of the first NodePool that can host it when
// that is cheaper (karpenter-spec §3.3 steps 2b-2c, with cost deciding
// among the allowed placements).
func (s *solver) placeNew(pi *podInfo) bool {
	if s.strategy != stratCost {
		return s.placeFirstFit(pi)
	}
	best := s.searchClaims(pi, nil)
	var fresh cand
	for _, p := range s.pools {
		cd, _ := s.evalNew(pi, p, false)
		if cd.ok {
			fresh = cd
			break
		}
	}
	if best.ok && (!fresh.ok || best.delta <= fresh.delta+priceEps) {
		s.commit(pi, &best)
		return true
	}
	if fresh.ok {
		s.commit(pi, &fresh)
		return true
	}
	return false
}

// searchClaims returns the best placement of pi on this round's claims
// (other than exclude), searching each usable pool's index from the pod's
// best-fit position.
func (s *solver) searchClaims(pi *podInfo, exclude *nclaim) cand {
	var best cand
	slot := resCPU
	if float64(pi.req[resMemory])/s.memPerMilli > float64(pi.req[resCPU]) {
		slot = resMemory
	}
	for _, p := range s.pools {
		if s.poolFit(pi.eff, p).reqID < 0 {
			continue
		}
		ix := &p.byCPU
		if slot == resMemory {
			ix = &p.byMemory
		}
		start := ix.search(pi.req[slot], -1)
		feasible := 0
		for i, examined := start, 0; i < len(ix.list) && examined < searchExamine && feasible < searchFeasible; i, examined = i+1, examined+1 {
			if ix.list[i] == exclude {
				continue
			}
			cd := s.evalClaim(pi, ix.list[i])
			if !cd.ok {
				continue
			}
			if cd.delta <= priceEps {
				feasible++
			}
			if better(&cd, &best) {
				best = cd
			}
		}
		for i, grown := start-1, 0; i >= 0 && grown < searchGrow; i-- {
			if ix.list[i] == exclude {
				continue
			}
			cd := s.evalClaim(pi, ix.list[i])
			if !cd.ok {
				continue
			}
			grown++
			if better(&cd, &best) {
				best = cd
			}
		}
	}
	return best
}

type narrow1Key struct{ id, key, dom int32 }

// applyNarrowing turns topology restrictions into a requirement set id.
func (s *solver) applyNarrowing(id int32, narrowed []narrow) int32 {
	for _, nw := range narrowed {
		if len(nw.doms) == 1 {
			k := narrow1Key{id: id, key: int32(nw.key.idx), dom: nw.doms[0]}
			if n, ok := s.narrow1[k]; ok {
				id = n
				continue
			}
			n := s.reqs.narrowTo(id, nw.key.name, domainValues(nw.key, nw.doms))
			s.narrow1[k] = n
			id = n
			continue
		}
		id = s.reqs.narrowTo(id, nw.key.name, domainValues(nw.key, nw.doms))
	}
	return id
}

// evalClaim evaluates adding pi to claim c.
func (s *solver) evalClaim(pi *podInfo, c *nclaim) cand {
	e := pi.eff
	pf := s.poolFit(e, c.pool)
	if pf.reqID < 0 {
		return cand{}
	}
	n := s.res.n()
	// Quick reject: not even the largest candidate can take the pod.
	need := c.used
	need.add(&pi.req, n)
	if !leq(&need, &c.tl.maxAlloc, n) || s.hostnameBlocks(e, c.h) {
		return cand{}
	}
	if len(pi.cls.ports) > 0 {
		if portConflict(c.ports, pi.cls.ports) != nil {
			return cand{}
		}
		if hp, _ := daemonPortConflict(c.pool.daemons, pi.cls.ports); hp != nil {
			return cand{}
		}
	}
	m := s.reqs.merge(c.reqID, e.reqID)
	if m.id < 0 {
		return cand{}
	}
	view := &topoView{h: c.h, pool: c.pool, reqID: m.id}
	var fail *topoFail
	s.narrowBuf, fail = s.checkTopology(e, view, s.narrowBuf)
	if fail != nil {
		return cand{}
	}
	rid := s.applyNarrowing(m.id, s.narrowBuf)
	tl, start := c.tl, c.cur
	if rid != c.reqID {
		tl, start = s.list(c.pool, rid), 0
	}
	limited, limitCap := s.capFor(c.pool, &c.capUsed)
	if c.noFit.covers(tl, start, &need, limited, &limitCap, n) {
		return cand{}
	}
	s.typeScans++
	idx := s.fitFrom(tl, start, &need, limited, &limitCap)
	if idx < 0 {
		c.noFit = claimNoFit{tl: tl, start: start, limited: limited, need: need, cap: limitCap}
		return cand{}
	}
	if s.rsv != nil && !s.usable(tl, idx, c.held) {
		if tl, idx = s.fitUsable(c.pool, rid, c.held, &need, limited, &limitCap); idx < 0 {
			return cand{}
		}
	}
	cd := cand{ok: true, c: c, p: c.pool, reqID: rid, tl: tl, idx: idx, delta: tl.prices[idx] - c.price,
		fit: s.slackScore(&need, &tl.types[idx].alloc), relaxedMin: c.minValuesRelaxed}
	if tl.minValues {
		r := s.reqs.get(rid)
		if k, _, _ := minValuesShortfall(r, s.fitting(tl, idx, &need, limited, &limitCap)); k != "" {
			if !s.bestEffort {
				return cand{}
			}
			cd.relaxedMin = true
		}
	}
	return cd
}

// evalNew evaluates a new claim of pool p for pi; with explain it also
// returns why p cannot host pi.
func (s *solver) evalNew(pi *podInfo, p *pool, explain bool) (cand, string) {
	e := pi.eff
	pf := s.poolFit(e, p)
	if pf.reqID < 0 {
		return cand{}, pf.reason
	}
	if p.nodesLimit >= 0 && p.nodes >= p.nodesLimit {
		return cand{}, fmt.Sprintf("limit nodes %d reached (%d in use)", p.nodesLimit, p.nodes)
	}
	if len(pi.cls.ports) > 0 {
		if hp, d := daemonPortConflict(p.daemons, pi.cls.ports); hp != nil {
			return cand{}, fmt.Sprintf("host port %s is taken by DaemonSet %s", hp, d.name)
		}
	}
	view := &topoView{pool: p, reqID: pf.reqID}
	var fail *topoFail
	s.narrowBuf, fail = s.checkTopology(e, view, s.narrowBuf)
	if fail != nil {
		return cand{}, fail.String()
	}
	rid := s.applyNarrowing(pf.reqID, s.narrowBuf)
	tl := s.list(p, rid)
	if len(tl.types) == 0 {
		return cand{}, fmt.Sprintf("no instance type is offered for %s", s.reqs.get(rid).String())
	}
	limited, limitCap := s.capFor(p, &vec{})
	idx := s.fitFrom(tl, 0, &pi.req, limited, &limitCap)
	if idx >= 0 && s.rsv != nil && !s.usable(tl, idx, -1) {
		tl, idx = s.fitUsable(p, rid, -1, &pi.req, limited, &limitCap)
	}
	if idx < 0 {
		if !explain {
			return cand{}, ""
		}
		if why := s.explainReservations(pi, p, rid, &limitCap); why != "" {
			return cand{}, why
		}
		return cand{}, s.explainFit(pi, p, tl, &limitCap)
	}
	cd := cand{ok: true, p: p, reqID: rid, tl: tl, idx: idx, delta: tl.prices[idx],
		fit: s.slackScore(&pi.req, &tl.types[idx].alloc)}
	if tl.minValues {
		r := s.reqs.get(rid)
		if k, want, have := minValuesShortfall(r, s.fitting(tl, idx, &pi.req, limited, &limitCap)); k != "" {
			if !s.bestEffort {
				return cand{}, fmt.Sprintf("minValues %d for %s cannot be met: the compatible instance types that fit offer %d", want, k, have)
			}
			cd.relaxedMin = true
		}
	}
	return cd, ""
}

// commit applies a candidate.
func (s *solver) commit(pi *podInfo, cd *cand) {
	s.changes++
	n := s.res.n()
	c := cd.c
	if c == nil {
		c = &nclaim{pool: cd.p, seq: len(s.claims), reqID: cd.reqID, tl: cd.tl, held: -1}
		h := &host{id: int32(len(s.hosts)), claim: c}
		h.name = fmt.Sprintf("%s-claim-%d", cd.p.name, c.seq)
		c.h = h
		s.hosts = append(s.hosts, h)
		s.claims = append(s.claims, c)
		cd.p.nodes++
	}
	iCPU, iMem, iPods := -1, -1, -1
	if cd.c != nil {
		iCPU, iMem = c.pool.byCPU.pos(c), c.pool.byMemory.pos(c)
		if s.strategy != stratCost {
			iPods = s.byPods.pos(c)
		}
	}
	c.reqID = cd.reqID
	c.tl = cd.tl
	c.cur = cd.idx
	c.price = cd.tl.prices[cd.idx]
	c.used.add(&pi.req, n)
	c.pods = append(c.pods, pi.idx)
	c.ports = append(c.ports, pi.cls.ports...)
	c.minValuesRelaxed = cd.relaxedMin
	c.free = cd.tl.types[cd.idx].alloc
	c.free.sub(&c.used, n)
	s.setCapUsed(c, &cd.tl.types[cd.idx].capacity)
	s.rebook(c)
	c.pool.byCPU.fix(c, iCPU)
	c.pool.byMemory.fix(c, iMem)
	if s.strategy != stratCost {
		s.byPods.fix(c, iPods)
	}
	pi.host = c.h
	pi.rec = s.record(pi.cls, pi.eff, &topoView{h: c.h, pool: c.pool, reqID: c.reqID}, nil)
}

// setCapUsed makes capacity the claim's share of its pool's limits. During
// the solve a claim counts only its cheapest fitting type; the result then
// widens each claim's candidate list only as far as the limits allow, so
// that even the largest listed candidate of every claim fits (the worst
// case Karpenter's pessimistic subtraction guards against).
func (s *solver) setCapUsed(c *nclaim, capacity *vec) {
	if !c.pool.anyLimit {
		return
	}
	n := s.res.n()
	c.pool.usage.sub(&c.capUsed, n)
	c.capUsed = *capacity
	c.pool.usage.add(&c.capUsed, n)
}

// hostnameBlocks is a quick, exact rejection before the full checks: a
// hostname anti-affinity or spread term of the pod, or a placed pod's
// hostname anti-affinity, already rules the host out.
func (s *solver) hostnameBlocks(e *effClass, h *host) bool {
	if len(h.hc) == 0 {
		return false
	}
	for i := range e.owned {
		o := &e.owned[i]
		if !o.g.key.hostname {
			continue
		}
		c, _ := h.counts(o.g.id)
		switch o.g.kind {
		case gAnti:
			if c > 0 {
				return true
			}
		case gSpread:
			self := int32(0)
			if o.self {
				self = 1
			}
			if c+self > o.g.maxSkew {
				return true
			}
		}
	}
	for _, g := range e.cls.inverse {
		if g.key.hostname {
			if _, ow := h.counts(g.id); ow > 0 {
				return true
			}
		}
	}
	return false
}

// podWritten returns a pod's node requirements as written: its
// nodeSelector and, when it has exactly one, its required node affinity
// term (with several terms, any one may apply).
func podWritten(p *corev1.Pod) []corev1.NodeSelectorRequirement {
	if p == nil {
		return nil
	}
	var out []corev1.NodeSelectorRequirement
	for _, k := range sortedKeys(p.Spec.NodeSelector) {
		out = append(out, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{p.Spec.NodeSelector[k]}})
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) == 1 {
			out = append(out, terms[0].MatchExpressions...)
		}
	}
	return out
}
