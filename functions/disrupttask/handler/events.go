package handler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/workflow"
)

// EventRecorder records event records for the forwarder to write as
// Kubernetes Events (*ddbstore.Store).
type EventRecorder interface {
	PutEvent(ctx context.Context, e ddbstore.Event, now time.Time, ttl time.Duration) error
}

var _ EventRecorder = (*ddbstore.Store)(nil)

// Event reasons the task records (karpenter: pkg/events/reason.go;
// karpenter-spec.md sections 5.2, 6.5 and 10.2).
const (
	ReasonDisruptionLaunching            = "DisruptionLaunching"
	ReasonDisruptionWaitingReadiness     = "DisruptionWaitingReadiness"
	ReasonDisruptionTerminating          = "DisruptionTerminating"
	ReasonEvicted                        = "Evicted"
	ReasonDisrupted                      = "Disrupted"
	ReasonFailedDraining                 = "FailedDraining"
	ReasonAwaitingVolumeDetachment       = "AwaitingVolumeDetachment"
	ReasonTerminationGracePeriodExpiring = "TerminationGracePeriodExpiring"
)

// eventWriters bounds the event records written at once.
const eventWriters = 8

// maxFailedPodsListed bounds the pods a FailedDraining message names.
const maxFailedPodsListed = 5

// stepEvents turns a step's output into the event records Karpenter's
// controllers would have emitted for it. Every ID is derived from the
// execution (st.ID, which a continuation keeps), the step and the object,
// so a retried or redelivered step rewrites the same records:
//
//   - LaunchReplacements: DisruptionLaunching on each replacement NodeClaim
//     (karpenter: disruption queue, "Launching NodeClaim: <reason>").
//   - CheckReplacements, not ready: DisruptionWaitingReadiness on each
//     replacement not yet initialized, once per execution.
//   - BeginTermination: DisruptionTerminating on each candidate's Node and
//     NodeClaim ("Disrupting Node: <reason>").
//
// These three come from Karpenter's disruption queue, so only the budgeted
// methods record them; expiration and interruption delete NodeClaims
// outside it. The drain's records come with every method:
//
//   - Drain: Evicted on each pod whose eviction the API accepted, once per
//     pod and execution; Disrupted on each pod deleted at its termination
//     deadline, once per pod and execution, and
//     TerminationGracePeriodExpiring on its Node, once per execution;
//     FailedDraining (Warning) on a Node whose evictions were refused or
//     failed in a round that made no progress, once per run of such rounds;
//     AwaitingVolumeDetachment on a Node waiting for its volumes, once per
//     execution (karpenter: node termination controller and its eviction
//     queue).
func stepEvents(step string, st workflow.DisruptionState, out any, now time.Time) []ddbstore.Event {
	var evs []ddbstore.Event
	add := func(e ddbstore.Event, id ...string) {
		e.ID = eventID(st.ID, id...)
		e.Time = now
		if e.Type == "" {
			e.Type = "Normal"
		}
		evs = append(evs, e)
	}
	queued := workflow.IsBudgetedMethod(st.Method)
	switch o := out.(type) {
	case workflow.LaunchOutput:
		if !queued {
			return nil
		}
		for _, r := range o.Replacements {
			add(ddbstore.Event{Reason: ReasonDisruptionLaunching, NodeClaim: r.NodeClaim,
				Message: "Launching NodeClaim: " + st.Method}, ReasonDisruptionLaunching, r.NodeClaim)
		}
	case workflow.ReadinessOutput:
		if !queued || o.Ready {
			return nil
		}
		for _, r := range o.Replacements {
			if r.Status == "Initialized" {
				continue
			}
			add(ddbstore.Event{Reason: ReasonDisruptionWaitingReadiness, NodeClaim: r.NodeClaim,
				Message: "Waiting on readiness to continue disruption"}, ReasonDisruptionWaitingReadiness, r.NodeClaim)
		}
	case workflow.NodesOutput:
		if step != workflow.StepBeginTermination || !queued {
			return nil
		}
		for _, n := range o.Nodes {
			msg := "Disrupting Node: " + st.Method
			if n.Node != "" {
				add(ddbstore.Event{Reason: ReasonDisruptionTerminating, NodeClaim: n.NodeClaim, Node: n.Node, Message: msg},
					ReasonDisruptionTerminating, "node", n.Node)
			}
			add(ddbstore.Event{Reason: ReasonDisruptionTerminating, NodeClaim: n.NodeClaim, Message: msg},
				ReasonDisruptionTerminating, "nodeclaim", n.NodeClaim)
		}
	case workflow.DrainOutput:
		for _, nd := range o.Nodes {
			evs = append(evs, drainEvents(st, o, nd, now)...)
		}
	}
	return evs
}

