package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/sivchari/kumo"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/functions/disrupttask/handler"
	"github.com/nodewright/nodewright/functions/internal/adapters"
	"github.com/nodewright/nodewright/local/lambdaserver"
	"github.com/nodewright/nodewright/local/stepfunctions"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// t0 is when every test's commands are decided. It lies in the future so
// that kumo's TTL reaper (wall clock) never removes a stored command.
var t0 = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

const (
	testCluster = "test-cluster"
	functionARN = "arn:aws:lambda:us-east-1:000000000000:function:disrupttask"
	machineARN  = "arn:aws:states:us-east-1:000000000000:stateMachine:nodewright-test-cluster-disruption"
)

// clock is the handler's clock: every reading advances it by tick, so
// drains can reach a termination deadline an hour away in a few dozen
// task invocations.
type clock struct {
	mu   sync.Mutex
	at   time.Time
	tick time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(c.tick)
	return c.at
}

// current reads the clock without advancing it (the handler may be
// reading it concurrently).
func (c *clock) current() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

// env is one test's world: DynamoDB (kumo) through the real store, a fake
// cluster through shared/kube, fake EC2 launches and terminations, the
// real task handler served by local/lambdaserver, and the runner.
type env struct {
	t       *testing.T
	store   *ddbstore.Store
	cs      *fake.Clientset
	clock   *clock
	runner  *stepfunctions.Runner
	server  *lambdaserver.Server
	ec2     *ec2
	starter *starter
	// blocked maps "namespace/name" to the PDB refusing its eviction.
	mu      sync.Mutex
	blocked map[string]string
	// beforeStep runs before the handler for every task invocation,
	// afterStep after it.
	beforeStep func(in workflow.TaskInput)
	afterStep  func(in workflow.TaskInput, err error)
}

func newEnv(t *testing.T, objects ...runtime.Object) *env {
	t.Helper()
	r, err := stepfunctions.FindFromRepo(".")
	if errors.Is(err, stepfunctions.ErrNotInstalled) {
		t.Skipf("skipping the state machine execution: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, cs: fake.NewClientset(objects...), clock: &clock{at: t0, tick: 10 * time.Second}, blocked: map[string]string{}, starter: &starter{}}
	// The handler's store records its calls: at the end each must be
	// within the access ddbstore.Schema gives disrupttask (its role's
	// dynamodb:LeadingKeys). The test's own setup and the fake launcher
	// (standing in for the provisioning launch path, whose calls
	// TestReplacementLaunchStaysWithinItsAccess in integration/provision
	// records) use the unrecorded store.
	var rs *ddbstore.Store
	e.store, rs = newRecordedStores(t)
	e.ec2 = &ec2{store: e.store, ice: map[string]bool{}}
	e.cs.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction)
		e.mu.Lock()
		pdb, blocked := e.blocked[ev.Namespace+"/"+ev.Name]
		e.mu.Unlock()
		if blocked {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget "+pdb+".", 10)
		}
		return true, nil, e.cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ev.Namespace, ev.Name)
	})
	k := adapters.Kube{Client: kube.NewFromClientset(e.cs)}
	svc, err := termination.New(termination.Ports{
		Claims: adapters.TerminationClaims{Store: rs}, Budgets: adapters.Budgets{Store: rs}, Nodes: k, Pods: k, Rules: k, Volumes: k,
		Launcher: e.ec2, Instances: e.ec2, Commands: adapters.Commands{Store: rs, Now: e.clock.now}, Executions: e.starter,
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := handler.NewWithService(svc, slog.New(slog.NewTextHandler(io.Discard, nil)), e.clock.now)
	if err != nil {
		t.Fatal(err)
	}
	h.WithEvents(rs)
	e.server = lambdaserver.New()
	if err := e.server.Register("disrupttask", func(ctx context.Context, in workflow.TaskInput) (any, error) {
		if e.beforeStep != nil {
			e.beforeStep(in)
		}
		out, err := h.Handle(ctx, in)
		if e.afterStep != nil {
			e.afterStep(in, err)
		}
		return out, err
	}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(e.server)
	t.Cleanup(hs.Close)
	e.runner = r.WithLambda(hs.URL, "us-east-1")
	return e
}

// newRecordedStores returns two stores over one new table: plain, and
// recorded, whose every call is checked when the test ends against
// ddbstore.Schema().Access["disrupttask"], the partition keys the CDK app
// grants the disrupttask role.
func newRecordedStores(t *testing.T) (plain, recorded *ddbstore.Store) {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	client := dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")},
		func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	table := "nw-" + regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "-")
	if len(table) > 255 {
		table = table[:255]
	}
	if err := ddbstore.CreateTable(context.Background(), client, table, time.Minute); err != nil {
		t.Fatalf("CreateTable() error = %v", err)
	}
	t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
	s, err := ddbstore.New(client, table, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	calls := &awstest.DynamoDBRecorder{Next: client, PartitionKey: "pk"}
	r, err := ddbstore.New(calls, table, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkAccess(t, calls) })
	return s, r
}

// checkAccess reports each recorded call the disrupttask role, as the CDK
// app builds it from ddbstore.Schema().Access, would deny.
func checkAccess(t *testing.T, calls *awstest.DynamoDBRecorder) {
	t.Helper()
	access, ok := ddbstore.Schema().Access["disrupttask"]
	if !ok {
		t.Errorf("ddbstore.Schema().Access has no disrupttask entry: its role is granted the whole table")
		return
	}
	for _, c := range calls.Denied(func(c awstest.DynamoDBCall) bool { return access.Allows(testCluster, c.Op, c.Index, c.PartitionKey) }) {
		t.Errorf("disrupttask: %s %s %s: not in its access (ddbstore.Schema): its role would be denied", c.Op, c.Index, c.PartitionKey)
	}
}

// definition returns a state machine with its placeholders filled.
func definition(t *testing.T, file string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "statemachines", file))
	if err != nil {
		t.Fatal(err)
	}
	def, err := stepfunctions.Substitute(raw, map[string]string{"DisrupttaskFunctionArn": functionARN})
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// noWaits runs every Wait state and Retry pause of the machines at once.
var noWaits = map[string]time.Duration{"WaitForReplacements": 0, "ValidationDelay": 0, "WaitToDrain": 0}

