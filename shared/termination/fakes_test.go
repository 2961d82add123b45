package termination_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// t0 is the decision time of every test's command.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const execID = "consolidate-general-a-0123456789"

// claims is an in-memory NodeClaim store with the DynamoDB store's
// version checks.
type claims struct {
	mu sync.Mutex
	m  map[string]v1.NodeClaim
}

func (s *claims) ListNodeClaims(context.Context) ([]v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []v1.NodeClaim{}
	for _, k := range slices.Sorted(maps.Keys(s.m)) {
		out = append(out, s.m[k])
	}
	return out, nil
}

func (s *claims) GetNodeClaim(_ context.Context, name string) (v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.m[name]
	if !ok {
		return v1.NodeClaim{}, fmt.Errorf("get nodeclaim %s: %w", name, v1.ErrNotFound)
	}
	return c, nil
}

func (s *claims) UpdateNodeClaim(_ context.Context, c v1.NodeClaim) (v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[c.Name]
	if !ok {
		return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %w", c.Name, v1.ErrNotFound)
	}
	if cur.ResourceVersion != c.ResourceVersion {
		return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %w", c.Name, v1.ErrConflict)
	}
	v, _ := strconv.Atoi(cur.ResourceVersion)
	c.ResourceVersion = strconv.Itoa(v + 1)
	s.m[c.Name] = c
	return c, nil
}

func (s *claims) DeleteNodeClaim(_ context.Context, name, rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[name]
	if !ok {
		return fmt.Errorf("delete nodeclaim %s: %w", name, v1.ErrNotFound)
	}
	if cur.ResourceVersion != rv {
		return fmt.Errorf("delete nodeclaim %s: %w", name, v1.ErrConflict)
	}
	delete(s.m, name)
	return nil
}

func (s *claims) put(c v1.NodeClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.ResourceVersion = "1"
	s.m[c.Name] = c
}

func (s *claims) get(t *testing.T, name string) v1.NodeClaim {
	t.Helper()
	c, err := s.GetNodeClaim(t.Context(), name)
	if err != nil {
		t.Fatalf("nodeclaim %s: %v", name, err)
	}
	return c
}

func (s *claims) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[name]
	return ok
}

// budgets is an in-memory lease table with ddbstore's semantics: one
// lease per (pool, holder), checked against the limit with the other
// unexpired leases.
type budgets struct {
	mu     sync.Mutex
	leases map[string]map[string]lease
}

type lease struct {
	nodes int
	until time.Time
}

func (b *budgets) AcquireBudget(_ context.Context, pool, holder string, nodes, limit int, now time.Time, ttl time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	used := 0
	for h, l := range b.leases[pool] {
		if h != holder && now.Before(l.until) {
			used += l.nodes
		}
	}
	if used+nodes > limit {
		return fmt.Errorf("acquire budget of %s: %d of %d leased, %d requested: %w", pool, used, limit, nodes, v1.ErrBudgetExhausted)
	}
	if b.leases[pool] == nil {
		b.leases[pool] = map[string]lease{}
	}
	b.leases[pool][holder] = lease{nodes: nodes, until: now.Add(ttl)}
	return nil
}

func (b *budgets) RenewBudget(_ context.Context, pool, holder string, now time.Time, ttl time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.leases[pool][holder]
	if !ok || !now.Before(l.until) {
		return fmt.Errorf("renew budget of %s for %s: %w", pool, holder, v1.ErrLeaseLapsed)
	}
	b.leases[pool][holder] = lease{nodes: l.nodes, until: now.Add(ttl)}
	return nil
}

func (b *budgets) ReleaseBudget(_ context.Context, pool, holder string, _ time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.leases[pool], holder)
	return nil
}

func (b *budgets) BudgetHolders(_ context.Context, pool string, now time.Time) (map[string]int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for h, l := range b.leases[pool] {
		if now.Before(l.until) {
			out[h] = l.nodes
		}
	}
	return out, nil
}

