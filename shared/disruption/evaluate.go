package disruption

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// node is one NodeClaim (with its Node when registered) as the evaluation
// sees it.
type node struct {
	idx   int // position in evaluation.nodes
	claim *v1.NodeClaim
	node  *corev1.Node // nil until registered
	pool  *v1.NodePool // nil when the pool is unknown
	class *v1.EC2NodeClass
	// className is the EC2NodeClass the NodeClaim (else its pool) names.
	className string
	types     []*catalog.InstanceType
	it        *catalog.InstanceType // nil when unknown
	// labels are the Node's labels, else the NodeClaim's.
	labels map[string]string

	pods          []*corev1.Pod // bound to the node or claim name
	nominated     []*corev1.Pod // unbound pods nominated to it
	reschedulable []*corev1.Pod

	initialized bool
	ready       bool
	deleting    bool
	price       float64
	priced      bool
	empty       bool
	savingRatio float64
	disruption  float64 // Karpenter's DisruptionCost

	block       string // stops every voluntary method
	blockEvent  string // Blocked.Event of block
	podBlock    string // stops graceful methods; drift too unless TGP is set (DisruptionBlocked)
	drift       string // drift reason, "" when not drifted
	driftDetail string
	driftSince  time.Time
	driftCheck  bool // driftOf ran: drift and driftDetail are its verdict

	commanded bool
	why       string // reported in Result.Blocked when not commanded
	whyEvent  string // Blocked.Event of why
}

// name is the node's name, or the NodeClaim's while it has none.
func (n *node) name() string {
	if n.node != nil {
		return n.node.Name
	}
	return n.claim.Name
}

func (n *node) poolName() string {
	if n.pool != nil {
		return n.pool.Name
	}
	return n.labels[v1.LabelNodePool]
}

// note records why n is left out and the event that reports it
// (Blocked.Event), keeping the first reason given.
func (n *node) note(event, format string, args ...any) {
	if n.why == "" {
		n.why = fmt.Sprintf(format, args...)
		n.whyEvent = event
	}
}

// candidate renders n for a command.
func (n *node) candidate() Candidate {
	c := Candidate{
		NodeClaim: n.claim.Name, NodePool: n.poolName(), ProviderID: n.claim.Status.ProviderID,
		InstanceType: n.labels[v1.LabelInstanceType], Zone: n.labels[v1.LabelTopologyZone],
		CapacityType: n.labels[v1.LabelCapacityType], PricePerHour: n.price,
		ReschedulablePods: len(n.reschedulable),
	}
	if n.node != nil {
		c.Node = n.node.Name
		if c.ProviderID == "" {
			c.ProviderID = n.node.Spec.ProviderID
		}
	}
	return c
}

// evaluation is the state of one Evaluate call.
type evaluation struct {
	in       Input
	now      time.Time
	pools    map[string]*v1.NodePool // defaulted copies
	poolList []v1.NodePool
	classes  map[string]*v1.EC2NodeClass

	nodes     []*node // sorted by NodeClaim name
	byName    map[string]*node
	unmanaged []*corev1.Node
	hosted    map[string][]*corev1.Pod // pods bound or nominated to an unmanaged node
	pending   []*corev1.Pod
	pdbs      []pdbLimit
	instances map[string]Instance
	inFlight  map[string]string // NodeClaim name → command ID

	poolHash  map[string]string
	classHash map[string][2]string // hash, version

	available    budgets
	budgetReport []BudgetStatus
	acted        Method

	// solves counts the simulations run; bnd caches cannotConsolidate's
	// bounds; noBounds turns that check off (tests compare both ways).
	solves   int
	bnd      *bounds
	noBounds bool
	// prepared is the solver's reusable preparation (see solve).
	prepared *scheduling.Prepared
	sim      simState
	// typeIndex maps a node class's instance types by name (typesOf).
	typeIndex map[string]map[string]*catalog.InstanceType
}

