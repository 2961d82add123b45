// Package interruption models the EventBridge events that announce the loss
// of an EC2 instance, and decides what nodewright does about each. It follows
// Karpenter's interruption controller (karpenter-spec.md section 8.2; aws:
// pkg/controllers/interruption/controller.go and its messages/ parsers):
//
//   - Parse turns the body of an SQS message (an EventBridge event, delivered
//     as is) into a typed Message, through a registry of parsers keyed by
//     (source, detail-type, version). A body that names no registered event,
//     or does not decode, yields a *ParseError: the consumer acknowledges
//     and drops it, never retries it.
//   - A Message's Kind says what happened; Kind.Handling gives Karpenter's
//     response: the Action (CordonAndDrain, RecordOnly or None), what to mark
//     unavailable, and the Kubernetes event to record (TerminatingNotice
//     follows it when the interruption execution is started).
//   - ExecutionName names the interruption execution of one NodeClaim for
//     one event, so a redelivered event starts no second execution.
//
// The package imports the standard library only and never reads the clock:
// a Message's times come from the event itself.
package interruption

import (
	"errors"
	"fmt"
	"time"
)

// Kind is what an event reports, named as Karpenter labels
// karpenter_interruption_received_messages_total (karpenter-spec.md
// section 8.2).
type Kind string

// Kinds. KindNoOp is an event Parse understands and that calls for nothing:
// an instance entering the pending or running state, a Health event for
// another service or category.
const (
	KindSpotInterruption                Kind = "spot_interrupted"
	KindRebalanceRecommendation         Kind = "rebalance_recommendation"
	KindScheduledChange                 Kind = "scheduled_change"
	KindInstanceStopped                 Kind = "instance_stopped"
	KindInstanceTerminated              Kind = "instance_terminated"
	KindCapacityReservationInterruption Kind = "capacity_reservation_interrupted"
	KindNoOp                            Kind = "no_op"
)

// Kinds returns every Kind, sorted.
func Kinds() []Kind {
	return []Kind{
		KindCapacityReservationInterruption, KindInstanceStopped, KindInstanceTerminated,
		KindNoOp, KindRebalanceRecommendation, KindScheduledChange, KindSpotInterruption,
	}
}

// SpotWarningLead is how long before reclaiming a Spot instance EC2 sends
// the Spot Instance Interruption Warning (the "two-minute warning"; EC2
// User Guide, "Spot Instance interruption notices"). It is also the lead of
// the Capacity Reservation Instance Interruption Warning.
const SpotWarningLead = 2 * time.Minute

// Message is one parsed event. Exactly one of the detail pointers is set,
// the one matching DetailType.
type Message struct {
	// Kind is what the event reports.
	Kind Kind
	// EventID is the EventBridge event id (a UUID): the same event
	// delivered twice carries the same id.
	EventID string
	// Source and DetailType are the event's "source" and "detail-type".
	Source     string
	DetailType string
	// Account and Region are the event's "account" and "region".
	Account string
	Region  string
	// Time is the event's "time": when AWS emitted it.
	Time time.Time
	// InstanceIDs are the EC2 instances the event concerns, in event order
	// without duplicates; empty for KindNoOp.
	InstanceIDs []string
	// Deadline is when the instances are expected to stop running: the
	// reclaim time of a Spot or capacity-reservation warning, the start of
	// a scheduled change, the event time for a state change already under
	// way. Zero when nothing is going to happen (rebalance, no-op).
	Deadline time.Time

	Spot                *SpotInterruption
	Rebalance           *RebalanceRecommendation
	StateChange         *StateChange
	Health              *HealthEvent
	CapacityReservation *CapacityReservationInterruption
}

// SpotInterruption is the detail of an "EC2 Spot Instance Interruption
// Warning" (source aws.ec2).
type SpotInterruption struct {
	InstanceID string `json:"instance-id"`
	// InstanceAction is "terminate", "stop" or "hibernate"; Karpenter
	// handles all three alike.
	InstanceAction string `json:"instance-action"`
}

// RebalanceRecommendation is the detail of an "EC2 Instance Rebalance
// Recommendation" (source aws.ec2): the Spot instance is at elevated risk
// of interruption.
type RebalanceRecommendation struct {
	InstanceID string `json:"instance-id"`
}

// StateChange is the detail of an "EC2 Instance State-change Notification"
// (source aws.ec2).
type StateChange struct {
	InstanceID string `json:"instance-id"`
	// State is one of pending, running, stopping, stopped, shutting-down,
	// terminated.
	State string `json:"state"`
}

// HealthEvent is the detail of an "AWS Health Event" (source aws.health),
// reduced to the fields nodewright reads.
type HealthEvent struct {
	EventARN string `json:"eventArn"`
	// Service is the AWS service, e.g. "EC2".
	Service string `json:"service"`
	// EventTypeCode is e.g. "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".
	EventTypeCode string `json:"eventTypeCode"`
	// EventTypeCategory is "issue", "accountNotification",
	// "scheduledChange" or "investigation".
	EventTypeCategory string `json:"eventTypeCategory"`
	// StartTime and EndTime are as AWS Health writes them, in RFC 1123 form
	// ("Sat, 28 Jan 2023 01:43:21 GMT").
	StartTime string `json:"startTime"`
	EndTime   string `json:"endTime,omitempty"`
	// AffectedEntities are the resources concerned; for EC2 the entity
	// values are instance ids.
	AffectedEntities []AffectedEntity `json:"affectedEntities"`
}

// AffectedEntity is one resource named by a Health event.
type AffectedEntity struct {
	EntityValue string `json:"entityValue"`
	Status      string `json:"status,omitempty"`
}

// CapacityReservationInterruption is the detail of an "EC2 Capacity
// Reservation Instance Interruption Warning" (source aws.ec2): the owner of
// an interruptible capacity reservation reclaims it.
type CapacityReservationInterruption struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	// InstanceTerminationTime is when EC2 terminates the instance (RFC 3339).
	InstanceTerminationTime string `json:"instance-termination-time"`
	// AvailabilityZoneID is the zone id, e.g. "use1-az1".
	AvailabilityZoneID string `json:"azId,omitempty"`
}

// Errors wrapped by *ParseError. Compare with errors.Is.
var (
	// ErrUnknownEvent: no parser is registered for the event's (source,
	// detail-type, version).
	ErrUnknownEvent = errors.New("unknown event type")
	// ErrMalformed: the body is empty, is not an EventBridge event, or its
	// detail lacks what its type requires.
	ErrMalformed = errors.New("malformed event")
)

// ParseError reports a body that can never be handled. A consumer
// acknowledges such a message (and counts it) rather than letting the queue
// redeliver it: Karpenter deletes unparseable messages (karpenter-spec.md
// section 8.2, checklist item 35).
type ParseError struct {
	// EventID, Source, DetailType and Version are what could be read of
	// the envelope; empty when the body is not a JSON object.
	EventID    string
	Source     string
	DetailType string
	Version    string
	// Err wraps ErrUnknownEvent or ErrMalformed.
	Err error
}

func (e *ParseError) Error() string {
	if e.Source == "" && e.DetailType == "" {
		return fmt.Sprintf("parse event: %v", e.Err)
	}
	return fmt.Sprintf("parse event %q (source %q, detail-type %q, version %q): %v",
		e.EventID, e.Source, e.DetailType, e.Version, e.Err)
}

// Unwrap returns ErrUnknownEvent or ErrMalformed (wrapped with detail).
func (e *ParseError) Unwrap() error { return e.Err }
