package termination_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// attachment is an EBS CSI VolumeAttachment of the PersistentVolume pv
// (none when pv is "") to nodeName.
func attachment(name, nodeName, pv string) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: nodeName},
		Status:     storagev1.VolumeAttachmentStatus{Attached: true},
	}
	if pv != "" {
		va.Spec.Source.PersistentVolumeName = &pv
	}
	return va
}

// claim is a PersistentVolumeClaim bound to pv.
func claim(namespace, name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
	}
}

func mountsClaim(volume, claimName string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
		}})
	}
}

func mountsEphemeral(volume string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			Ephemeral: &corev1.EphemeralVolumeSource{},
		}})
	}
}

func succeeded(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }

func stuckTerminating(p *corev1.Pod) {
	at := metav1.NewTime(t0.Add(-10 * time.Minute))
	p.DeletionTimestamp = &at
	p.Finalizers = []string{"example.com/never-removed"}
}

func mirrorPod(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "uid-node-a"})
}

func TestAwaitedAttachments(t *testing.T) {
	tests := []struct {
		name        string
		attachments []*storagev1.VolumeAttachment
		ignored     map[string]bool
		want        []string
	}{
		{name: "no attachments, nothing to wait for"},
		{
			name:        "should wait for every attachment of a persistent volume, in order",
			attachments: []*storagev1.VolumeAttachment{attachment("csi-2", "node-a", "pv-2"), attachment("csi-1", "node-a", "pv-1")},
			want:        []string{"csi-2", "csi-1"},
		},
		{
			name:        "should not wait for the volumes of pods that are not drained",
			attachments: []*storagev1.VolumeAttachment{attachment("csi-1", "node-a", "pv-1"), attachment("csi-2", "node-a", "pv-2")},
			ignored:     map[string]bool{"pv-2": true},
			want:        []string{"csi-1"},
		},
		{
			name:        "should not wait for an attachment without a persistent volume name",
			attachments: []*storagev1.VolumeAttachment{attachment("csi-inline", "node-a", "")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []storagev1.VolumeAttachment
			for _, va := range tt.attachments {
				in = append(in, *va)
			}
			var got []string
			for _, va := range termination.AwaitedAttachments(in, tt.ignored) {
				got = append(got, va.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("AwaitedAttachments() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// volumeRound is what one drain round reported about node-a's volumes.
type volumeRound struct {
	drained  bool
	stalls   int
	nextPoll int
	volumes  *workflow.VolumeDetachment
}

func TestDrainWaitsForVolumeDetachment(t *testing.T) {
	awaiting := func(names ...string) *workflow.VolumeDetachment {
		return &workflow.VolumeDetachment{Status: workflow.VolumesAwaitingDetachment, Remaining: len(names), Attachments: names}
	}
	detached := &workflow.VolumeDetachment{Status: workflow.VolumesDetached}
	elapsed := &workflow.VolumeDetachment{Status: workflow.VolumesGracePeriodElapsed}
	tests := []struct {
		name    string
		objects []runtime.Object
		tgp     time.Duration
		method  string
		nows    []time.Duration // offsets from t0, one per round
		// detachAfter[i] are the attachments deleted after round i+1.
		detachAfter map[int][]string
		want        []volumeRound
	}{
		{
			name: "should wait until a drained node's volume attachments are gone",
			objects: []runtime.Object{node("node-a"), pod("shop", "db-0", "node-a", mountsClaim("data", "data-db-0")),
				claim("shop", "data-db-0", "pv-data"), attachment("csi-data", "node-a", "pv-data"), attachment("csi-other", "node-b", "pv-other")},
			nows:        []time.Duration{0, 5 * time.Second, 10 * time.Second},
			detachAfter: map[int][]string{2: {"csi-data"}},
			want: []volumeRound{
				{nextPoll: 5},
				{nextPoll: 5, volumes: awaiting("csi-data (pv-data)")},
				{drained: true, nextPoll: 5, volumes: detached},
			},
		},
		{
			name:        "should back off while no attachment detaches and reset when one does",
			objects:     []runtime.Object{node("node-a"), attachment("csi-1", "node-a", "pv-1"), attachment("csi-2", "node-a", "pv-2")},
			nows:        []time.Duration{0, 10 * time.Second, 30 * time.Second, 70 * time.Second},
			detachAfter: map[int][]string{2: {"csi-1"}, 3: {"csi-2"}},
			want: []volumeRound{
				{stalls: 1, nextPoll: 10, volumes: awaiting("csi-1 (pv-1)", "csi-2 (pv-2)")},
				{stalls: 2, nextPoll: 20, volumes: awaiting("csi-1 (pv-1)", "csi-2 (pv-2)")},
				{nextPoll: 5, volumes: awaiting("csi-2 (pv-2)")},
				{drained: true, nextPoll: 5, volumes: detached},
			},
		},
		{
			name: "should not wait for the volumes of a pod tolerating the disrupted taint",
			objects: []runtime.Object{node("node-a"), pod("kube-system", "ebs-csi-node", "node-a", daemonSet, toleratesDisrupted, mountsClaim("state", "csi-state")),
				claim("kube-system", "csi-state", "pv-state"), attachment("csi-state", "node-a", "pv-state")},
			nows: []time.Duration{0},
			want: []volumeRound{{drained: true, nextPoll: 5, volumes: detached}},
		},
		{
			name: "should not wait for the ephemeral volume of a pod stuck terminating",
			objects: []runtime.Object{node("node-a"), pod("shop", "cache", "node-a", stuckTerminating, mountsEphemeral("scratch")),
				claim("shop", "cache-scratch", "pv-scratch"), attachment("csi-scratch", "node-a", "pv-scratch")},
			nows: []time.Duration{0},
			want: []volumeRound{{drained: true, nextPoll: 5, volumes: detached}},
		},
		{
			name: "should not wait for the volumes of a mirror pod, but for the others",
			objects: []runtime.Object{node("node-a"), pod("kube-system", "etcd-node-a", "node-a", mirrorPod, mountsClaim("data", "etcd-data")),
				claim("kube-system", "etcd-data", "pv-etcd"), attachment("csi-etcd", "node-a", "pv-etcd"), attachment("csi-web", "node-a", "pv-web")},
			nows: []time.Duration{0},
			want: []volumeRound{{stalls: 1, nextPoll: 10, volumes: awaiting("csi-web (pv-web)")}},
		},
		{
			name: "should wait for the volumes of a completed pod",
			objects: []runtime.Object{node("node-a"), pod("shop", "report", "node-a", succeeded, mountsClaim("out", "report-out")),
				claim("shop", "report-out", "pv-out"), attachment("csi-out", "node-a", "pv-out")},
			nows: []time.Duration{0},
			want: []volumeRound{{stalls: 1, nextPoll: 10, volumes: awaiting("csi-out (pv-out)")}},
		},
		{
			name: "a claim that is gone does not stop the wait",
			objects: []runtime.Object{node("node-a"), pod("kube-system", "agent", "node-a", daemonSet, toleratesDisrupted, mountsClaim("state", "deleted-claim")),
				attachment("csi-1", "node-a", "pv-1")},
			nows: []time.Duration{0},
			want: []volumeRound{{stalls: 1, nextPoll: 10, volumes: awaiting("csi-1 (pv-1)")}},
		},
		{
			name:    "should stop waiting for volumes once the terminationGracePeriod has elapsed",
			objects: []runtime.Object{node("node-a"), attachment("csi-stuck", "node-a", "pv-stuck")},
			tgp:     time.Hour,
			nows:    []time.Duration{0, time.Hour - 15*time.Second, time.Hour},
			want: []volumeRound{
				{stalls: 1, nextPoll: 10, volumes: awaiting("csi-stuck (pv-stuck)")},
				// The backoff would pause 20 s; the deadline is 15 s away.
				{stalls: 2, nextPoll: 15, volumes: awaiting("csi-stuck (pv-stuck)")},
				{drained: true, nextPoll: 5, volumes: elapsed},
			},
		},
		{
			name:    "should wait for volumes without terminationGracePeriod for as long as they stay attached",
			objects: []runtime.Object{node("node-a"), attachment("csi-stuck", "node-a", "pv-stuck")},
			nows:    []time.Duration{0, 24 * time.Hour},
			want: []volumeRound{
				{stalls: 1, nextPoll: 10, volumes: awaiting("csi-stuck (pv-stuck)")},
				{stalls: 2, nextPoll: 20, volumes: awaiting("csi-stuck (pv-stuck)")},
			},
		},
		{
			name:    "should not wait for the attachments of a node object that is gone",
			objects: []runtime.Object{attachment("csi-orphan", "node-a", "pv-orphan")},
			nows:    []time.Duration{0},
			want:    []volumeRound{{drained: true, nextPoll: 5, volumes: &workflow.VolumeDetachment{Status: workflow.VolumesNodeGone}}},
		},
		{
			name:    "should stop waiting for volumes at an interruption's deadline",
			objects: []runtime.Object{node("node-a"), attachment("csi-stuck", "node-a", "pv-stuck")},
			method:  workflow.MethodInterrupted,
			nows:    []time.Duration{0, 2 * time.Minute},
			want: []volumeRound{
				{stalls: 1, nextPoll: 10, volumes: awaiting("csi-stuck (pv-stuck)")},
				{drained: true, nextPoll: 5, volumes: elapsed},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objects...)
			method := tt.method
			if method == "" {
				method = workflow.MethodDrifted
			}
			c := nodeClaim("a", claimedBy(execID, method, t0.Add(48*time.Hour)))
			if tt.tgp > 0 {
				withTGP(tt.tgp)(&c)
			}
			e.claims.put(c)
			st := e.hold(state(method, 1, "a"))
			if method == workflow.MethodInterrupted {
				st.Candidates = nil
				st.Interruption = &workflow.InterruptionInput{NodeClaim: "a", Node: "node-a", InstanceID: "i-a", Deadline: t0.Add(2 * time.Minute)}
			}
			if _, err := e.svc.BeginTermination(t.Context(), st, t0); err != nil {
				t.Fatalf("BeginTermination() error = %v", err)
			}
			for i, off := range tt.nows {
				out, err := e.svc.Drain(t.Context(), st, t0.Add(off))
				if err != nil {
					t.Fatalf("round %d: Drain() error = %v", i+1, err)
				}
				got := volumeRound{drained: out.Drained, stalls: out.Stalls, nextPoll: out.NextPollSeconds}
				if len(out.Nodes) == 1 {
					got.volumes = out.Nodes[0].Volumes
				}
				if diff := cmp.Diff(tt.want[i], got, cmp.AllowUnexported(volumeRound{})); diff != "" {
					t.Errorf("round %d mismatch (-want +got):\n%s", i+1, diff)
				}
				st.Drain = &out
				for _, name := range tt.detachAfter[i+1] {
					if err := e.cs.StorageV1().VolumeAttachments().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

func TestDrainDoesNotReadVolumesPastTheDeadline(t *testing.T) {
	e := newEnv(t, node("node-a"), attachment("csi-stuck", "node-a", "pv-stuck"))
	e.claims.put(nodeClaim("a", claimedBy(execID, workflow.MethodDrifted, t0.Add(48*time.Hour)), withTGP(time.Minute)))
	st := e.hold(state(workflow.MethodDrifted, 1, "a"))
	if _, err := e.svc.BeginTermination(t.Context(), st, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Drain(t.Context(), st, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, a := range e.cs.Actions() {
		if a.GetResource().Resource == "volumeattachments" {
			t.Errorf("Drain() past the deadline sent %s %s, want no VolumeAttachment request", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestDrainVolumeErrors(t *testing.T) {
	tests := []struct {
		name     string
		resource string
		verb     string
		noPort   bool
	}{
		{name: "listing the attachments fails", resource: "volumeattachments", verb: "list"},
		{name: "reading an undrained pod's claim fails", resource: "persistentvolumeclaims", verb: "get"},
		{name: "reading the node fails", resource: "nodes", verb: "get"},
		{name: "no volume port", noPort: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, node("node-a"), pod("kube-system", "agent", "node-a", daemonSet, toleratesDisrupted, mountsClaim("state", "agent-state")),
				claim("kube-system", "agent-state", "pv-state"), attachment("csi-1", "node-a", "pv-1"))
			e.claims.put(nodeClaim("a", claimedBy(execID, workflow.MethodDrifted, t0.Add(time.Hour))))
			svc := e.svc
			if tt.noPort {
				k := kubeAPI{kube.NewFromClientset(e.cs)}
				var err error
				svc, err = termination.New(termination.Ports{Claims: e.claims, Budgets: e.budgets, Nodes: k, Pods: k, Rules: k, Instances: e.instances})
				if err != nil {
					t.Fatal(err)
				}
			} else {
				e.cs.PrependReactor(tt.verb, tt.resource, func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: tt.resource}, "", errors.New("RBAC"))
				})
			}
			out, err := svc.Drain(context.Background(), state(workflow.MethodDrifted, 1, "a"), t0)
			if err == nil {
				t.Fatalf("Drain() = %+v, want an error", out)
			}
		})
	}
}
