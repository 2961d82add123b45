package ec2sim

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Status checks of an instance, as DescribeInstanceStatus reports them.
const (
	// CheckInstance is the instance status check (the operating system).
	CheckInstance = "instance"
	// CheckSystem is the system status check (the host).
	CheckSystem = "system"
)

// Summary statuses of a status check (EC2 SummaryStatus).
const (
	SummaryOK       = "ok"
	SummaryImpaired = "impaired"
)

// Scheduled-event codes EC2 can schedule for an instance (EC2 EventCode).
var scheduledEventCodes = []string{"instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"}

// instanceHealth is what the control API set on an instance's status: an
// instance not in Server.health passes both checks and has no events.
type instanceHealth struct {
	instanceImpairedSince, systemImpairedSince time.Time // zero: passing
	events                                     []ScheduledEvent
}

// ScheduledEvent is an event EC2 scheduled for an instance, reported by
// DescribeInstanceStatus (InstanceStatusEvent).
type ScheduledEvent struct {
	// ID is the event's id, "instance-event-" and 17 hex digits.
	ID string `json:"id"`
	// Code is one of instance-reboot, system-reboot, system-maintenance,
	// instance-retirement and instance-stop.
	Code        string    `json:"code"`
	Description string    `json:"description"`
	NotBefore   time.Time `json:"notBefore"`
	NotAfter    time.Time `json:"notAfter"`
}

// InstanceHealth is a snapshot of an instance's status checks and
// scheduled events.
type InstanceHealth struct {
	InstanceID string `json:"instanceId"`
	// InstanceStatus and SystemStatus are "ok" or "impaired".
	InstanceStatus string `json:"instanceStatus"`
	SystemStatus   string `json:"systemStatus"`
	// InstanceImpairedSince and SystemImpairedSince are when the check
	// started failing; nil while it passes.
	InstanceImpairedSince *time.Time       `json:"instanceImpairedSince,omitempty"`
	SystemImpairedSince   *time.Time       `json:"systemImpairedSince,omitempty"`
	Events                []ScheduledEvent `json:"events"`
}

// healthOf returns the live health record of id, creating it.
func (s *Server) healthOf(id string) *instanceHealth {
	if s.health == nil {
		s.health = map[string]*instanceHealth{}
	}
	h, ok := s.health[id]
	if !ok {
		h = &instanceHealth{}
		s.health[id] = h
	}
	return h
}

func (s *Server) healthSnapshot(id string) InstanceHealth {
	out := InstanceHealth{InstanceID: id, InstanceStatus: SummaryOK, SystemStatus: SummaryOK, Events: []ScheduledEvent{}}
	h := s.health[id]
	if h == nil {
		return out
	}
	if t := h.instanceImpairedSince; !t.IsZero() {
		out.InstanceStatus, out.InstanceImpairedSince = SummaryImpaired, &t
	}
	if t := h.systemImpairedSince; !t.IsZero() {
		out.SystemStatus, out.SystemImpairedSince = SummaryImpaired, &t
	}
	out.Events = append(out.Events, h.events...)
	return out
}

// runningInstance returns a pending or running instance, advancing the
// clock first; it fails for an unknown or terminating one.
func (s *Server) runningInstance(id string, now time.Time) (*instance, error) {
	s.advance(now)
	in, ok := s.instances[id]
	if !ok {
		return nil, fmt.Errorf("instance %s: not found", id)
	}
	if in.state != StatePending && in.state != StateRunning {
		return nil, fmt.Errorf("instance %s: %s, not pending or running", id, in.state)
	}
	return in, nil
}

// SetStatus makes one status check (CheckInstance or CheckSystem) of a
// pending or running instance impaired since since (the simulator clock's
// now when since is zero) when impaired is true, or passing again when it
// is false. Impairing a check already impaired keeps its first time, as EC2
// does. It returns the instance's health, and fails for an unknown check
// or an unknown or terminating instance.
func (s *Server) SetStatus(id, check string, impaired bool, since time.Time) (InstanceHealth, error) {
	s.mu.Lock()
	defer s.unlock()
	now := s.clock.Now()
	if _, err := s.runningInstance(id, now); err != nil {
		return InstanceHealth{}, err
	}
	if since.IsZero() {
		since = now
	}
	h := s.healthOf(id)
	var field *time.Time
	switch check {
	case CheckInstance:
		field = &h.instanceImpairedSince
	case CheckSystem:
		field = &h.systemImpairedSince
	default:
		return InstanceHealth{}, fmt.Errorf("check %q: want %q or %q", check, CheckInstance, CheckSystem)
	}
	switch {
	case !impaired:
		*field = time.Time{}
	case field.IsZero():
		*field = since.UTC()
	}
	return s.healthSnapshot(id), nil
}

