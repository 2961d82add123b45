// Package mirror keeps karpenter.sh/v1 NodeClaim objects in the cluster
// equal to the NodeClaims the API holds, so that `kubectl get nodeclaims`
// shows them. The API is the source of truth; the mirrors are for reading.
//
// A mirror carries the label LabelMirror=true. Objects without it (a real
// Karpenter's NodeClaims, say) are never updated or deleted, with one
// exception: the Karpenter NodeClaim of a node nodewright adopted (the
// API's claim of that name is annotated v1.AnnotationAdoptedFrom)
// becomes that claim's mirror. Sync takes it over in place, adding
// LabelMirror and the claim's labels, annotations and status and keeping its
// finalizers, so that `kubectl get nodeclaims` lists the node once and
// under the name Karpenter gave it. Mirrors Sync creates carry no finalizers
// and no owner references, so neither deleting a NodePool nor the garbage
// collector can fight the mirror; before deleting any mirror Sync removes
// Karpenter's karpenter.sh/termination finalizer from it (an adopted one
// still carries it, and Karpenter's controller, which would remove it, is
// stopped), so a terminated node's NodeClaim is gone with its claim.
//
// A mirror deleted by someone else (`kubectl delete nodeclaim X`: with no
// finalizer it is gone at once) is a request to remove the node, as
// Karpenter documents `kubectl delete nodeclaim` (karpenter-spec.md section
// 5.2): the next Sync deletes the Node named in the claim's
// status.nodeName, whose karpenter.sh/termination finalizer then holds it
// while the disruption Lambda drains it and terminates its instance, and
// recreates the mirror, which stays until that termination deletes the
// claim. Sync tells such a deletion from its own by remembering the
// mirrors the previous Sync left in place: only a remembered mirror missing
// while its claim stands counts. A claim with no Node yet, or already
// being deleted, just gets its mirror back; so does any mirror deleted
// while this process was not syncing (nothing remembered yet).
//
// A taken-over Karpenter NodeClaim (annotated v1.AnnotationAdoptedFrom)
// is never deleted or replaced while its claim stands: its Node has an
// ownerReference to its UID, so the garbage collector would delete the
// Node. A spec difference leaves its spec as it is; a lost LabelMirror is
// taken over again, never read as a delete request. Its delete request is
// its deletionTimestamp (`kubectl delete nodeclaim`: Karpenter's finalizer
// holds it): Sync deletes its claim's Node once, as for a deleted mirror.
package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// GVR is the NodeClaim resource.
var GVR = schema.GroupVersionResource{Group: v1.Group, Version: "v1", Resource: "nodeclaims"}

// LabelMirror marks the NodeClaims this package owns (value "true").
const LabelMirror = "nodewright.dev/mirror"

// FieldManager is the field manager of every write Sync makes, so that
// the managedFields of a taken-over Karpenter NodeClaim tell the forwarder's
// changes from anyone else's (Karpenter's controller, should it run again).
const FieldManager = "nodewright-forwarder"

// NodeGVR is the core Node resource, deleted for a mirror a user deleted.
var NodeGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Mirror writes NodeClaim mirrors through a dynamic client.
type Mirror struct {
	client dynamic.Interface

	mu sync.Mutex
	// kept are the mirrors the last Sync left in the cluster, by name.
	kept map[string]bool
	// requested are the taken-over NodeClaims, by UID, whose deletion
	// Sync already turned into the deletion of their Node.
	requested map[types.UID]bool
}

// New returns a Mirror writing through client.
func New(client dynamic.Interface) *Mirror { return &Mirror{client: client} }

// Result counts what one Sync changed.
type Result struct {
	Created, Updated, Deleted int
	// NodesDeleted are the Nodes deleted because someone else deleted
	// their claim's mirror, by name.
	NodesDeleted []string
}

