package stack_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestStatefulSetOfZonalWaitForFirstConsumerClassGetsItsNodeInTheAllowedZone
// is issue 19 item 5 end to end: a StatefulSet whose volumeClaimTemplate
// names an EBS-style StorageClass (WaitForFirstConsumer, allowedTopologies
// one zone of the NodePool's three) gets its node in that zone, as
// Karpenter's volume topology requires; kube-scheduler's volume binding
// then selects that Node on the claim, the local stack's stand-in
// provisioner creates a PersistentVolume in the Node's zone, and the pod
// Runs with its claim Bound.
func TestStatefulSetOfZonalWaitForFirstConsumerClassGetsItsNodeInTheAllowedZone(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s)
	ctx := t.Context()
	const zone = "ap-northeast-1d"
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "ebs-zonal"},
		Provisioner:       stack.VolumeProvisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{
			Key: v1.LabelTopologyZone, Values: []string{zone},
		}}}},
	}
	if _, err := s.Kube.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "db", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
					}},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(class.Name),
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("10Gi"),
					}},
				},
			}},
		},
	}
	if _, err := s.Kube.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "the StatefulSet's pod Running", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0
	})
	for _, in := range s.Sim.Instances() {
		if in.Zone != zone {
			t.Errorf("instance %s (%s) in %s, want %s, the StorageClass's only allowed zone", in.ID, in.InstanceType, in.Zone, zone)
		}
	}
	pod, err := s.Kube.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := s.Kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Labels[v1.LabelTopologyZone]; got != zone {
		t.Errorf("pod's Node %s in zone %q, want %q", node.Name, got, zone)
	}
	claim, err := s.Kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Phase != corev1.ClaimBound || claim.Annotations["volume.kubernetes.io/selected-node"] != node.Name {
		t.Errorf("claim phase %s, selected-node %q; want Bound on %s", claim.Status.Phase, claim.Annotations["volume.kubernetes.io/selected-node"], node.Name)
	}
	if st, _ := s.Observe(ctx); st.NodeClaims != 1 || st.Instances != 1 {
		t.Errorf("status = %+v, want one NodeClaim and one instance", st)
	}
}