// drainEvents are the records of one node's drain round (see stepEvents).
func drainEvents(st workflow.DisruptionState, out workflow.DrainOutput, nd workflow.NodeDrain, now time.Time) []ddbstore.Event {
	var evs []ddbstore.Event
	add := func(e ddbstore.Event, id ...string) {
		e.ID, e.Time, e.NodeClaim, e.Node = eventID(st.ID, id...), now, nd.NodeClaim, nd.Node
		if e.Type == "" {
			e.Type = "Normal"
		}
		evs = append(evs, e)
	}
	var refused []string
	forced := false
	for _, a := range append(append([]workflow.PodAction{}, nd.Pods...), nd.Unlisted...) {
		podID := a.UID
		if podID == "" {
			podID = a.Pod
		}
		switch a.Action {
		case workflow.PodEvicted:
			add(ddbstore.Event{Reason: ReasonEvicted, Pod: a.Pod, PodUID: a.UID,
				Message: fmt.Sprintf("Evicted pod: node %s is being disrupted (%s)", nd.Node, st.Method)}, ReasonEvicted, podID)
		case workflow.PodDeleted:
			forced = true
			deadline := "its termination deadline"
			if nd.Deadline != nil {
				deadline = "the termination deadline " + nd.Deadline.UTC().Format(time.RFC3339)
			}
			add(ddbstore.Event{Reason: ReasonDisrupted, Pod: a.Pod, PodUID: a.UID, Message: fmt.Sprintf(
				"Deleting the pod to meet %s of node %s: granted %d s of its %d s terminationGracePeriodSeconds, bypassing its PodDisruptionBudget and the do-not-disrupt annotation",
				deadline, nd.Node, a.GraceSeconds, a.PodGraceSeconds)}, ReasonDisrupted, podID)
		case workflow.PodEvictionBlocked, workflow.PodEvictionFailed:
			if len(refused) < maxFailedPodsListed {
				refused = append(refused, fmt.Sprintf("%s: %s", a.Pod, a.Detail))
			}
		}
	}
	if forced && nd.Deadline != nil {
		add(ddbstore.Event{Reason: ReasonTerminationGracePeriodExpiring, Type: "Warning",
			Message: "All pods will be deleted by " + nd.Deadline.UTC().Format(time.RFC3339)},
			ReasonTerminationGracePeriodExpiring, nd.NodeClaim)
	}
	if len(refused) > 0 && out.Stalls > 0 {
		failing := nd.Counts[workflow.PodEvictionBlocked] + nd.Counts[workflow.PodEvictionFailed]
		// One record per run of rounds without progress: the run began
		// Stalls-1 rounds ago, in this execution or continuation.
		since := out.Round - out.Stalls + 1
		add(ddbstore.Event{Reason: ReasonFailedDraining, Type: "Warning", Message: fmt.Sprintf(
			"Failed to drain node, %d pod(s) could not be evicted: %s", failing, strings.Join(refused, "; "))},
			ReasonFailedDraining, nd.NodeClaim, fmt.Sprintf("c%d", st.Continuation), fmt.Sprintf("r%d", since))
	}
	if v := nd.Volumes; v != nil && v.Status == workflow.VolumesAwaitingDetachment {
		add(ddbstore.Event{Reason: ReasonAwaitingVolumeDetachment, Message: fmt.Sprintf(
			"Awaiting deletion of %d bound VolumeAttachment(s) (%s)", v.Remaining, strings.Join(v.Attachments, ", "))},
			ReasonAwaitingVolumeDetachment, nd.NodeClaim)
	}
	return evs
}

// eventID joins the execution and the parts that name one event of it.
// Record IDs may hold any character but '#'; a ':' separates the parts
// (execution names and Kubernetes names hold none).
func eventID(execution string, parts ...string) string {
	id := execution + ":" + strings.Join(parts, ":")
	return strings.ReplaceAll(id, "#", "_")
}

// recordEvents writes evs, eventWriters at a time. A failed write is
// logged and skipped: an event is best-effort and never fails the step.
func (h *Handler) recordEvents(ctx context.Context, step string, st workflow.DisruptionState, evs []ddbstore.Event, now time.Time) {
	if h.events == nil || len(evs) == 0 {
		return
	}
	var g errgroup.Group
	g.SetLimit(eventWriters)
	for _, e := range evs {
		g.Go(func() error {
			if err := h.events.PutEvent(ctx, e, now, ddbstore.EventTTL); err != nil {
				h.log.WarnContext(ctx, "event not recorded", "step", step, "execution", st.ID, "reason", e.Reason, "id", e.ID, "error", err)
			}
			return nil
		})
	}
	_ = g.Wait() // every write returns nil: a failed event is logged, not an error
}
