package scheduling

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// enode is an existing node or in-flight NodeClaim that can take pods
// (karpenter: ExistingNode, StateNode; karpenter-spec §3.7).
type enode struct {
	h *host
	// idx is the node's position in first-fit order.
	idx         int
	name        string
	labels      map[string]string
	reqs        requirements.Requirements
	taints      []corev1.Taint
	initialized bool
	// avail is allocatable minus bound pods' requests minus the remaining
	// daemonset overhead.
	avail vec
	ports []hostPort
	// vols counts attached volumes against the node's CSI attach limits;
	// nil when the node has none.
	vols *attachments
	// doms holds, per topology key, the node's domain (one entry) or none.
	doms [][]int32
	// pool is the owning NodePool name ("" when unmanaged).
	pool string
}

// existingName is the name placements report: the Node's name, or the
// NodeClaim's for an in-flight claim.
func existingName(en *ExistingNode) string {
	if en.Node != nil {
		return en.Node.Name
	}
	if en.NodeClaim != nil {
		return en.NodeClaim.Name
	}
	return ""
}

func existingLabels(en *ExistingNode) map[string]string {
	out := map[string]string{}
	if en.NodeClaim != nil && en.Node == nil {
		for k, v := range en.NodeClaim.Labels {
			out[k] = v
		}
	}
	if en.Node != nil {
		for k, v := range en.Node.Labels {
			out[k] = v
		}
	}
	return out
}

// existingPool returns the managing NodePool of an existing node.
func existingPool(en *ExistingNode) string {
	if en.Node != nil {
		if p := en.Node.Labels[v1.LabelNodePool]; p != "" {
			return p
		}
	}
	if en.NodeClaim != nil {
		return en.NodeClaim.Labels[v1.LabelNodePool]
	}
	return ""
}

