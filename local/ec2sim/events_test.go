package ec2sim_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/interruption"
)

// eventLog is an event sink that keeps what it receives.
type eventLog struct {
	mu     sync.Mutex
	events []ec2sim.Event
}

func (l *eventLog) sink(ev ec2sim.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *eventLog) take() []ec2sim.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// parsed is what the interruption parser makes of one emitted event.
type parsed struct {
	DetailType string
	Kind       interruption.Kind
	Instances  []string
	Time       time.Time
	State      string
}

// parseAll marshals each event as EventBridge's SQS message body and
// parses it with shared/interruption.Parse, as the interruption Lambda
// does.
func parseAll(t *testing.T, events []ec2sim.Event) []parsed {
	t.Helper()
	out := []parsed{}
	for _, ev := range events {
		body, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("marshal event: %v", err)
		}
		msg, err := interruption.Parse(body)
		if err != nil {
			t.Fatalf("Parse(%s) error = %v", body, err)
		}
		if msg.EventID != ev.ID {
			t.Errorf("Parse(%s).EventID = %q, want %q", body, msg.EventID, ev.ID)
		}
		instances := msg.InstanceIDs
		if msg.Kind == interruption.KindNoOp {
			// The parser names no instance for a no-op state change.
			instances = []string{ev.Detail["instance-id"]}
		}
		out = append(out, parsed{DetailType: ev.DetailType, Kind: msg.Kind, Instances: instances, Time: msg.Time, State: ev.Detail["state"]})
	}
	return out
}

func TestEventsParseAsInterruptionMessages(t *testing.T) {
	e := newEnv(t, ec2sim.Options{BootDelay: 30 * time.Second, ShutdownDelay: 10 * time.Second})
	log := &eventLog{}
	e.sim.SetEventSink(log.sink)
	spot := e.launch(t, "spot", "c5.large", "us-east-1a", 1, nil)[0]

	e.clock.Advance(time.Minute)
	e.sim.Instances() // applies the due transition to running
	if _, err := e.sim.RecommendRebalance(spot); err != nil {
		t.Fatalf("RecommendRebalance() error = %v", err)
	}
	warning, err := e.sim.InterruptSpot(spot)
	if err != nil {
		t.Fatalf("InterruptSpot() error = %v", err)
	}
	e.clock.Advance(ec2sim.SpotReclaimDelay + time.Minute)
	e.sim.Instances() // applies the reclaim and the termination

	stateChange := func(state string, kind interruption.Kind, at time.Time) parsed {
		return parsed{DetailType: ec2sim.DetailTypeStateChange, Kind: kind, Instances: []string{spot}, Time: at, State: state}
	}
	warned := epoch.Add(time.Minute)
	want := []parsed{
		stateChange("pending", interruption.KindNoOp, epoch),
		stateChange("running", interruption.KindNoOp, epoch.Add(30*time.Second)),
		{DetailType: ec2sim.DetailTypeRebalanceRecommendation, Kind: interruption.KindRebalanceRecommendation, Instances: []string{spot}, Time: warned},
		{DetailType: ec2sim.DetailTypeSpotInterruptionWarning, Kind: interruption.KindSpotInterruption, Instances: []string{spot}, Time: warned},
		stateChange("shutting-down", interruption.KindInstanceTerminated, warning.ReclaimTime),
		stateChange("terminated", interruption.KindInstanceTerminated, warning.ReclaimTime.Add(10*time.Second)),
	}
	events := log.take()
	if diff := cmp.Diff(want, parseAll(t, events)); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
	ids := map[string]bool{}
	for _, ev := range events {
		if ids[ev.ID] {
			t.Errorf("event id %s emitted twice", ev.ID)
		}
		ids[ev.ID] = true
	}
	for _, ev := range events {
		if ev.DetailType == ec2sim.DetailTypeSpotInterruptionWarning && ev.Detail["instance-action"] != "terminate" {
			t.Errorf("Spot warning detail = %v, want instance-action terminate", ev.Detail)
		}
	}
}