func noRetryPauses() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, s := range workflow.Steps() {
		out[s] = 0
	}
	out["ClaimNodeClaim"] = 0
	return out
}

// run executes file with input in the local engine.
func (e *env) run(file, name string, input any) stepfunctions.Result {
	e.t.Helper()
	res, err := e.runner.Run(e.t.Context(), definition(e.t, file), stepfunctions.Execution{
		Name: name, StateMachineARN: machineARN, Input: input, StartTime: t0,
		WaitOverrides: noWaits, RetryOverrides: noRetryPauses(),
	})
	if err != nil {
		e.t.Fatalf("Run(%s) error = %v", name, err)
	}
	return res
}

// putClaim stores a NodeClaim.
func (e *env) putClaim(c v1.NodeClaim) {
	e.t.Helper()
	if _, err := e.store.PutNodeClaim(e.t.Context(), c); err != nil {
		e.t.Fatalf("PutNodeClaim(%s) error = %v", c.Name, err)
	}
}

func (e *env) claim(name string) (v1.NodeClaim, bool) {
	c, err := e.store.GetNodeClaim(e.t.Context(), name)
	if errors.Is(err, ddbstore.ErrNotFound) {
		return v1.NodeClaim{}, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return c, true
}

func (e *env) node(name string) (*corev1.Node, bool) {
	n, err := e.cs.CoreV1().Nodes().Get(e.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return n, true
}

func (e *env) podsOn(node string) []string {
	list, err := e.cs.CoreV1().Pods("").List(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.Spec.NodeName == node {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(out)
	return out
}

func (e *env) leases(pool string) []string {
	l, err := e.store.ListBudgetLeases(e.t.Context(), pool, e.clock.current())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, x := range l {
		out = append(out, x.Execution)
	}
	return out
}

// storeCommand stores the replacements of in (as functions/disruption does
// before starting an execution).
func (e *env) storeCommand(in workflow.DisruptionInput, replacements []v1.NodeClaim) {
	e.t.Helper()
	if len(replacements) == 0 {
		return
	}
	data, err := termination.EncodeReplacements(replacements)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.PutPayload(e.t.Context(), in.CommandRef, data, t0, 24*time.Hour); err != nil {
		e.t.Fatal(err)
	}
}

// boot registers and initializes the launched replacements: a Node joins
// and the NodeClaim records Registered and Initialized.
func (e *env) boot(names ...string) {
	for _, name := range names {
		c, ok := e.claim(name)
		if !ok || c.Status.ProviderID == "" || c.Status.NodeName != "" {
			continue
		}
		n := node("node-"+name, "general")
		if _, err := e.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			e.t.Errorf("boot %s: %v", name, err)
			continue
		}
		c.Status.NodeName = n.Name
		c.Status.Conditions = append(c.Status.Conditions,
			metav1.Condition{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeRegistered, LastTransitionTime: metav1.NewTime(t0)},
			metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeInitialized, LastTransitionTime: metav1.NewTime(t0)})
		if _, err := e.store.UpdateNodeClaim(context.Background(), c); err != nil {
			e.t.Errorf("boot %s: %v", name, err)
		}
	}
}

// ec2 launches replacements as the provisioning launch path would (the
// NodeClaim created launched, with an instance) and records terminations.
type ec2 struct {
	mu         sync.Mutex
	store      *ddbstore.Store
	ice        map[string]bool
	launched   []string
	terminated []string
}

func (f *ec2) LaunchNodeClaims(ctx context.Context, planned []v1.NodeClaim, now time.Time) ([]termination.LaunchResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []termination.LaunchResult
	for _, c := range planned {
		if f.ice[c.Name] {
			out = append(out, termination.LaunchResult{NodeClaim: c.Name, Status: launch.InsufficientCapacity, Reason: "InsufficientInstanceCapacity for every offering"})
			continue
		}
		if cur, err := f.store.GetNodeClaim(ctx, c.Name); err == nil {
			out = append(out, termination.LaunchResult{NodeClaim: c.Name, Status: launch.AlreadyLaunched, ProviderID: cur.Status.ProviderID})
			continue
		}
		c.UID = types.UID("uid-" + c.Name)
		c.Status.ProviderID = "aws:///us-east-1a/i-" + c.Name
		c.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeLaunched, LastTransitionTime: metav1.NewTime(now)}}
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels[v1.LabelInstanceType] = "m5.large"
		if _, err := f.store.PutNodeClaim(ctx, c); err != nil {
			return nil, err
		}
		f.launched = append(f.launched, c.Name)
		out = append(out, termination.LaunchResult{NodeClaim: c.Name, Status: launch.Launched, ProviderID: c.Status.ProviderID})
	}
	return out, nil
}