// activePod reports whether a bound pod still uses its node: not terminal
// and not terminating (karpenter-spec §2: terminal and terminating pods are
// not counted).
func activePod(p *corev1.Pod) bool {
	return p != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

func ownedByDaemonSet(p *corev1.Pod) bool { return v1.OwnedByDaemonSet(p) }

// buildNodes prepares existing capacity: usage per pool for limits (every
// node, including those marked for deletion), and the nodes pods may use
// (not marked for deletion), initialized first, then by name.
func (s *solver) buildNodes() error {
	seen := map[string]bool{}
	for i := range s.in.Nodes {
		en := &s.in.Nodes[i]
		name := existingName(en)
		if name == "" {
			return fmt.Errorf("nodes[%d]: neither node nor nodeclaim has a name", i)
		}
		if seen[name] {
			return fmt.Errorf("node %s: listed twice", name)
		}
		seen[name] = true
		s.addUsage(en)
		if !en.MarkedForDeletion {
			s.addNode(s.newNode(i, en), en.Pods)
		}
	}
	s.orderNodes()
	return nil
}

// buildNodesFrom is buildNodes for nodes Prepare validated and measured:
// the pools' usage is prep's, and only the usable nodes in which some pod
// of this solve fits (by prep's availability) are built. A node no pod
// fits in at the start never takes one (a solve only ever lowers a node's
// availability), and without topology groups it has no other effect.
func (s *solver) buildNodesFrom(prep *Prepared) {
	n := s.res.n()
	for _, p := range s.pools {
		if u, ok := prep.usage[p.name]; ok {
			p.usage.add(&u.capacity, n)
			p.nodes += u.nodes
		}
	}
	least, some := s.leastRequest()
	for i := range s.in.Nodes {
		en := &s.in.Nodes[i]
		if !some || en.MarkedForDeletion || !leq(&least, &prep.nodes[i].avail, n) {
			continue
		}
		s.addNode(s.newNode(i, en), en.Pods)
	}
	s.orderNodes()
}

// leastRequest is the element-wise minimum of the requests of the pods
// this solve places; some is false when it places none.
func (s *solver) leastRequest() (least vec, some bool) {
	n := s.res.n()
	for _, pi := range s.pods {
		if pi.cls == nil {
			continue
		}
		if !some {
			least, some = pi.req, true
			continue
		}
		least.minWith(&pi.req, n)
	}
	return least, some
}

// addUsage counts en's capacity in its NodePool's usage (limits count
// every node, including those marked for deletion).
func (s *solver) addUsage(en *ExistingNode) {
	poolName := existingPool(en)
	if poolName == "" {
		return
	}
	for _, p := range s.pools {
		if p.name != poolName {
			continue
		}
		c := existingCapacity(s.res, en)
		p.usage.add(&c, s.res.n())
		p.nodes++
	}
}

// existingCapacity is the Node's capacity, else the NodeClaim's.
func existingCapacity(ri *resourceIndex, en *ExistingNode) vec {
	var capList corev1.ResourceList
	if en.Node != nil {
		capList = en.Node.Status.Capacity
	}
	if len(capList) == 0 && en.NodeClaim != nil {
		capList = en.NodeClaim.Status.Capacity
	}
	c, _ := ri.vector(capList)
	return c
}

// newNode builds the usable-node view of en: labels, requirements,
// taints, and allocatable minus its active pods' requests and the
// remaining daemonset overhead.
func (s *solver) newNode(i int, en *ExistingNode) *enode {
	n := s.res.n()
	node := &enode{name: existingName(en), pool: existingPool(en)}
	node.labels, node.reqs = s.nodeLabels(i, en)
	managed := en.NodeClaim != nil || node.pool != ""
	node.initialized = !managed || node.labels[v1.LabelInitialized] == "true"
	var alloc corev1.ResourceList
	if en.Node == nil {
		node.taints = en.NodeClaim.Spec.Taints
		alloc = en.NodeClaim.Status.Allocatable
	} else {
		node.taints = en.Node.Spec.Taints
		alloc = en.Node.Status.Allocatable
		if !node.initialized {
			var startup []corev1.Taint
			if en.NodeClaim != nil {
				startup = en.NodeClaim.Spec.StartupTaints
				alloc = alloc.DeepCopy()
				for k, v := range en.NodeClaim.Status.Allocatable {
					if q, ok := alloc[k]; !ok || q.IsZero() {
						alloc[k] = v
					}
				}
			}
			node.taints = withoutTaints(node.taints, startup, ephemeralTaints)
		}
	}
	node.avail, _ = s.res.vector(alloc)
	if len(en.VolumeLimits) > 0 {
		node.vols = &attachments{limits: en.VolumeLimits, used: map[string]map[string]bool{}}
	}
	var daemonUsed vec
	for _, p := range en.Pods {
		if !activePod(p) {
			continue
		}
		r, _ := s.res.podRequestVector(&p.Spec)
		r[resPods]++
		node.avail.sub(&r, n)
		if ownedByDaemonSet(p) {
			daemonUsed.add(&r, n)
		}
		node.ports = append(node.ports, podHostPorts(&p.Spec)...)
		if node.vols != nil && len(p.Spec.Volumes) > 0 {
			node.vols.add(s.volumeIndex().volumeUses(p))
		}
	}
	// Remaining daemonset overhead: compatible DaemonSets' requests minus
	// daemon pods already bound, floored at zero (karpenter:
	// NewExistingNode).
	var daemonWant vec
	for _, d := range s.daemons {
		if untolerated(node.taints, d.pod.Spec.Tolerations) != nil {
			continue
		}
		ok := false
		for _, term := range d.terms {
			if p, _ := strictMismatch(node.reqs, term); p == nil {
				ok = true
				break
			}
		}
		if ok {
			daemonWant.add(&d.req, n)
			// Its pod holds its host ports whether or not it is bound
			// yet (an in-flight claim, a node still starting it).
			node.ports = append(node.ports, d.ports...)
		}
	}
	daemonWant.sub(&daemonUsed, n)
	daemonWant.floorZero(n)
	node.avail.sub(&daemonWant, n)
	if en.Node != nil && en.Node.Spec.Unschedulable {
		// A cordoned node takes only pods that tolerate
		// node.kubernetes.io/unschedulable:NoSchedule (kube-scheduler's
		// NodeUnschedulable filter). Added after the daemonset overhead:
		// DaemonSet pods tolerate it by default.
		node.taints = withCordonTaint(node.taints)
	}
	return node
}

// nodeLabels returns the labels and requirements of en, the solve's
// i-th node: its Node's labels (an in-flight NodeClaim's, with its
// requirements) and the hostname label, which defaults to the node's
// name. When Prepare built the same node (the same Node and NodeClaim at
// index i), they are Prepare's: the solver only reads them, so every
// solve of a Prepared shares one copy instead of building it again.
func (s *solver) nodeLabels(i int, en *ExistingNode) (map[string]string, requirements.Requirements) {
	if s.prep != nil && i < len(s.prep.nodes) {
		if pn := &s.prep.nodes[i]; pn.labels != nil && pn.node == en.Node && pn.claim == en.NodeClaim {
			return pn.labels, pn.reqs
		}
	}
	labels := existingLabels(en)
	hostname := labels[v1.LabelHostname]
	if hostname == "" {
		hostname = existingName(en)
	}
	labels[v1.LabelHostname] = hostname
	reqs := requirements.FromLabels(labels)
	if en.Node == nil && en.NodeClaim != nil {
		for _, r := range requirements.FromNodeSelector(en.NodeClaim.Spec.Requirements) {
			reqs.Add(r)
		}
	}
	return labels, reqs
}

// addNode makes node usable, with its bound pods.
func (s *solver) addNode(node *enode, pods []*corev1.Pod) {
	hostname := node.labels[v1.LabelHostname]
	h := &host{id: int32(len(s.hosts)), name: hostname, node: node}
	node.h = h
	s.hosts = append(s.hosts, h)
	s.nodes = append(s.nodes, node)
	s.nodePods = append(s.nodePods, pods)
}

// orderNodes sorts the usable nodes, initialized first, then by name, and
// indexes their availability.
func (s *solver) orderNodes() {
	// Keep nodePods aligned with nodes while sorting.
	idx := make([]int, len(s.nodes))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		na, nb := s.nodes[idx[a]], s.nodes[idx[b]]
		if na.initialized != nb.initialized {
			return na.initialized
		}
		return na.name < nb.name
	})
	nodes := make([]*enode, len(idx))
	pods := make([][]*corev1.Pod, len(idx))
	for i, j := range idx {
		nodes[i], pods[i] = s.nodes[j], s.nodePods[j]
		nodes[i].idx = i
	}
	s.nodes, s.nodePods = nodes, pods
	s.nodeTree = newNodeTree(s.nodes, s.res.n())
}