// Sync makes the cluster's mirrors match claims: it creates a mirror for
// each claim that has none, updates a mirror whose labels, annotations or
// status differ (a changed spec, immutable in the CRD, is a delete and a
// create; fields the API server defaulted do not count as a change), and
// deletes mirrors whose claim is gone. A mirror the previous Sync left in
// place and found missing, while its claim stands (no deletionTimestamp)
// with a status.nodeName, was deleted by someone else: Sync deletes that
// Node (NotFound counts as done) before recreating the mirror. A claim
// whose name is taken by an object without LabelMirror is skipped with an
// error. Sync goes on after an error and returns them all, joined; the
// next Sync retries.
func (m *Mirror) Sync(ctx context.Context, claims []v1.NodeClaim) (Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var res Result
	api := m.client.Resource(GVR)
	current, err := api.List(ctx, metav1.ListOptions{LabelSelector: LabelMirror + "=true"})
	if err != nil {
		return res, fmt.Errorf("list nodeclaim mirrors: %w", err)
	}
	have := map[string]*unstructured.Unstructured{}
	for i := range current.Items {
		have[current.Items[i].GetName()] = &current.Items[i]
	}

	var errs []error
	want := map[string]bool{}
	kept := map[string]bool{}
	requested := map[types.UID]bool{}
	for _, c := range claims {
		want[c.Name] = true
		desired, err := toMirror(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cur, ok := have[c.Name]
		takenOver := isAdopted(c.Annotations) || (ok && isAdopted(cur.GetAnnotations()))
		switch {
		case !ok && takenOver:
			// Karpenter's object of an adopted node lost its mirror label
			// (or was removed by hand): its UID is the one the Node's
			// ownerReference names, so it is never deleted or replaced,
			// and a missing label is no delete request (a delete request
			// is its deletionTimestamp, below). It is taken over again.
			if err := m.create(ctx, desired); err != nil {
				errs = append(errs, err)
				continue
			}
			kept[c.Name] = true
			res.Updated++
		case !ok:
			if m.kept[c.Name] && c.DeletionTimestamp == nil && c.Status.NodeName != "" {
				if err := m.deleteNode(ctx, c); err != nil {
					// Remember the mirror as kept, so the next Sync
					// deletes the Node again.
					kept[c.Name] = true
					errs = append(errs, err)
					continue
				}
				res.NodesDeleted = append(res.NodesDeleted, c.Status.NodeName)
			}
			if err := m.create(ctx, desired); err != nil {
				errs = append(errs, err)
				continue
			}
			kept[c.Name] = true
			res.Created++
		case !takenOver && !contains(cur.Object["spec"], desired.Object["spec"]):
			if err := m.release(ctx, cur); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := api.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(cur.GetUID())}}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("replace nodeclaim mirror %s: %w", c.Name, err))
				continue
			}
			if err := m.create(ctx, desired); err != nil {
				errs = append(errs, err)
				continue
			}
			kept[c.Name] = true
			res.Updated++
		default:
			// A taken-over object whose spec differs keeps its spec
			// (immutable in Karpenter's CRD) and is updated in place.
			kept[c.Name] = true
			if takenOver && cur.GetDeletionTimestamp() != nil && c.DeletionTimestamp == nil && c.Status.NodeName != "" && !m.requested[cur.GetUID()] {
				// `kubectl delete nodeclaim` on an adopted node: Karpenter's
				// finalizer holds the object, and the delete request is
				// the one a deleted mirror makes.
				if err := m.deleteNode(ctx, c); err != nil {
					errs = append(errs, err)
				} else {
					requested[cur.GetUID()] = true
					res.NodesDeleted = append(res.NodesDeleted, c.Status.NodeName)
				}
			}
			if m.requested[cur.GetUID()] {
				requested[cur.GetUID()] = true
			}
			changed, err := m.update(ctx, cur, desired)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if changed {
				res.Updated++
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if want[name] {
			continue
		}
		if err := m.release(ctx, have[name]); err != nil {
			errs = append(errs, err)
			continue
		}
		err := api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(have[name].GetUID())}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete nodeclaim mirror %s: %w", name, err))
			continue
		}
		res.Deleted++
	}
	m.kept, m.requested = kept, requested
	return res, errors.Join(errs...)
}

