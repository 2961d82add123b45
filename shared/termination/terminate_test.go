package termination_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	clienttesting "k8s.io/client-go/testing"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

func TestTerminate(t *testing.T) {
	e := newEnv(t)
	e.claims.put(nodeClaim("a"))
	st := state(workflow.MethodDrifted, 2, "a", "gone")
	st.Candidates[1].ProviderID = "aws:///us-east-1b/i-gone"
	for range 2 {
		got, err := e.svc.Terminate(t.Context(), st, t0)
		if err != nil {
			t.Fatalf("Terminate() error = %v", err)
		}
		want := []workflow.NodeOutcome{
			{NodeClaim: "a", Node: "node-a", Outcome: "terminated i-a"},
			{NodeClaim: "gone", Node: "node-gone", Outcome: "terminated i-gone"},
		}
		if diff := cmp.Diff(want, got.Nodes); diff != "" {
			t.Errorf("Terminate() mismatch (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff([]string{"i-a", "i-gone", "i-a", "i-gone"}, e.instances.terminated); diff != "" {
		t.Errorf("terminated instances mismatch (-want +got):\n%s", diff)
	}
	if c := e.claims.get(t, "a"); !hasCondition(c, v1.ConditionTypeInstanceTerminating, v1.ConditionTypeInstanceTerminating) {
		t.Errorf("conditions = %+v, want InstanceTerminating=True", c.Status.Conditions)
	}
}

func TestTerminateAnInterruptedInstanceWithoutNodeClaim(t *testing.T) {
	e := newEnv(t)
	st := workflow.DisruptionState{DisruptionInput: workflow.DisruptionInput{ID: "interrupt-a-1", Method: workflow.MethodInterrupted},
		Interruption: &workflow.InterruptionInput{NodeClaim: "a", InstanceID: "i-0b8f7e6d5c4a39281"}}
	if _, err := e.svc.Terminate(t.Context(), st, t0); err != nil {
		t.Fatalf("Terminate() error = %v", err)
	}
	if diff := cmp.Diff([]string{"i-0b8f7e6d5c4a39281"}, e.instances.terminated); diff != "" {
		t.Errorf("terminated instances mismatch (-want +got):\n%s", diff)
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t, node("node-a"))
	e.claims.put(nodeClaim("a"))
	st := state(workflow.MethodDrifted, 1, "a")
	got, err := e.svc.Delete(t.Context(), st, t0)
	if err != nil {
		t.Fatalf("Delete() error = %v", err)
	}
	if diff := cmp.Diff("node deleted, nodeclaim deleted", got.Nodes[0].Outcome); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
	if e.nodeExists(t, "node-a") || e.claims.has("a") {
		t.Errorf("node exists %v, nodeclaim exists %v; want both gone", e.nodeExists(t, "node-a"), e.claims.has("a"))
	}
	again, err := e.svc.Delete(t.Context(), st, t0)
	if err != nil || again.Nodes[0].Outcome != "node already gone, nodeclaim already gone" {
		t.Errorf("repeated Delete() = %+v, %v; want both already gone", again.Nodes, err)
	}
}

// TestDeleteRemovesTheTerminationFinalizer checks the update that precedes
// the deletion: a Node with karpenter.sh/termination would otherwise stay.
func TestDeleteRemovesTheTerminationFinalizer(t *testing.T) {
	e := newEnv(t, node("node-a", func(n *corev1.Node) { n.Finalizers = append(n.Finalizers, "example.com/keep") }))
	e.claims.put(nodeClaim("a"))
	if _, err := e.svc.Delete(t.Context(), state(workflow.MethodDrifted, 1, "a"), t0); err != nil {
		t.Fatal(err)
	}
	var finalizers []string
	for _, a := range e.cs.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetResource().Resource == "nodes" {
			finalizers = u.GetObject().(*corev1.Node).Finalizers
		}
	}
	if diff := cmp.Diff([]string{"example.com/keep"}, finalizers); diff != "" {
		t.Errorf("finalizers written before the deletion mismatch (-want +got):\n%s", diff)
	}
}

func TestRollback(t *testing.T) {
	tests := []struct {
		name          string
		committed     bool
		terminated    bool
		wantUntainted []string
		wantRemoved   []string
		wantKept      []string
		wantNodeA     bool
		wantTaint     bool
		wantR1        bool
	}{
		{name: "should untaint the candidates, remove the replacements and release the budget before the command committed",
			wantUntainted: []string{"a"}, wantRemoved: []string{"general-r1"}, wantKept: []string{}, wantNodeA: true},
		{name: "should keep the replacements once the command committed",
			committed: true, wantUntainted: []string{"a"}, wantRemoved: []string{}, wantKept: []string{"general-r1"}, wantNodeA: true, wantR1: true},
		{name: "should delete the candidates once their instances are terminated",
			committed: true, terminated: true, wantUntainted: []string{}, wantRemoved: []string{}, wantKept: []string{"general-r1"}, wantR1: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, node("node-a"), node("node-r1"))
			e.claims.put(nodeClaim("a", withTGP(time.Hour)))
			r1 := replacement("general-r1", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered)
			r1.Status.NodeName = "node-r1"
			e.claims.put(r1)
			st := withReplacements(state(workflow.MethodUnderutilized, 1, "a"), e.commands, "general-r1")
			if _, err := e.svc.AcquireBudget(t.Context(), st, t0); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.Taint(t.Context(), st, t0); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.BeginTermination(t.Context(), st, t0); err != nil {
				t.Fatal(err)
			}
			st.Committed, st.Terminated = tt.committed, tt.terminated
			st.Error = &workflow.TaskError{Error: workflow.ErrReplacementFailed, Cause: "replacement general-r1 did not initialize"}

			got, err := e.svc.Rollback(t.Context(), st, t0)
			if err != nil {
				t.Fatalf("Rollback() error = %v", err)
			}
			want := workflow.RollbackOutput{Untainted: tt.wantUntainted, RemovedReplacements: tt.wantRemoved, KeptReplacements: tt.wantKept,
				BudgetReleased: true, Cause: "ReplacementFailed: replacement general-r1 did not initialize"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Rollback() mismatch (-want +got):\n%s", diff)
			}
			if h := e.budgets.holders("general"); len(h) != 0 {
				t.Errorf("leases after rollback = %v, want none", h)
			}
			if e.claims.has("general-r1") != tt.wantR1 || e.nodeExists(t, "node-r1") != tt.wantR1 {
				t.Errorf("replacement nodeclaim %v, node %v; want both %v", e.claims.has("general-r1"), e.nodeExists(t, "node-r1"), tt.wantR1)
			}
			if e.nodeExists(t, "node-a") != tt.wantNodeA {
				t.Fatalf("node-a exists = %v, want %v", e.nodeExists(t, "node-a"), tt.wantNodeA)
			}
			if !tt.wantNodeA {
				return
			}
			n := e.node(t, "node-a")
			if len(n.Spec.Taints) != 0 || n.Annotations[termination.AnnotationClaimHolder] != "" || n.Labels[v1.LabelExcludeFromLoadBalancers] != "" {
				t.Errorf("node-a after rollback: taints %v, annotations %v, labels %v; want it as before", n.Spec.Taints, n.Annotations, n.Labels)
			}
			c := e.claims.get(t, "a")
			if c.DeletionTimestamp != nil || c.Annotations[v1.AnnotationNodeClaimTerminationTime] != "" || termination.ClaimOf(&c).Holder != "" ||
				hasCondition(c, v1.ConditionTypeDisruptionReason, workflow.MethodUnderutilized) {
				t.Errorf("nodeclaim a after rollback: deletion %v, annotations %v; want it as before", c.DeletionTimestamp, c.Annotations)
			}
		})
	}
}

