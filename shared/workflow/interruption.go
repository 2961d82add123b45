package workflow

import "time"

// InterruptionInput is the input of the interruption state machine, which
// the interruption Lambda starts once per (event, NodeClaim) under
// interruption.ExecutionName. The state machine taints and drains the node
// at once, with no disruption budget and without waiting for a replacement
// (pods that go pending are placed by the provisioner in parallel), evicts
// do-not-disrupt pods too, and terminates the instance: Karpenter's
// interruption path (karpenter-spec.md section 8.2). Its JSON field names
// are what the ASL reads ($.nodeClaim, $.deadline, ...).
type InterruptionInput struct {
	// NodeClaim is the name of the NodeClaim to delete.
	NodeClaim string `json:"nodeClaim"`
	// Node is the name of its Node; empty if the NodeClaim never
	// registered (then there is nothing to drain).
	Node string `json:"node,omitempty"`
	// InstanceID is the EC2 instance, e.g. "i-0b8f7e6d5c4a39281".
	InstanceID string `json:"instanceID"`
	// Reason is the interruption kind, as Karpenter labels its disruption
	// metrics: spot_interrupted, scheduled_change, instance_stopped,
	// instance_terminated or capacity_reservation_interrupted.
	Reason string `json:"reason"`
	// EventID is the EventBridge event id that caused the execution.
	EventID string `json:"eventID"`
	// Deadline is when the instance is expected to stop running (RFC 3339,
	// whole seconds, UTC): the drain should be over by then.
	Deadline time.Time `json:"deadline"`
	// EventTime is when the interruption happened: the EventBridge event's
	// time, or when the instance status check started failing (RFC 3339,
	// UTC); zero when unknown. The drain measures its time to first
	// eviction from it.
	EventTime time.Time `json:"eventTime,omitzero"`
}
