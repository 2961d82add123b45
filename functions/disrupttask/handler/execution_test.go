package handler_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sfnlocal "github.com/nodewright/nodewright/local/stepfunctions"
	apiv1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// The tests below run statemachines/disruption.asl.json and
// interruption.asl.json in aws-local-stepfunctions, every task invoking the
// real handler through local/lambdaserver; DynamoDB is kumo, the cluster a
// fake clientset, EC2 a fake. They skip when `make sfn-deps` has not run.

func TestDisruptionReplacesANode(t *testing.T) {
	e := newEnv(t, node("node-a", "general"),
		pod("default", "web-0", "node-a"), pod("default", "web-1", "node-a"), pod("kube-system", "agent", "node-a", daemonSet))
	e.putClaim(candidateClaim("a", "general"))
	in, planned := command("consolidate-a-1111111111", workflow.MethodUnderutilized, 1, []string{"a"}, "general-r1")
	e.storeCommand(in, planned)
	checks := 0
	e.beforeStep = func(ti workflow.TaskInput) {
		// The replacement boots between the first and second readiness
		// checks.
		if ti.Step == workflow.StepCheckReplacements {
			if checks++; checks == 2 {
				e.boot("general-r1")
			}
		}
	}

	res := e.run("disruption.asl.json", in.ID, in)

	if res.Status != sfnlocal.Succeeded {
		t.Fatalf("execution %s: %s: %s", res.Status, res.Error, res.Cause)
	}
	wantStates := []string{"Start", "AcquireBudget", "NeedsReplacements", "LaunchReplacements", "CheckReplacements", "ReplacementsReady?",
		"WaitForReplacements", "CheckReplacements", "ReplacementsReady?", "ValidationDelay", "TaintCandidates", "Revalidate", "Commit",
		"BeginTermination", "StartDrain", "Drain", "Drained?", "WaitToDrain", "Drain", "Drained?", "WaitToDrain", "Drain", "Drained?",
		"TerminateInstances", "Terminated", "DeleteNodes", "ReleaseBudget", "Done"}
	if diff := cmp.Diff(wantStates, res.StatesEntered()); diff != "" {
		t.Errorf("states entered mismatch (-want +got):\n%s", diff)
	}
	// The history tells what happened to every pod: the non-DaemonSet
	// pods first, then the DaemonSet pod.
	var actions []string
	for _, d := range stateOutputs[workflow.DrainOutput](t, res, "Drain", "drain") {
		for _, n := range d.Nodes {
			for _, p := range n.Pods {
				actions = append(actions, p.Pod+" "+p.Action)
			}
		}
	}
	wantActions := []string{"default/web-0 Evicted", "default/web-1 Evicted", "kube-system/agent WaitingForEarlierTier", "kube-system/agent Evicted"}
	if diff := cmp.Diff(wantActions, actions); diff != "" {
		t.Errorf("pod actions mismatch (-want +got):\n%s", diff)
	}
	if _, ok := e.node("node-a"); ok {
		t.Error("node-a still exists")
	}
	if _, ok := e.claim("a"); ok {
		t.Error("nodeclaim a still exists")
	}
	if r, ok := e.claim("general-r1"); !ok || r.Status.NodeName != "node-general-r1" {
		t.Errorf("replacement general-r1 = %+v, %v; want it running", r.Status, ok)
	}
	if diff := cmp.Diff([]string{"i-a"}, e.ec2.terminatedIDs()); diff != "" {
		t.Errorf("terminated instances mismatch (-want +got):\n%s", diff)
	}
	if l := e.leases("general"); len(l) != 0 {
		t.Errorf("budget leases after the execution = %v, want none", l)
	}
	wantEvents := []string{
		"DisruptionLaunching on NodeClaim general-r1",
		"DisruptionTerminating on Node node-a",
		"DisruptionTerminating on NodeClaim a",
		"DisruptionWaitingReadiness on NodeClaim general-r1",
		"Evicted on Pod default/web-0",
		"Evicted on Pod default/web-1",
		"Evicted on Pod kube-system/agent",
	}
	if diff := cmp.Diff(wantEvents, e.events(t)); diff != "" {
		t.Errorf("event records mismatch (-want +got):\n%s", diff)
	}
}

