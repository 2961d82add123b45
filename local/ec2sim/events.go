package ec2sim

import (
	"fmt"
	"time"
)

// Detail types and source of the EventBridge events the simulator emits
// (EC2 User Guide: "Spot Instance interruption notices", "EC2 instance
// rebalance recommendations", "Instance state change events").
const (
	EventSource                       = "aws.ec2"
	DetailTypeSpotInterruptionWarning = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalanceRecommendation = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange             = "EC2 Instance State-change Notification"
)

// Event is one EventBridge event in the shape EventBridge delivers to an
// SQS target: json.Marshal of an Event is the message body, with no
// wrapper (EventBridge User Guide, "Amazon EventBridge events"). Time is
// whole seconds in UTC, so it marshals as "2026-03-14T09:26:53Z".
type Event struct {
	Version    string    `json:"version"` // always "0"
	ID         string    `json:"id"`      // a UUID, unique per event
	DetailType string    `json:"detail-type"`
	Source     string    `json:"source"` // always "aws.ec2"
	Account    string    `json:"account"`
	Time       time.Time `json:"time"`
	Region     string    `json:"region"`
	// Resources holds the instance ARN
	// (arn:aws:ec2:<region>:<account>:instance/<id>).
	Resources []string `json:"resources"`
	// Detail is "instance-id" plus "instance-action" ("terminate") for a
	// Spot interruption warning or "state" for a state change.
	Detail map[string]string `json:"detail"`
}

// RebalanceRecommendation is an EC2 instance rebalance recommendation: a
// signal that a Spot instance is at elevated risk of interruption. It
// changes nothing in the simulator; only its event is emitted.
type RebalanceRecommendation struct {
	InstanceID string    `json:"instanceId"`
	Time       time.Time `json:"time"`
}

// EventSink receives the simulator's EventBridge events. It is called
// outside the simulator's lock, from whichever goroutine caused the event
// (a request, a control call, or a read that applied a due state change),
// so it must not block: hand the event to a buffered channel or a queue.
// Events of concurrent calls may arrive out of order, as EventBridge
// promises no order either.
type EventSink func(Event)

// SetEventSink makes the simulator emit EventBridge events to sink: a
// state-change notification for every instance state transition (pending
// at launch, running, shutting-down, terminated), a Spot interruption
// warning from InterruptSpot and a rebalance recommendation from
// RecommendRebalance. Transitions that are due on the simulator clock are
// applied, and so emitted, when the simulator is next called; the event's
// time is the transition's, not the call's. nil stops the events; events
// are not kept while no sink is set.
func (s *Server) SetEventSink(sink EventSink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sink = sink
}

// RecommendRebalance issues an EC2 instance rebalance recommendation for a
// pending or running Spot instance (it only emits the event: EC2 takes no
// action on its own). It fails for an unknown, on-demand or terminating
// instance.
func (s *Server) RecommendRebalance(id string) (RebalanceRecommendation, error) {
	s.mu.Lock()
	defer s.unlock()
	now := s.clock.Now()
	s.advance(now)
	in, ok := s.instances[id]
	if !ok {
		return RebalanceRecommendation{}, fmt.Errorf("instance %s: not found", id)
	}
	if in.capacityType != capacitySpot {
		return RebalanceRecommendation{}, fmt.Errorf("instance %s: %s, not spot", id, in.capacityType)
	}
	if in.state != StatePending && in.state != StateRunning {
		return RebalanceRecommendation{}, fmt.Errorf("instance %s: %s, not pending or running", id, in.state)
	}
	s.emit(DetailTypeRebalanceRecommendation, in.id, now, nil)
	return RebalanceRecommendation{InstanceID: id, Time: eventTime(now)}, nil
}

// setState moves an instance to state at time at and emits its
// state-change notification.
func (s *Server) setState(in *instance, state string, at time.Time) {
	in.state = state
	s.emit(DetailTypeStateChange, in.id, at, map[string]string{"state": state})
}

// emit queues an event for delivery when the lock is released (unlock).
// The caller holds s.mu. extra adds detail fields to "instance-id".
func (s *Server) emit(detailType, instanceID string, at time.Time, extra map[string]string) {
	if s.sink == nil {
		return
	}
	detail := map[string]string{"instance-id": instanceID}
	for k, v := range extra {
		detail[k] = v
	}
	s.outbox = append(s.outbox, Event{
		Version: "0", ID: s.newUUID("event"), DetailType: detailType, Source: EventSource, Account: s.accountID,
		Time: eventTime(at), Region: s.region,
		Resources: []string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.region, s.accountID, instanceID)},
		Detail:    detail,
	})
}

// unlock releases s.mu, then hands the events emitted while it was held to
// the sink, in order. Every method that may change an instance's state
// releases the lock with it.
func (s *Server) unlock() {
	events, sink := s.outbox, s.sink
	s.outbox = nil
	s.mu.Unlock()
	if sink == nil {
		return
	}
	for _, ev := range events {
		sink(ev)
	}
}

// eventTime is an EventBridge event time: whole seconds, UTC.
func eventTime(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }
