package interruption

import (
	"slices"
	"strings"
	"time"
)

// This file is the second half of Karpenter's interruption handling: the
// DescribeInstanceStatus poll, registered whether or not an interruption
// queue exists (karpenter-spec.md section 8.2; aws:
// pkg/controllers/interruption/instancestatus_controller.go and
// pkg/providers/instancestatus/instancestatus.go). EC2 does not send these
// as EventBridge events: a Lambda polls every minute, and DecideStatuses
// turns what it read into one StatusDecision per instance to act on.

// Kinds of the instance-status poll, named as Karpenter labels them
// (karpenter-spec.md section 8.2, the two "(poll)" rows).
const (
	// KindInstanceStatusImpaired: the instance's own status check
	// (reachability of the operating system) has failed for at least
	// UnhealthyThreshold. Handled forcefully.
	KindInstanceStatusImpaired Kind = "instance_status"
	// KindSystemStatusImpaired: the system status check (the AWS host,
	// network, power) has failed for at least UnhealthyThreshold. Handled
	// forcefully.
	KindSystemStatusImpaired Kind = "system_status"
	// KindScheduledEvent: EC2 scheduled one of ScheduledEventCodes for the
	// instance. Handled as a scheduled change: the NodeClaim is deleted.
	KindScheduledEvent Kind = "event_status"
)

// StatusKinds returns the poll's Kinds, sorted. Kinds lists those of
// EventBridge events.
func StatusKinds() []Kind {
	return []Kind{KindScheduledEvent, KindInstanceStatusImpaired, KindSystemStatusImpaired}
}

// ActionForcefulDrain starts the interruption execution with its
// termination deadline at the poll's time, so no grace is left: the drain
// deletes every pod at once (with the minimum grace period, do-not-disrupt
// pods too) and the instance is terminated without waiting for the drain.
// Karpenter annotates the NodeClaim's termination timestamp with the
// current time and deletes it (karpenter-spec.md section 8.2, "Forceful").
const ActionForcefulDrain Action = "ForcefulDrain"

// Forceful reports whether the handling leaves the node no grace
// (ActionForcefulDrain).
func (h Handling) Forceful() bool { return h.Action == ActionForcefulDrain }

// statusHandlings is the poll's rows of Karpenter's action table. Karpenter
// records no event of its own for these kinds, only TerminatingOnInterruption
// when it deletes the NodeClaim; the Notice is that event, with a message
// saying why. It is never modified.
var statusHandlings = map[Kind]Handling{
	KindInstanceStatusImpaired: {ActionForcefulDrain, MarkNone,
		Notice{EventTypeWarning, ReasonTerminatingOnInterruption, "Interruption: the instance status check has failed for 2 minutes or more; the node is drained and terminated without grace"}},
	KindSystemStatusImpaired: {ActionForcefulDrain, MarkNone,
		Notice{EventTypeWarning, ReasonTerminatingOnInterruption, "Interruption: the system status check has failed for 2 minutes or more; the node is drained and terminated without grace"}},
	KindScheduledEvent: {ActionCordonAndDrain, MarkNone,
		Notice{EventTypeWarning, ReasonTerminatingOnInterruption, "Interruption: EC2 scheduled a reboot, maintenance, retirement or stop of the instance; the node is drained and terminated"}},
}

// UnhealthyThreshold is how long a status check must have been failing
// before the poll acts (Karpenter's UnhealthyThreshold, 120 s).
const UnhealthyThreshold = 120 * time.Second

// CheckStatus is the status of one status check's detail, as
// DescribeInstanceStatus reports it (InstanceStatusDetails.Status).
type CheckStatus string

// Status-check detail statuses (EC2 StatusType).
const (
	CheckPassed           CheckStatus = "passed"
	CheckFailed           CheckStatus = "failed"
	CheckInsufficientData CheckStatus = "insufficient-data"
	CheckInitializing     CheckStatus = "initializing"
)

// StatusCheck is one of an instance's two status checks (its
// "reachability" detail).
type StatusCheck struct {
	// Status is the detail's status; empty when EC2 reported none.
	Status CheckStatus
	// ImpairedSince is when the check started failing
	// (InstanceStatusDetails.ImpairedSince); set only while Status is
	// CheckFailed. A failed check without it counts as failing since the
	// zero time, that is long enough (see DecideStatuses).
	ImpairedSince time.Time
}

// EventCode is the code of an EC2 scheduled event (EventCode).
type EventCode string

// Scheduled-event codes the poll acts on (Karpenter's instanceStatusFilters
// "event.code" values), and the one it does not.
const (
	EventInstanceReboot     EventCode = "instance-reboot"
	EventSystemReboot       EventCode = "system-reboot"
	EventSystemMaintenance  EventCode = "system-maintenance"
	EventInstanceRetirement EventCode = "instance-retirement"
	EventInstanceStop       EventCode = "instance-stop"
)

// ScheduledEventCodes returns the codes of the events the poll acts on, in
// Karpenter's order. The DescribeInstanceStatus filter event.code takes
// them as its values.
func ScheduledEventCodes() []EventCode {
	return []EventCode{EventInstanceReboot, EventSystemReboot, EventSystemMaintenance, EventInstanceRetirement, EventInstanceStop}
}

