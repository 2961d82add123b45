package stack_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// scaleNodesEnv opts in to TestManyNodeClaimsKeepUp and sets its size: at
// 1,000 nodes it runs for many minutes, longer than CI's budget allows.
const scaleNodesEnv = "NODEWRIGHT_E2E_NODES"

// With many NodeClaims, every one gets its mirror, the NodePool's status
// counts them all, and disruption removes the emptied half within its
// budget: the forwarder, the status writer and the disruption evaluation
// keep up with the cluster's size.
func TestManyNodeClaimsKeepUp(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(scaleNodesEnv))
	if err != nil || n < 2 {
		t.Skipf("set %s to the node count (e.g. 1000) to run this end-to-end test at scale", scaleNodesEnv)
	}
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Drift {
		t.Skip("disruption needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
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
      - nodes: '10%'
`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, spreadOnePerNode(deployment("scale", int32(n), "100m", "128Mi")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	perNode := time.Second // 200 nodes took 0.9 s each on a loaded 2-vCPU machine
	eventually(t, s, 3*time.Minute+time.Duration(n)*perNode, fmt.Sprintf("%d pods Running on %d Ready nodes, each with its NodeClaim mirror", n, n), func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == n && st.PendingPods == 0 && st.ReadyNodes == n && st.NodeClaims == n
	})
	t.Logf("%d nodes Ready with their mirrors %s after the Deployment", n, time.Since(start).Round(time.Second))
	eventually(t, s, time.Minute+time.Duration(n)*perNode/10, fmt.Sprintf("NodePool production status counting %d nodes", n), func(context.Context, stack.Status) bool {
		var pool v1.NodePoolStatus
		readStatus(t, s, "nodepool", &pool)
		return pool.Nodes != nil && *pool.Nodes == int64(n)
	})

	keep := n / 2
	start = time.Now()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, keep))
	if _, err := s.Kube.AppsV1().Deployments("default").Patch(ctx, "scale", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale down: %v", err)
	}
	eventually(t, s, 3*time.Minute+time.Duration(n)*perNode, fmt.Sprintf("the %d emptied nodes and their NodeClaims removed", n-keep), func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == keep && st.Nodes == keep && st.NodeClaims == keep && st.Instances == keep
	})
	t.Logf("%d emptied nodes removed %s after the scale-down", n-keep, time.Since(start).Round(time.Second))
	eventually(t, s, time.Minute, fmt.Sprintf("NodePool production status counting %d nodes", keep), func(context.Context, stack.Status) bool {
		var pool v1.NodePoolStatus
		readStatus(t, s, "nodepool", &pool)
		return pool.Nodes != nil && *pool.Nodes == int64(keep)
	})
}
