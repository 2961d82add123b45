package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/interruption"
	"github.com/nodewright/nodewright/shared/workflow"
)

// now is the handler's clock in the tests.
var now = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

const (
	instA = "i-0a1b2c3d4e5f60718"
	instB = "i-0f9e8d7c6b5a40312"
	instC = "i-03c5a7e9b1d2f4068"
)

// nodeClaim is a launched and registered NodeClaim on instanceID.
func nodeClaim(name, instanceID string, opts ...func(*v1.NodeClaim)) v1.NodeClaim {
	c := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "default"}},
		Status:     v1.NodeClaimStatus{NodeName: "node-" + name, ProviderID: "aws:///us-west-2a/" + instanceID},
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func deleting(c *v1.NodeClaim) {
	ts := metav1.NewTime(now.Add(-time.Minute))
	c.DeletionTimestamp = &ts
}

func unlaunched(c *v1.NodeClaim) { c.Status.ProviderID, c.Status.NodeName = "", "" }

// status builders: what EC2 answers for one instance.
func status(id string, opts ...func(*ec2types.InstanceStatus)) ec2types.InstanceStatus {
	ok := func() *ec2types.InstanceStatusSummary {
		return &ec2types.InstanceStatusSummary{Status: ec2types.SummaryStatusOk, Details: []ec2types.InstanceStatusDetails{
			{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypePassed}}}
	}
	s := ec2types.InstanceStatus{InstanceId: aws.String(id), InstanceStatus: ok(), SystemStatus: ok(),
		InstanceState: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning, Code: aws.Int32(16)}}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func impaired(since time.Time) *ec2types.InstanceStatusSummary {
	return &ec2types.InstanceStatusSummary{Status: ec2types.SummaryStatusImpaired, Details: []ec2types.InstanceStatusDetails{
		{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypeFailed, ImpairedSince: aws.Time(since)}}}
}

func instanceImpaired(since time.Time) func(*ec2types.InstanceStatus) {
	return func(s *ec2types.InstanceStatus) { s.InstanceStatus = impaired(since) }
}

func systemImpaired(since time.Time) func(*ec2types.InstanceStatus) {
	return func(s *ec2types.InstanceStatus) { s.SystemStatus = impaired(since) }
}

func scheduled(id string, code ec2types.EventCode, notBefore time.Time) func(*ec2types.InstanceStatus) {
	return func(s *ec2types.InstanceStatus) {
		s.Events = append(s.Events, ec2types.InstanceStatusEvent{InstanceEventId: aws.String(id), Code: code,
			Description: aws.String("The instance is scheduled for " + string(code)), NotBefore: aws.Time(notBefore)})
	}
}

// fakeEC2 answers DescribeInstanceStatus like EC2 for InstanceIds: every ID
// must be known (else InvalidInstanceID.NotFound for the whole call), and
// only running instances are reported (those in statuses; known lists the
// others). err fails the next calls.
type fakeEC2 struct {
	mu       sync.Mutex
	statuses map[string]ec2types.InstanceStatus
	known    map[string]bool
	err      error
	inputs   [][]string
}

func newFakeEC2(statuses ...ec2types.InstanceStatus) *fakeEC2 {
	f := &fakeEC2{statuses: map[string]ec2types.InstanceStatus{}, known: map[string]bool{}}
	for _, s := range statuses {
		f.statuses[*s.InstanceId] = s
		f.known[*s.InstanceId] = true
	}
	return f
}

func (f *fakeEC2) DescribeInstanceStatus(_ context.Context, in *ec2.DescribeInstanceStatusInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs = append(f.inputs, slices.Clone(in.InstanceIds))
	if f.err != nil {
		return nil, f.err
	}
	if len(in.InstanceIds) > 100 {
		return nil, &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "too many instance IDs"}
	}
	var missing []string
	for _, id := range in.InstanceIds {
		if !f.known[id] {
			missing = append(missing, id)
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: fmt.Sprintf("The instance ID '%s' does not exist", missing[0])}
	default:
		return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(missing, ", "))}
	}
	out := &ec2.DescribeInstanceStatusOutput{}
	for _, id := range in.InstanceIds {
		if s, ok := f.statuses[id]; ok {
			out.InstanceStatuses = append(out.InstanceStatuses, s)
		}
	}
	return out, nil
}

// fakeStore is the handler's DynamoDB, in memory.
type fakeStore struct {
	mu         sync.Mutex
	claims     []v1.NodeClaim
	keys       map[string]time.Time // key -> until
	events     map[string]ddbstore.Event
	failMethod map[string]error
}

