package termination_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

func TestTaint(t *testing.T) {
	e := newEnv(t, node("node-a"), node("node-b", disrupted))
	e.claims.put(nodeClaim("a"))
	e.claims.put(nodeClaim("b"))
	st := e.hold(state(workflow.MethodUnderutilized, 2, "a", "b"))
	for range 2 {
		if _, err := e.svc.Taint(t.Context(), st, t0); err != nil {
			t.Fatalf("Taint() error = %v", err)
		}
	}
	for _, name := range []string{"node-a", "node-b"} {
		n := e.node(t, name)
		var disruptedTaints int
		for _, tn := range n.Spec.Taints {
			if tn.Key == v1.TaintKeyDisrupted && tn.Effect == corev1.TaintEffectNoSchedule {
				disruptedTaints++
			}
		}
		if disruptedTaints != 1 || n.Annotations[termination.AnnotationClaimHolder] != execID {
			t.Errorf("%s: %d disrupted taints, holder %q; want one taint and the execution's annotation", name, disruptedTaints, n.Annotations[termination.AnnotationClaimHolder])
		}
	}
}

func TestTaintNodeGone(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		wantName string
	}{
		{name: "should abandon a graceful command whose node is gone", method: workflow.MethodEmpty, wantName: workflow.ErrNoLongerEligible},
		{name: "should carry on with an expiration whose node is gone", method: workflow.MethodExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			_, err := e.svc.Taint(t.Context(), state(tt.method, 1, "a"), t0)
			if got := workflowName(t, err); got != tt.wantName || (tt.wantName == "" && err != nil) {
				t.Errorf("Taint() error = %v (%q), want %q", err, got, tt.wantName)
			}
		})
	}
}

