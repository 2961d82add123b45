package interruption

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Event sources and detail types nodewright's EventBridge rules forward to
// the interruption queue (karpenter-spec.md section 8.1; aws:
// website/.../cloudformation.yaml).
const (
	SourceEC2    = "aws.ec2"
	SourceHealth = "aws.health"

	DetailTypeSpotInterruption                = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalanceRecommendation         = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange                     = "EC2 Instance State-change Notification"
	DetailTypeHealth                          = "AWS Health Event"
	DetailTypeCapacityReservationInterruption = "EC2 Capacity Reservation Instance Interruption Warning"
)

// EventVersion is the only envelope "version" EventBridge uses for these
// events, and the only one the parsers accept.
const EventVersion = "0"

// EventType identifies a registered event: one EventBridge rule pattern.
type EventType struct {
	Source     string
	DetailType string
}

// EventTypes returns the event types Parse understands, sorted by source
// then detail type. The infrastructure creates one EventBridge rule per
// entry, each targeting the interruption queue.
func EventTypes() []EventType {
	out := make([]EventType, 0, len(parsers))
	for k := range parsers {
		out = append(out, EventType{Source: k.source, DetailType: k.detailType})
	}
	slices.SortFunc(out, func(a, b EventType) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		return strings.Compare(a.DetailType, b.DetailType)
	})
	return out
}

// registryKey is what Karpenter's parser registry is keyed on
// (karpenter-spec.md section 8.2: version "0", source, detail-type).
type registryKey struct{ source, detailType, version string }

// parser decodes one event type's detail into m (whose envelope fields are
// set) and sets Kind, InstanceIDs and Deadline.
type parser func(m *Message, detail []byte) error

// parsers is the registry. It is never modified.
var parsers = map[registryKey]parser{
	{SourceEC2, DetailTypeSpotInterruption, EventVersion}:                parseSpotInterruption,
	{SourceEC2, DetailTypeRebalanceRecommendation, EventVersion}:         parseRebalance,
	{SourceEC2, DetailTypeStateChange, EventVersion}:                     parseStateChange,
	{SourceHealth, DetailTypeHealth, EventVersion}:                       parseHealth,
	{SourceEC2, DetailTypeCapacityReservationInterruption, EventVersion}: parseCapacityReservation,
}

// envelope is the EventBridge event structure common to every event
// (EventBridge User Guide, "Amazon EventBridge events"). resources is not
// read: instance ids come from the detail, as in Karpenter.
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Detail     json.RawMessage `json:"detail"`
}

// maxEventIDLength bounds the event id, which becomes part of storage keys.
// EventBridge ids are 36-character UUIDs.
const maxEventIDLength = 256

// instanceIDPattern is the EC2 instance id form: "i-" and 8 (older) or 17
// hexadecimal digits.
var instanceIDPattern = regexp.MustCompile(`^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$`)

// Parse decodes an SQS message body holding one EventBridge event. Unknown
// fields are ignored, since AWS adds fields over time. It returns a
// *ParseError wrapping ErrUnknownEvent when no parser is registered for the
// event's (source, detail-type, version), and ErrMalformed when the body is
// empty or not JSON, the envelope lacks id, source, detail-type or a valid
// RFC 3339 time, or the detail lacks a valid instance id where its type
// requires one.
func Parse(body []byte) (Message, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Message{}, &ParseError{Err: fmt.Errorf("empty body: %w", ErrMalformed)}
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Message{}, &ParseError{Err: fmt.Errorf("%w: %w", ErrMalformed, err)}
	}
	fail := func(err error) (Message, error) {
		return Message{}, &ParseError{EventID: env.ID, Source: env.Source, DetailType: env.DetailType, Version: env.Version, Err: err}
	}
	p, ok := parsers[registryKey{env.Source, env.DetailType, env.Version}]
	if !ok {
		return fail(ErrUnknownEvent)
	}
	switch {
	case env.ID == "":
		return fail(fmt.Errorf("%w: id is missing", ErrMalformed))
	case len(env.ID) > maxEventIDLength:
		return fail(fmt.Errorf("%w: id is %d bytes, at most %d", ErrMalformed, len(env.ID), maxEventIDLength))
	}
	at, err := time.Parse(time.RFC3339, env.Time)
	if err != nil {
		return fail(fmt.Errorf("%w: time %q is not RFC 3339", ErrMalformed, env.Time))
	}
	if len(env.Detail) == 0 || string(env.Detail) == "null" {
		return fail(fmt.Errorf("%w: detail is missing", ErrMalformed))
	}
	m := Message{
		EventID: env.ID, Source: env.Source, DetailType: env.DetailType,
		Account: env.Account, Region: env.Region, Time: at.UTC(),
	}
	if err := p(&m, env.Detail); err != nil {
		return fail(fmt.Errorf("%w: detail: %w", ErrMalformed, err))
	}
	return m, nil
}

