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
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// leaseReader serves the Leases of every namespace, or err.
type leaseReader struct {
	leases []*coordinationv1.Lease
	err    error
}

func (r leaseReader) Leases(_ context.Context, name string) ([]coordinationv1.Lease, error) {
	if r.err != nil {
		return nil, r.err
	}
	var out []coordinationv1.Lease
	for _, l := range r.leases {
		if l.Name == name {
			out = append(out, *l)
		}
	}
	return out, nil
}

func karpenterLease(holder string, renewed time.Time) *coordinationv1.Lease {
	return karpenterLeaseIn("kube-system", holder, renewed)
}

func karpenterLeaseIn(ns, holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: KarpenterLeaseName, Namespace: ns},
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
		{name: "should be active while the lease is renewed", leases: leaseReader{leases: []*coordinationv1.Lease{karpenterLease("karpenter-6d9f-abcde", now.Add(-3*time.Second))}},
			want: "kube-system/karpenter-leader-election, held by karpenter-6d9f-abcde, was renewed 3s ago"},
		{name: "should find the lease in any namespace Karpenter was installed in", leases: leaseReader{leases: []*coordinationv1.Lease{
			karpenterLeaseIn("kube-system", "", now), karpenterLeaseIn("platform-autoscaling", "karpenter-6d9f-abcde", now.Add(-3*time.Second))}},
			want: "platform-autoscaling/karpenter-leader-election, held by karpenter-6d9f-abcde"},
		{name: "should be inactive once the lease is not renewed for twice its duration", leases: leaseReader{leases: []*coordinationv1.Lease{karpenterLease("karpenter-6d9f-abcde", now.Add(-30*time.Second))}}},
		{name: "should be inactive when the lease was released", leases: leaseReader{leases: []*coordinationv1.Lease{karpenterLease("", now)}}},
		{name: "should count a lease it cannot read as active", leases: leaseReader{err: apierrors.NewForbidden(schema.GroupResource{Resource: "leases"}, KarpenterLeaseName, nil)},
			want: "cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &karpenterWatch{leases: tt.leases}
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

func TestKarpenterWatchTakenOverNodeClaimChanges(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	w := &karpenterWatch{}
	h := w.handler(func() time.Time { return now }).(cache.ResourceEventHandlerDetailedFuncs)
	// claim is a taken-over Karpenter NodeClaim (the mirror label and the
	// adopted-from annotation), last written by each manager at the time
	// given.
	claim := func(writes map[string]time.Time) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"lastPodEventTime": "a"}}}
		u.SetName("default-x7k2p")
		u.SetLabels(map[string]string{mirror.LabelMirror: "true"})
		u.SetAnnotations(map[string]string{v1.AnnotationAdoptedFrom: "karpenter"})
		var mf []metav1.ManagedFieldsEntry
		for m, at := range writes {
			mf = append(mf, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{Time: at}})
		}
		u.SetManagedFields(mf)
		return u
	}
	before := now.Add(-time.Hour)
	h.UpdateFunc(claim(map[string]time.Time{"karpenter": before, mirror.FieldManager: before}), claim(map[string]time.Time{"karpenter": before, mirror.FieldManager: now}))
	if got := w.active(t.Context(), now); got != "" {
		t.Fatalf("active() = %q after the forwarder's own write of a taken-over NodeClaim; want inactive", got)
	}
	h.UpdateFunc(claim(map[string]time.Time{"karpenter": before, mirror.FieldManager: now}), claim(map[string]time.Time{"karpenter": now, mirror.FieldManager: now}))
	if got := w.active(t.Context(), now); !strings.Contains(got, "default-x7k2p (taken over, changed by karpenter)") {
		t.Errorf("active() = %q after Karpenter wrote a NodeClaim nodewright took over, want active", got)
	}
}