// ScheduleEvent schedules an event with code (one of instance-reboot,
// system-reboot, system-maintenance, instance-retirement, instance-stop)
// for a pending or running instance, with a window from notBefore to a
// week later, and returns it. EC2 does not act on it: the simulator only
// reports it. It fails for an unknown code or an unknown or terminating
// instance.
func (s *Server) ScheduleEvent(id, code string, notBefore time.Time) (ScheduledEvent, error) {
	s.mu.Lock()
	defer s.unlock()
	if _, err := s.runningInstance(id, s.clock.Now()); err != nil {
		return ScheduledEvent{}, err
	}
	if !slices.Contains(scheduledEventCodes, code) {
		return ScheduledEvent{}, fmt.Errorf("event code %q: want one of %v", code, scheduledEventCodes)
	}
	h := s.healthOf(id)
	ev := ScheduledEvent{
		ID:          "instance-event-" + hashHex(fmt.Sprintf("%s/%s/%d", id, code, len(h.events)), 17),
		Code:        code,
		Description: eventDescriptions[code],
		NotBefore:   notBefore.UTC().Truncate(time.Second),
		NotAfter:    notBefore.UTC().Truncate(time.Second).Add(7 * 24 * time.Hour),
	}
	h.events = append(h.events, ev)
	return ev, nil
}

// InstanceHealth returns the status checks and events of an instance EC2
// still describes; ok is false otherwise.
func (s *Server) InstanceHealth(id string) (InstanceHealth, bool) {
	s.mu.Lock()
	defer s.unlock()
	s.advance(s.clock.Now())
	if _, ok := s.instances[id]; !ok {
		return InstanceHealth{}, false
	}
	return s.healthSnapshot(id), true
}

var eventDescriptions = map[string]string{
	"instance-reboot":     "The instance is scheduled for a reboot",
	"system-reboot":       "The system is scheduled for a reboot",
	"system-maintenance":  "The system is scheduled for maintenance",
	"instance-retirement": "The instance is running on degraded hardware",
	"instance-stop":       "The instance is scheduled to be stopped",
}

type statusDetailXML struct {
	Name          string `xml:"name"`
	Status        string `xml:"status"`
	ImpairedSince string `xml:"impairedSince,omitempty"`
}

type statusSummaryXML struct {
	Status  string            `xml:"status"`
	Details []statusDetailXML `xml:"details>item,omitempty"`
}

type statusEventXML struct {
	InstanceEventID string `xml:"instanceEventId"`
	Code            string `xml:"code"`
	Description     string `xml:"description"`
	NotBefore       string `xml:"notBefore"`
	NotAfter        string `xml:"notAfter"`
}

type instanceStatusXML struct {
	InstanceID         string           `xml:"instanceId"`
	AvailabilityZone   string           `xml:"availabilityZone"`
	AvailabilityZoneID string           `xml:"availabilityZoneId"`
	InstanceState      stateXML         `xml:"instanceState"`
	SystemStatus       statusSummaryXML `xml:"systemStatus"`
	InstanceStatus     statusSummaryXML `xml:"instanceStatus"`
	AttachedEbsStatus  statusSummaryXML `xml:"attachedEbsStatus"`
	Events             []statusEventXML `xml:"eventsSet>item,omitempty"`
}

type describeInstanceStatusResponse struct {
	respHeader
	InstanceStatuses []instanceStatusXML `xml:"instanceStatusSet>item"`
	NextToken        string              `xml:"nextToken,omitempty"`
}

// summary renders one status check of in, impaired since impairedSince
// (zero: passing). A pending instance's checks are initializing; an
// instance neither pending nor running has none to report.
func summary(in *instance, impairedSince time.Time) statusSummaryXML {
	switch {
	case in.state == StatePending:
		return statusSummaryXML{Status: "initializing", Details: []statusDetailXML{{Name: "reachability", Status: "initializing"}}}
	case in.state != StateRunning:
		return statusSummaryXML{Status: "not-applicable"}
	case !impairedSince.IsZero():
		return statusSummaryXML{Status: SummaryImpaired, Details: []statusDetailXML{{Name: "reachability", Status: "failed", ImpairedSince: timestamp(impairedSince)}}}
	}
	return statusSummaryXML{Status: SummaryOK, Details: []statusDetailXML{{Name: "reachability", Status: "passed"}}}
}