// ScheduledEvent is an event EC2 scheduled for an instance
// (InstanceStatusEvent).
type ScheduledEvent struct {
	// ID is the event's id, e.g. "instance-event-0d59937288b749b32"; may
	// be empty.
	ID string
	// Code is what EC2 will do.
	Code EventCode
	// Description is EC2's text; a finished event reads "[Completed] ...",
	// a cancelled one "[Canceled] ...".
	Description string
	// NotBefore is the earliest start of the event's window; zero when
	// unknown.
	NotBefore time.Time
}

// InstanceStatus is what DescribeInstanceStatus reports for one instance,
// less the EBS status check, which the poll ignores as Karpenter does (it
// cannot tell the node's volumes from the pods').
type InstanceStatus struct {
	// InstanceID is the EC2 instance, e.g. "i-0b8f7e6d5c4a39281".
	InstanceID string
	// Instance is the instance status check (the operating system).
	Instance StatusCheck
	// System is the system status check (the host).
	System StatusCheck
	// Events are the instance's scheduled events, every code.
	Events []ScheduledEvent
}

// StatusDecision is what the poll does about one instance: start the
// interruption execution of its NodeClaim with Kind.Handling().
type StatusDecision struct {
	InstanceID string
	// Kind is the reason: a failed status check before a scheduled event,
	// the instance's check before the system's when both failed at once.
	Kind Kind
	// Since is when the instance turned unhealthy: when the chosen check
	// started failing, or for a scheduled event the poll's time (Karpenter
	// takes the time it saw the event).
	Since time.Time
	// Deadline is the termination deadline to hand the interruption
	// execution (workflow.InterruptionInput.Deadline): the poll's time for
	// a forceful kind (no grace); for a scheduled event the earliest
	// not-before among the events acted on, or zero when none has one.
	Deadline time.Time
	// Key identifies the occurrence and names its execution
	// (ExecutionName(nodeClaim, Key)): the same failure or the same events
	// seen by the next poll give the same Key, so a repeated poll starts
	// one execution. A check that recovers and fails again is a new
	// occurrence. It contains no '#' and is at most a few hundred bytes.
	Key string
	// Events are the codes of the scheduled events acted on, sorted;
	// empty for a failed check.
	Events []EventCode
}

// DecideStatuses returns, in the order of statuses, a StatusDecision for
// every instance the poll must act on at now (karpenter-spec.md section
// 8.2):
//   - a status check (instance or system) whose detail is failed since at
//     least UnhealthyThreshold before now: forceful
//     (KindInstanceStatusImpaired or KindSystemStatusImpaired);
//   - otherwise, an event with one of ScheduledEventCodes, whatever its
//     window, as Karpenter treats any such event as a reason to vacate the
//     host at once (KindScheduledEvent). Karpenter does not read the
//     description either, so an event marked "[Completed]" or "[Canceled]"
//     still counts while EC2 lists it.
//
// Instances that are healthy, still inside the threshold, or only
// insufficient-data, initializing or EBS-impaired get no decision. An
// instance listed twice is decided once, on its first entry.
func DecideStatuses(statuses []InstanceStatus, now time.Time) []StatusDecision {
	var out []StatusDecision
	seen := map[string]bool{}
	for _, st := range statuses {
		if st.InstanceID == "" || seen[st.InstanceID] {
			continue
		}
		seen[st.InstanceID] = true
		if d, ok := decideStatus(st, now); ok {
			out = append(out, d)
		}
	}
	return out
}

func decideStatus(st InstanceStatus, now time.Time) (StatusDecision, bool) {
	type check struct {
		kind  Kind
		check StatusCheck
	}
	var failed *check
	for _, c := range []check{{KindInstanceStatusImpaired, st.Instance}, {KindSystemStatusImpaired, st.System}} {
		if !impaired(c.check, now) {
			continue
		}
		if failed == nil || c.check.ImpairedSince.Before(failed.check.ImpairedSince) {
			failed = &c
		}
	}
	if failed != nil {
		since := failed.check.ImpairedSince.UTC()
		return StatusDecision{
			InstanceID: st.InstanceID, Kind: failed.kind, Since: since, Deadline: now.UTC(),
			Key: string(failed.kind) + "/" + st.InstanceID + "/" + since.Format(time.RFC3339Nano),
		}, true
	}

	var codes []EventCode
	var ids []string
	var deadline time.Time
	for _, e := range st.Events {
		if !slices.Contains(ScheduledEventCodes(), e.Code) {
			continue
		}
		codes = append(codes, e.Code)
		id := e.ID
		if id == "" {
			id = string(e.Code) + "@" + e.NotBefore.UTC().Format(time.RFC3339)
		}
		ids = append(ids, id)
		if !e.NotBefore.IsZero() && (deadline.IsZero() || e.NotBefore.Before(deadline)) {
			deadline = e.NotBefore
		}
	}
	if len(codes) == 0 {
		return StatusDecision{}, false
	}
	slices.Sort(codes)
	codes = slices.Compact(codes)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if !deadline.IsZero() {
		deadline = deadline.UTC()
	}
	return StatusDecision{
		InstanceID: st.InstanceID, Kind: KindScheduledEvent, Since: now.UTC(), Deadline: deadline,
		Key: string(KindScheduledEvent) + "/" + st.InstanceID + "/" + strings.Join(ids, ","), Events: codes,
	}, true
}

// impaired reports whether c has failed for at least UnhealthyThreshold at
// now. A failed check that does not say since when is taken as failing
// since the zero time, so it counts, as Karpenter's threshold test on a
// missing ImpairedSince does.
func impaired(c StatusCheck, now time.Time) bool {
	return c.Status == CheckFailed && now.Sub(c.ImpairedSince) >= UnhealthyThreshold
}
