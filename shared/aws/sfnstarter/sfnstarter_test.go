package sfnstarter_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/sivchari/kumo"

	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
)

// env is one test's state machine on an in-process kumo server, reached
// with the real Step Functions client. kumo keeps state per process, so
// every test creates a state machine named after itself.
type env struct {
	client *sfn.Client
	arn    string
}

func newEnv(t *testing.T) env {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	client := sfn.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, func(o *sfn.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	name := "sm-" + regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "-")
	if len(name) > 80 {
		name = name[:80]
	}
	out, err := client.CreateStateMachine(context.Background(), &sfn.CreateStateMachineInput{
		Name:       aws.String(name),
		Definition: aws.String(`{"StartAt":"Done","States":{"Done":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::000000000000:role/test"),
		Type:       types.StateMachineTypeStandard,
	})
	if err != nil {
		t.Fatalf("CreateStateMachine() error = %v", err)
	}
	return env{client: client, arn: aws.ToString(out.StateMachineArn)}
}

func (e env) starter(t *testing.T) *sfnstarter.Starter {
	t.Helper()
	s, err := sfnstarter.New(e.client, e.arn)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return s
}

// executions lists the state machine's executions by name, with their input.
func (e env) executions(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out, err := e.client.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: &e.arn})
	if err != nil {
		t.Fatalf("ListExecutions() error = %v", err)
	}
	got := map[string]string{}
	for _, x := range out.Executions {
		d, err := e.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: x.ExecutionArn})
		if err != nil {
			t.Fatalf("DescribeExecution() error = %v", err)
		}
		got[aws.ToString(x.Name)] = aws.ToString(d.Input)
	}
	return got
}

type input struct {
	NodeClaim string `json:"nodeClaim"`
	EventID   string `json:"eventID"`
}

func TestStart(t *testing.T) {
	type start struct {
		name  string
		input input
	}
	tests := []struct {
		name   string
		starts []start
		// wantExisted is Execution.AlreadyExisted per start.
		wantExisted []bool
		// want is every execution by name, with its JSON input.
		want map[string]string
	}{
		{
			name:        "should start an execution named as asked, with the input as JSON",
			starts:      []start{{"interrupt-default-x7k2p-0123456789ab", input{"default-x7k2p", "e-1"}}},
			wantExisted: []bool{false},
			want:        map[string]string{"interrupt-default-x7k2p-0123456789ab": `{"nodeClaim":"default-x7k2p","eventID":"e-1"}`},
		},
		{
			name: "should start one execution when the same name is started twice",
			starts: []start{
				{"interrupt-default-x7k2p-0123456789ab", input{"default-x7k2p", "e-1"}},
				{"interrupt-default-x7k2p-0123456789ab", input{"default-x7k2p", "e-1"}},
			},
			wantExisted: []bool{false, true},
			want:        map[string]string{"interrupt-default-x7k2p-0123456789ab": `{"nodeClaim":"default-x7k2p","eventID":"e-1"}`},
		},
		{
			name: "should keep the first input when a name is reused with another",
			starts: []start{
				{"interrupt-default-x7k2p-0123456789ab", input{"default-x7k2p", "e-1"}},
				{"interrupt-default-x7k2p-0123456789ab", input{"default-x7k2p", "e-2"}},
			},
			wantExisted: []bool{false, true},
			want:        map[string]string{"interrupt-default-x7k2p-0123456789ab": `{"nodeClaim":"default-x7k2p","eventID":"e-1"}`},
		},
		{
			name: "should start one execution per name",
			starts: []start{
				{"interrupt-a-000000000001", input{"a", "e-1"}},
				{"interrupt-b-000000000002", input{"b", "e-1"}},
			},
			wantExisted: []bool{false, false},
			want: map[string]string{
				"interrupt-a-000000000001": `{"nodeClaim":"a","eventID":"e-1"}`,
				"interrupt-b-000000000002": `{"nodeClaim":"b","eventID":"e-1"}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.starter(t)
			var existed []bool
			for _, st := range tt.starts {
				got, err := s.Start(t.Context(), st.name, st.input)
				if err != nil {
					t.Fatalf("Start(%q) error = %v", st.name, err)
				}
				wantARN := strings.Replace(e.arn, ":stateMachine:", ":execution:", 1) + ":" + st.name
				if got.ARN != wantARN {
					t.Errorf("Start(%q).ARN = %q, want %q", st.name, got.ARN, wantARN)
				}
				existed = append(existed, got.AlreadyExisted)
			}
			if diff := cmp.Diff(tt.wantExisted, existed); diff != "" {
				t.Errorf("AlreadyExisted mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, e.executions(t)); diff != "" {
				t.Errorf("executions mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// recordingAPI answers StartExecution with err and counts the calls.
type recordingAPI struct {
	err   error
	calls int
}

func (r *recordingAPI) StartExecution(context.Context, *sfn.StartExecutionInput, ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	r.calls++
	if r.err != nil {
		return nil, r.err
	}
	return &sfn.StartExecutionOutput{ExecutionArn: aws.String("arn:aws:states:us-east-1:000000000000:execution:m:x")}, nil
}

const machineARN = "arn:aws:states:us-east-1:000000000000:stateMachine:interruption"

func TestStartErrors(t *testing.T) {
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
	tests := []struct {
		name      string
		execName  string
		input     any
		apiErr    error
		wantErr   error
		wantCalls int
	}{
		{name: "should refuse an empty name", execName: "", input: input{}, wantErr: sfnstarter.ErrInvalid},
		{name: "should refuse a name over 80 characters", execName: strings.Repeat("a", 81), input: input{}, wantErr: sfnstarter.ErrInvalid},
		{name: "should refuse a name with a space", execName: "interrupt x", input: input{}, wantErr: sfnstarter.ErrInvalid},
		{name: "should refuse a name with a colon", execName: "interrupt:x", input: input{}, wantErr: sfnstarter.ErrInvalid},
		{name: "should refuse a name with a slash", execName: "interrupt/x", input: input{}, wantErr: sfnstarter.ErrInvalid},
		{name: "should refuse a name with a control character", execName: "interrupt\x01x", input: input{}, wantErr: sfnstarter.ErrInvalid},
		{name: "should refuse a name that is not UTF-8", execName: "interrupt\xffx", input: input{}, wantErr: sfnstarter.ErrInvalid},
		{name: "should refuse an input that does not marshal", execName: "ok", input: map[string]any{"f": func() {}}, wantErr: sfnstarter.ErrInvalid},
		{name: "should refuse an input over 256 KiB", execName: "ok", input: strings.Repeat("x", 256*1024), wantErr: sfnstarter.ErrInvalid},
		{name: "should return the API's error", execName: "ok", input: input{}, apiErr: throttled, wantErr: throttled, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &recordingAPI{err: tt.apiErr}
			s, err := sfnstarter.New(api, machineARN)
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			got, err := s.Start(t.Context(), tt.execName, tt.input)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Start() error = %v, want %v", err, tt.wantErr)
			}
			if got != (sfnstarter.Execution{}) {
				t.Errorf("Start() = %+v with an error, want the zero Execution", got)
			}
			if api.calls != tt.wantCalls {
				t.Errorf("StartExecution called %d times, want %d", api.calls, tt.wantCalls)
			}
		})
	}
}

func TestStartAcceptsAllowedNames(t *testing.T) {
	tests := []struct {
		name     string
		execName string
	}{
		{name: "should accept 80 characters", execName: strings.Repeat("a", 80)},
		{name: "should accept dots, dashes and underscores", execName: "interrupt-team.a_x7k2p-0123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &recordingAPI{}
			s, err := sfnstarter.New(api, machineARN)
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			if _, err := s.Start(t.Context(), tt.execName, json.RawMessage(`{}`)); err != nil {
				t.Errorf("Start(%q) error = %v", tt.execName, err)
			}
			if api.calls != 1 {
				t.Errorf("StartExecution called %d times, want 1", api.calls)
			}
		})
	}
}

func TestStartTreatsExecutionAlreadyExistsAsSuccess(t *testing.T) {
	api := &recordingAPI{err: &types.ExecutionAlreadyExists{Message: aws.String("Execution Already Exists")}}
	s, err := sfnstarter.New(api, machineARN)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	got, err := s.Start(t.Context(), "interrupt-a-0123", input{})
	if err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	want := sfnstarter.Execution{ARN: "arn:aws:states:us-east-1:000000000000:execution:interruption:interrupt-a-0123", AlreadyExisted: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Start() mismatch (-want +got):\n%s", diff)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		arn  string
	}{
		{name: "should refuse an empty ARN", arn: ""},
		{name: "should refuse a name alone", arn: "interruption"},
		{name: "should refuse another service's ARN", arn: "arn:aws:sqs:us-east-1:000000000000:interruption"},
		{name: "should refuse an execution ARN", arn: "arn:aws:states:us-east-1:000000000000:execution:interruption:x"},
		{name: "should refuse a version ARN", arn: machineARN + ":3"},
		{name: "should refuse an ARN without a region", arn: "arn:aws:states::000000000000:stateMachine:interruption"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := sfnstarter.New(&recordingAPI{}, tt.arn); !errors.Is(err, sfnstarter.ErrInvalid) {
				t.Errorf("New(%q) error = %v, want ErrInvalid", tt.arn, err)
			}
		})
	}
}

// describer answers DescribeExecution from a map of execution ARNs to
// statuses, and ExecutionDoesNotExist (as Step Functions does) for others.
type describer struct {
	status map[string]types.ExecutionStatus
	asked  []string
}

func (d *describer) DescribeExecution(_ context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	arn := aws.ToString(in.ExecutionArn)
	d.asked = append(d.asked, arn)
	st, ok := d.status[arn]
	if !ok {
		return nil, &types.ExecutionDoesNotExist{Message: aws.String("Execution Does Not Exist: '" + arn + "'")}
	}
	return &sfn.DescribeExecutionOutput{ExecutionArn: &arn, Status: st}, nil
}

func TestStatusOfAnExecutionByName(t *testing.T) {
	const machine = "arn:aws:states:us-east-1:123456789012:stateMachine:nodewright-disruption"
	const prefix = "arn:aws:states:us-east-1:123456789012:execution:nodewright-disruption:"
	d := &describer{status: map[string]types.ExecutionStatus{
		prefix + "drift-a-1": types.ExecutionStatusRunning,
		prefix + "drift-b-1": types.ExecutionStatusPendingRedrive,
		prefix + "drift-c-1": types.ExecutionStatusSucceeded,
		prefix + "drift-d-1": types.ExecutionStatusFailed,
		prefix + "drift-e-1": types.ExecutionStatusAborted,
		prefix + "drift-f-1": types.ExecutionStatusTimedOut,
	}}
	s, err := sfnstarter.New(nil, machine)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]sfnstarter.Status{
		"drift-a-1": sfnstarter.StatusRunning, "drift-b-1": sfnstarter.StatusRunning,
		"drift-c-1": sfnstarter.StatusEnded, "drift-d-1": sfnstarter.StatusEnded, "drift-e-1": sfnstarter.StatusEnded,
		"drift-f-1": sfnstarter.StatusEnded, "drift-g-1": sfnstarter.StatusMissing,
	}
	for name, w := range want {
		got, err := s.Status(context.Background(), d, name)
		if err != nil || got != w {
			t.Errorf("Status(%s) = %q, %v; want %q", name, got, err, w)
		}
	}
	if _, err := s.Status(context.Background(), d, "bad name"); !errors.Is(err, sfnstarter.ErrInvalid) {
		t.Errorf("Status(bad name) error = %v, want ErrInvalid", err)
	}
	if len(d.asked) != len(want) {
		t.Errorf("DescribeExecution called %d times, want %d (none for an invalid name)", len(d.asked), len(want))
	}
	d.status = nil
	failing := &failingDescriber{}
	if _, err := s.Status(context.Background(), failing, "drift-a-1"); err == nil || errors.Is(err, sfnstarter.ErrInvalid) {
		t.Errorf("Status() on an API error = %v, want the API's error", err)
	}
}

type failingDescriber struct{}

func (failingDescriber) DescribeExecution(context.Context, *sfn.DescribeExecutionInput, ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
}
