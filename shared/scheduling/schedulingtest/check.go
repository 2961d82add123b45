package schedulingtest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// CheckResult verifies, independently of the solver's code, invariants
// every plan for in must keep whatever the packing, and returns one error
// per violation (joined), or nil:
//
//   - accounting: every pod of in.Pods appears exactly once, in Placements,
//     in one NewClaim's Pods, or in Unschedulable with a non-empty reason;
//     no unknown UIDs; placements name an existing node that is not marked
//     for deletion;
//   - claims: the NodePool exists and refers to NodeClass; 1 to
//     MaxInstanceTypes (default 60) candidates, all resolved for NodeClass
//     and all satisfying the pool's requirements; resources.requests cover
//     the pods' requests (PodRequests) and their count as "pods"; every
//     candidate's allocatable holds resources.requests; Expected is an
//     available offering of a candidate that the claim and pool allow, at
//     its price, and no allowed available offering of any candidate is
//     cheaper;
//   - pods on claims tolerate the pool's NoSchedule/NoExecute taints and
//     their nodeSelector and required node affinity hold for every candidate
//     in every zone and capacity type the claim allows (hostname excepted);
//   - required pod anti-affinity (hostname, zone): no two pods that one of
//     them excludes can share the domain (zones must be provably distinct);
//   - required pod affinity (hostname, zone): a pod with other matching
//     pods is in a single domain shared with one of them; with none, it
//     must match its own selector;
//   - DoNotSchedule spread: on a new claim, at most maxSkew pods carrying
//     the same hostname constraint match it (Karpenter takes 0 as the global
//     minimum for hostname); pods with a zone constraint are on claims
//     pinned to one zone;
//   - host ports: no two pods on one node use the same (port, protocol) on
//     overlapping addresses, counting the pod of every DaemonSet certain to
//     run there (no nodeSelector, no required node affinity, tolerating the
//     node's NoSchedule/NoExecute taints; a new claim's are its pool's)
//     whether or not that pod is bound yet;
//   - limits: per NodePool, existing capacity plus, per new claim, the
//     largest candidate's capacity (and one node) stays within spec.limits;
//   - CSI attach limits: an existing node with VolumeLimits ends with no
//     more distinct claims of a driver than its limit when placed pods
//     added claims of that driver (attachLimits);
//   - weights: a pod nothing else steers is never on a claim of a pool
//     when a heavier pool without limits the plan launches for could take
//     it, and a claim of a pool never holds only such pods that a heavier
//     pool with limits the plan launches for could each take within what
//     the plan leaves of its limits (weights);
//   - reservations: a claim that may launch into a capacity reservation
//     names exactly one and only the reserved capacity type, and no
//     reservation is named by more claims than it has instances left
//     (reservations).
//
// It checks necessary conditions only: zone skew across domains and the
// order in which pods were placed are not verified, and daemonset overhead
// is taken from resources.requests.
func CheckResult(in scheduling.Input, res scheduling.Result) error {
	c := newChecker(in)
	c.accounting(res)
	for i := range res.NewClaims {
		c.claim(i, &res.NewClaims[i])
	}
	c.volumeZones()
	c.attachLimits()
	c.topology()
	c.limits(res)
	c.weights(res)
	c.reservations(res)
	return errors.Join(c.errs...)
}