func checkInstanceID(id string) error {
	if !instanceIDPattern.MatchString(id) {
		return fmt.Errorf("instance-id %q is not an EC2 instance id", id)
	}
	return nil
}

// parseSpotInterruption: Karpenter deletes the NodeClaim and marks the
// (spot, instance type, zone) offering unavailable.
func parseSpotInterruption(m *Message, detail []byte) error {
	var d SpotInterruption
	if err := json.Unmarshal(detail, &d); err != nil {
		return err
	}
	if err := checkInstanceID(d.InstanceID); err != nil {
		return err
	}
	m.Kind, m.Spot = KindSpotInterruption, &d
	m.InstanceIDs = []string{d.InstanceID}
	m.Deadline = m.Time.Add(SpotWarningLead)
	return nil
}

// parseRebalance: Karpenter records an event only.
func parseRebalance(m *Message, detail []byte) error {
	var d RebalanceRecommendation
	if err := json.Unmarshal(detail, &d); err != nil {
		return err
	}
	if err := checkInstanceID(d.InstanceID); err != nil {
		return err
	}
	m.Kind, m.Rebalance = KindRebalanceRecommendation, &d
	m.InstanceIDs = []string{d.InstanceID}
	return nil
}

// EC2 instance states (EC2 API InstanceState) and the kinds Karpenter gives
// them (aws: pkg/controllers/interruption/messages/statechange): stopping
// and stopped are instance_stopped, shutting-down and terminated are
// instance_terminated; any other state (pending, running) calls for
// nothing.
var stateKinds = map[string]Kind{
	"stopping":      KindInstanceStopped,
	"stopped":       KindInstanceStopped,
	"shutting-down": KindInstanceTerminated,
	"terminated":    KindInstanceTerminated,
}

func parseStateChange(m *Message, detail []byte) error {
	var d StateChange
	if err := json.Unmarshal(detail, &d); err != nil {
		return err
	}
	if err := checkInstanceID(d.InstanceID); err != nil {
		return err
	}
	kind, ok := stateKinds[d.State]
	if !ok {
		kind = KindNoOp
	}
	m.Kind, m.StateChange = kind, &d
	if kind != KindNoOp {
		m.InstanceIDs = []string{d.InstanceID}
		m.Deadline = m.Time
	}
	return nil
}

// Health event fields that make a scheduled change Karpenter acts on
// (karpenter-spec.md section 8.2; checklist item 34).
const (
	healthServiceEC2        = "EC2"
	healthCategoryScheduled = "scheduledChange"
)

// parseHealth: an EC2 scheduled change deletes the NodeClaim of every
// affected instance; any other Health event is a no-op. Entity values that
// are not instance ids (an EC2 scheduled change may name a Dedicated Host,
// "h-...") are skipped: they cannot be a NodeClaim's instance.
func parseHealth(m *Message, detail []byte) error {
	var d HealthEvent
	if err := json.Unmarshal(detail, &d); err != nil {
		return err
	}
	m.Health = &d
	if d.Service != healthServiceEC2 || d.EventTypeCategory != healthCategoryScheduled {
		m.Kind = KindNoOp
		return nil
	}
	m.Kind = KindScheduledChange
	for _, e := range d.AffectedEntities {
		if instanceIDPattern.MatchString(e.EntityValue) && !slices.Contains(m.InstanceIDs, e.EntityValue) {
			m.InstanceIDs = append(m.InstanceIDs, e.EntityValue)
		}
	}
	// The change starts at startTime; when AWS Health gives none (or one
	// already past), act as if it starts now.
	m.Deadline = m.Time
	if start, ok := parseHealthTime(d.StartTime); ok && start.After(m.Time) {
		m.Deadline = start
	}
	return nil
}

// parseHealthTime reads AWS Health's RFC 1123 times, and RFC 3339 for
// robustness.
func parseHealthTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC1123, time.RFC1123Z, time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// parseCapacityReservation: Karpenter deletes the NodeClaim and marks the
// reservation unavailable.
func parseCapacityReservation(m *Message, detail []byte) error {
	var d CapacityReservationInterruption
	if err := json.Unmarshal(detail, &d); err != nil {
		return err
	}
	if err := checkInstanceID(d.InstanceID); err != nil {
		return err
	}
	m.Kind, m.CapacityReservation = KindCapacityReservationInterruption, &d
	m.InstanceIDs = []string{d.InstanceID}
	m.Deadline = m.Time.Add(SpotWarningLead)
	if t, err := time.Parse(time.RFC3339, d.InstanceTerminationTime); err == nil {
		m.Deadline = t.UTC()
	}
	return nil
}