// describeInstanceStatus follows EC2 DescribeInstanceStatus: InstanceId.N
// (checked as DescribeInstances does; not with MaxResults), running
// instances only unless IncludeAllInstances is true, the filters below, and
// MaxResults/NextToken pagination (5 to 1000). The instance and system
// checks are ok unless SetStatus impaired them; the attached-EBS check is
// always ok.
func (s *Server) describeInstanceStatus(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"availability-zone", "instance-state-name", "instance-state-code",
		"instance-status.status", "instance-status.reachability", "system-status.status", "system-status.reachability",
		"event.code", "event.instance-event-id", "event.description"}, false)
	if err != nil {
		return nil, err
	}
	ids := q.strs("InstanceId")
	if len(ids) > 0 && q.has("MaxResults") {
		return nil, errorf("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	all, _, err := q.boolParam("IncludeAllInstances")
	if err != nil {
		return nil, err
	}
	var hits []instanceStatusXML
	for _, id := range s.order {
		in := s.instances[id]
		if len(ids) > 0 && !slices.Contains(ids, id) || !all && in.state != StateRunning {
			continue
		}
		var h instanceHealth
		if p := s.health[id]; p != nil {
			h = *p
		}
		x := instanceStatusXML{InstanceID: id, AvailabilityZone: in.zone, AvailabilityZoneID: in.zoneID, InstanceState: stateOf(in.state),
			SystemStatus: summary(in, h.systemImpairedSince), InstanceStatus: summary(in, h.instanceImpairedSince),
			AttachedEbsStatus: statusSummaryXML{Status: SummaryOK, Details: []statusDetailXML{{Name: "reachability", Status: "passed"}}}}
		if in.state != StateRunning {
			x.AttachedEbsStatus = statusSummaryXML{Status: "not-applicable"}
		}
		for _, e := range h.events {
			x.Events = append(x.Events, statusEventXML{InstanceEventID: e.ID, Code: e.Code, Description: e.Description,
				NotBefore: timestamp(e.NotBefore), NotAfter: timestamp(e.NotAfter)})
		}
		field := func(name string) []string {
			switch name {
			case "availability-zone":
				return []string{in.zone}
			case "instance-state-name":
				return []string{in.state}
			case "instance-state-code":
				return []string{strconv.Itoa(stateCodes[in.state])}
			case "instance-status.status":
				return []string{x.InstanceStatus.Status}
			case "system-status.status":
				return []string{x.SystemStatus.Status}
			case "instance-status.reachability":
				return detailStatuses(x.InstanceStatus)
			case "system-status.reachability":
				return detailStatuses(x.SystemStatus)
			}
			var out []string
			for _, e := range x.Events {
				switch name {
				case "event.code":
					out = append(out, e.Code)
				case "event.instance-event-id":
					out = append(out, e.InstanceEventID)
				case "event.description":
					out = append(out, e.Description)
				}
			}
			return out
		}
		if matches(filters, nil, field) {
			hits = append(hits, x)
		}
	}
	p, err := paginate(q, "DescribeInstanceStatus", len(hits), 5, 1000, 1000)
	if err != nil {
		return nil, err
	}
	return &describeInstanceStatusResponse{InstanceStatuses: hits[p.start:p.end], NextToken: p.next}, nil
}

func detailStatuses(x statusSummaryXML) []string {
	var out []string
	for _, d := range x.Details {
		out = append(out, d.Status)
	}
	return out
}

// serveStatusControl answers the status routes of the control API:
//
//	GET  /_sim/instances/{id}/status            InstanceHealth
//	POST /_sim/instances/{id}/status            {"check":"instance"|"system","impaired":bool,"since":RFC 3339 (optional)}: SetStatus
//	POST /_sim/instances/{id}/scheduled-events  {"code","notBefore":RFC 3339 (optional; default "in" after now),"in":Go duration (optional)}: ScheduleEvent
func (s *Server) serveStatusControl(w http.ResponseWriter, r *http.Request, id, route string) {
	switch {
	case route == "status" && r.Method == http.MethodGet:
		h, ok := s.InstanceHealth(id)
		if !ok {
			writeJSONError(w, http.StatusNotFound, fmt.Errorf("instance %s: not found", id))
			return
		}
		writeJSON(w, http.StatusOK, h)
	case route == "status" && r.Method == http.MethodPost:
		var in struct {
			Check    string    `json:"check"`
			Impaired bool      `json:"impaired"`
			Since    time.Time `json:"since"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		h, err := s.SetStatus(id, in.Check, in.Impaired, in.Since)
		if err != nil {
			writeJSONError(w, http.StatusConflict, err)
			return
		}
		writeJSON(w, http.StatusOK, h)
	case route == "scheduled-events" && r.Method == http.MethodPost:
		var in struct {
			Code      string    `json:"code"`
			NotBefore time.Time `json:"notBefore"`
			In        string    `json:"in"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		notBefore := in.NotBefore
		if notBefore.IsZero() {
			var d time.Duration
			if in.In != "" {
				var err error
				if d, err = time.ParseDuration(in.In); err != nil {
					writeJSONError(w, http.StatusBadRequest, fmt.Errorf("in %q: want a Go duration", in.In))
					return
				}
			}
			notBefore = s.clock.Now().Add(d)
		}
		ev, err := s.ScheduleEvent(id, in.Code, notBefore)
		if err != nil {
			writeJSONError(w, http.StatusConflict, err)
			return
		}
		writeJSON(w, http.StatusOK, ev)
	default:
		writeJSONError(w, http.StatusNotFound, fmt.Errorf("%s %s: no such control route", r.Method, r.URL.Path))
	}
}