// Evaluate decides what Karpenter's disruption controller would start at
// in.Now (karpenter-spec §5.3, §6, §7), in Karpenter's order: Emptiness,
// Drift, multi-node then single-node consolidation; the first that yields
// a command acts alone. Expiration is reported in every evaluation (see
// Result). It performs no I/O and reads no clock; the same Input always
// yields the same Result.
//
// Candidates must be managed (a NodeClaim with a registered Node), initialized,
// not being deleted or in flight, of a known non-static NodePool, without
// karpenter.sh/do-not-disrupt "true" on the Node or NodeClaim, not
// nominated; their active pods must not carry an active do-not-disrupt
// annotation nor be blocked by a PodDisruptionBudget, except that Drift
// proceeds past pods when the NodeClaim has a terminationGracePeriod
// (karpenter-spec §6.2). Emptiness and consolidation also need
// consolidateAfter elapsed since the NodeClaim's last pod event or its
// initialization, and consolidation needs consolidationPolicy other than
// WhenEmpty, a known price, and savings (karpenter-spec §6.4). Every
// budgeted method stays within the budgets of §6.3.
//
// The error is for invalid input (duplicate names, an invalid
// PodDisruptionBudget selector), a failed simulation or a cancelled ctx;
// blocked candidates are a normal outcome.
func Evaluate(ctx context.Context, in Input) (Result, error) {
	res, _, err := evaluate(ctx, in, false)
	return res, err
}

// evaluate is Evaluate, also returning how many simulations it ran;
// noBounds makes consolidation simulate every candidate set, without the
// cannotConsolidate shortcut.
func evaluate(ctx context.Context, in Input, noBounds bool) (Result, int, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, 0, err
	}
	e, err := newEvaluation(in)
	if err != nil {
		return Result{}, 0, err
	}
	e.noBounds = noBounds
	res := Result{Commands: []Command{}, Blocked: []Blocked{}}
	expired := e.expire()
	expired = append(expired, e.expireCapacityBlocks()...)
	e.available, e.budgetReport = e.computeBudgets()
	if err := e.assess(); err != nil {
		return Result{}, 0, err
	}
	// fingerprint is set once consolidation is reached (after emptiness
	// and drift found nothing) and simulates.
	fingerprint, consolidating := "", false
	for _, m := range methods() {
		if m.reason() == MethodUnderutilized && !consolidating {
			consolidating = true
			if fingerprint, err = e.consolidationFingerprint(); err != nil {
				return Result{}, 0, err
			}
			if in.Consolidated.standsAt(fingerprint, e.now) {
				e.restore(in.Consolidated)
				res.ConsolidationSkipped, res.Consolidated = true, in.Consolidated
				break
			}
		}
		cmds, err := m.compute(ctx, e)
		if err != nil {
			return Result{}, 0, err
		}
		if len(cmds) > 0 {
			e.acted = m.reason()
			res.Commands = append(res.Commands, cmds...)
			break
		}
	}
	res.Commands = append(res.Commands, expired...)
	res.Blocked = e.blocked()
	if consolidating && !res.ConsolidationSkipped && e.acted == "" {
		res.Consolidated = &Consolidated{Fingerprint: fingerprint, EvaluatedAt: e.now, Reasons: res.Blocked}
	}
	res.Budgets = e.budgetReport
	if res.Budgets == nil {
		res.Budgets = []BudgetStatus{}
	}
	res.Drift = e.driftReport()
	res.Inconsistencies = e.inconsistencies()
	return res, e.solves, nil
}

