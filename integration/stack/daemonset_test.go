package stack_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/stack"
)

// TestDaemonSetAppliedJustBeforeItsPodsSizesTheirNode is issue 19 item 9:
// a DaemonSet (tolerating everything, 1 CPU) created one second before a
// pod that alone fits a 2-vCPU node is counted by the solve that launches
// the pod's node, as Karpenter reads DaemonSets at solve time: one node,
// large enough for both, the daemon pod and the pod Running on it, and no
// second NodeClaim or instance.
func TestDaemonSetAppliedJustBeforeItsPodsSizesTheirNode(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s)
	ctx := t.Context()
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "agent", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi"),
						}},
					}},
				},
			},
		},
	}
	if _, err := s.Kube.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("app", 1, "1500m", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "the pod and the daemon pod Running on one node", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 2 && st.PendingPods == 0
	})
	// Give a wrong first plan the time to show its second NodeClaim: the
	// daemon pod pending on a too small node would cause one.
	time.Sleep(5 * time.Second)
	if st, _ := s.Observe(ctx); st.Instances != 1 || st.Nodes != 1 || st.NodeClaims != 1 || st.PendingPods != 0 {
		t.Errorf("status = %+v, want one instance, one Node, one NodeClaim and nothing pending", st)
	}
	if got := len(s.Sim.CallsTo("CreateFleet")); got != 1 {
		t.Errorf("CreateFleet calls = %d, want 1", got)
	}
	pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) != 1 {
		t.Errorf("pods on nodes %v, want the daemon pod and the pod on the same node", nodes)
	}
}
