package stack_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// sdkAttempts is the aws-sdk-go-v2 standard retryer's attempts per call:
// dropping as many answers fails the provisioner's CreateFleet call after
// EC2 launched.
const sdkAttempts = 3

// The interleaving of issue "launching twice after a lost CreateFleet
// answer", end to end: EC2 launches, every answer of the call (and of the
// SDK's retries) is lost, and before the redelivered batch is retried the
// offering EC2 chose is marked unavailable, so a rebuilt request would
// differ under the same ClientToken.
func TestLostCreateFleetAnswerThenAnUnavailableOfferingLaunchesExactlyOneInstance(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s)
	ctx := t.Context()
	s.Sim.DropAnswers("CreateFleet", sdkAttempts)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("lost-answer", 1, "100m", "128Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, time.Minute, "EC2 launched for the pod", func(context.Context, stack.Status) bool {
		return len(s.Sim.Instances()) == 1
	})
	first := s.Sim.Instances()[0]
	if err := s.MarkOfferingUnavailable(ctx, first.CapacityType, first.InstanceType, first.Zone); err != nil {
		t.Fatal(err)
	}

	st := eventually(t, s, 2*time.Minute, "the pod running", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0
	})
	var got []string
	for _, in := range s.Sim.Instances() {
		got = append(got, in.ID+" ("+in.State+")")
	}
	if len(got) != 1 || got[0] != first.ID+" (running)" || st.Nodes != 1 {
		t.Errorf("instances = %v, nodes %d; want exactly the first instance %s, running, and its Node", got, st.Nodes, first.ID)
	}
	var mismatches, dropped int
	for _, c := range s.Sim.CallsTo("CreateFleet") {
		if c.ErrorCode == "IdempotentParameterMismatch" {
			mismatches++
		}
		if c.AnswerFault != "" {
			dropped++
		}
	}
	if dropped != sdkAttempts || mismatches != 0 {
		t.Errorf("CreateFleet calls: %d answers dropped, %d IdempotentParameterMismatch; want %d and 0", dropped, mismatches, sdkAttempts)
	}
}