func TestRollbackLeavesANodeAnotherExecutionTook(t *testing.T) {
	e := newEnv(t, node("node-a", disrupted, func(n *corev1.Node) {
		n.Annotations = map[string]string{termination.AnnotationClaimHolder: "interrupt-a-1"}
	}))
	e.claims.put(nodeClaim("a", claimedBy("interrupt-a-1", workflow.MethodInterrupted, t0.Add(time.Hour))))
	st := state(workflow.MethodUnderutilized, 1, "a")
	got, err := e.svc.Rollback(t.Context(), st, t0)
	if err != nil {
		t.Fatalf("Rollback() error = %v", err)
	}
	if len(got.Untainted) != 0 || len(e.node(t, "node-a").Spec.Taints) != 1 || termination.ClaimOf(ptr(e.claims.get(t, "a"))).Holder != "interrupt-a-1" {
		t.Errorf("Rollback() gave back a node another execution holds: %+v", got)
	}
}

func TestContinueAsNew(t *testing.T) {
	e := newEnv(t)
	st := state(workflow.MethodDrifted, 1, "a")
	st.Committed = true
	st.Drain = &workflow.DrainOutput{Round: 1000}
	st.Continuation = 2
	got, err := e.svc.ContinueAsNew(t.Context(), st, "arn:aws:states:us-east-1:000000000000:stateMachine:disruption")
	if err != nil {
		t.Fatalf("ContinueAsNew() error = %v", err)
	}
	if got.Execution != execID+"-c3" || len(e.starter.started) != 1 {
		t.Fatalf("ContinueAsNew() = %+v, %d started; want %s-c3 started once", got, len(e.starter.started), execID)
	}
	next := e.starter.started[0].input.(workflow.DisruptionState)
	if next.ID != execID || next.ResumeAt != workflow.ResumeAtDrain || !next.Committed || next.Continuation != 3 || next.Drain != nil {
		t.Errorf("continuation input = %+v, want the same command resuming at the drain", next)
	}
}