// registerNodeDomains adds the existing nodes' label values to the
// universe of every topology key.
func (s *solver) registerNodeDomains() {
	for _, node := range s.nodes {
		ts := s.taintSet(node.taints)
		s.provPool, s.provNode = append(s.provPool, -1), append(s.provNode, node.reqs)
		for _, k := range s.keys {
			if v, ok := node.labels[k.name]; ok {
				s.registerDomain(k, v, ts)
			}
		}
	}
}

// finishNodes resolves node domains and counts the pods bound to them.
func (s *solver) finishNodes() {
	for i, node := range s.nodes {
		node.doms = make([][]int32, len(s.keys))
		for _, k := range s.keys {
			if k.hostname {
				continue
			}
			if v, ok := node.labels[k.name]; ok {
				if d := k.domain(v); d >= 0 {
					node.doms[k.idx] = []int32{d}
				}
			}
		}
		view := &topoView{h: node.h, node: node}
		for _, p := range s.nodePods[i] {
			if !activePod(p) {
				continue
			}
			c := s.existingClass(p)
			_ = s.record(c, c.levels[0], view, nil)
		}
	}
}

// existingClass returns a class for a bound pod: its selections and its
// required anti-affinity terms (inverse anti-affinity of existing pods).
func (s *solver) existingClass(p *corev1.Pod) *class {
	c := &class{rep: p}
	c.selectedBy = s.selectedBy(p.Namespace, p.Labels)
	e := &effClass{cls: c}
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			term := &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
			key := s.keyByName[term.TopologyKey]
			if key == nil {
				continue
			}
			all, ns := s.termNamespaces(term, p.Namespace)
			gs := &groupSpec{kind: gAnti, key: term.TopologyKey, nsAll: all, ns: ns,
				sel: selectorFor(term.LabelSelector, p.Labels, term.MatchLabelKeys, term.MismatchLabelKeys)}
			if g, ok := s.groupByID[gs.identity()]; ok {
				e.owned = append(e.owned, owned{g: g, required: true})
			}
		}
	}
	c.levels = []*effClass{e}
	return c
}

// taintSet interns a taint list for domain providers.
func (s *solver) taintSet(taints []corev1.Taint) int32 {
	s.taintSets = append(s.taintSets, taints)
	return int32(len(s.taintSets) - 1)
}

// nodeTree finds, in node order, the next existing node whose available
// resources hold a request: a segment tree of the element-wise maximum
// availability, so that first fit skips full nodes in O(log n) instead of
// checking each.
type nodeTree struct {
	n    int // resource slots in use
	size int // leaves (a power of two)
	max  []vec
}

func newNodeTree(nodes []*enode, slots int) *nodeTree {
	size := 1
	for size < len(nodes) {
		size <<= 1
	}
	t := &nodeTree{n: slots, size: size, max: make([]vec, 2*size)}
	for i := range t.max {
		for j := 0; j < slots; j++ {
			t.max[i][j] = math.MinInt64
		}
	}
	for i, node := range nodes {
		t.max[size+i] = node.avail
	}
	for i := size - 1; i >= 1; i-- {
		t.max[i] = t.max[2*i]
		t.max[i].maxWith(&t.max[2*i+1], slots)
	}
	return t
}

// update refreshes node i's availability.
func (t *nodeTree) update(i int, avail *vec) {
	i += t.size
	t.max[i] = *avail
	for i >>= 1; i >= 1; i >>= 1 {
		t.max[i] = t.max[2*i]
		t.max[i].maxWith(&t.max[2*i+1], t.n)
	}
}

// next returns the first node index >= from whose availability holds req,
// or -1.
func (t *nodeTree) next(from int, req *vec) int {
	return t.find(1, 0, t.size, from, req)
}

func (t *nodeTree) find(i, lo, hi, from int, req *vec) int {
	if hi <= from || !leq(req, &t.max[i], t.n) {
		return -1
	}
	if hi-lo == 1 {
		return lo
	}
	mid := (lo + hi) / 2
	if r := t.find(2*i, lo, mid, from, req); r >= 0 {
		return r
	}
	return t.find(2*i+1, mid, hi, from, req)
}

// withCordonTaint returns taints plus node.kubernetes.io/unschedulable:
// NoSchedule unless already present (the taint the node lifecycle
// controller puts on a node with spec.unschedulable set).
func withCordonTaint(taints []corev1.Taint) []corev1.Taint {
	for _, t := range taints {
		if t.Key == corev1.TaintNodeUnschedulable && t.Effect == corev1.TaintEffectNoSchedule {
			return taints
		}
	}
	out := make([]corev1.Taint, 0, len(taints)+1)
	out = append(out, taints...)
	return append(out, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
}
