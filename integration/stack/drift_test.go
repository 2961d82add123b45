package stack_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// ec2NodeClassResource is the karpenter.k8s.aws/v1 EC2NodeClass resource.
var ec2NodeClassResource = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}

// driftExecution is the disruption state machine's execution name for a
// drift command: drift-<nodeclaim>-<hash> (statemachines/disruption.asl.json).
var driftExecution = regexp.MustCompile(`^drift-(.+)-[0-9a-f]+$`)

// poolYAML is a NodePool over the guide's EC2NodeClass with one
// disruption budget and a consolidation that never acts, so that only
// drift disrupts; tgp is its terminationGracePeriod ("" for none).
func poolYAML(name, budget, tgp string) []byte {
	grace := ""
	if tgp != "" {
		grace = "\n      terminationGracePeriod: " + tgp
	}
	return []byte(fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
spec:
  template:
    spec:
      requirements:
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ['c', 'm', 'r']
        - key: karpenter.sh/capacity-type
          operator: In
          values: ['on-demand']
        - key: kubernetes.io/arch
          operator: In
          values: ['amd64']
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: production%s
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
    budgets:
      - nodes: '%s'
`, name, grace, budget))
}

// spreadOnePerNode makes d's pods repel each other by hostname, so each
// needs a node of its own and a drifted node's pod can only move to a new
// node.
func spreadOnePerNode(d *appsv1.Deployment) *appsv1.Deployment {
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	return d
}

// addImage registers a new AL2023 x86_64 image in the simulator, as a
// newer release would be.
func addImage(t testing.TB, s *stack.Stack, name string) ec2sim.Image {
	t.Helper()
	img, err := s.Sim.AddImage(ec2sim.Image{Name: name, Description: "e2e drift target", Architecture: "x86_64", OwnerAlias: "amazon"})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// pinAMI points the EC2NodeClass at one image by ID (amiSelectorTerms
// - id: <ami>, with the family spelled out as Karpenter requires without
// an alias).
func pinAMI(t testing.TB, s *stack.Stack, class, ami string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"amiFamily":"AL2023","amiSelectorTerms":[{"id":%q}]}}`, ami)
	if _, err := s.Dynamic.Resource(ec2NodeClassResource).Patch(t.Context(), class, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("pin EC2NodeClass %s to %s: %v", class, ami, err)
	}
}

// nodeImages maps each Node to the image of its simulator instance ("" when
// the instance is unknown).
func nodeImages(s *stack.Stack, nodes []corev1.Node) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		id := n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
		in, _ := s.Sim.Instance(id)
		out[n.Name] = in.ImageID
	}
	return out
}

