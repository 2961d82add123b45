package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sivchari/kumo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/interruption"
	"github.com/nodewright/nodewright/shared/workflow"
)

// now is the handler's clock in the tests.
var now = time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)

// Events of shared/interruption/testdata, the realistic EventBridge events
// every test delivers, and the facts the tests need about them.
const (
	spotFile      = "spot-interruption-warning.json"
	spotEventID   = "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7"
	spotInstance  = "i-0b8f7e6d5c4a39281"
	rebalanceFile = "rebalance-recommendation.json"
	rebalanceID   = "9a3e51b2-77c4-4e0a-b1d6-5f28c0e4a913"
	stateInstance = "i-03c5a7e9b1d2f4068"
	healthFile    = "health-ec2-scheduled-change.json"
	healthEventID = "7d2b0c61-f3e8-4a9d-8c1b-6e5f4a3d2c10"
	healthA       = "i-0a1b2c3d4e5f60718"
	healthB       = "i-0f9e8d7c6b5a40312"
	crFile        = "capacity-reservation-interruption-warning.json"
	crEventID     = "1b3d5f7a-9c0e-4a2b-8d4f-6a8c0e2b4d6f"
	crInstance    = "i-0d4c3b2a1f0e9d8c7"
)

var (
	spotTime   = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	stateTime  = time.Date(2026, 3, 14, 10, 2, 41, 0, time.UTC)
	healthTime = time.Date(2026, 3, 12, 16, 40, 0, 0, time.UTC)
	crTime     = time.Date(2026, 3, 14, 11, 30, 0, 0, time.UTC)
)

func body(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "interruption", "testdata", file))
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	return string(b)
}

// record is an SQS record carrying file's event.
func record(t *testing.T, messageID, file string) events.SQSMessage {
	t.Helper()
	return events.SQSMessage{MessageId: messageID, Body: body(t, file), EventSource: "aws:sqs"}
}

func batch(records ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: records} }

// nodeClaim is a launched and registered Spot NodeClaim on instanceID.
func nodeClaim(name, instanceID string, opts ...func(*v1.NodeClaim)) v1.NodeClaim {
	c := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			v1.LabelNodePool:     "default",
			v1.LabelCapacityType: v1.CapacityTypeSpot,
			v1.LabelInstanceType: "m5.large",
			v1.LabelTopologyZone: "us-west-2a",
		}},
		Status: v1.NodeClaimStatus{NodeName: "node-" + name, ProviderID: "aws:///us-west-2a/" + instanceID},
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func unregistered(c *v1.NodeClaim) { c.Status.NodeName = "" }
func deleting(c *v1.NodeClaim) {
	ts := metav1.NewTime(now.Add(-time.Minute))
	c.DeletionTimestamp = &ts
}
func reserved(c *v1.NodeClaim) {
	c.Labels[v1.LabelCapacityType] = v1.CapacityTypeReserved
	c.Labels[v1.LabelCapacityReservationID] = "cr-0a1b2c3d4e5f60718"
	c.Labels[v1.LabelCapacityReservationType] = v1.ReservationTypeDefault
}
func withoutZone(c *v1.NodeClaim) { delete(c.Labels, v1.LabelTopologyZone) }

type mark struct {
	Key    catalog.OfferingKey
	Reason string
	TTL    time.Duration
}

// fakeStore is the handler's DynamoDB, in memory. failMethod makes a method
// fail; failFind makes FindByInstanceID fail for one instance.
type fakeStore struct {
	mu         sync.Mutex
	claims     map[string]v1.NodeClaim // by instance id
	keys       map[string]time.Time    // event id -> until
	marks      []mark
	events     map[string]ddbstore.Event
	failMethod map[string]error
	failFind   map[string]error
	writes     int
}

func newFakeStore(claims ...v1.NodeClaim) *fakeStore {
	s := &fakeStore{claims: map[string]v1.NodeClaim{}, keys: map[string]time.Time{}, events: map[string]ddbstore.Event{},
		failMethod: map[string]error{}, failFind: map[string]error{}}
	for _, c := range claims {
		id, err := ddbstore.InstanceIDFromProviderID(c.Status.ProviderID)
		if err != nil {
			panic(err)
		}
		s.claims[id] = c
	}
	return s
}

func (s *fakeStore) FindByInstanceID(_ context.Context, id string) (v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := cmpOr(s.failFind[id], s.failMethod["FindByInstanceID"]); err != nil {
		return v1.NodeClaim{}, err
	}
	c, ok := s.claims[id]
	if !ok {
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by instance %s: %w", id, ddbstore.ErrNotFound)
	}
	return c, nil
}

func (s *fakeStore) HasIdempotencyKey(_ context.Context, scope, key string, at time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failMethod["HasIdempotencyKey"]; err != nil {
		return false, err
	}
	if scope != ddbstore.ScopeInterruption {
		return false, fmt.Errorf("scope %q, want %q", scope, ddbstore.ScopeInterruption)
	}
	until, ok := s.keys[key]
	return ok && until.After(at), nil
}

func (s *fakeStore) ClaimIdempotencyKey(_ context.Context, scope, key string, at time.Time, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failMethod["ClaimIdempotencyKey"]; err != nil {
		return false, err
	}
	if scope != ddbstore.ScopeInterruption {
		return false, fmt.Errorf("scope %q, want %q", scope, ddbstore.ScopeInterruption)
	}
	s.writes++
	if until, ok := s.keys[key]; ok && until.After(at) {
		return true, nil
	}
	s.keys[key] = at.Add(ttl)
	return false, nil
}