// reservations checks the capacity-reservation count: a claim whose
// expected offering is reserved names exactly one reservation
// (karpenter.k8s.aws/capacity-reservation-id In [id]) and only the
// reserved capacity type, a claim that allows reserved offerings names
// one, and no reservation is named by more claims than the smallest
// ReservationCapacity its offerings report.
func (c *checker) reservations(res scheduling.Result) {
	free := map[string]int{}
	for _, types := range c.in.InstanceTypes {
		for _, it := range types {
			for _, o := range it.Offerings {
				if o.CapacityType != v1.CapacityTypeReserved || o.ReservationID == "" {
					continue
				}
				if cur, ok := free[o.ReservationID]; !ok || o.ReservationCapacity < cur {
					free[o.ReservationID] = o.ReservationCapacity
				}
			}
		}
	}
	held := map[string]int{}
	for i := range res.NewClaims {
		cl := &res.NewClaims[i]
		name := fmt.Sprintf("new claim %d (%s)", i, cl.NodePool)
		var ids []string
		for _, r := range cl.NodeClaim.Spec.Requirements {
			if r.Key == v1.LabelCapacityReservationID && r.Operator == corev1.NodeSelectorOpIn {
				ids = r.Values
			}
		}
		reserved := slices.Contains(cl.CapacityTypes, v1.CapacityTypeReserved)
		switch {
		case !reserved && cl.Expected.CapacityType != v1.CapacityTypeReserved:
			continue
		case len(ids) != 1:
			c.fail("%s: may launch into a capacity reservation but names %d reservations (%v), want 1", name, len(ids), ids)
			continue
		case !slices.Equal(cl.CapacityTypes, []string{v1.CapacityTypeReserved}):
			c.fail("%s: holds reservation %s but allows capacity types %v", name, ids[0], cl.CapacityTypes)
		}
		held[ids[0]]++
	}
	for _, id := range sortedKeys(held) {
		if held[id] > free[id] {
			c.fail("capacity reservation %s has %d instances left but %d new claims launch into it", id, free[id], held[id])
		}
	}
}

// volumeZones checks that every placed pending pod's node can only be in a
// zone its volumes allow: the zone term of a bound claim's
// PersistentVolume, or the zone term of an unbound claim's StorageClass
// allowedTopologies. It reads the objects itself, not through the solver.
func (c *checker) volumeZones() {
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for i := range c.in.Volumes.Claims {
		cl := &c.in.Volumes.Claims[i]
		claims[cl.Namespace+"/"+cl.Name] = cl
	}
	for _, p := range c.in.Pods {
		id, placed := c.nodeOf[p]
		if !placed {
			continue
		}
		for _, vol := range p.Spec.Volumes {
			if vol.PersistentVolumeClaim == nil {
				continue
			}
			cl := claims[p.Namespace+"/"+vol.PersistentVolumeClaim.ClaimName]
			if cl == nil {
				c.fail("pod %s placed though its claim %s does not exist", podKey(p), vol.PersistentVolumeClaim.ClaimName)
				continue
			}
			allowed := c.claimZones(cl)
			if allowed == nil {
				continue
			}
			for _, z := range c.zones[id] {
				if !slices.Contains(allowed, z) {
					c.fail("pod %s on %s, which may be in zone %s; its volume %s allows only %v", podKey(p), id, z, vol.Name, allowed)
				}
			}
		}
	}
}

// claimZones returns the zones a claim's volume or class allows, nil for
// any.
func (c *checker) claimZones(cl *corev1.PersistentVolumeClaim) []string {
	if cl.Spec.VolumeName != "" {
		for _, pv := range c.in.Volumes.PersistentVolumes {
			if pv.Name != cl.Spec.VolumeName || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
				continue
			}
			for _, e := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions {
				if e.Key == v1.LabelTopologyZone && e.Operator == corev1.NodeSelectorOpIn {
					return e.Values
				}
			}
		}
		return nil
	}
	for _, sc := range c.in.Volumes.StorageClasses {
		if cl.Spec.StorageClassName == nil || sc.Name != *cl.Spec.StorageClassName || len(sc.AllowedTopologies) == 0 {
			continue
		}
		for _, e := range sc.AllowedTopologies[0].MatchLabelExpressions {
			if e.Key == v1.LabelTopologyZone {
				return e.Values
			}
		}
	}
	return nil
}

type checker struct {
	in       scheduling.Input
	pods     map[string]*corev1.Pod
	pools    map[string]*v1.NodePool
	types    map[string]map[string]*catalog.InstanceType
	existing map[string]int // node or claim name -> index in in.Nodes
	// every placed pod (new and existing) and its node
	onNode map[string][]*corev1.Pod // node id -> pods
	nodeOf map[*corev1.Pod]string
	zones  map[string][]string // node id -> possible zones
	isNew  map[string]bool
	taints map[string][]corev1.Taint // node id -> taints
	errs   []error
}

