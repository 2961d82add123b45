package stack_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestDeleteNodeDrainsAndTerminates is `kubectl delete node` on a node
// nodewright launched, as Karpenter's termination controller handles it
// (karpenter-spec §5.2): the Node, held by karpenter.sh/termination, is
// tainted karpenter.sh/disrupted, its pod evicted and run on another node
// the provisioner launches, its instance terminated, and the Node removed,
// by one delete-<nodeclaim>-<hash> execution.
func TestDeleteNodeDrainsAndTerminates(t *testing.T) {
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Drift {
		t.Skip("the delete execution needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, poolYAML("manual", "1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("manual", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "the pod Running on its node", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0 && st.ReadyNodes == 1
	})
	pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=manual"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("manual pods: %v, err %v", pods, err)
	}
	pod := pods.Items[0]
	node, err := s.Kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(node.Finalizers, v1.TerminationFinalizer) {
		t.Fatalf("node %s finalizers %v, want %s", node.Name, node.Finalizers, v1.TerminationFinalizer)
	}
	claim := claimOfNode(t, s, []corev1.Node{*node})[node.Name]
	instanceID := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]

	deletedAt := time.Now()
	if err := s.Kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var taintedAt, podGoneAt, nodeGoneAt time.Time
	deadline := time.Now().Add(4 * time.Minute)
	for {
		now := time.Now()
		n, err := s.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			if taintedAt.IsZero() && hasTaint(n, v1.TaintKeyDisrupted) {
				taintedAt = now
			}
		case apierrors.IsNotFound(err) && nodeGoneAt.IsZero():
			nodeGoneAt = now
		}
		if _, err := s.Kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) && podGoneAt.IsZero() {
			podGoneAt = now
		}
		if !nodeGoneAt.IsZero() && !podGoneAt.IsZero() && servingPods(t, s, "app=manual") == 1 {
			break
		}
		if now.After(deadline) {
			t.Fatalf("4 minutes after kubectl delete node: tainted %v, pod gone %v, node gone %v, executions %+v",
				!taintedAt.IsZero(), !podGoneAt.IsZero(), !nodeGoneAt.IsZero(), s.Executions())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if taintedAt.IsZero() {
		t.Errorf("node %s was never seen tainted %s", node.Name, v1.TaintKeyDisrupted)
	}
	exec, ok := finishedExecution(t, s, "delete-"+claim+"-", 30*time.Second)
	if !ok {
		t.Fatalf("no finished delete-%s-<hash> execution (executions %+v)", claim, s.Executions())
	}
	if exec.Status != "SUCCEEDED" {
		t.Errorf("execution %s: %s %s %s", exec.Name, exec.Status, exec.Error, exec.Cause)
	}
	n := 0
	for _, e := range s.Executions() {
		if strings.HasPrefix(e.Name, "delete-") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d delete executions, want 1 (executions %+v)", n, s.Executions())
	}
	in, ok := s.Sim.Instance(instanceID)
	if !ok || (in.State != "shutting-down" && in.State != "terminated") {
		t.Errorf("instance %s: %+v (found %v), want shutting-down or terminated", instanceID, in.State, ok)
	}
	now, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=manual"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range now.Items {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node.Name {
			t.Errorf("pod %s still runs on the deleted node %s", p.Name, node.Name)
		}
	}
	t.Logf("after kubectl delete node: tainted %s, pod evicted %s, node gone %s",
		taintedAt.Sub(deletedAt).Round(100*time.Millisecond), podGoneAt.Sub(deletedAt).Round(100*time.Millisecond),
		nodeGoneAt.Sub(deletedAt).Round(100*time.Millisecond))
}

// TestDeleteNodePoolDrainsAndRemovesItsNodes is issue 19 item 6: deleting
// a NodePool deletes every NodeClaim of it, as Karpenter's ownerReference
// cascade does: each of its nodes is drained and terminated by one
// delete-<nodeclaim>-<hash> execution, and the Node removed; nothing
// launches for its pods (no NodePool is left).
func TestDeleteNodePoolDrainsAndRemovesItsNodes(t *testing.T) {
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Drift {
		t.Skip("the delete execution needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, poolYAML("doomed", "1", "")); err != nil {
		t.Fatal(err)
	}
	d := deployment("doomed", 2, "500m", "512Mi")
	spreadOnePerNode(d)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "two pods Running on two nodes", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 2 && st.PendingPods == 0 && st.ReadyNodes == 2
	})
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims := claimOfNode(t, s, nodes.Items)
	if err := s.Dynamic.Resource(nodePoolResource).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 4*time.Minute, "the NodePool's nodes gone and their instances terminated", func(_ context.Context, st stack.Status) bool {
		return st.Nodes == 0 && st.Instances == 0
	})
	for _, n := range nodes.Items {
		exec, ok := finishedExecution(t, s, "delete-"+claims[n.Name]+"-", 30*time.Second)
		if !ok {
			t.Errorf("no finished delete-%s-<hash> execution for node %s (executions %+v)", claims[n.Name], n.Name, s.Executions())
			continue
		}
		if exec.Status != "SUCCEEDED" {
			t.Errorf("execution %s: %s %s %s", exec.Name, exec.Status, exec.Error, exec.Cause)
		}
	}
	n := 0
	for _, e := range s.Executions() {
		if strings.HasPrefix(e.Name, "delete-") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d delete executions, want 2, one per NodeClaim (executions %+v)", n, s.Executions())
	}
	if got := len(s.Sim.CallsTo("CreateFleet")); got != 2 {
		t.Errorf("CreateFleet calls = %d, want the 2 first launches only", got)
	}
}
