package decider_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/decider"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// deleteNode replaces the seeded snapshot with one whose node-a is being
// deleted since at (kubectl delete node).
func (e env) deleteNode(t *testing.T, at time.Time) {
	t.Helper()
	snap, err := e.store.CurrentSnapshot(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	nodes := snap.Nodes
	for i := range nodes {
		if nodes[i].Name == "node-a" {
			nodes[i].DeletionTimestamp = &metav1.Time{Time: at}
		}
	}
	part := &v1.ClusterSnapshot{ID: "part-2", Cluster: testCluster, CreatedAt: metav1.NewTime(t0.Add(-30 * time.Second)), SnapshotID: "snap-2",
		Part: 0, Parts: 1, Nodes: nodes}
	if _, err := e.store.PutSnapshotPart(t.Context(), part, t0.Add(-30*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestHandleStartsOneDeleteExecutionForADeletedNode(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	e.deleteNode(t, t0.Add(-40*time.Second))

	first, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	if len(first.Started) != 1 {
		t.Fatalf("Started = %+v (warnings %v), want only the deletion (no Empty command for a node being deleted)", first.Started, first.Warnings)
	}
	s := first.Started[0]
	want := decider.Started{Execution: s.Execution, Method: "Deleted", NodePool: "general", Candidates: []string{"general-a"}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Started mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(s.Execution, "delete-general-a-") {
		t.Errorf("execution name %q, want delete-general-a-<hash>", s.Execution)
	}
	second, err := e.handler(t, t0.Add(10*time.Second)).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Started) != 1 || second.Started[0].Execution != s.Execution || !second.Started[0].AlreadyExisted {
		t.Errorf("second poll started %+v, want the same execution, found existing", second.Started)
	}
	execs := e.executions(t)
	if len(execs) != 1 {
		t.Fatalf("%d executions, want 1", len(execs))
	}
	in := execs[s.Execution]
	if in.Method != "Deleted" || in.Budget.Budgeted || workflow.IsBudgetedMethod(in.Method) || len(in.Replacements) != 0 ||
		in.Settings.ValidationDelaySeconds != 0 || len(in.Candidates) != 1 || in.Candidates[0].Node != "node-a" ||
		in.Candidates[0].ProviderID != "aws:///us-east-1a/i-0a" || in.Reason == "" {
		t.Errorf("execution input = %+v, want an unbudgeted delete of node-a without replacements", in)
	}
}

func TestHandleDoesNotStartADeleteForAClaimedNode(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	e.deleteNode(t, t0.Add(-40*time.Second))
	c, err := e.store.GetNodeClaim(t.Context(), "general-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Annotations = map[string]string{termination.AnnotationClaimHolder: "delete-general-a-0123456789", termination.AnnotationClaimMethod: "Deleted",
		termination.AnnotationClaimUntil: t0.Add(time.Minute).Format(time.RFC3339)}
	if _, err := e.store.UpdateNodeClaim(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	out, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Started) != 0 {
		t.Errorf("Started = %+v, want nothing while an execution holds the node", out.Started)
	}
}

func TestHandleStartsNoDeleteForANodeNotBeingDeleted(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	out, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Started {
		if s.Method == "Deleted" {
			t.Errorf("started %+v for a node nobody deleted", s)
		}
	}
}

// TestHandleDrainsAndDeletesTheNodeClaimsOfADeletedNodePool is issue 19
// item 6: once the synced configuration no longer holds a NodePool, each
// of its registered NodeClaims gets one delete-<nodeclaim>-<hash>
// execution (Method Deleted: drain, terminate, no budget), as Karpenter's
// ownerReference cascade deletes them, and a later poll starts no second.
func TestHandleDrainsAndDeletesTheNodeClaimsOfADeletedNodePool(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	cur, err := e.store.GetConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	next := cur.Config
	next.NodePools = nil
	next.CreatedAt = t0.Add(-time.Minute)
	next.Generation = cur.Generation + 1
	if _, err := e.store.PutConfig(t.Context(), next, cur.Version); err != nil {
		t.Fatal(err)
	}

	first, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	var deleted []decider.Started
	for _, s := range first.Started {
		if s.Method == "Deleted" {
			deleted = append(deleted, s)
		}
	}
	if len(deleted) != 1 || !strings.HasPrefix(deleted[0].Execution, "delete-general-a-") || !cmp.Equal(deleted[0].Candidates, []string{"general-a"}) {
		t.Fatalf("Started = %+v (warnings %v), want one delete-general-a-<hash> execution", first.Started, first.Warnings)
	}
	in := e.executions(t)[deleted[0].Execution]
	if in.Method != "Deleted" || in.Budget.Budgeted || len(in.Replacements) != 0 || !strings.Contains(in.Reason, `NodePool "general"`) {
		t.Errorf("execution input = %+v, want an unbudgeted Deleted drain naming the NodePool", in)
	}
	second, err := e.handler(t, t0.Add(10*time.Second)).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range second.Started {
		if s.Method == "Deleted" && !s.AlreadyExisted {
			t.Errorf("second poll started %+v, want nothing new", s)
		}
	}
}

// TestHandleRedeliveredKilledAndDuplicatedRunsStartAndRecordOnce injects
// the faults a scheduled Lambda meets: the first run's instance dies
// after its effects (the retry is a cold instance that remembers
// nothing), and the scheduler's at-least-once delivery runs two more
// invocations at the same time. Over the same snapshot every run derives
// the same Deleted command and the same event records; Step Functions'
// execution names and DynamoDB's conditional writes make each happen once.
func TestHandleRedeliveredKilledAndDuplicatedRunsStartAndRecordOnce(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	e.editPool(t, func(np *v1.NodePool) { np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}} })
	e.deleteNode(t, t0.Add(-40*time.Second))

	first, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatalf("first Handle() error = %v", err)
	}
	if len(first.Started) != 1 || first.Started[0].AlreadyExisted || first.Events == 0 {
		t.Fatalf("first run started %+v and wrote %d events; want one new Deleted execution and the budget events", first.Started, first.Events)
	}
	_, records := e.eventRecords(t)

	// The killed instance's retry, then two duplicated deliveries at once,
	// each on a fresh instance.
	retry, err := e.handler(t, t0.Add(5*time.Second)).Handle(t.Context(), nil)
	if err != nil {
		t.Fatalf("retry Handle() error = %v", err)
	}
	outs := []decider.Output{retry, {}, {}}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := 1; i < 3; i++ {
		h := e.handler(t, t0.Add(6*time.Second))
		wg.Go(func() { outs[i], errs[i] = h.Handle(t.Context(), nil) })
	}
	wg.Wait()
	for i, out := range outs {
		if errs[i] != nil {
			t.Fatalf("run %d: Handle() error = %v", i, errs[i])
		}
		if len(out.Started) != 1 || out.Started[0].Execution != first.Started[0].Execution || !out.Started[0].AlreadyExisted {
			t.Errorf("run %d started %+v, want %s found existing", i, out.Started, first.Started[0].Execution)
		}
		if out.Events != 0 {
			t.Errorf("run %d wrote %d event records, want none (the first run wrote them)", i, out.Events)
		}
	}
	if execs := e.executions(t); len(execs) != 1 {
		t.Errorf("%d executions, want 1", len(execs))
	}
	if _, again := e.eventRecords(t); !cmp.Equal(again, records) {
		t.Errorf("event records after the faults %v, want the first run's %v", again, records)
	}
}
