package kube_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/shared/kube"
)

// newAttachment returns a VolumeAttachment of the EBS CSI driver attaching
// the PersistentVolume pv to node.
func newAttachment(name, node, pv string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "ebs.csi.aws.com", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv},
		},
		Status: storagev1.VolumeAttachmentStatus{Attached: true},
	}
}

func attachmentNames(l []storagev1.VolumeAttachment) []string {
	var out []string
	for _, va := range l {
		out = append(out, va.Name)
	}
	slices.Sort(out)
	return out
}

func TestListVolumeAttachments(t *testing.T) {
	tests := []struct {
		name string
		objs []runtime.Object
		node string
		want []string
	}{
		{name: "a node without attachments has none", node: "node-a"},
		{
			name: "only the attachments to the node are returned",
			objs: []runtime.Object{newAttachment("csi-a1", "node-a", "pv-1"), newAttachment("csi-b1", "node-b", "pv-2"), newAttachment("csi-a2", "node-a", "pv-3")},
			node: "node-a",
			want: []string{"csi-a1", "csi-a2"},
		},
		{
			name: "attachments of a node that does not exist are none",
			objs: []runtime.Object{newAttachment("csi-b1", "node-b", "pv-2")},
			node: "node-a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.objs...)
			got, err := c.ListVolumeAttachments(t.Context(), tt.node)
			if err != nil {
				t.Fatalf("ListVolumeAttachments() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, attachmentNames(got)); diff != "" {
				t.Errorf("ListVolumeAttachments() mismatch (-want +got):\n%s", diff)
			}
			lists := actions(cs, "list", "volumeattachments")
			if len(lists) != 1 {
				t.Fatalf("ListVolumeAttachments() sent %d lists, want 1", len(lists))
			}
			if got := lists[0].(clienttesting.ListActionImpl).GetListOptions().Limit; got != kube.ListPageSize {
				t.Errorf("list Limit = %d, want %d", got, kube.ListPageSize)
			}
		})
	}
}

func TestListVolumeAttachmentsFollowsPages(t *testing.T) {
	c, cs := newClient()
	p := &pager{n: 2*kube.ListPageSize + 3, expireAt: map[int]bool{2: true}}
	cs.PrependReactor("list", "volumeattachments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		from, to, next, err := p.page(a.(clienttesting.ListActionImpl).GetListOptions())
		if err != nil {
			return true, nil, err
		}
		l := &storagev1.VolumeAttachmentList{ListMeta: metav1.ListMeta{Continue: next}}
		for i := from; i < to; i++ {
			node := "node-a"
			if i%2 == 1 {
				node = "node-b"
			}
			l.Items = append(l.Items, *newAttachment(fmt.Sprintf("csi-%04d", i), node, fmt.Sprintf("pv-%04d", i)))
		}
		return true, l, nil
	})
	got, err := c.ListVolumeAttachments(t.Context(), "node-a")
	if err != nil {
		t.Fatalf("ListVolumeAttachments() error = %v", err)
	}
	// 1003 attachments in three pages, the even ones on node-a; the
	// expired token of the second request restarts the list: 2 + 3
	// requests.
	if len(got) != kube.ListPageSize+2 || p.calls != 5 {
		t.Errorf("ListVolumeAttachments() = %d attachments in %d requests, want %d in 5", len(got), p.calls, kube.ListPageSize+2)
	}
}

func TestListVolumeAttachmentsErrors(t *testing.T) {
	tests := []struct {
		name   string
		node   string
		apiErr error
	}{
		{name: "API error", node: "node-a", apiErr: apierrors.NewForbidden(storagev1.Resource("volumeattachments"), "", errors.New("RBAC: list not allowed"))},
		{name: "empty node name is refused (it would match attachments without a node)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(newAttachment("csi-x", "", "pv-1"))
			if tt.apiErr != nil {
				failWith(cs, "list", "volumeattachments", tt.apiErr)
			}
			got, err := c.ListVolumeAttachments(t.Context(), tt.node)
			if err == nil {
				t.Fatalf("ListVolumeAttachments() = %v, want an error", attachmentNames(got))
			}
		})
	}
}

func TestBoundVolume(t *testing.T) {
	bound := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-db-0"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-1234"}}
	pending := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-db-1"}}
	tests := []struct {
		name      string
		namespace string
		claim     string
		want      string
	}{
		{name: "a bound claim names its volume", namespace: "shop", claim: "data-db-0", want: "pvc-1234"},
		{name: "an unbound claim names none", namespace: "shop", claim: "data-db-1", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newClient(bound, pending)
			got, err := c.BoundVolume(t.Context(), tt.namespace, tt.claim)
			if err != nil {
				t.Fatalf("BoundVolume() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("BoundVolume() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBoundVolumeErrors(t *testing.T) {
	tests := []struct {
		name         string
		apiErr       error
		wantNotFound bool
	}{
		{name: "a missing claim matches ErrNotFound", wantNotFound: true},
		{name: "an API error is not ErrNotFound", apiErr: apierrors.NewServiceUnavailable("busy")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient()
			if tt.apiErr != nil {
				failWith(cs, "get", "persistentvolumeclaims", tt.apiErr)
			}
			_, err := c.BoundVolume(t.Context(), "shop", "data-db-0")
			if err == nil {
				t.Fatal("BoundVolume() error = nil, want an error")
			}
			if errors.Is(err, kube.ErrNotFound) != tt.wantNotFound {
				t.Errorf("BoundVolume() error = %v, errors.Is(ErrNotFound) = %t, want %t", err, !tt.wantNotFound, tt.wantNotFound)
			}
		})
	}
}

func TestDrainable(t *testing.T) {
	tests := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{name: "a running pod is drainable", pod: newPod("shop", "web-0"), want: true},
		{name: "a succeeded pod is drainable (its volumes are waited for)", pod: newPod("shop", "job-0", phase(corev1.PodSucceeded)), want: true},
		{name: "a do-not-disrupt pod is drainable (the drain waits for it)", pod: newPod("shop", "web-0", annotated("karpenter.sh/do-not-disrupt", "true")), want: true},
		{name: "a pod terminating for less than a minute is drainable", pod: newPod("shop", "web-0", deleted(t0.Add(-30*time.Second))), want: true},
		{
			name: "should not drain a pod tolerating the disrupted taint",
			pod:  newPod("kube-system", "ebs-csi-node-x", daemonSetPod, tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists})),
		},
		{name: "should not drain a mirror pod", pod: newPod("kube-system", "kube-proxy-node-a", ownedBy("v1", "Node"))},
		{name: "should not drain a pod stuck terminating", pod: newPod("shop", "web-0", deleted(t0.Add(-2*time.Minute)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kube.Drainable(&tt.pod, t0); got != tt.want {
				t.Errorf("Drainable() = %t, want %t", got, tt.want)
			}
		})
	}
}