// grant gives holder a lease of nodes in pool until until, as an earlier
// AcquireBudget would have.
func (b *budgets) grant(pool, holder string, nodes int, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.leases[pool] == nil {
		b.leases[pool] = map[string]lease{}
	}
	b.leases[pool][holder] = lease{nodes: nodes, until: until}
}

func (b *budgets) holders(pool string) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for h, l := range b.leases[pool] {
		out[h] = l.nodes
	}
	return out
}

// kubeAPI adapts *kube.Client to the termination ports over a fake
// clientset, translating kube.ErrNotFound (as functions/disrupttask does).
type kubeAPI struct{ c *kube.Client }

func notFound(err error) error {
	if errors.Is(err, kube.ErrNotFound) {
		return fmt.Errorf("%w: %w", v1.ErrNotFound, err)
	}
	return err
}

func (k kubeAPI) ListNodes(ctx context.Context) ([]corev1.Node, error) { return k.c.ListNodes(ctx) }
func (k kubeAPI) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := k.c.GetNode(ctx, name)
	return n, notFound(err)
}
func (k kubeAPI) UpdateNode(ctx context.Context, name string, mutate func(*corev1.Node) error) error {
	return notFound(k.c.UpdateNode(ctx, name, mutate))
}
func (k kubeAPI) DeleteNode(ctx context.Context, name string) error { return k.c.DeleteNode(ctx, name) }
func (k kubeAPI) ListPodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	return k.c.ListPodsOnNode(ctx, node)
}
func (k kubeAPI) Evict(ctx context.Context, pod *corev1.Pod, grace time.Duration) (termination.Eviction, error) {
	ev, err := k.c.Evict(ctx, pod, grace)
	if err != nil {
		return termination.Eviction{}, err
	}
	outcome := map[kube.EvictionOutcome]termination.EvictionOutcome{
		kube.Evicted: termination.Evicted, kube.EvictionBlocked: termination.EvictionBlocked, kube.PodGone: termination.EvictionPodGone,
	}[ev.Outcome]
	return termination.Eviction{Outcome: outcome, Message: ev.Message}, nil
}
func (k kubeAPI) DeletePod(ctx context.Context, pod *corev1.Pod, grace time.Duration) error {
	return k.c.DeletePod(ctx, pod, grace)
}
func (kubeAPI) DrainOrder(pods []corev1.Pod, now time.Time) [][]corev1.Pod {
	return kube.DrainOrder(pods, now)
}
func (kubeAPI) DoNotDisrupt(pod *corev1.Pod, now time.Time) bool { return kube.DoNotDisrupt(pod, now) }
func (kubeAPI) Drainable(pod *corev1.Pod, now time.Time) bool    { return kube.Drainable(pod, now) }
func (k kubeAPI) ListVolumeAttachments(ctx context.Context, node string) ([]storagev1.VolumeAttachment, error) {
	return k.c.ListVolumeAttachments(ctx, node)
}
func (k kubeAPI) BoundVolume(ctx context.Context, namespace, name string) (string, error) {
	pv, err := k.c.BoundVolume(ctx, namespace, name)
	return pv, notFound(err)
}

// launcher launches replacements by marking them launched in the claim
// store; statuses scripts a status per NodeClaim name.
type launcher struct {
	claims   *claims
	statuses map[string]launch.Status
	calls    int
}

func (l *launcher) LaunchNodeClaims(_ context.Context, planned []v1.NodeClaim, now time.Time) ([]termination.LaunchResult, error) {
	l.calls++
	var out []termination.LaunchResult
	for i, c := range planned {
		status := l.statuses[c.Name]
		if status == "" {
			status = launch.Launched
		}
		r := termination.LaunchResult{NodeClaim: c.Name, Status: status}
		if status == launch.Launched {
			if cur, err := l.claims.GetNodeClaim(context.Background(), c.Name); err == nil {
				r.Status, r.ProviderID = launch.AlreadyLaunched, cur.Status.ProviderID
			} else {
				c.Status.ProviderID = fmt.Sprintf("aws:///us-east-1a/i-0000000000000r%d", i)
				c.CreationTimestamp = metav1.NewTime(now)
				c.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue}}
				l.claims.put(c)
				r.ProviderID = c.Status.ProviderID
			}
		} else {
			r.Reason = "scripted " + string(status)
		}
		out = append(out, r)
	}
	return out, nil
}

