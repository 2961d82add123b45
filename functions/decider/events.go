package decider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/disruption"
)

// Event reasons the decider records (karpenter: pkg/events/reason.go;
// karpenter-spec.md sections 6.2, 6.3 and 10.2): disruption.Blocked.Event's
// values.
const (
	ReasonDisruptionBlocked      = disruption.EventDisruptionBlocked
	ReasonUnconsolidatable       = disruption.EventUnconsolidatable
	ReasonConsolidationCandidate = "ConsolidationCandidate"
	ReasonFailedConsistencyCheck = "FailedConsistencyCheck"
)

// How often the decider records the same event again, per reason: the ID
// of a decision event names the window of now it falls in, so an
// evaluation every 10 s or every minute records a still-blocked node once
// per window. They are Karpenter's dedupe timeouts for the same events
// (its recorder publishes an event again for the same reason and object
// only once the timeout since the last one passed; karpenter:
// pkg/events/recorder.go, 2 minutes unless an event sets its own;
// pkg/controllers/disruption/events/events.go: Unconsolidatable 15
// minutes, a NodePool's DisruptionBlocked for a disruption reason 1
// minute). A record's TTL is its window, so at most two records per
// object and message (this window's and the last one's) are listed at a
// time.
const (
	// BlockedWindow is DisruptionBlocked's on a Node and its NodeClaim.
	BlockedWindow = 2 * time.Minute
	// UnconsolidatableWindow is Unconsolidatable's.
	UnconsolidatableWindow = 15 * time.Minute
	// NodePoolBlockedWindow is DisruptionBlocked's on a NodePool, per
	// disruption reason.
	NodePoolBlockedWindow = time.Minute
	// CandidateWindow is ConsolidationCandidate's.
	CandidateWindow = 2 * time.Minute
)

// ConsistencyScanPeriod is how often a FailedConsistencyCheck finding is
// recorded again: Karpenter's consistency controller checks each NodeClaim
// every 10 minutes (karpenter-spec.md section 5; karpenter:
// pkg/controllers/nodeclaim/consistency scanPeriod).
const ConsistencyScanPeriod = 10 * time.Minute

