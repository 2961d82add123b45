package interruption_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/interruption"
)

// pollNow is the poll's time in the status tests.
var pollNow = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

const (
	instA = "i-0a1b2c3d4e5f60718"
	instB = "i-0f9e8d7c6b5a40312"
)

func failedSince(d time.Duration) interruption.StatusCheck {
	return interruption.StatusCheck{Status: interruption.CheckFailed, ImpairedSince: pollNow.Add(-d)}
}

var passed = interruption.StatusCheck{Status: interruption.CheckPassed}

func TestDecideStatuses(t *testing.T) {
	notBefore := time.Date(2026, 3, 20, 2, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		give []interruption.InstanceStatus
		want []interruption.StatusDecision
	}{
		{
			name: "should do nothing for an instance whose checks pass",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: passed, System: passed}},
		},
		{
			name: "should not act on an instance status impaired for less than 120 seconds",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: failedSince(119 * time.Second), System: passed}},
		},
		{
			name: "should forcefully terminate an instance whose instance status is impaired for 120 seconds",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: failedSince(120 * time.Second), System: passed}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindInstanceStatusImpaired, Since: pollNow.Add(-120 * time.Second),
				Deadline: pollNow, Key: "instance_status/" + instA + "/2026-03-14T09:28:00Z",
			}},
		},
		{
			name: "should forcefully terminate an instance whose system status is impaired for 5 minutes",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: passed, System: failedSince(5 * time.Minute)}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindSystemStatusImpaired, Since: pollNow.Add(-5 * time.Minute),
				Deadline: pollNow, Key: "system_status/" + instA + "/2026-03-14T09:25:00Z",
			}},
		},
		{
			name: "should name the check that failed first when both are impaired",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: failedSince(3 * time.Minute), System: failedSince(4 * time.Minute)}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindSystemStatusImpaired, Since: pollNow.Add(-4 * time.Minute),
				Deadline: pollNow, Key: "system_status/" + instA + "/2026-03-14T09:26:00Z",
			}},
		},
		{
			name: "should name the instance check when both failed at the same time",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: failedSince(3 * time.Minute), System: failedSince(3 * time.Minute)}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindInstanceStatusImpaired, Since: pollNow.Add(-3 * time.Minute),
				Deadline: pollNow, Key: "instance_status/" + instA + "/2026-03-14T09:27:00Z",
			}},
		},
		{
			name: "should count a failed check that does not say since when",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: interruption.StatusCheck{Status: interruption.CheckFailed}}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindInstanceStatusImpaired, Since: time.Time{},
				Deadline: pollNow, Key: "instance_status/" + instA + "/0001-01-01T00:00:00Z",
			}},
		},
		{
			name: "should ignore insufficient data and initializing checks",
			give: []interruption.InstanceStatus{{InstanceID: instA,
				Instance: interruption.StatusCheck{Status: interruption.CheckInsufficientData},
				System:   interruption.StatusCheck{Status: interruption.CheckInitializing}}},
		},
		{
			name: "should delete the NodeClaim of an instance with a scheduled retirement",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: passed, System: passed, Events: []interruption.ScheduledEvent{
				{ID: "instance-event-0d59937288b749b32", Code: interruption.EventInstanceRetirement, Description: "The instance is running on degraded hardware", NotBefore: notBefore},
			}}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindScheduledEvent, Since: pollNow, Deadline: notBefore,
				Key:    "event_status/" + instA + "/instance-event-0d59937288b749b32",
				Events: []interruption.EventCode{interruption.EventInstanceRetirement},
			}},
		},
		{
			name: "should take the earliest window of several scheduled events",
			give: []interruption.InstanceStatus{{InstanceID: instA, Events: []interruption.ScheduledEvent{
				{ID: "instance-event-2", Code: interruption.EventSystemMaintenance, NotBefore: notBefore.Add(time.Hour)},
				{ID: "instance-event-1", Code: interruption.EventSystemReboot, NotBefore: notBefore},
			}}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindScheduledEvent, Since: pollNow, Deadline: notBefore,
				Key:    "event_status/" + instA + "/instance-event-1,instance-event-2",
				Events: []interruption.EventCode{interruption.EventSystemMaintenance, interruption.EventSystemReboot},
			}},
		},
		{
			name: "should key an event without an id by its code and window",
			give: []interruption.InstanceStatus{{InstanceID: instA, Events: []interruption.ScheduledEvent{
				{Code: interruption.EventInstanceStop, NotBefore: notBefore},
			}}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindScheduledEvent, Since: pollNow, Deadline: notBefore,
				Key:    "event_status/" + instA + "/instance-stop@2026-03-20T02:00:00Z",
				Events: []interruption.EventCode{interruption.EventInstanceStop},
			}},
		},
		{
			name: "should leave the deadline unset for an event without a window",
			give: []interruption.InstanceStatus{{InstanceID: instA, Events: []interruption.ScheduledEvent{
				{ID: "instance-event-1", Code: interruption.EventInstanceReboot},
			}}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindScheduledEvent, Since: pollNow,
				Key:    "event_status/" + instA + "/instance-event-1",
				Events: []interruption.EventCode{interruption.EventInstanceReboot},
			}},
		},
		{
			name: "should still act on a completed event, as Karpenter does not read the description",
			give: []interruption.InstanceStatus{{InstanceID: instA, Events: []interruption.ScheduledEvent{
				{ID: "instance-event-1", Code: interruption.EventSystemReboot, Description: "[Completed] Scheduled reboot", NotBefore: notBefore},
			}}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindScheduledEvent, Since: pollNow, Deadline: notBefore,
				Key:    "event_status/" + instA + "/instance-event-1",
				Events: []interruption.EventCode{interruption.EventSystemReboot},
			}},
		},
		{
			name: "should ignore an event code outside Karpenter's five",
			give: []interruption.InstanceStatus{{InstanceID: instA, Events: []interruption.ScheduledEvent{
				{ID: "instance-event-1", Code: "instance-stop-hibernate", NotBefore: notBefore},
			}}},
		},
		{
			name: "should prefer an impaired check to a scheduled event",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: failedSince(10 * time.Minute), Events: []interruption.ScheduledEvent{
				{ID: "instance-event-1", Code: interruption.EventSystemReboot, NotBefore: notBefore},
			}}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindInstanceStatusImpaired, Since: pollNow.Add(-10 * time.Minute),
				Deadline: pollNow, Key: "instance_status/" + instA + "/2026-03-14T09:20:00Z",
			}},
		},
		{
			name: "should act on a scheduled event while the impaired check is inside the threshold",
			give: []interruption.InstanceStatus{{InstanceID: instA, Instance: failedSince(time.Minute), Events: []interruption.ScheduledEvent{
				{ID: "instance-event-1", Code: interruption.EventSystemReboot, NotBefore: notBefore},
			}}},
			want: []interruption.StatusDecision{{
				InstanceID: instA, Kind: interruption.KindScheduledEvent, Since: pollNow, Deadline: notBefore,
				Key:    "event_status/" + instA + "/instance-event-1",
				Events: []interruption.EventCode{interruption.EventSystemReboot},
			}},
		},
		{
			name: "should decide each instance once, in input order",
			give: []interruption.InstanceStatus{
				{InstanceID: instB, System: failedSince(3 * time.Minute)},
				{InstanceID: instA, Instance: passed},
				{InstanceID: instB, Instance: failedSince(9 * time.Minute)},
				{InstanceID: instA, Instance: failedSince(2 * time.Minute)},
			},
			want: []interruption.StatusDecision{{
				InstanceID: instB, Kind: interruption.KindSystemStatusImpaired, Since: pollNow.Add(-3 * time.Minute),
				Deadline: pollNow, Key: "system_status/" + instB + "/2026-03-14T09:27:00Z",
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := interruption.DecideStatuses(tt.give, pollNow)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecideStatuses() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideStatusesKeyIsStable proves a repeated poll starts one
// execution: the next minute's poll of the same failure or the same events
// gives the same Key, and a new failure a new one.
func TestDecideStatusesKeyIsStable(t *testing.T) {
	impairedAt := pollNow.Add(-3 * time.Minute)
	failing := []interruption.InstanceStatus{{InstanceID: instA, Instance: interruption.StatusCheck{Status: interruption.CheckFailed, ImpairedSince: impairedAt}}}
	refailing := []interruption.InstanceStatus{{InstanceID: instA, Instance: interruption.StatusCheck{Status: interruption.CheckFailed, ImpairedSince: impairedAt.Add(5 * time.Minute)}}}
	event := []interruption.InstanceStatus{{InstanceID: instA, Events: []interruption.ScheduledEvent{{ID: "instance-event-1", Code: interruption.EventInstanceStop}}}}
	key := func(st []interruption.InstanceStatus, at time.Time) string {
		t.Helper()
		d := interruption.DecideStatuses(st, at)
		if len(d) != 1 {
			t.Fatalf("DecideStatuses() = %+v, want one decision", d)
		}
		return d[0].Key
	}
	tests := []struct {
		name     string
		a, b     string
		wantSame bool
	}{
		{name: "same failure a minute later", a: key(failing, pollNow), b: key(failing, pollNow.Add(time.Minute)), wantSame: true},
		{name: "same events a minute later", a: key(event, pollNow), b: key(event, pollNow.Add(time.Minute)), wantSame: true},
		{name: "a check that recovered and failed again", a: key(failing, pollNow), b: key(refailing, pollNow.Add(10*time.Minute)), wantSame: false},
		{name: "the same instance failing and with an event", a: key(failing, pollNow), b: key(event, pollNow), wantSame: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.a == tt.b) != tt.wantSame {
				t.Errorf("keys %q and %q: same = %v, want %v", tt.a, tt.b, tt.a == tt.b, tt.wantSame)
			}
			for _, k := range []string{tt.a, tt.b} {
				if strings.Contains(k, "#") {
					t.Errorf("key %q contains '#', which ddbstore refuses", k)
				}
			}
		})
	}
}

func TestStatusKindHandling(t *testing.T) {
	tests := []struct {
		name         string
		kind         interruption.Kind
		wantAction   interruption.Action
		wantForceful bool
	}{
		{name: "should forcefully drain an instance whose instance status is impaired", kind: interruption.KindInstanceStatusImpaired,
			wantAction: interruption.ActionForcefulDrain, wantForceful: true},
		{name: "should forcefully drain an instance whose system status is impaired", kind: interruption.KindSystemStatusImpaired,
			wantAction: interruption.ActionForcefulDrain, wantForceful: true},
		{name: "should drain with grace an instance with a scheduled event", kind: interruption.KindScheduledEvent,
			wantAction: interruption.ActionCordonAndDrain, wantForceful: false},
	}
	seen := map[interruption.Kind]bool{}
	for _, tt := range tests {
		seen[tt.kind] = true
		t.Run(tt.name, func(t *testing.T) {
			h := tt.kind.Handling()
			if h.Action != tt.wantAction || h.Forceful() != tt.wantForceful || h.Mark != interruption.MarkNone {
				t.Errorf("Handling() = %+v (forceful %v), want action %s, forceful %v, no mark", h, h.Forceful(), tt.wantAction, tt.wantForceful)
			}
			want := interruption.Notice{Type: "Warning", Reason: "TerminatingOnInterruption"}
			if got := (interruption.Notice{Type: h.Notice.Type, Reason: h.Notice.Reason}); got != want || h.Notice.Message == "" {
				t.Errorf("Handling().Notice = %+v, want a Warning TerminatingOnInterruption with a message", h.Notice)
			}
		})
	}
	for _, k := range interruption.StatusKinds() {
		if !seen[k] {
			t.Errorf("kind %q has no case in the poll's action table test", k)
		}
	}
	for _, k := range interruption.Kinds() {
		if k.Handling().Forceful() {
			t.Errorf("EventBridge kind %q is forceful; only the status poll's impaired checks are", k)
		}
	}
}

func TestScheduledEventCodes(t *testing.T) {
	want := []interruption.EventCode{"instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"}
	if diff := cmp.Diff(want, interruption.ScheduledEventCodes()); diff != "" {
		t.Errorf("ScheduledEventCodes() mismatch (-want +got):\n%s", diff)
	}
}
