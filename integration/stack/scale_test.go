package stack_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

// scaleNodesEnv sets TestManyNodeClaimsKeepUp's size (default
// ciScaleNodes).
const scaleNodesEnv = "NODEWRIGHT_E2E_NODES"

// ciScaleNodes is TestManyNodeClaimsKeepUp's size when scaleNodesEnv is
// unset. Issue 15 asks for 1,000 NodeClaims; on a shared 2-vCPU machine
// under a load average of 20-30 the stack brought up about 150 nodes in
// 3 minutes, so CI proves the same properties (every mirror Ready, the
// NodePool's status counting every node's capacity, one evaluation of
// every NodeClaim within the Lambda's timeout that removes the emptied
// half) at 100, and 1,000 runs with NODEWRIGHT_E2E_NODES=1000.
const ciScaleNodes = 100

// disruptionLambdaTimeout is the disruption Lambda's timeout
// (infra/nodewright): an evaluation that takes longer never acts.
const disruptionLambdaTimeout = 50 * time.Second

func scaleNodes(t *testing.T) int {
	t.Helper()
	v := os.Getenv(scaleNodesEnv)
	if v == "" {
		return ciScaleNodes
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 {
		t.Fatalf("%s=%q: want a node count of at least 2", scaleNodesEnv, v)
	}
	return n
}

// With many NodeClaims, every one gets its mirror (Ready, naming its
// Node), the NodePool's status counts them all with their capacity, and
// one disruption evaluation of the whole cluster, inside the disruption
// Lambda's timeout, removes the emptied half: the forwarder, the status
// writer and the disruption evaluation keep up with the cluster's size.
func TestManyNodeClaimsKeepUp(t *testing.T) {
	n := scaleNodes(t)
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Drift {
		t.Skip("disruption needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	// A 50% budget lets one evaluation act on the whole emptied half.
	if err := s.Apply(ctx, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: production
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
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: production
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 0s
    budgets:
      - nodes: '50%'
`)); err != nil {
		t.Fatal(err)
	}
	// Every Status lists all Nodes, NodeClaims and Pods: poll less often as
	// the cluster grows, so that watching costs less than the work watched.
	every := max(200*time.Millisecond, time.Duration(n)*time.Second/500)
	start := time.Now()
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, spreadOnePerNode(deployment("scale", int32(n), "100m", "128Mi")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	perNode := time.Second // 100 nodes took 0.6 s each under a load average of 20
	eventuallyEvery(t, s, every, 2*time.Minute+time.Duration(n)*perNode, fmt.Sprintf("%d pods Running on %d Ready nodes, each with its NodeClaim mirror", n, n), func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == n && st.PendingPods == 0 && st.ReadyNodes == n && st.NodeClaims == n
	})
	t.Logf("%d nodes Ready with their mirrors %s after the Deployment", n, time.Since(start).Round(time.Second))

	eventuallyEvery(t, s, every, time.Minute, fmt.Sprintf("%d NodeClaim mirrors Ready, each naming its Node", n), func(context.Context, stack.Status) bool {
		return readyMirrors(t, s) == n
	})
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := capacitySum(nodes.Items)
	eventuallyEvery(t, s, every, time.Minute, fmt.Sprintf("NodePool production status counting %d nodes and their capacity (cpu %s, memory %s)", n, want.Cpu(), want.Memory()), func(context.Context, stack.Status) bool {
		var pool v1.NodePoolStatus
		readStatus(t, s, "nodepool", &pool)
		return pool.Nodes != nil && *pool.Nodes == int64(n) && pool.Resources.Cpu().Equal(*want.Cpu()) && pool.Resources.Memory().Equal(*want.Memory())
	})
	t.Logf("mirrors Ready and NodePool status counting %d nodes %s after the Deployment", n, time.Since(start).Round(time.Second))

	keep := n / 2
	start = time.Now()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, keep))
	if _, err := s.Kube.AppsV1().Deployments("default").Patch(ctx, "scale", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale down: %v", err)
	}
	eventuallyEvery(t, s, every, 3*time.Minute+time.Duration(n)*perNode/2, fmt.Sprintf("the %d emptied nodes and their NodeClaims removed", n-keep), func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == keep && st.Nodes == keep && st.NodeClaims == keep && st.Instances == keep
	})
	t.Logf("%d emptied nodes removed %s after the scale-down", n-keep, time.Since(start).Round(time.Second))
	eventuallyEvery(t, s, every, time.Minute, fmt.Sprintf("NodePool production status counting %d nodes", keep), func(context.Context, stack.Status) bool {
		var pool v1.NodePoolStatus
		readStatus(t, s, "nodepool", &pool)
		return pool.Nodes != nil && *pool.Nodes == int64(keep)
	})

	runs := s.DisruptionRuns()
	var acted *stack.DisruptionRun
	for i, r := range runs {
		if r.Took > disruptionLambdaTimeout {
			t.Errorf("disruption run at %s took %s, more than the Lambda's %s", r.At.Format(time.TimeOnly), r.Took, disruptionLambdaTimeout)
		}
		// Of the runs that decided on every NodeClaim and started an Empty
		// command, report the one with the most candidates (the
		// scale-down's).
		for _, c := range r.Commands {
			if c.Method == string(disruption.MethodEmpty) && r.Decided == n && (acted == nil || c.Candidates > emptied(acted)) {
				acted = &runs[i]
			}
		}
	}
	if acted == nil {
		t.Fatalf("no disruption run decided on all %d NodeClaims and started an Empty command; runs: %+v", n, runs)
	}
	t.Logf("the evaluation of %d NodeClaims that started %+v took %s (Lambda timeout %s); %d runs, the longest %s", n, acted.Commands, acted.Took.Round(time.Millisecond), disruptionLambdaTimeout, len(runs), longest(runs).Round(time.Millisecond))
}

// readyMirrors counts the NodeClaim mirrors that name their Node and are
// Ready=True.
func readyMirrors(t testing.TB, s *stack.Stack) int {
	t.Helper()
	list, err := s.Dynamic.Resource(stack.NodeClaimResource).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodeclaims: %v", err)
	}
	ready := 0
	for _, u := range list.Items {
		var c v1.NodeClaim
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
			t.Fatalf("decode nodeclaim %s: %v", u.GetName(), err)
		}
		if c.Status.NodeName != "" && readyOf(c.Status.Conditions) == metav1.ConditionTrue {
			ready++
		}
	}
	return ready
}

// capacitySum adds up the Nodes' capacity, what a NodePool's
// status.resources holds for its nodes.
func capacitySum(nodes []corev1.Node) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, n := range nodes {
		for name, q := range n.Status.Capacity {
			total, ok := sum[name]
			if !ok {
				total = resource.Quantity{Format: q.Format}
			}
			total.Add(q)
			sum[name] = total
		}
	}
	return sum
}

// emptied is the largest Empty command's candidate count in r.
func emptied(r *stack.DisruptionRun) int {
	most := 0
	for _, c := range r.Commands {
		if c.Method == string(disruption.MethodEmpty) {
			most = max(most, c.Candidates)
		}
	}
	return most
}

func longest(runs []stack.DisruptionRun) time.Duration {
	var d time.Duration
	for _, r := range runs {
		d = max(d, r.Took)
	}
	return d
}