// newEvaluation indexes the snapshot.
func newEvaluation(in Input) (*evaluation, error) {
	e := &evaluation{
		in: in, now: in.Now, pools: map[string]*v1.NodePool{}, classes: map[string]*v1.EC2NodeClass{},
		byName: map[string]*node{}, hosted: map[string][]*corev1.Pod{}, instances: map[string]Instance{},
		inFlight: map[string]string{}, poolHash: map[string]string{}, classHash: map[string][2]string{},
		typeIndex: map[string]map[string]*catalog.InstanceType{},
	}
	e.poolList = make([]v1.NodePool, len(in.NodePools))
	for i := range in.NodePools {
		np := in.NodePools[i]
		if b := np.Spec.Disruption.Budgets; b != nil {
			// SetDefaults writes into budgets: work on a copy, keeping an
			// explicit empty list (no limit) apart from an absent one.
			np.Spec.Disruption.Budgets = append(make([]v1.Budget, 0, len(b)), b...)
		}
		np.SetDefaults()
		e.poolList[i] = np
	}
	sort.Slice(e.poolList, func(i, j int) bool { return e.poolList[i].Name < e.poolList[j].Name })
	for i := range e.poolList {
		if i > 0 && e.poolList[i-1].Name == e.poolList[i].Name {
			return nil, fmt.Errorf("nodepool %s: listed twice", e.poolList[i].Name)
		}
		e.pools[e.poolList[i].Name] = &e.poolList[i]
	}
	for i := range in.NodeClasses {
		nc := &in.NodeClasses[i]
		if _, dup := e.classes[nc.Name]; dup {
			return nil, fmt.Errorf("ec2nodeclass %s: listed twice", nc.Name)
		}
		e.classes[nc.Name] = nc
	}
	for _, inst := range in.Instances {
		e.instances[inst.ProviderID] = inst
	}
	for _, c := range in.InFlight {
		for _, cand := range c.Candidates {
			e.inFlight[cand.NodeClaim] = c.ID
		}
	}

	nodesByName := map[string]bool{}
	for i := range in.Nodes {
		if nodesByName[in.Nodes[i].Name] {
			return nil, fmt.Errorf("node %s: listed twice", in.Nodes[i].Name)
		}
		nodesByName[in.Nodes[i].Name] = true
	}
	nodeOf := claimNodes(in.Nodes)
	claims := make([]*v1.NodeClaim, len(in.NodeClaims))
	for i := range in.NodeClaims {
		claims[i] = &in.NodeClaims[i]
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	owned := map[string]bool{}
	for i, c := range claims {
		if i > 0 && claims[i-1].Name == c.Name {
			return nil, fmt.Errorf("nodeclaim %s: listed twice", c.Name)
		}
		n := &node{idx: len(e.nodes), claim: c, node: nodeOf(c)}
		if n.node != nil {
			if owned[n.node.Name] {
				return nil, fmt.Errorf("node %s: claimed by more than one NodeClaim", n.node.Name)
			}
			owned[n.node.Name] = true
			n.labels = n.node.Labels
		} else {
			n.labels = c.Labels
		}
		if n.labels == nil {
			n.labels = map[string]string{}
		}
		e.nodes = append(e.nodes, n)
		e.byName[c.Name] = n
		if n.node != nil {
			e.byName[n.node.Name] = n
		}
	}
	for i := range in.Nodes {
		if !owned[in.Nodes[i].Name] {
			e.unmanaged = append(e.unmanaged, &in.Nodes[i])
		}
	}
	sort.Slice(e.unmanaged, func(i, j int) bool { return e.unmanaged[i].Name < e.unmanaged[j].Name })

	all := make([]*corev1.Pod, len(in.Pods))
	for i := range in.Pods {
		all[i] = &in.Pods[i]
	}
	sort.SliceStable(all, func(i, j int) bool { return podName(all[i]) < podName(all[j]) })
	for _, p := range all {
		switch {
		case p.Spec.NodeName != "":
			if n := e.byName[p.Spec.NodeName]; n != nil {
				n.pods = append(n.pods, p)
			} else {
				e.hosted[p.Spec.NodeName] = append(e.hosted[p.Spec.NodeName], p)
			}
		case p.Status.NominatedNodeName != "":
			if n := e.byName[p.Status.NominatedNodeName]; n != nil {
				n.nominated = append(n.nominated, p)
			} else {
				e.hosted[p.Status.NominatedNodeName] = append(e.hosted[p.Status.NominatedNodeName], p)
			}
		case active(p) && provisionable(p):
			e.pending = append(e.pending, p)
		}
	}
	var err error
	if e.pdbs, err = newPDBLimits(in.PodDisruptionBudgets, all); err != nil {
		return nil, err
	}
	for _, n := range e.nodes {
		e.describe(n)
	}
	return e, nil
}

// provisionable reports a pending pod Karpenter would provision for:
// PodScheduled False/Unschedulable, or no PodScheduled condition yet
// (karpenter-spec §3.1; nominated and bound pods are handled apart).
func provisionable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return true
}