func newFakeStore(claims ...v1.NodeClaim) *fakeStore {
	return &fakeStore{claims: claims, keys: map[string]time.Time{}, events: map[string]ddbstore.Event{}, failMethod: map[string]error{}}
}

func (s *fakeStore) ListNodeClaims(context.Context) ([]v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failMethod["ListNodeClaims"]; err != nil {
		return nil, err
	}
	return slices.Clone(s.claims), nil
}

func (s *fakeStore) HasIdempotencyKey(_ context.Context, scope, key string, at time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failMethod["HasIdempotencyKey"]; err != nil {
		return false, err
	}
	until, ok := s.keys[scope+"/"+key]
	return ok && until.After(at), nil
}

func (s *fakeStore) ClaimIdempotencyKey(_ context.Context, scope, key string, at time.Time, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failMethod["ClaimIdempotencyKey"]; err != nil {
		return false, err
	}
	k := scope + "/" + key
	if until, ok := s.keys[k]; ok && until.After(at) {
		return true, nil
	}
	s.keys[k] = at.Add(ttl)
	return false, nil
}

func (s *fakeStore) PutEvent(_ context.Context, e ddbstore.Event, _ time.Time, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failMethod["PutEvent"]; err != nil {
		return err
	}
	s.events[e.ID] = e
	return nil
}

func (s *fakeStore) eventList() []ddbstore.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ddbstore.Event
	for _, e := range s.events {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b ddbstore.Event) int { return strings.Compare(a.NodeClaim, b.NodeClaim) })
	return out
}

// started is one StartExecution the fake starter received.
type started struct {
	Name  string
	Input workflow.InterruptionInput
}

// fakeStarter records executions; a name started twice is one execution,
// as Step Functions dedupes names.
type fakeStarter struct {
	mu    sync.Mutex
	execs []started
	calls int
	err   error
}

func (f *fakeStarter) Start(_ context.Context, name string, input any) (sfnstarter.Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return sfnstarter.Execution{}, f.err
	}
	arn := "arn:aws:states:us-west-2:111122223333:execution:interruption:" + name
	if slices.ContainsFunc(f.execs, func(s started) bool { return s.Name == name }) {
		return sfnstarter.Execution{ARN: arn, AlreadyExisted: true}, nil
	}
	in, ok := input.(workflow.InterruptionInput)
	if !ok {
		return sfnstarter.Execution{}, fmt.Errorf("input %T, want workflow.InterruptionInput", input)
	}
	f.execs = append(f.execs, started{Name: name, Input: in})
	return sfnstarter.Execution{ARN: arn}, nil
}

func newHandler(t *testing.T, s store, e EC2API, st starter) *Handler {
	t.Helper()
	cfg, err := LoadConfig(mapEnv(map[string]string{
		"CLUSTER_NAME": "test", "TABLE_NAME": "nodewright", "STATE_MACHINE_ARN": "arn:aws:states:us-west-2:111122223333:stateMachine:interruption",
	}))
	if err != nil {
		t.Fatalf("LoadConfig() error = %v", err)
	}
	return &Handler{cfg: cfg, store: s, ec2: e, starter: st, log: slog.New(slog.NewJSONHandler(t.Output(), nil)), now: func() time.Time { return now }}
}

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// execution is the interruption execution the handler must start for
// claim on instanceID.
// since is when the instance turned unhealthy (the input's EventTime).
func execution(claim v1.NodeClaim, instanceID string, kind interruption.Kind, key string, deadline, since time.Time) started {
	return started{Name: interruption.ExecutionName(claim.Name, key), Input: workflow.InterruptionInput{
		NodeClaim: claim.Name, Node: claim.Status.NodeName, InstanceID: instanceID, Reason: string(kind), EventID: key, Deadline: deadline,
		EventTime: since,
	}}
}

// record is the event record the handler must write for claim.
func record(claim v1.NodeClaim, kind interruption.Kind, key string) ddbstore.Event {
	n := kind.Handling().Notice
	return ddbstore.Event{ID: eventRecordID(key, claim.Name, n.Reason), Time: now, Type: n.Type, Reason: n.Reason, Message: n.Message,
		NodeClaim: claim.Name, Node: claim.Status.NodeName}
}

