package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Kinds of the objects a record's Event is about.
const (
	KindNode      = "Node"
	KindNodeClaim = v1.KindNodeClaim
	KindPod       = "Pod"
	KindNodePool  = v1.KindNodePool
)

// karpenterAPIVersion is the apiVersion of NodeClaims and NodePools
// (karpenter.sh/v1).
var karpenterAPIVersion = v1.Group + "/v1"

// Objects finds the cluster UIDs of the objects record Events are about.
// `kubectl describe` selects an object's events by involvedObject.uid, so
// an Event without the UID is listed by `kubectl get events` but not
// described with its object.
type Objects interface {
	// UID returns the UID of the object of kind (KindNode, KindNodeClaim,
	// KindNodePool or KindPod) named name, or "" with a nil error when the
	// cluster has no such object. name is the object's cache key: its
	// name, or "<namespace>/<name>" for a Pod.
	UID(ctx context.Context, kind, name string) (types.UID, error)
}

// Relay writes the API's event records (v1.EventList: what the Lambdas
// record, such as the interruption Lambda's SpotInterrupted or the
// disruption tasks' Evicted) as Kubernetes Events, one Event per record, on
// the most specific object the record names: the Pod (kind Pod, apiVersion
// v1, in the pod's namespace), else the Node (kind Node, apiVersion v1),
// else the NodeClaim (the mirror, kind NodeClaim, apiVersion
// karpenter.sh/v1), else the NodePool (kind NodePool, apiVersion
// karpenter.sh/v1). Nodes, NodeClaims and NodePools are cluster-scoped, so
// their Events go to the "default" namespace, as client-go's recorder puts
// them. A Pod's UID is the record's when it carries one, since an evicted
// pod is often gone by the time its record is relayed. Events go through
// client-go's EventCorrelator, as the pod Events do (see the package doc):
// a record identical to one already relayed (same object, type, reason and
// message, such as a decision recorded again in its next window) is
// patched onto the Event written for the first, count + 1 and
// lastTimestamp moved, rather than created again, similar records beyond
// client-go's limits are aggregated, and a flood for one object is rate
// limited (a record the spam filter drops counts as done). A new Event's
// name is RecordEventName of the record ID, so a record listed again, or
// relayed again by the next leader (whose correlator starts empty), is
// created once: AlreadyExists counts as done. A Relay remembers
// the records it has written while the API still lists them, so a poll
// writes only new records. It is safe for use by one goroutine.
type Relay struct {
	w        *correlated
	objects  Objects
	now      func() time.Time
	instance string
	// done maps the IDs of records written (or given up on) to when the
	// API last listed them.
	done map[string]time.Time
}

// recordMemory is how long a Relay remembers a record the API stopped
// listing: the API keeps a record for at most an hour (the longest event
// record TTL of the Lambdas), so a record listed again within it is the
// same event, and is not counted twice by the correlator.
const recordMemory = time.Hour

// NewRelay returns a Relay that writes through client, looks UIDs up in
// objects, stamps a record without a time with now and names instance
// (this replica's pod name) as the reporting instance.
func NewRelay(client corev1client.EventsGetter, objects Objects, now func() time.Time, instance string) *Relay {
	return &Relay{w: newCorrelated(client, now), objects: objects, now: now, instance: instance, done: map[string]time.Time{}}
}