// describe fills the facts of n that do not depend on other nodes.
func (e *evaluation) describe(n *node) {
	c := n.claim
	n.pool = e.pools[c.Labels[v1.LabelNodePool]]
	if n.pool == nil {
		n.pool = e.pools[n.labels[v1.LabelNodePool]]
	}
	className := ""
	if c.Spec.NodeClassRef != nil {
		className = c.Spec.NodeClassRef.Name
	} else if n.pool != nil && n.pool.Spec.Template.Spec.NodeClassRef != nil {
		className = n.pool.Spec.Template.Spec.NodeClassRef.Name
	}
	n.className = className
	n.class = e.classes[className]
	n.types = e.in.InstanceTypes[className]
	typeName := n.labels[v1.LabelInstanceType]
	for _, it := range n.types {
		if it.Name == typeName {
			n.it = it
			break
		}
	}
	n.price, n.priced = offeringPrice(n.it, n.labels)
	n.ready = n.node != nil && v1.NodeReady(n.node)
	n.initialized = n.node != nil && initializedNote(n) == ""
	n.deleting = c.DeletionTimestamp != nil || (n.node != nil && n.node.DeletionTimestamp != nil)
	if n.deleting {
		n.note(noEvent, "already being deleted")
	} else if id, ok := e.inFlight[c.Name]; ok {
		n.deleting = true
		n.note(noEvent, "already a candidate of in-flight command %s", id)
	}
	for _, p := range n.pods {
		if reschedulable(p) {
			n.reschedulable = append(n.reschedulable, p)
		}
	}
	n.empty = true
	for _, p := range n.reschedulable {
		if evictionCost(p) > 0 {
			n.empty = false
		}
	}
	n.savingRatio = n.price / rescheduleCost(n.reschedulable)
	n.disruption = disruptionCost(n.reschedulable, c, e.now)
}

// offeringPrice is the price of the cheapest offering of it matching the
// node's zone and capacity type (karpenter: getCandidatePrices). A
// reserved node whose reservation is no longer offered is free.
func offeringPrice(it *catalog.InstanceType, labels map[string]string) (float64, bool) {
	if it == nil {
		return 0, false
	}
	zone, ct := labels[v1.LabelTopologyZone], labels[v1.LabelCapacityType]
	best, ok := it.Offerings.Compatible(
		func(z string) bool { return z == zone },
		func(c string) bool { return c == ct },
	).Cheapest()
	if !ok {
		return 0, ct == v1.CapacityTypeReserved
	}
	return best.Price, true
}

// initializedNote returns why a registered node is not initialized, or "":
// its NodeClaim is Initialized (or the Node carries
// karpenter.sh/initialized=true) and no startup taint of the NodeClaim nor
// the unregistered taint is left on the Node (karpenter-spec §5.1).
func initializedNote(n *node) string {
	if n.node == nil {
		return "not registered: no Node has joined for this NodeClaim yet"
	}
	for _, t := range n.claim.Spec.StartupTaints {
		if hasTaint(n.node.Spec.Taints, t.Key, t.Effect) {
			return fmt.Sprintf("not initialized: startup taint %s:%s is still on the Node", t.Key, t.Effect)
		}
	}
	if hasTaint(n.node.Spec.Taints, v1.TaintKeyUnregistered, "") {
		return fmt.Sprintf("not initialized: the Node still carries %s", v1.TaintKeyUnregistered)
	}
	if meta.IsStatusConditionTrue(n.claim.Status.Conditions, v1.ConditionTypeInitialized) || n.node.Labels[v1.LabelInitialized] == "true" {
		return ""
	}
	return "not initialized: the NodeClaim's Initialized condition is not True"
}

func hasTaint(taints []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	for _, t := range taints {
		if t.Key == key && (effect == "" || t.Effect == effect) {
			return true
		}
	}
	return false
}