func (f *ec2) Terminate(_ context.Context, ids ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminated = append(f.terminated, ids...)
	return nil
}

func (f *ec2) terminatedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.terminated)
	slices.Sort(out)
	return slices.Compact(out)
}

// starter records continuations.
type starter struct {
	mu      sync.Mutex
	started []workflow.DisruptionState
	names   []string
}

func (s *starter) StartExecution(_ context.Context, _, name string, input any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := input.(workflow.DisruptionState)
	if !ok {
		return fmt.Errorf("continuation input %T", input)
	}
	s.started = append(s.started, st)
	s.names = append(s.names, name)
	return nil
}

// Fixtures.

// candidateClaim is an initialized NodeClaim of pool whose Node is
// "node-<name>".
func candidateClaim(name, pool string, opts ...func(*v1.NodeClaim)) v1.NodeClaim {
	c := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			Labels: map[string]string{v1.LabelNodePool: pool, v1.LabelInstanceType: "m5.xlarge", v1.LabelCapacityType: "on-demand"}},
		Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
		Status: v1.NodeClaimStatus{NodeName: "node-" + name, ProviderID: "aws:///us-east-1a/i-" + name, Conditions: []metav1.Condition{
			{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))},
			{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))},
			{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))},
		}},
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func node(name, pool string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
			Labels:     map[string]string{v1.LabelNodePool: pool, v1.LabelInitialized: "true"},
			Finalizers: []string{v1.TerminationFinalizer}},
		Spec:   corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func pod(namespace, name, nodeName string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func daemonSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "uid-agent"}}
}

