package termination_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

const operator = "arn:aws:iam::111122223333:role/platform-oncall"

// manualCommand is what disruption.Manual plans for node-a under req.
func manualCommand(req disruption.ManualRequest) disruption.Command {
	return disruption.Command{
		ID: disruption.ManualID("a", req), Method: disruption.MethodManual, Decision: disruption.DecisionReplace, NodePool: "general",
		Reason:     "manual replacement of NodeClaim a requested by an operator",
		Candidates: []disruption.Candidate{{NodeClaim: "a", Node: "node-a", NodePool: "general"}},
		Replacements: []disruption.Replacement{{InstanceTypes: []string{"m5.xlarge"},
			NodeClaim: v1.NodeClaim{}}},
	}
}

func manualState(forceAfter int, names ...string) workflow.DisruptionState {
	st := state(workflow.MethodManual, 0, names...)
	st.ID = "manual-a-0123abcd"
	st.Manual = &workflow.ManualRequest{RequestedBy: operator, Nodes: []string{"node-a"}, ForceAfterSeconds: forceAfter}
	return st
}

func TestPrepareManual(t *testing.T) {
	req := disruption.ManualRequest{Nodes: []string{"node-a"}, ForceAfter: 90 * time.Second}
	cmd := manualCommand(req)
	budgets := []disruption.BudgetStatus{
		{NodePool: "general", Reason: disruption.MethodEmpty, Allowed: 3},
		{NodePool: "general", Reason: disruption.MethodDrifted, Allowed: 0},
	}
	got := termination.PrepareManual(cmd, budgets, req, operator, t0)
	if got.Name != cmd.ID || got.Input.ID != cmd.ID || !strings.HasPrefix(got.Name, "manual-a-") {
		t.Errorf("Name = %q, Input.ID = %q; want the command's ID %q", got.Name, got.Input.ID, cmd.ID)
	}
	wantManual := &workflow.ManualRequest{RequestedBy: operator, Nodes: []string{"node-a"}, ForceAfterSeconds: 90}
	if diff := cmp.Diff(wantManual, got.Input.Manual); diff != "" {
		t.Errorf("Input.Manual mismatch (-want +got):\n%s", diff)
	}
	// Reported, not leased: the Drifted budget is 0 and the execution
	// still goes ahead.
	wantBudget := workflow.Budget{Budgeted: false, Pools: []workflow.PoolBudget{{NodePool: "general", Allowed: 0}}}
	if diff := cmp.Diff(wantBudget, got.Input.Budget); diff != "" {
		t.Errorf("Input.Budget mismatch (-want +got):\n%s", diff)
	}
	if got.Input.Method != workflow.MethodManual || got.Input.Settings.ValidationDelaySeconds != 0 || got.Input.ReplacementCount != 1 {
		t.Errorf("Input = %+v, want a Manual execution with one replacement and no validation delay", got.Input)
	}

	// The request retried an hour later (the API's client retried, or the
	// operator ran the command again) names the same execution and the
	// same replacement, so Step Functions starts one.
	again := termination.PrepareManual(manualCommand(req), budgets, req, operator, t0.Add(time.Hour))
	if again.Name != got.Name || again.Replacements[0].Name != got.Replacements[0].Name {
		t.Errorf("retried request: name %q, replacement %q; want %q, %q", again.Name, again.Replacements[0].Name, got.Name, got.Replacements[0].Name)
	}
}