func TestHandle(t *testing.T) {
	notBefore := time.Date(2026, 3, 20, 2, 0, 0, 0, time.UTC)
	a, b, c := nodeClaim("default-aaaaa", instA), nodeClaim("default-bbbbb", instB), nodeClaim("default-ccccc", instC)
	keyA := "instance_status/" + instA + "/2026-03-14T09:25:00Z"
	tests := []struct {
		name       string
		claims     []v1.NodeClaim
		statuses   []ec2types.InstanceStatus
		want       []started
		wantEvents []ddbstore.Event
		wantOut    Output
	}{
		{
			name:     "should do nothing when every instance is healthy",
			claims:   []v1.NodeClaim{a, b},
			statuses: []ec2types.InstanceStatus{status(instA), status(instB)},
			wantOut:  Output{Checked: 2, Reported: 2, Decisions: []Decision{}},
		},
		{
			name:     "should forcefully terminate an instance whose instance status is impaired for 120 seconds or more",
			claims:   []v1.NodeClaim{a, b},
			statuses: []ec2types.InstanceStatus{status(instA, instanceImpaired(now.Add(-5*time.Minute))), status(instB)},
			want:     []started{execution(a, instA, interruption.KindInstanceStatusImpaired, keyA, now, now.Add(-5*time.Minute))},
			wantEvents: []ddbstore.Event{
				record(a, interruption.KindInstanceStatusImpaired, keyA),
			},
			wantOut: Output{Checked: 2, Reported: 2, Decisions: []Decision{{InstanceID: instA, NodeClaim: a.Name, Kind: "instance_status",
				Key: keyA, Forceful: true, Execution: interruption.ExecutionName(a.Name, keyA)}}},
		},
		{
			name:     "should forcefully terminate an instance whose system status is impaired",
			claims:   []v1.NodeClaim{b},
			statuses: []ec2types.InstanceStatus{status(instB, systemImpaired(now.Add(-2*time.Minute)))},
			want: []started{execution(b, instB, interruption.KindSystemStatusImpaired,
				"system_status/"+instB+"/2026-03-14T09:28:00Z", now, now.Add(-2*time.Minute))},
			wantEvents: []ddbstore.Event{record(b, interruption.KindSystemStatusImpaired, "system_status/"+instB+"/2026-03-14T09:28:00Z")},
			wantOut: Output{Checked: 1, Reported: 1, Decisions: []Decision{{InstanceID: instB, NodeClaim: b.Name, Kind: "system_status",
				Key: "system_status/" + instB + "/2026-03-14T09:28:00Z", Forceful: true,
				Execution: interruption.ExecutionName(b.Name, "system_status/"+instB+"/2026-03-14T09:28:00Z")}}},
		},
		{
			name:     "should not act on an instance impaired for less than 120 seconds",
			claims:   []v1.NodeClaim{a},
			statuses: []ec2types.InstanceStatus{status(instA, instanceImpaired(now.Add(-90*time.Second)))},
			wantOut:  Output{Checked: 1, Reported: 1, Decisions: []Decision{}},
		},
		{
			name:     "should delete the NodeClaim of an instance with a scheduled retirement, draining before the event's window",
			claims:   []v1.NodeClaim{c},
			statuses: []ec2types.InstanceStatus{status(instC, scheduled("instance-event-0d59937288b749b32", ec2types.EventCodeInstanceRetirement, notBefore))},
			want: []started{execution(c, instC, interruption.KindScheduledEvent,
				"event_status/"+instC+"/instance-event-0d59937288b749b32", notBefore, now)},
			wantEvents: []ddbstore.Event{record(c, interruption.KindScheduledEvent, "event_status/"+instC+"/instance-event-0d59937288b749b32")},
			wantOut: Output{Checked: 1, Reported: 1, Decisions: []Decision{{InstanceID: instC, NodeClaim: c.Name, Kind: "event_status",
				Key:       "event_status/" + instC + "/instance-event-0d59937288b749b32",
				Execution: interruption.ExecutionName(c.Name, "event_status/"+instC+"/instance-event-0d59937288b749b32")}}},
		},
		{
			name:     "should skip a NodeClaim already being deleted and one not launched",
			claims:   []v1.NodeClaim{nodeClaim("default-aaaaa", instA, deleting), nodeClaim("default-unlaunched", "", unlaunched)},
			statuses: []ec2types.InstanceStatus{status(instA, instanceImpaired(now.Add(-5*time.Minute)))},
			wantOut:  Output{Checked: 0, Reported: 0, Decisions: []Decision{}},
		},
		{
			name:     "should ignore instances that are not running (EC2 reports none for them)",
			claims:   []v1.NodeClaim{a},
			statuses: nil,
			wantOut:  Output{Checked: 1, Reported: 0, Decisions: []Decision{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, st := newFakeStore(tt.claims...), &fakeStarter{}
			ec := newFakeEC2(tt.statuses...)
			for _, c := range tt.claims {
				if id, err := ddbstore.InstanceIDFromProviderID(c.Status.ProviderID); err == nil {
					ec.known[id] = true
				}
			}
			out, err := newHandler(t, s, ec, st).Handle(t.Context(), json.RawMessage(`{}`))
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantOut, out); diff != "" {
				t.Errorf("Handle() output mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, st.execs); diff != "" {
				t.Errorf("executions mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvents, s.eventList()); diff != "" {
				t.Errorf("event records mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHandleRepeatedPolls proves a repeated poll starts one execution: the
// next minutes find the occurrence handled, and a new failure after a
// recovery starts another.
func TestHandleRepeatedPolls(t *testing.T) {
	a := nodeClaim("default-aaaaa", instA)
	s, st := newFakeStore(a), &fakeStarter{}
	ec := newFakeEC2(status(instA, instanceImpaired(now.Add(-3*time.Minute))))
	h := newHandler(t, s, ec, st)
	for i := range 3 {
		at := now.Add(time.Duration(i) * time.Minute)
		h.now = func() time.Time { return at }
		out, err := h.Handle(t.Context(), nil)
		if err != nil {
			t.Fatalf("poll %d: Handle() error = %v", i+1, err)
		}
		if got, want := out.Decisions[0].Duplicate, i > 0; got != want {
			t.Errorf("poll %d: Duplicate = %v, want %v", i+1, got, want)
		}
	}
	if st.calls != 1 || len(st.execs) != 1 {
		t.Errorf("StartExecution called %d times for %d executions, want 1 and 1", st.calls, len(st.execs))
	}

	// The check recovers, then fails again: a new occurrence.
	ec.statuses[instA] = status(instA, instanceImpaired(now.Add(10*time.Minute)))
	later := now.Add(13 * time.Minute)
	h.now = func() time.Time { return later }
	if _, err := h.Handle(t.Context(), nil); err != nil {
		t.Fatalf("Handle() after a new failure: error = %v", err)
	}
	if len(st.execs) != 2 {
		t.Fatalf("executions = %+v, want a second one for the new failure", st.execs)
	}
	if got, want := st.execs[1].Input.Deadline, later; !got.Equal(want) {
		t.Errorf("second execution's deadline = %v, want the poll's time %v", got, want)
	}
}

// TestHandleBatchesInstanceIDs checks that 250 instances are asked about
// in calls of at most 100 IDs, each instance once.
func TestHandleBatchesInstanceIDs(t *testing.T) {
	var claims []v1.NodeClaim
	var statuses []ec2types.InstanceStatus
	for i := range 250 {
		id := fmt.Sprintf("i-%017x", i+1)
		claims = append(claims, nodeClaim(fmt.Sprintf("default-%03d", i), id))
		statuses = append(statuses, status(id))
	}
	ec := newFakeEC2(statuses...)
	out, err := newHandler(t, newFakeStore(claims...), ec, &fakeStarter{}).Handle(t.Context(), nil)
	if err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	var sizes []int
	seen := map[string]int{}
	for _, in := range ec.inputs {
		sizes = append(sizes, len(in))
		for _, id := range in {
			seen[id]++
		}
	}
	if diff := cmp.Diff([]int{100, 100, 50}, sizes); diff != "" {
		t.Errorf("call sizes mismatch (-want +got):\n%s", diff)
	}
	if len(seen) != 250 || out.Checked != 250 || out.Reported != 250 {
		t.Errorf("asked about %d distinct instances, Checked %d, Reported %d; want 250 each", len(seen), out.Checked, out.Reported)
	}
}

// TestHandleInstanceGoneFromEC2 checks that an instance EC2 no longer
// knows does not hide the others of its call.
func TestHandleInstanceGoneFromEC2(t *testing.T) {
	a, b, c := nodeClaim("default-aaaaa", instA), nodeClaim("default-bbbbb", instB), nodeClaim("default-ccccc", instC)
	ec := newFakeEC2(status(instA, systemImpaired(now.Add(-10*time.Minute))))
	st := &fakeStarter{}
	out, err := newHandler(t, newFakeStore(a, b, c), ec, st).Handle(t.Context(), nil)
	if err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	if len(st.execs) != 1 || st.execs[0].Input.InstanceID != instA {
		t.Errorf("executions = %+v, want one for %s", st.execs, instA)
	}
	wantCalls := [][]string{{instC, instA, instB}, {instA}}
	slices.Sort(wantCalls[0])
	if diff := cmp.Diff(wantCalls, ec.inputs); diff != "" {
		t.Errorf("DescribeInstanceStatus calls mismatch (-want +got):\n%s", diff)
	}
	if out.Checked != 3 || out.Reported != 1 {
		t.Errorf("Checked %d, Reported %d; want 3 and 1", out.Checked, out.Reported)
	}
}

func TestHandleErrors(t *testing.T) {
	a, b := nodeClaim("default-aaaaa", instA), nodeClaim("default-bbbbb", instB)
	throttle := &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
	tests := []struct {
		name      string
		setup     func(*fakeStore, *fakeEC2, *fakeStarter)
		wantType  string
		wantExecs int
		wantKeys  int
	}{
		{name: "a NodeClaim listing that fails", setup: func(s *fakeStore, _ *fakeEC2, _ *fakeStarter) {
			s.failMethod["ListNodeClaims"] = errors.New("dynamodb unavailable")
		}, wantType: workflow.ErrInternal},
		{name: "a throttled DescribeInstanceStatus", setup: func(_ *fakeStore, e *fakeEC2, _ *fakeStarter) { e.err = throttle },
			wantType: workflow.ErrThrottled},
		{name: "a StartExecution that fails leaves the occurrence unrecorded for the next run", setup: func(_ *fakeStore, _ *fakeEC2, st *fakeStarter) {
			st.err = errors.New("states unavailable")
		}, wantType: workflow.ErrInternal},
		{name: "an event record that fails leaves the occurrence unrecorded for the next run", setup: func(s *fakeStore, _ *fakeEC2, _ *fakeStarter) {
			s.failMethod["PutEvent"] = errors.New("dynamodb unavailable")
		}, wantType: workflow.ErrInternal, wantExecs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, st := newFakeStore(a, b), &fakeStarter{}
			ec := newFakeEC2(status(instA, instanceImpaired(now.Add(-5*time.Minute))), status(instB, systemImpaired(now.Add(-5*time.Minute))))
			tt.setup(s, ec, st)
			_, err := newHandler(t, s, ec, st).Handle(t.Context(), nil)
			var ie messages.InvokeResponse_Error
			if !errors.As(err, &ie) || ie.Type != tt.wantType {
				t.Fatalf("Handle() error = %#v, want a workflow error %s", err, tt.wantType)
			}
			if len(st.execs) != tt.wantExecs {
				t.Errorf("executions = %d, want %d (one failure must not stop the others)", len(st.execs), tt.wantExecs)
			}
			if len(s.keys) != tt.wantKeys {
				t.Errorf("recorded occurrences = %d, want %d", len(s.keys), tt.wantKeys)
			}
		})
	}
}

func TestMissingInstances(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{name: "one instance", err: &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: "The instance ID 'i-0a1b2c3d4e5f60718' does not exist"},
			want: []string{instA}},
		{name: "several instances", err: fmt.Errorf("describe: %w", &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound",
			Message: "The instance IDs 'i-0a1b2c3d4e5f60718, i-0123abcd' do not exist"}), want: []string{instA, "i-0123abcd"}},
		{name: "another error", err: errors.New("i-0a1b2c3d4e5f60718 is fine")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, missingInstances(tt.err)); diff != "" {
				t.Errorf("missingInstances() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	got, err := LoadConfig(mapEnv(map[string]string{
		"CLUSTER_NAME": "prod", "TABLE_NAME": "nw", "STATE_MACHINE_ARN": "arn:aws:states:us-west-2:111122223333:stateMachine:interruption",
		"IDEMPOTENCY_TTL": "2h", "EVENT_TTL": "30m", "LOG_LEVEL": "debug",
	}))
	if err != nil {
		t.Fatalf("LoadConfig() error = %v", err)
	}
	want := Config{Cluster: "prod", Table: "nw", StateMachineARN: "arn:aws:states:us-west-2:111122223333:stateMachine:interruption",
		IdempotencyTTL: 2 * time.Hour, EventTTL: 30 * time.Minute, LogLevel: slog.LevelDebug}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig() mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	_, err := LoadConfig(mapEnv(map[string]string{"EVENT_TTL": "soon"}))
	if err == nil {
		t.Fatal("LoadConfig() error = nil, want one")
	}
	for _, name := range []string{"CLUSTER_NAME", "TABLE_NAME", "STATE_MACHINE_ARN", "EVENT_TTL"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("LoadConfig() error = %v, want it to name %s", err, name)
		}
	}
}
