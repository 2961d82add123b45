package integration_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	disrupttask "github.com/nodewright/nodewright/functions/disrupttask/handler"
	"github.com/nodewright/nodewright/integration/harness"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// noClaims is a NodeClaim store without NodeClaims: the drain then works
// from the execution's state alone (no termination deadline).
type noClaims struct{}

func (noClaims) ListNodeClaims(context.Context) ([]v1.NodeClaim, error) { return nil, nil }
func (noClaims) GetNodeClaim(_ context.Context, name string) (v1.NodeClaim, error) {
	return v1.NodeClaim{}, v1.ErrNotFound
}
func (noClaims) UpdateNodeClaim(context.Context, v1.NodeClaim) (v1.NodeClaim, error) {
	return v1.NodeClaim{}, v1.ErrNotFound
}
func (noClaims) DeleteNodeClaim(context.Context, string, string) error {
	return v1.ErrNotFound
}

type noInstances struct{}

func (noInstances) Terminate(context.Context, ...string) error { return errors.New("not expected") }

// TestDrainWaitsForVolumeAttachmentsAsTheDisrupttaskRole runs the drain
// step on a real API server as the disrupttask Lambda's Kubernetes
// identity (its group, bound by infra/kube/rbac.yaml, impersonated): once
// the Node's pods are gone it lists the Node's VolumeAttachments, reads
// the claims of the pod it leaves alone (one tolerating every taint) to
// ignore that pod's volume, reports the other attachment awaited, and the
// Node drained once that attachment is deleted.
func TestDrainWaitsForVolumeAttachmentsAsTheDisrupttaskRole(t *testing.T) {
	c := harness.StartCluster(t)
	ctx := t.Context()

	raw, err := os.ReadFile(filepath.Join("..", "infra", "kube", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		obj, err := harness.FromYAML(doc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}

	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	for claim, pv := range map[string]string{"agent-state": "pv-agent", "data-db-0": "pv-data"} {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: claim},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pv,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if _, err := c.Kube.CoreV1().PersistentVolumeClaims("shop").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	agent := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "agent"},
		Spec: corev1.PodSpec{
			NodeName:    "node-a",
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "agent", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7"}},
			Volumes: []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "agent-state"}}}},
		},
	}
	// The namespace's default ServiceAccount, which admission requires,
	// comes from the controller manager shortly after the namespace.
	harness.Eventually(t, 30*time.Second, "pod shop/agent created", func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Pods("shop").Create(ctx, agent, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	for name, at := range map[string][2]string{"csi-agent": {"node-a", "pv-agent"}, "csi-data": {"node-a", "pv-data"}, "csi-other": {"node-b", "pv-other"}} {
		pv := at[1]
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: at[0],
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		}
		if _, err := c.Kube.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	cfg := rest.CopyConfig(c.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nodewright-disrupttask", Groups: []string{"nodewright:disrupttask"}}
	client, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The identity is the role's, not the admin's: it may not list claims.
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.CoreV1().PersistentVolumeClaims("shop").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing claims as the disrupttask group: error = %v, want Forbidden", err)
	}
	k := disrupttask.Kube{Client: client}
	svc, err := termination.New(termination.Ports{Claims: noClaims{}, Nodes: k, Pods: k, Rules: k, Volumes: k, Instances: noInstances{}})
	if err != nil {
		t.Fatal(err)
	}
	st := workflow.DisruptionState{DisruptionInput: workflow.DisruptionInput{
		ID: "expire-a-0123456789", Method: workflow.MethodExpired, Reason: "expired",
		Candidates: []workflow.Candidate{{NodeClaim: "a", Node: "node-a", NodePool: "general"}},
		Settings:   termination.DefaultSettings(workflow.MethodExpired),
	}}

	out, err := svc.Drain(ctx, st, time.Now())
	if err != nil {
		t.Fatalf("Drain() error = %v", err)
	}
	want := &workflow.VolumeDetachment{Status: workflow.VolumesAwaitingDetachment, Remaining: 1, Attachments: []string{"csi-data (pv-data)"}}
	if diff := cmp.Diff(want, out.Nodes[0].Volumes); diff != "" || out.Drained {
		t.Fatalf("first round: drained %v, volumes mismatch (-want +got):\n%s", out.Drained, diff)
	}

	if err := c.Kube.StorageV1().VolumeAttachments().Delete(ctx, "csi-data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st.Drain = &out
	out, err = svc.Drain(ctx, st, time.Now())
	if err != nil {
		t.Fatalf("Drain() error = %v", err)
	}
	want = &workflow.VolumeDetachment{Status: workflow.VolumesDetached}
	if diff := cmp.Diff(want, out.Nodes[0].Volumes); diff != "" || !out.Drained {
		t.Errorf("after the detachment: drained %v, volumes mismatch (-want +got):\n%s", out.Drained, diff)
	}
}
