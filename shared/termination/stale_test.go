package termination_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

func TestReleaseStale(t *testing.T) {
	annotated := func(holder string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			disrupted(n)
			n.Annotations = map[string]string{termination.AnnotationClaimHolder: holder}
		}
	}
	e := newEnv(t, node("node-a", annotated("drift-a-1")), node("node-b", annotated("drift-b-1")), node("node-c", annotated("drift-c-1")))
	lapsed := t0.Add(-time.Minute)
	e.claims.put(nodeClaim("a", claimedBy("drift-a-1", workflow.MethodDrifted, lapsed), func(c *v1.NodeClaim) {
		c.DeletionTimestamp = &metav1.Time{Time: lapsed}
	}))
	e.claims.put(nodeClaim("b", claimedBy("drift-b-1", workflow.MethodDrifted, lapsed), func(c *v1.NodeClaim) {
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeInstanceTerminating, Status: metav1.ConditionTrue})
	}))
	e.claims.put(nodeClaim("c", claimedBy("drift-c-1", workflow.MethodDrifted, t0.Add(time.Minute))))
	e.claims.put(nodeClaim("d"))

	got, err := e.svc.ReleaseStale(t.Context(), t0)
	if err != nil {
		t.Fatalf("ReleaseStale() error = %v", err)
	}
	want := []termination.StaleRelease{
		{NodeClaim: "a", Holder: "drift-a-1", Outcome: "given back"},
		{NodeClaim: "b", Holder: "drift-b-1", Outcome: "deleted"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReleaseStale() mismatch (-want +got):\n%s", diff)
	}
	if n := e.node(t, "node-a"); len(n.Spec.Taints) != 0 {
		t.Errorf("node-a taints = %v, want none", n.Spec.Taints)
	}
	if a := e.claims.get(t, "a"); a.DeletionTimestamp != nil || termination.ClaimOf(&a).Holder != "" {
		t.Errorf("nodeclaim a = deletion %v, claim %+v; want it given back", a.DeletionTimestamp, termination.ClaimOf(&a))
	}
	if e.nodeExists(t, "node-b") || e.claims.has("b") {
		t.Error("node-b or nodeclaim b remains, want both deleted")
	}
	if n := e.node(t, "node-c"); len(n.Spec.Taints) != 1 {
		t.Errorf("node-c of a live execution lost its taint: %v", n.Spec.Taints)
	}
}