// events lists the event records the execution left, as "<reason> on
// <kind> <name>", sorted.
func (e *env) events(t *testing.T) []string {
	t.Helper()
	recs, err := e.store.ListEvents(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		switch {
		case r.Pod != "":
			if r.PodUID == "" {
				t.Errorf("record %s names pod %s without its UID", r.ID, r.Pod)
			}
			out = append(out, r.Reason+" on Pod "+r.Pod)
		case r.Node != "":
			out = append(out, r.Reason+" on Node "+r.Node)
		default:
			out = append(out, r.Reason+" on NodeClaim "+r.NodeClaim)
		}
	}
	slices.Sort(out)
	return out
}

func TestDisruptionForceDeletesAPDBBlockedPodAtTheTerminationDeadline(t *testing.T) {
	grace := int64(300)
	e := newEnv(t, node("node-a", "general"), pod("default", "db-0", "node-a", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &grace }))
	e.blocked["default/db-0"] = "default/db-pdb"
	e.clock.tick = time.Minute
	e.putClaim(candidateClaim("a", "general", func(c *apiv1.NodeClaim) { c.Spec.TerminationGracePeriod = &apiv1.Duration{Duration: time.Hour} }))
	in, _ := command("drift-a-2222222222", workflow.MethodDrifted, 1, []string{"a"})

	res := e.run("disruption.asl.json", in.ID, in)

	if res.Status != sfnlocal.Succeeded {
		t.Fatalf("execution %s: %s: %s", res.Status, res.Error, res.Cause)
	}
	drains := stateOutputs[workflow.DrainOutput](t, res, "Drain", "drain")
	blocked, deletedAt := 0, -1
	for i, d := range drains {
		blocked += d.Nodes[0].Counts[workflow.PodEvictionBlocked]
		if d.Nodes[0].Counts[workflow.PodDeleted] == 1 && deletedAt < 0 {
			deletedAt = i
		}
	}
	if blocked < 50 || deletedAt < 0 {
		t.Fatalf("drain rounds: %d blocked evictions, deletion in round %d; want the PDB to hold the pod for ~55 rounds, then a deletion", blocked, deletedAt+1)
	}
	// The deadline is the termination start + 1h; the pod goes once less
	// than its 300 s grace is left, with the time left as grace.
	deadline := drains[deletedAt].Nodes[0].Deadline
	term := stateOutputs[workflow.NodesOutput](t, res, "BeginTermination", "termination")[0].Nodes[0].Deadline
	if deadline == nil || term == nil || !deadline.Equal(*term) {
		t.Fatalf("drain deadline %v, termination deadline %v; want the same", deadline, term)
	}
	if got := e.deletedGrace("default/db-0"); got < 1 || got > 300 {
		t.Errorf("db-0 deleted with %d s of grace, want 1 to 300", got)
	}
	if _, ok := e.node("node-a"); ok {
		t.Error("node-a still exists")
	}
	// Every round the PDB refuses makes no progress: one FailedDraining
	// for the whole run of refusals, however many rounds it lasts.
	wantEvents := []string{
		"Disrupted on Pod default/db-0",
		"DisruptionTerminating on Node node-a",
		"DisruptionTerminating on NodeClaim a",
		"FailedDraining on Node node-a",
		"TerminationGracePeriodExpiring on Node node-a",
	}
	if diff := cmp.Diff(wantEvents, e.events(t)); diff != "" {
		t.Errorf("event records mismatch (-want +got):\n%s", diff)
	}
}

