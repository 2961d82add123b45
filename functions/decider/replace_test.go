package decider_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/decider"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

const oncall = "arn:aws:iam::111122223333:role/platform-oncall"

// seedProtected is seed plus a newer snapshot in which node-a runs the
// do-not-disrupt pod db-0 (1500m of its 1930m): it fits nowhere else, so
// replacing node-a launches a node first.
func (e env) seedProtected(t *testing.T) {
	t.Helper()
	e.seed(t)
	snap, err := e.store.CurrentSnapshot(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "default", UID: "uid-db-0", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			Annotations: map[string]string{v1.AnnotationDoNotDisrupt: "true"}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "db", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("1500m"), corev1.ResourceMemory: mustQuantity("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	part := &v1.ClusterSnapshot{ID: "part-2", Cluster: testCluster, CreatedAt: metav1.NewTime(t0.Add(-30 * time.Second)), SnapshotID: "snap-2",
		Part: 0, Parts: 1, Nodes: snap.Nodes, Pods: []v1.PodSummary{v1.SummarizePod(pod)}}
	if _, err := e.store.PutSnapshotPart(t.Context(), part, t0.Add(-30*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// replaceAccess fails t when a call Replace made is outside the replace
// Lambda's table access (ddbstore.Schema): its role would be denied.
func (e env) replaceAccess(t *testing.T) {
	t.Helper()
	access := ddbstore.Schema().Access["replace"]
	for _, c := range e.calls.Denied(func(c awstest.DynamoDBCall) bool { return access.Allows(testCluster, c.Op, c.Index, c.PartitionKey) }) {
		t.Errorf("%s %s %s: not in the replace function's access (ddbstore.Schema): its role would be denied", c.Op, c.Index, c.PartitionKey)
	}
}

func TestReplace(t *testing.T) {
	req := decider.ReplaceRequest{ManualRequest: disruption.ManualRequest{Nodes: []string{"node-a"}, ForceAfter: 5 * time.Minute}, RequestedBy: oncall}
	wantID := disruption.ManualID("general-a", req.ManualRequest)

	t.Run("should start nothing on a dry run and report the plan", func(t *testing.T) {
		e := newEnv(t)
		e.seedProtected(t)
		dry := req
		dry.DryRun = true
		out, err := e.handler(t, t0).Replace(t.Context(), dry)
		if err != nil {
			t.Fatalf("Replace() error = %v", err)
		}
		if len(out.Started) != 0 || len(e.executions(t)) != 0 {
			t.Errorf("Replace(dry run) started %+v, executions %v; want nothing", out.Started, e.executions(t))
		}
		if len(out.Plan.Commands) != 1 || out.Plan.Commands[0].ID != wantID || out.Plan.Commands[0].Decision != disruption.DecisionReplace ||
			!mentions(out.Plan.Nodes[0].DoNotDisrupt, "default/db-0") || len(out.Plan.Budgets) == 0 || out.Snapshot != "snap-2" {
			t.Errorf("Replace(dry run) = %+v, want one replace command %s reporting db-0's do-not-disrupt and the budgets", out, wantID)
		}
	})

	t.Run("should start one Manual execution with the operator's identity", func(t *testing.T) {
		e := newEnv(t)
		e.seedProtected(t)
		out, err := e.handler(t, t0).Replace(t.Context(), req)
		if err != nil {
			t.Fatalf("Replace() error = %v", err)
		}
		want := []decider.Started{{Execution: wantID, Method: workflow.MethodManual, NodePool: "general", Candidates: []string{"general-a"}}}
		if diff := cmp.Diff(want, out.Started); diff != "" {
			t.Errorf("Started mismatch (-want +got):\n%s", diff)
		}
		in, ok := e.executions(t)[wantID]
		if !ok {
			t.Fatalf("executions = %v, want %s", e.executions(t), wantID)
		}
		wantManual := &workflow.ManualRequest{RequestedBy: oncall, Nodes: []string{"node-a"}, ForceAfterSeconds: 300}
		if diff := cmp.Diff(wantManual, in.Manual); diff != "" {
			t.Errorf("execution input's request mismatch (-want +got):\n%s", diff)
		}
		if in.Budget.Budgeted || in.ReplacementCount != 1 || in.CommandRef != termination.CommandRef(wantID) {
			t.Errorf("execution input = %+v, want an unbudgeted command with its replacement stored", in)
		}
	})

	// The fault: API Gateway or the CLI retries a request whose first
	// attempt started the execution, and that execution has since claimed
	// and begun deleting the node.
	t.Run("should start no second execution for a redelivered request", func(t *testing.T) {
		e := newEnv(t)
		e.seedProtected(t)
		first, err := e.handler(t, t0).Replace(t.Context(), req)
		if err != nil {
			t.Fatalf("first Replace() error = %v", err)
		}
		c, err := e.store.GetNodeClaim(t.Context(), "general-a")
		if err != nil {
			t.Fatal(err)
		}
		c.Annotations = map[string]string{termination.AnnotationClaimHolder: wantID, termination.AnnotationClaimMethod: workflow.MethodManual,
			termination.AnnotationClaimUntil: t0.Add(time.Hour).Format(time.RFC3339)}
		c.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Minute)}
		if _, err := e.store.UpdateNodeClaim(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		second, err := e.handler(t, t0.Add(2*time.Minute)).Replace(t.Context(), req)
		if err != nil {
			t.Fatalf("redelivered Replace() error = %v, want success", err)
		}
		if len(second.Started) != 1 || second.Started[0].Execution != first.Started[0].Execution || !second.Started[0].AlreadyExisted {
			t.Errorf("first %+v, redelivered %+v; want the same execution, found existing", first.Started, second.Started)
		}
		if n := len(e.executions(t)); n != 1 {
			t.Errorf("%d executions, want 1", n)
		}
		e.replaceAccess(t)
	})
}

func TestReplaceErrors(t *testing.T) {
	t.Run("should refuse every node nodewright does not own, starting nothing", func(t *testing.T) {
		e := newEnv(t)
		e.seedProtected(t)
		_, err := e.handler(t, t0).Replace(t.Context(), decider.ReplaceRequest{
			ManualRequest: disruption.ManualRequest{Nodes: []string{"node-a", "ip-10-0-0-1", "ip-10-0-0-2"}}, RequestedBy: oncall})
		var refused *disruption.RefusedError
		if !errors.As(err, &refused) || len(refused.Refusals) != 2 || refused.Refusals[0].Node != "ip-10-0-0-1" || refused.Refusals[1].Node != "ip-10-0-0-2" {
			t.Fatalf("Replace() error = %v, want both unowned nodes refused", err)
		}
		if n := len(e.executions(t)); n != 0 {
			t.Errorf("%d executions, want none", n)
		}
	})

	t.Run("should refuse a request without the caller's identity", func(t *testing.T) {
		e := newEnv(t)
		e.seedProtected(t)
		_, err := e.handler(t, t0).Replace(t.Context(), decider.ReplaceRequest{ManualRequest: disruption.ManualRequest{Nodes: []string{"node-a"}}})
		if !errors.Is(err, decider.ErrNoIdentity) {
			t.Errorf("Replace() error = %v, want ErrNoIdentity", err)
		}
	})

	t.Run("should report that there is no cluster state to plan from", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.handler(t, t0).Replace(t.Context(), decider.ReplaceRequest{ManualRequest: disruption.ManualRequest{Nodes: []string{"node-a"}}, RequestedBy: oncall})
		if !errors.Is(err, decider.ErrNoClusterState) {
			t.Errorf("Replace() error = %v, want ErrNoClusterState", err)
		}
	})
}

// mentions reports whether one of reports mentions pod.
func mentions(reports []string, pod string) bool {
	for _, r := range reports {
		if strings.Contains(r, pod) {
			return true
		}
	}
	return false
}
