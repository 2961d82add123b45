package interruption_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/interruption"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read testdata: %v", err)
	}
	return b
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func stateChange(file, id, state string, kind interruption.Kind, instances []string, deadline time.Time) struct {
	file string
	want interruption.Message
} {
	return struct {
		file string
		want interruption.Message
	}{file, interruption.Message{
		Kind: kind, EventID: id, Source: "aws.ec2", DetailType: "EC2 Instance State-change Notification",
		Account: "111122223333", Region: "us-west-2", Time: at("2026-03-14T10:02:41Z"),
		InstanceIDs: instances, Deadline: deadline,
		StateChange: &interruption.StateChange{InstanceID: "i-03c5a7e9b1d2f4068", State: state},
	}}
}

// parseCases are the testdata files that parse, with what they must give.
func parseCases() []struct {
	file string
	want interruption.Message
} {
	stateTime := at("2026-03-14T10:02:41Z")
	stateInstance := []string{"i-03c5a7e9b1d2f4068"}
	return []struct {
		file string
		want interruption.Message
	}{
		{"spot-interruption-warning.json", interruption.Message{
			Kind: interruption.KindSpotInterruption, EventID: "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7",
			Source: "aws.ec2", DetailType: "EC2 Spot Instance Interruption Warning",
			Account: "111122223333", Region: "us-west-2", Time: at("2026-03-14T09:26:53Z"),
			InstanceIDs: []string{"i-0b8f7e6d5c4a39281"}, Deadline: at("2026-03-14T09:28:53Z"),
			Spot: &interruption.SpotInterruption{InstanceID: "i-0b8f7e6d5c4a39281", InstanceAction: "terminate"},
		}},
		{"rebalance-recommendation.json", interruption.Message{
			Kind: interruption.KindRebalanceRecommendation, EventID: "9a3e51b2-77c4-4e0a-b1d6-5f28c0e4a913",
			Source: "aws.ec2", DetailType: "EC2 Instance Rebalance Recommendation",
			Account: "111122223333", Region: "us-west-2", Time: at("2026-03-14T09:21:07Z"),
			InstanceIDs: []string{"i-0b8f7e6d5c4a39281"},
			Rebalance:   &interruption.RebalanceRecommendation{InstanceID: "i-0b8f7e6d5c4a39281"},
		}},
		stateChange("state-change-pending.json", "7cc1f384-25a0-5dcc-a23f-8925b7d6272e", "pending", interruption.KindNoOp, nil, time.Time{}),
		stateChange("state-change-running.json", "1146c4cf-009d-5e8d-9a18-e4a25bf41a28", "running", interruption.KindNoOp, nil, time.Time{}),
		stateChange("state-change-stopping.json", "82605afa-5440-5589-b6a6-fec18447d189", "stopping", interruption.KindInstanceStopped, stateInstance, stateTime),
		stateChange("state-change-stopped.json", "b7c00c06-406d-5ba4-982d-c6e99896736f", "stopped", interruption.KindInstanceStopped, stateInstance, stateTime),
		stateChange("state-change-shutting-down.json", "ac3d4ef0-9e75-56fa-8aba-297191622df1", "shutting-down", interruption.KindInstanceTerminated, stateInstance, stateTime),
		stateChange("state-change-terminated.json", "1bae5f04-2283-53d1-8145-959f46187859", "terminated", interruption.KindInstanceTerminated, stateInstance, stateTime),
		{"health-ec2-scheduled-change.json", interruption.Message{
			Kind: interruption.KindScheduledChange, EventID: "7d2b0c61-f3e8-4a9d-8c1b-6e5f4a3d2c10",
			Source: "aws.health", DetailType: "AWS Health Event",
			Account: "111122223333", Region: "us-west-2", Time: at("2026-03-12T16:40:00Z"),
			InstanceIDs: []string{"i-0a1b2c3d4e5f60718", "i-0f9e8d7c6b5a40312"}, Deadline: at("2026-03-16T16:00:00Z"),
			Health: &interruption.HealthEvent{
				EventARN:          "arn:aws:health:us-west-2::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_f0e1d2c3-b4a5-4697-8888-1a2b3c4d5e6f",
				Service:           "EC2",
				EventTypeCode:     "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
				EventTypeCategory: "scheduledChange",
				StartTime:         "Mon, 16 Mar 2026 16:00:00 GMT",
				EndTime:           "Mon, 16 Mar 2026 16:00:00 GMT",
				AffectedEntities: []interruption.AffectedEntity{
					{EntityValue: "i-0a1b2c3d4e5f60718", Status: "PENDING"},
					{EntityValue: "i-0f9e8d7c6b5a40312", Status: "PENDING"},
				},
			},
		}},
		{"health-ec2-issue.json", interruption.Message{
			Kind: interruption.KindNoOp, EventID: "c6e0a8f4-2b19-4d73-a5e8-0f3b7d1c9e42",
			Source: "aws.health", DetailType: "AWS Health Event",
			Account: "111122223333", Region: "us-west-2", Time: at("2026-03-13T07:15:00Z"),
			Health: &interruption.HealthEvent{
				EventARN:          "arn:aws:health:us-west-2::event/EC2/AWS_EC2_OPERATIONAL_ISSUE/AWS_EC2_OPERATIONAL_ISSUE_7a8b9c0d-1e2f-4a3b-9c4d-5e6f7a8b9c0d",
				Service:           "EC2",
				EventTypeCode:     "AWS_EC2_OPERATIONAL_ISSUE",
				EventTypeCategory: "issue",
				StartTime:         "Fri, 13 Mar 2026 06:58:00 GMT",
			},
		}},
		{"health-rds-scheduled-change.json", interruption.Message{
			Kind: interruption.KindNoOp, EventID: "e2f4a6c8-0b1d-4e3f-9a5c-7d9e1f3a5b7c",
			Source: "aws.health", DetailType: "AWS Health Event",
			Account: "111122223333", Region: "us-west-2", Time: at("2026-03-11T12:00:00Z"),
			Health: &interruption.HealthEvent{
				EventARN:          "arn:aws:health:us-west-2::event/RDS/AWS_RDS_MAINTENANCE_SCHEDULED/AWS_RDS_MAINTENANCE_SCHEDULED_2b4d6f8a-0c1e-4a3b-8d5f-7a9c1e3b5d7f",
				Service:           "RDS",
				EventTypeCode:     "AWS_RDS_MAINTENANCE_SCHEDULED",
				EventTypeCategory: "scheduledChange",
				StartTime:         "Sun, 22 Mar 2026 06:00:00 GMT",
				EndTime:           "Sun, 22 Mar 2026 07:00:00 GMT",
				AffectedEntities:  []interruption.AffectedEntity{{EntityValue: "orders-db"}},
			},
		}},
		{"capacity-reservation-interruption-warning.json", interruption.Message{
			Kind: interruption.KindCapacityReservationInterruption, EventID: "1b3d5f7a-9c0e-4a2b-8d4f-6a8c0e2b4d6f",
			Source: "aws.ec2", DetailType: "EC2 Capacity Reservation Instance Interruption Warning",
			Account: "111122223333", Region: "us-west-2", Time: at("2026-03-14T11:30:00Z"),
			InstanceIDs: []string{"i-0d4c3b2a1f0e9d8c7"}, Deadline: at("2026-03-14T11:32:00Z"),
			CapacityReservation: &interruption.CapacityReservationInterruption{
				InstanceID: "i-0d4c3b2a1f0e9d8c7", InstanceAction: "terminate",
				InstanceTerminationTime: "2026-03-14T11:32:00Z", AvailabilityZoneID: "usw2-az1",
			},
		}},
	}
}

