package stack_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// nodePoolResource is the karpenter.sh/v1 NodePool resource.
var nodePoolResource = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}

// readStatus reads the object's status as `kubectl get -o yaml` shows it,
// decoded into out.
func readStatus(t testing.TB, s *stack.Stack, obj string, out any) {
	t.Helper()
	gvr := nodePoolResource
	if obj == "ec2nodeclass" {
		gvr = ec2NodeClassResource
	}
	u, err := s.Dynamic.Resource(gvr).Get(t.Context(), "production", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s production: %v", obj, err)
	}
	raw, err := json.Marshal(u.Object["status"])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("decode %s status %s: %v", obj, raw, err)
	}
}

func readyOf(conds []metav1.Condition) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, v1.ConditionTypeReady); c != nil {
		return c.Status
	}
	return ""
}

// TestNodePoolAndEC2NodeClassStatus: on the local stack, the guide's
// EC2NodeClass gets Karpenter's status (resolved AMIs, subnets, security
// groups, instance profile, Ready=True) and its NodePool Ready=True with
// status.resources counting the nodes launched for inflate, as
// `kubectl get ec2nodeclasses,nodepools` would show them.
func TestNodePoolAndEC2NodeClassStatus(t *testing.T) {
	s := startStack(t)
	start := time.Now()
	applyGuide(t, s, "ec2nodeclass.yaml", "nodepool.yaml", "inflate.yaml")
	patch := []byte(`{"spec":{"replicas":5}}`)
	if _, err := s.Kube.AppsV1().Deployments("default").Patch(t.Context(), "inflate", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale inflate: %v", err)
	}
	eventually(t, s, 2*time.Minute, "5 inflate pods running", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 5 && st.PendingPods == 0
	})

	var class v1.EC2NodeClassStatus
	eventually(t, s, time.Minute, "EC2NodeClass production Ready=True", func(context.Context, stack.Status) bool {
		class = v1.EC2NodeClassStatus{}
		readStatus(t, s, "ec2nodeclass", &class)
		return readyOf(class.Conditions) == metav1.ConditionTrue
	})
	t.Logf("EC2NodeClass Ready=True %v after the manifests were applied", time.Since(start).Round(100*time.Millisecond))
	if len(class.AMIs) == 0 || len(class.Subnets) == 0 || len(class.SecurityGroups) == 0 || class.InstanceProfile == "" {
		t.Errorf("EC2NodeClass status = %+v; want resolved AMIs, subnets, security groups and an instance profile", class)
	}
	for _, typ := range []string{v1.ConditionTypeSubnetsReady, v1.ConditionTypeSecurityGroupsReady, v1.ConditionTypeAMIsReady, v1.ConditionTypeInstanceProfileReady} {
		if !hasTrue(class.Conditions, typ) {
			t.Errorf("EC2NodeClass condition %s not True in %+v", typ, class.Conditions)
		}
	}

	nodes := 0
	for _, n := range nodeList(t, s) {
		if n.Labels[v1.LabelNodePool] == "production" {
			nodes++
		}
	}
	if nodes == 0 {
		t.Fatal("no Node of NodePool production")
	}
	var pool v1.NodePoolStatus
	eventually(t, s, time.Minute, "NodePool production Ready=True counting its nodes", func(context.Context, stack.Status) bool {
		pool = v1.NodePoolStatus{}
		readStatus(t, s, "nodepool", &pool)
		n := pool.Resources["nodes"]
		return readyOf(pool.Conditions) == metav1.ConditionTrue && n.Value() == int64(nodes)
	})
	if pool.Nodes == nil || *pool.Nodes != int64(nodes) || pool.Resources.Cpu().IsZero() || pool.Resources.Memory().IsZero() {
		t.Errorf("NodePool status = %+v; want nodes %d and the nodes' cpu and memory", pool, nodes)
	}
	if !hasTrue(pool.Conditions, v1.ConditionTypeNodeClassReady) || !hasTrue(pool.Conditions, v1.ConditionTypeValidationSucceeded) {
		t.Errorf("NodePool conditions = %+v; want NodeClassReady and ValidationSucceeded True", pool.Conditions)
	}
	t.Logf("NodePool production: %d nodes, cpu %s, memory %s", nodes, pool.Resources.Cpu(), pool.Resources.Memory())
}

func hasTrue(conds []metav1.Condition, typ string) bool {
	return meta.IsStatusConditionTrue(conds, typ)
}
