package disruption

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// MethodManual is the method of an operator's replacement by hand
// (Manual). It is not one of Karpenter's disruption reasons: no budget
// names it and Evaluate never yields it.
const MethodManual Method = "Manual"

// ManualRequest is an operator's request to replace nodes by hand
// (nodewright replace).
type ManualRequest struct {
	// Nodes names the nodes to replace, each by its Node or its NodeClaim
	// name; at least one, none twice.
	Nodes []string `json:"nodes"`
	// ForceAfter is how long the drain honours PodDisruptionBudgets
	// before it deletes the pods they protect; 0 never forces. Not
	// negative.
	ForceAfter time.Duration `json:"forceAfter"`
}

// ManualPlan is what a manual replacement will do, computed without
// starting anything (the dry-run report is this value).
type ManualPlan struct {
	// Commands are the replacements to carry out, one per requested node
	// in request order: Method MethodManual, Budgeted false, ID
	// "manual-<nodeclaim>-<8 hex>" (ManualID). Each replaces through the
	// same simulation and launch plan as a Drifted command; when the
	// simulation places every pod on existing nodes it launches nothing
	// (DecisionDelete).
	Commands []Command `json:"commands"`
	// Nodes is the report per command, in the same order.
	Nodes []ManualNode `json:"nodes"`
	// Budgets are the disruption budgets of the requested nodes' pools at
	// Input.Now, for the operator: a manual replacement consumes none of
	// them.
	Budgets []BudgetStatus `json:"budgets"`
}

// ManualNode is the dry-run report of one requested node.
type ManualNode struct {
	// Command is the ID of the node's command.
	Command   string `json:"command"`
	NodeClaim string `json:"nodeClaim"`
	Node      string `json:"node"`
	NodePool  string `json:"nodePool"`
	// Moving are the pods the drain evicts that need a new home
	// (namespace/name, sorted): not DaemonSet, mirror or terminal pods.
	Moving []string `json:"moving"`
	// DoNotDisrupt says, per pod, why automatic disruption must not touch
	// it (karpenter.sh/do-not-disrupt); the manual drain evicts these pods
	// too.
	DoNotDisrupt []string `json:"doNotDisrupt"`
	// PDBBlocked says, per pod, which PodDisruptionBudget refuses its
	// eviction now: the drain waits for it, and only ForceAfter goes past
	// it.
	PDBBlocked []string `json:"pdbBlocked"`
}

// Refusal is one requested node Manual refuses, and why.
type Refusal struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// RefusedError is Manual's error when it refuses any requested node: it
// names every refused node at once, and no command is planned for the
// others (nothing starts half done).
type RefusedError struct {
	Refusals []Refusal
}

func (e *RefusedError) Error() string {
	parts := make([]string, len(e.Refusals))
	for i, r := range e.Refusals {
		parts[i] = r.Node + ": " + r.Reason
	}
	return fmt.Sprintf("refused %d node(s): %s", len(e.Refusals), strings.Join(parts, "; "))
}

// ErrInvalidManualRequest is wrapped by Manual's errors about the request
// itself (no node, a node named twice, a negative ForceAfter).
var ErrInvalidManualRequest = errors.New("invalid manual replacement request")

