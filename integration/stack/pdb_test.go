package stack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// TestPDBBlocksDrainUntilTerminationGracePeriod drifts the node of a pod
// whose PodDisruptionBudget allows no disruption (maxUnavailable 0) in a
// NodePool with a terminationGracePeriod, and checks Karpenter's drain
// (karpenter-spec §5.2): the eviction is refused (429) and retried while
// the pod keeps running on its node, and at the termination deadline minus
// the pod's grace period the pod is deleted, the node removed and the pod
// runs again on the replacement.
func TestPDBBlocksDrainUntilTerminationGracePeriod(t *testing.T) {
	const (
		tgp      = 60 * time.Second
		podGrace = 5 * time.Second
	)
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Drift {
		t.Skip("drift needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, poolYAML("guarded", "1", tgp.String())); err != nil {
		t.Fatal(err)
	}
	d := deployment("guarded", 1, "500m", "512Mi")
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(podGrace / time.Second))
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refuseEvictions(t, s, "guarded")
	eventually(t, s, 3*time.Minute, "the guarded pod Running on its node", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0 && st.ReadyNodes == 1
	})
	pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=guarded"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("guarded pods: %v, err %v", pods, err)
	}
	guarded := pods.Items[0]
	node, err := s.Kube.CoreV1().Nodes().Get(ctx, guarded.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := claimOfNode(t, s, []corev1.Node{*node})[node.Name]

	img := addImage(t, s, "amazon-eks-node-al2023-x86_64-standard-1.34-v20261121")
	pinAMI(t, s, "production", img.ID)

	// Watch the guarded pod and its node until the pod runs elsewhere.
	var taintedAt, podGoneAt, nodeGoneAt, lastRunning time.Time
	deadline := time.Now().Add(5 * time.Minute)
	for {
		now := time.Now()
		p, err := s.Kube.CoreV1().Pods("default").Get(ctx, guarded.Name, metav1.GetOptions{})
		switch {
		case err == nil && p.UID == guarded.UID && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning:
			lastRunning = now
		case podGoneAt.IsZero():
			podGoneAt = now
		}
		n, err := s.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		switch {
		case err == nil && n.Spec.ProviderID == node.Spec.ProviderID:
			if taintedAt.IsZero() && hasTaint(n, v1.TaintKeyDisrupted) {
				taintedAt = now
			}
		case nodeGoneAt.IsZero():
			nodeGoneAt = now
		}
		if !nodeGoneAt.IsZero() && servingPods(t, s, "app=guarded") == 1 {
			break
		}
		if now.After(deadline) {
			t.Fatalf("not replaced after 5 minutes: tainted %v, pod gone %v, node gone %v, executions %+v", taintedAt, podGoneAt, nodeGoneAt, s.Executions())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if taintedAt.IsZero() {
		t.Fatalf("node %s was never seen tainted %s", node.Name, v1.TaintKeyDisrupted)
	}

	// The execution's own record: its deadline and its drain rounds.
	exec, ok := finishedExecution(t, s, "drift-"+claim+"-", 30*time.Second)
	if !ok {
		t.Fatalf("no finished drift-%s-<hash> execution (executions %+v)", claim, s.Executions())
	}
	if exec.Status != "SUCCEEDED" {
		t.Fatalf("execution %s: %s %s %s", exec.Name, exec.Status, exec.Error, exec.Cause)
	}
	termDeadline, blockedRounds := drainRecord(t, exec)
	t.Logf("deadline %s after the taint; %d drain rounds refused by the PDB; pod deleted %s before the deadline, node gone %s after it",
		termDeadline.Sub(taintedAt).Round(100*time.Millisecond), blockedRounds,
		termDeadline.Sub(podGoneAt).Round(100*time.Millisecond), nodeGoneAt.Sub(termDeadline).Round(100*time.Millisecond))

	if got := termDeadline.Sub(taintedAt); got < tgp-5*time.Second || got > tgp+5*time.Second {
		t.Errorf("termination deadline %s after the taint, want about the terminationGracePeriod %s", got, tgp)
	}
	if blockedRounds < 2 {
		t.Errorf("%d drain rounds saw the eviction refused, want at least 2 (the 429 retried)", blockedRounds)
	}
	// The pod runs, never evicted, until the deadline minus its grace
	// period (observed every 100ms; the deadline is whole seconds).
	forced := termDeadline.Add(-podGrace)
	if lastRunning.Before(forced.Add(-2 * time.Second)) {
		t.Errorf("the guarded pod last ran %s before its forced deletion time %s: the PDB did not hold it", forced.Sub(lastRunning), forced.Format(time.TimeOnly))
	}
	if podGoneAt.Before(forced.Add(-time.Second)) {
		t.Errorf("the guarded pod went %s before its forced deletion time %s", forced.Sub(podGoneAt), forced.Format(time.TimeOnly))
	}
	if podGoneAt.After(termDeadline.Add(5 * time.Second)) {
		t.Errorf("the guarded pod went %s after the termination deadline", podGoneAt.Sub(termDeadline))
	}
	if nodeGoneAt.After(termDeadline.Add(30 * time.Second)) {
		t.Errorf("node %s removed %s after the termination deadline", node.Name, nodeGoneAt.Sub(termDeadline))
	}
}

// refuseEvictions creates a PodDisruptionBudget allowing no disruption
// (maxUnavailable 0) of the pods labelled app=<app>: every eviction of
// them is refused (429) until a terminationGracePeriod or a forceful drain
// deletes them.
func refuseEvictions(t testing.TB, s *stack.Stack, app string) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	if _, err := s.Kube.PolicyV1().PodDisruptionBudgets("default").Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hasTaint reports whether n carries a taint with key.
func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// finishedExecution waits up to timeout for a finished execution whose
// name starts with prefix.
func finishedExecution(t testing.TB, s *stack.Stack, prefix string, timeout time.Duration) (stack.Execution, bool) {
	t.Helper()
	end := time.Now().Add(timeout)
	for {
		for _, e := range s.Executions() {
			if strings.HasPrefix(e.Name, prefix) && !e.Finished.IsZero() {
				return e, true
			}
		}
		if time.Now().After(end) {
			return stack.Execution{}, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// drainRecord reads an execution's history: the termination deadline
// BeginTermination set, and how many Drain rounds found an eviction
// refused by a PodDisruptionBudget.
func drainRecord(t testing.TB, e stack.Execution) (time.Time, int) {
	t.Helper()
	var deadline time.Time
	blocked := 0
	for _, ev := range e.History {
		if ev.Type != "StateExited" || ev.State == nil {
			continue
		}
		var out struct {
			Termination workflow.NodesOutput `json:"termination"`
			Drain       workflow.DrainOutput `json:"drain"`
		}
		if err := json.Unmarshal(ev.State.Output, &out); err != nil {
			t.Fatalf("%s output: %v", ev.State.Name, err)
		}
		switch ev.State.Name {
		case "BeginTermination":
			for _, n := range out.Termination.Nodes {
				if n.Deadline != nil {
					deadline = *n.Deadline
				}
			}
		case "Drain":
			for _, n := range out.Drain.Nodes {
				if n.Counts[workflow.PodEvictionBlocked] > 0 {
					blocked++
				}
			}
		}
	}
	if deadline.IsZero() {
		t.Fatalf("execution %s: BeginTermination recorded no termination deadline", e.Name)
	}
	return deadline, blocked
}