func TestRevalidate(t *testing.T) {
	held := claimedBy(execID, "", t0.Add(time.Hour))
	tests := []struct {
		name    string
		method  string
		claim   v1.NodeClaim
		objects []runtime.Object
		// wantWhy is a substring of the reason; "" means eligible.
		wantWhy string
	}{
		{name: "should keep a candidate nothing changed on", method: workflow.MethodUnderutilized, claim: nodeClaim("a", held),
			objects: []runtime.Object{node("node-a"), pod("default", "web", "node-a")}},
		{name: "should drop a candidate that received a pod after the decision", method: workflow.MethodUnderutilized, claim: nodeClaim("a", held),
			objects: []runtime.Object{node("node-a"), pod("default", "late", "node-a", scheduledAt(t0.Add(10*time.Second)))},
			wantWhy: "pod default/late arrived on node-a"},
		{name: "should drop an empty candidate that received a pod", method: workflow.MethodEmpty, claim: nodeClaim("a", held),
			objects: []runtime.Object{node("node-a"), pod("default", "web", "node-a")},
			wantWhy: "pod default/web arrived on the empty node node-a"},
		{name: "should not count a DaemonSet pod against an empty candidate", method: workflow.MethodEmpty, claim: nodeClaim("a", held),
			objects: []runtime.Object{node("node-a"), pod("kube-system", "agent", "node-a", daemonSet, scheduledAt(t0.Add(time.Second)))}},
		{name: "should block consolidation of a node with a do-not-disrupt pod", method: workflow.MethodUnderutilized, claim: nodeClaim("a", held),
			objects: []runtime.Object{node("node-a"), pod("default", "batch", "node-a", doNotDisrupt)},
			wantWhy: "pod default/batch has an active karpenter.sh/do-not-disrupt"},
		{name: "should block drift of a node with a do-not-disrupt pod without terminationGracePeriod", method: workflow.MethodDrifted, claim: nodeClaim("a", held),
			objects: []runtime.Object{node("node-a"), pod("default", "batch", "node-a", doNotDisrupt)},
			wantWhy: "do-not-disrupt"},
		{name: "should let drift proceed past a do-not-disrupt pod when the NodeClaim has terminationGracePeriod", method: workflow.MethodDrifted,
			claim:   nodeClaim("a", held, withTGP(time.Hour)),
			objects: []runtime.Object{node("node-a"), pod("default", "batch", "node-a", doNotDisrupt)}},
		{name: "should drop a node annotated do-not-disrupt", method: workflow.MethodUnderutilized, claim: nodeClaim("a", held),
			objects: []runtime.Object{node("node-a", func(n *corev1.Node) { n.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"} })},
			wantWhy: "node node-a is annotated karpenter.sh/do-not-disrupt"},
		{name: "should drop a candidate whose node is gone", method: workflow.MethodUnderutilized, claim: nodeClaim("a", held),
			wantWhy: "node node-a is gone"},
		{name: "should drop a candidate another execution holds", method: workflow.MethodUnderutilized,
			claim:   nodeClaim("a", claimedBy("expire-general-a-1", workflow.MethodExpired, t0.Add(time.Hour))),
			objects: []runtime.Object{node("node-a")}, wantWhy: `held by "expire-general-a-1"`},
		{name: "should not re-validate an expiration", method: workflow.MethodExpired, claim: nodeClaim("a", held),
			objects: []runtime.Object{node("node-a"), pod("default", "late", "node-a", doNotDisrupt, scheduledAt(t0.Add(time.Second)))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objects...)
			e.claims.put(tt.claim)
			_, err := e.svc.Revalidate(t.Context(), state(tt.method, 1, "a"), t0.Add(time.Minute))
			switch {
			case tt.wantWhy == "" && err != nil:
				t.Errorf("Revalidate() error = %v, want the candidate kept", err)
			case tt.wantWhy != "" && (workflowName(t, err) != workflow.ErrNoLongerEligible || !strings.Contains(err.Error(), tt.wantWhy)):
				t.Errorf("Revalidate() error = %v, want NoLongerEligible mentioning %q", err, tt.wantWhy)
			}
		})
	}
}

func TestBeginTermination(t *testing.T) {
	e := newEnv(t, node("node-a"), node("node-b"))
	e.claims.put(nodeClaim("a", withTGP(time.Hour)))
	e.claims.put(nodeClaim("b"))
	st := e.hold(state(workflow.MethodDrifted, 2, "a", "b"))

	got, err := e.svc.BeginTermination(t.Context(), st, t0)
	if err != nil {
		t.Fatalf("BeginTermination() error = %v", err)
	}
	deadline := t0.Add(time.Hour)
	want := []workflow.NodeOutcome{
		{NodeClaim: "a", Node: "node-a", Outcome: "terminating", Deadline: &deadline},
		{NodeClaim: "b", Node: "node-b", Outcome: "terminating"},
	}
	if diff := cmp.Diff(want, got.Nodes); diff != "" {
		t.Errorf("BeginTermination() mismatch (-want +got):\n%s", diff)
	}
	// A repeated call keeps the first deadline.
	if _, err := e.svc.BeginTermination(t.Context(), st, t0.Add(time.Minute)); err != nil {
		t.Fatalf("repeated BeginTermination() error = %v", err)
	}
	a := e.claims.get(t, "a")
	if a.DeletionTimestamp == nil || !a.DeletionTimestamp.Equal(&metav1.Time{Time: t0}) || a.Annotations[v1.AnnotationNodeClaimTerminationTime] != "2026-11-29T13:00:00Z" {
		t.Errorf("nodeclaim a: deletion %v, termination timestamp %q; want %s and 2026-11-29T13:00:00Z", a.DeletionTimestamp, a.Annotations[v1.AnnotationNodeClaimTerminationTime], t0)
	}
	if b := e.claims.get(t, "b"); b.Annotations[v1.AnnotationNodeClaimTerminationTime] != "" {
		t.Errorf("nodeclaim b without terminationGracePeriod has a termination timestamp %q", b.Annotations[v1.AnnotationNodeClaimTerminationTime])
	}
	if n := e.node(t, "node-a"); n.Labels[v1.LabelExcludeFromLoadBalancers] != "karpenter" {
		t.Errorf("node-a labels = %v, want %s=karpenter", n.Labels, v1.LabelExcludeFromLoadBalancers)
	}
}

func TestTaintLeavesANodeAloneWhenADoNotDisruptPodLandedAfterTheDecision(t *testing.T) {
	e := newEnv(t, node("node-a"), node("node-b"),
		pod("default", "batch-0", "node-a", doNotDisrupt, scheduledAt(t0.Add(5*time.Second))))
	e.claims.put(nodeClaim("a"))
	e.claims.put(nodeClaim("b"))
	st := e.hold(state(workflow.MethodEmpty, 2, "a", "b"))

	_, err := e.svc.Taint(t.Context(), st, t0.Add(15*time.Second))
	if workflowName(t, err) != workflow.ErrNoLongerEligible || !strings.Contains(err.Error(), "batch-0") {
		t.Fatalf("Taint() error = %v, want NoLongerEligible naming the pod", err)
	}
	for _, name := range []string{"node-a", "node-b"} {
		if n := e.node(t, name); len(n.Spec.Taints) != 0 {
			t.Errorf("%s taints = %v, want none: revalidation comes before the taint", name, n.Spec.Taints)
		}
	}
}