// Manual plans the replacement by hand of the nodes req names, at in.Now,
// from the same snapshot Evaluate reads. Each node is simulated the way
// Drift simulates its candidate (its pods, and those of the requested
// nodes before it, must all reschedule onto the rest of the cluster plus
// new NodeClaims), and its replacements are the launch model's plan for
// those NodeClaims. Unlike the automatic methods it goes past
// do-not-disrupt (on pods, the Node or the NodeClaim), PodDisruptionBudgets
// and budgets: it reports them (ManualNode, ManualPlan.Budgets) and
// consumes no budget.
//
// It refuses, with a *RefusedError naming every such node, a node
// nodewright does not own (no NodeClaim of in claims it), one not
// initialized, one already being deleted or a candidate of a command in
// flight, a replacement still held by its command, one of an unknown or
// static NodePool, and one whose pods cannot all reschedule. Invalid
// requests wrap ErrInvalidManualRequest; invalid snapshots and failed
// simulations are other errors. It performs no I/O and reads no clock.
func Manual(ctx context.Context, in Input, req ManualRequest) (ManualPlan, error) {
	if err := ctx.Err(); err != nil {
		return ManualPlan{}, err
	}
	if len(req.Nodes) == 0 {
		return ManualPlan{}, fmt.Errorf("%w: nodes: at least one node is required", ErrInvalidManualRequest)
	}
	if req.ForceAfter < 0 {
		return ManualPlan{}, fmt.Errorf("%w: forceAfter: %s is negative", ErrInvalidManualRequest, req.ForceAfter)
	}
	e, err := newEvaluation(in)
	if err != nil {
		return ManualPlan{}, err
	}
	e.available, e.budgetReport = e.computeBudgets()

	var refused []Refusal
	seen := map[*node]string{}
	cands := make([]*node, 0, len(req.Nodes))
	for _, name := range req.Nodes {
		n := e.byName[name]
		if n == nil {
			refused = append(refused, Refusal{Node: name, Reason: "nodewright does not own it: no NodeClaim of nodewright's records names this Node or NodeClaim"})
			continue
		}
		if first, dup := seen[n]; dup {
			return ManualPlan{}, fmt.Errorf("%w: nodes: %q and %q name the same NodeClaim %s", ErrInvalidManualRequest, first, name, n.claim.Name)
		}
		seen[n] = name
		if why := e.manualBlock(n); why != "" {
			refused = append(refused, Refusal{Node: name, Reason: why})
			continue
		}
		cands = append(cands, n)
	}
	if len(refused) > 0 {
		return ManualPlan{}, &RefusedError{Refusals: refused}
	}

	plan := ManualPlan{Commands: []Command{}, Nodes: []ManualNode{}, Budgets: []BudgetStatus{}}
	pools := map[string]bool{}
	for _, n := range cands {
		if err := ctx.Err(); err != nil {
			return ManualPlan{}, err
		}
		sim, why, err := e.simulate(ctx, []*node{n})
		if err != nil {
			return ManualPlan{}, err
		}
		c := Command{Method: MethodManual, Decision: DecisionDelete, SavingsPerHour: n.price}
		for _, nc := range sim.claims {
			if why != "" {
				break
			}
			r, rwhy, err := e.replacement(nc, nil, nil)
			if err != nil {
				return ManualPlan{}, err
			}
			why = rwhy
			c.Replacements = append(c.Replacements, r)
			c.SavingsPerHour -= r.Expected.PricePerHour
		}
		if why != "" {
			refused = append(refused, Refusal{Node: seen[n], Reason: why})
			continue
		}
		if len(c.Replacements) > 0 {
			c.Decision = DecisionReplace
		}
		c.Reason = fmt.Sprintf("manual replacement of NodeClaim %s requested by an operator; its pods reschedule with %d replacement NodeClaim(s)",
			n.claim.Name, len(c.Replacements))
		cmd := e.finish(&c, []*node{n})
		cmd.ID = ManualID(n.claim.Name, req)
		plan.Commands = append(plan.Commands, cmd)
		plan.Nodes = append(plan.Nodes, e.manualReport(n, cmd.ID))
		pools[n.poolName()] = true
		// The nodes after it see it leaving, as they will once its
		// execution runs.
		n.deleting = true
		e.sim.leaving = append(e.sim.leaving, n.idx)
		e.simNodes()[n.idx].MarkedForDeletion = true
	}
	if len(refused) > 0 {
		return ManualPlan{}, &RefusedError{Refusals: refused}
	}
	for _, st := range e.budgetReport {
		if pools[st.NodePool] {
			plan.Budgets = append(plan.Budgets, st)
		}
	}
	return plan, nil
}

// manualBlock returns why n cannot be replaced by hand, or "".
func (e *evaluation) manualBlock(n *node) string {
	switch {
	case n.deleting && n.why != "":
		return n.why
	case n.deleting:
		return "already being deleted"
	case n.node == nil:
		return "not registered: no Node has joined for this NodeClaim yet"
	}
	if why := initializedNote(n); why != "" {
		return why
	}
	if n.pool == nil {
		return fmt.Sprintf("NodePool %q not found", n.labels[v1.LabelNodePool])
	}
	if n.pool.Spec.Replicas != nil {
		return fmt.Sprintf("NodePool %s is static (spec.replicas); nodewright does not replace nodes of static pools", n.pool.Name)
	}
	if cmd, ok := e.in.HeldReplacements[n.claim.Name]; ok {
		return fmt.Sprintf("replacement launched by command %s, which is still in flight", cmd)
	}
	return ""
}

// manualReport is the dry-run report of n, whose command is id.
func (e *evaluation) manualReport(n *node, id string) ManualNode {
	r := ManualNode{Command: id, NodeClaim: n.claim.Name, Node: n.name(), NodePool: n.poolName(),
		Moving: []string{}, DoNotDisrupt: []string{}, PDBBlocked: []string{}}
	for _, p := range n.reschedulable {
		r.Moving = append(r.Moving, podName(p))
	}
	if n.node.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
		r.DoNotDisrupt = append(r.DoNotDisrupt, fmt.Sprintf("the Node is annotated %s: \"true\"", v1.AnnotationDoNotDisrupt))
	}
	if n.claim.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
		r.DoNotDisrupt = append(r.DoNotDisrupt, fmt.Sprintf("the NodeClaim is annotated %s: \"true\"", v1.AnnotationDoNotDisrupt))
	}
	for _, p := range n.pods {
		if why := doNotDisrupt(p, e.now); why != "" {
			r.DoNotDisrupt = append(r.DoNotDisrupt, why)
		}
		if !evictable(p) {
			continue
		}
		if why := blocksEviction(e.pdbs, p); why != "" {
			r.PDBBlocked = append(r.PDBBlocked, why)
		}
	}
	slices.Sort(r.Moving)
	return r
}

// ManualID is the command ID, and the execution name, of the manual
// replacement of nodeClaim under req: "manual-<nodeclaim>-<8 hex>", the
// hex of a SHA-256 over the NodeClaim, the request's sorted node names and
// its ForceAfter in seconds, at most 80 characters of [A-Za-z0-9-_]. It
// depends on nothing else (not the snapshot, not the clock, not who asks),
// so a retried or redelivered request names the same execution and Step
// Functions starts it once.
func ManualID(nodeClaim string, req ManualRequest) string {
	nodes := slices.Clone(req.Nodes)
	slices.Sort(nodes)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", MethodManual, nodeClaim)
	for _, n := range nodes {
		fmt.Fprintf(h, "%s\x00", n)
	}
	h.Write([]byte(strconv.FormatInt(int64(req.ForceAfter/time.Second), 10)))
	return idOf("manual", nodeClaim, hex.EncodeToString(h.Sum(nil))[:8])
}
