package integration_test

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/integration/harness"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestKwokNodeRunsDeploymentPods follows a Node from registration to
// running Pods, as a kubelet-backed Node would go: kwok reports it Ready,
// the node lifecycle controller lifts its not-ready taint, the scheduler
// binds a Deployment's Pods to it and kwok runs them. A Node without kwok's
// annotation is left alone.
func TestKwokNodeRunsDeploymentPods(t *testing.T) {
	c := harness.StartCluster(t)
	ctx := t.Context()

	managed := harness.KwokNode("kwok-node-a", corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}, map[string]string{"node.kubernetes.io/instance-type": "m5.xlarge"})
	unmanaged := managed.DeepCopy()
	unmanaged.Name = "unmanaged-node"
	unmanaged.Labels[corev1.LabelHostname] = unmanaged.Name
	unmanaged.Annotations = nil
	for _, n := range []*corev1.Node{managed, unmanaged} {
		if _, err := c.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
	}

	harness.Eventually(t, 60*time.Second, "node Ready without the not-ready taint", func(ctx context.Context) (bool, error) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, managed.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
		return v1.NodeReady(n) && !tainted, nil
	})

	replicas := int32(3)
	labels := map[string]string{"app": "inflate"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "inflate",
					Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("1"),
						corev1.ResourceMemory: resource.MustParse("1Gi"),
					}},
				}}},
			},
		},
	}
	if _, err := c.Kube.AppsV1().Deployments(deploy.Namespace).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}

	harness.Eventually(t, 60*time.Second, "3 pods Running and Ready on the kwok node", func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			if p.Spec.NodeName == managed.Name && p.Status.Phase == corev1.PodRunning && ready && p.Status.PodIP != "" {
				running++
			}
		}
		return running == int(replicas), nil
	})

	n, err := c.Kube.CoreV1().Nodes().Get(ctx, unmanaged.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v1.NodeReady(n) {
		t.Errorf("node %s without the %s annotation became Ready", unmanaged.Name, "kwok")
	}
}
