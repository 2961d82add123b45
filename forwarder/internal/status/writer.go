package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Resources the Writer reads and writes.
var (
	NodePoolsGVR   = schema.GroupVersionResource{Group: v1.Group, Version: "v1", Resource: "nodepools"}
	NodeClassesGVR = schema.GroupVersionResource{Group: v1.AWSGroup, Version: "v1", Resource: "ec2nodeclasses"}
	NodeClaimsGVR  = schema.GroupVersionResource{Group: v1.Group, Version: "v1", Resource: "nodeclaims"}
)

// Options configure a Writer. All are required.
type Options struct {
	// Dynamic writes the status subresources and lists NodeClaims.
	Dynamic dynamic.Interface
	// NodePools and NodeClasses are the informer listers of the two
	// kinds (unstructured objects).
	NodePools, NodeClasses cache.GenericLister
	// Nodes is the Node informer's lister.
	Nodes corelisters.NodeLister
	// Now is the clock of lastTransitionTime.
	Now func() time.Time
}

// Writer keeps NodePool and EC2NodeClass status up to date; its caller
// (the forwarder's API poll, forward.Forwarder) calls Sync with each
// answer of the API.
type Writer struct{ o Options }

// New returns a Writer, or an error naming a missing option.
func New(o Options) (*Writer, error) {
	if o.Dynamic == nil || o.NodePools == nil || o.NodeClasses == nil || o.Nodes == nil || o.Now == nil {
		return nil, errors.New("status writer: Dynamic, NodePools, NodeClasses, Nodes and Now are required")
	}
	return &Writer{o: o}, nil
}

// SyncResult counts the status subresources one Sync updated.
type SyncResult struct {
	NodePools, NodeClasses int
}

// Sync writes the EC2NodeClass status of classes (what the API resolved
// for each, GET v1.RouteSync or v1.RouteNodeClasses), then every NodePool's
// status, each only when it differs from the object's. It goes on after an
// error and returns them all, joined; a conflict (the object changed since
// the informer saw it) is retried by the next Sync.
func (w *Writer) Sync(ctx context.Context, classes []v1.NodeClassStatus) (SyncResult, error) {
	return w.sync(ctx, classes, true)
}

// SyncPools writes every NodePool's status only, as Sync does, leaving
// EC2NodeClass status alone: for when the API's resolutions are not known
// (its poll failed).
func (w *Writer) SyncPools(ctx context.Context) (SyncResult, error) {
	return w.sync(ctx, nil, false)
}

func (w *Writer) sync(ctx context.Context, resolved []v1.NodeClassStatus, known bool) (SyncResult, error) {
	var res SyncResult
	var errs []error
	now := w.o.Now()
	classObjs, err := w.o.NodeClasses.List(labels.Everything())
	if err != nil {
		return res, fmt.Errorf("list ec2nodeclasses: %w", err)
	}
	classes := map[string]*unstructured.Unstructured{}
	for _, o := range classObjs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			classes[u.GetName()] = u
		}
	}
	if known {
		n, err := w.syncClasses(ctx, classes, resolved, now)
		res.NodeClasses = n
		if err != nil {
			errs = append(errs, err)
		}
	}
	n, err := w.syncPools(ctx, classes, now)
	res.NodePools = n
	if err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

func (w *Writer) syncPools(ctx context.Context, classes map[string]*unstructured.Unstructured, now time.Time) (int, error) {
	poolObjs, err := w.o.NodePools.List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("list nodepools: %w", err)
	}
	if len(poolObjs) == 0 {
		return 0, nil
	}
	nodes, err := w.o.Nodes.List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	list, err := w.o.Dynamic.Resource(NodeClaimsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list nodeclaims: %w", err)
	}
	claims := make([]v1.NodeClaim, 0, len(list.Items))
	for i := range list.Items {
		var c v1.NodeClaim
		if err := convert(list.Items[i].Object, &c); err != nil {
			return 0, fmt.Errorf("nodeclaim %s: %w", list.Items[i].GetName(), err)
		}
		claims = append(claims, c)
	}
	var errs []error
	written := 0
	for _, o := range poolObjs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var np v1.NodePool
		if err := convert(u.Object, &np); err != nil {
			errs = append(errs, fmt.Errorf("nodepool %s: %w", u.GetName(), err))
			continue
		}
		want := PoolStatus(np, classState(np, classes), claims, nodes, now)
		changed, err := w.write(ctx, NodePoolsGVR, u, &np.Status, &want)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodepool %s: %w", u.GetName(), err))
		}
		if changed {
			written++
		}
	}
	return written, errors.Join(errs...)
}

// classState reads the EC2NodeClass np references; nil when it is missing.
func classState(np v1.NodePool, classes map[string]*unstructured.Unstructured) *ClassState {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return nil
	}
	u, ok := classes[ref.Name]
	if !ok {
		return nil
	}
	st := &ClassState{Generation: u.GetGeneration(), Deleting: u.GetDeletionTimestamp() != nil}
	var nc v1.EC2NodeClass
	if err := convert(u.Object, &nc); err == nil {
		if c := Find(nc.Status.Conditions, v1.ConditionTypeReady); c != nil {
			cc := *c
			st.Ready = &cc
		}
	}
	return st
}

// PoolStatus is np's whole status: PoolResources (also as status.nodes),
// PoolConditions and the class's generation.
func PoolStatus(np v1.NodePool, class *ClassState, claims []v1.NodeClaim, nodes []*corev1.Node, now time.Time) v1.NodePoolStatus {
	res := PoolResources(np.Name, claims, nodes)
	count := res.Name(ResourceNodes, "").Value()
	st := v1.NodePoolStatus{Resources: res, Nodes: &count, Conditions: PoolConditions(np, class, np.Status.Conditions, now)}
	if class != nil {
		st.NodeClassObservedGeneration = class.Generation
	}
	return st
}

// write updates u's status subresource to want unless cur (u's decoded
// status) already equals it. It reports whether it wrote.
func (w *Writer) write(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, cur, want any) (bool, error) {
	if equality.Semantic.DeepEqual(cur, want) {
		return false, nil
	}
	m, err := toMap(want)
	if err != nil {
		return false, err
	}
	obj := u.DeepCopy()
	obj.Object["status"] = m
	if _, err := w.o.Dynamic.Resource(gvr).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil // the informer will bring the new object
		}
		return false, fmt.Errorf("update status: %w", err)
	}
	return true, nil
}

// toMap encodes a status as an unstructured map.
func toMap(status any) (map[string]any, error) {
	raw, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("encode status: %w", err)
	}
	return m, nil
}

// convert decodes an unstructured object into a typed one through JSON
// (the v1 types have their own JSON decoding).
func convert(obj map[string]any, into any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}