func (s *fakeStore) MarkUnavailable(_ context.Context, key catalog.OfferingKey, reason string, _ time.Time, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failMethod["MarkUnavailable"]; err != nil {
		return err
	}
	s.writes++
	s.marks = append(s.marks, mark{Key: key, Reason: reason, TTL: ttl})
	return nil
}

func (s *fakeStore) PutEvent(_ context.Context, e ddbstore.Event, _ time.Time, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failMethod["PutEvent"]; err != nil {
		return err
	}
	if ttl != ddbstore.EventTTL {
		return fmt.Errorf("ttl %v, want %v", ttl, ddbstore.EventTTL)
	}
	s.writes++
	s.events[e.ID] = e
	return nil
}

// eventList returns the recorded events ordered by NodeClaim, then reason.
func (s *fakeStore) eventList() []ddbstore.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ddbstore.Event{}
	for _, e := range s.events {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b ddbstore.Event) int {
		return strings.Compare(a.NodeClaim+"/"+a.Reason, b.NodeClaim+"/"+b.Reason)
	})
	return out
}

func cmpOr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fakeStarter is Step Functions: one execution per name, whatever the
// input of later starts. fail makes the start of a name fail, as many times
// as the slice is long.
type fakeStarter struct {
	mu         sync.Mutex
	executions map[string]workflow.InterruptionInput
	calls      int
	fail       map[string][]error
}

func newFakeStarter() *fakeStarter {
	return &fakeStarter{executions: map[string]workflow.InterruptionInput{}, fail: map[string][]error{}}
}

func (f *fakeStarter) Start(_ context.Context, name string, input any) (sfnstarter.Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if errs := f.fail[name]; len(errs) > 0 {
		f.fail[name] = errs[1:]
		return sfnstarter.Execution{}, errs[0]
	}
	in, ok := input.(workflow.InterruptionInput)
	if !ok {
		return sfnstarter.Execution{}, fmt.Errorf("input %T, want workflow.InterruptionInput", input)
	}
	arn := "arn:aws:states:us-west-2:111122223333:execution:interruption:" + name
	if _, ok := f.executions[name]; ok {
		return sfnstarter.Execution{ARN: arn, AlreadyExisted: true}, nil
	}
	f.executions[name] = in
	return sfnstarter.Execution{ARN: arn}, nil
}

func newHandler(t *testing.T, s store, st starter) *Handler {
	t.Helper()
	cfg, err := LoadConfig(mapEnv(map[string]string{
		"CLUSTER_NAME": "test", "TABLE_NAME": "nodewright", "STATE_MACHINE_ARN": "arn:aws:states:us-west-2:111122223333:stateMachine:interruption",
	}))
	if err != nil {
		t.Fatalf("LoadConfig() error = %v", err)
	}
	return &Handler{cfg: cfg, store: s, starter: st, log: slog.New(slog.NewJSONHandler(t.Output(), nil)), now: func() time.Time { return now }}
}

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// entry is one interruption execution: its name and input.
type entry struct {
	name  string
	input workflow.InterruptionInput
}

// execution is the interruption execution of c an event must start.
// The event's time is the fixture's time of its kind.
func execution(c v1.NodeClaim, instanceID, reason, eventID string, deadline time.Time) entry {
	eventTime := map[string]time.Time{
		"spot_interrupted": spotTime, "scheduled_change": healthTime, "capacity_reservation_interrupted": crTime,
		"instance_stopped": stateTime, "instance_terminated": stateTime,
	}[reason]
	return entry{interruption.ExecutionName(c.Name, eventID), workflow.InterruptionInput{
		NodeClaim: c.Name, Node: c.Status.NodeName, InstanceID: instanceID, Reason: reason, EventID: eventID, Deadline: deadline,
		EventTime: eventTime,
	}}
}

func executions(entries ...entry) map[string]workflow.InterruptionInput {
	out := map[string]workflow.InterruptionInput{}
	for _, e := range entries {
		out[e.name] = e.input
	}
	return out
}

// event is an event record the handler must write (its ID is checked by
// the redelivery tests).
func event(c v1.NodeClaim, at time.Time, n interruption.Notice) ddbstore.Event {
	return ddbstore.Event{Time: at, Type: n.Type, Reason: n.Reason, Message: n.Message, NodeClaim: c.Name, Node: c.Status.NodeName}
}

var ignoreEventID = cmpopts.IgnoreFields(ddbstore.Event{}, "ID")

func notice(k interruption.Kind) interruption.Notice { return k.Handling().Notice }