func TestManualClaims(t *testing.T) {
	t.Run("should never take over the claim of a live execution", func(t *testing.T) {
		for _, holder := range []struct{ id, method string }{
			{"drift-general-a-0123456789", workflow.MethodDrifted},
			{"expire-general-a-0123456789", workflow.MethodExpired},
			{"manual-a-99999999", workflow.MethodManual},
		} {
			e := newEnv(t, node("node-a"))
			e.claims.put(nodeClaim("a", claimedBy(holder.id, holder.method, t0.Add(time.Minute))))
			_, err := e.svc.AcquireBudget(t.Context(), manualState(0, "a"), t0)
			if got := workflowName(t, err); got != workflow.ErrNoLongerEligible {
				t.Errorf("AcquireBudget() over a live %s claim: error = %v (%q), want %s", holder.method, err, got, workflow.ErrNoLongerEligible)
			}
			c := e.claims.get(t, "a")
			if h := termination.ClaimOf(&c).Holder; h != holder.id {
				t.Errorf("holder after a refused manual claim = %q, want %q", h, holder.id)
			}
		}
	})

	t.Run("should claim a free node without leasing any budget", func(t *testing.T) {
		e := newEnv(t, node("node-a"))
		e.claims.put(nodeClaim("a"))
		out, err := e.svc.AcquireBudget(t.Context(), manualState(0, "a"), t0)
		if err != nil {
			t.Fatalf("AcquireBudget() error = %v", err)
		}
		if diff := cmp.Diff([]string{"a"}, out.Claimed); diff != "" || len(out.Pools) != 0 || len(e.budgets.holders("general")) != 0 {
			t.Errorf("AcquireBudget() = %+v, leases %v; want node a claimed and no lease", out, e.budgets.holders("general"))
		}
	})

	t.Run("should let an interruption take a node from a manual replacement", func(t *testing.T) {
		e := newEnv(t, node("node-a"))
		e.claims.put(nodeClaim("a", claimedBy("manual-a-0123abcd", workflow.MethodManual, t0.Add(time.Minute))))
		st := state(workflow.MethodInterrupted, 0, "a")
		if _, err := e.svc.AcquireBudget(t.Context(), st, t0); err != nil {
			t.Fatalf("AcquireBudget() error = %v", err)
		}
		c := e.claims.get(t, "a")
		if h := termination.ClaimOf(&c).Holder; h != execID {
			t.Errorf("holder = %q, want the interruption %q", h, execID)
		}
	})
}

func TestManualSkipsRevalidation(t *testing.T) {
	e := newEnv(t, node("node-a"), pod("default", "db", "node-a", doNotDisrupt, scheduledAt(t0.Add(time.Minute))))
	e.claims.put(nodeClaim("a", withTGP(time.Hour)))
	st := e.hold(manualState(0, "a"))
	out, err := e.svc.Taint(t.Context(), st, t0.Add(2*time.Minute))
	if err != nil {
		t.Fatalf("Taint() error = %v, want the do-not-disrupt node tainted", err)
	}
	if len(out.Nodes) != 1 || !strings.HasPrefix(out.Nodes[0].Outcome, "tainted") {
		t.Errorf("Taint() = %+v, want node-a tainted", out)
	}
	checked, err := e.svc.Revalidate(t.Context(), st, t0.Add(2*time.Minute))
	if err != nil || checked.Nodes[0].Outcome != "not re-validated: an operator asked for this replacement" {
		t.Errorf("Revalidate() = %+v, %v; want node-a not re-validated", checked, err)
	}
	// BeginTermination sets no deadline without ForceAfterSeconds, though
	// the NodeClaim has a terminationGracePeriod.
	begun, err := e.svc.BeginTermination(t.Context(), st, t0.Add(3*time.Minute))
	if err != nil {
		t.Fatalf("BeginTermination() error = %v", err)
	}
	if begun.Nodes[0].Deadline != nil {
		t.Errorf("BeginTermination() deadline = %v, want none: only force-after goes past PodDisruptionBudgets", begun.Nodes[0].Deadline)
	}
}

func TestManualInFlight(t *testing.T) {
	req := disruption.ManualRequest{Nodes: []string{"node-a", "node-b"}}
	own := disruption.ManualID("a", req)
	deleting := func(c *v1.NodeClaim) { c.DeletionTimestamp = ptr(metav1.NewTime(t0)) }
	claims := []v1.NodeClaim{
		nodeClaim("a", claimedBy(own, workflow.MethodManual, t0.Add(time.Minute)), deleting),
		nodeClaim("b", claimedBy("drift-general-b-1", workflow.MethodDrifted, t0.Add(time.Minute))),
		nodeClaim("c", claimedBy(disruption.ManualID("c", req), workflow.MethodManual, t0.Add(-time.Second))),
	}
	got, names := termination.ManualInFlight(claims, req, t0)
	if diff := cmp.Diff([]string{"a"}, names); diff != "" {
		t.Errorf("ManualInFlight() names mismatch (-want +got):\n%s", diff)
	}
	if cl := termination.ClaimOf(&got[0]); cl.Holder != "" || got[0].DeletionTimestamp != nil {
		t.Errorf("a = %+v, %+v; want it as before its execution took it", cl, got[0].ObjectMeta)
	}
	if termination.ClaimOf(&got[1]).Holder != "drift-general-b-1" || termination.ClaimOf(&got[2]).Holder == "" {
		t.Errorf("another execution's claim, or a lapsed one, was changed: %+v", got[1:])
	}
	if termination.ClaimOf(&claims[0]).Holder != own || claims[0].DeletionTimestamp == nil {
		t.Errorf("ManualInFlight() changed its argument")
	}
}