func TestParse(t *testing.T) {
	for _, tt := range parseCases() {
		t.Run("should parse "+tt.file, func(t *testing.T) {
			got, err := interruption.Parse(readTestdata(t, tt.file))
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// spotEvent is the Spot warning of testdata with edits, for the cases no
// file covers.
func spotEvent(t *testing.T, edit func(string) string) []byte {
	t.Helper()
	return []byte(edit(string(readTestdata(t, "spot-interruption-warning.json"))))
}

func TestParseVariants(t *testing.T) {
	tests := []struct {
		name string
		body func(t *testing.T) []byte
		want func(m *interruption.Message)
	}{
		{
			name: "should treat a stop action like a terminate action",
			body: func(t *testing.T) []byte {
				return spotEvent(t, func(s string) string { return strings.Replace(s, `"terminate"`, `"stop"`, 1) })
			},
			want: func(m *interruption.Message) { m.Spot.InstanceAction = "stop" },
		},
		{
			name: "should ignore fields AWS adds later",
			body: func(t *testing.T) []byte {
				return spotEvent(t, func(s string) string {
					return strings.Replace(s, `"instance-action": "terminate"`, `"instance-action": "terminate", "new-field": {"x": 1}`, 1)
				})
			},
		},
		{
			name: "should read an 8-digit instance id",
			body: func(t *testing.T) []byte {
				return spotEvent(t, func(s string) string { return strings.ReplaceAll(s, "i-0b8f7e6d5c4a39281", "i-1a2b3c4d") })
			},
			want: func(m *interruption.Message) {
				m.InstanceIDs = []string{"i-1a2b3c4d"}
				m.Spot.InstanceID = "i-1a2b3c4d"
			},
		},
		{
			name: "should convert the event time to UTC",
			body: func(t *testing.T) []byte {
				return spotEvent(t, func(s string) string {
					return strings.Replace(s, "2026-03-14T09:26:53Z", "2026-03-14T10:26:53+01:00", 1)
				})
			},
		},
	}
	base, err := interruption.Parse(readTestdata(t, "spot-interruption-warning.json"))
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := base
			spot := *base.Spot
			want.Spot = &spot
			want.InstanceIDs = slices.Clone(base.InstanceIDs)
			if tt.want != nil {
				tt.want(&want)
			}
			got, err := interruption.Parse(tt.body(t))
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func healthEvent(entities, start string) []byte {
	return []byte(`{"version":"0","id":"h-1","detail-type":"AWS Health Event","source":"aws.health",
		"account":"111122223333","time":"2026-03-12T16:40:00Z","region":"us-west-2",
		"detail":{"service":"EC2","eventTypeCategory":"scheduledChange","startTime":"` + start + `",
		"affectedEntities":` + entities + `}}`)
}

func TestParseHealthScheduledChange(t *testing.T) {
	eventTime := at("2026-03-12T16:40:00Z")
	tests := []struct {
		name         string
		body         []byte
		wantIDs      []string
		wantDeadline time.Time
	}{
		{
			name:         "should name each affected instance once, in event order",
			body:         healthEvent(`[{"entityValue":"i-0f9e8d7c6b5a40312"},{"entityValue":"i-0a1b2c3d4e5f60718"},{"entityValue":"i-0f9e8d7c6b5a40312"}]`, "Mon, 16 Mar 2026 16:00:00 GMT"),
			wantIDs:      []string{"i-0f9e8d7c6b5a40312", "i-0a1b2c3d4e5f60718"},
			wantDeadline: at("2026-03-16T16:00:00Z"),
		},
		{
			name:         "should skip entities that are not instances",
			body:         healthEvent(`[{"entityValue":"h-0123456789abcdef0"},{"entityValue":"i-0a1b2c3d4e5f60718"},{"entityValue":""}]`, "Mon, 16 Mar 2026 16:00:00 GMT"),
			wantIDs:      []string{"i-0a1b2c3d4e5f60718"},
			wantDeadline: at("2026-03-16T16:00:00Z"),
		},
		{
			name:         "should name no instance when there are no affected entities",
			body:         healthEvent(`[]`, "Mon, 16 Mar 2026 16:00:00 GMT"),
			wantDeadline: at("2026-03-16T16:00:00Z"),
		},
		{
			name:         "should use the event time when the start time does not parse",
			body:         healthEvent(`[{"entityValue":"i-0a1b2c3d4e5f60718"}]`, "next Monday"),
			wantIDs:      []string{"i-0a1b2c3d4e5f60718"},
			wantDeadline: eventTime,
		},
		{
			name:         "should use the event time when the start time has passed",
			body:         healthEvent(`[{"entityValue":"i-0a1b2c3d4e5f60718"}]`, "Mon, 02 Mar 2026 16:00:00 GMT"),
			wantIDs:      []string{"i-0a1b2c3d4e5f60718"},
			wantDeadline: eventTime,
		},
		{
			name:         "should read an RFC 3339 start time",
			body:         healthEvent(`[{"entityValue":"i-0a1b2c3d4e5f60718"}]`, "2026-03-16T16:00:00Z"),
			wantIDs:      []string{"i-0a1b2c3d4e5f60718"},
			wantDeadline: at("2026-03-16T16:00:00Z"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := interruption.Parse(tt.body)
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if got.Kind != interruption.KindScheduledChange {
				t.Errorf("Kind = %q, want %q", got.Kind, interruption.KindScheduledChange)
			}
			if diff := cmp.Diff(tt.wantIDs, got.InstanceIDs); diff != "" {
				t.Errorf("InstanceIDs mismatch (-want +got):\n%s", diff)
			}
			if !got.Deadline.Equal(tt.wantDeadline) {
				t.Errorf("Deadline = %v, want %v", got.Deadline, tt.wantDeadline)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	spot := func(edit func(string) string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return spotEvent(t, edit) }
	}
	file := func(name string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return readTestdata(t, name) }
	}
	literal := func(s string) func(t *testing.T) []byte {
		return func(*testing.T) []byte { return []byte(s) }
	}
	tests := []struct {
		name    string
		body    func(t *testing.T) []byte
		wantErr error
		// want is the envelope the error reports.
		want interruption.ParseError
	}{
		{
			name: "should reject a truncated body", body: file("malformed-truncated.json"),
			wantErr: interruption.ErrMalformed,
		},
		{
			name: "should reject a Spot warning without an instance id", body: file("malformed-spot-without-instance.json"),
			wantErr: interruption.ErrMalformed,
			want: interruption.ParseError{EventID: "8c0e2a4c-6e8a-4c1e-9a3c-5e7a9c1e3a5c", Source: "aws.ec2",
				DetailType: "EC2 Spot Instance Interruption Warning", Version: "0"},
		},
		{
			name: "should report an event type it does not handle", body: file("unknown-spot-request-fulfillment.json"),
			wantErr: interruption.ErrUnknownEvent,
			want: interruption.ParseError{EventID: "3e5a7c9e-1b2d-4f6a-8c0e-2d4f6a8c0e1b", Source: "aws.ec2",
				DetailType: "EC2 Spot Instance Request Fulfillment", Version: "0"},
		},
		{
			name:    "should report a known detail type of another version",
			body:    spot(func(s string) string { return strings.Replace(s, `"version": "0"`, `"version": "1"`, 1) }),
			wantErr: interruption.ErrUnknownEvent,
			want: interruption.ParseError{EventID: "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7", Source: "aws.ec2",
				DetailType: "EC2 Spot Instance Interruption Warning", Version: "1"},
		},
		{
			name:    "should report a known detail type from another source",
			body:    spot(func(s string) string { return strings.Replace(s, `"aws.ec2"`, `"custom.app"`, 1) }),
			wantErr: interruption.ErrUnknownEvent,
			want: interruption.ParseError{EventID: "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7", Source: "custom.app",
				DetailType: "EC2 Spot Instance Interruption Warning", Version: "0"},
		},
		{name: "should reject an empty body", body: literal(""), wantErr: interruption.ErrMalformed},
		{name: "should reject a blank body", body: literal(" \n\t"), wantErr: interruption.ErrMalformed},
		{name: "should reject a JSON array", body: literal(`[{"version":"0"}]`), wantErr: interruption.ErrMalformed},
		{name: "should report an object that is no event", body: literal(`{"hello":"world"}`), wantErr: interruption.ErrUnknownEvent},
		{
			name: "should reject an event without an id",
			body: spot(func(s string) string {
				return strings.Replace(s, `"id": "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7",`, "", 1)
			}),
			wantErr: interruption.ErrMalformed,
			want:    interruption.ParseError{Source: "aws.ec2", DetailType: "EC2 Spot Instance Interruption Warning", Version: "0"},
		},
		{
			name: "should reject an id longer than 256 bytes",
			body: spot(func(s string) string {
				return strings.Replace(s, "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7", strings.Repeat("x", 257), 1)
			}),
			wantErr: interruption.ErrMalformed,
			want: interruption.ParseError{EventID: strings.Repeat("x", 257), Source: "aws.ec2",
				DetailType: "EC2 Spot Instance Interruption Warning", Version: "0"},
		},
		{
			name:    "should reject a time that is not RFC 3339",
			body:    spot(func(s string) string { return strings.Replace(s, "2026-03-14T09:26:53Z", "14/03/2026 09:26", 1) }),
			wantErr: interruption.ErrMalformed,
			want: interruption.ParseError{EventID: "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7", Source: "aws.ec2",
				DetailType: "EC2 Spot Instance Interruption Warning", Version: "0"},
		},
		{
			name:    "should reject a null detail",
			body:    literal(`{"version":"0","id":"e-1","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","time":"2026-03-14T09:21:07Z","detail":null}`),
			wantErr: interruption.ErrMalformed,
			want:    interruption.ParseError{EventID: "e-1", Source: "aws.ec2", DetailType: "EC2 Instance Rebalance Recommendation", Version: "0"},
		},
		{
			name:    "should reject a detail that is not an object",
			body:    literal(`{"version":"0","id":"e-1","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-03-14T09:21:07Z","detail":"stopping"}`),
			wantErr: interruption.ErrMalformed,
			want:    interruption.ParseError{EventID: "e-1", Source: "aws.ec2", DetailType: "EC2 Instance State-change Notification", Version: "0"},
		},
		{
			name: "should reject an instance id of the wrong form",
			body: spot(func(s string) string {
				return strings.Replace(s, `"instance-id": "i-0b8f7e6d5c4a39281"`, `"instance-id": "i-XYZ"`, 1)
			}),
			wantErr: interruption.ErrMalformed,
			want: interruption.ParseError{EventID: "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7", Source: "aws.ec2",
				DetailType: "EC2 Spot Instance Interruption Warning", Version: "0"},
		},
		{
			name:    "should reject a capacity-reservation warning without an instance id",
			body:    literal(`{"version":"0","id":"e-2","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","time":"2026-03-14T11:30:00Z","detail":{"instance-action":"terminate"}}`),
			wantErr: interruption.ErrMalformed,
			want:    interruption.ParseError{EventID: "e-2", Source: "aws.ec2", DetailType: "EC2 Capacity Reservation Instance Interruption Warning", Version: "0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := interruption.Parse(tt.body(t))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse() error = %v, want %v", err, tt.wantErr)
			}
			var pe *interruption.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse() error %T is not a *ParseError", err)
			}
			envelope := interruption.ParseError{EventID: pe.EventID, Source: pe.Source, DetailType: pe.DetailType, Version: pe.Version}
			if tt.want.Source == "" && tt.want.DetailType == "" {
				// Nothing of the envelope is known: only the cause matters.
				envelope = interruption.ParseError{}
			}
			if diff := cmp.Diff(tt.want, envelope); diff != "" {
				t.Errorf("ParseError envelope mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(interruption.Message{}, got); diff != "" {
				t.Errorf("Parse() returned a message with an error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryTestdataFileIsCovered keeps testdata and the tests in step: each
// event file is either parsed by TestParse or refused by TestParseErrors.
func TestEveryTestdataFileIsCovered(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{
		"malformed-truncated.json":              true,
		"malformed-spot-without-instance.json":  true,
		"unknown-spot-request-fulfillment.json": true,
	}
	for _, c := range parseCases() {
		covered[c.file] = true
	}
	var missing []string
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			missing = append(missing, filepath.Base(f))
		}
	}
	if len(missing) > 0 {
		t.Errorf("testdata files no test reads: %v", missing)
	}
	if len(files) != len(covered) {
		t.Errorf("%d testdata files, %d covered names: a covered file is missing from testdata", len(files), len(covered))
	}
}

func TestEventTypes(t *testing.T) {
	// The five EventBridge rules of Karpenter's reference CloudFormation
	// (karpenter-spec.md section 8.1).
	want := []interruption.EventType{
		{Source: "aws.ec2", DetailType: "EC2 Capacity Reservation Instance Interruption Warning"},
		{Source: "aws.ec2", DetailType: "EC2 Instance Rebalance Recommendation"},
		{Source: "aws.ec2", DetailType: "EC2 Instance State-change Notification"},
		{Source: "aws.ec2", DetailType: "EC2 Spot Instance Interruption Warning"},
		{Source: "aws.health", DetailType: "AWS Health Event"},
	}
	if diff := cmp.Diff(want, interruption.EventTypes()); diff != "" {
		t.Errorf("EventTypes() mismatch (-want +got):\n%s", diff)
	}
}

func TestKindHandling(t *testing.T) {
	tests := []struct {
		name string
		kind interruption.Kind
		want interruption.Handling
	}{
		{
			name: "should drain a Spot-interrupted node and mark its spot offering unavailable",
			kind: interruption.KindSpotInterruption,
			want: interruption.Handling{Action: interruption.ActionCordonAndDrain, Mark: interruption.MarkSpotOffering,
				Notice: interruption.Notice{Type: "Warning", Reason: "SpotInterrupted", Message: "EC2 sent a Spot interruption warning: the instance is reclaimed within two minutes"}},
		},
		{
			name: "should only record an event for a rebalance recommendation",
			kind: interruption.KindRebalanceRecommendation,
			want: interruption.Handling{Action: interruption.ActionRecordOnly,
				Notice: interruption.Notice{Type: "Normal", Reason: "SpotRebalanceRecommendation", Message: "EC2 recommends rebalancing: the Spot instance is at elevated risk of interruption"}},
		},
		{
			name: "should drain a node with a scheduled change",
			kind: interruption.KindScheduledChange,
			want: interruption.Handling{Action: interruption.ActionCordonAndDrain,
				Notice: interruption.Notice{Type: "Warning", Reason: "InstanceUnhealthy", Message: "AWS Health scheduled a change (retirement, reboot or maintenance) for the instance"}},
		},
		{
			name: "should drain a stopping node",
			kind: interruption.KindInstanceStopped,
			want: interruption.Handling{Action: interruption.ActionCordonAndDrain,
				Notice: interruption.Notice{Type: "Warning", Reason: "InstanceStopping", Message: "The instance is stopping or stopped"}},
		},
		{
			name: "should drain a terminating node",
			kind: interruption.KindInstanceTerminated,
			want: interruption.Handling{Action: interruption.ActionCordonAndDrain,
				Notice: interruption.Notice{Type: "Warning", Reason: "InstanceTerminating", Message: "The instance is shutting down or terminated"}},
		},
		{
			name: "should drain a node whose capacity reservation is reclaimed and mark the reservation unavailable",
			kind: interruption.KindCapacityReservationInterruption,
			want: interruption.Handling{Action: interruption.ActionCordonAndDrain, Mark: interruption.MarkReservation,
				Notice: interruption.Notice{Type: "Warning", Reason: "CapacityReservationInstanceInterrupted", Message: "The capacity reservation's owner is reclaiming the instance within two minutes"}},
		},
		{name: "should do nothing for a no-op event", kind: interruption.KindNoOp, want: interruption.Handling{Action: interruption.ActionNone}},
		{name: "should do nothing for an unknown kind", kind: "meteor_strike", want: interruption.Handling{Action: interruption.ActionNone}},
	}
	seen := map[interruption.Kind]bool{}
	for _, tt := range tests {
		seen[tt.kind] = true
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.kind.Handling()); diff != "" {
				t.Errorf("Handling() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, k := range interruption.Kinds() {
		if !seen[k] {
			t.Errorf("kind %q has no case in the action table test", k)
		}
	}
}

func TestTerminatingNotice(t *testing.T) {
	want := interruption.Notice{Type: "Warning", Reason: "TerminatingOnInterruption", Message: "Interruption: the node is drained and terminated"}
	if diff := cmp.Diff(want, interruption.TerminatingNotice()); diff != "" {
		t.Errorf("TerminatingNotice() mismatch (-want +got):\n%s", diff)
	}
}

func TestExecutionName(t *testing.T) {
	const event = "4f1c8f0e-3a7b-4c55-9f0d-2b6e8a91c3d7"
	long := strings.Repeat("pool-with-a-very-long-name-", 5) + "abcde"
	tests := []struct {
		name      string
		nodeClaim string
		eventID   string
		want      string
	}{
		{name: "should join the prefix, the NodeClaim and 12 hex digits", nodeClaim: "default-x7k2p", eventID: event, want: "interrupt-default-x7k2p-"},
		{name: "should replace characters Step Functions or its logs refuse", nodeClaim: "team.a-x7k2p", eventID: event, want: "interrupt-team-a-x7k2p-"},
		{name: "should cut a long NodeClaim name to fit 80 characters", nodeClaim: long, eventID: event, want: "interrupt-" + long[:57] + "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := interruption.ExecutionName(tt.nodeClaim, tt.eventID)
			prefix, digits := got[:len(got)-12], got[len(got)-12:]
			if prefix != tt.want {
				t.Errorf("ExecutionName() = %q, want prefix %q", got, tt.want)
			}
			if _, err := strconv.ParseUint(digits, 16, 64); err != nil {
				t.Errorf("ExecutionName() = %q: does not end in 12 hex digits", got)
			}
			if len(got) > interruption.MaxExecutionNameLength {
				t.Errorf("ExecutionName() = %q: %d characters, more than %d", got, len(got), interruption.MaxExecutionNameLength)
			}
			if again := interruption.ExecutionName(tt.nodeClaim, tt.eventID); again != got {
				t.Errorf("ExecutionName() = %q then %q: not deterministic", got, again)
			}
		})
	}
}

func TestExecutionNamesDiffer(t *testing.T) {
	long := strings.Repeat("pool-with-a-very-long-name-", 5)
	tests := []struct {
		name string
		a, b [2]string // nodeClaim, eventID
	}{
		{name: "should differ for two events of one NodeClaim", a: [2]string{"default-x7k2p", "e-1"}, b: [2]string{"default-x7k2p", "e-2"}},
		{name: "should differ for two NodeClaims of one event", a: [2]string{"default-x7k2p", "e-1"}, b: [2]string{"default-q9w4z", "e-1"}},
		{name: "should differ for two long NodeClaim names cut alike", a: [2]string{long + "aaaaa", "e-1"}, b: [2]string{long + "bbbbb", "e-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := interruption.ExecutionName(tt.a[0], tt.a[1])
			b := interruption.ExecutionName(tt.b[0], tt.b[1])
			if a == b {
				t.Errorf("ExecutionName(%q, %q) = ExecutionName(%q, %q) = %q", tt.a[0], tt.a[1], tt.b[0], tt.b[1], a)
			}
		})
	}
}
