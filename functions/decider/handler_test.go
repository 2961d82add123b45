package decider_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/go-cmp/cmp"
	"github.com/sivchari/kumo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/functions/decider"
	"github.com/nodewright/nodewright/functions/internal/adapters"
	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// t0 is the tests' clock; in the future, so kumo's TTL reaper (wall clock)
// leaves the stored snapshot and payloads alone.
var t0 = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

const testCluster = "test-cluster"

// env is DynamoDB and Step Functions on one in-process kumo, through the
// real store and starter.
type env struct {
	// store is the tests' own (seeding, checking); the handler reads and
	// writes through handlerStore, whose calls are recorded in calls and
	// checked against the disruption role's access when the test ends.
	store        *ddbstore.Store
	handlerStore *ddbstore.Store
	calls        *awstest.DynamoDBRecorder
	sfn          *sfn.Client
	arn          string
}

func newEnv(t *testing.T) env {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	name := "nw-" + regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "-")
	if len(name) > 80 {
		name = name[:80]
	}
	if err := ddbstore.CreateTable(context.Background(), ddb, name, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	store, err := ddbstore.New(ddb, name, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	calls := &awstest.DynamoDBRecorder{Next: ddb, PartitionKey: "pk"}
	handlerStore, err := ddbstore.New(calls, name, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Every call is within the role the CDK app builds from the
		// schema's access (dynamodb:LeadingKeys).
		access := ddbstore.Schema().Access["disruption"]
		for _, c := range calls.Denied(func(c awstest.DynamoDBCall) bool { return access.Allows(testCluster, c.Op, c.Index, c.PartitionKey) }) {
			t.Errorf("%s %s %s: not in the disruption function's access (ddbstore.Schema): its role would be denied", c.Op, c.Index, c.PartitionKey)
		}
	})
	client := sfn.NewFromConfig(cfg, func(o *sfn.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	out, err := client.CreateStateMachine(context.Background(), &sfn.CreateStateMachineInput{
		Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::000000000000:role/test"), Type: sfntypes.StateMachineTypeStandard,
		Definition: aws.String(`{"StartAt":"Done","States":{"Done":{"Type":"Pass","End":true}}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return env{store: store, handlerStore: handlerStore, calls: calls, sfn: client, arn: aws.ToString(out.StateMachineArn)}
}

func (e env) handler(t *testing.T, now time.Time) *decider.Handler {
	t.Helper()
	return e.handlerWith(t, now, nil)
}

// staleReleaser is decider.Deps.Stale.
type staleReleaser interface {
	ReleaseStale(ctx context.Context, now time.Time) ([]termination.StaleRelease, error)
}

func (e env) handlerWith(t *testing.T, now time.Time, stale staleReleaser) *decider.Handler {
	t.Helper()
	st, err := sfnstarter.New(e.sfn, e.arn)
	if err != nil {
		t.Fatal(err)
	}
	deps := decider.Deps{
		Store: e.handlerStore, NodeClasses: resolver{}, Instances: noInstances{}, Starter: st,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now },
	}
	if stale != nil {
		deps.Stale = stale
	}
	h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1"}, deps)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// executions returns the state machine's executions: name -> input.
func (e env) executions(t *testing.T) map[string]workflow.DisruptionInput {
	t.Helper()
	out, err := e.sfn.ListExecutions(t.Context(), &sfn.ListExecutionsInput{StateMachineArn: &e.arn})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]workflow.DisruptionInput{}
	for _, x := range out.Executions {
		d, err := e.sfn.DescribeExecution(t.Context(), &sfn.DescribeExecutionInput{ExecutionArn: x.ExecutionArn})
		if err != nil {
			t.Fatal(err)
		}
		var in workflow.DisruptionInput
		if err := json.Unmarshal([]byte(aws.ToString(d.Input)), &in); err != nil {
			t.Fatal(err)
		}
		got[aws.ToString(x.Name)] = in
	}
	return got
}

// resolver resolves every EC2NodeClass to one subnet in us-east-1a, one
// security group and one amd64 AMI.
type resolver struct{}

func (resolver) ResolveNodeClass(_ context.Context, nc v1.EC2NodeClass) (provisioning.ResolvedNodeClass, error) {
	nc.Status = v1.EC2NodeClassStatus{
		Subnets:        []v1.Subnet{{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1"}},
		SecurityGroups: []v1.SecurityGroup{{ID: "sg-1"}},
		AMIs:           []v1.AMI{{ID: "ami-1", Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelArch, Operator: "In", Values: []string{"amd64"}}}}},
		Conditions:     []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready"}},
	}
	return provisioning.ResolvedNodeClass{NodeClass: nc}, nil
}

type noInstances struct{}

func (noInstances) List(context.Context, string) ([]launch.Instance, error) { return nil, nil }

const manifests = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-test-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test-cluster}}]
`

// seed stores the configuration, an initialized empty NodeClaim "general-a"
// (m5.large, on-demand, us-east-1a) with its Node, and a snapshot with the
// Node and no pods.
func (e env) seed(t *testing.T) {
	t.Helper()
	docs := strings.Split(manifests, "\n---\n")
	pj, err := yaml.YAMLToJSON([]byte(docs[0]))
	if err != nil {
		t.Fatal(err)
	}
	np, _, err := v1.DecodeNodePool(pj)
	if err != nil {
		t.Fatal(err)
	}
	cj, err := yaml.YAMLToJSON([]byte(docs[1]))
	if err != nil {
		t.Fatal(err)
	}
	nc, _, err := v1.DecodeEC2NodeClass(cj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutConfig(t.Context(), ddbstore.Config{NodePools: []v1.NodePool{*np}, NodeClasses: []v1.EC2NodeClass{*nc}}, 0); err != nil {
		t.Fatal(err)
	}
	created := metav1.NewTime(t0.Add(-2 * time.Hour))
	labels := map[string]string{
		v1.LabelNodePool: "general", v1.LabelInstanceType: "m5.large", v1.LabelCapacityType: v1.CapacityTypeOnDemand,
		v1.LabelTopologyZone: "us-east-1a", v1.LabelArch: "amd64", v1.LabelEC2NodeClass: "default",
	}
	cond := func(t string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, LastTransitionTime: created}
	}
	claim := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "general-a", UID: "uid-general-a", CreationTimestamp: created, Labels: labels},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: "In", Values: []string{"m5.large"}}},
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
		Status: v1.NodeClaimStatus{NodeName: "node-a", ProviderID: "aws:///us-east-1a/i-0a", ImageID: "ami-1",
			Conditions: []metav1.Condition{cond(v1.ConditionTypeLaunched), cond(v1.ConditionTypeRegistered), cond(v1.ConditionTypeInitialized)}},
	}
	if _, err := e.store.PutNodeClaim(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	part := &v1.ClusterSnapshot{ID: "part-1", Cluster: testCluster, CreatedAt: metav1.NewTime(t0.Add(-time.Minute)), SnapshotID: "snap-1",
		Part: 0, Parts: 1, Nodes: []v1.NodeSummary{v1.SummarizeNode(seededNode(labels, created))}}
	if _, err := e.store.PutSnapshotPart(t.Context(), part, t0.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// seededNode is the Node "node-a" of seed's NodeClaim.
func seededNode(labels map[string]string, created metav1.Time) *corev1.Node {
	nodeLabels := map[string]string{v1.LabelInitialized: "true", v1.LabelRegistered: "true"}
	for k, v := range labels {
		nodeLabels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-node-a", CreationTimestamp: created, Labels: nodeLabels},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0a"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: mustQuantity("2"), corev1.ResourceMemory: mustQuantity("8Gi"), corev1.ResourcePods: mustQuantity("29")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("1930m"), corev1.ResourceMemory: mustQuantity("7Gi"), corev1.ResourcePods: mustQuantity("29")}},
	}
}

func TestHandleStartsAnExecutionPerCommand(t *testing.T) {
	e := newEnv(t)
	e.seed(t)

	out, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	if len(out.Started) != 1 {
		t.Fatalf("Started = %+v (warnings %v), want one command", out.Started, out.Warnings)
	}
	s := out.Started[0]
	want := decider.Started{Execution: s.Execution, Method: "Empty", NodePool: "general", Candidates: []string{"general-a"}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Started mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(s.Execution, "empty-general-a-") {
		t.Errorf("execution name %q, want empty-general-a-<hash>", s.Execution)
	}
	execs := e.executions(t)
	in, ok := execs[s.Execution]
	if !ok {
		t.Fatalf("executions = %v, want %s", execs, s.Execution)
	}
	if in.ID != s.Execution || in.Method != workflow.MethodEmpty || !in.Budget.Budgeted || in.Settings.ValidationDelaySeconds != 15 ||
		len(in.Candidates) != 1 || in.Candidates[0].Node != "node-a" || in.Reason == "" {
		t.Errorf("execution input = %+v, want the Empty command by names with Karpenter's timers", in)
	}
	if diff := cmp.Diff([]workflow.PoolBudget{{NodePool: "general", Allowed: 1}}, in.Budget.Pools); diff != "" {
		t.Errorf("budget mismatch (-want +got):\n%s", diff)
	}
}

// TestHandleStoresEachNodePoolsAllowedDisruptions checks that an
// evaluation stores karpenter_nodepools_allowed_disruptions for every
// budgeted reason with Karpenter's labels (the default budget, 10% of one
// node rounded up: 1), where the forwarder reads it, next to the
// disruption it started.
func TestHandleStoresEachNodePoolsAllowedDisruptions(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	st, err := sfnstarter.New(e.sfn, e.arn)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := func() time.Time { return t0 }
	h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1"}, decider.Deps{
		Store: e.handlerStore, NodeClasses: resolver{}, Instances: noInstances{}, Starter: st, Log: log, Now: now,
		Metrics: decisionmetrics.New(e.handlerStore, nil, log, testCluster, now),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(t.Context(), nil); err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	list, err := e.store.ListMetrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range list {
		if m.Name == v1.MetricNodePoolsAllowedDisruptions || m.Name == v1.MetricNodeClaimsDisrupted {
			got[m.SeriesKey()] = m.Value
		}
	}
	want := map[string]float64{
		v1.SeriesKey(v1.MetricNodePoolsAllowedDisruptions, map[string]string{"nodepool": "general", "reason": "Drifted"}):                     1,
		v1.SeriesKey(v1.MetricNodePoolsAllowedDisruptions, map[string]string{"nodepool": "general", "reason": "Empty"}):                       1,
		v1.SeriesKey(v1.MetricNodePoolsAllowedDisruptions, map[string]string{"nodepool": "general", "reason": "Underutilized"}):               1,
		v1.SeriesKey(v1.MetricNodeClaimsDisrupted, map[string]string{"nodepool": "general", "reason": "empty", "capacity_type": "on-demand"}): 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored series mismatch (-want +got):\n%s", diff)
	}
}

func TestHandleStartsExecutionsWithTheConfiguredBudgetLease(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	st, err := sfnstarter.New(e.sfn, e.arn)
	if err != nil {
		t.Fatal(err)
	}
	h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1", BudgetLease: 20 * time.Second},
		decider.Deps{Store: e.store, NodeClasses: resolver{}, Instances: noInstances{}, Starter: st,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Handle(t.Context(), nil)
	if err != nil || len(out.Started) != 1 {
		t.Fatalf("Handle() = %+v, %v; want one command", out.Started, err)
	}
	if got := e.executions(t)[out.Started[0].Execution].Settings.LeaseSeconds; got != 20 {
		t.Errorf("execution input leaseSeconds = %d, want 20 (BudgetLease)", got)
	}
}

func TestHandleStartsARacingDecisionOnce(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	first, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.handler(t, t0.Add(time.Minute)).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Started) != 1 || len(second.Started) != 1 || second.Started[0].Execution != first.Started[0].Execution || !second.Started[0].AlreadyExisted {
		t.Errorf("first %+v, second %+v; want the same execution, the second finding it", first.Started, second.Started)
	}
	if n := len(e.executions(t)); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
}

func TestHandleLeavesClaimedNodesAlone(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	c, err := e.store.GetNodeClaim(t.Context(), "general-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Annotations = map[string]string{termination.AnnotationClaimHolder: "drift-general-a-1", termination.AnnotationClaimMethod: "Drifted",
		termination.AnnotationClaimUntil: t0.Add(time.Minute).Format(time.RFC3339)}
	if _, err := e.store.UpdateNodeClaim(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	out, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Started) != 0 {
		t.Errorf("Started = %+v, want nothing while another execution holds the node", out.Started)
	}
}

func TestHandleWithoutSnapshotDoesNothing(t *testing.T) {
	e := newEnv(t)
	out, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil || out.Skipped == "" || len(out.Started) != 0 {
		t.Errorf("Handle() = %+v, %v; want it skipped", out, err)
	}
}

func TestParseFeatureGates(t *testing.T) {
	got, err := decider.ParseFeatureGates("NodeRepair=false, SpotToSpotConsolidation=true")
	if err != nil || !got.SpotToSpotConsolidation {
		t.Errorf("ParseFeatureGates() = %+v, %v; want SpotToSpotConsolidation on", got, err)
	}
	for _, bad := range []string{"SpotToSpotConsolidation", "SpotToSpotConsolidation=maybe", "Teleport=true"} {
		if _, err := decider.ParseFeatureGates(bad); err == nil {
			t.Errorf("ParseFeatureGates(%q) error = nil, want an error", bad)
		}
	}
	if g, err := decider.ParseFeatureGates(""); err != nil || g != (disruption.FeatureGates{}) {
		t.Errorf("ParseFeatureGates(\"\") = %+v, %v; want every gate off", g, err)
	}
}

func TestLoadConfig(t *testing.T) {
	env := map[string]string{"CLUSTER_NAME": "c", "TABLE_NAME": "t", "AWS_REGION": "us-east-1", "KUBERNETES_VERSION": "1.33",
		"STATE_MACHINE_ARN": "arn:aws:states:us-east-1:000000000000:stateMachine:x", "FEATURE_GATES": "SpotToSpotConsolidation=true"}
	got, err := decider.LoadConfig(func(k string) string { return env[k] })
	if err != nil || !got.FeatureGates.SpotToSpotConsolidation || got.BudgetLease != termination.LeaseDuration {
		t.Errorf("LoadConfig() = %+v, %v", got, err)
	}
	env["BUDGET_LEASE"] = "20s"
	if got, err := decider.LoadConfig(func(k string) string { return env[k] }); err != nil || got.BudgetLease != 20*time.Second {
		t.Errorf("LoadConfig(BUDGET_LEASE=20s) = %+v, %v; want a 20s lease", got, err)
	}
	env["BUDGET_LEASE"] = "500ms"
	if _, err := decider.LoadConfig(func(k string) string { return env[k] }); err == nil {
		t.Error("LoadConfig(BUDGET_LEASE=500ms) error = nil, want below the one-second minimum")
	}
	delete(env, "BUDGET_LEASE")
	if _, err := decider.LoadConfig(func(string) string { return "" }); err == nil {
		t.Error("LoadConfig(empty) error = nil, want the missing settings")
	}
	env["FEATURE_GATES"] = "Nope=true"
	if _, err := decider.LoadConfig(func(k string) string { return env[k] }); err == nil {
		t.Error("LoadConfig(bad gates) error = nil, want an error")
	}
}

func TestNewWithDepsRequiresEverything(t *testing.T) {
	if _, err := decider.NewWithDeps(decider.Config{Cluster: "c", Region: "r"}, decider.Deps{}); err == nil {
		t.Error("NewWithDeps() without deps: error = nil")
	}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// fakeStale records that it ran and reports one release.
type fakeStale struct{ at time.Time }

func (f *fakeStale) ReleaseStale(_ context.Context, now time.Time) ([]termination.StaleRelease, error) {
	f.at = now
	return []termination.StaleRelease{{NodeClaim: "general-z", Holder: "drift-general-z-1", Outcome: "given back"}}, nil
}

func TestHandleReleasesStaleClaimsFirst(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	stale := &fakeStale{}
	out, err := e.handlerWith(t, t0, stale).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !stale.at.Equal(t0) || len(out.Released) != 1 || out.Released[0].NodeClaim != "general-z" {
		t.Errorf("Released = %+v (ran at %s), want the stale release at %s", out.Released, stale.at, t0)
	}
}

// TestHandleReleasesStaleClaimsThroughTheStore runs the stale release as
// the Lambda wires it (termination over the store, the cluster and EC2):
// a claim whose holder's lease lapsed is given back, one on a terminating
// instance deleted, each through the handler's recorded store.
func TestHandleReleasesStaleClaimsThroughTheStore(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	ctx := t.Context()
	kc := fake.NewClientset()
	for _, name := range []string{"general-b", "general-c"} {
		claim := v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
				termination.AnnotationClaimHolder: "drift-" + name + "-1", termination.AnnotationClaimMethod: "drift",
				termination.AnnotationClaimUntil: t0.Add(-time.Hour).UTC().Format(time.RFC3339),
			}},
			Status: v1.NodeClaimStatus{NodeName: "node-" + name, ProviderID: "aws:///us-east-1a/i-0" + name[len(name)-1:]},
		}
		if name == "general-c" {
			claim.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeInstanceTerminating, Status: metav1.ConditionTrue, Reason: "Terminating", LastTransitionTime: metav1.NewTime(t0)}}
		}
		if _, err := e.store.PutNodeClaim(ctx, claim); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := adapters.Kube{Client: kube.NewFromClientset(kc)}
	// Status is wired as the Lambda wires it: the executions named in the
	// claims never ran on the state machine, so Step Functions reports them
	// missing and the sweep may hand their nodes back.
	svc, err := termination.New(termination.Ports{Claims: adapters.TerminationClaims{Store: e.handlerStore}, Nodes: k, Pods: k, Rules: k, Instances: fleet.New(awstest.NewEC2(t)),
		Status: adapters.Executions{API: e.sfn, Disruption: e.arn}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.handlerWith(t, t0, svc).Handle(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range out.Released {
		got[r.NodeClaim] = r.Outcome + r.Error
	}
	if diff := cmp.Diff(map[string]string{"general-b": "given back", "general-c": "deleted"}, got); diff != "" {
		t.Errorf("Released mismatch (-want +got):\n%s", diff)
	}
	if len(e.calls.Calls()) == 0 {
		t.Error("no DynamoDB call recorded")
	}
}

// instancesOn lists every instance on one image (fleet.Client.List's
// DescribeInstances answer).
type instancesOn struct{ image string }

func (i instancesOn) List(context.Context, string) ([]launch.Instance, error) {
	return []launch.Instance{{ID: "i-0a", Zone: "us-east-1a", ImageID: i.image, SubnetID: "subnet-a", State: "running"}}, nil
}

// TestHandleStartsADriftExecutionForANodeOnAnotherImage checks the AMI
// drift path end to end through the handler (karpenter-spec §7, AMIDrift):
// the EC2NodeClass resolves to ami-1, and a NodeClaim whose instance runs
// another image starts drift-<nodeclaim>-<hash>. The image is the
// instance's (DescribeInstances), else the one the NodeClaim recorded at
// launch (status.imageID); consolidation is off so only drift can act on
// the empty node.
func TestHandleStartsADriftExecutionForANodeOnAnotherImage(t *testing.T) {
	tests := []struct {
		name       string
		claimImage string
		listed     string // image EC2 lists for i-0a; "" lists nothing
		wantDrift  bool
	}{
		{name: "should drift a NodeClaim that recorded another image when EC2 lists no instance", claimImage: "ami-old", wantDrift: true},
		{name: "should drift an instance running another image whatever the NodeClaim recorded", claimImage: "ami-1", listed: "ami-old", wantDrift: true},
		{name: "should not drift a NodeClaim on the resolved image", claimImage: "ami-1"},
		{name: "should not drift an instance on the resolved image", claimImage: "ami-old", listed: "ami-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed(t)
			cfg, err := e.store.GetConfig(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			cfg.NodePools[0].Spec.Disruption.ConsolidateAfter = v1.MustParseNillable(v1.Never)
			if _, err := e.store.PutConfig(t.Context(), cfg.Config, cfg.Version); err != nil {
				t.Fatal(err)
			}
			c, err := e.store.GetNodeClaim(t.Context(), "general-a")
			if err != nil {
				t.Fatal(err)
			}
			c.Status.ImageID = tt.claimImage
			if _, err := e.store.UpdateNodeClaim(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			st, err := sfnstarter.New(e.sfn, e.arn)
			if err != nil {
				t.Fatal(err)
			}
			deps := decider.Deps{Store: e.store, NodeClasses: resolver{}, Instances: noInstances{}, Starter: st,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return t0 }}
			if tt.listed != "" {
				deps.Instances = instancesOn{image: tt.listed}
			}
			h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1"}, deps)
			if err != nil {
				t.Fatal(err)
			}
			out, err := h.Handle(t.Context(), nil)
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			var got []string
			for _, s := range out.Started {
				got = append(got, s.Method+" "+s.Execution[:strings.LastIndex(s.Execution, "-")])
			}
			var want []string
			if tt.wantDrift {
				want = []string{"Drifted drift-general-a"}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("started executions mismatch (-want +got):\n%s", diff)
			}
			if tt.wantDrift {
				in := e.executions(t)[out.Started[0].Execution]
				if len(in.Candidates) != 1 || in.Candidates[0].Reason != disruption.DriftAMI {
					t.Errorf("execution candidates = %+v, want general-a drifted with reason %s", in.Candidates, disruption.DriftAMI)
				}
			}
		})
	}
}

func TestHandleRecordsEachResolvedNodeClassStatusOnce(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	if _, err := e.handler(t, t0).Handle(t.Context(), nil); err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	got, err := e.store.ListNodeClassStatuses(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "default" || !got[0].ChangedAt.Time.Equal(t0) {
		t.Fatalf("recorded statuses = %+v; want one for default, changed at %v", got, t0)
	}
	st := got[0].Status
	if len(st.Subnets) != 1 || len(st.SecurityGroups) != 1 || len(st.AMIs) != 1 || len(st.Conditions) != 1 || st.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("recorded status = %+v; want the resolver's subnets, security groups, AMIs and Ready=True", st)
	}
	// The same resolution a minute later is not written again.
	if _, err := e.handler(t, t0.Add(time.Minute)).Handle(t.Context(), nil); err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	again, err := e.store.ListNodeClassStatuses(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || !again[0].ChangedAt.Time.Equal(t0) {
		t.Errorf("after an unchanged resolution: %+v; want ChangedAt still %v", again, t0)
	}
}

func TestHandleLeavesTheReplacementOfACommandInFlightAlone(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	const running = "drift-general-b-0123456789"
	b := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-b", Labels: map[string]string{v1.LabelNodePool: "general"},
		Annotations: map[string]string{termination.AnnotationClaimHolder: running, termination.AnnotationClaimMethod: "Drifted",
			termination.AnnotationClaimUntil: t0.Add(time.Minute).Format(time.RFC3339)}}}
	if _, err := e.store.PutNodeClaim(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	a, err := e.store.GetNodeClaim(t.Context(), "general-a")
	if err != nil {
		t.Fatal(err)
	}
	a.Annotations = map[string]string{termination.AnnotationReplacementFor: running}
	if _, err := e.store.UpdateNodeClaim(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	out, err := e.handler(t, t0).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Started) != 0 {
		t.Errorf("Started = %+v, want nothing: the empty node is the replacement of %s, still in flight", out.Started, running)
	}
	// Once the command ended (its claims lapsed), the node is free.
	out, err = e.handler(t, t0.Add(2*time.Minute)).Handle(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(out.Started, func(s decider.Started) bool { return slices.Contains(s.Candidates, "general-a") }) {
		t.Errorf("Started = %+v, want the empty node taken once its command ended", out.Started)
	}
}
