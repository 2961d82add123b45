// Package events writes the forwarder's Kubernetes Events. Relay
// (records.go) writes the API's event records (GET /v1/sync or /v1/events: what the
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
// Repeats are deduplicated and counted by client-go's event machinery
// (k8s.io/client-go/tools/record.EventCorrelator, what every controller's
// recorder runs): an Event identical to one already written (same object,
// type, reason, message and source) is not created again but patched, its
// count incremented and lastTimestamp moved, so the 10 s re-trigger of
// pending pods shows as one Event with a count, as `kubectl describe pod`
// shows any controller's repeats; similar Events beyond client-go's limits
// are aggregated, and a flood from one object is rate limited (client-go's
// spam filter).
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Event reasons (karpenter: pkg/events/reason.go).
const (
	ReasonNominated        = "Nominated"
	ReasonFailedScheduling = "FailedScheduling"
)

// Component is the source component and reporting controller of every event.
const Component = "nodewright-forwarder"

// Emitter writes pod Events through client-go's EventCorrelator. It is
// safe for use by one goroutine.
type Emitter struct {
	w        *correlated
	now      func() time.Time
	instance string
}

// New returns an Emitter that writes through client, stamps events with now
// (also the correlator's clock) and names instance (this replica's pod
// name) as the reporting instance.
func New(client corev1client.EventsGetter, now func() time.Time, instance string) *Emitter {
	return &Emitter{w: newCorrelated(client, now), now: now, instance: instance}
}

// correlated writes Events through client-go's EventCorrelator. It is
// safe for concurrent use (the correlator locks its caches).
type correlated struct {
	sink       *corev1client.EventSinkImpl
	correlator *record.EventCorrelator
}

func newCorrelated(client corev1client.EventsGetter, now func() time.Time) *correlated {
	return &correlated{
		sink:       &corev1client.EventSinkImpl{Interface: client.Events(metav1.NamespaceAll)},
		correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: clockFunc(now)}),
	}
}

// clockFunc is now as client-go's clock.PassiveClock.
type clockFunc func() time.Time

func (c clockFunc) Now() time.Time                  { return c() }
func (c clockFunc) Since(t time.Time) time.Duration { return c().Sub(t) }

// Emit writes the events for a Solved result. pods are the batch's pods by
// UID; a UID the result names but pods lack is skipped, as are results in
// any other state. An event the correlator has seen is patched (count + 1)
// rather than created; one its spam filter drops is not written. It
// returns how many events it wrote (created or counted) and every write
// error, joined; an event that failed is written again by the next Emit.
func (e *Emitter) Emit(ctx context.Context, result v1.PodBatchResult, pods map[types.UID]v1.PodSummary) (int, error) {
	if result.State != v1.BatchSolved {
		return 0, nil
	}
	now := e.now()
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

	var written int
	var errs []error
	for _, t := range todo {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		ok, err := e.w.write(e.event(t.pod, t.kind, t.reason, t.message, now))
		if err != nil {
			errs = append(errs, fmt.Errorf("write %s event for pod %s/%s: %w", t.reason, t.pod.Namespace, t.pod.Name, err))
			continue
		}
		if ok {
			written++
		}
	}
	return written, errors.Join(errs...)
}

// write records ev as client-go's broadcaster does (tools/record
// recordToSink), synchronously: correlate, then patch the Event already
// written for a repeat or create a new one (also when the repeated Event
// is gone), and tell the correlator what the server returned. It reports
// false with a nil error for an event the spam filter dropped.
func (e *correlated) write(ev *corev1.Event) (bool, error) {
	res, err := e.correlator.EventCorrelate(ev)
	if err != nil {
		return false, err
	}
	if res.Skip {
		return false, nil
	}
	var got *corev1.Event
	repeat := res.Event.Count > 1
	if repeat {
		got, err = e.sink.Patch(res.Event, res.Patch)
	}
	if !repeat || apierrors.IsNotFound(err) {
		res.Event.ResourceVersion = ""
		got, err = e.sink.Create(res.Event)
	}
	if err != nil {
		return false, err
	}
	e.correlator.UpdateState(got)
	return true, nil
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