// decisionEvents are the event records of an evaluation (Karpenter's
// disruption controller's events), at most one pair per NodeClaim: one on
// its Node and one on the NodeClaim, as Karpenter writes them, in one
// record (ddbstore.Event.OnNodeClaim: one write, not two) (karpenter:
// pkg/controllers/disruption/events.go Blocked and Unconsolidatable; the
// NodeClaim's DisruptionBlocked reads "Cannot disrupt NodeClaim: ...",
// Unconsolidatable reads the same on both). A blocked NodeClaim's event is
// its disruption.Blocked.Event, which the evaluation sets where it decides
// the reason; the reason's wording decides nothing:
//
//   - DisruptionBlocked on the Node of a NodeClaim that may not be
//     disrupted at all now: not initialized, do-not-disrupt on the Node,
//     NodeClaim or a pod, a PodDisruptionBudget that allows no eviction,
//     nominated, an unknown or static NodePool, or a drift whose pods
//     cannot move (karpenter: disruption.NewCandidate; karpenter-spec.md
//     section 6.2);
//   - Unconsolidatable on the Node of a consolidation candidate that
//     consolidation cannot act on: consolidation disabled, WhenEmpty with
//     pods, not priced, no cheaper replacement, spot-to-spot, its pods not
//     fitting (karpenter: consolidation.ShouldDisrupt and
//     computeConsolidation);
//   - DisruptionBlocked on the NodePool, for each reason its budget allows
//     no disruption of while it has nodes (karpenter-spec.md section 6.3:
//     "No allowed disruptions for disruption reason ... due to blocking
//     budget");
//   - ConsolidationCandidate on the Node and the NodeClaim of every
//     candidate of an Underutilized (single- or multi-node consolidation)
//     command, when the command is computed, as Karpenter v1.14 does
//     (karpenter: pkg/controllers/disruption Command.EmitCandidateEvents):
//     "Consolidation candidate: <command> (savings: $<x.xx>)", where
//     <command> is, for a single candidate, "Underutilized/<command ID>:
//     <decision>: nodepools=[<pool>]: [<node>] (savings: $<x.xx>)" with
//     " -> [1 replacement]" before the savings of a replace, and for one of
//     several candidates "<decision>: [<node>] (part of <n>-node
//     consolidation)"; the savings are Command.SavingsPerHour (the
//     candidates' price minus the replacement's expected price, per hour);
//   - FailedConsistencyCheck (Warning) on the NodeClaim only, for each
//     finding of Karpenter's consistency checks (disruption.Inconsistency:
//     a Node short of the capacity its NodeClaim expects, a deleting
//     NodeClaim whose drain a PodDisruptionBudget blocks), once per
//     ConsistencyScanPeriod as Karpenter's nodeclaim.consistency
//     controller scans (its ID names the period, so the forwarder's
//     correlator counts the repeats on one Event).
//
// Nothing is recorded for a NodeClaim kept out by a spent budget (its
// pool's event says it), by another method acting, by an execution in
// flight, while consolidateAfter runs, or when there is simply nothing to
// gain. IDs name the reason, the object, the window of now (its length is
// the reason's Karpenter dedupe timeout: BlockedWindow, ...) and the
// message, so a decision repeated within its window is one record, which
// recordDecisionEvents writes once.
func decisionEvents(res disruption.Result, now time.Time) []decisionEvent {
	var out []decisionEvent
	// id is the ID of a record of key in the window of now and, when its
	// message is part of the key, the message's digest.
	id := func(window time.Duration, msg string, byMessage bool, key ...string) string {
		parts := append(key[:len(key):len(key)], now.UTC().Truncate(window).Format("20060102T1504"))
		if byMessage {
			parts = append(parts, digest(msg))
		}
		return strings.Join(parts, ":")
	}
	// add records e under the ID of key (see id).
	add := func(window time.Duration, e ddbstore.Event, byMessage bool, key ...string) {
		e.ID, e.Time = id(window, e.Message, byMessage, key...), now
		if e.Type == "" {
			e.Type = "Normal"
		}
		out = append(out, decisionEvent{Event: e, Window: window})
	}
	// addPair records e on its Node and, in the same record
	// (ddbstore.Event.OnNodeClaim), on its NodeClaim with claimMsg, each
	// under the ID its own record would have: its reason and the
	// NodeClaim's name, after "nodeclaim" for the NodeClaim's.
	addPair := func(window time.Duration, e ddbstore.Event, claimMsg string) {
		e.OnNodeClaim = &ddbstore.NodeClaimEvent{ID: id(window, claimMsg, true, e.Reason, "nodeclaim", e.NodeClaim)}
		if claimMsg != e.Message {
			e.OnNodeClaim.Message = claimMsg
		}
		add(window, e, true, e.Reason, e.NodeClaim)
	}
	for _, b := range res.Blocked {
		reason := b.Event
		if reason == "" || b.Node == "" {
			continue
		}
		window := UnconsolidatableWindow
		nodeMsg, claimMsg := sentence(b.Reason), sentence(b.Reason)
		if reason == ReasonDisruptionBlocked {
			window = BlockedWindow
			nodeMsg, claimMsg = "Cannot disrupt Node: "+b.Reason, "Cannot disrupt NodeClaim: "+b.Reason
		}
		addPair(window, ddbstore.Event{Reason: reason, Message: nodeMsg, NodeClaim: b.NodeClaim, Node: b.Node}, claimMsg)
	}
	for _, cmd := range res.Commands {
		if cmd.Method != disruption.MethodUnderutilized {
			continue
		}
		for _, c := range cmd.Candidates {
			msg := fmt.Sprintf("Consolidation candidate: %s (savings: $%.2f)", candidateCommand(cmd, c), cmd.SavingsPerHour)
			e := ddbstore.Event{Reason: ReasonConsolidationCandidate, Message: msg, NodeClaim: c.NodeClaim}
			if c.Node == "" {
				add(CandidateWindow, e, true, ReasonConsolidationCandidate, "nodeclaim", c.NodeClaim)
				continue
			}
			e.Node = c.Node
			addPair(CandidateWindow, e, msg)
		}
	}
	for _, inc := range res.Inconsistencies {
		add(ConsistencyScanPeriod, ddbstore.Event{Type: "Warning", Reason: ReasonFailedConsistencyCheck, Message: inc.Message, NodeClaim: inc.NodeClaim},
			true, ReasonFailedConsistencyCheck, "nodeclaim", inc.NodeClaim)
	}
	for _, st := range res.Budgets {
		if st.Allowed != 0 || st.Nodes == 0 {
			continue
		}
		add(NodePoolBlockedWindow, ddbstore.Event{Reason: ReasonDisruptionBlocked, NodePool: st.NodePool,
			Message: fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget", st.Reason)},
			false, ReasonDisruptionBlocked, "nodepool", st.NodePool, string(st.Reason))
	}
	return out
}

// decisionEvent is one event record of an evaluation and its window.
type decisionEvent struct {
	ddbstore.Event
	// Window is how often the record is written again while the decision
	// stands (BlockedWindow, ...): the window of now its ID names, and the
	// record's TTL.
	Window time.Duration
}

// candidateCommand is cmd as the ConsolidationCandidate event of its
// candidate c names it (karpenter: Command.StringForNode and
// Command.String; see decisionEvents).
func candidateCommand(cmd disruption.Command, c disruption.Candidate) string {
	name := func(c disruption.Candidate) string {
		if c.Node != "" {
			return c.Node
		}
		return c.NodeClaim
	}
	if len(cmd.Candidates) > 1 {
		return fmt.Sprintf("%s: [%s] (part of %d-node consolidation)", cmd.Decision, name(c), len(cmd.Candidates))
	}
	var pools []string
	for _, c := range cmd.Candidates {
		if !slices.Contains(pools, c.NodePool) {
			pools = append(pools, c.NodePool)
		}
	}
	to := ""
	if n := len(cmd.Replacements); n == 1 {
		to = " -> [1 replacement]"
	} else if n > 1 {
		to = fmt.Sprintf(" -> [%d replacements]", n)
	}
	return fmt.Sprintf("%s/%s: %s: nodepools=[%s]: [%s]%s (savings: $%.2f)",
		cmd.Method, cmd.ID, cmd.Decision, strings.Join(pools, ","), name(c), to, cmd.SavingsPerHour)
}

// sentence upper-cases the first letter of s.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// digest is 8 hexadecimal digits of s's SHA-256.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// recordDecisionEvents writes the evaluation's event records that no run
// has written in their window yet. It lists the stored records once
// (ddbstore.ListEvents, one Query of the event partition) and writes only
// the records not listed, each with a conditional write
// (ddbstore.PutEventOnce) and the TTL of its window, so a repeated
// evaluation of an unchanged cluster writes nothing, and a duplicated,
// concurrent or retried evaluation, warm or cold, records each once and
// keeps its first Time. A record whose write failed is not stored, so the
// next run writes it again. When the list fails every record is written
// conditionally, as if none were listed. A failed write or list is logged;
// it never fails the run.
func (h *Handler) recordDecisionEvents(ctx context.Context, evs []decisionEvent, now time.Time) (written int) {
	if len(evs) == 0 {
		return 0
	}
	listed, err := h.d.Store.ListEvents(ctx, now)
	if err != nil {
		h.d.Log.WarnContext(ctx, "event records not listed: writing each conditionally", "error", err)
	}
	stored := make(map[string]bool, len(listed))
	for _, e := range listed {
		stored[e.ID] = true
	}
	for _, e := range evs {
		if stored[e.ID] {
			continue
		}
		ok, err := h.d.Store.PutEventOnce(ctx, e.Event, now, e.Window)
		if err != nil {
			h.d.Log.WarnContext(ctx, "event not recorded", "reason", e.Reason, "id", e.ID, "error", err)
			continue
		}
		if ok {
			written++
		}
	}
	return written
}