func TestDisruptionRollsBackAFailedLaunch(t *testing.T) {
	e := newEnv(t, node("node-a", "general"), pod("default", "web-0", "node-a"))
	e.putClaim(candidateClaim("a", "general"))
	in, planned := command("consolidate-a-3333333333", workflow.MethodUnderutilized, 1, []string{"a"}, "general-r1")
	e.storeCommand(in, planned)
	e.ec2.ice["general-r1"] = true

	res := e.run("disruption.asl.json", in.ID, in)

	if res.Status != sfnlocal.Failed || res.Error != "DisruptionRolledBack" || !strings.Contains(res.Cause, "InsufficientCapacity") {
		t.Fatalf("execution = %s %s (%s), want FAILED DisruptionRolledBack naming the capacity error", res.Status, res.Error, res.Cause)
	}
	wantStates := []string{"Start", "AcquireBudget", "NeedsReplacements", "LaunchReplacements", "Rollback", "RolledBack?", "Failed"}
	if diff := cmp.Diff(wantStates, res.StatesEntered()); diff != "" {
		t.Errorf("states entered mismatch (-want +got):\n%s", diff)
	}
	e.checkGivenBack("a")
	if l := e.leases("general"); len(l) != 0 {
		t.Errorf("budget leases after the rollback = %v, want none", l)
	}
	if diff := cmp.Diff([]string{"default/web-0"}, e.podsOn("node-a")); diff != "" {
		t.Errorf("pods on node-a mismatch (-want +got):\n%s", diff)
	}
}

func TestDisruptionRollsBackWhenTheReplacementDoesNotInitialize(t *testing.T) {
	e := newEnv(t, node("node-a", "general"), pod("default", "web-0", "node-a"))
	e.clock.tick = time.Minute
	e.putClaim(candidateClaim("a", "general"))
	in, planned := command("drift-a-4444444444", workflow.MethodDrifted, 1, []string{"a"}, "general-r1")
	e.storeCommand(in, planned)

	res := e.run("disruption.asl.json", in.ID, in)

	if res.Status != sfnlocal.Failed || !strings.Contains(res.Cause, "not initialized within 10m0s") {
		t.Fatalf("execution = %s %s (%s), want a rollback after the 10 min replacement timeout", res.Status, res.Error, res.Cause)
	}
	rb := stateOutputs[workflow.RollbackOutput](t, res, "Rollback", "rollback")
	if len(rb) != 1 || !slices.Equal(rb[0].RemovedReplacements, []string{"general-r1"}) {
		t.Errorf("rollback = %+v, want the replacement removed", rb)
	}
	if _, ok := e.claim("general-r1"); ok {
		t.Error("the replacement's NodeClaim is still stored")
	}
	if !slices.Contains(e.ec2.terminatedIDs(), "i-general-r1") {
		t.Errorf("terminated = %v, want the replacement's instance", e.ec2.terminatedIDs())
	}
	e.checkGivenBack("a")
}

func TestDisruptionAbandonsACandidateThatReceivedAPod(t *testing.T) {
	e := newEnv(t, node("node-a", "general"))
	e.putClaim(candidateClaim("a", "general"))
	in, _ := command("empty-a-5555555555", workflow.MethodEmpty, 1, []string{"a"})
	e.beforeStep = func(ti workflow.TaskInput) {
		// A pod is bound while the command waits for its validation.
		if ti.Step == workflow.StepTaint {
			p := pod("default", "late", "node-a")
			p.Status.Conditions[0].LastTransitionTime.Time = t0.Add(5 * time.Second)
			if _, err := e.cs.CoreV1().Pods("default").Create(t.Context(), p, createOptions); err != nil {
				t.Error(err)
			}
		}
	}

	res := e.run("disruption.asl.json", in.ID, in)

	if res.Status != sfnlocal.Succeeded || res.StatesEntered()[len(res.StatesEntered())-1] != "Abandoned" {
		t.Fatalf("execution = %s, states %v; want it abandoned", res.Status, res.StatesEntered())
	}
	e.checkGivenBack("a")
	if diff := cmp.Diff([]string{"default/late"}, e.podsOn("node-a")); diff != "" {
		t.Errorf("pods on node-a mismatch (-want +got):\n%s", diff)
	}
}