func TestStateChangeEvents(t *testing.T) {
	tests := []struct {
		name string
		// act runs after an on-demand instance was launched and is running.
		act  func(t *testing.T, e *env, id string)
		want []string // states after running
	}{
		{
			name: "TerminateInstances emits shutting-down then terminated",
			act: func(t *testing.T, e *env, id string) {
				e.terminate(t, id)
				e.clock.Advance(time.Minute)
				e.sim.Instances()
			},
			want: []string{"shutting-down", "terminated"},
		},
		{
			name: "a failed instance emits shutting-down then terminated at once",
			act: func(t *testing.T, e *env, id string) {
				if err := e.sim.FailInstance(id); err != nil {
					t.Fatalf("FailInstance() error = %v", err)
				}
			},
			want: []string{"shutting-down", "terminated"},
		},
		{
			name: "reads without a due transition emit nothing",
			act: func(t *testing.T, e *env, id string) {
				e.sim.Instances()
				e.describe(t, id)
			},
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, ec2sim.Options{ShutdownDelay: 30 * time.Second})
			log := &eventLog{}
			e.sim.SetEventSink(log.sink)
			id := e.launch(t, "on-demand", "c5.large", "us-east-1b", 1, nil)[0]
			e.sim.Instances()
			tt.act(t, e, id)
			got := []string{}
			for _, p := range parseAll(t, log.take()) {
				if p.DetailType != ec2sim.DetailTypeStateChange || !slices.Equal(p.Instances, []string{id}) {
					t.Errorf("event %+v, want a state change of %s", p, id)
				}
				got = append(got, p.State)
			}
			if diff := cmp.Diff(append([]string{"pending", "running"}, tt.want...), got); diff != "" {
				t.Errorf("states mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEventEnvelopeMatchesEventBridge compares an emitted event's JSON
// with the hand-written EventBridge fixture of the same detail type: the
// same keys at every level, the instance ARN in resources.
func TestEventEnvelopeMatchesEventBridge(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "us-west-2"})
	log := &eventLog{}
	e.sim.SetEventSink(log.sink)
	spot := e.launch(t, "spot", "m5.large", "us-west-2a", 1, nil)[0]
	if _, err := e.sim.InterruptSpot(spot); err != nil {
		t.Fatalf("InterruptSpot() error = %v", err)
	}
	var warning ec2sim.Event
	for _, ev := range log.take() {
		if ev.DetailType == ec2sim.DetailTypeSpotInterruptionWarning {
			warning = ev
		}
	}
	body, err := json.Marshal(warning)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	fixture, err := os.ReadFile(filepath.Join("..", "..", "shared", "interruption", "testdata", "spot-interruption-warning.json"))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	if diff := cmp.Diff(jsonShape(t, fixture), jsonShape(t, body)); diff != "" {
		t.Errorf("event shape mismatch with the fixture (-want +got):\n%s", diff)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	wantARN := "arn:aws:ec2:us-west-2:111122223333:instance/" + spot
	if diff := cmp.Diff([]any{wantARN}, got["resources"]); diff != "" {
		t.Errorf("resources mismatch (-want +got):\n%s", diff)
	}
	if got["version"] != "0" || got["source"] != "aws.ec2" || got["account"] != "111122223333" || got["region"] != "us-west-2" {
		t.Errorf("envelope = %v, want version 0, source aws.ec2, account 111122223333, region us-west-2", got)
	}
	if ts, _ := got["time"].(string); ts != epoch.Format(time.RFC3339) {
		t.Errorf("time = %q, want %q", ts, epoch.Format(time.RFC3339))
	}
}

// jsonShape lists every key path of a JSON document with its value's JSON
// type.
func jsonShape(t *testing.T, doc []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("unmarshal %s: %v", doc, err)
	}
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(prefix+"/"+k, c)
			}
		case []any:
			out = append(out, prefix+" array")
			for _, c := range x {
				walk(prefix+"[]", c)
			}
		case string:
			out = append(out, prefix+" string")
		default:
			out = append(out, prefix+" other")
		}
	}
	walk("", v)
	slices.Sort(out)
	return slices.Compact(out)
}

