package handler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/functions/internal/adapters"
	sfnlocal "github.com/nodewright/nodewright/local/stepfunctions"
	apiv1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/workflow"
)

func (f failingKube) ListVolumeAttachments(context.Context, string) ([]storagev1.VolumeAttachment, error) {
	return nil, f.err
}
func (f failingKube) BoundVolume(context.Context, string, string) (string, error) { return "", f.err }

// volumeAttachment is an EBS CSI attachment of the PersistentVolume pv to
// nodeName.
func volumeAttachment(name, nodeName, pv string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: nodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: true},
	}
}

func boundClaim(namespace, name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
}

func withClaim(volume, claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

func TestKubeVolumePorts(t *testing.T) {
	k := adapters.Kube{Client: kube.NewFromClientset(fake.NewClientset(
		volumeAttachment("csi-a", "node-a", "pv-a"), volumeAttachment("csi-b", "node-b", "pv-b"), boundClaim("shop", "data-db-0", "pv-a")))}
	got, err := k.ListVolumeAttachments(t.Context(), "node-a")
	if err != nil {
		t.Fatalf("ListVolumeAttachments() error = %v", err)
	}
	if len(got) != 1 || got[0].Name != "csi-a" {
		t.Errorf("ListVolumeAttachments(node-a) = %+v, want csi-a only", got)
	}
	if pv, err := k.BoundVolume(t.Context(), "shop", "data-db-0"); err != nil || pv != "pv-a" {
		t.Errorf("BoundVolume() = %q, %v; want pv-a", pv, err)
	}
	if _, err := k.BoundVolume(t.Context(), "shop", "gone"); !errors.Is(err, apiv1.ErrNotFound) {
		t.Errorf("BoundVolume(missing claim) error = %v, want apiv1.ErrNotFound", err)
	}
	tolerating := pod("kube-system", "agent", "node-a", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	})
	if k.Drainable(tolerating, t0) || !k.Drainable(pod("shop", "web", "node-a"), t0) {
		t.Error("Drainable() disagrees with kube.Drainable on a pod tolerating every taint or a plain pod")
	}
}

func TestKubeVolumePortsTranslateErrors(t *testing.T) {
	k := adapters.Kube{Client: failingKube{err: fmt.Errorf("get persistentvolumeclaim shop/x: %w", kube.ErrNotFound)}}
	if _, err := k.BoundVolume(t.Context(), "shop", "x"); !errors.Is(err, apiv1.ErrNotFound) {
		t.Errorf("BoundVolume() error = %v, want apiv1.ErrNotFound", err)
	}
	k = adapters.Kube{Client: failingKube{err: errors.New("list volumeattachments of node n: forbidden")}}
	if _, err := k.ListVolumeAttachments(t.Context(), "n"); err == nil || errors.Is(err, apiv1.ErrNotFound) {
		t.Errorf("ListVolumeAttachments() error = %v, want the API error, not ErrNotFound", err)
	}
}

// volumeStatuses returns each drain round's volume status of node-a, "-"
// for a round that still drained pods.
func volumeStatuses(drains []workflow.DrainOutput) []string {
	var out []string
	for _, d := range drains {
		s := "-"
		if v := d.Nodes[0].Volumes; v != nil {
			s = v.Status
		}
		out = append(out, s)
	}
	return out
}

func TestDisruptionWaitsForVolumeDetachmentBeforeTerminating(t *testing.T) {
	e := newEnv(t, node("node-a", "general"), pod("shop", "db-0", "node-a", withClaim("data", "data-db-0")),
		boundClaim("shop", "data-db-0", "pv-data"), volumeAttachment("csi-data", "node-a", "pv-data"))
	e.putClaim(candidateClaim("a", "general"))
	in, _ := command("drift-a-3333333333", workflow.MethodDrifted, 1, []string{"a"})
	drains, attachedAtTermination := 0, true
	e.beforeStep = func(ti workflow.TaskInput) {
		switch ti.Step {
		case workflow.StepDrain:
			// The attach/detach controller detaches the volume after the
			// third round: the pod went in the first.
			if drains++; drains == 4 {
				if err := e.cs.StorageV1().VolumeAttachments().Delete(context.Background(), "csi-data", metav1.DeleteOptions{}); err != nil {
					t.Error(err)
				}
			}
		case workflow.StepTerminate:
			_, err := e.cs.StorageV1().VolumeAttachments().Get(context.Background(), "csi-data", metav1.GetOptions{})
			attachedAtTermination = err == nil
		}
	}

	res := e.run("disruption.asl.json", in.ID, in)

	if res.Status != sfnlocal.Succeeded {
		t.Fatalf("execution %s: %s: %s", res.Status, res.Error, res.Cause)
	}
	outs := stateOutputs[workflow.DrainOutput](t, res, "Drain", "drain")
	want := []string{"-", workflow.VolumesAwaitingDetachment, workflow.VolumesAwaitingDetachment, workflow.VolumesDetached}
	if diff := cmp.Diff(want, volumeStatuses(outs)); diff != "" {
		t.Errorf("volume status per drain round mismatch (-want +got):\n%s", diff)
	}
	if v := outs[1].Nodes[0].Volumes; v == nil || !cmp.Equal([]string{"csi-data (pv-data)"}, v.Attachments) {
		t.Errorf("second round volumes = %+v, want csi-data (pv-data) awaited", v)
	}
	if attachedAtTermination {
		t.Error("the instance was terminated while csi-data was still attached")
	}
	if diff := cmp.Diff([]string{"i-a"}, e.ec2.terminatedIDs()); diff != "" {
		t.Errorf("terminated instances mismatch (-want +got):\n%s", diff)
	}
}

func TestDisruptionTerminatesWithVolumesStillAttachedAtTheTerminationDeadline(t *testing.T) {
	e := newEnv(t, node("node-a", "general"), volumeAttachment("csi-stuck", "node-a", "pv-stuck"))
	e.clock.tick = time.Minute
	e.putClaim(candidateClaim("a", "general", func(c *apiv1.NodeClaim) {
		c.Spec.TerminationGracePeriod = &apiv1.Duration{Duration: 10 * time.Minute}
	}))
	in, _ := command("drift-a-4444444444", workflow.MethodDrifted, 1, []string{"a"})

	res := e.run("disruption.asl.json", in.ID, in)

	if res.Status != sfnlocal.Succeeded {
		t.Fatalf("execution %s: %s: %s", res.Status, res.Error, res.Cause)
	}
	statuses := volumeStatuses(stateOutputs[workflow.DrainOutput](t, res, "Drain", "drain"))
	if n := len(statuses); n < 5 || statuses[n-1] != workflow.VolumesGracePeriodElapsed || statuses[n-2] != workflow.VolumesAwaitingDetachment {
		t.Errorf("volume status per drain round = %v, want several rounds awaiting, then %s", statuses, workflow.VolumesGracePeriodElapsed)
	}
	if diff := cmp.Diff([]string{"i-a"}, e.ec2.terminatedIDs()); diff != "" {
		t.Errorf("terminated instances mismatch (-want +got):\n%s", diff)
	}
}
