package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// KarpenterLeaseName is the Lease through which Karpenter's controller
// elects its leader, in the namespace it runs in (karpenter: pkg/operator,
// LeaderElectionID), whichever namespace its Helm chart was installed in:
// the forwarder looks for that name in every namespace.
const KarpenterLeaseName = "karpenter-leader-election"

// KarpenterActivityWindow is how long a change of one of Karpenter's
// NodeClaims (status, spec, finalizers, deletion) counts as a sign that its
// controller still runs. Karpenter's controller updates a live node's
// NodeClaim at least on each pod event (status.lastPodEventTime) and on every
// condition change.
const KarpenterActivityWindow = 2 * time.Minute

// minLeaseDuration is the least lease duration assumed: Karpenter's
// default is 15 s (controller-runtime's LeaseDuration).
const minLeaseDuration = 15 * time.Second

// ReasonKarpenterActive is the reason of the Event written on every
// NodePool while Karpenter's controller is active.
const ReasonKarpenterActive = "KarpenterActive"

// LeaseReader lists the Leases of a name in every namespace (the
// coordination/v1 client, a list with the field selector metadata.name=name,
// which RBAC's resourceNames admits); none is an empty list.
type LeaseReader interface {
	Leases(ctx context.Context, name string) ([]coordinationv1.Lease, error)
}

// karpenterWatch tells whether Karpenter's controller still runs: its
// Lease is held and was renewed within twice its duration (at least 15 s),
// or one of its NodeClaims changed within KarpenterActivityWindow. A Lease
// that cannot be read (other than not found) counts as active: two
// autoscalers must never fight. Safe for concurrent use.
type karpenterWatch struct {
	leases LeaseReader

	mu sync.Mutex
	// changed is when a foreign NodeClaim last changed, and which.
	changed     time.Time
	changedName string
	// since is when the current activity episode began (zero: inactive),
	// logged is when it was last logged.
	since, logged time.Time
}