// command is the input of a command of method on the named candidates of
// pool "general", allowing allowed disruptions, with one replacement per
// name in replacements.
func command(id, method string, allowed int, candidates []string, replacements ...string) (workflow.DisruptionInput, []v1.NodeClaim) {
	in := workflow.DisruptionInput{
		ID: id, Method: method, NodePool: "general", Reason: "test command", DecidedAt: t0,
		Candidates: []workflow.Candidate{}, Replacements: []workflow.Replacement{},
		Budget:   workflow.Budget{Budgeted: workflow.IsBudgetedMethod(method), Pools: []workflow.PoolBudget{{NodePool: "general", Allowed: allowed}}},
		Settings: termination.DefaultSettings(method),
	}
	for _, c := range candidates {
		in.Candidates = append(in.Candidates, workflow.Candidate{NodeClaim: c, Node: "node-" + c, NodePool: "general"})
	}
	var planned []v1.NodeClaim
	for _, r := range replacements {
		in.Replacements = append(in.Replacements, workflow.Replacement{NodeClaim: r, InstanceTypes: []string{"m5.large"}, InstanceTypeCount: 1})
		planned = append(planned, v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: r, CreationTimestamp: metav1.NewTime(t0), Labels: map[string]string{v1.LabelNodePool: "general"},
				Annotations: map[string]string{termination.AnnotationReplacementFor: id}},
			Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
		})
	}
	in.ReplacementCount = len(in.Replacements)
	if len(planned) > 0 {
		in.CommandRef = termination.CommandRef(id)
	}
	return in, planned
}

// stateOutputs decodes every exit of a state, in order.
func stateOutputs[T any](t *testing.T, res stepfunctions.Result, state, key string) []T {
	t.Helper()
	var out []T
	for _, ev := range res.Events {
		if ev.Type != "StateExited" || ev.State == nil || ev.State.Name != state {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(ev.State.Output, &m); err != nil {
			t.Fatalf("%s output: %v", state, err)
		}
		var v T
		if err := json.Unmarshal(m[key], &v); err != nil {
			t.Fatalf("%s output %s: %v", state, key, err)
		}
		out = append(out, v)
	}
	return out
}

var createOptions = metav1.CreateOptions{}

// countAttempts calls fn after every answer to an AcquireBudget step.
func (e *env) countAttempts(fn func()) (done func()) {
	e.afterStep = func(in workflow.TaskInput, _ error) {
		if in.Step == workflow.StepAcquireBudget {
			fn()
		}
	}
	return func() { e.afterStep = nil }
}

// deletedGrace returns the grace period (seconds) of the last direct
// deletion of the pod "namespace/name", or -1.
func (e *env) deletedGrace(pod string) int64 {
	grace := int64(-1)
	for _, a := range e.cs.Actions() {
		d, ok := a.(clienttesting.DeleteAction)
		if !ok || a.GetResource().Resource != "pods" || d.GetNamespace()+"/"+d.GetName() != pod {
			continue
		}
		if g := d.GetDeleteOptions().GracePeriodSeconds; g != nil {
			grace = *g
		}
	}
	return grace
}

// checkGivenBack fails the test unless the candidate is as before the
// command: its Node without the disrupted taint or the execution's marks,
// its NodeClaim unclaimed and not deleting.
func (e *env) checkGivenBack(name string) {
	e.t.Helper()
	n, ok := e.node("node-" + name)
	if !ok {
		e.t.Fatalf("node-%s is gone, want it kept", name)
	}
	if len(n.Spec.Taints) != 0 || n.Annotations[termination.AnnotationClaimHolder] != "" || n.Labels[v1.LabelExcludeFromLoadBalancers] != "" {
		e.t.Errorf("node-%s: taints %v, annotations %v, labels %v; want it untouched", name, n.Spec.Taints, n.Annotations, n.Labels)
	}
	c, ok := e.claim(name)
	if !ok {
		e.t.Fatalf("nodeclaim %s is gone, want it kept", name)
	}
	if c.DeletionTimestamp != nil || termination.ClaimOf(&c).Holder != "" {
		e.t.Errorf("nodeclaim %s: deletion %v, claim %+v; want neither", name, c.DeletionTimestamp, termination.ClaimOf(&c))
	}
}