func newChecker(in scheduling.Input) *checker {
	c := &checker{
		in: in, pods: map[string]*corev1.Pod{}, pools: map[string]*v1.NodePool{},
		types: map[string]map[string]*catalog.InstanceType{}, existing: map[string]int{},
		onNode: map[string][]*corev1.Pod{}, nodeOf: map[*corev1.Pod]string{},
		zones: map[string][]string{}, isNew: map[string]bool{}, taints: map[string][]corev1.Taint{},
	}
	for _, p := range in.Pods {
		c.pods[string(p.UID)] = p
	}
	for i := range in.NodePools {
		c.pools[in.NodePools[i].Name] = &in.NodePools[i]
	}
	for class, types := range in.InstanceTypes {
		m := map[string]*catalog.InstanceType{}
		for _, it := range types {
			m[it.Name] = it
		}
		c.types[class] = m
	}
	for i, n := range in.Nodes {
		id := existingID(n)
		if n.Node != nil {
			c.existing[n.Node.Name] = i
		}
		if n.NodeClaim != nil {
			c.existing[n.NodeClaim.Name] = i
		}
		if z := existingZone(n); z != "" {
			c.zones[id] = []string{z}
		}
		if n.Node != nil {
			c.taints[id] = n.Node.Spec.Taints
		} else {
			c.taints[id] = n.NodeClaim.Spec.Taints
		}
		for _, p := range n.Pods {
			c.place(p, id)
		}
	}
	return c
}

func (c *checker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) place(p *corev1.Pod, id string) {
	c.onNode[id] = append(c.onNode[id], p)
	c.nodeOf[p] = id
}

func existingID(n scheduling.ExistingNode) string {
	if n.Node != nil {
		return "node/" + n.Node.Name
	}
	return "node/" + n.NodeClaim.Name
}

func existingZone(n scheduling.ExistingNode) string {
	if n.Node != nil && n.Node.Labels[v1.LabelTopologyZone] != "" {
		return n.Node.Labels[v1.LabelTopologyZone]
	}
	if n.NodeClaim != nil {
		return n.NodeClaim.Labels[v1.LabelTopologyZone]
	}
	return ""
}

func (c *checker) accounting(res scheduling.Result) {
	where := map[string]string{}
	note := func(uid, at string) {
		if _, ok := c.pods[uid]; !ok {
			c.fail("%s names unknown pod UID %s", at, uid)
			return
		}
		if prev, dup := where[uid]; dup {
			c.fail("pod %s is in both %s and %s", podKey(c.pods[uid]), prev, at)
			return
		}
		where[uid] = at
	}
	for _, uid := range sortedKeys(res.Placements) {
		node := res.Placements[uid]
		note(uid, "placement on "+node)
		i, ok := c.existing[node]
		if !ok {
			c.fail("pod UID %s placed on unknown node %q", uid, node)
			continue
		}
		if c.in.Nodes[i].MarkedForDeletion {
			c.fail("pod UID %s placed on node %q, which is marked for deletion", uid, node)
		}
		if p := c.pods[uid]; p != nil {
			c.place(p, existingID(c.in.Nodes[i]))
		}
	}
	for i, cl := range res.NewClaims {
		for _, uid := range cl.Pods {
			note(uid, fmt.Sprintf("new claim %d (%s)", i, cl.NodePool))
		}
	}
	for _, uid := range sortedKeys(res.Unschedulable) {
		note(uid, "unschedulable")
		if res.Unschedulable[uid] == "" {
			c.fail("pod UID %s is unschedulable without a reason", uid)
		}
	}
	for _, p := range c.in.Pods {
		if _, ok := where[string(p.UID)]; !ok {
			c.fail("pod %s is neither placed nor unschedulable", podKey(p))
		}
	}
}

