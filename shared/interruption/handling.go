package interruption

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Action is what nodewright does to the NodeClaim of an instance an event
// names.
type Action string

const (
	// ActionNone acknowledges the event and does nothing.
	ActionNone Action = "None"
	// ActionRecordOnly records the kind's event on the NodeClaim and Node
	// and changes nothing.
	ActionRecordOnly Action = "RecordOnly"
	// ActionCordonAndDrain starts the interruption execution, which taints
	// and drains the node at once (no disruption budget, no waiting for a
	// replacement) and then terminates it; Karpenter deletes the NodeClaim,
	// which goes through the same taint-and-drain termination.
	ActionCordonAndDrain Action = "CordonAndDrain"
)

// Mark is what an event makes unavailable to the next launches, for
// Karpenter's unavailable-offerings TTL (3 minutes).
type Mark string

const (
	// MarkNone marks nothing.
	MarkNone Mark = ""
	// MarkSpotOffering marks the (spot, instance type, zone) offering of the
	// interrupted NodeClaim.
	MarkSpotOffering Mark = "SpotOffering"
	// MarkReservation marks the capacity reservation the NodeClaim was
	// launched into.
	MarkReservation Mark = "Reservation"
)

// Kubernetes event types.
const (
	EventTypeNormal  = "Normal"
	EventTypeWarning = "Warning"
)

// Notice is a Kubernetes event to record on the NodeClaim and its Node.
type Notice struct {
	// Type is EventTypeNormal or EventTypeWarning.
	Type string
	// Reason is Karpenter's event reason (karpenter-spec.md section 10.2).
	Reason string
	// Message is the event's text.
	Message string
}

// Event reasons of the interruption controller (karpenter-spec.md section
// 10.2, AWS provider).
const (
	ReasonSpotInterrupted                        = "SpotInterrupted"
	ReasonSpotRebalanceRecommendation            = "SpotRebalanceRecommendation"
	ReasonInstanceUnhealthy                      = "InstanceUnhealthy"
	ReasonInstanceStopping                       = "InstanceStopping"
	ReasonInstanceTerminating                    = "InstanceTerminating"
	ReasonCapacityReservationInstanceInterrupted = "CapacityReservationInstanceInterrupted"
	ReasonTerminatingOnInterruption              = "TerminatingOnInterruption"
)

// Handling is nodewright's response to one Kind.
type Handling struct {
	Action Action
	Mark   Mark
	// Notice is the event recorded on the NodeClaim of every instance the
	// event names, also when the NodeClaim is already being deleted (then
	// only the action is skipped, as in Karpenter). Zero for ActionNone.
	Notice Notice
}

// TerminatingNotice is the event recorded, after the kind's Notice, on a
// NodeClaim whose interruption execution is started (Karpenter's
// TerminatingOnInterruption).
func TerminatingNotice() Notice {
	return Notice{EventTypeWarning, ReasonTerminatingOnInterruption, "Interruption: the node is drained and terminated"}
}

// handlings is Karpenter's action table (karpenter-spec.md section 8.2;
// checklist items 33-35). It is never modified.
var handlings = map[Kind]Handling{
	KindSpotInterruption: {ActionCordonAndDrain, MarkSpotOffering,
		Notice{EventTypeWarning, ReasonSpotInterrupted, "EC2 sent a Spot interruption warning: the instance is reclaimed within two minutes"}},
	KindRebalanceRecommendation: {ActionRecordOnly, MarkNone,
		Notice{EventTypeNormal, ReasonSpotRebalanceRecommendation, "EC2 recommends rebalancing: the Spot instance is at elevated risk of interruption"}},
	KindScheduledChange: {ActionCordonAndDrain, MarkNone,
		Notice{EventTypeWarning, ReasonInstanceUnhealthy, "AWS Health scheduled a change (retirement, reboot or maintenance) for the instance"}},
	KindInstanceStopped: {ActionCordonAndDrain, MarkNone,
		Notice{EventTypeWarning, ReasonInstanceStopping, "The instance is stopping or stopped"}},
	KindInstanceTerminated: {ActionCordonAndDrain, MarkNone,
		Notice{EventTypeWarning, ReasonInstanceTerminating, "The instance is shutting down or terminated"}},
	KindCapacityReservationInterruption: {ActionCordonAndDrain, MarkReservation,
		Notice{EventTypeWarning, ReasonCapacityReservationInstanceInterrupted, "The capacity reservation's owner is reclaiming the instance within two minutes"}},
	KindNoOp: {Action: ActionNone},
}

// Handling returns the response to k, an EventBridge kind or one of
// StatusKinds. An unknown Kind gets ActionNone.
func (k Kind) Handling() Handling {
	if h, ok := handlings[k]; ok {
		return h
	}
	if h, ok := statusHandlings[k]; ok {
		return h
	}
	return Handling{Action: ActionNone}
}

// MaxExecutionNameLength is Step Functions' limit on execution names
// (StartExecution name: 1 to 80 characters).
const MaxExecutionNameLength = 80

const (
	executionPrefix = "interrupt-"
	executionHash   = 12 // hexadecimal digits
)

// ExecutionName names the interruption execution of nodeClaim for the event
// eventID: "interrupt-<nodeclaim>-<12 hex digits>", at most
// MaxExecutionNameLength characters. The digits are the start of the
// SHA-256 of the event id and the NodeClaim name (one AWS Health event can
// name several instances, so the event id alone would not do). Characters
// outside [A-Za-z0-9_-] become '-' (Step Functions forbids some and
// CloudWatch logging accepts only these), and a long NodeClaim name is cut,
// which the digits keep unique. The same inputs always give the same name,
// so a redelivered event finds its execution already started.
func ExecutionName(nodeClaim, eventID string) string {
	sum := sha256.Sum256([]byte(eventID + "\x00" + nodeClaim))
	digits := hex.EncodeToString(sum[:])[:executionHash]
	var b strings.Builder
	room := MaxExecutionNameLength - len(executionPrefix) - 1 - executionHash
	for _, r := range nodeClaim {
		if b.Len() == room {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return executionPrefix + b.String() + "-" + digits
}