// instances records terminated instance IDs.
type instances struct {
	mu         sync.Mutex
	terminated []string
}

func (i *instances) Terminate(_ context.Context, ids ...string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.terminated = append(i.terminated, ids...)
	return nil
}

// commands serves stored replacements.
type commands map[string][]v1.NodeClaim

func (c commands) Replacements(_ context.Context, ref string) ([]v1.NodeClaim, error) {
	r, ok := c[ref]
	if !ok {
		return nil, fmt.Errorf("payload %s: %w", ref, v1.ErrNotFound)
	}
	return r, nil
}

// starter records started executions.
type starter struct {
	started []started
}

type started struct {
	machine, name string
	input         any
}

func (s *starter) StartExecution(_ context.Context, machine, name string, input any) error {
	s.started = append(s.started, started{machine, name, input})
	return nil
}

// executions answers ExecutionStatus from a map of execution names;
// names it does not hold are Missing.
type executions struct {
	mu     sync.Mutex
	status map[string]termination.ExecutionStatus
	asked  []string
}

func (x *executions) ExecutionStatus(_ context.Context, method, name string) (termination.ExecutionStatus, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.asked = append(x.asked, method+"/"+name)
	if st, ok := x.status[name]; ok {
		return st, nil
	}
	return termination.ExecutionMissing, nil
}

func (x *executions) set(name string, st termination.ExecutionStatus) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.status[name] = st
}

// env is one test's ports.
type env struct {
	cs        *fake.Clientset
	claims    *claims
	budgets   *budgets
	launcher  *launcher
	instances *instances
	commands  commands
	starter   *starter
	status    *executions
	svc       *termination.Service
	// blocked maps "namespace/name" to the PodDisruptionBudget refusing
	// its eviction (HTTP 429).
	blocked map[string]string
}

func newEnv(t *testing.T, objects ...runtime.Object) *env {
	t.Helper()
	e := &env{
		cs:        fake.NewClientset(objects...),
		claims:    &claims{m: map[string]v1.NodeClaim{}},
		budgets:   &budgets{leases: map[string]map[string]lease{}},
		instances: &instances{},
		commands:  commands{},
		starter:   &starter{},
		status:    &executions{status: map[string]termination.ExecutionStatus{}},
		blocked:   map[string]string{},
	}
	e.launcher = &launcher{claims: e.claims, statuses: map[string]launch.Status{}}
	// Evictions: a pod a PDB protects gets 429; any other is deleted at
	// once (the kubelet is fast here).
	e.cs.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction)
		key := ev.Namespace + "/" + ev.Name
		if pdb, ok := e.blocked[key]; ok {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget "+pdb+".", 10)
		}
		err := e.cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ev.Namespace, ev.Name)
		return true, nil, err
	})
	svc, err := termination.New(termination.Ports{
		Claims: e.claims, Budgets: e.budgets, Nodes: kubeAPI{kube.NewFromClientset(e.cs)},
		Pods: kubeAPI{kube.NewFromClientset(e.cs)}, Rules: kubeAPI{}, Volumes: kubeAPI{kube.NewFromClientset(e.cs)}, Launcher: e.launcher,
		Instances: e.instances, Commands: e.commands, Executions: e.starter, Status: e.status,
	})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	e.svc = svc
	return e
}

// hold returns st with a long lease (48 h, so tests may jump the clock
// between steps) and makes the stores show its execution holding what
// AcquireBudget would have taken: a claim on every stored candidate and a
// lease of its pool's budget.
func (e *env) hold(st workflow.DisruptionState) workflow.DisruptionState {
	st.Settings.LeaseSeconds = int((48 * time.Hour) / time.Second)
	until := t0.Add(48 * time.Hour)
	for _, cand := range st.CandidateList() {
		e.claims.mu.Lock()
		c, ok := e.claims.m[cand.NodeClaim]
		e.claims.mu.Unlock()
		if ok {
			claimedBy(st.ID, st.Method, until)(&c)
			e.claims.put(c)
		}
	}
	if st.Budget.Budgeted {
		e.budgets.grant("general", st.ID, len(st.CandidateList()), until)
	}
	return st
}

