package termination_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// The interleaving of issue "budget overrun through a lapsed lease": a
// drain slowed past LeaseSeconds, the stale-lease sweep, and another
// execution of the same NodePool (budget 1) racing for the room.

const otherExec = "consolidate-general-b-9876543210"

// tainting returns nodes a and b of pool general (budget 1) with the
// first execution holding a, its lease and claim taken at t0 and node-a
// tainted.
func tainting(t *testing.T) (*env, workflow.DisruptionState) {
	t.Helper()
	e := newEnv(t, node("node-a"), node("node-b"))
	e.claims.put(nodeClaim("a"))
	e.claims.put(nodeClaim("b"))
	first := state(workflow.MethodUnderutilized, 1, "a")
	if _, err := e.svc.AcquireBudget(t.Context(), first, t0); err != nil {
		t.Fatalf("AcquireBudget(first) error = %v", err)
	}
	if _, err := e.svc.Taint(t.Context(), first, t0); err != nil {
		t.Fatalf("Taint(first) error = %v", err)
	}
	return e, first
}

func TestStaleSweepKeepsTheNodesOfAStillRunningExecutionSoTheBudgetHolds(t *testing.T) {
	e, first := tainting(t)
	e.status.set(execID, termination.ExecutionRunning)
	late := t0.Add(termination.LeaseDuration + time.Minute)

	released, err := e.svc.ReleaseStale(t.Context(), late)
	if err != nil {
		t.Fatalf("ReleaseStale() error = %v", err)
	}
	if len(released) != 0 {
		t.Errorf("ReleaseStale() = %+v, want nothing handed back while the execution runs", released)
	}
	if n := e.node(t, "node-a"); len(n.Spec.Taints) != 1 {
		t.Fatalf("node-a taints = %v, want the disrupted taint kept", n.Spec.Taints)
	}

	second := state(workflow.MethodUnderutilized, 1, "b")
	second.ID = otherExec
	if _, err := e.svc.AcquireBudget(t.Context(), second, late); workflowName(t, err) != workflow.ErrBudgetExhausted {
		t.Fatalf("AcquireBudget(second) error = %v, want %s: node-a still disrupts", err, workflow.ErrBudgetExhausted)
	}
	if _, err := e.svc.Drain(t.Context(), first, late); workflowName(t, err) != workflow.ErrNoLongerEligible {
		t.Fatalf("Drain(first) after its lease lapsed: error = %v, want %s", err, workflow.ErrNoLongerEligible)
	}
}

func TestLapsedLeaseIsNeverRenewedAfterTheSweepGaveItsNodeBack(t *testing.T) {
	e, first := tainting(t)
	// Step Functions says the execution ended (it is Missing here), so
	// the sweep gives node-a back and the second execution takes the
	// pool's one slot.
	late := t0.Add(termination.LeaseDuration + time.Minute)
	released, err := e.svc.ReleaseStale(t.Context(), late)
	if err != nil {
		t.Fatalf("ReleaseStale() error = %v", err)
	}
	if want := []termination.StaleRelease{{NodeClaim: "a", Holder: execID, Outcome: "given back"}}; !cmp.Equal(want, released) {
		t.Fatalf("ReleaseStale() = %+v, want %+v", released, want)
	}
	second := state(workflow.MethodUnderutilized, 1, "b")
	second.ID = otherExec
	if _, err := e.svc.AcquireBudget(t.Context(), second, late); err != nil {
		t.Fatalf("AcquireBudget(second) error = %v", err)
	}

	// Every step of the first execution that renews now fails, and
	// nothing of it comes back.
	steps := map[string]func() error{
		"CheckReplacements": func() error { _, err := e.svc.CheckReplacements(t.Context(), first, late); return err },
		"Taint":             func() error { _, err := e.svc.Taint(t.Context(), first, late); return err },
		"BeginTermination":  func() error { _, err := e.svc.BeginTermination(t.Context(), first, late); return err },
		"Drain":             func() error { _, err := e.svc.Drain(t.Context(), first, late); return err },
	}
	for name, step := range steps {
		if err := step(); workflowName(t, err) != workflow.ErrNoLongerEligible {
			t.Errorf("%s(first) error = %v, want %s", name, err, workflow.ErrNoLongerEligible)
		}
	}
	if got, _ := e.budgets.BudgetHolders(t.Context(), "general", late); !cmp.Equal(map[string]int{otherExec: 1}, got) {
		t.Errorf("budget holders = %v, want only %s: a lapsed lease came back", got, otherExec)
	}
	if n := e.node(t, "node-a"); len(n.Spec.Taints) != 0 {
		t.Errorf("node-a taints = %v, want none", n.Spec.Taints)
	}
	if a := e.claims.get(t, "a"); termination.ClaimOf(&a).Holder != "" || a.DeletionTimestamp != nil {
		t.Errorf("nodeclaim a = claim %+v, deletion %v; want it left given back", termination.ClaimOf(&a), a.DeletionTimestamp)
	}
}

func TestLaunchReplacementsLaunchesNothingOnceTheLeaseLapsed(t *testing.T) {
	e := newEnv(t, node("node-a"))
	e.claims.put(nodeClaim("a"))
	st := withReplacements(state(workflow.MethodUnderutilized, 1, "a"), e.commands, "general-r1")
	if _, err := e.svc.AcquireBudget(t.Context(), st, t0); err != nil {
		t.Fatalf("AcquireBudget() error = %v", err)
	}
	late := t0.Add(termination.LeaseDuration)
	if _, err := e.svc.LaunchReplacements(t.Context(), st, late); workflowName(t, err) != workflow.ErrNoLongerEligible {
		t.Fatalf("LaunchReplacements() error = %v, want %s", err, workflow.ErrNoLongerEligible)
	}
	if e.launcher.calls != 0 || e.claims.has("general-r1") {
		t.Errorf("launcher calls = %d, replacement stored = %v; want nothing launched", e.launcher.calls, e.claims.has("general-r1"))
	}
}

func TestStaleSweepFollowsContinuationsBeforeHandingANodeBack(t *testing.T) {
	e := newEnv(t, node("node-a"))
	e.claims.put(nodeClaim("a"))
	st := state(workflow.MethodDrifted, 1, "a")
	if _, err := e.svc.AcquireBudget(t.Context(), st, t0); err != nil {
		t.Fatalf("AcquireBudget() error = %v", err)
	}
	late := t0.Add(termination.LeaseDuration + time.Minute)
	e.status.set(execID, termination.ExecutionEnded)
	e.status.set(termination.ContinuationName(execID, 1), termination.ExecutionRunning)

	released, err := e.svc.ReleaseStale(t.Context(), late)
	if err != nil || len(released) != 0 {
		t.Fatalf("ReleaseStale() = %+v, %v; want nothing handed back while the continuation runs", released, err)
	}
	want := []string{workflow.MethodDrifted + "/" + execID, workflow.MethodDrifted + "/" + termination.ContinuationName(execID, 1)}
	if diff := cmp.Diff(want, e.status.asked); diff != "" {
		t.Errorf("executions asked mismatch (-want +got):\n%s", diff)
	}

	e.status.set(termination.ContinuationName(execID, 1), termination.ExecutionEnded)
	released, err = e.svc.ReleaseStale(t.Context(), late)
	if err != nil || len(released) != 1 {
		t.Errorf("ReleaseStale() = %+v, %v; want nodeclaim a given back once every continuation ended", released, err)
	}
}
