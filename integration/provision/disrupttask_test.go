package provision_test

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	disrupttask "github.com/nodewright/nodewright/functions/disrupttask/handler"
	"github.com/nodewright/nodewright/local/ec2sim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// noExecutions is Step Functions for a task that starts none.
type noExecutions struct{ t testing.TB }

func (n noExecutions) StartExecution(context.Context, *sfn.StartExecutionInput, ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	n.t.Errorf("StartExecution called; no continuation expected")
	return &sfn.StartExecutionOutput{ExecutionArn: aws.String("arn:aws:states:us-east-1:000000000000:execution:x:y")}, nil
}

// disruptTask wires the disruption task Lambda as its main does, its
// DynamoDB calls recorded as "disrupttask" (checked at the end against
// ddbstore.Schema().Access, as every function of the env is).
func (e *env) disruptTask(t testing.TB) *disrupttask.Handler {
	t.Helper()
	env := map[string]string{
		"CLUSTER_NAME": cluster, "TABLE_NAME": e.table, "AWS_REGION": region,
		"KUBERNETES_VERSION": "1.33", "CLUSTER_ENDPOINT": "https://e2e-cluster.example", "CLUSTER_CA_DATA": caData,
		"SERVICE_CIDR": "10.100.0.0/16", "CLUSTER_DNS": "10.100.0.10",
	}
	cfg, err := disrupttask.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	rec := e.recorder("disrupttask")
	h, err := disrupttask.New(cfg, disrupttask.Clients{
		DynamoDB: rec, EC2: e.ec2API, SSM: e.ssm, SFN: noExecutions{t}, Kube: kube.NewFromClientset(e.kube),
	}, slog.New(slog.NewJSONHandler(&syncWriter{w: e.log}, nil)).With("function", "disrupttask"), e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// replacementCommand is a drift command on candidate (a launched NodeClaim
// of NodePool "default") with one replacement, stored as the disruption
// Lambda stores it.
func (e *env) replacementCommand(t testing.TB, id string, candidate v1.NodeClaim, replacement string, reqs []v1.NodeSelectorRequirementWithMinValues) workflow.DisruptionState {
	t.Helper()
	in := workflow.DisruptionInput{
		ID: id, Method: workflow.MethodDrifted, NodePool: "default", Reason: "test command", DecidedAt: e.clock.Now(),
		Candidates:   []workflow.Candidate{{NodeClaim: candidate.Name, Node: candidate.Status.NodeName, NodePool: "default"}},
		Replacements: []workflow.Replacement{{NodeClaim: replacement, InstanceTypes: []string{"m5.large"}, InstanceTypeCount: 1}},
		Budget:       workflow.Budget{Budgeted: true, Pools: []workflow.PoolBudget{{NodePool: "default", Allowed: 1}}},
		Settings:     termination.DefaultSettings(workflow.MethodDrifted),
		CommandRef:   termination.CommandRef(id), ReplacementCount: 1,
	}
	planned := []v1.NodeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: replacement, CreationTimestamp: metav1.NewTime(e.clock.Now()),
			Labels: map[string]string{v1.LabelNodePool: "default"}, Annotations: map[string]string{termination.AnnotationReplacementFor: id}},
		Spec: v1.NodeClaimSpec{Requirements: reqs, NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
	}}
	data, err := termination.EncodeReplacements(planned)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.PutPayload(context.Background(), in.CommandRef, data, e.clock.Now(), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	return workflow.DisruptionState{DisruptionInput: in}
}

// step runs one task of the disruption state machine as Step Functions
// invokes it.
func step(t testing.TB, h *disrupttask.Handler, name string, st workflow.DisruptionState) (any, error) {
	t.Helper()
	return h.Handle(context.Background(), workflow.TaskInput{Step: name, State: st})
}

// TestReplacementLaunchStaysWithinItsAccess runs the disruption task
// Lambda's replacement launch (the provisioning launch path: the config,
// unavailable offerings and subnets read, the NodeClaim created, the
// CreateFleet request stored under its ClientToken and replayed after a
// lost answer, an insufficient-capacity answer marking the offering
// unavailable) and its budget, claim and rollback steps, with every
// DynamoDB call checked against the disrupttask role's LeadingKeys
// (ddbstore.Schema().Access["disrupttask"], issue 13 item 7).
func TestReplacementLaunchStaysWithinItsAccess(t *testing.T) {
	e := newEnv(t)
	candidate := e.launchOne(t)
	e.postConfig(t, oneSpotPool)
	h := e.disruptTask(t)
	reqs := []v1.NodeSelectorRequirementWithMinValues{
		{Key: v1.LabelInstanceType, Operator: "In", Values: []string{"m5.large"}},
		{Key: v1.LabelTopologyZone, Operator: "In", Values: []string{"us-east-1a"}},
		{Key: v1.LabelCapacityType, Operator: "In", Values: []string{"spot"}},
	}

	// A command whose replacement meets insufficient capacity: the
	// offering is marked unavailable and the command rolls back.
	spot := ec2sim.Offering{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}
	e.sim.SetUnavailable(spot, "InsufficientInstanceCapacity")
	st := e.replacementCommand(t, "drift-a-1111111111", candidate, "repl-ice", reqs)
	if _, err := step(t, h, workflow.StepAcquireBudget, st); err != nil {
		t.Fatalf("AcquireBudget() error = %v", err)
	}
	_, err := step(t, h, workflow.StepLaunchReplacements, st)
	if err == nil {
		t.Fatalf("LaunchReplacements() = nil error, want the replacement failed on insufficient capacity")
	}
	st.Error = &workflow.TaskError{Error: workflow.ErrReplacementFailed, Cause: err.Error()}
	if _, err := step(t, h, workflow.StepRollback, st); err != nil {
		t.Fatalf("Rollback() error = %v", err)
	}
	unavailable, err := e.store.ListUnavailable(context.Background(), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(unavailable) != 1 {
		t.Errorf("unavailable offerings = %+v, want the spot offering marked", unavailable)
	}

	// A command whose CreateFleet answer is lost: the retried task
	// replays the stored request, and one instance is launched.
	e.clock.Advance(5 * time.Minute) // past the mark
	e.sim.ClearUnavailable(spot)
	reqs[2].Values = []string{"on-demand"}
	st = e.replacementCommand(t, "drift-a-2222222222", candidate, "repl-ok", reqs)
	if _, err := step(t, h, workflow.StepAcquireBudget, st); err != nil {
		t.Fatalf("AcquireBudget() error = %v", err)
	}
	before := len(e.sim.Instances())
	e.ec2API.LoseCreateFleet.Store(1)
	if _, err := step(t, h, workflow.StepLaunchReplacements, st); err == nil {
		t.Errorf("LaunchReplacements() with the answer lost = nil error, want a retryable failure")
	}
	if _, err := step(t, h, workflow.StepLaunchReplacements, st); err != nil {
		t.Fatalf("LaunchReplacements() retried error = %v", err)
	}
	if _, err := step(t, h, workflow.StepCheckReplacements, st); err != nil {
		t.Logf("CheckReplacements() error = %v (the replacement has no Node here)", err)
	}
	if got := len(e.sim.Instances()) - before; got != 1 {
		t.Errorf("%d instances launched for the replacement, want 1", got)
	}
	st.Error = &workflow.TaskError{Error: workflow.ErrReplacementFailed, Cause: "test: roll back"}
	if _, err := step(t, h, workflow.StepRollback, st); err != nil {
		t.Fatalf("Rollback() error = %v", err)
	}
	if calls := e.calls["disrupttask"].Calls(); !slices.ContainsFunc(calls, func(c awstest.DynamoDBCall) bool { return c.Op == "PutItem" }) {
		t.Errorf("no DynamoDB write recorded for disrupttask: the test drove nothing")
	}
}

// TestAdoptionRefusalIsRecordedWithItsCondition runs gc on a snapshot
// holding a Karpenter NodeClaim whose NodePool does not exist: the refusal
// is an event record carrying the condition Adopted False for the
// forwarder to set on that NodeClaim, and gc's write of it is within its
// access (the recorder's check when the test ends).
func TestAdoptionRefusalIsRecordedWithItsCondition(t *testing.T) {
	e := newEnv(t)
	e.postConfig(t, onDemandM5)
	foreign := v1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.Group + "/v1", Kind: v1.KindNodeClaim},
		ObjectMeta: metav1.ObjectMeta{Name: "gone-x7k2p", UID: "uid-gone", CreationTimestamp: metav1.NewTime(e.clock.Now().Add(-24 * time.Hour)),
			Labels: map[string]string{v1.LabelNodePool: "gone"}},
		Spec:   v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0a1b2c3d4e5f60718", NodeName: "ip-10-0-1-17.ec2.internal"},
	}
	snap := v1.ClusterSnapshot{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindClusterSnapshot},
		ID:       "snap-1-0", Cluster: cluster, CreatedAt: metav1.NewTime(e.clock.Now()), SnapshotID: "snap-1", Part: 0, Parts: 1,
		ForeignNodeClaims: []v1.NodeClaim{foreign},
	}
	if status := e.api.do(t, http.MethodPost, v1.RouteSnapshots, snap.ID, snap, nil); status != http.StatusAccepted {
		t.Fatalf("POST snapshot: status %d", status)
	}
	e.runGC()
	recs, err := e.store.ListEvents(context.Background(), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.NodeClaim == foreign.Name && r.Condition != nil {
			got = append(got, r.Reason+" "+r.Condition.Type+"="+string(r.Condition.Status)+" "+r.Condition.Reason)
		}
	}
	want := []string{"AdoptionNodePoolNotFound Adopted=False AdoptionNodePoolNotFound"}
	if !slices.Equal(got, want) {
		t.Errorf("refusal records with a condition = %q, want %q", got, want)
	}
	if !slices.ContainsFunc(e.calls["gc"].Calls(), func(c awstest.DynamoDBCall) bool { return c.Op == "PutItem" && c.PartitionKey == cluster+"#EVENT" }) {
		t.Errorf("gc recorded no event write: the access check checked nothing")
	}
}