// deleteNode deletes the Node of c, whose NodeClaim a user deleted; the
// Node's finalizer then holds it while it is drained and its instance
// terminated. NotFound counts as done.
func (m *Mirror) deleteNode(ctx context.Context, c v1.NodeClaim) error {
	err := m.client.Resource(NodeGVR).Delete(ctx, c.Status.NodeName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s of deleted nodeclaim %s: %w", c.Status.NodeName, c.Name, err)
	}
	return nil
}

// isAdopted reports whether annotations mark an adopted node's NodeClaim.
func isAdopted(annotations map[string]string) bool {
	return annotations[v1.AnnotationAdoptedFrom] != ""
}

// release removes Karpenter's termination finalizer from a mirror about
// to be deleted; a mirror without it is left as it is.
func (m *Mirror) release(ctx context.Context, cur *unstructured.Unstructured) error {
	fins := cur.GetFinalizers()
	if !slices.Contains(fins, v1.TerminationFinalizer) {
		return nil
	}
	next := cur.DeepCopy()
	next.SetFinalizers(slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == v1.TerminationFinalizer }))
	if _, err := m.client.Resource(GVR).Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from nodeclaim mirror %s: %w", v1.TerminationFinalizer, cur.GetName(), err)
	}
	return nil
}

// adopt takes over the Karpenter NodeClaim named like desired, an adopted
// claim: it gains desired's labels (LabelMirror among them), annotations
// and status, and keeps its finalizers. The object is found by a list
// filtered to its name (the forwarder may list NodeClaims, not get them).
func (m *Mirror) adopt(ctx context.Context, desired *unstructured.Unstructured) error {
	api := m.client.Resource(GVR)
	list, err := api.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + desired.GetName()})
	if err != nil {
		return fmt.Errorf("adopt nodeclaim %s: %w", desired.GetName(), err)
	}
	for i := range list.Items {
		if cur := &list.Items[i]; cur.GetName() == desired.GetName() {
			if _, err := m.update(ctx, cur, desired); err != nil {
				return fmt.Errorf("adopt nodeclaim %s: %w", desired.GetName(), err)
			}
			return nil
		}
	}
	return fmt.Errorf("adopt nodeclaim %s: %w", desired.GetName(), apierrors.NewNotFound(GVR.GroupResource(), desired.GetName()))
}

func (m *Mirror) create(ctx context.Context, desired *unstructured.Unstructured) error {
	api := m.client.Resource(GVR)
	created, err := api.Create(ctx, desired, metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) && desired.GetAnnotations()[v1.AnnotationAdoptedFrom] != "" {
		return m.adopt(ctx, desired)
	}
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create nodeclaim mirror %s: a NodeClaim of that name exists without label %s=true; left alone", desired.GetName(), LabelMirror)
	}
	if err != nil {
		return fmt.Errorf("create nodeclaim mirror %s: %w", desired.GetName(), err)
	}
	// Status is a subresource: the create ignored it.
	if status, ok := desired.Object["status"]; ok {
		created.Object["status"] = status
		if _, err := api.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("set status of nodeclaim mirror %s: %w", desired.GetName(), err)
		}
	}
	return nil
}

// update brings cur's labels, annotations and status to desired's.
func (m *Mirror) update(ctx context.Context, cur, desired *unstructured.Unstructured) (bool, error) {
	api := m.client.Resource(GVR)
	changed := false
	if !maps.Equal(cur.GetLabels(), desired.GetLabels()) || !maps.Equal(cur.GetAnnotations(), desired.GetAnnotations()) {
		next := cur.DeepCopy()
		next.SetLabels(desired.GetLabels())
		next.SetAnnotations(desired.GetAnnotations())
		updated, err := api.Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return false, fmt.Errorf("update nodeclaim mirror %s: %w", cur.GetName(), err)
		}
		cur, changed = updated, true
	}
	if !equality.Semantic.DeepEqual(cur.Object["status"], desired.Object["status"]) {
		next := cur.DeepCopy()
		if status, ok := desired.Object["status"]; ok {
			next.Object["status"] = status
		} else {
			delete(next.Object, "status")
		}
		if _, err := api.UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return changed, fmt.Errorf("update status of nodeclaim mirror %s: %w", cur.GetName(), err)
		}
		changed = true
	}
	return changed, nil
}