func TestSnapshotWithForeignNodeClaimsIsRepostedWithinTheAdoptionAge(t *testing.T) {
	opts := Options{SnapshotMaxAge: 5 * time.Minute, ForeignSnapshotMaxAge: time.Minute}
	plain := []v1.ClusterSnapshot{{}, {}}
	foreign := []v1.ClusterSnapshot{{}, {ForeignNodeClaims: []v1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "default-x7k2p"}}}}}
	if got := maxAge(opts, plain); got != 5*time.Minute {
		t.Errorf("maxAge() without foreign NodeClaims = %s, want 5m0s", got)
	}
	if got := maxAge(opts, foreign); got != time.Minute {
		t.Errorf("maxAge() with foreign NodeClaims = %s, want 1m0s (the gc Lambda adopts only from a snapshot at most 2m old)", got)
	}
}

func TestKarpenterWatchIgnoresTheForwardersAdoptedCondition(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	w := &karpenterWatch{}
	h := w.handler(func() time.Time { return now }).(cache.ResourceEventHandlerDetailedFuncs)
	claim := func(conds ...map[string]any) *unstructured.Unstructured {
		st := map[string]any{"lastPodEventTime": "a"}
		if len(conds) > 0 {
			list := []any{}
			for _, c := range conds {
				list = append(list, c)
			}
			st["conditions"] = list
		}
		u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
		u.SetName("default-x7k2p")
		return u
	}
	ready := map[string]any{"type": "Ready", "status": "True"}
	refused := map[string]any{"type": v1.ConditionTypeAdopted, "status": "False", "reason": "AdoptionNodePoolNotFound"}
	h.UpdateFunc(claim(), claim(refused))
	h.UpdateFunc(claim(ready), claim(ready, refused))
	if got := w.active(t.Context(), now); got != "" {
		t.Fatalf("active() = %q after the forwarder set the Adopted condition, want inactive: its own write is no sign of Karpenter", got)
	}
	h.UpdateFunc(claim(ready, refused), claim(map[string]any{"type": "Ready", "status": "False"}, refused))
	if got := w.active(t.Context(), now); !strings.Contains(got, "its NodeClaim default-x7k2p changed") {
		t.Errorf("active() = %q after Karpenter changed another condition, want active", got)
	}
}

// conditionMirror records the conditions SetCondition is asked to set.
type conditionMirror struct{ set []string }

func (m *conditionMirror) Sync(context.Context, []v1.NodeClaim) (mirror.Result, error) {
	return mirror.Result{}, nil
}

func (m *conditionMirror) SetCondition(_ context.Context, cur *unstructured.Unstructured, c metav1.Condition) (bool, error) {
	m.set = append(m.set, cur.GetName()+" "+c.Type+"="+string(c.Status)+" "+c.Reason)
	return true, nil
}

func TestRefusedAdoptionConditionIsSetOnlyOnKarpentersNodeClaim(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []struct {
		name                string
		labels, annotations map[string]string
	}{
		{name: "karpenters"},
		{name: "a-mirror", labels: map[string]string{mirror.LabelMirror: "true"}},
		{name: "taken-over", annotations: map[string]string{v1.AnnotationAdoptedFrom: "karpenter"}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetName(c.name)
		u.SetLabels(c.labels)
		u.SetAnnotations(c.annotations)
		if err := idx.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	m := &conditionMirror{}
	f := New(Options{}, Sources{NodeClaims: cache.NewGenericLister(idx, schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"})}, nil, nil, m, nil)
	refused := &metav1.Condition{Type: v1.ConditionTypeAdopted, Status: metav1.ConditionFalse, Reason: "AdoptionNodePoolNotFound"}
	f.setConditions(t.Context(), []v1.EventRecord{
		{ID: "1", NodeClaim: "karpenters", Condition: refused},
		{ID: "2", NodeClaim: "a-mirror", Condition: refused},
		{ID: "3", NodeClaim: "taken-over", Condition: refused},
		{ID: "4", NodeClaim: "gone", Condition: refused},
		{ID: "5", NodeClaim: "karpenters"},
	})
	want := []string{"karpenters Adopted=False AdoptionNodePoolNotFound"}
	if strings.Join(m.set, "|") != strings.Join(want, "|") {
		t.Errorf("conditions set = %q, want %q: only on Karpenter's own NodeClaim, once per record with a condition", m.set, want)
	}
}