// TestDisruptionBudgetHoldsAcrossConcurrentExecutions starts four commands
// on four nodes of one pool whose budget allows two disruptions, at once.
// Every execution tries to lease its node before any can finish (each
// waits at its first readiness check until all four have tried), so the
// conditional write on the pool's budget item is what decides: two
// proceed, two are abandoned with BudgetExhausted, and at no time do more
// than two executions hold a lease.
func TestDisruptionBudgetHoldsAcrossConcurrentExecutions(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	objects := []runtime.Object{}
	for _, n := range names {
		objects = append(objects, node("node-"+n, "general"), pod("default", "web-"+n, "node-"+n))
	}
	e := newEnv(t, objects...)
	var (
		mu       sync.Mutex
		tried    int
		maxHeld  int
		allTried = make(chan struct{})
	)
	e.beforeStep = func(ti workflow.TaskInput) {
		switch ti.Step {
		case workflow.StepCheckReplacements:
			select {
			case <-allTried:
			case <-time.After(30 * time.Second):
				t.Error("timed out waiting for every execution to try the budget")
			}
			e.boot(ti.State.Replacements[0].NodeClaim)
		}
		mu.Lock()
		if held := len(e.leases("general")); held > maxHeld {
			maxHeld = held
		}
		mu.Unlock()
	}
	type result struct {
		name string
		res  sfnlocal.Result
	}
	results := make(chan result, len(names))
	var inputs []workflow.DisruptionInput
	for _, n := range names {
		e.putClaim(candidateClaim(n, "general"))
		in, planned := command("consolidate-"+n+"-6666666666", workflow.MethodUnderutilized, 2, []string{n}, "general-r"+n)
		e.storeCommand(in, planned)
		inputs = append(inputs, in)
	}
	// Count budget attempts as the handler answers them.
	done := e.countAttempts(func() {
		mu.Lock()
		defer mu.Unlock()
		if tried++; tried == len(names) {
			close(allTried)
		}
	})
	defer done()
	var wg sync.WaitGroup
	for _, in := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- result{in.ID, e.run("disruption.asl.json", in.ID, in)}
		}()
	}
	wg.Wait()
	close(results)

	var succeeded, abandoned []string
	for r := range results {
		last := r.res.StatesEntered()[len(r.res.StatesEntered())-1]
		switch {
		case r.res.Status == sfnlocal.Succeeded && last == "Done":
			succeeded = append(succeeded, r.name)
		case r.res.Status == sfnlocal.Succeeded && last == "Abandoned":
			errs := stateOutputs[workflow.TaskError](t, r.res, "Rollback", "error")
			if len(errs) != 1 || errs[0].Error != workflow.ErrBudgetExhausted {
				t.Errorf("%s abandoned with %+v, want BudgetExhausted", r.name, errs)
			}
			abandoned = append(abandoned, r.name)
		default:
			t.Errorf("%s: %s %s (%s), states %v", r.name, r.res.Status, r.res.Error, r.res.Cause, r.res.StatesEntered())
		}
	}
	if len(succeeded) != 2 || len(abandoned) != 2 {
		t.Errorf("succeeded %v, abandoned %v; want two of each", succeeded, abandoned)
	}
	if maxHeld > 2 {
		t.Errorf("at most %d leases were held at once, want at most 2", maxHeld)
	}
	if l := e.leases("general"); len(l) != 0 {
		t.Errorf("budget leases after every execution = %v, want none", l)
	}
}

func TestDisruptionContinuesALongDrainAsANewExecution(t *testing.T) {
	e := newEnv(t, node("node-a", "general"), pod("default", "db-0", "node-a"))
	e.blocked["default/db-0"] = "default/db-pdb"
	e.putClaim(candidateClaim("a", "general"))
	in, _ := command("drift-a-7777777777", workflow.MethodDrifted, 1, []string{"a"})
	in.Settings.MaxDrainRounds = 3

	first := e.run("disruption.asl.json", in.ID, in)

	if first.Status != sfnlocal.Succeeded || first.StatesEntered()[len(first.StatesEntered())-1] != "ContinuedAsNew" {
		t.Fatalf("first execution = %s, states %v; want ContinuedAsNew", first.Status, first.StatesEntered())
	}
	if len(e.starter.started) != 1 || e.starter.names[0] != in.ID+"-c1" {
		t.Fatalf("continuations started = %v, want %s-c1", e.starter.names, in.ID)
	}
	// The PDB lets go; the continuation finishes the drain with the
	// root's lease.
	e.mu.Lock()
	delete(e.blocked, "default/db-0")
	e.mu.Unlock()
	next := e.starter.started[0]
	second := e.run("disruption.asl.json", e.starter.names[0], next)

	if second.Status != sfnlocal.Succeeded {
		t.Fatalf("continuation %s: %s: %s", second.Status, second.Error, second.Cause)
	}
	if got := second.StatesEntered()[:3]; !slices.Equal(got, []string{"Start", "StartDrain", "Drain"}) {
		t.Errorf("continuation starts with %v, want the drain", got)
	}
	if _, ok := e.node("node-a"); ok {
		t.Error("node-a still exists")
	}
	if l := e.leases("general"); len(l) != 0 {
		t.Errorf("budget leases after the continuation = %v, want none", l)
	}
}

