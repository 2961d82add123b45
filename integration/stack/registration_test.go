package stack_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestRegisteredNodesAreNotGarbageCollected checks that a Node, once the
// provisioner has registered it, survives Kubernetes' garbage collector:
// registration must not give it an owner the cluster does not have (the
// NodeClaims in the cluster are mirrors with their own UIDs), or the
// collector deletes the Node as an orphan.
func TestRegisteredNodesAreNotGarbageCollected(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s)
	ctx := t.Context()
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("inflate", 1, "1", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 2*time.Minute, "the pod running on a registered node", func(ctx context.Context, st stack.Status) bool {
		if st.RunningPods != 1 {
			return false
		}
		for _, n := range nodeList(t, s) {
			if n.Labels[v1.LabelRegistered] == "true" {
				return true
			}
		}
		return false
	})
	// The controller manager's garbage collector starts within a minute of
	// the control plane; give it that long to act.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodeList(t, s) {
			if n.DeletionTimestamp == nil {
				continue
			}
			claims, _ := s.Dynamic.Resource(stack.NodeClaimResource).List(ctx, metav1.ListOptions{})
			mirror := map[string]string{}
			for _, c := range claims.Items {
				mirror[c.GetName()] = string(c.GetUID())
			}
			for _, o := range n.OwnerReferences {
				t.Errorf("node %s: being deleted while its instance runs; owner %s %s has uid %s, the NodeClaim in the cluster has uid %q",
					n.Name, o.Kind, o.Name, o.UID, mirror[o.Name])
			}
			t.FailNow()
		}
		time.Sleep(time.Second)
	}
}