// SetCondition sets condition c on the status of the NodeClaim cur (as
// read from the cache) unless one of c's type already has its status,
// reason and message, writing as FieldManager so that the forwarder's own
// write never reads as Karpenter's. lastTransitionTime moves to c's only
// when the status changes. It reports whether it wrote; a conflict or a
// vanished object is an error the next call retries, and an object
// carrying LabelMirror (whose status Sync owns) is left alone.
func (m *Mirror) SetCondition(ctx context.Context, cur *unstructured.Unstructured, c metav1.Condition) (bool, error) {
	if cur.GetLabels()[LabelMirror] == "true" {
		return false, nil
	}
	var status v1.NodeClaimStatus
	if raw, ok := cur.Object["status"]; ok {
		data, err := json.Marshal(raw)
		if err != nil {
			return false, fmt.Errorf("set condition %s on nodeclaim %s: %w", c.Type, cur.GetName(), err)
		}
		if err := json.Unmarshal(data, &status); err != nil {
			return false, fmt.Errorf("set condition %s on nodeclaim %s: status: %w", c.Type, cur.GetName(), err)
		}
	}
	for _, have := range status.Conditions {
		if have.Type == c.Type && have.Status == c.Status && have.Reason == c.Reason && have.Message == c.Message {
			return false, nil
		}
	}
	conds := v1.SetCondition(status.Conditions, c.Type, c.Status, c.Reason, c.Message, cur.GetGeneration(), c.LastTransitionTime.Time)
	data, err := json.Marshal(conds)
	if err != nil {
		return false, fmt.Errorf("set condition %s on nodeclaim %s: %w", c.Type, cur.GetName(), err)
	}
	var list []any
	if err := utiljson.Unmarshal(data, &list); err != nil {
		return false, fmt.Errorf("set condition %s on nodeclaim %s: %w", c.Type, cur.GetName(), err)
	}
	next := cur.DeepCopy()
	st, _ := next.Object["status"].(map[string]any)
	if st == nil {
		st = map[string]any{}
	}
	st["conditions"] = list
	next.Object["status"] = st
	if _, err := m.client.Resource(GVR).UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return false, fmt.Errorf("set condition %s on nodeclaim %s: %w", c.Type, cur.GetName(), err)
	}
	return true, nil
}

// toMirror converts an API NodeClaim into the object to write: its name,
// labels (plus LabelMirror), annotations, spec and status; no server-set
// metadata, finalizers or owner references.
func toMirror(c v1.NodeClaim) (*unstructured.Unstructured, error) {
	clean := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        c.Name,
			Labels:      maps.Clone(c.Labels),
			Annotations: maps.Clone(c.Annotations),
		},
		Spec:   c.Spec,
		Status: c.Status,
	}
	if clean.Labels == nil {
		clean.Labels = map[string]string{}
	}
	clean.Labels[LabelMirror] = "true"
	data, err := json.Marshal(clean)
	if err != nil {
		return nil, fmt.Errorf("encode nodeclaim %s: %w", c.Name, err)
	}
	obj := map[string]any{}
	// utiljson keeps integers as int64, as the dynamic client does.
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("decode nodeclaim %s: %w", c.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(GVR.GroupVersion().String())
	u.SetKind(v1.KindNodeClaim)
	delete(u.Object["metadata"].(map[string]any), "creationTimestamp")
	return u, nil
}

// contains reports whether have holds everything in want: equal scalars,
// lists of the same length whose items contain want's, and maps with every
// key of want (extra keys in have, such as CRD defaults, are allowed).
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if !contains(h[k], wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	}
	return equality.Semantic.DeepEqual(have, want)
}

func ptr[T any](v T) *T { return &v }