func TestInterruptionDrainsAtOnce(t *testing.T) {
	e := newEnv(t, node("node-a", "general"),
		pod("default", "batch", "node-a", func(p *corev1.Pod) { p.Annotations = map[string]string{apiv1.AnnotationDoNotDisrupt: "true"} }))
	e.putClaim(candidateClaim("a", "general"))
	in := workflow.InterruptionInput{NodeClaim: "a", Node: "node-a", InstanceID: "i-a", Reason: "spot_interrupted",
		EventID: "4f1c8f0e", Deadline: t0.Add(2 * time.Minute)}

	res := e.run("interruption.asl.json", "interrupt-a-0123456789ab", in)

	if res.Status != sfnlocal.Succeeded {
		t.Fatalf("execution %s: %s: %s", res.Status, res.Error, res.Cause)
	}
	wantStates := []string{"Start", "Prepare", "ClaimNodeClaim", "TaintCandidates", "BeginTermination", "StartDrain", "Drain", "Drained?",
		"WaitToDrain", "Drain", "Drained?", "TerminateInstances", "Terminated", "DeleteNodes", "ReleaseBudget", "Done"}
	if diff := cmp.Diff(wantStates, res.StatesEntered()); diff != "" {
		t.Errorf("states entered mismatch (-want +got):\n%s", diff)
	}
	first := stateOutputs[workflow.DrainOutput](t, res, "Drain", "drain")[0]
	if first.Nodes[0].Counts[workflow.PodEvicted] != 1 {
		t.Errorf("first drain round = %+v, want the do-not-disrupt pod evicted", first.Nodes[0])
	}
	if diff := cmp.Diff([]string{"i-a"}, e.ec2.terminatedIDs()); diff != "" {
		t.Errorf("terminated mismatch (-want +got):\n%s", diff)
	}
	if _, ok := e.claim("a"); ok {
		t.Error("nodeclaim a still exists")
	}
}

func TestInterruptionOfANodeClaimAlreadyBeingInterrupted(t *testing.T) {
	e := newEnv(t, node("node-a", "general"))
	e.putClaim(candidateClaim("a", "general", func(c *apiv1.NodeClaim) {
		c.Annotations = map[string]string{termination.AnnotationClaimHolder: "interrupt-a-000000000000",
			termination.AnnotationClaimMethod: workflow.MethodInterrupted, termination.AnnotationClaimUntil: t0.Add(time.Hour).Format(time.RFC3339)}
	}))
	in := workflow.InterruptionInput{NodeClaim: "a", Node: "node-a", InstanceID: "i-a", Reason: "instance_stopped", EventID: "e2", Deadline: t0}

	res := e.run("interruption.asl.json", "interrupt-a-111111111111", in)

	if res.Status != sfnlocal.Succeeded || res.StatesEntered()[len(res.StatesEntered())-1] != "AlreadyHandled" {
		t.Fatalf("execution = %s, states %v; want AlreadyHandled", res.Status, res.StatesEntered())
	}
	if _, ok := e.node("node-a"); !ok {
		t.Error("node-a was deleted by the second execution")
	}
}

func TestStateMachinesValidate(t *testing.T) {
	e := newEnv(t)
	for _, f := range []string{"disruption.asl.json", "interruption.asl.json"} {
		if err := e.runner.Validate(t.Context(), "../../../statemachines/"+f); err != nil {
			t.Errorf("asl-validator: %v", err)
		}
	}
}
