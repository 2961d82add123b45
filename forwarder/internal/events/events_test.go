package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/forwarder/internal/events"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func summary(ns, name string) v1.PodSummary {
	return v1.PodSummary{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}
}

func batchPods() map[types.UID]v1.PodSummary {
	out := map[types.UID]v1.PodSummary{}
	for _, p := range []v1.PodSummary{summary("shop", "web-0"), summary("shop", "web-1"), summary("jobs", "etl-0")} {
		out[p.UID] = p
	}
	return out
}

func solved() v1.PodBatchResult {
	return v1.PodBatchResult{
		BatchID: "pb-1",
		State:   v1.BatchSolved,
		Nominations: map[types.UID]v1.Nomination{
			"uid-web-0": {NodeClaim: "default-x7k2m"},
			"uid-web-1": {Node: "ip-10-0-1-1.ec2.internal"},
			"uid-gone":  {Node: "ip-10-0-1-1.ec2.internal"},
		},
		Unschedulable: map[types.UID]string{
			"uid-etl-0": `incompatible with nodepool "default", no instance type satisfied resources {"cpu":"300"}`,
		},
	}
}

// seen is an event reduced to what the test checks.
type seen struct {
	Namespace, Name, Type, Reason, Message string
	Pod                                    corev1.ObjectReference
}

func list(t *testing.T, client *fake.Clientset) []seen {
	t.Helper()
	evs, err := client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []seen
	for _, e := range evs.Items {
		if e.Source.Component != events.Component || e.Count < 1 {
			t.Errorf("event %s/%s: source %q, count %d, first %v, last %v", e.Namespace, e.Name, e.Source.Component, e.Count, e.FirstTimestamp, e.LastTimestamp)
		}
		out = append(out, seen{Namespace: e.Namespace, Name: e.Name, Type: e.Type, Reason: e.Reason, Message: e.Message, Pod: e.InvolvedObject})
	}
	return out
}

func podRef(ns, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name, UID: types.UID("uid-" + name)}
}

func TestEmit(t *testing.T) {
	client := fake.NewClientset()
	now := epoch
	e := events.New(client.CoreV1(), func() time.Time { return now }, "forwarder-0")

	n, err := e.Emit(t.Context(), solved(), batchPods())
	if err != nil || n != 3 {
		t.Fatalf("Emit() = %d, %v; want 3 events", n, err)
	}
	want := []seen{
		{Namespace: "jobs", Name: "etl-0.18867251edfa0000", Type: corev1.EventTypeWarning, Reason: "FailedScheduling",
			Message: `Failed to schedule pod, incompatible with nodepool "default", no instance type satisfied resources {"cpu":"300"}`,
			Pod:     podRef("jobs", "etl-0")},
		{Namespace: "shop", Name: "web-0.18867251edfa0000", Type: corev1.EventTypeNormal, Reason: "Nominated",
			Message: "Pod should schedule on: nodeclaim/default-x7k2m", Pod: podRef("shop", "web-0")},
		{Namespace: "shop", Name: "web-1.18867251edfa0000", Type: corev1.EventTypeNormal, Reason: "Nominated",
			Message: "Pod should schedule on: node/ip-10-0-1-1.ec2.internal", Pod: podRef("shop", "web-1")},
	}
	if diff := cmp.Diff(want, list(t, client)); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}

	t.Run("should count an identical event on the Event already written, not create another", func(t *testing.T) {
		now = epoch.Add(30 * time.Second)
		if n, err := e.Emit(t.Context(), solved(), batchPods()); err != nil || n != 3 {
			t.Fatalf("Emit() again = %d, %v; want 3 events counted", n, err)
		}
		evs, err := client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs.Items) != 3 {
			t.Fatalf("events = %d, want the same 3", len(evs.Items))
		}
		for _, ev := range evs.Items {
			if ev.Count != 2 || !ev.FirstTimestamp.Time.Equal(epoch) || !ev.LastTimestamp.Time.Equal(now) {
				t.Errorf("event %s: count %d, first %v, last %v; want 2, %v, %v", ev.Name, ev.Count, ev.FirstTimestamp, ev.LastTimestamp, epoch, now)
			}
		}
	})
	t.Run("should emit a changed reason at once", func(t *testing.T) {
		r := solved()
		r.Nominations = nil
		r.Unschedulable = map[types.UID]string{"uid-etl-0": "all available instance types exceed limits for nodepool"}
		if n, err := e.Emit(t.Context(), r, batchPods()); err != nil || n != 1 {
			t.Errorf("Emit(new reason) = %d, %v; want 1", n, err)
		}
		if got := len(list(t, client)); got != 4 {
			t.Errorf("events = %d, want 4 (a new Event for the new message)", got)
		}
	})
}

// A flood of identical events for one pod is cut by client-go's spam
// filter (a token bucket per source and object: burst 25), so the 10 s
// re-trigger of a pod that stays pending cannot write without bound.
func TestEmitRateLimitsAFloodForOnePod(t *testing.T) {
	client := fake.NewClientset()
	now := epoch
	e := events.New(client.CoreV1(), func() time.Time { return now }, "forwarder-0")
	r := v1.PodBatchResult{BatchID: "pb", State: v1.BatchSolved, Unschedulable: map[types.UID]string{"uid-etl-0": "no instance type"}}
	var written int
	for i := range 40 {
		now = epoch.Add(time.Duration(i) * 10 * time.Second)
		n, err := e.Emit(t.Context(), r, batchPods())
		if err != nil {
			t.Fatal(err)
		}
		written += n
	}
	if written >= 40 || written < 25 {
		t.Errorf("events written for 40 identical answers in 400 s = %d, want client-go's burst (25) and a few refills", written)
	}
}

func TestEmitSkipsUnsolvedResults(t *testing.T) {
	for _, state := range []v1.BatchState{v1.BatchQueued, v1.BatchFailed} {
		t.Run(string(state), func(t *testing.T) {
			client := fake.NewClientset()
			r := solved()
			r.State = state
			n, err := events.New(client.CoreV1(), func() time.Time { return epoch }, "f").Emit(t.Context(), r, batchPods())
			if err != nil || n != 0 || len(list(t, client)) != 0 {
				t.Errorf("Emit(%s) = %d, %v; want nothing", state, n, err)
			}
		})
	}
}

func TestEmitReportsCreateErrors(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "jobs" {
			return true, nil, errors.New("forbidden")
		}
		return false, nil, nil
	})
	e := events.New(client.CoreV1(), func() time.Time { return epoch }, "f")
	n, err := e.Emit(context.Background(), solved(), batchPods())
	if err == nil || n != 2 {
		t.Fatalf("Emit() = %d, %v; want 2 events and an error", n, err)
	}
	// The written events are counted; the failed one is written again (and
	// fails again).
	if n, err := e.Emit(context.Background(), solved(), batchPods()); n != 2 || err == nil {
		t.Errorf("Emit() again = %d, %v; want 2 counted and the failing event retried", n, err)
	}
}
