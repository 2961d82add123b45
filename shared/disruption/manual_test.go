package disruption_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// protectedCluster: node-a (m5.xlarge) runs the do-not-disrupt pod db-0
// (3 cpu) and web-0 (a PDB at zero protects it); node-b (m5.large) is
// nearly full. The pool's budget allows no disruption at all.
func protectedCluster() *cluster {
	c := newCluster(onDemandTypes(), pool("general", consolidateAfter("Never"), budgets(v1.Budget{Nodes: "0"})))
	c.node("a", xlarge, "us-east-1a", od, "general")
	c.node("b", large, "us-east-1a", od, "general")
	c.pod("db-0", "node-a", st.Requests("3", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "true"))
	c.pod("web-0", "node-a", st.Requests("100m", "128Mi"), st.Labels(map[string]string{"app": "web"}))
	c.pods("node-b", "1500m", "b-0")
	c.in.PodDisruptionBudgets = append(c.in.PodDisruptionBudgets, pdb("web", map[string]string{"app": "web"}, intOrStr(intstr.FromInt32(1)), nil))
	return c
}

func TestManual(t *testing.T) {
	t.Run("should replace a do-not-disrupt node past a zero budget and report what it goes past", func(t *testing.T) {
		c := protectedCluster()
		req := disruption.ManualRequest{Nodes: []string{"node-a"}, ForceAfter: 10 * time.Minute}
		plan, err := disruption.Manual(t.Context(), c.in, req)
		if err != nil {
			t.Fatalf("Manual() error = %v", err)
		}
		if len(plan.Commands) != 1 {
			t.Fatalf("Manual() commands = %d, want 1", len(plan.Commands))
		}
		cmd := plan.Commands[0]
		got := summarize(disruption.Result{Commands: plan.Commands})
		want := []cmdSummary{{Method: disruption.MethodManual, Decision: disruption.DecisionReplace, Candidates: []string{"a"},
			Types: []string{"m5.xlarge", "m5.2xlarge"}, Capacity: od}}
		if diff := cmp.Diff(want, got.Commands); diff != "" {
			t.Errorf("Manual() commands mismatch (-want +got):\n%s", diff)
		}
		if cmd.Budgeted {
			t.Errorf("Manual() command Budgeted = true, want false: a manual replacement consumes no budget")
		}
		if want := disruption.ManualID("a", req); cmd.ID != want || !strings.HasPrefix(cmd.ID, "manual-a-") {
			t.Errorf("Manual() command ID = %q, want %q (manual-a-<hash>)", cmd.ID, want)
		}
		wantNode := disruption.ManualNode{
			Command: cmd.ID, NodeClaim: "a", Node: "node-a", NodePool: "general",
			Moving:       []string{"default/db-0", "default/web-0"},
			DoNotDisrupt: []string{`pod default/db-0 has karpenter.sh/do-not-disrupt: "true"`},
			PDBBlocked:   []string{"pod default/web-0 is protected by PodDisruptionBudget default/web (0 disruptions allowed)"},
		}
		if diff := cmp.Diff([]disruption.ManualNode{wantNode}, plan.Nodes); diff != "" {
			t.Errorf("Manual() report mismatch (-want +got):\n%s", diff)
		}
		wantBudgets := []disruption.BudgetStatus{
			{NodePool: "general", Reason: disruption.MethodEmpty, Nodes: 2},
			{NodePool: "general", Reason: disruption.MethodDrifted, Nodes: 2},
			{NodePool: "general", Reason: disruption.MethodUnderutilized, Nodes: 2},
		}
		if diff := cmp.Diff(wantBudgets, plan.Budgets); diff != "" {
			t.Errorf("Manual() budgets mismatch (-want +got):\n%s", diff)
		}
		// Evaluate, on the same snapshot, would never touch node a.
		res, err := disruption.Evaluate(t.Context(), c.in)
		if err != nil {
			t.Fatalf("Evaluate() error = %v", err)
		}
		if len(res.Commands) != 0 {
			t.Errorf("Evaluate() commands = %v, want none (the budget is zero)", res.Commands)
		}
	})

	t.Run("should replace a node named by its NodeClaim, going past do-not-disrupt on the Node and NodeClaim", func(t *testing.T) {
		c := newCluster(onDemandTypes(), pool("general", consolidateAfter("Never")))
		c.node("a", xlarge, "us-east-1a", od, "general", nodeAnnotations(v1.AnnotationDoNotDisrupt, "true"), claimAnnotations(v1.AnnotationDoNotDisrupt, "true"))
		c.pods("node-a", "3", "a-0")
		plan, err := disruption.Manual(t.Context(), c.in, disruption.ManualRequest{Nodes: []string{"a"}})
		if err != nil {
			t.Fatalf("Manual() error = %v", err)
		}
		want := []string{
			`the Node is annotated karpenter.sh/do-not-disrupt: "true"`,
			`the NodeClaim is annotated karpenter.sh/do-not-disrupt: "true"`,
		}
		if diff := cmp.Diff(want, plan.Nodes[0].DoNotDisrupt); diff != "" {
			t.Errorf("Manual() DoNotDisrupt mismatch (-want +got):\n%s", diff)
		}
		if got := plan.Commands[0].Decision; got != disruption.DecisionReplace {
			t.Errorf("Manual() decision = %s, want replace", got)
		}
	})

	t.Run("should launch nothing when the pods fit on the other nodes", func(t *testing.T) {
		c := newCluster(onDemandTypes(), pool("general", consolidateAfter("Never")))
		c.node("a", large, "us-east-1a", od, "general")
		c.node("b", xlarge2, "us-east-1a", od, "general")
		c.pods("node-a", "500m", "a-0")
		plan, err := disruption.Manual(t.Context(), c.in, disruption.ManualRequest{Nodes: []string{"node-a"}})
		if err != nil {
			t.Fatalf("Manual() error = %v", err)
		}
		if got := plan.Commands[0]; got.Decision != disruption.DecisionDelete || len(got.Replacements) != 0 {
			t.Errorf("Manual() = %s with %d replacements, want delete with none", got.Decision, len(got.Replacements))
		}
	})

	t.Run("should plan a later node with the earlier ones leaving", func(t *testing.T) {
		// b's pod fits in a's spare room, but a leaves first: b needs a
		// replacement of its own.
		c := newCluster(onDemandTypes(), pool("general", consolidateAfter("Never")))
		c.node("a", xlarge2, "us-east-1a", od, "general")
		c.node("b", large, "us-east-1a", od, "general")
		c.pods("node-a", "1", "a-0")
		c.pods("node-b", "1", "b-0")
		plan, err := disruption.Manual(t.Context(), c.in, disruption.ManualRequest{Nodes: []string{"node-a", "node-b"}})
		if err != nil {
			t.Fatalf("Manual() error = %v", err)
		}
		got := summarize(disruption.Result{Commands: plan.Commands})
		var decisions []disruption.Decision
		for _, cs := range got.Commands {
			decisions = append(decisions, cs.Decision)
		}
		// a's pod moves to b; then b leaves too, so both pods need a new
		// node, which b's command launches.
		want := []disruption.Decision{disruption.DecisionDelete, disruption.DecisionReplace}
		if diff := cmp.Diff(want, decisions); diff != "" {
			t.Errorf("Manual() decisions mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestManualID(t *testing.T) {
	req := disruption.ManualRequest{Nodes: []string{"node-b", "node-a"}, ForceAfter: time.Minute}
	id := disruption.ManualID("a", req)
	if again := disruption.ManualID("a", disruption.ManualRequest{Nodes: []string{"node-a", "node-b"}, ForceAfter: time.Minute}); again != id {
		t.Errorf("ManualID() of the same request in another order = %q, want %q", again, id)
	}
	for name, other := range map[string]string{
		"another ForceAfter": disruption.ManualID("a", disruption.ManualRequest{Nodes: req.Nodes, ForceAfter: 2 * time.Minute}),
		"another node set":   disruption.ManualID("a", disruption.ManualRequest{Nodes: []string{"node-a"}, ForceAfter: time.Minute}),
		"another NodeClaim":  disruption.ManualID("b", req),
	} {
		if other == id {
			t.Errorf("ManualID() with %s = %q, the same as the request's", name, other)
		}
	}
	long := disruption.ManualID(strings.Repeat("x", 100)+".y", req)
	if len(long) != 80 || !strings.HasPrefix(long, "manual-xxx") || strings.Contains(long, ".") {
		t.Errorf("ManualID() of a long name = %q (%d characters), want 80 characters of [A-Za-z0-9-_]", long, len(long))
	}
}

func TestManualErrors(t *testing.T) {
	t.Run("should refuse every node it cannot replace at once, and plan none", func(t *testing.T) {
		c := protectedCluster()
		c.node("new", large, "us-east-1a", od, "general", startupTaint("example.com/agent"))
		c.in.Nodes = append(c.in.Nodes, *st.Node("unmanaged"))
		c.node("static", large, "us-east-1a", od, "fixed")
		fixed := pool("fixed")
		fixed.Spec.Replicas = new(int64)
		c.in.NodePools = append(c.in.NodePools, fixed)
		c.in.InFlight = []disruption.Command{{ID: "drift-b-00000000", Candidates: []disruption.Candidate{{NodeClaim: "b"}}}}
		_, err := disruption.Manual(t.Context(), c.in, disruption.ManualRequest{
			Nodes: []string{"node-a", "unmanaged", "ghost", "node-new", "node-b", "static"},
		})
		var refused *disruption.RefusedError
		if !errors.As(err, &refused) {
			t.Fatalf("Manual() error = %v, want a *RefusedError", err)
		}
		owns := "nodewright does not own it: no NodeClaim of nodewright's records names this Node or NodeClaim"
		want := []disruption.Refusal{
			{Node: "unmanaged", Reason: owns},
			{Node: "ghost", Reason: owns},
			{Node: "node-new", Reason: "not initialized: startup taint example.com/agent:NoSchedule is still on the Node"},
			{Node: "node-b", Reason: "already a candidate of in-flight command drift-b-00000000"},
			{Node: "static", Reason: "NodePool fixed is static (spec.replicas); nodewright does not replace nodes of static pools"},
		}
		if diff := cmp.Diff(want, refused.Refusals); diff != "" {
			t.Errorf("Manual() refusals mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("should refuse a node whose pods cannot reschedule", func(t *testing.T) {
		c := newCluster(onDemandTypes(), pool("general", consolidateAfter("Never")))
		c.node("a", xlarge2, "us-east-1a", od, "general")
		// Its node was labelled by hand; no NodePool offers the label.
		c.pod("pinned", "node-a", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{"team": "payments"}))
		_, err := disruption.Manual(t.Context(), c.in, disruption.ManualRequest{Nodes: []string{"node-a"}})
		var refused *disruption.RefusedError
		if !errors.As(err, &refused) || len(refused.Refusals) != 1 || refused.Refusals[0].Node != "node-a" ||
			!strings.Contains(refused.Refusals[0].Reason, "cannot be rescheduled") {
			t.Fatalf("Manual() error = %v, want node-a refused: its pods cannot be rescheduled", err)
		}
	})

	invalid := []struct {
		name string
		give disruption.ManualRequest
		want string
	}{
		{name: "no node", give: disruption.ManualRequest{}, want: "nodes: at least one node is required"},
		{name: "the same node twice", give: disruption.ManualRequest{Nodes: []string{"node-a", "a"}}, want: `nodes: "node-a" and "a" name the same NodeClaim a`},
		{name: "negative forceAfter", give: disruption.ManualRequest{Nodes: []string{"node-a"}, ForceAfter: -time.Second}, want: "forceAfter: -1s is negative"},
	}
	for _, tt := range invalid {
		t.Run("should reject a request with "+tt.name, func(t *testing.T) {
			_, err := disruption.Manual(t.Context(), protectedCluster().in, tt.give)
			if !errors.Is(err, disruption.ErrInvalidManualRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Manual() error = %v, want ErrInvalidManualRequest saying %q", err, tt.want)
			}
		})
	}
}
