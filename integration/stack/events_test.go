package stack_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

// TestEventRecordsBecomeKubernetesEvents records two events as the
// interruption Lambda does (one naming the Node, one only the NodeClaim)
// and checks that the forwarder writes each as one Kubernetes Event on its
// object, with the object's UID so that `kubectl describe` shows it, and
// that a restarted forwarder (a new leader) does not write them again.
func TestEventRecordsBecomeKubernetesEvents(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s)
	ctx := t.Context()
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("inflate", 1, "1", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	eventually(t, s, 2*time.Minute, "a registered node", func(context.Context, stack.Status) bool {
		for _, n := range nodeList(t, s) {
			if n.Labels[v1.LabelRegistered] == "true" {
				node = n
				return true
			}
		}
		return false
	})
	var claimName string
	var claimUID types.UID
	eventually(t, s, time.Minute, "the node's NodeClaim mirror", func(ctx context.Context, _ stack.Status) bool {
		claims, err := s.Dynamic.Resource(stack.NodeClaimResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, c := range claims.Items {
			if name, _, _ := unstructured.NestedString(c.Object, "status", "nodeName"); name == node.Name {
				claimName, claimUID = c.GetName(), c.GetUID()
				return true
			}
		}
		return false
	})

	put := time.Now()
	records := []ddbstore.Event{
		{ID: "e2e-spot-interrupted", Time: put, Type: "Warning", Reason: "SpotInterrupted",
			Message: "EC2 sent a Spot interruption warning", NodeClaim: claimName, Node: node.Name},
		{ID: "e2e-rebalance", Time: put, Type: "Normal", Reason: "SpotRebalanceRecommendation",
			Message: "EC2 recommends rebalancing", NodeClaim: claimName},
	}
	for _, e := range records {
		if err := s.PutEvent(ctx, e, put); err != nil {
			t.Fatalf("PutEvent(%s) error = %v", e.ID, err)
		}
	}
	want := []seenEvent{
		{Reason: "SpotInterrupted", Type: "Warning", Object: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
		{Reason: "SpotRebalanceRecommendation", Type: "Normal", Object: corev1.ObjectReference{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claimName, UID: claimUID}},
	}
	// The forwarder polls event records with its 10 s NodeClaim sync; a
	// minute is a generous bound, not a measure of speed.
	waitEvents(t, s, time.Minute, "both records as events", want)
	t.Logf("event records to Kubernetes Events: %v (10 s poll)", time.Since(put).Round(10*time.Millisecond))

	// `kubectl describe node` selects by involvedObject name, kind and uid.
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node.Name, "involvedObject.uid": string(node.UID)}.AsSelector()
	described, err := s.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	if n := countReason(described.Items, "SpotInterrupted"); n != 1 {
		t.Errorf("events selected as kubectl describe node does: %d SpotInterrupted, want 1", n)
	}

	// A new leader lists the same records and must not write them again.
	// It relays the list in order, so once a record put after the restart
	// is an Event, the new leader has been through the first two.
	s.KillForwarder()
	if err := s.StartForwarder(); err != nil {
		t.Fatalf("StartForwarder() error = %v", err)
	}
	later := time.Now()
	terminating := ddbstore.Event{ID: "e2e-terminating", Time: later, Type: "Warning", Reason: "InstanceTerminating",
		Message: "The instance is shutting down or terminated", NodeClaim: claimName, Node: node.Name}
	if err := s.PutEvent(ctx, terminating, later); err != nil {
		t.Fatalf("PutEvent(%s) error = %v", terminating.ID, err)
	}
	want = append(want, seenEvent{Reason: "InstanceTerminating", Type: "Warning", Object: want[0].Object})
	waitEvents(t, s, time.Minute, "one event per record after a restart", want)
}

// seenEvent is an Event in the default namespace reduced to what the test
// checks.
type seenEvent struct {
	Reason, Type string
	Object       corev1.ObjectReference
}

// waitEvents waits until the forwarder's events on Nodes and NodeClaims
// are exactly want (in any order), failing t with the last list after timeout.
func waitEvents(t *testing.T, s *stack.Stack, timeout time.Duration, what string, want []seenEvent) {
	t.Helper()
	var diff string
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		evs, err := s.Kube.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []seenEvent
		for _, e := range evs.Items {
			if e.Source.Component != "nodewright-forwarder" || (e.InvolvedObject.Kind != "Node" && e.InvolvedObject.Kind != "NodeClaim") {
				continue
			}
			got = append(got, seenEvent{Reason: e.Reason, Type: e.Type, Object: e.InvolvedObject})
		}
		byReason := cmpopts.SortSlices(func(a, b seenEvent) bool { return a.Reason < b.Reason })
		if diff = cmp.Diff(want, got, byReason); diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (-want +got):\n%s", what, timeout, diff)
		}
	}
}

func countReason(evs []corev1.Event, reason string) int {
	n := 0
	for _, e := range evs {
		if e.Reason == reason {
			n++
		}
	}
	return n
}