func TestHandleEveryEventType(t *testing.T) {
	spotClaim := nodeClaim("default-x7k2p", spotInstance)
	stateClaim := nodeClaim("default-q9w4z", stateInstance)
	claimA, claimB := nodeClaim("default-aaaaa", healthA), nodeClaim("default-bbbbb", healthB)
	crClaim := nodeClaim("reserved-r2d2c", crInstance, reserved)
	terminating := interruption.TerminatingNotice()
	spotTTL := catalog.UnavailableOfferingsTTL

	type want struct {
		outcome    outcome
		executions map[string]workflow.InterruptionInput
		marks      []mark
		events     []ddbstore.Event
		handledIDs []string
	}
	stateCase := func(file, eventID string, kind interruption.Kind) struct {
		name   string
		file   string
		claims []v1.NodeClaim
		want   want
	} {
		return struct {
			name   string
			file   string
			claims []v1.NodeClaim
			want   want
		}{
			name: "should drain the node of an instance in " + strings.TrimSuffix(strings.TrimPrefix(file, "state-change-"), ".json") + " state",
			file: file, claims: []v1.NodeClaim{stateClaim},
			want: want{
				outcome:    outcomeActed,
				executions: executions(execution(stateClaim, stateInstance, string(kind), eventID, stateTime)),
				events:     []ddbstore.Event{event(stateClaim, stateTime, notice(kind)), event(stateClaim, stateTime, terminating)},
				handledIDs: []string{eventID},
			},
		}
	}
	tests := []struct {
		name   string
		file   string
		claims []v1.NodeClaim
		want   want
	}{
		{
			name: "should drain a Spot-interrupted node at once and mark its offering unavailable",
			file: spotFile, claims: []v1.NodeClaim{spotClaim},
			want: want{
				outcome:    outcomeActed,
				executions: executions(execution(spotClaim, spotInstance, "spot_interrupted", spotEventID, spotTime.Add(2*time.Minute))),
				marks:      []mark{{Key: catalog.OfferingKey{CapacityType: "spot", InstanceType: "m5.large", Zone: "us-west-2a"}, Reason: "spot_interrupted", TTL: spotTTL}},
				events:     []ddbstore.Event{event(spotClaim, spotTime, notice(interruption.KindSpotInterruption)), event(spotClaim, spotTime, terminating)},
				handledIDs: []string{spotEventID},
			},
		},
		{
			name: "should drain a Spot-interrupted NodeClaim that never registered, without a node",
			file: spotFile, claims: []v1.NodeClaim{nodeClaim("default-x7k2p", spotInstance, unregistered)},
			want: want{
				outcome:    outcomeActed,
				executions: executions(execution(nodeClaim("default-x7k2p", spotInstance, unregistered), spotInstance, "spot_interrupted", spotEventID, spotTime.Add(2*time.Minute))),
				marks:      []mark{{Key: catalog.OfferingKey{CapacityType: "spot", InstanceType: "m5.large", Zone: "us-west-2a"}, Reason: "spot_interrupted", TTL: spotTTL}},
				events: []ddbstore.Event{
					event(nodeClaim("default-x7k2p", spotInstance, unregistered), spotTime, notice(interruption.KindSpotInterruption)),
					event(nodeClaim("default-x7k2p", spotInstance, unregistered), spotTime, terminating),
				},
				handledIDs: []string{spotEventID},
			},
		},
		{
			name: "should not start a second termination of a NodeClaim already being deleted, but still mark and record",
			file: spotFile, claims: []v1.NodeClaim{nodeClaim("default-x7k2p", spotInstance, deleting)},
			want: want{
				outcome:    outcomeActed,
				executions: executions(),
				marks:      []mark{{Key: catalog.OfferingKey{CapacityType: "spot", InstanceType: "m5.large", Zone: "us-west-2a"}, Reason: "spot_interrupted", TTL: spotTTL}},
				events:     []ddbstore.Event{event(spotClaim, spotTime, notice(interruption.KindSpotInterruption))},
				handledIDs: []string{spotEventID},
			},
		},
		{
			name: "should not mark an offering when the NodeClaim has no zone label",
			file: spotFile, claims: []v1.NodeClaim{nodeClaim("default-x7k2p", spotInstance, withoutZone)},
			want: want{
				outcome:    outcomeActed,
				executions: executions(execution(spotClaim, spotInstance, "spot_interrupted", spotEventID, spotTime.Add(2*time.Minute))),
				events:     []ddbstore.Event{event(spotClaim, spotTime, notice(interruption.KindSpotInterruption)), event(spotClaim, spotTime, terminating)},
				handledIDs: []string{spotEventID},
			},
		},
		{
			name: "should only record an event for a rebalance recommendation",
			file: rebalanceFile, claims: []v1.NodeClaim{spotClaim},
			want: want{
				outcome:    outcomeActed,
				executions: executions(),
				events:     []ddbstore.Event{event(spotClaim, time.Date(2026, 3, 14, 9, 21, 7, 0, time.UTC), notice(interruption.KindRebalanceRecommendation))},
				handledIDs: []string{rebalanceID},
			},
		},
		stateCase("state-change-stopping.json", "82605afa-5440-5589-b6a6-fec18447d189", interruption.KindInstanceStopped),
		stateCase("state-change-stopped.json", "b7c00c06-406d-5ba4-982d-c6e99896736f", interruption.KindInstanceStopped),
		stateCase("state-change-shutting-down.json", "ac3d4ef0-9e75-56fa-8aba-297191622df1", interruption.KindInstanceTerminated),
		stateCase("state-change-terminated.json", "1bae5f04-2283-53d1-8145-959f46187859", interruption.KindInstanceTerminated),
		{
			name: "should ignore an instance entering the pending state",
			file: "state-change-pending.json", claims: []v1.NodeClaim{stateClaim},
			want: want{outcome: outcomeIgnored, executions: executions(), events: []ddbstore.Event{}},
		},
		{
			name: "should ignore an instance entering the running state",
			file: "state-change-running.json", claims: []v1.NodeClaim{stateClaim},
			want: want{outcome: outcomeIgnored, executions: executions(), events: []ddbstore.Event{}},
		},
		{
			name: "should drain every node an EC2 scheduled change names",
			file: healthFile, claims: []v1.NodeClaim{claimA, claimB},
			want: want{
				outcome: outcomeActed,
				executions: executions(
					execution(claimA, healthA, "scheduled_change", healthEventID, time.Date(2026, 3, 16, 16, 0, 0, 0, time.UTC)),
					execution(claimB, healthB, "scheduled_change", healthEventID, time.Date(2026, 3, 16, 16, 0, 0, 0, time.UTC)),
				),
				events: []ddbstore.Event{
					event(claimA, healthTime, notice(interruption.KindScheduledChange)), event(claimA, healthTime, terminating),
					event(claimB, healthTime, notice(interruption.KindScheduledChange)), event(claimB, healthTime, terminating),
				},
				handledIDs: []string{healthEventID},
			},
		},
		{
			name: "should drain only the nodes of the cluster an EC2 scheduled change names",
			file: healthFile, claims: []v1.NodeClaim{claimB},
			want: want{
				outcome:    outcomeActed,
				executions: executions(execution(claimB, healthB, "scheduled_change", healthEventID, time.Date(2026, 3, 16, 16, 0, 0, 0, time.UTC))),
				events:     []ddbstore.Event{event(claimB, healthTime, notice(interruption.KindScheduledChange)), event(claimB, healthTime, terminating)},
				handledIDs: []string{healthEventID},
			},
		},
		{
			name: "should acknowledge and ignore an EC2 Health issue",
			file: "health-ec2-issue.json", claims: []v1.NodeClaim{claimA},
			want: want{outcome: outcomeIgnored, executions: executions(), events: []ddbstore.Event{}},
		},
		{
			name: "should acknowledge and ignore a Health event of another service",
			file: "health-rds-scheduled-change.json", claims: []v1.NodeClaim{claimA},
			want: want{outcome: outcomeIgnored, executions: executions(), events: []ddbstore.Event{}},
		},
		{
			name: "should drain a node whose capacity reservation is reclaimed and mark that reservation unavailable",
			file: crFile, claims: []v1.NodeClaim{crClaim},
			want: want{
				outcome:    outcomeActed,
				executions: executions(execution(crClaim, crInstance, "capacity_reservation_interrupted", crEventID, time.Date(2026, 3, 14, 11, 32, 0, 0, time.UTC))),
				marks: []mark{{Key: catalog.OfferingKey{CapacityType: "reserved", InstanceType: "m5.large", Zone: "us-west-2a", ReservationID: "cr-0a1b2c3d4e5f60718"},
					Reason: "capacity_reservation_interrupted", TTL: spotTTL}},
				events:     []ddbstore.Event{event(crClaim, crTime, notice(interruption.KindCapacityReservationInterruption)), event(crClaim, crTime, terminating)},
				handledIDs: []string{crEventID},
			},
		},
		{
			name: "should acknowledge and ignore a Spot warning for an instance that is not the cluster's",
			file: spotFile, claims: []v1.NodeClaim{stateClaim},
			want: want{outcome: outcomeIgnored, executions: executions(), events: []ddbstore.Event{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, st := newFakeStore(tt.claims...), newFakeStarter()
			h := newHandler(t, s, st)
			resp, sum := h.handle(t.Context(), batch(record(t, "m-1", tt.file)))
			if diff := cmp.Diff(events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}, resp); diff != "" {
				t.Errorf("response mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[outcome]int{tt.want.outcome: 1}, sum.Outcomes); diff != "" {
				t.Errorf("outcomes mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want.executions, st.executions); diff != "" {
				t.Errorf("executions mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want.marks, s.marks); diff != "" {
				t.Errorf("offerings marked unavailable mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want.events, s.eventList(), ignoreEventID); diff != "" {
				t.Errorf("event records mismatch (-want +got):\n%s", diff)
			}
			var handled []string
			for id := range s.keys {
				handled = append(handled, id)
			}
			if diff := cmp.Diff(tt.want.handledIDs, handled); diff != "" {
				t.Errorf("event ids recorded as handled mismatch (-want +got):\n%s", diff)
			}
			if tt.want.outcome == outcomeIgnored && s.writes != 0 {
				t.Errorf("%d writes for an ignored event, want none", s.writes)
			}
		})
	}
}

func TestHandleRedelivery(t *testing.T) {
	claim := nodeClaim("default-x7k2p", spotInstance)
	name := execution(claim, spotInstance, "spot_interrupted", spotEventID, time.Time{}).name
	tests := []struct {
		name string
		// deliveries are the batches delivered one after the other.
		deliveries []events.SQSEvent
		failStart  []error
		// wantFailures are the failed message ids per delivery.
		wantFailures [][]string
		wantOutcomes []map[outcome]int
		wantStarts   int
	}{
		{
			name:         "should start one execution when the same event is delivered twice",
			deliveries:   []events.SQSEvent{batch(record(t, "m-1", spotFile)), batch(record(t, "m-2", spotFile))},
			wantFailures: [][]string{nil, nil},
			wantOutcomes: []map[outcome]int{{outcomeActed: 1}, {outcomeDuplicate: 1}},
			wantStarts:   1,
		},
		{
			name:         "should start one execution when the same event is delivered twice in one batch",
			deliveries:   []events.SQSEvent{batch(record(t, "m-1", spotFile), record(t, "m-2", spotFile))},
			wantFailures: [][]string{nil},
			// Both copies may act before either records the id; the
			// fixed execution name keeps it to one execution.
			wantOutcomes: nil,
			wantStarts:   -1,
		},
		{
			name:         "should finish on redelivery an event whose execution failed to start",
			deliveries:   []events.SQSEvent{batch(record(t, "m-1", spotFile)), batch(record(t, "m-1", spotFile))},
			failStart:    []error{&smithy.GenericAPIError{Code: "ThrottlingException"}},
			wantFailures: [][]string{{"m-1"}, nil},
			wantOutcomes: []map[outcome]int{{outcomeFailed: 1}, {outcomeActed: 1}},
			wantStarts:   2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, st := newFakeStore(claim), newFakeStarter()
			st.fail[name] = tt.failStart
			h := newHandler(t, s, st)
			for i, d := range tt.deliveries {
				resp, sum := h.handle(t.Context(), d)
				var failed []string
				for _, f := range resp.BatchItemFailures {
					failed = append(failed, f.ItemIdentifier)
				}
				if diff := cmp.Diff(tt.wantFailures[i], failed); diff != "" {
					t.Errorf("delivery %d: failures mismatch (-want +got):\n%s", i+1, diff)
				}
				if tt.wantOutcomes != nil {
					if diff := cmp.Diff(tt.wantOutcomes[i], sum.Outcomes); diff != "" {
						t.Errorf("delivery %d: outcomes mismatch (-want +got):\n%s", i+1, diff)
					}
				}
			}
			if len(st.executions) != 1 {
				t.Errorf("%d executions, want 1: %v", len(st.executions), st.executions)
			}
			if tt.wantStarts >= 0 && st.calls != tt.wantStarts {
				t.Errorf("StartExecution called %d times, want %d", st.calls, tt.wantStarts)
			}
			// Redelivery rewrites the same two records.
			if got := len(s.eventList()); got != 2 {
				t.Errorf("%d event records, want 2 (SpotInterrupted, TerminatingOnInterruption)", got)
			}
			if _, ok := s.keys[spotEventID]; !ok {
				t.Errorf("event id %s not recorded as handled", spotEventID)
			}
		})
	}
}

func TestHandlePoisonMessages(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{name: "should drop a truncated body", body: "malformed-truncated.json"},
		{name: "should drop a Spot warning without an instance id", body: "malformed-spot-without-instance.json"},
		{name: "should drop an event type it does not handle", body: "unknown-spot-request-fulfillment.json"},
		{name: "should drop an empty body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, st := newFakeStore(nodeClaim("default-x7k2p", spotInstance)), newFakeStarter()
			h := newHandler(t, s, st)
			rec := events.SQSMessage{MessageId: "m-1"}
			if tt.body != "" {
				rec.Body = body(t, tt.body)
			}
			resp, sum := h.handle(t.Context(), batch(rec))
			if len(resp.BatchItemFailures) != 0 {
				t.Errorf("failures = %v, want none: a poison message is acknowledged", resp.BatchItemFailures)
			}
			if diff := cmp.Diff(map[outcome]int{outcomeDropped: 1}, sum.Outcomes); diff != "" {
				t.Errorf("outcomes mismatch (-want +got):\n%s", diff)
			}
			if s.writes != 0 || st.calls != 0 {
				t.Errorf("%d writes and %d starts for a poison message, want none", s.writes, st.calls)
			}
		})
	}
}

func TestHandlePartialFailures(t *testing.T) {
	spotClaim := nodeClaim("default-x7k2p", spotInstance)
	rebalanceClaim := nodeClaim("default-x7k2p", spotInstance)
	stateClaim := nodeClaim("default-q9w4z", stateInstance)
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
	spotName := execution(spotClaim, spotInstance, "spot_interrupted", spotEventID, time.Time{}).name

	tests := []struct {
		name   string
		claims []v1.NodeClaim
		batch  func(t *testing.T) events.SQSEvent
		break_ func(s *fakeStore, st *fakeStarter)
		// wantFailed are the message ids to redeliver.
		wantFailed   []string
		wantOutcomes map[outcome]int
	}{
		{
			name:   "should report only the failing record of a batch with a poison, a failing and a good record",
			claims: []v1.NodeClaim{spotClaim, stateClaim},
			batch: func(t *testing.T) events.SQSEvent {
				return batch(record(t, "m-poison", "malformed-truncated.json"), record(t, "m-spot", spotFile), record(t, "m-stop", "state-change-stopping.json"))
			},
			break_:       func(_ *fakeStore, st *fakeStarter) { st.fail[spotName] = []error{throttled} },
			wantFailed:   []string{"m-spot"},
			wantOutcomes: map[outcome]int{outcomeDropped: 1, outcomeFailed: 1, outcomeActed: 1},
		},
		{
			name:   "should redeliver an event whose NodeClaim lookup fails",
			claims: []v1.NodeClaim{spotClaim, stateClaim},
			batch: func(t *testing.T) events.SQSEvent {
				return batch(record(t, "m-spot", spotFile), record(t, "m-stop", "state-change-stopping.json"))
			},
			break_:       func(s *fakeStore, _ *fakeStarter) { s.failFind[spotInstance] = throttled },
			wantFailed:   []string{"m-spot"},
			wantOutcomes: map[outcome]int{outcomeFailed: 1, outcomeActed: 1},
		},
		{
			name:   "should redeliver an event whose handled check fails",
			claims: []v1.NodeClaim{spotClaim},
			batch:  func(t *testing.T) events.SQSEvent { return batch(record(t, "m-spot", spotFile)) },
			break_: func(s *fakeStore, _ *fakeStarter) {
				s.failMethod["HasIdempotencyKey"] = throttled
			},
			wantFailed:   []string{"m-spot"},
			wantOutcomes: map[outcome]int{outcomeFailed: 1},
		},
		{
			name:   "should redeliver a Spot warning whose offering cannot be marked",
			claims: []v1.NodeClaim{spotClaim},
			batch:  func(t *testing.T) events.SQSEvent { return batch(record(t, "m-spot", spotFile)) },
			break_: func(s *fakeStore, _ *fakeStarter) {
				s.failMethod["MarkUnavailable"] = throttled
			},
			wantFailed:   []string{"m-spot"},
			wantOutcomes: map[outcome]int{outcomeFailed: 1},
		},
		{
			name:   "should redeliver a rebalance recommendation whose event cannot be recorded",
			claims: []v1.NodeClaim{rebalanceClaim},
			batch:  func(t *testing.T) events.SQSEvent { return batch(record(t, "m-rebalance", rebalanceFile)) },
			break_: func(s *fakeStore, _ *fakeStarter) {
				s.failMethod["PutEvent"] = throttled
			},
			wantFailed:   []string{"m-rebalance"},
			wantOutcomes: map[outcome]int{outcomeFailed: 1},
		},
		{
			name:   "should redeliver an event whose id cannot be recorded as handled",
			claims: []v1.NodeClaim{spotClaim},
			batch:  func(t *testing.T) events.SQSEvent { return batch(record(t, "m-spot", spotFile)) },
			break_: func(s *fakeStore, _ *fakeStarter) {
				s.failMethod["ClaimIdempotencyKey"] = throttled
			},
			wantFailed:   []string{"m-spot"},
			wantOutcomes: map[outcome]int{outcomeFailed: 1},
		},
		{
			name:   "should acknowledge instances that are not the cluster's next to a failing record",
			claims: []v1.NodeClaim{stateClaim},
			batch: func(t *testing.T) events.SQSEvent {
				return batch(record(t, "m-spot", spotFile), record(t, "m-health", healthFile), record(t, "m-stop", "state-change-stopping.json"))
			},
			break_:       func(s *fakeStore, _ *fakeStarter) { s.failFind[stateInstance] = throttled },
			wantFailed:   []string{"m-stop"},
			wantOutcomes: map[outcome]int{outcomeIgnored: 2, outcomeFailed: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, st := newFakeStore(tt.claims...), newFakeStarter()
			tt.break_(s, st)
			resp, sum := newHandler(t, s, st).handle(t.Context(), tt.batch(t))
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			if diff := cmp.Diff(tt.wantFailed, failed); diff != "" {
				t.Errorf("failed records mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOutcomes, sum.Outcomes); diff != "" {
				t.Errorf("outcomes mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHandleNeverFailsTheBatch: Handle reports failed records and returns
// no error, which would make SQS redeliver the whole batch.
func TestHandleNeverFailsTheBatch(t *testing.T) {
	s, st := newFakeStore(nodeClaim("default-x7k2p", spotInstance)), newFakeStarter()
	s.failMethod["FindByInstanceID"] = &smithy.GenericAPIError{Code: "InternalServerError"}
	resp, err := newHandler(t, s, st).Handle(t.Context(), batch(record(t, "m-1", spotFile), record(t, "m-2", rebalanceFile)))
	if err != nil {
		t.Fatalf("Handle() error = %v, want nil", err)
	}
	want := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "m-1"}, {ItemIdentifier: "m-2"}}}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("Handle() mismatch (-want +got):\n%s", diff)
	}
}

func TestHandleCountsKinds(t *testing.T) {
	s, st := newFakeStore(nodeClaim("default-x7k2p", spotInstance)), newFakeStarter()
	_, sum := newHandler(t, s, st).handle(t.Context(), batch(
		record(t, "m-1", spotFile), record(t, "m-2", rebalanceFile), record(t, "m-3", "state-change-running.json"),
		record(t, "m-4", "malformed-truncated.json"), record(t, "m-5", "health-rds-scheduled-change.json"),
	))
	want := map[interruption.Kind]int{
		interruption.KindSpotInterruption: 1, interruption.KindRebalanceRecommendation: 1, interruption.KindNoOp: 2,
	}
	if diff := cmp.Diff(want, sum.Kinds); diff != "" {
		t.Errorf("kinds mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadConfig(t *testing.T) {
	required := map[string]string{
		"CLUSTER_NAME": "prod", "TABLE_NAME": "nodewright", "STATE_MACHINE_ARN": "arn:aws:states:us-west-2:111122223333:stateMachine:interruption",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range required {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{
			name: "should default the optional settings",
			env:  required,
			want: Config{Cluster: "prod", Table: "nodewright", StateMachineARN: required["STATE_MACHINE_ARN"],
				IdempotencyTTL: 24 * time.Hour, EventTTL: time.Hour, Parallelism: 10, LogLevel: slog.LevelInfo},
		},
		{
			name: "should read every setting",
			env:  with(map[string]string{"IDEMPOTENCY_TTL": "2h", "EVENT_TTL": "30m", "PARALLELISM": "4", "LOG_LEVEL": "debug"}),
			want: Config{Cluster: "prod", Table: "nodewright", StateMachineARN: required["STATE_MACHINE_ARN"],
				IdempotencyTTL: 2 * time.Hour, EventTTL: 30 * time.Minute, Parallelism: 4, LogLevel: slog.LevelDebug},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadConfig(mapEnv(tt.env))
			if err != nil {
				t.Fatalf("LoadConfig() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LoadConfig() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// wantNames are the settings the error must name.
		wantNames []string
	}{
		{name: "should name every missing required setting", env: map[string]string{}, wantNames: []string{"CLUSTER_NAME", "TABLE_NAME", "STATE_MACHINE_ARN"}},
		{
			name: "should refuse an idempotency TTL shorter than the queue's redelivery window",
			env: map[string]string{"CLUSTER_NAME": "prod", "TABLE_NAME": "t", "STATE_MACHINE_ARN": "arn:aws:states:us-west-2:1:stateMachine:i",
				"IDEMPOTENCY_TTL": "1m"},
			wantNames: []string{"IDEMPOTENCY_TTL"},
		},
		{
			name: "should refuse a parallelism outside 1 to 100",
			env: map[string]string{"CLUSTER_NAME": "prod", "TABLE_NAME": "t", "STATE_MACHINE_ARN": "arn:aws:states:us-west-2:1:stateMachine:i",
				"PARALLELISM": "0"},
			wantNames: []string{"PARALLELISM"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(mapEnv(tt.env))
			if err == nil {
				t.Fatal("LoadConfig() error = nil, want an error")
			}
			for _, n := range tt.wantNames {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("LoadConfig() error = %v, want it to name %s", err, n)
				}
			}
		})
	}
}

func TestEventRecordIDsAreStableAndDistinct(t *testing.T) {
	a := eventRecordID("e-1", "default-x7k2p", "SpotInterrupted")
	if a != eventRecordID("e-1", "default-x7k2p", "SpotInterrupted") {
		t.Error("eventRecordID() is not deterministic")
	}
	others := []string{
		eventRecordID("e-2", "default-x7k2p", "SpotInterrupted"),
		eventRecordID("e-1", "default-q9w4z", "SpotInterrupted"),
		eventRecordID("e-1", "default-x7k2p", "TerminatingOnInterruption"),
	}
	for _, o := range others {
		if o == a {
			t.Errorf("eventRecordID() = %q for different inputs", o)
		}
	}
	if len(a) != 32 {
		t.Errorf("eventRecordID() = %q, want 32 hex digits", a)
	}
}

// TestHandleWithRealAdapters runs the handler over ddbstore and sfnstarter
// against an in-process kumo (DynamoDB and Step Functions), with the real
// SDK clients: a Spot warning delivered twice and a rebalance
// recommendation.
func TestHandleWithRealAdapters(t *testing.T) {
	ctx := t.Context()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	awsCfg := aws.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	sf := sfn.NewFromConfig(awsCfg, func(o *sfn.Options) { o.BaseEndpoint = aws.String(srv.URL) })

	// kumo keeps state per process: names are the test's own.
	table := "nw-" + t.Name()
	if err := ddbstore.CreateTable(ctx, ddb, table, time.Minute); err != nil {
		t.Fatalf("CreateTable() error = %v", err)
	}
	sm, err := sf.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
		Name:       aws.String("interruption-" + t.Name()),
		Definition: aws.String(`{"StartAt":"Drain","States":{"Drain":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::111122223333:role/interruption"),
		Type:       sfntypes.StateMachineTypeStandard,
	})
	if err != nil {
		t.Fatalf("CreateStateMachine() error = %v", err)
	}
	calls := &awstest.DynamoDBRecorder{Next: ddb, PartitionKey: "pk"}
	st, err := ddbstore.New(calls, table, "test")
	if err != nil {
		t.Fatalf("ddbstore.New() error = %v", err)
	}
	starter, err := sfnstarter.New(sf, aws.ToString(sm.StateMachineArn))
	if err != nil {
		t.Fatalf("sfnstarter.New() error = %v", err)
	}
	claim, err := st.PutNodeClaim(ctx, nodeClaim("default-x7k2p", spotInstance))
	if err != nil {
		t.Fatalf("PutNodeClaim() error = %v", err)
	}
	calls.Reset()
	h := newHandler(t, st, starter)
	// kumo's TTL reaper deletes items whose expiresAt is before the wall
	// clock; a clock ahead of it keeps the reaper away.
	clock := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	h.now = func() time.Time { return clock }

	for i, b := range []events.SQSEvent{
		batch(record(t, "m-1", spotFile)),
		batch(record(t, "m-2", spotFile), record(t, "m-3", rebalanceFile)),
	} {
		resp, err := h.Handle(ctx, b)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: Handle() = %v, %v; want no failures", i+1, resp.BatchItemFailures, err)
		}
	}

	// Every call is within the role the CDK app builds from the schema's
	// access (dynamodb:LeadingKeys): IAM and the store cannot disagree.
	access := ddbstore.Schema().Access["interruption"]
	for _, c := range calls.Denied(func(c awstest.DynamoDBCall) bool { return access.Allows("test", c.Op, c.Index, c.PartitionKey) }) {
		t.Errorf("%s %s %s: not in the interruption function's access (ddbstore.Schema): its role would be denied", c.Op, c.Index, c.PartitionKey)
	}

	list, err := sf.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: sm.StateMachineArn})
	if err != nil {
		t.Fatalf("ListExecutions() error = %v", err)
	}
	want := execution(claim, spotInstance, "spot_interrupted", spotEventID, spotTime.Add(2*time.Minute))
	if len(list.Executions) != 1 || aws.ToString(list.Executions[0].Name) != want.name {
		t.Fatalf("executions = %+v, want one named %s", list.Executions, want.name)
	}
	desc, err := sf.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: list.Executions[0].ExecutionArn})
	if err != nil {
		t.Fatalf("DescribeExecution() error = %v", err)
	}
	wantInput := `{"nodeClaim":"default-x7k2p","node":"node-default-x7k2p","instanceID":"i-0b8f7e6d5c4a39281",` +
		`"reason":"spot_interrupted","eventID":"4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7","deadline":"2026-03-14T09:28:53Z","eventTime":"2026-03-14T09:26:53Z"}`
	if diff := cmp.Diff(wantInput, aws.ToString(desc.Input)); diff != "" {
		t.Errorf("execution input mismatch (-want +got):\n%s", diff)
	}

	offerings, err := st.ListUnavailable(ctx, clock)
	if err != nil {
		t.Fatalf("ListUnavailable() error = %v", err)
	}
	wantOfferings := []ddbstore.UnavailableOffering{{
		OfferingKey: catalog.OfferingKey{CapacityType: "spot", InstanceType: "m5.large", Zone: "us-west-2a"},
		Reason:      "spot_interrupted", Until: clock.Add(catalog.UnavailableOfferingsTTL),
	}}
	if diff := cmp.Diff(wantOfferings, offerings); diff != "" {
		t.Errorf("unavailable offerings mismatch (-want +got):\n%s", diff)
	}

	recorded, err := st.ListEvents(ctx, clock)
	if err != nil {
		t.Fatalf("ListEvents() error = %v", err)
	}
	wantEvents := []ddbstore.Event{
		event(claim, time.Date(2026, 3, 14, 9, 21, 7, 0, time.UTC), notice(interruption.KindRebalanceRecommendation)),
		event(claim, spotTime, notice(interruption.KindSpotInterruption)),
		event(claim, spotTime, interruption.TerminatingNotice()),
	}
	sortEvents := cmpopts.SortSlices(func(a, b ddbstore.Event) bool { return a.Reason < b.Reason })
	if diff := cmp.Diff(wantEvents, recorded, ignoreEventID, sortEvents); diff != "" {
		t.Errorf("event records mismatch (-want +got):\n%s", diff)
	}

	for _, id := range []string{spotEventID, rebalanceID} {
		seen, err := st.HasIdempotencyKey(ctx, ddbstore.ScopeInterruption, id, clock)
		if err != nil || !seen {
			t.Errorf("HasIdempotencyKey(%s) = %v, %v; want the event recorded as handled", id, seen, err)
		}
	}
}

// TestHandleMarksOnlyTheInterruptedReservation checks the
// capacity-reservation warning per reservation (karpenter-spec section
// 8.2): the mark names the NodeClaim's reservation, a redelivered warning
// marks the same reservation again and starts no second execution, and a
// NodeClaim without a reservation ID is drained without a mark.
func TestHandleMarksOnlyTheInterruptedReservation(t *testing.T) {
	t.Run("should mark the same reservation once per delivery and start one execution", func(t *testing.T) {
		s, st := newFakeStore(nodeClaim("reserved-r2d2c", crInstance, reserved)), newFakeStarter()
		h := newHandler(t, s, st)
		for i := range 2 {
			if resp, _ := h.handle(t.Context(), batch(record(t, fmt.Sprintf("m-%d", i), crFile))); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("delivery %d failed: %+v", i+1, resp.BatchItemFailures)
			}
		}
		want := []mark{{Key: catalog.OfferingKey{CapacityType: "reserved", InstanceType: "m5.large", Zone: "us-west-2a", ReservationID: "cr-0a1b2c3d4e5f60718"},
			Reason: "capacity_reservation_interrupted", TTL: catalog.UnavailableOfferingsTTL}}
		if diff := cmp.Diff(want, s.marks); diff != "" {
			t.Errorf("marks mismatch (-want +got):\n%s", diff)
		}
		if len(st.executions) != 1 {
			t.Errorf("%d executions, want 1: %v", len(st.executions), st.executions)
		}
	})
	t.Run("should drain without a mark a NodeClaim that names no reservation", func(t *testing.T) {
		claim := nodeClaim("reserved-r2d2c", crInstance, reserved, func(c *v1.NodeClaim) { delete(c.Labels, v1.LabelCapacityReservationID) })
		s, st := newFakeStore(claim), newFakeStarter()
		h := newHandler(t, s, st)
		if resp, _ := h.handle(t.Context(), batch(record(t, "m-1", crFile))); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery failed: %+v", resp.BatchItemFailures)
		}
		if len(s.marks) != 0 {
			t.Errorf("marks = %+v, want none", s.marks)
		}
		if len(st.executions) != 1 {
			t.Errorf("%d executions, want 1: %v", len(st.executions), st.executions)
		}
	})
}

// The queue carries every EC2 state change of the account: a batch of
// events about no instance of the cluster is summarized at debug, a batch
// that acted at info (each action also has its own line).
func TestBatchSummaryIsInfoOnlyWhenTheBatchDidSomething(t *testing.T) {
	for _, tc := range []struct {
		name      string
		file      string
		wantLevel string
	}{
		{"should summarize at debug a batch whose events concern no NodeClaim", "state-change-running.json", "DEBUG"},
		{"should summarize at info a batch that started an interruption", spotFile, "INFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := newHandler(t, newFakeStore(nodeClaim("default-x7k2p", spotInstance)), newFakeStarter())
			h.log = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			if _, err := h.Handle(t.Context(), batch(record(t, "m-1", tc.file))); err != nil {
				t.Fatal(err)
			}
			var levels []string
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err == nil && m["msg"] == "batch handled" {
					levels = append(levels, fmt.Sprint(m["level"]))
				}
			}
			if diff := cmp.Diff([]string{tc.wantLevel}, levels); diff != "" {
				t.Errorf("batch handled levels mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
