// Package events writes the forwarder's Kubernetes Events. Relay
// (records.go) writes the API's event records (GET /v1/events: what the
// Lambdas record, such as the interruption Lambda's SpotInterrupted) on
// Nodes and NodeClaims. Emitter turns the API's answer about a pod batch
// into Events on the pods, worded as Karpenter words them
// (karpenter: pkg/controllers/provisioning/scheduling/events.go):
//
//   - Nominated (Normal): "Pod should schedule on: nodeclaim/<name>" or
//     "node/<name>", for a pod the solver placed;
//   - FailedScheduling (Warning): "Failed to schedule pod, <reason>", with
//     the solver's reason, for a pod it could not place.
//
// An identical event for the same pod is not repeated within DedupeWindow
// (Karpenter's recorder deduplicates for 2 minutes), so the 10 s re-trigger of
// pending pods does not flood the pods' event lists.
package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Event reasons (karpenter: pkg/events/reason.go).
const (
	ReasonNominated        = "Nominated"
	ReasonFailedScheduling = "FailedScheduling"
)

// Component is the source component and reporting controller of every event.
const Component = "nodewright-forwarder"

// DedupeWindow is how long an identical event for one pod is suppressed.
const DedupeWindow = 2 * time.Minute

// Emitter creates pod Events. It is safe for use by one goroutine.
type Emitter struct {
	client   corev1client.EventsGetter
	now      func() time.Time
	instance string
	sent     map[dedupeKey]time.Time
}

type dedupeKey struct {
	uid             types.UID
	reason, message string
}

// New returns an Emitter that writes through client, stamps events with now
// and names instance (this replica's pod name) as the reporting instance.
func New(client corev1client.EventsGetter, now func() time.Time, instance string) *Emitter {
	return &Emitter{client: client, now: now, instance: instance, sent: map[dedupeKey]time.Time{}}
}

// Emit writes the events for a Solved result. pods are the batch's pods by
// UID; a UID the result names but pods lack is skipped, as are results in
// any other state. It returns how many events it created and every create
// error, joined.
func (e *Emitter) Emit(ctx context.Context, result v1.PodBatchResult, pods map[types.UID]v1.PodSummary) (int, error) {
	if result.State != v1.BatchSolved {
		return 0, nil
	}
	now := e.now()
	for k, at := range e.sent {
		if now.Sub(at) >= DedupeWindow {
			delete(e.sent, k)
		}
	}
	type pending struct {
		pod                   v1.PodSummary
		kind, reason, message string
	}
	var todo []pending
	for uid, n := range result.Nominations {
		p, ok := pods[uid]
		if !ok {
			continue
		}
		var on []string
		if n.NodeClaim != "" {
			on = append(on, "nodeclaim/"+n.NodeClaim)
		}
		if n.Node != "" {
			on = append(on, "node/"+n.Node)
		}
		if len(on) == 0 {
			continue
		}
		todo = append(todo, pending{p, corev1.EventTypeNormal, ReasonNominated, "Pod should schedule on: " + strings.Join(on, ", ")})
	}
	for uid, reason := range result.Unschedulable {
		p, ok := pods[uid]
		if !ok {
			continue
		}
		todo = append(todo, pending{p, corev1.EventTypeWarning, ReasonFailedScheduling, "Failed to schedule pod, " + reason})
	}
	slices.SortFunc(todo, func(a, b pending) int {
		return cmp.Or(cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})

	var created int
	var errs []error
	for _, t := range todo {
		k := dedupeKey{uid: t.pod.UID, reason: t.reason, message: t.message}
		if _, dup := e.sent[k]; dup {
			continue
		}
		ev := e.event(t.pod, t.kind, t.reason, t.message, now)
		if _, err := e.client.Events(t.pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("create %s event for pod %s/%s: %w", t.reason, t.pod.Namespace, t.pod.Name, err))
			continue
		}
		e.sent[k] = now
		created++
	}
	return created, errors.Join(errs...)
}

func (e *Emitter) event(p v1.PodSummary, kind, reason, message string, now time.Time) *corev1.Event {
	// client-go's recorder names events <object>.<unix nanos in hex>.
	return newEvent(fmt.Sprintf("%s.%x", p.Name, now.UnixNano()), p.Namespace,
		corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		kind, reason, message, metav1.NewTime(now), e.instance)
}

// newEvent is an Event of the forwarder (Component) about ref, first and
// last seen at ts, reported by instance.
func newEvent(name, namespace string, ref corev1.ObjectReference, kind, reason, message string, ts metav1.Time, instance string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: namespace},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Type:                kind,
		Source:              corev1.EventSource{Component: Component},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		ReportingController: Component,
		ReportingInstance:   instance,
	}
}