func (c *checker) claim(i int, cl *scheduling.NewClaim) {
	name := fmt.Sprintf("new claim %d (%s)", i, cl.NodePool)
	np, ok := c.pools[cl.NodePool]
	if !ok {
		c.fail("%s: unknown NodePool", name)
		return
	}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref == nil || ref.Name != cl.NodeClass {
		c.fail("%s: NodeClass %q is not the pool's", name, cl.NodeClass)
	}
	limit := c.in.Options.MaxInstanceTypes
	if limit == 0 {
		limit = 60
	}
	if n := len(cl.InstanceTypes); n == 0 || n > limit {
		c.fail("%s: %d candidate instance types, want 1 to %d", name, n, limit)
	}
	var pods []*corev1.Pod
	need := corev1.ResourceList{}
	for _, uid := range cl.Pods {
		if p := c.pods[uid]; p != nil {
			pods = append(pods, p)
			add(need, PodRequests(p))
		}
	}
	need[corev1.ResourcePods] = *resource.NewQuantity(int64(len(pods)), resource.DecimalSI)
	requests := cl.NodeClaim.Spec.Resources.Requests
	if what, ok := fits(need, requests); !ok {
		c.fail("%s: resources.requests do not cover its pods: %s", name, what)
	}
	id := fmt.Sprintf("claim/%d", i)
	c.isNew[id] = true
	c.taints[id] = np.Spec.Template.Spec.Taints
	for _, p := range pods {
		c.place(p, id)
		if !tolerates(p.Spec.Tolerations, np.Spec.Template.Spec.Taints) {
			c.fail("%s: pod %s does not tolerate the pool's taints", name, podKey(p))
		}
	}
	zoneOK := claimAllows(cl.NodeClaim.Spec.Requirements, v1.LabelTopologyZone)
	ctOK := claimAllows(cl.NodeClaim.Spec.Requirements, v1.LabelCapacityType)
	base := merged(poolLabels(np), cl.NodeClaim.Labels, singleValued(cl.NodeClaim.Spec.Requirements))
	skip := map[string]bool{v1.LabelHostname: true}
	cheapest := math.Inf(1)
	zoneSet := map[string]bool{}
	var expected *catalog.Offering
	for _, t := range cl.InstanceTypes {
		it := c.types[cl.NodeClass][t]
		if it == nil {
			c.fail("%s: candidate %s is not an instance type of %s", name, t, cl.NodeClass)
			continue
		}
		if what, ok := fits(requests, it.Allocatable()); !ok {
			c.fail("%s: candidate %s cannot hold resources.requests: %s", name, t, what)
		}
		labels := merged(it.Labels, base)
		for _, r := range np.Spec.Template.Spec.Requirements {
			key := normalized(r.Key)
			if key == v1.LabelTopologyZone || key == v1.LabelCapacityType {
				continue
			}
			if _, has := labels[key]; (has || v1.WellKnownLabels[key]) && !matches(key, r.Operator, r.Values, labels) {
				c.fail("%s: candidate %s violates pool requirement %s %s %v", name, t, r.Key, r.Operator, r.Values)
			}
		}
		for k := range it.Offerings {
			o := &it.Offerings[k]
			if !o.Available || !zoneOK(o.Zone) || !ctOK(o.CapacityType) || !poolAllowsOffering(np, o.Zone, o.CapacityType) {
				continue
			}
			zoneSet[o.Zone] = true
			cheapest = min(cheapest, o.Price)
			if t == cl.Expected.InstanceType && o.Zone == cl.Expected.Zone && o.CapacityType == cl.Expected.CapacityType {
				expected = o
			}
			nodeLabels := withOffering(labels, o.Zone, o.CapacityType)
			for _, p := range pods {
				if !podAccepts(p, nodeLabels, skip) {
					c.fail("%s: pod %s's node requirements fail on candidate %s in %s/%s", name, podKey(p), t, o.Zone, o.CapacityType)
				}
			}
		}
	}
	switch {
	case expected == nil:
		c.fail("%s: expected offering %+v is not an allowed available offering of a candidate", name, cl.Expected)
	case math.Abs(expected.Price-cl.Expected.PricePerHour) > 1e-9:
		c.fail("%s: expected price %v, offering price %v", name, cl.Expected.PricePerHour, expected.Price)
	case cl.Expected.PricePerHour > cheapest+1e-9:
		c.fail("%s: expected price %v but an allowed offering costs %v", name, cl.Expected.PricePerHour, cheapest)
	}
	zones := make([]string, 0, len(zoneSet))
	for z := range zoneSet {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	c.zones[id] = zones
}

// claimAllows returns a filter for key from a claim's requirements (In,
// NotIn, Exists, DoesNotExist; other operators allow every value).
func claimAllows(reqs []v1.NodeSelectorRequirementWithMinValues, key string) func(string) bool {
	var filters []v1.NodeSelectorRequirementWithMinValues
	for _, r := range reqs {
		if normalized(r.Key) == key {
			filters = append(filters, r)
		}
	}
	return func(v string) bool {
		for _, r := range filters {
			switch r.Operator {
			case corev1.NodeSelectorOpIn:
				if !slices.Contains(r.Values, v) {
					return false
				}
			case corev1.NodeSelectorOpNotIn:
				if slices.Contains(r.Values, v) {
					return false
				}
			case corev1.NodeSelectorOpDoesNotExist:
				return false
			}
		}
		return true
	}
}

func singleValued(reqs []v1.NodeSelectorRequirementWithMinValues) map[string]string {
	out := map[string]string{}
	for _, r := range reqs {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			out[normalized(r.Key)] = r.Values[0]
		}
	}
	return out
}

