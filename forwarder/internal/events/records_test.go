package events_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/forwarder/internal/events"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// objects is the cluster as the relay looks it up: UIDs by "Kind/name".
// fail makes the next lookups fail.
type objects struct {
	uids map[string]types.UID
	fail int
}

func (o *objects) UID(_ context.Context, kind, name string) (types.UID, error) {
	if o.fail > 0 {
		o.fail--
		return "", errors.New("connection refused")
	}
	return o.uids[kind+"/"+name], nil
}

func cluster() *objects {
	return &objects{uids: map[string]types.UID{"Node/ip-10-0-0-1": "node-uid", "NodeClaim/default-abc": "claim-uid",
		"Pod/shop/web-1": "pod-uid", "NodePool/default": "pool-uid"}}
}

var recordTime = metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))

func record(id string, opts ...func(*v1.EventRecord)) v1.EventRecord {
	r := v1.EventRecord{ID: id, Time: recordTime, Type: "Warning", Reason: "SpotInterrupted",
		Message: "EC2 sent a Spot interruption warning", NodeClaim: "default-abc", Node: "ip-10-0-0-1"}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func noNode(r *v1.EventRecord) { r.Node = "" }

// onPod makes the record an Evicted about pod shop/web-1 of the node.
func onPod(r *v1.EventRecord) { r.Reason, r.Type, r.Pod = "Evicted", "Normal", "shop/web-1" }

// onPool makes the record a DisruptionBlocked about NodePool default only.
func onPool(r *v1.EventRecord) {
	r.Reason, r.Type, r.NodeClaim, r.Node, r.NodePool = "DisruptionBlocked", "Normal", "", "", "default"
}

// recorded is a record Event reduced to what the tests check.
type recorded struct {
	Name, Reason string
	Object       corev1.ObjectReference
}

func recordEvents(t *testing.T, client *fake.Clientset) []recorded {
	t.Helper()
	evs, err := client.CoreV1().Events(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []recorded
	for _, e := range evs.Items {
		if e.Namespace != metav1.NamespaceDefault && e.Namespace != e.InvolvedObject.Namespace {
			t.Errorf("event %s in namespace %s, want default or its object's %q", e.Name, e.Namespace, e.InvolvedObject.Namespace)
		}
		out = append(out, recorded{Name: e.Name, Reason: e.Reason, Object: e.InvolvedObject})
	}
	return out
}

func creates(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "events" {
			n++
		}
	}
	return n
}

var (
	nodeRef  = corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "ip-10-0-0-1", UID: "node-uid"}
	claimRef = corev1.ObjectReference{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "default-abc", UID: "claim-uid"}
	webRef   = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: "web-1", UID: "pod-uid"}
	poolRef  = corev1.ObjectReference{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "default", UID: "pool-uid"}
)