// pods returns the names of the pods left on node.
func (e *env) pods(t *testing.T, node string) []string {
	t.Helper()
	list, err := e.cs.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
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

func (e *env) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := e.cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	return n
}

func (e *env) nodeExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	return err == nil
}

// deletedPods returns the grace periods of direct pod deletions, by pod.
func (e *env) deletedPods() map[string]int64 {
	out := map[string]int64{}
	for _, a := range e.cs.Actions() {
		d, ok := a.(clienttesting.DeleteAction)
		if !ok || a.GetResource().Resource != "pods" {
			continue
		}
		var grace int64 = -1
		if opts := d.GetDeleteOptions(); opts.GracePeriodSeconds != nil {
			grace = *opts.GracePeriodSeconds
		}
		out[d.GetNamespace()+"/"+d.GetName()] = grace
	}
	return out
}

// Fixtures.

// nodeClaim is a launched, registered, initialized NodeClaim of pool
// "general" with its Node "node-<name>".
func nodeClaim(name string, opts ...func(*v1.NodeClaim)) v1.NodeClaim {
	c := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			Labels: map[string]string{v1.LabelNodePool: "general", v1.LabelInstanceType: "m5.large", v1.LabelCapacityType: "on-demand"},
		},
		Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
		Status: v1.NodeClaimStatus{
			NodeName: "node-" + name, ProviderID: "aws:///us-east-1a/i-" + name,
			Conditions: []metav1.Condition{
				{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue},
				{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue},
				{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue},
			},
		},
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func withTGP(d time.Duration) func(*v1.NodeClaim) {
	return func(c *v1.NodeClaim) { c.Spec.TerminationGracePeriod = &v1.Duration{Duration: d} }
}

func claimedBy(holder, method string, until time.Time) func(*v1.NodeClaim) {
	return func(c *v1.NodeClaim) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[termination.AnnotationClaimHolder] = holder
		c.Annotations[termination.AnnotationClaimMethod] = method
		c.Annotations[termination.AnnotationClaimUntil] = until.Format(time.RFC3339)
	}
}

// node is a Ready, initialized Node of pool "general".
func node(name string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels:     map[string]string{v1.LabelNodePool: "general", v1.LabelInitialized: "true"},
			Finalizers: []string{v1.TerminationFinalizer}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

func disrupted(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule})
}

// pod is a running pod bound to nodeName an hour before t0.
func pod(namespace, name, nodeName string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))},
		}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func daemonSet(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "uid-ds"})
}

func critical(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }

func doNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
}

func graceSeconds(s int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s }
}

func toleratesDisrupted(p *corev1.Pod) {
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
}

func scheduledAt(at time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(at)
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at)
	}
}

// state is a consolidation command's state for the NodeClaims names, in
// pool "general" allowing allowed disruptions.
func state(method string, allowed int, names ...string) workflow.DisruptionState {
	st := workflow.DisruptionState{DisruptionInput: workflow.DisruptionInput{
		ID: execID, Method: method, NodePool: "general", Reason: "test", DecidedAt: t0,
		Budget:   workflow.Budget{Budgeted: workflow.IsBudgetedMethod(method), Pools: []workflow.PoolBudget{{NodePool: "general", Allowed: allowed}}},
		Settings: termination.DefaultSettings(method),
	}}
	for _, n := range names {
		st.Candidates = append(st.Candidates, workflow.Candidate{NodeClaim: n, Node: "node-" + n, NodePool: "general"})
	}
	return st
}

func workflowName(t *testing.T, err error) string {
	t.Helper()
	name, _ := workflow.NameOf(err)
	return name
}