// driftReport is Result.Drift: the nodes whose drift was checked, by
// NodeClaim name.
func (e *evaluation) driftReport() []DriftStatus {
	var out []DriftStatus
	for _, n := range e.nodes {
		if n.driftCheck {
			out = append(out, DriftStatus{NodeClaim: n.claim.Name, Reason: n.drift, Detail: n.driftDetail})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeClaim < out[j].NodeClaim })
	return out
}

// blocked lists the NodeClaims no command includes.
func (e *evaluation) blocked() []Blocked {
	out := []Blocked{}
	for _, n := range e.nodes {
		if n.commanded {
			continue
		}
		b := Blocked{NodeClaim: n.claim.Name, NodePool: n.poolName()}
		b.Reason, b.Event = e.finalReason(n)
		if n.node != nil {
			b.Node = n.node.Name
		}
		out = append(out, b)
	}
	return out
}

// finalReason is the reason recorded for n, or the most specific rule
// that applied when no method recorded one, and its Blocked.Event.
func (e *evaluation) finalReason(n *node) (why, event string) {
	switch {
	case n.why != "":
		return n.why, n.whyEvent
	case n.podBlock != "":
		return n.podBlock, EventDisruptionBlocked
	case n.drift != "" && e.acted == MethodDrifted:
		return fmt.Sprintf("drifted (%s): waiting, drift starts one command per evaluation", n.drift), noEvent
	case n.drift != "" && e.acted != "":
		return fmt.Sprintf("drifted (%s) but not evaluated: the %s method acted in this evaluation (one method per evaluation)", n.drift, e.acted), noEvent
	}
	if r, ev := e.consolidationBlock(n, false); r != "" {
		return r, ev
	}
	if e.acted != "" {
		return fmt.Sprintf("not evaluated: the %s method acted in this evaluation (one method per evaluation)", e.acted), noEvent
	}
	return "no disruption: not drifted or expired, and consolidation found nothing to gain", noEvent
}

// commandID names a command deterministically from its content:
// "<verb>-<first candidate>-<8 hex of SHA-256>", at most 80 characters of
// [A-Za-z0-9-_], usable as a Step Functions execution name.
func commandID(c *Command) string {
	verb := map[Method]string{MethodEmpty: "empty", MethodDrifted: "drift", MethodUnderutilized: "consolidate", MethodExpired: "expire", MethodCapacityBlockExpiring: "cbexpire"}[c.Method]
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", c.Method, c.Decision)
	for _, cand := range c.Candidates {
		fmt.Fprintf(h, "%s\x00", cand.NodeClaim)
	}
	for _, r := range c.Replacements {
		fmt.Fprintf(h, "%s\x00", strings.Join(r.InstanceTypes, ","))
	}
	first := ""
	if len(c.Candidates) > 0 {
		first = c.Candidates[0].NodeClaim
	}
	return idOf(verb, first, hex.EncodeToString(h.Sum(nil))[:8])
}

// idOf is "<verb>-<first>-<sum>", first with every character outside
// [A-Za-z0-9-_] turned into '-' and cut so the whole fits 80 characters.
func idOf(verb, first, sum string) string {
	first = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, first)
	if room := 80 - len(verb) - len(sum) - 2; len(first) > room {
		first = first[:room]
	}
	return verb + "-" + first + "-" + sum
}

// finish fills a command's derived fields and marks its candidates.
func (e *evaluation) finish(c *Command, cands []*node) Command {
	pools := map[string]bool{}
	for _, n := range cands {
		c.Candidates = append(c.Candidates, n.candidate())
		pools[n.poolName()] = true
		n.commanded = true
	}
	if len(pools) == 1 {
		c.NodePool = c.Candidates[0].NodePool
	}
	if c.Replacements == nil {
		c.Replacements = []Replacement{}
	}
	c.SavingsPerHour = math.Round(c.SavingsPerHour*1e6) / 1e6
	c.ID = commandID(c)
	return *c
}

// names lists the NodeClaim names of ns.
func names(ns []*node) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.claim.Name
	}
	return strings.Join(out, ", ")
}