func TestRelay(t *testing.T) {
	// call is one Relay call: the API's list and what the call returns.
	type call struct {
		records     []v1.EventRecord
		wantCreated int
		wantErr     string // substring; "" for no error
	}
	tests := []struct {
		name string
		// prepare sets up the cluster before the calls.
		prepare     func(t *testing.T, client *fake.Clientset, objs *objects)
		calls       []call
		wantCreates int
		wantEvents  []recorded
	}{
		{
			name:        "should write the event on the Node when the record names one",
			calls:       []call{{records: []v1.EventRecord{record("r1")}, wantCreated: 1}},
			wantCreates: 1,
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted", Object: nodeRef}},
		},
		{
			name:        "should write the event on the NodeClaim when the record names no Node",
			calls:       []call{{records: []v1.EventRecord{record("r1", noNode)}, wantCreated: 1}},
			wantCreates: 1,
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted", Object: claimRef}},
		},
		{
			name:        "should write the event on the Pod when the record names one, before its Node",
			calls:       []call{{records: []v1.EventRecord{record("r1", onPod)}, wantCreated: 1}},
			wantCreates: 1,
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "Evicted", Object: webRef}},
		},
		{
			name: "should take the pod's UID from the record without looking it up",
			prepare: func(_ *testing.T, _ *fake.Clientset, objs *objects) {
				objs.fail = 1 // a lookup would fail the call
			},
			calls: []call{{records: []v1.EventRecord{record("r1", onPod, func(r *v1.EventRecord) {
				r.Pod, r.PodUID = "shop/web-gone", "gone-uid"
			})}, wantCreated: 1}},
			wantCreates: 1,
			wantEvents: []recorded{{Name: events.RecordEventName("r1"), Reason: "Evicted",
				Object: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: "web-gone", UID: "gone-uid"}}},
		},
		{
			name:        "should write the event on the NodePool when the record names only a NodePool",
			calls:       []call{{records: []v1.EventRecord{record("r1", onPool)}, wantCreated: 1}},
			wantCreates: 1,
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "DisruptionBlocked", Object: poolRef}},
		},
		{
			name: "should report a record without any object or with a malformed pod once and skip it",
			calls: []call{{records: []v1.EventRecord{
				record("none", func(r *v1.EventRecord) { r.NodeClaim, r.Node = "", "" }),
				record("pod", func(r *v1.EventRecord) { r.Pod = "web-1" }),
			}, wantErr: "event record none: one of nodeClaim, node, pod and nodePool: required"}},
		},
		{
			name:        "should write without a UID the event of an object the cluster does not have",
			calls:       []call{{records: []v1.EventRecord{record("r1", func(r *v1.EventRecord) { r.Node = "ip-10-0-9-9" })}, wantCreated: 1}},
			wantCreates: 1,
			wantEvents: []recorded{{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted",
				Object: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "ip-10-0-9-9"}}},
		},
		{
			name: "should write a record listed on every poll once",
			calls: []call{
				{records: []v1.EventRecord{record("r1")}, wantCreated: 1},
				{records: []v1.EventRecord{record("r1"), record("r2", noNode)}, wantCreated: 1},
				{records: []v1.EventRecord{record("r1"), record("r2", noNode)}},
			},
			wantCreates: 2,
			wantEvents: []recorded{
				{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted", Object: nodeRef},
				{Name: events.RecordEventName("r2"), Reason: "SpotInterrupted", Object: claimRef},
			},
		},
		{
			name: "should take an event another leader already wrote as done",
			prepare: func(t *testing.T, client *fake.Clientset, _ *objects) {
				ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: events.RecordEventName("r1"), Namespace: "default"}, Reason: "SpotInterrupted", InvolvedObject: nodeRef}
				if _, err := client.CoreV1().Events("default").Create(t.Context(), ev, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			calls: []call{
				{records: []v1.EventRecord{record("r1")}},
				{records: []v1.EventRecord{record("r1")}},
			},
			wantCreates: 2, // the prepared one and one AlreadyExists
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted", Object: nodeRef}},
		},
		{
			name: "should retry a record whose create failed",
			prepare: func(_ *testing.T, client *fake.Clientset, _ *objects) {
				failed := false
				client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
					if failed {
						return false, nil, nil
					}
					failed = true
					return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
				})
			},
			calls: []call{
				{records: []v1.EventRecord{record("r1")}, wantErr: "create SpotInterrupted event for record r1 on Node ip-10-0-0-1: etcd leader changed"},
				{records: []v1.EventRecord{record("r1")}, wantCreated: 1},
			},
			wantCreates: 2,
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted", Object: nodeRef}},
		},
		{
			name:    "should retry a record whose object could not be looked up",
			prepare: func(_ *testing.T, _ *fake.Clientset, objs *objects) { objs.fail = 1 },
			calls: []call{
				{records: []v1.EventRecord{record("r1")}, wantErr: "event record r1: look up Node ip-10-0-0-1: connection refused"},
				{records: []v1.EventRecord{record("r1")}, wantCreated: 1},
			},
			wantCreates: 1,
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted", Object: nodeRef}},
		},
		{
			name: "should report an invalid record once and skip it",
			calls: []call{
				{records: []v1.EventRecord{record("bad", func(r *v1.EventRecord) { r.Type = "Error" }), record("r1")}, wantCreated: 1, wantErr: `event record bad: type "Error", want Normal or Warning`},
				{records: []v1.EventRecord{record("bad", func(r *v1.EventRecord) { r.Type = "Error" }), record("r1")}},
			},
			wantCreates: 1,
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted", Object: nodeRef}},
		},
		{
			name: "should not write again a record the API stopped listing for less than its lifetime",
			calls: []call{
				{records: []v1.EventRecord{record("r1")}, wantCreated: 1},
				{records: nil},
				{records: []v1.EventRecord{record("r1")}}, // remembered: neither created nor counted again
			},
			wantCreates: 1,
			wantEvents:  []recorded{{Name: events.RecordEventName("r1"), Reason: "SpotInterrupted", Object: nodeRef}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			objs := cluster()
			if tt.prepare != nil {
				tt.prepare(t, client, objs)
			}
			r := events.NewRelay(client.CoreV1(), objs, func() time.Time { return epoch }, "forwarder-0")
			for i, c := range tt.calls {
				created, err := r.Relay(t.Context(), c.records)
				if created != c.wantCreated {
					t.Errorf("call %d: Relay() created %d, want %d", i, created, c.wantCreated)
				}
				switch {
				case c.wantErr == "" && err != nil:
					t.Errorf("call %d: Relay() error = %v, want nil", i, err)
				case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
					t.Errorf("call %d: Relay() error = %v, want one containing %q", i, err, c.wantErr)
				}
			}
			if got := creates(client); got != tt.wantCreates {
				t.Errorf("create calls = %d, want %d", got, tt.wantCreates)
			}
			if diff := cmp.Diff(tt.wantEvents, recordEvents(t, client)); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRelayWritesTheRecordAsAnEvent(t *testing.T) {
	client := fake.NewClientset()
	r := events.NewRelay(client.CoreV1(), cluster(), func() time.Time { return epoch }, "forwarder-0")
	untimed := record("r2", noNode)
	untimed.Time = metav1.Time{}
	untimed.Type, untimed.Reason, untimed.Message = "Normal", "SpotRebalanceRecommendation", "EC2 recommends rebalancing"
	if _, err := r.Relay(t.Context(), []v1.EventRecord{record("r1"), untimed}); err != nil {
		t.Fatal(err)
	}
	evs, err := client.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := metav1.NewTime(epoch)
	want := []corev1.Event{
		{
			ObjectMeta:     metav1.ObjectMeta{Name: events.RecordEventName("r1"), Namespace: "default"},
			InvolvedObject: nodeRef, Reason: "SpotInterrupted", Message: "EC2 sent a Spot interruption warning", Type: "Warning",
			Source: corev1.EventSource{Component: events.Component}, FirstTimestamp: recordTime, LastTimestamp: recordTime, Count: 1,
			ReportingController: events.Component, ReportingInstance: "forwarder-0",
		},
		{
			ObjectMeta:     metav1.ObjectMeta{Name: events.RecordEventName("r2"), Namespace: "default"},
			InvolvedObject: claimRef, Reason: "SpotRebalanceRecommendation", Message: "EC2 recommends rebalancing", Type: "Normal",
			Source: corev1.EventSource{Component: events.Component}, FirstTimestamp: at, LastTimestamp: at, Count: 1,
			ReportingController: events.Component, ReportingInstance: "forwarder-0",
		},
	}
	// The fake clientset sets the type and managed fields.
	ignore := cmp.Options{cmpopts.IgnoreFields(corev1.Event{}, "TypeMeta"), cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields")}
	if diff := cmp.Diff(want, evs.Items, ignore); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
}

func TestRelayCountsARepeatedRecordOnTheEventOfTheFirst(t *testing.T) {
	client := fake.NewClientset()
	r := events.NewRelay(client.CoreV1(), cluster(), func() time.Time { return epoch }, "forwarder-0")
	// The disruption Lambda records a still-blocked node again in its next
	// window: a new ID, the same object, reason and message.
	blocked := func(id string) v1.EventRecord {
		return record(id, func(r *v1.EventRecord) {
			r.Type, r.Reason, r.Message = "Normal", "DisruptionBlocked", `Cannot disrupt Node: pod shop/db-0 has karpenter.sh/do-not-disrupt: "true"`
		})
	}
	for i, recs := range [][]v1.EventRecord{{blocked("w1")}, {blocked("w1"), blocked("w2")}} {
		if n, err := r.Relay(t.Context(), recs); err != nil || n != 1 {
			t.Fatalf("call %d: Relay() = %d, %v; want 1 written", i, n, err)
		}
	}
	evs, err := client.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 {
		t.Fatalf("events = %d, want the repeat counted on the first one", len(evs.Items))
	}
	if got := evs.Items[0]; got.Name != events.RecordEventName("w1") || got.Count != 2 || got.InvolvedObject != nodeRef {
		t.Errorf("event = %s count %d on %+v, want %s count 2 on the Node", got.Name, got.Count, got.InvolvedObject, events.RecordEventName("w1"))
	}
	if got := creates(client); got != 1 {
		t.Errorf("create calls = %d, want 1 (the repeat is a patch)", got)
	}
}

func TestRelayCountsAConsistencyFindingOfEachScanOnOneEvent(t *testing.T) {
	client := fake.NewClientset()
	r := events.NewRelay(client.CoreV1(), cluster(), func() time.Time { return epoch }, "forwarder-0")
	// The disruption Lambda records a finding again every 10-minute scan:
	// a new ID, the same NodeClaim, reason and message.
	finding := func(id string) v1.EventRecord {
		return v1.EventRecord{ID: id, Type: "Warning", Reason: "FailedConsistencyCheck", NodeClaim: "default-abc",
			Message: "can't drain node, pod shop/db-0 is protected by PodDisruptionBudget shop/db (0 disruptions allowed)"}
	}
	for i, recs := range [][]v1.EventRecord{{finding("s1")}, {finding("s1"), finding("s2")}, {finding("s2"), finding("s3")}} {
		if n, err := r.Relay(t.Context(), recs); err != nil || n != 1 {
			t.Fatalf("call %d: Relay() = %d, %v; want 1 written", i, n, err)
		}
	}
	evs, err := client.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 {
		t.Fatalf("events = %d, want the repeats counted on the first one", len(evs.Items))
	}
	if got := evs.Items[0]; got.Count != 3 || got.Type != "Warning" || got.InvolvedObject != claimRef {
		t.Errorf("event = %s %s count %d on %+v, want a Warning counted 3 times on the NodeClaim", got.Name, got.Type, got.Count, got.InvolvedObject)
	}
}

func TestRecordEventName(t *testing.T) {
	tests := []struct {
		name string
		id   string
	}{
		{name: "should name a hexadecimal id", id: "3f2a9c0d5e6b7a8190a1b2c3d4e5f607"},
		{name: "should name an id with characters no object name allows", id: "Spot/Interrupted:i-0123 ÄÖ_*"},
		{name: "should name a 512-byte id", id: strings.Repeat("x", 512)},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := events.RecordEventName(tt.id)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("RecordEventName(%q) = %q, not an object name: %v", tt.id, got, errs)
			}
			if again := events.RecordEventName(tt.id); again != got {
				t.Errorf("RecordEventName(%q) = %q then %q, want the same name", tt.id, got, again)
			}
			if other, dup := seen[got]; dup {
				t.Errorf("RecordEventName(%q) = RecordEventName(%q) = %q", tt.id, other, got)
			}
			seen[got] = tt.id
		})
	}
}