func TestRecommendRebalanceErrors(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	log := &eventLog{}
	e.sim.SetEventSink(log.sink)
	onDemand := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	gone := e.launch(t, "spot", "c5.large", "us-east-1a", 1, nil)[0]
	e.terminate(t, gone)
	e.sim.Instances() // applies the due transitions
	log.take()
	tests := []struct {
		name, id, want string
	}{
		{name: "unknown instance", id: "i-0123456789abcdef0", want: "not found"},
		{name: "on-demand instance", id: onDemand, want: "not spot"},
		{name: "terminating Spot instance", id: gone, want: "not pending or running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.sim.RecommendRebalance(tt.id)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RecommendRebalance(%s) error = %v, want one saying %q", tt.id, err, tt.want)
			}
			if got := log.take(); len(got) != 0 {
				t.Errorf("events = %+v, want none", got)
			}
		})
	}
}

func TestRebalanceControlRoute(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	log := &eventLog{}
	e.sim.SetEventSink(log.sink)
	spot := e.launch(t, "spot", "c5.large", "us-east-1a", 1, nil)[0]
	onDemand := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	e.sim.Instances() // applies the due transitions
	log.take()
	tests := []struct {
		name       string
		id         string
		wantStatus int
		wantEvents int
	}{
		{name: "a Spot instance gets a recommendation", id: spot, wantStatus: http.StatusOK, wantEvents: 1},
		{name: "an on-demand instance is refused", id: onDemand, wantStatus: http.StatusConflict, wantEvents: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(e.url+"/_sim/instances/"+tt.id+"/rebalance", "application/json", nil)
			if err != nil {
				t.Fatalf("POST rebalance: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if resp.StatusCode == http.StatusOK {
				var rb ec2sim.RebalanceRecommendation
				if err := json.NewDecoder(resp.Body).Decode(&rb); err != nil {
					t.Fatalf("decode: %v", err)
				}
				if diff := cmp.Diff(ec2sim.RebalanceRecommendation{InstanceID: tt.id, Time: epoch}, rb); diff != "" {
					t.Errorf("response mismatch (-want +got):\n%s", diff)
				}
			}
			if got := log.take(); len(got) != tt.wantEvents {
				t.Errorf("events = %+v, want %d", got, tt.wantEvents)
			}
		})
	}
}

// TestEventSinkRunsOutsideTheLock has the sink call back into the
// simulator: under the simulator's lock that would deadlock.
func TestEventSinkRunsOutsideTheLock(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	var states []string
	e.sim.SetEventSink(func(ev ec2sim.Event) {
		in, _ := e.sim.Instance(ev.Detail["instance-id"])
		states = append(states, in.State)
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.sim.SetBootDelay(0)
		id := e.launch(t, "spot", "c5.large", "us-east-1a", 1, nil)[0]
		if _, err := e.sim.InterruptSpot(id); err != nil {
			t.Errorf("InterruptSpot() error = %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sink deadlocked against the simulator")
	}
	if len(states) == 0 {
		t.Error("the sink was never called")
	}
}

func TestNoSinkNoEvents(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	log := &eventLog{}
	id := e.launch(t, "spot", "c5.large", "us-east-1a", 1, nil)[0]
	e.sim.SetEventSink(log.sink)
	e.sim.SetEventSink(nil)
	if _, err := e.sim.InterruptSpot(id); err != nil {
		t.Fatalf("InterruptSpot() error = %v", err)
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("events = %+v, want none after SetEventSink(nil)", got)
	}
}

// terminate calls TerminateInstances through the SDK.
func (e *env) terminate(t *testing.T, ids ...string) {
	t.Helper()
	if _, err := e.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
		t.Fatalf("TerminateInstances(%v) error = %v", ids, err)
	}
}