// topology checks affinity, anti-affinity, spread and host ports.
func (c *checker) topology() {
	byNamespace := map[string][]*corev1.Pod{}
	for p := range c.nodeOf {
		byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p)
	}
	for _, ns := range byNamespace {
		sort.Slice(ns, func(i, j int) bool { return podKey(ns[i]) < podKey(ns[j]) })
	}
	holders := make([]*corev1.Pod, 0, len(c.nodeOf))
	for p := range c.nodeOf {
		holders = append(holders, p)
	}
	sort.Slice(holders, func(i, j int) bool { return podKey(holders[i]) < podKey(holders[j]) })
	selected := map[string][]*corev1.Pod{} // term key -> pods the term selects
	termPods := func(p *corev1.Pod, t corev1.PodAffinityTerm) []*corev1.Pod {
		namespaces := t.Namespaces
		if len(namespaces) == 0 {
			namespaces = []string{p.Namespace}
		}
		key := fmt.Sprint(namespaces) + "\x00" + t.LabelSelector.String()
		if out, ok := selected[key]; ok {
			return out
		}
		out := []*corev1.Pod{}
		for _, ns := range namespaces {
			for _, q := range byNamespace[ns] {
				if selects(t.LabelSelector, q.Labels) {
					out = append(out, q)
				}
			}
		}
		selected[key] = out
		return out
	}
	for _, p := range holders {
		a := p.Spec.Affinity
		if a != nil && a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if t.TopologyKey == v1.LabelHostname {
					c.antiAffinity(p, t, c.onNode[c.nodeOf[p]]) // only pods on the same node can conflict
					continue
				}
				c.antiAffinity(p, t, termPods(p, t))
			}
		}
		if a != nil && a.PodAffinity != nil {
			for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				c.affinity(p, t, termPods(p, t))
			}
		}
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			if tsc.WhenUnsatisfiable == corev1.DoNotSchedule && tsc.TopologyKey == v1.LabelTopologyZone &&
				c.isNew[c.nodeOf[p]] && len(c.zones[c.nodeOf[p]]) != 1 {
				c.fail("pod %s has a zone spread constraint but its claim may launch in zones %v", podKey(p), c.zones[c.nodeOf[p]])
			}
		}
	}
	ids := make([]string, 0, len(c.onNode))
	for id := range c.onNode {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c.hostnameSpread(id)
		c.hostPorts(id)
	}
}