// active returns why Karpenter's controller is believed to run at now, or
// "" when it is not.
func (w *karpenterWatch) active(ctx context.Context, now time.Time) string {
	if w == nil {
		return ""
	}
	var leases []coordinationv1.Lease
	if w.leases != nil {
		var err error
		if leases, err = w.leases.Leases(ctx, KarpenterLeaseName); err != nil {
			return fmt.Sprintf("its lease %s cannot be read: %v", KarpenterLeaseName, err)
		}
	}
	for _, l := range leases {
		ns := l.Namespace
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
			continue
		}
		d := minLeaseDuration
		if l.Spec.LeaseDurationSeconds != nil && time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second > d {
			d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		if age := now.Sub(l.Spec.RenewTime.Time); age < 2*d {
			return fmt.Sprintf("its lease %s/%s, held by %s, was renewed %s ago", ns, KarpenterLeaseName, *l.Spec.HolderIdentity, age.Round(time.Second))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.changed.IsZero() && now.Sub(w.changed) < KarpenterActivityWindow {
		return fmt.Sprintf("its NodeClaim %s changed %s ago", w.changedName, now.Sub(w.changed).Round(time.Second))
	}
	return ""
}

// episode records the state at now and returns when the current activity
// episode began and whether it should be logged now (at its start, then
// every 5 minutes).
func (w *karpenterWatch) episode(reason string, now time.Time) (since time.Time, log bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if reason == "" {
		w.since, w.logged = time.Time{}, time.Time{}
		return time.Time{}, false
	}
	if w.since.IsZero() {
		w.since = now
	}
	if w.logged.IsZero() || now.Sub(w.logged) >= 5*time.Minute {
		w.logged = now
		return w.since, true
	}
	return w.since, false
}

// handler notes changes of foreign NodeClaims, not those of the initial
// list.
func (w *karpenterWatch) handler(now func() time.Time) cache.ResourceEventHandler {
	note := func(name string) {
		w.mu.Lock()
		w.changed, w.changedName = now(), name
		w.mu.Unlock()
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if u, ok := obj.(*unstructured.Unstructured); ok && !initial && foreign(u) {
				note(u.GetName())
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 {
				return
			}
			if adopted(n) {
				if m := changedByOther(o, n); m != "" {
					note(n.GetName() + " (taken over, changed by " + m + ")")
				}
				return
			}
			if !foreign(o) || !foreign(n) {
				return
			}
			if !equality.Semantic.DeepEqual(withoutOwnConditions(o.Object["status"]), withoutOwnConditions(n.Object["status"])) ||
				!equality.Semantic.DeepEqual(o.Object["spec"], n.Object["spec"]) ||
				!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
				(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil) {
				note(n.GetName())
			}
		},
	}
}

// withoutOwnConditions returns a NodeClaim's status without the
// conditions the forwarder itself sets on Karpenter's NodeClaims
// (v1.ConditionTypeAdopted, see Forwarder.setConditions), so that its own
// write never counts as a sign of Karpenter's controller. status is not
// modified.
func withoutOwnConditions(status any) any {
	st, ok := status.(map[string]any)
	if !ok {
		return status
	}
	conds, ok := st["conditions"].([]any)
	if !ok {
		return status
	}
	out := make(map[string]any, len(st))
	for k, v := range st {
		out[k] = v
	}
	kept := make([]any, 0, len(conds))
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == v1.ConditionTypeAdopted {
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == 0 {
		delete(out, "conditions")
	} else {
		out["conditions"] = kept
	}
	return out
}

// foreign reports whether a NodeClaim object is not one of nodewright's
// mirrors.
func foreign(u *unstructured.Unstructured) bool { return u.GetLabels()[mirror.LabelMirror] != "true" }

// adopted reports whether a NodeClaim object is the Karpenter NodeClaim of
// an adopted node that nodewright took over as its mirror.
func adopted(u *unstructured.Unstructured) bool {
	return u.GetAnnotations()[v1.AnnotationAdoptedFrom] != ""
}

// changedByOther returns the field manager other than the forwarder's
// (mirror.FieldManager) whose write newer holds and older does not (a new
// managedFields entry, or a later time of an entry), or "" when every
// change between them is the forwarder's. Karpenter's controller writes
// its NodeClaims as the manager "karpenter".
func changedByOther(older, newer *unstructured.Unstructured) string {
	type key struct{ manager, operation, subresource string }
	before := map[key]time.Time{}
	for _, e := range older.GetManagedFields() {
		if e.Time != nil {
			before[key{e.Manager, string(e.Operation), e.Subresource}] = e.Time.Time
		}
	}
	for _, e := range newer.GetManagedFields() {
		if e.Manager == mirror.FieldManager || e.Time == nil {
			continue
		}
		if t, ok := before[key{e.Manager, string(e.Operation), e.Subresource}]; !ok || e.Time.After(t) {
			return e.Manager
		}
	}
	return ""
}

// foreignNodeClaims lists the cluster's NodeClaims that are not
// nodewright's mirrors, as the API's type, without managed fields.
func foreignNodeClaims(l ObjectLister) ([]v1.NodeClaim, error) {
	list, err := unstructuredList(l)
	if err != nil {
		return nil, err
	}
	var out []v1.NodeClaim
	for _, u := range list {
		if !foreign(u) {
			continue
		}
		data, err := u.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("nodeclaim %s: %w", u.GetName(), err)
		}
		var c v1.NodeClaim
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, fmt.Errorf("nodeclaim %s: %w", u.GetName(), err)
		}
		c.ManagedFields = nil
		out = append(out, c)
	}
	return out, nil
}

// karpenterRecords are the Events of an activity episode that began at
// since: one Warning per NodePool, the same IDs for the whole episode so
// that each is written once.
func karpenterRecords(pools ObjectLister, reason string, since time.Time) ([]v1.EventRecord, error) {
	objs, err := unstructuredList(pools)
	if err != nil {
		return nil, err
	}
	var out []v1.EventRecord
	for _, m := range objs {
		out = append(out, v1.EventRecord{
			ID:       "karpenter-active-" + m.GetName() + "-" + strconv.FormatInt(since.Unix(), 10),
			Time:     metav1.NewTime(since),
			Type:     "Warning",
			Reason:   ReasonKarpenterActive,
			Message:  "Karpenter's controller is active (" + reason + "): nodewright adopts no node and launches nothing for pending pods until it stops",
			NodePool: m.GetName(),
		})
	}
	return out, nil
}