// claimOfNode maps each Node to the NodeClaim (the cluster's mirror) whose
// status.providerID names it.
//
// The NodeClaim objects are the forwarder's mirrors, written at its next
// sync after the API's NodeClaim changed, so a Node can be Ready before
// its mirror shows the provider ID: a Node of a NodePool (labelled
// karpenter.sh/nodepool) is waited for up to mirrorLag.
func claimOfNode(t testing.TB, s *stack.Stack, nodes []corev1.Node) map[string]string {
	t.Helper()
	end := time.Now().Add(mirrorLag)
	for {
		claims, err := s.Dynamic.Resource(stack.NodeClaimResource).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		byProvider := map[string]string{}
		for _, c := range claims.Items {
			pid, _, _ := unstructured.NestedString(c.Object, "status", "providerID")
			byProvider[pid] = c.GetName()
		}
		out, missing := map[string]string{}, false
		for _, n := range nodes {
			out[n.Name] = byProvider[n.Spec.ProviderID]
			missing = missing || (out[n.Name] == "" && n.Labels[v1.LabelNodePool] != "")
		}
		if !missing || time.Now().After(end) {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mirrorLag bounds how long a NodeClaim mirror may trail the API: the
// forwarder's sync poll interval (15 s) with room for a loaded machine.
const mirrorLag = 45 * time.Second

// disrupting counts the Nodes tainted karpenter.sh/disrupted.
func disrupting(nodes []corev1.Node) int {
	c := 0
	for _, n := range nodes {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1.TaintKeyDisrupted }) {
			c++
		}
	}
	return c
}

// servingPods counts the pods matching selector that run and are not
// terminating.
func servingPods(t testing.TB, s *stack.Stack, selector string) int {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// watchServing watches the pods matching selector (from their current
// list on) and measures, from the watch events as they arrive, every interval during which fewer than want
// of them were serving (Running and not terminating). stop ends the watch
// and returns the longest such interval and how many there were.
func watchServing(t testing.TB, s *stack.Stack, selector string, want int) (stop func() (longest time.Duration, gaps int)) {
	t.Helper()
	list, err := s.Kube.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	serving := map[types.UID]bool{}
	for _, p := range list.Items {
		serving[p.UID] = p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
	}
	w, err := s.Kube.CoreV1().Pods("default").Watch(t.Context(), metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		longest time.Duration
		gaps    int
	}
	done := make(chan result, 1)
	go func() {
		var r result
		var since time.Time
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			serving[p.UID] = ev.Type != watch.Deleted && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
			n := 0
			for _, v := range serving {
				if v {
					n++
				}
			}
			switch {
			case n < want && since.IsZero():
				since = time.Now()
			case n >= want && !since.IsZero():
				r.longest, r.gaps = max(r.longest, time.Since(since)), r.gaps+1
				since = time.Time{}
			}
		}
		done <- r
	}()
	return func() (time.Duration, int) {
		w.Stop()
		r := <-done
		return r.longest, r.gaps
	}
}

// liveInstances counts the simulator's pending or running instances.
func liveInstances(s *stack.Stack) int {
	n := 0
	for _, in := range s.Sim.Instances() {
		if in.State == "pending" || in.State == "running" {
			n++
		}
	}
	return n
}

// TestDriftReplacesEveryNodeWithinBudget pins the EC2NodeClass to another
// AMI and checks Karpenter's drift (karpenter-spec §6.4 and §7: AMI drift,
// replace then drain, one budgeted node at a time): every node of the pool
// is replaced by a node on the new image through drift-<nodeclaim>-<hash>
// executions, never more than the budget's one node is being replaced at a
// time, and no pod waits for a node longer than a replacement's boot delay
// (the replacement is initialized before the drifted node drains).
func TestDriftReplacesEveryNodeWithinBudget(t *testing.T) {
	const (
		replicas  = 3
		bootDelay = 8 * time.Second
	)
	s := startStack(t, func(o *stack.Options) { o.Disruption = true; o.BootDelay = bootDelay })
	if !s.Wired().Drift {
		t.Skip("drift needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, poolYAML("drift", "1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, spreadOnePerNode(deployment("spread", replicas, "500m", "512Mi")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "every pod Running on its own node", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == replicas && st.PendingPods == 0 && st.Nodes == replicas && st.ReadyNodes == replicas
	})
	before := nodeList(t, s)
	oldImages := nodeImages(s, before)
	oldClaims := claimOfNode(t, s, before)
	img := addImage(t, s, "amazon-eks-node-al2023-x86_64-standard-1.34-v20261120")
	for n, id := range oldImages {
		if id == "" || id == img.ID {
			t.Fatalf("node %s runs image %q before the pin; want a known image other than %s", n, id, img.ID)
		}
	}
	stopWatch := watchServing(t, s, "app=spread", replicas)
	pinAMI(t, s, "production", img.ID)
	pinned := time.Now()

	// Watch until every node runs the new image and every pod runs again.
	var (
		maxInstances  int
		maxDisrupting int
		podsRunningOn = map[string]bool{}
	)
	deadline := time.Now().Add(6 * time.Minute)
	for {
		st, err := s.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		maxInstances = max(maxInstances, liveInstances(s))
		short := servingPods(t, s, "app=spread") < replicas
		nodes := nodeList(t, s)
		maxDisrupting = max(maxDisrupting, disrupting(nodes))
		images := nodeImages(s, nodes)
		done := !short && len(nodes) == replicas
		for _, n := range nodes {
			if images[n.Name] != img.ID || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
				done = false
			}
		}
		if done {
			pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=spread"})
			if err != nil {
				t.Fatal(err)
			}
			provider := map[string]string{}
			for _, n := range nodes {
				provider[n.Name] = n.Spec.ProviderID
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					podsRunningOn[provider[p.Spec.NodeName]] = true
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every node replaced after %s: status %+v, node images %v (new %s), executions %+v", time.Since(pinned), st, images, img.ID, s.Executions())
		}
		time.Sleep(100 * time.Millisecond)
	}
	replaced := time.Since(pinned)
	longestWait, gaps := stopWatch()
	t.Logf("every node replaced %s after the pin; at most %d instances live, %d node(s) disrupted at once; %d moves, the longest a pod was short of its node: %s",
		replaced.Round(time.Second), maxInstances, maxDisrupting, gaps, longestWait.Round(time.Millisecond))
	if gaps != replicas {
		t.Errorf("saw %d pod moves, want %d (one per drifted node)", gaps, replicas)
	}

	if maxInstances > replicas+1 {
		t.Errorf("at most %d instances were live; a budget of one node allows %d (the pool's nodes plus one replacement)", maxInstances, replicas+1)
	}
	if maxDisrupting != 1 {
		t.Errorf("at most %d nodes were tainted %s at once, want 1 (the budget)", maxDisrupting, v1.TaintKeyDisrupted)
	}
	if longestWait >= bootDelay {
		t.Errorf("a pod waited %s for a node, not less than the %s boot delay: it waited for a replacement to boot instead of moving onto an initialized one", longestWait, bootDelay)
	}
	// Node names are private DNS names, which new instances may reuse:
	// the drifted nodes are told apart by their instances.
	oldProvider := map[string]string{}
	for _, n := range before {
		oldProvider[n.Spec.ProviderID] = n.Name
	}
	for _, n := range nodeList(t, s) {
		if name, old := oldProvider[n.Spec.ProviderID]; old {
			t.Errorf("drifted node %s (%s) still exists", name, n.Spec.ProviderID)
		}
	}
	for pid := range podsRunningOn {
		if name, old := oldProvider[pid]; old {
			t.Errorf("a pod runs on drifted node %s (%s)", name, pid)
		}
	}

	// Each original node left through a drift execution of its NodeClaim.
	succeeded := map[string]bool{}
	for _, claim := range oldClaims {
		finishedExecution(t, s, "drift-"+claim+"-", 30*time.Second)
	}
	for _, e := range s.Executions() {
		m := driftExecution.FindStringSubmatch(e.Name)
		if m == nil {
			t.Errorf("execution %s (%s) is not a drift execution", e.Name, e.Status)
			continue
		}
		if e.Status == "SUCCEEDED" {
			succeeded[m[1]] = true
		}
	}
	for node, claim := range oldClaims {
		if claim == "" || !succeeded[claim] {
			t.Errorf("node %s (NodeClaim %q) left without a succeeded drift-%s-<hash> execution (executions %+v)", node, claim, claim, s.Executions())
		}
	}
	logDriftTimeline(t, pinned, s.Executions())
}

// logDriftTimeline logs how fast drift reacted: the time from the pin to
// the first drift execution's start, each execution's duration (one node's
// replacement: launch, initialization, drain, termination), and the wait
// between one execution's end and the next one's start (the disruption
// Lambda's next evaluation that sees the replacement). These are
// measurements only; the test asserts behaviour, not speed.
func logDriftTimeline(t testing.TB, pinned time.Time, executions []stack.Execution) {
	t.Helper()
	var drifts []stack.Execution
	for _, e := range executions {
		if driftExecution.MatchString(e.Name) {
			drifts = append(drifts, e)
		}
	}
	slices.SortFunc(drifts, func(a, b stack.Execution) int { return a.Started.Compare(b.Started) })
	if len(drifts) == 0 {
		return
	}
	t.Logf("drift timeline: first drift execution started %s after the pin", drifts[0].Started.Sub(pinned).Round(100*time.Millisecond))
	for i, e := range drifts {
		gap := ""
		if i > 0 && !drifts[i-1].Finished.IsZero() {
			gap = fmt.Sprintf(", started %s after the previous one finished", e.Started.Sub(drifts[i-1].Finished).Round(100*time.Millisecond))
		}
		took := "still running"
		if !e.Finished.IsZero() {
			took = e.Finished.Sub(e.Started).Round(100 * time.Millisecond).String()
		}
		t.Logf("drift timeline: %s at +%s, took %s%s", e.Name, e.Started.Sub(pinned).Round(100*time.Millisecond), took, gap)
	}
}