// domain returns the possible values of key for pod p's node.
func (c *checker) domain(p *corev1.Pod, key string) ([]string, bool) {
	id := c.nodeOf[p]
	switch key {
	case v1.LabelHostname:
		return []string{id}, true
	case v1.LabelTopologyZone:
		return c.zones[id], true
	}
	return nil, false
}

func (c *checker) antiAffinity(p *corev1.Pod, t corev1.PodAffinityTerm, selected []*corev1.Pod) {
	dp, ok := c.domain(p, t.TopologyKey)
	if !ok {
		return
	}
	for _, q := range selected {
		if q == p || !termSelects(p, t, q) {
			continue
		}
		dq, _ := c.domain(q, t.TopologyKey)
		for _, d := range dp {
			if slices.Contains(dq, d) {
				c.fail("pod %s has anti-affinity to pod %s on %s but both may be in %s", podKey(p), podKey(q), t.TopologyKey, d)
				break
			}
		}
	}
}

func (c *checker) affinity(p *corev1.Pod, t corev1.PodAffinityTerm, selected []*corev1.Pod) {
	dp, ok := c.domain(p, t.TopologyKey)
	if !ok {
		return
	}
	others := 0
	for _, q := range selected {
		if q == p {
			continue
		}
		others++
		if dq, _ := c.domain(q, t.TopologyKey); len(dp) == 1 && len(dq) == 1 && dp[0] == dq[0] {
			return
		}
	}
	if others == 0 && selects(t.LabelSelector, p.Labels) {
		return
	}
	c.fail("pod %s has affinity on %s but shares no single domain with a matching pod (%d others, domain %v)", podKey(p), t.TopologyKey, others, dp)
}

func (c *checker) hostnameSpread(id string) {
	if !c.isNew[id] {
		return
	}
	counts := map[string]int{}
	for _, p := range c.onNode[id] {
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			if tsc.TopologyKey != v1.LabelHostname || tsc.WhenUnsatisfiable != corev1.DoNotSchedule || !selects(tsc.LabelSelector, p.Labels) {
				continue
			}
			key := p.Namespace + "\x00" + tsc.LabelSelector.String()
			counts[key]++
			if counts[key] > int(tsc.MaxSkew) {
				c.fail("%s holds %d pods that match their own hostname spread constraint %s, maxSkew %d", id, counts[key], tsc.LabelSelector, tsc.MaxSkew)
			}
		}
	}
}

func (c *checker) hostPorts(id string) {
	type use struct {
		ip, proto string
		port      int32
		pod       string
	}
	var uses []use
	for _, p := range c.onNode[id] {
		for _, ct := range p.Spec.Containers {
			for _, port := range ct.Ports {
				if port.HostPort <= 0 {
					continue
				}
				u := use{ip: port.HostIP, proto: string(port.Protocol), port: port.HostPort, pod: podKey(p)}
				if u.proto == "" {
					u.proto = string(corev1.ProtocolTCP)
				}
				for _, o := range uses {
					wild := o.ip == "" || o.ip == "0.0.0.0" || o.ip == "::" || u.ip == "" || u.ip == "0.0.0.0" || u.ip == "::"
					if o.port == u.port && o.proto == u.proto && o.pod != u.pod && (wild || o.ip == u.ip) {
						c.fail("%s: pods %s and %s both use host port %d/%s", id, o.pod, u.pod, u.port, u.proto)
					}
				}
				uses = append(uses, u)
			}
		}
	}
	for i := range c.in.DaemonSets {
		ds := &c.in.DaemonSets[i]
		spec := &ds.Spec.Template.Spec
		if len(spec.NodeSelector) > 0 || (spec.Affinity != nil && spec.Affinity.NodeAffinity != nil &&
			spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil) ||
			!tolerates(spec.Tolerations, c.taints[id]) || daemonBound(c.onNode[id], ds.Name) {
			continue
		}
		for _, ct := range spec.Containers {
			for _, port := range ct.Ports {
				if port.HostPort <= 0 {
					continue
				}
				proto := string(port.Protocol)
				if proto == "" {
					proto = string(corev1.ProtocolTCP)
				}
				for _, o := range uses {
					wild := o.ip == "" || o.ip == "0.0.0.0" || o.ip == "::" || port.HostIP == "" || port.HostIP == "0.0.0.0" || port.HostIP == "::"
					if o.port == port.HostPort && o.proto == proto && (wild || o.ip == port.HostIP) {
						c.fail("%s: pod %s uses host port %d/%s, which DaemonSet %s/%s binds on every node", id, o.pod, port.HostPort, proto, ds.Namespace, ds.Name)
					}
				}
			}
		}
	}
}