// The interleaving of issue "budget overrun through a lapsed lease", end
// to end, with a lease of seconds (Options.BudgetLease) instead of 15
// minutes: the first drift execution of a NodePool with a budget of one
// node drains a node whose pod a PodDisruptionBudget protects
// (maxUnavailable 0; the terminationGracePeriod lets drift start), its
// drain rounds back off past the lease, and the stale-lease sweep and the
// next evaluations look at the pool while it still runs, with the other
// drifted node the only candidate left (the first is annotated
// do-not-disrupt once its drain is refused). At no time
// do the live budget leases exceed the budget, nor are two nodes of the
// pool disrupted at once (tainted karpenter.sh/disrupted, or the candidate
// of an execution holding a live lease); the first execution rolls back or
// completes.
func TestDrainSlowedPastItsLeaseNeverExceedsTheBudget(t *testing.T) {
	const (
		pool  = "lease"
		lease = 15 * time.Second
	)
	s := startStack(t, func(o *stack.Options) { o.Disruption = true; o.BudgetLease = lease })
	if !s.Wired().Drift {
		t.Skip("drift needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, poolYAML(pool, "1", "5m")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, spreadOnePerNode(deployment("guarded", 2, "500m", "512Mi")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refuseEvictions(t, s, "guarded")
	eventually(t, s, 3*time.Minute, "both guarded pods Running, each on its own node", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 2 && st.PendingPods == 0 && st.ReadyNodes == 2
	})
	nodeOfClaim := map[string]string{}
	for node, claim := range claimOfNode(t, s, nodeList(t, s)) {
		nodeOfClaim[claim] = node
	}
	img := addImage(t, s, "amazon-eks-node-al2023-x86_64-standard-1.34-v20261122")
	pinAMI(t, s, "production", img.ID)
	pinned := time.Now()

	var (
		first      string // the first drift execution
		firstNode  string // its candidate
		blocked    bool   // firstNode annotated do-not-disrupt once its drain was refused
		afterFirst string // an execution on another node holding the budget after the first ended
		maxLeased  int
		maxAtOnce  int
	)
	deadline := pinned.Add(4 * time.Minute)
	for {
		// Leases first, then the nodes: a lease is taken only after the
		// node it replaces was given back, so this order never counts a
		// handover as two nodes.
		leases, err := s.BudgetLeases(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		disrupted := map[string]string{} // node -> why
		leased := 0
		for _, l := range leases {
			leased += l.Nodes
			if m := driftExecution.FindStringSubmatch(l.Execution); m != nil && nodeOfClaim[m[1]] != "" {
				disrupted[nodeOfClaim[m[1]]] += "leased by " + l.Execution + "; "
			}
		}
		for _, n := range nodeList(t, s) {
			if n.Labels[v1.LabelNodePool] == pool && hasTaint(&n, v1.TaintKeyDisrupted) {
				disrupted[n.Name] += "tainted; "
			}
		}
		maxLeased, maxAtOnce = max(maxLeased, leased), max(maxAtOnce, len(disrupted))
		if leased > 1 || len(disrupted) > 1 {
			t.Fatalf("%s after the pin, budget of 1 exceeded: leases %+v, nodes disrupted %v (executions %s)",
				time.Since(pinned).Round(100*time.Millisecond), leases, disrupted, executionSummary(s.Executions()))
		}

		execs := s.Executions()
		if first == "" {
			for _, e := range execs {
				if m := driftExecution.FindStringSubmatch(e.Name); m != nil {
					first, firstNode = e.Name, nodeOfClaim[m[1]]
					break
				}
			}
		}
		if first != "" && !blocked && drainRefused(t, s, first) {
			// From now on only the other node is a candidate: the sweep
			// or an evaluation handing it the budget while the first
			// execution still drains is the overrun.
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, v1.AnnotationDoNotDisrupt)
			if _, err := s.Kube.CoreV1().Nodes().Patch(ctx, firstNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			blocked = true
			t.Logf("%s after the pin: %s's drain of %s refused by the PodDisruptionBudget; %s annotated %s",
				time.Since(pinned).Round(100*time.Millisecond), first, firstNode, firstNode, v1.AnnotationDoNotDisrupt)
		}
		if fe, ok := executionNamed(execs, first); ok && !fe.Finished.IsZero() {
			for _, l := range leases {
				if l.Execution != first {
					afterFirst = l.Execution
				}
			}
		}
		if afterFirst != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no execution took the budget after the first one (%q on %s) ended: executions %s", first, firstNode, executionSummary(execs))
		}
		time.Sleep(200 * time.Millisecond)
	}
	fe, _ := executionNamed(s.Executions(), first)
	states := enteredStates(fe)
	t.Logf("%s: %s after %s, through %v; then %s took the budget; at most %d node(s) leased, %d disrupted at once",
		first, fe.Status, fe.Finished.Sub(fe.Started).Round(100*time.Millisecond), states, afterFirst, maxLeased, maxAtOnce)
	if !blocked {
		t.Errorf("the first execution %s ended before its drain was refused: the drain never outlasted its lease", first)
	}
	if !slices.Contains(states, "Rollback") && !slices.Contains(states, "Done") {
		t.Errorf("the first execution %s (%s %s) neither rolled back nor completed", first, fe.Status, fe.Error)
	}
}

// drainRefused reports whether execution recorded a FailedDraining event
// (a drain round whose evictions were refused).
func drainRefused(t testing.TB, s *stack.Stack, execution string) bool {
	t.Helper()
	records, err := s.EventRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if r.Reason == "FailedDraining" && strings.Contains(r.ID, execution) {
			return true
		}
	}
	return false
}

// executionNamed finds the execution named name.
func executionNamed(execs []stack.Execution, name string) (stack.Execution, bool) {
	for _, e := range execs {
		if e.Name == name {
			return e, true
		}
	}
	return stack.Execution{}, false
}

// enteredStates lists the states an execution entered, in order, without
// repeats next to each other.
func enteredStates(e stack.Execution) []string {
	var out []string
	for _, ev := range e.History {
		if ev.Type == "StateEntered" && ev.State != nil && (len(out) == 0 || out[len(out)-1] != ev.State.Name) {
			out = append(out, ev.State.Name)
		}
	}
	return out
}

// executionSummary is each execution's name, status and error.
func executionSummary(execs []stack.Execution) string {
	var b strings.Builder
	for _, e := range execs {
		fmt.Fprintf(&b, "[%s %s %s] ", e.Name, e.Status, e.Error)
	}
	return b.String()
}
