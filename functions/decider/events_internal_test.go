package decider

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/disruption"
)

// expand gives the events of evs (ddbstore.Expand).
func expand(evs []decisionEvent) []ddbstore.Event {
	recs := make([]ddbstore.Event, len(evs))
	for i, e := range evs {
		recs[i] = e.Event
	}
	return ddbstore.Expand(recs)
}

// TestDecisionEventsFollowBlockedEvent checks that a blocked NodeClaim's
// events (one on its Node, one on the NodeClaim, as Karpenter writes
// them, in one record) follow its Blocked.Event alone: the reasons are shared/disruption's
// sentences, and the last cases reword them to show that the wording
// decides nothing.
func TestDecisionEventsFollowBlockedEvent(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	const blocked, unconsolidatable = disruption.EventDisruptionBlocked, disruption.EventUnconsolidatable
	type record struct{ Reason, Message, NodeClaim, Node string }
	tests := []struct {
		name, why, event string
		node             string // "" for a NodeClaim without a Node
		want             []record
	}{
		{name: "should block a node annotated do-not-disrupt", why: `the Node is annotated karpenter.sh/do-not-disrupt: "true"`, event: blocked, node: "node-a",
			want: []record{{ReasonDisruptionBlocked, `Cannot disrupt Node: the Node is annotated karpenter.sh/do-not-disrupt: "true"`, "a", "node-a"}, {ReasonDisruptionBlocked, `Cannot disrupt NodeClaim: the Node is annotated karpenter.sh/do-not-disrupt: "true"`, "a", ""}}},
		{name: "should block a node with a do-not-disrupt pod", why: `pod shop/db-0 has karpenter.sh/do-not-disrupt: "true"`, event: blocked, node: "node-a",
			want: []record{{ReasonDisruptionBlocked, `Cannot disrupt Node: pod shop/db-0 has karpenter.sh/do-not-disrupt: "true"`, "a", "node-a"}, {ReasonDisruptionBlocked, `Cannot disrupt NodeClaim: pod shop/db-0 has karpenter.sh/do-not-disrupt: "true"`, "a", ""}}},
		{name: "should block a node whose pod a PDB protects", why: "pod shop/db-0 is protected by PodDisruptionBudget shop/db (0 disruptions allowed)", event: blocked, node: "node-a",
			want: []record{{ReasonDisruptionBlocked, "Cannot disrupt Node: pod shop/db-0 is protected by PodDisruptionBudget shop/db (0 disruptions allowed)", "a", "node-a"}, {ReasonDisruptionBlocked, "Cannot disrupt NodeClaim: pod shop/db-0 is protected by PodDisruptionBudget shop/db (0 disruptions allowed)", "a", ""}}},
		{name: "should block a nominated node", why: "nominated: pending pod shop/web-3 is expected to land on it", event: blocked, node: "node-a",
			want: []record{{ReasonDisruptionBlocked, "Cannot disrupt Node: nominated: pending pod shop/web-3 is expected to land on it", "a", "node-a"}, {ReasonDisruptionBlocked, "Cannot disrupt NodeClaim: nominated: pending pod shop/web-3 is expected to land on it", "a", ""}}},
		{name: "should block an uninitialized node", why: "not initialized: the NodeClaim's Initialized condition is not True", event: blocked, node: "node-a",
			want: []record{{ReasonDisruptionBlocked, "Cannot disrupt Node: not initialized: the NodeClaim's Initialized condition is not True", "a", "node-a"}, {ReasonDisruptionBlocked, "Cannot disrupt NodeClaim: not initialized: the NodeClaim's Initialized condition is not True", "a", ""}}},
		{name: "should block a node of an unknown NodePool", why: `NodePool "gone" not found`, event: blocked, node: "node-a",
			want: []record{{ReasonDisruptionBlocked, `Cannot disrupt Node: NodePool "gone" not found`, "a", "node-a"}, {ReasonDisruptionBlocked, `Cannot disrupt NodeClaim: NodePool "gone" not found`, "a", ""}}},
		{name: "should block a drifted node whose pods cannot move", why: "drifted (AMIDrift), but pod shop/web-1 fits no node", event: blocked, node: "node-a",
			want: []record{{ReasonDisruptionBlocked, "Cannot disrupt Node: drifted (AMIDrift), but pod shop/web-1 fits no node", "a", "node-a"}, {ReasonDisruptionBlocked, "Cannot disrupt NodeClaim: drifted (AMIDrift), but pod shop/web-1 fits no node", "a", ""}}},
		{name: "should call a node without a cheaper replacement unconsolidatable", why: "can't replace with a cheaper node: every option's worst-case launch price is at least 0.0960/h", event: unconsolidatable, node: "node-a",
			want: []record{{ReasonUnconsolidatable, "Can't replace with a cheaper node: every option's worst-case launch price is at least 0.0960/h", "a", "node-a"}, {ReasonUnconsolidatable, "Can't replace with a cheaper node: every option's worst-case launch price is at least 0.0960/h", "a", ""}}},
		{name: "should call a node of a pool without consolidation unconsolidatable", why: "consolidation is disabled: NodePool general has consolidateAfter: Never", event: unconsolidatable, node: "node-a",
			want: []record{{ReasonUnconsolidatable, "Consolidation is disabled: NodePool general has consolidateAfter: Never", "a", "node-a"}, {ReasonUnconsolidatable, "Consolidation is disabled: NodePool general has consolidateAfter: Never", "a", ""}}},
		{name: "should call a spot node short of cheaper types unconsolidatable", why: "SpotToSpotConsolidation needs 15 cheaper instance types than the candidate, found 3", event: unconsolidatable, node: "node-a",
			want: []record{{ReasonUnconsolidatable, "SpotToSpotConsolidation needs 15 cheaper instance types than the candidate, found 3", "a", "node-a"}, {ReasonUnconsolidatable, "SpotToSpotConsolidation needs 15 cheaper instance types than the candidate, found 3", "a", ""}}},
		{name: "should record nothing for a spent budget", why: "drifted (AMIDrift), but the Drifted budget of NodePool general is spent: 1 allowed, 1 of 3 nodes already disrupting", node: "node-a"},
		{name: "should record nothing while consolidateAfter runs", why: "not consolidatable yet: consolidateAfter 30s runs from the last pod event or initialization at 2030-01-02T03:00:00Z until 2030-01-02T03:00:30Z", node: "node-a"},
		{name: "should record nothing for another method acting", why: "not evaluated: the Drifted method acted in this evaluation (one method per evaluation)", node: "node-a"},
		{name: "should record nothing for a drifted node waiting its turn", why: "drifted (AMIDrift): waiting, drift starts one command per evaluation", node: "node-a"},
		{name: "should record nothing for a node in flight", why: "already a candidate of in-flight command drift-default-a-1234abcd", node: "node-a"},
		{name: "should record nothing for a node with nothing to gain", why: "no disruption: not drifted or expired, and consolidation found nothing to gain", node: "node-a"},
		{name: "should record nothing for an unregistered NodeClaim", why: "not registered: no Node has joined for this NodeClaim yet"},
		{name: "should record nothing for a NodeClaim without a Node whatever its event", why: "not initialized: no Node yet", event: blocked},
		{name: "should block by the event whatever the wording", why: "kept: budgets say no", event: blocked, node: "node-a",
			want: []record{{ReasonDisruptionBlocked, "Cannot disrupt Node: kept: budgets say no", "a", "node-a"}, {ReasonDisruptionBlocked, "Cannot disrupt NodeClaim: kept: budgets say no", "a", ""}}},
		{name: "should call unconsolidatable by the event whatever the wording", why: "the PodDisruptionBudget wording changed", event: unconsolidatable, node: "node-a",
			want: []record{{ReasonUnconsolidatable, "The PodDisruptionBudget wording changed", "a", "node-a"}, {ReasonUnconsolidatable, "The PodDisruptionBudget wording changed", "a", ""}}},
		{name: "should record nothing without an event whatever the wording", why: `nominated: the Node is annotated karpenter.sh/do-not-disrupt: "true"`, node: "node-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := disruption.Result{Blocked: []disruption.Blocked{{NodeClaim: "a", Node: tt.node, NodePool: "general", Reason: tt.why, Event: tt.event}}}
			var got []record
			evs := decisionEvents(res, now)
			if len(tt.want) > 0 && len(evs) != 1 {
				t.Errorf("decisionEvents() = %d records, want 1: the Node's and the NodeClaim's event are one pair", len(evs))
			}
			for _, e := range expand(evs) {
				got = append(got, record{e.Reason, e.Message, e.NodeClaim, e.Node})
				// 03:04:05 is in the 2-minute window from 03:04 and the
				// 15-minute window from 03:00.
				window := map[string]string{ReasonDisruptionBlocked: "20300102T0304", ReasonUnconsolidatable: "20300102T0300"}[e.Reason]
				wantID := e.Reason + ":a:" + window + ":"
				if e.Node == "" {
					wantID = e.Reason + ":nodeclaim:a:" + window + ":"
				}
				if !strings.HasPrefix(e.ID, wantID) || e.Type != "Normal" || !e.Time.Equal(now) {
					t.Errorf("record ID %q, type %q, time %v; want ID %s<digest>, Normal, %v", e.ID, e.Type, e.Time, wantID, now)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decisionEvents() records mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecisionEventsNameConsolidationCandidates checks the
// ConsolidationCandidate records of a consolidation command: one on the
// Node and one on the NodeClaim of each candidate, worded as Karpenter
// v1.14 words them, and none for the other methods.
func TestDecisionEventsNameConsolidationCandidates(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	type record struct{ Type, Message, NodeClaim, Node string }
	cand := func(claim, node string) disruption.Candidate {
		return disruption.Candidate{NodeClaim: claim, Node: node, NodePool: "general"}
	}
	tests := []struct {
		name string
		cmd  disruption.Command
		want []record
	}{
		{
			name: "should name a single-node delete with its savings",
			cmd: disruption.Command{ID: "consolidate-a-1234abcd", Method: disruption.MethodUnderutilized, Decision: disruption.DecisionDelete,
				Candidates: []disruption.Candidate{cand("a", "node-a")}, SavingsPerHour: 0.192},
			want: []record{
				{"Normal", "Consolidation candidate: Underutilized/consolidate-a-1234abcd: delete: nodepools=[general]: [node-a] (savings: $0.19) (savings: $0.19)", "a", "node-a"},
				{"Normal", "Consolidation candidate: Underutilized/consolidate-a-1234abcd: delete: nodepools=[general]: [node-a] (savings: $0.19) (savings: $0.19)", "a", ""},
			},
		},
		{
			name: "should name a single-node replace with its replacement",
			cmd: disruption.Command{ID: "consolidate-a-1234abcd", Method: disruption.MethodUnderutilized, Decision: disruption.DecisionReplace,
				Candidates: []disruption.Candidate{cand("a", "node-a")}, Replacements: []disruption.Replacement{{}}, SavingsPerHour: 0.096},
			want: []record{
				{"Normal", "Consolidation candidate: Underutilized/consolidate-a-1234abcd: replace: nodepools=[general]: [node-a] -> [1 replacement] (savings: $0.10) (savings: $0.10)", "a", "node-a"},
				{"Normal", "Consolidation candidate: Underutilized/consolidate-a-1234abcd: replace: nodepools=[general]: [node-a] -> [1 replacement] (savings: $0.10) (savings: $0.10)", "a", ""},
			},
		},
		{
			name: "should name each node of a multi-node consolidation as part of it",
			cmd: disruption.Command{ID: "consolidate-a-1234abcd", Method: disruption.MethodUnderutilized, Decision: disruption.DecisionDelete,
				Candidates: []disruption.Candidate{cand("a", "node-a"), cand("b", "node-b")}, SavingsPerHour: 0.384},
			want: []record{
				{"Normal", "Consolidation candidate: delete: [node-a] (part of 2-node consolidation) (savings: $0.38)", "a", "node-a"},
				{"Normal", "Consolidation candidate: delete: [node-a] (part of 2-node consolidation) (savings: $0.38)", "a", ""},
				{"Normal", "Consolidation candidate: delete: [node-b] (part of 2-node consolidation) (savings: $0.38)", "b", "node-b"},
				{"Normal", "Consolidation candidate: delete: [node-b] (part of 2-node consolidation) (savings: $0.38)", "b", ""},
			},
		},
		{
			name: "should record nothing for an Empty command",
			cmd: disruption.Command{ID: "empty-general-1234abcd", Method: disruption.MethodEmpty, Decision: disruption.DecisionDelete,
				Candidates: []disruption.Candidate{cand("a", "node-a")}, SavingsPerHour: 0.192},
		},
		{
			name: "should record nothing for a Drifted command",
			cmd: disruption.Command{ID: "drift-a-1234abcd", Method: disruption.MethodDrifted, Decision: disruption.DecisionReplace,
				Candidates: []disruption.Candidate{cand("a", "node-a")}, Replacements: []disruption.Replacement{{}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []record
			ids := map[string]bool{}
			evs := decisionEvents(disruption.Result{Commands: []disruption.Command{tt.cmd}}, now)
			if len(evs)*2 != len(tt.want) {
				t.Errorf("decisionEvents() = %d records, want %d: one pair a candidate", len(evs), len(tt.want)/2)
			}
			for _, e := range expand(evs) {
				if e.Reason != ReasonConsolidationCandidate {
					t.Errorf("record reason %q, want %s", e.Reason, ReasonConsolidationCandidate)
				}
				if ids[e.ID] {
					t.Errorf("record ID %s twice", e.ID)
				}
				ids[e.ID] = true
				got = append(got, record{e.Type, e.Message, e.NodeClaim, e.Node})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decisionEvents() records mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecisionEventsRecordConsistencyFindingsPerScanPeriod checks that a
// finding is a Warning on the NodeClaim alone, recorded again (a new ID)
// once per ConsistencyScanPeriod and not within one.
func TestDecisionEventsRecordConsistencyFindingsPerScanPeriod(t *testing.T) {
	res := disruption.Result{Inconsistencies: []disruption.Inconsistency{{NodeClaim: "a", Node: "node-a",
		Message: "expected 16Gi of resource memory, but found 8Gi (50.0% of expected)"}}}
	at := func(min, sec int) string {
		evs := decisionEvents(res, time.Date(2030, 1, 2, 3, min, sec, 0, time.UTC))
		if len(evs) != 1 {
			t.Fatalf("records = %+v, want one", evs)
		}
		e := evs[0]
		if e.Reason != ReasonFailedConsistencyCheck || e.Type != "Warning" || e.NodeClaim != "a" || e.Node != "" || e.Message != res.Inconsistencies[0].Message {
			t.Errorf("record = %+v, want a FailedConsistencyCheck Warning on NodeClaim a with the finding", e)
		}
		return e.ID
	}
	if a, b := at(0, 5), at(9, 55); a != b {
		t.Errorf("IDs within one scan period differ: %s, %s", a, b)
	}
	if a, b := at(9, 55), at(10, 5); a == b {
		t.Errorf("IDs of consecutive scan periods are both %s, want the finding recorded again", a)
	}
}

// TestDecisionEventsRepeatAfterKarpentersDedupeTimeouts checks that each
// decision's record is the same within its reason's window and a new one
// in the next (Karpenter's dedupe timeouts: DisruptionBlocked on a node 2
// minutes, Unconsolidatable 15, a NodePool's DisruptionBlocked 1,
// ConsolidationCandidate 2), and that the window is the record's TTL.
func TestDecisionEventsRepeatAfterKarpentersDedupeTimeouts(t *testing.T) {
	blocked := func(event string) disruption.Result {
		return disruption.Result{Blocked: []disruption.Blocked{{NodeClaim: "a", Node: "node-a", NodePool: "general", Reason: "kept", Event: event}}}
	}
	tests := []struct {
		name   string
		res    disruption.Result
		window time.Duration
	}{
		{name: "should repeat DisruptionBlocked on a node every 2 minutes", res: blocked(disruption.EventDisruptionBlocked), window: 2 * time.Minute},
		{name: "should repeat Unconsolidatable every 15 minutes", res: blocked(disruption.EventUnconsolidatable), window: 15 * time.Minute},
		{name: "should repeat a NodePool's DisruptionBlocked every minute",
			res: disruption.Result{Budgets: []disruption.BudgetStatus{{NodePool: "general", Reason: "Drifted", Allowed: 0, Nodes: 3}}}, window: time.Minute},
		{name: "should repeat ConsolidationCandidate every 2 minutes",
			res: disruption.Result{Commands: []disruption.Command{{ID: "c-1", Method: disruption.MethodUnderutilized, Decision: disruption.DecisionDelete,
				Candidates: []disruption.Candidate{{NodeClaim: "a", Node: "node-a", NodePool: "general"}}}}}, window: 2 * time.Minute},
	}
	start := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC) // every window starts here
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids := func(at time.Time) []string {
				var out []string
				for _, e := range decisionEvents(tt.res, at) {
					if e.Window != tt.window {
						t.Errorf("%s: window (TTL) %v, want %v", e.ID, e.Window, tt.window)
					}
					out = append(out, e.ID)
				}
				if len(out) == 0 {
					t.Fatal("no records")
				}
				return out
			}
			first, last := ids(start), ids(start.Add(tt.window-time.Second))
			if diff := cmp.Diff(first, last); diff != "" {
				t.Errorf("IDs within one window differ (-start +end):\n%s", diff)
			}
			for i, id := range ids(start.Add(tt.window)) {
				if id == first[i] {
					t.Errorf("ID %s in the next window too, want the record written again", id)
				}
			}
		})
	}
}