func TestRelayWritesEachKarpenterReasonOnItsObject(t *testing.T) {
	tests := []struct {
		name string
		rec  v1.EventRecord
		want corev1.ObjectReference
	}{
		{name: "should write NoCompatibleInstanceTypes on the NodePool",
			rec:  v1.EventRecord{ID: "NoCompatibleInstanceTypes:default:20300102T0304", Type: "Warning", Reason: "NoCompatibleInstanceTypes", NodePool: "default", Message: "NodePool requirements filtered out all compatible available instance types"},
			want: poolRef},
		{name: "should write InsufficientCapacityError on the NodeClaim",
			rec:  v1.EventRecord{ID: "InsufficientCapacityError:default-abc", Type: "Warning", Reason: "InsufficientCapacityError", NodeClaim: "default-abc", Message: "NodeClaim default-abc event: no capacity"},
			want: claimRef},
		{name: "should write NodeClassNotReady on the NodeClaim",
			rec:  v1.EventRecord{ID: "NodeClassNotReady:default-abc", Type: "Warning", Reason: "NodeClassNotReady", NodeClaim: "default-abc", Message: `NodeClaim default-abc event: EC2NodeClass "default" is missing, invalid or not ready`},
			want: claimRef},
		{name: "should write the Node's DisruptionBlocked on the Node",
			rec:  v1.EventRecord{ID: "DisruptionBlocked:default-abc:w:1", Type: "Normal", Reason: "DisruptionBlocked", NodeClaim: "default-abc", Node: "ip-10-0-0-1", Message: "Cannot disrupt Node: pod shop/db-0 is protected by PodDisruptionBudget shop/db (0 disruptions allowed)"},
			want: nodeRef},
		{name: "should write the NodeClaim's DisruptionBlocked on the NodeClaim",
			rec:  v1.EventRecord{ID: "DisruptionBlocked:nodeclaim:default-abc:w:1", Type: "Normal", Reason: "DisruptionBlocked", NodeClaim: "default-abc", Message: "Cannot disrupt NodeClaim: pod shop/db-0 is protected by PodDisruptionBudget shop/db (0 disruptions allowed)"},
			want: claimRef},
		{name: "should write the NodeClaim's Unconsolidatable on the NodeClaim",
			rec:  v1.EventRecord{ID: "Unconsolidatable:nodeclaim:default-abc:w:1", Type: "Normal", Reason: "Unconsolidatable", NodeClaim: "default-abc", Message: "Can't replace with a cheaper node"},
			want: claimRef},
		{name: "should write the Node's ConsolidationCandidate on the Node",
			rec:  v1.EventRecord{ID: "ConsolidationCandidate:default-abc:w:1", Type: "Normal", Reason: "ConsolidationCandidate", NodeClaim: "default-abc", Node: "ip-10-0-0-1", Message: "Consolidation candidate: Underutilized/consolidate-default-abc-1234abcd: delete: nodepools=[default]: [ip-10-0-0-1] (savings: $0.19) (savings: $0.19)"},
			want: nodeRef},
		{name: "should write the NodeClaim's ConsolidationCandidate on the NodeClaim",
			rec:  v1.EventRecord{ID: "ConsolidationCandidate:nodeclaim:default-abc:w:1", Type: "Normal", Reason: "ConsolidationCandidate", NodeClaim: "default-abc", Message: "Consolidation candidate: Underutilized/consolidate-default-abc-1234abcd: delete: nodepools=[default]: [ip-10-0-0-1] (savings: $0.19) (savings: $0.19)"},
			want: claimRef},
		{name: "should write FailedConsistencyCheck on the NodeClaim",
			rec:  v1.EventRecord{ID: "FailedConsistencyCheck:nodeclaim:default-abc:w:1", Type: "Warning", Reason: "FailedConsistencyCheck", NodeClaim: "default-abc", Message: "expected 16Gi of resource memory, but found 8Gi (50.0% of expected)"},
			want: claimRef},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			r := events.NewRelay(client.CoreV1(), cluster(), func() time.Time { return epoch }, "forwarder-0")
			if n, err := r.Relay(t.Context(), []v1.EventRecord{tt.rec}); err != nil || n != 1 {
				t.Fatalf("Relay() = %d, %v; want 1 written", n, err)
			}
			want := []recorded{{Name: events.RecordEventName(tt.rec.ID), Reason: tt.rec.Reason, Object: tt.want}}
			if diff := cmp.Diff(want, recordEvents(t, client)); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
