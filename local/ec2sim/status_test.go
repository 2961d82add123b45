package ec2sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
)

// statusView is what a test reads of one DescribeInstanceStatus entry, as
// the real SDK client parsed it.
type statusView struct {
	ID, State                     string
	Instance, InstanceDetail      string
	InstanceSince                 time.Time
	System, SystemDetail          string
	SystemSince                   time.Time
	EBS                           string
	EventCodes, EventIDs          []string
	EventNotBefore, EventNotAfter []time.Time
}

func viewStatuses(out *ec2.DescribeInstanceStatusOutput) []statusView {
	var views []statusView
	for _, s := range out.InstanceStatuses {
		v := statusView{ID: aws.ToString(s.InstanceId), State: string(s.InstanceState.Name),
			Instance: string(s.InstanceStatus.Status), System: string(s.SystemStatus.Status), EBS: string(s.AttachedEbsStatus.Status)}
		if d := s.InstanceStatus.Details; len(d) > 0 {
			v.InstanceDetail = string(d[0].Name) + "=" + string(d[0].Status)
			v.InstanceSince = aws.ToTime(d[0].ImpairedSince)
		}
		if d := s.SystemStatus.Details; len(d) > 0 {
			v.SystemDetail = string(d[0].Name) + "=" + string(d[0].Status)
			v.SystemSince = aws.ToTime(d[0].ImpairedSince)
		}
		for _, e := range s.Events {
			v.EventCodes = append(v.EventCodes, string(e.Code))
			v.EventIDs = append(v.EventIDs, aws.ToString(e.InstanceEventId))
			v.EventNotBefore = append(v.EventNotBefore, aws.ToTime(e.NotBefore))
			v.EventNotAfter = append(v.EventNotAfter, aws.ToTime(e.NotAfter))
		}
		views = append(views, v)
	}
	return views
}

