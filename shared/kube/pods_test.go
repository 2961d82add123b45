package kube_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/shared/kube"
)

func ptr[T any](v T) *T { return &v }

// evictions returns the Eviction objects posted to the fake.
func evictions(cs *fake.Clientset) []*policyv1.Eviction {
	var out []*policyv1.Eviction
	for _, a := range actions(cs, "create", "pods") {
		if a.GetSubresource() == "eviction" {
			out = append(out, a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction))
		}
	}
	return out
}

func TestEvict(t *testing.T) {
	web := newPod("shop", "web-0")
	pdbErr := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	tests := []struct {
		name        string
		stored      []runtime.Object
		apiErr      error
		gracePeriod time.Duration
		want        kube.Eviction
		wantDelete  *metav1.DeleteOptions
	}{
		{
			name: "should evict through the eviction API with the pod's UID as precondition", stored: []runtime.Object{&web},
			gracePeriod: kube.UsePodGracePeriod,
			want:        kube.Eviction{Outcome: kube.Evicted},
			wantDelete:  &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}},
		},
		{
			name: "grace period is rounded up to whole seconds", stored: []runtime.Object{&web},
			gracePeriod: 1500 * time.Millisecond,
			want:        kube.Eviction{Outcome: kube.Evicted},
			wantDelete:  &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}, GracePeriodSeconds: ptr(int64(2))},
		},
		{
			name: "zero grace period is sent as zero", stored: []runtime.Object{&web},
			want:       kube.Eviction{Outcome: kube.Evicted},
			wantDelete: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}, GracePeriodSeconds: ptr(int64(0))},
		},
		{
			name: "429 from a disruption budget is blocked, with the server's message", stored: []runtime.Object{&web},
			apiErr: pdbErr, gracePeriod: kube.UsePodGracePeriod,
			want:       kube.Eviction{Outcome: kube.EvictionBlocked, Message: pdbErr.Error()},
			wantDelete: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}},
		},
		{
			name: "a pod that no longer exists is gone", gracePeriod: kube.UsePodGracePeriod,
			want:       kube.Eviction{Outcome: kube.PodGone},
			wantDelete: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}},
		},
		{
			name: "a pod whose name now has another UID is gone", stored: []runtime.Object{&web},
			apiErr:      apierrors.NewConflict(podsResource, "web-0", errors.New("precondition failed: UID in precondition does not match")),
			gracePeriod: kube.UsePodGracePeriod,
			want:        kube.Eviction{Outcome: kube.PodGone},
			wantDelete:  &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.stored...)
			if tt.apiErr != nil {
				failWith(cs, "create", "pods", tt.apiErr)
			}
			got, err := c.Evict(t.Context(), &web, tt.gracePeriod)
			if err != nil {
				t.Fatalf("Evict() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Evict() mismatch (-want +got):\n%s", diff)
			}
			evs := evictions(cs)
			if len(evs) != 1 {
				t.Fatalf("Evict() posted %d evictions, want 1", len(evs))
			}
			wantEv := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"}, DeleteOptions: tt.wantDelete}
			if diff := cmp.Diff(wantEv, evs[0]); diff != "" {
				t.Errorf("eviction request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvictErrors(t *testing.T) {
	web := newPod("shop", "web-0")
	tests := []struct {
		name   string
		pod    *corev1.Pod
		apiErr error
	}{
		{name: "pod covered by several budgets (500) is an error to retry", pod: &web, apiErr: apierrors.NewInternalError(errors.New("this pod has more than one PodDisruptionBudget"))},
		{name: "forbidden is an error", pod: &web, apiErr: apierrors.NewForbidden(podsResource, "web-0", errBoom)},
		{name: "nil pod is refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(&web)
			if tt.apiErr != nil {
				failWith(cs, "create", "pods", tt.apiErr)
			}
			got, err := c.Evict(t.Context(), tt.pod, kube.UsePodGracePeriod)
			if err == nil {
				t.Fatalf("Evict() = %+v, want an error", got)
			}
			if diff := cmp.Diff(kube.Eviction{}, got); diff != "" {
				t.Errorf("Evict() returned an outcome with its error (-want +got):\n%s", diff)
			}
			if tt.apiErr != nil && !errors.Is(err, tt.apiErr) {
				t.Errorf("Evict() error = %v, want it to wrap %v", err, tt.apiErr)
			}
		})
	}
}

