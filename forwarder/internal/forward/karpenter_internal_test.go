package forward

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/nodewright/nodewright/forwarder/internal/mirror"
)

// leaseReader serves one Lease in kube-system, or err.
type leaseReader struct {
	lease *coordinationv1.Lease
	err   error
}

func (r leaseReader) Lease(_ context.Context, ns, name string) (*coordinationv1.Lease, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.lease == nil || ns != "kube-system" || name != KarpenterLeaseName {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, name)
	}
	return r.lease, nil
}

func karpenterLease(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: KarpenterLeaseName, Namespace: "kube-system"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: renewed},
		},
	}
}

func TestKarpenterWatchActive(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		leases leaseReader
		want   string // a substring of the reason; "" for inactive
	}{
		{name: "should be inactive without Karpenter's lease", leases: leaseReader{}},
		{name: "should be active while the lease is renewed", leases: leaseReader{lease: karpenterLease("karpenter-6d9f-abcde", now.Add(-3*time.Second))},
			want: "kube-system/karpenter-leader-election, held by karpenter-6d9f-abcde, was renewed 3s ago"},
		{name: "should be inactive once the lease is not renewed for twice its duration", leases: leaseReader{lease: karpenterLease("karpenter-6d9f-abcde", now.Add(-30*time.Second))}},
		{name: "should be inactive when the lease was released", leases: leaseReader{lease: karpenterLease("", now)}},
		{name: "should count a lease it cannot read as active", leases: leaseReader{err: apierrors.NewForbidden(schema.GroupResource{Resource: "leases"}, KarpenterLeaseName, nil)},
			want: "cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &karpenterWatch{leases: tt.leases, namespaces: DefaultKarpenterNamespaces}
			got := w.active(t.Context(), now)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("active() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKarpenterWatchNodeClaimChanges(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := now
	w := &karpenterWatch{}
	h := w.handler(func() time.Time { return clock }).(cache.ResourceEventHandlerDetailedFuncs)
	claim := func(status string, mirrored bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"lastPodEventTime": status}}}
		u.SetName("default-x7k2p")
		if mirrored {
			u.SetLabels(map[string]string{mirror.LabelMirror: "true"})
		}
		return u
	}
	h.AddFunc(claim("a", false), true)
	h.UpdateFunc(claim("a", true), claim("b", true))
	h.UpdateFunc(claim("a", false), claim("a", false))
	if got := w.active(t.Context(), now); got != "" {
		t.Fatalf("active() = %q after the initial list, a mirror's change and a resync; want inactive", got)
	}
	h.UpdateFunc(claim("a", false), claim("b", false))
	clock = now.Add(KarpenterActivityWindow - time.Second)
	if got := w.active(t.Context(), clock); !strings.Contains(got, "its NodeClaim default-x7k2p changed") {
		t.Errorf("active() = %q after Karpenter changed its NodeClaim's status, want active", got)
	}
	if got := w.active(t.Context(), now.Add(KarpenterActivityWindow)); got != "" {
		t.Errorf("active() = %q %s after the change, want inactive", got, KarpenterActivityWindow)
	}
}