func TestExecutionName(t *testing.T) {
	id := "consolidate-general-nc-3-1a2b3c4d"
	a := termination.ExecutionName(id, t0.Add(time.Minute))
	b := termination.ExecutionName(id, t0.Add(4*time.Minute))
	c := termination.ExecutionName(id, t0.Add(6*time.Minute))
	if a != b {
		t.Errorf("names in one window differ: %s, %s", a, b)
	}
	if a == c {
		t.Errorf("names in two windows are equal: %s", a)
	}
	if !strings.HasPrefix(a, "consolidate-general-nc-3-") || len(a) != len("consolidate-general-nc-3-")+10 {
		t.Errorf("ExecutionName() = %q, want consolidate-general-nc-3-<10 hex>", a)
	}
	long := termination.ExecutionName("drift-"+strings.Repeat("x", 100)+"-1a2b3c4d", t0)
	if len(long) != 80 || !strings.HasPrefix(long, "drift-xxx") {
		t.Errorf("long ExecutionName() = %q (%d), want 80 characters", long, len(long))
	}
	if got := termination.ContinuationName(strings.Repeat("y", 80), 12); len(got) != 80 || !strings.HasSuffix(got, "-c12") {
		t.Errorf("ContinuationName() = %q, want 80 characters ending -c12", got)
	}
	// A retried launch step runs in another invocation, so the name must be
	// a pure function of its arguments: pinned here to the value computed
	// outside Go (base32 [a-z2-7] of SHA-256 "nodewright/replacement/<id>/<i>").
	for i, want := range []string{"general-4ra2tr3kfy", "general-ufscgsepfi"} {
		if got := termination.ReplacementName("general", id, i); got != want {
			t.Errorf("ReplacementName(general, %s, %d) = %q, want %q", id, i, got, want)
		}
	}
	if termination.ReplacementName("general", id, 0) == termination.ReplacementName("general", id+"x", 0) {
		t.Error("ReplacementName() is the same for two executions")
	}
	if got := termination.ReplacementName("spot", id, 0); got != "spot-4ra2tr3kfy" {
		t.Errorf("ReplacementName(spot, %s, 0) = %q, want the NodePool as prefix: spot-4ra2tr3kfy", id, got)
	}
}

func TestDefaultSettings(t *testing.T) {
	if got := termination.DefaultSettings(workflow.MethodEmpty).ValidationDelaySeconds; got != 15 {
		t.Errorf("Empty validation delay = %d, want 15", got)
	}
	if got := termination.DefaultSettings(workflow.MethodDrifted).ValidationDelaySeconds; got != 0 {
		t.Errorf("Drifted validation delay = %d, want 0", got)
	}
	if got := termination.DefaultSettings(workflow.MethodDrifted).ReplacementTimeoutSeconds; got != 600 {
		t.Errorf("replacement timeout = %d, want 600", got)
	}
}