func TestDeletePod(t *testing.T) {
	web := newPod("shop", "web-0")
	tests := []struct {
		name        string
		stored      []runtime.Object
		apiErr      error
		gracePeriod time.Duration
		wantOpts    metav1.DeleteOptions
	}{
		{
			name: "should delete with the remaining grace period, bypassing budgets", stored: []runtime.Object{&web},
			gracePeriod: 1 * time.Second,
			wantOpts:    metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}, GracePeriodSeconds: ptr(int64(1))},
		},
		{
			name: "keeps the pod's grace period when asked", stored: []runtime.Object{&web},
			gracePeriod: kube.UsePodGracePeriod,
			wantOpts:    metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}},
		},
		{
			name: "a pod already gone is success", gracePeriod: 30 * time.Second,
			wantOpts: metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}, GracePeriodSeconds: ptr(int64(30))},
		},
		{
			name: "a pod whose name now has another UID is success", stored: []runtime.Object{&web},
			apiErr:      apierrors.NewConflict(podsResource, "web-0", errors.New("precondition failed")),
			gracePeriod: 30 * time.Second,
			wantOpts:    metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(web.UID)}, GracePeriodSeconds: ptr(int64(30))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.stored...)
			if tt.apiErr != nil {
				failWith(cs, "delete", "pods", tt.apiErr)
			}
			if err := c.DeletePod(t.Context(), &web, tt.gracePeriod); err != nil {
				t.Fatalf("DeletePod() error = %v", err)
			}
			dels := actions(cs, "delete", "pods")
			if len(dels) != 1 {
				t.Fatalf("DeletePod() sent %d deletes, want 1", len(dels))
			}
			d := dels[0].(clienttesting.DeleteActionImpl)
			if d.GetNamespace() != "shop" || d.GetName() != "web-0" {
				t.Errorf("DeletePod() deleted %s/%s, want shop/web-0", d.GetNamespace(), d.GetName())
			}
			if diff := cmp.Diff(tt.wantOpts, d.GetDeleteOptions()); diff != "" {
				t.Errorf("delete options mismatch (-want +got):\n%s", diff)
			}
			if tt.apiErr == nil {
				if _, err := cs.CoreV1().Pods("shop").Get(t.Context(), "web-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("pod still stored after DeletePod(): get error = %v", err)
				}
			}
		})
	}
}

func TestDeletePodErrors(t *testing.T) {
	web := newPod("shop", "web-0")
	tests := []struct {
		name   string
		pod    *corev1.Pod
		apiErr error
	}{
		{name: "forbidden is an error", pod: &web, apiErr: apierrors.NewForbidden(podsResource, "web-0", errBoom)},
		{name: "nil pod is refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(&web)
			if tt.apiErr != nil {
				failWith(cs, "delete", "pods", tt.apiErr)
			}
			err := c.DeletePod(t.Context(), tt.pod, time.Second)
			if err == nil {
				t.Fatal("DeletePod() error = nil, want an error")
			}
			if tt.apiErr != nil && !errors.Is(err, tt.apiErr) {
				t.Errorf("DeletePod() error = %v, want it to wrap %v", err, tt.apiErr)
			}
		})
	}
}

func TestListPodsOnNode(t *testing.T) {
	a1 := newPod("shop", "web-0")
	a2 := newPod("kube-system", "aws-node-x", daemonSetPod)
	b1 := newPod("shop", "web-1", onNode("node-b"))
	pending := newPod("shop", "web-2", onNode(""))
	c, cs := newClient(&a1, &a2, &b1, &pending)
	got, err := c.ListPodsOnNode(t.Context(), "node-a")
	if err != nil {
		t.Fatalf("ListPodsOnNode() error = %v", err)
	}
	if diff := cmp.Diff([]string{"kube-system/aws-node-x", "shop/web-0"}, podNames(got)); diff != "" {
		t.Errorf("ListPodsOnNode() mismatch (-want +got):\n%s", diff)
	}
	lists := actions(cs, "list", "pods")
	if len(lists) != 1 {
		t.Fatalf("ListPodsOnNode() sent %d lists, want 1", len(lists))
	}
	l := lists[0].(clienttesting.ListActionImpl)
	wantOpts := metav1.ListOptions{FieldSelector: "spec.nodeName=node-a", Limit: kube.ListPageSize}
	if diff := cmp.Diff(wantOpts, l.GetListOptions()); diff != "" || l.GetNamespace() != metav1.NamespaceAll {
		t.Errorf("list request in namespace %q, options mismatch (-want +got):\n%s", l.GetNamespace(), diff)
	}
}

func TestListPodsOnNodeFollowsPages(t *testing.T) {
	c, cs := newClient()
	p := &pager{n: kube.ListPageSize + 1}
	cs.PrependReactor("list", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		from, to, next, err := p.page(a.(clienttesting.ListActionImpl).GetListOptions())
		if err != nil {
			return true, nil, err
		}
		l := &corev1.PodList{ListMeta: metav1.ListMeta{Continue: next}}
		for i := from; i < to; i++ {
			l.Items = append(l.Items, newPod("shop", fmt.Sprintf("web-%04d", i)))
		}
		return true, l, nil
	})
	got, err := c.ListPodsOnNode(t.Context(), "node-a")
	if err != nil {
		t.Fatalf("ListPodsOnNode() error = %v", err)
	}
	if len(got) != kube.ListPageSize+1 || p.calls != 2 {
		t.Errorf("ListPodsOnNode() = %d pods in %d requests, want %d in 2", len(got), p.calls, kube.ListPageSize+1)
	}
	for _, o := range p.opts {
		if o.FieldSelector != "spec.nodeName=node-a" {
			t.Errorf("page request field selector = %q, want spec.nodeName=node-a on every page", o.FieldSelector)
		}
	}
}

func TestListPodsOnNodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		node   string
		apiErr error
	}{
		{name: "API error", node: "node-a", apiErr: apierrors.NewServiceUnavailable("busy")},
		{name: "empty node name is refused (it would select unscheduled pods)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pending := newPod("shop", "web-2", onNode(""))
			c, cs := newClient(&pending)
			if tt.apiErr != nil {
				failWith(cs, "list", "pods", tt.apiErr)
			}
			got, err := c.ListPodsOnNode(t.Context(), tt.node)
			if err == nil {
				t.Fatalf("ListPodsOnNode() = %v, want an error", podNames(got))
			}
		})
	}
}