// daemonBound reports whether a pod of DaemonSet name is among pods.
func daemonBound(pods []*corev1.Pod, name string) bool {
	for _, p := range pods {
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" && o.Name == name {
				return true
			}
		}
	}
	return false
}

func (c *checker) limits(res scheduling.Result) {
	for i := range c.in.NodePools {
		np := &c.in.NodePools[i]
		if len(np.Spec.Limits) == 0 {
			continue
		}
		used := c.poolUsage(np, res)
		limits := corev1.ResourceList(np.Spec.Limits)
		for _, r := range sortedKeys(limits) {
			l := limits[corev1.ResourceName(r)]
			if u, ok := used[corev1.ResourceName(r)]; ok && u.Cmp(l) > 0 {
				c.fail("NodePool %s: %s limit %s exceeded: existing capacity plus the largest candidate of each new claim is %s", np.Name, r, l.String(), u.String())
			}
		}
	}
}

// poolUsage is what counts against np's limits after the plan, as
// Karpenter counts it: the capacity of every existing node of the pool
// (the Node's, else the NodeClaim's; marked for deletion too) plus, for
// each new claim of the pool, the element-wise largest capacity among its
// candidates (Karpenter subtracts the largest instance type option of an
// in-flight NodeClaim), and "nodes" as the number of both.
func (c *checker) poolUsage(np *v1.NodePool, res scheduling.Result) corev1.ResourceList {
	used := corev1.ResourceList{}
	nodes := int64(0)
	for _, n := range c.in.Nodes {
		var pool string
		var capacity corev1.ResourceList
		if n.NodeClaim != nil {
			pool, capacity = n.NodeClaim.Labels[v1.LabelNodePool], n.NodeClaim.Status.Capacity
		}
		if n.Node != nil {
			if l := n.Node.Labels[v1.LabelNodePool]; l != "" {
				pool = l
			}
			if len(n.Node.Status.Capacity) > 0 {
				capacity = n.Node.Status.Capacity
			}
		}
		if pool == np.Name {
			add(used, capacity)
			nodes++
		}
	}
	for _, cl := range res.NewClaims {
		if cl.NodePool != np.Name {
			continue
		}
		largest := corev1.ResourceList{}
		for _, t := range cl.InstanceTypes {
			if it := c.types[cl.NodeClass][t]; it != nil {
				maxInto(largest, it.Capacity)
			}
		}
		add(used, largest)
		nodes++
	}
	used[corev1.ResourceName("nodes")] = *resource.NewQuantity(nodes, resource.DecimalSI)
	return used
}

func sortedKeys[K ~string, V any](m map[K]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// termSelects reports whether affinity term t of pod p selects pod q
// (namespaces: the term's list, else p's own).
func termSelects(p *corev1.Pod, t corev1.PodAffinityTerm, q *corev1.Pod) bool {
	if len(t.Namespaces) == 0 {
		if q.Namespace != p.Namespace {
			return false
		}
	} else if !slices.Contains(t.Namespaces, q.Namespace) {
		return false
	}
	return selects(t.LabelSelector, q.Labels)
}