// Relay writes an Event for every record not written before, in order. It
// returns how many Events it wrote (created or counted) and every error, joined: a record
// without an ID, a reason or an object (NodeClaim, Node, Pod or
// NodePool), with a Pod that is not "<namespace>/<name>", or with a Type
// other than Normal or Warning, is reported once and skipped for good; a
// failed UID lookup or
// create is retried by the next call that lists the record. records are
// the API's whole current list: an ID it has not listed for recordMemory
// is forgotten.
func (r *Relay) Relay(ctx context.Context, records []v1.EventRecord) (int, error) {
	now := r.now()
	var created int
	var errs []error
	for _, rec := range records {
		if _, ok := r.done[rec.ID]; ok {
			r.done[rec.ID] = now
			continue
		}
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("relay event records: %w", ctx.Err()))
			break
		}
		if err := checkRecord(rec); err != nil {
			r.done[rec.ID] = now
			errs = append(errs, err)
			continue
		}
		ev, err := r.event(ctx, rec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		wrote, err := r.w.write(ev)
		switch {
		case err == nil:
			if wrote {
				created++
			}
		case apierrors.IsAlreadyExists(err):
		default:
			errs = append(errs, fmt.Errorf("create %s event for record %s on %s %s: %w",
				rec.Reason, rec.ID, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, err))
			continue
		}
		r.done[rec.ID] = now
	}
	for id, at := range r.done {
		if now.Sub(at) >= recordMemory {
			delete(r.done, id)
		}
	}
	return created, errors.Join(errs...)
}

func checkRecord(rec v1.EventRecord) error {
	switch {
	case rec.ID == "":
		return fmt.Errorf("event record of reason %q: id: required", rec.Reason)
	case rec.NodeClaim == "" && rec.Node == "" && rec.Pod == "" && rec.NodePool == "":
		return fmt.Errorf("event record %s: one of nodeClaim, node, pod and nodePool: required", rec.ID)
	case rec.Pod != "" && !podKey(rec.Pod):
		return fmt.Errorf("event record %s: pod %q: want <namespace>/<name>", rec.ID, rec.Pod)
	case rec.Reason == "":
		return fmt.Errorf("event record %s: reason: required", rec.ID)
	case rec.Type != corev1.EventTypeNormal && rec.Type != corev1.EventTypeWarning:
		return fmt.Errorf("event record %s: type %q, want Normal or Warning", rec.ID, rec.Type)
	}
	return nil
}

func podKey(key string) bool {
	ns, name, ok := strings.Cut(key, "/")
	return ok && ns != "" && name != "" && !strings.Contains(name, "/")
}

// involved is the object rec's Event is written on (see Relay), without
// its UID, and the namespace the Event goes to.
func involved(rec v1.EventRecord) (corev1.ObjectReference, string) {
	switch {
	case rec.Pod != "":
		ns, name, _ := strings.Cut(rec.Pod, "/")
		return corev1.ObjectReference{APIVersion: "v1", Kind: KindPod, Namespace: ns, Name: name, UID: rec.PodUID}, ns
	case rec.Node != "":
		return corev1.ObjectReference{APIVersion: "v1", Kind: KindNode, Name: rec.Node}, metav1.NamespaceDefault
	case rec.NodeClaim != "":
		return corev1.ObjectReference{APIVersion: karpenterAPIVersion, Kind: KindNodeClaim, Name: rec.NodeClaim}, metav1.NamespaceDefault
	}
	return corev1.ObjectReference{APIVersion: karpenterAPIVersion, Kind: KindNodePool, Name: rec.NodePool}, metav1.NamespaceDefault
}

// event builds the Event of rec, looking up its object's UID unless the
// record carries it.
func (r *Relay) event(ctx context.Context, rec v1.EventRecord) (*corev1.Event, error) {
	ref, namespace := involved(rec)
	if ref.UID == "" {
		key := ref.Name
		if ref.Namespace != "" {
			key = ref.Namespace + "/" + ref.Name
		}
		uid, err := r.objects.UID(ctx, ref.Kind, key)
		if err != nil {
			return nil, fmt.Errorf("event record %s: look up %s %s: %w", rec.ID, ref.Kind, key, err)
		}
		ref.UID = uid
	}
	ts := rec.Time
	if ts.IsZero() {
		ts = metav1.NewTime(r.now())
	}
	return newEvent(RecordEventName(rec.ID), namespace, ref, rec.Type, rec.Reason, rec.Message, ts, r.instance), nil
}

// RecordEventName is the name of the Event written for the record with
// this ID: "nodewright-record." and the first 32 hexadecimal digits of the
// ID's SHA-256. Record IDs may hold any character but '#' and run to 512
// bytes; the name is always a valid object name and the same for the same
// ID.
func RecordEventName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "nodewright-record." + hex.EncodeToString(sum[:16])
}