// postJSON posts body to a control route and decodes the answer into out
// (when the status is 200).
func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("decode %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

func TestDescribeInstanceStatus(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	ids := e.launch(t, "on-demand", "c5.large", "us-east-1a", 3, nil)
	a, b, c := ids[0], ids[1], ids[2]
	e.sim.Instances() // boots them

	// a's instance check fails now, through the Go API.
	if _, err := e.sim.SetStatus(a, ec2sim.CheckInstance, true, time.Time{}); err != nil {
		t.Fatalf("SetStatus() error = %v", err)
	}
	e.clock.Advance(3 * time.Minute)
	// b's system check fails since a given time, through the control API.
	bSince := epoch.Add(2 * time.Minute)
	var health ec2sim.InstanceHealth
	if code := postJSON(t, e.url+"/_sim/instances/"+b+"/status", map[string]any{"check": "system", "impaired": true, "since": bSince}, &health); code != http.StatusOK {
		t.Fatalf("POST status = %d, want 200", code)
	}
	if health.SystemStatus != "impaired" || health.SystemImpairedSince == nil || !health.SystemImpairedSince.Equal(bSince) {
		t.Errorf("POST status answered %+v, want the system check impaired since %v", health, bSince)
	}
	// c gets a retirement in 72 hours.
	var ev ec2sim.ScheduledEvent
	if code := postJSON(t, e.url+"/_sim/instances/"+c+"/scheduled-events", map[string]string{"code": "instance-retirement", "in": "72h"}, &ev); code != http.StatusOK {
		t.Fatalf("POST scheduled-events = %d, want 200", code)
	}
	notBefore := epoch.Add(3*time.Minute + 72*time.Hour)

	out, err := e.ec2.DescribeInstanceStatus(t.Context(), &ec2.DescribeInstanceStatusInput{InstanceIds: ids})
	if err != nil {
		t.Fatalf("DescribeInstanceStatus() error = %v", err)
	}
	want := []statusView{
		{ID: a, State: "running", Instance: "impaired", InstanceDetail: "reachability=failed", InstanceSince: epoch,
			System: "ok", SystemDetail: "reachability=passed", EBS: "ok"},
		{ID: b, State: "running", Instance: "ok", InstanceDetail: "reachability=passed",
			System: "impaired", SystemDetail: "reachability=failed", SystemSince: bSince, EBS: "ok"},
		{ID: c, State: "running", Instance: "ok", InstanceDetail: "reachability=passed", System: "ok", SystemDetail: "reachability=passed", EBS: "ok",
			EventCodes: []string{"instance-retirement"}, EventIDs: []string{ev.ID},
			EventNotBefore: []time.Time{notBefore}, EventNotAfter: []time.Time{notBefore.Add(7 * 24 * time.Hour)}},
	}
	if diff := cmp.Diff(want, viewStatuses(out)); diff != "" {
		t.Errorf("DescribeInstanceStatus() mismatch (-want +got):\n%s", diff)
	}
	if len(ev.ID) != len("instance-event-")+17 || ev.Code != "instance-retirement" || ev.Description == "" {
		t.Errorf("scheduled event = %+v, want an instance-event id, the code and a description", ev)
	}

	t.Run("impairing a check again keeps its first time", func(t *testing.T) {
		h, err := e.sim.SetStatus(a, ec2sim.CheckInstance, true, epoch.Add(time.Hour))
		if err != nil || h.InstanceImpairedSince == nil || !h.InstanceImpairedSince.Equal(epoch) {
			t.Errorf("SetStatus() = %+v, %v; want impaired since %v", h, err, epoch)
		}
	})

	t.Run("a recovered check passes again", func(t *testing.T) {
		var h ec2sim.InstanceHealth
		if code := postJSON(t, e.url+"/_sim/instances/"+b+"/status", map[string]any{"check": "system", "impaired": false}, &h); code != http.StatusOK {
			t.Fatalf("POST status = %d, want 200", code)
		}
		out, err := e.ec2.DescribeInstanceStatus(t.Context(), &ec2.DescribeInstanceStatusInput{InstanceIds: []string{b}})
		if err != nil {
			t.Fatalf("DescribeInstanceStatus() error = %v", err)
		}
		if got := viewStatuses(out); len(got) != 1 || got[0].System != "ok" || !got[0].SystemSince.IsZero() {
			t.Errorf("DescribeInstanceStatus(%s) = %+v, want the system check ok", b, got)
		}
	})
}

func TestDescribeInstanceStatusFilters(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	ids := e.launch(t, "on-demand", "c5.large", "us-east-1a", 3, nil)
	e.sim.Instances()
	if _, err := e.sim.SetStatus(ids[0], ec2sim.CheckInstance, true, time.Time{}); err != nil {
		t.Fatalf("SetStatus() error = %v", err)
	}
	if _, err := e.sim.SetStatus(ids[1], ec2sim.CheckSystem, true, time.Time{}); err != nil {
		t.Fatalf("SetStatus() error = %v", err)
	}
	if _, err := e.sim.ScheduleEvent(ids[2], "system-maintenance", epoch.Add(24*time.Hour)); err != nil {
		t.Fatalf("ScheduleEvent() error = %v", err)
	}
	// Karpenter's three filter sets (aws: pkg/providers/instancestatus).
	tests := []struct {
		name   string
		filter ec2types.Filter
		want   []string
	}{
		{name: "impaired instance status", filter: ec2types.Filter{Name: aws.String("instance-status.status"), Values: []string{"impaired"}}, want: ids[:1]},
		{name: "impaired system status", filter: ec2types.Filter{Name: aws.String("system-status.status"), Values: []string{"impaired"}}, want: ids[1:2]},
		{name: "scheduled event codes", filter: ec2types.Filter{Name: aws.String("event.code"),
			Values: []string{"instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"}}, want: ids[2:]},
		{name: "failed reachability", filter: ec2types.Filter{Name: aws.String("instance-status.reachability"), Values: []string{"failed"}}, want: ids[:1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeInstanceStatus(t.Context(), &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{tt.filter}})
			if err != nil {
				t.Fatalf("DescribeInstanceStatus() error = %v", err)
			}
			var got []string
			for _, v := range viewStatuses(out) {
				got = append(got, v.ID)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DescribeInstanceStatus() instances mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeInstanceStatusRunningOnly(t *testing.T) {
	e := newEnv(t, ec2sim.Options{BootDelay: time.Minute})
	pending := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	tests := []struct {
		name string
		all  *bool
		want []statusView
	}{
		{name: "a pending instance is not reported by default"},
		{name: "IncludeAllInstances reports it initializing", all: aws.Bool(true), want: []statusView{{ID: pending, State: "pending",
			Instance: "initializing", InstanceDetail: "reachability=initializing", System: "initializing", SystemDetail: "reachability=initializing",
			EBS: "not-applicable"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeInstanceStatus(t.Context(), &ec2.DescribeInstanceStatusInput{InstanceIds: []string{pending}, IncludeAllInstances: tt.all})
			if err != nil {
				t.Fatalf("DescribeInstanceStatus() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, viewStatuses(out)); diff != "" {
				t.Errorf("DescribeInstanceStatus() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeInstanceStatusErrors(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	id := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	tests := []struct {
		name string
		in   *ec2.DescribeInstanceStatusInput
		want string
	}{
		{name: "an unknown instance fails the call", in: &ec2.DescribeInstanceStatusInput{InstanceIds: []string{id, "i-0123456789abcdef0"}}, want: "InvalidInstanceID.NotFound"},
		{name: "a malformed instance ID", in: &ec2.DescribeInstanceStatusInput{InstanceIds: []string{"instance-1"}}, want: "InvalidInstanceID.Malformed"},
		{name: "instance IDs with MaxResults", in: &ec2.DescribeInstanceStatusInput{InstanceIds: []string{id}, MaxResults: aws.Int32(5)}, want: "InvalidParameterCombination"},
		{name: "an unsupported filter", in: &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String("tag:Name"), Values: []string{"x"}}}}, want: "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ec2.DescribeInstanceStatus(t.Context(), tt.in)
			if code, _ := apiCode(err); code != tt.want {
				t.Errorf("DescribeInstanceStatus() error = %v, want code %s", err, tt.want)
			}
		})
	}
}

func TestStatusControlRouteErrors(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	id := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	tests := []struct {
		name  string
		route string
		body  any
		want  int
	}{
		{name: "an unknown check", route: id + "/status", body: map[string]any{"check": "ebs", "impaired": true}, want: http.StatusConflict},
		{name: "an unknown instance", route: "i-0123456789abcdef0/status", body: map[string]any{"check": "instance", "impaired": true}, want: http.StatusConflict},
		{name: "an event code EC2 does not schedule", route: id + "/scheduled-events", body: map[string]string{"code": "meteor-strike"}, want: http.StatusConflict},
		{name: "a window that is not a duration", route: id + "/scheduled-events", body: map[string]string{"code": "instance-stop", "in": "soon"}, want: http.StatusBadRequest},
		{name: "an unknown field", route: id + "/status", body: map[string]any{"check": "instance", "broken": true}, want: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := postJSON(t, e.url+"/_sim/instances/"+tt.route, tt.body, nil); got != tt.want {
				t.Errorf("POST %s = %d, want %d", tt.route, got, tt.want)
			}
		})
	}
	t.Run("GET status of a healthy instance", func(t *testing.T) {
		resp, err := http.Get(e.url + "/_sim/instances/" + id + "/status")
		if err != nil {
			t.Fatalf("GET status: %v", err)
		}
		defer resp.Body.Close()
		var h ec2sim.InstanceHealth
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatalf("decode: %v", err)
		}
		want := ec2sim.InstanceHealth{InstanceID: id, InstanceStatus: "ok", SystemStatus: "ok", Events: []ec2sim.ScheduledEvent{}}
		if diff := cmp.Diff(want, h); diff != "" {
			t.Errorf("GET status mismatch (-want +got):\n%s", diff)
		}
	})
}
