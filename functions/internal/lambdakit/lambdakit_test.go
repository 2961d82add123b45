package lambdakit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/shared/workflow"
)

func TestNewLoggerStampsRequestID(t *testing.T) {
	var buf bytes.Buffer
	log := lambdakit.NewLogger(&buf, slog.LevelInfo).With("fn", "intake")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	log.InfoContext(ctx, "accepted", "batch", "b1")
	log.DebugContext(ctx, "dropped below the level")
	log.Info("outside an invocation")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.String())
	}
	var got []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		delete(m, "timestamp")
		got = append(got, m)
	}
	want := []map[string]any{
		{"level": "INFO", "message": "accepted", "fn": "intake", "batch": "b1", "requestId": "req-1"},
		{"level": "INFO", "message": "outside an invocation", "fn": "intake"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines mismatch (-want +got):\n%s", diff)
	}
}

type config struct {
	Table    string
	Region   string
	Parallel int
	Ratio    float64
	Timeout  time.Duration
	Level    slog.Level
}

func load(getenv func(string) string) (config, error) {
	e := lambdakit.NewEnv(getenv)
	c := config{
		Table:    e.String("TABLE"),
		Region:   e.StringOr("REGION", "us-east-1"),
		Parallel: e.Int("PARALLEL", 16, 1, 64),
		Ratio:    e.Float("RATIO", 0.7, 0, 1),
		Timeout:  e.Duration("TIMEOUT", time.Minute, time.Second),
		Level:    e.Level("LOG_LEVEL"),
	}
	return c, e.Err()
}

func TestEnv(t *testing.T) {
	tests := []struct {
		name string
		give map[string]string
		want config
	}{
		{
			name: "unset optional settings take their defaults",
			give: map[string]string{"TABLE": "t"},
			want: config{Table: "t", Region: "us-east-1", Parallel: 16, Ratio: 0.7, Timeout: time.Minute, Level: slog.LevelInfo},
		},
		{
			name: "set values are parsed and trimmed",
			give: map[string]string{"TABLE": " t ", "REGION": "eu-west-1", "PARALLEL": "4", "RATIO": "0.5", "TIMEOUT": "90s", "LOG_LEVEL": "debug"},
			want: config{Table: "t", Region: "eu-west-1", Parallel: 4, Ratio: 0.5, Timeout: 90 * time.Second, Level: slog.LevelDebug},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := load(func(k string) string { return tt.give[k] })
			if err != nil {
				t.Fatalf("load() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("load() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		give map[string]string
		want []string
	}{
		{name: "a missing required setting", give: map[string]string{}, want: []string{"TABLE: required"}},
		{
			name: "every malformed setting is reported at once",
			give: map[string]string{"TABLE": "t", "PARALLEL": "x", "RATIO": "2", "TIMEOUT": "10", "LOG_LEVEL": "loud"},
			want: []string{`PARALLEL: "x" is not an integer`, "RATIO: 2 is outside [0, 1]", `TIMEOUT: "10" is not a duration`, `LOG_LEVEL: "loud" is not a log level`},
		},
		{name: "an integer out of range", give: map[string]string{"TABLE": "t", "PARALLEL": "65"}, want: []string{"PARALLEL: 65 is outside [1, 64]"}},
		{name: "a duration below its minimum", give: map[string]string{"TABLE": "t", "TIMEOUT": "1ms"}, want: []string{"TIMEOUT: 1ms is below the minimum 1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(func(k string) string { return tt.give[k] })
			if err == nil {
				t.Fatal("load() error = nil, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("load() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// capacityError stands in for a domain error type such as
// *launch.InsufficientCapacityError.
type capacityError struct{}

func (*capacityError) Error() string { return "no capacity" }

var errIncomplete = errors.New("launch incomplete")

func TestAsWorkflowError(t *testing.T) {
	rules := []lambdakit.Rule{
		lambdakit.Is(errIncomplete, workflow.ErrLaunchIncomplete),
		lambdakit.As[*capacityError](workflow.ErrInsufficientCapacity),
	}
	tests := []struct {
		name string
		give error
		want error
	}{
		{name: "nil stays nil", give: nil, want: nil},
		{
			name: "a sentinel matched by a rule",
			give: fmt.Errorf("provision batch b1: %w", errIncomplete),
			want: messages.InvokeResponse_Error{Type: workflow.ErrLaunchIncomplete, Message: "provision batch b1: launch incomplete"},
		},
		{
			name: "an error type matched by a rule",
			give: fmt.Errorf("launch: %w", &capacityError{}),
			want: messages.InvokeResponse_Error{Type: workflow.ErrInsufficientCapacity, Message: "launch: no capacity"},
		},
		{
			name: "a workflow error in the chain wins over the rules",
			give: fmt.Errorf("x: %w", workflow.NewError(workflow.ErrInvalidInput, errIncomplete)),
			want: messages.InvokeResponse_Error{Type: workflow.ErrInvalidInput, Message: "x: launch incomplete"},
		},
		{
			name: "a deadline is a timeout",
			give: fmt.Errorf("list: %w", context.DeadlineExceeded),
			want: messages.InvokeResponse_Error{Type: workflow.ErrTimeout, Message: "list: context deadline exceeded"},
		},
		{
			name: "anything else is internal",
			give: errors.New("boom"),
			want: messages.InvokeResponse_Error{Type: workflow.ErrInternal, Message: "boom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lambdakit.AsWorkflowError(tt.give, rules...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("AsWorkflowError() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAsWorkflowErrorReachesTheCaller checks, through aws-lambda-go's own
// invoke path, that the caller sees the workflow name as errorType and not
// the Go type of a wrapped error.
func TestAsWorkflowErrorReachesTheCaller(t *testing.T) {
	h := func(context.Context, json.RawMessage) (string, error) {
		return "", lambdakit.AsWorkflowError(fmt.Errorf("batch: %w", errIncomplete), lambdakit.Is(errIncomplete, workflow.ErrLaunchIncomplete))
	}
	_, err := lambda.NewHandler(h).Invoke(context.Background(), []byte(`{}`))
	var ire messages.InvokeResponse_Error
	if !errors.As(err, &ire) || ire.Type != workflow.ErrLaunchIncomplete {
		t.Errorf("Invoke() error = %#v, want errorType %q", err, workflow.ErrLaunchIncomplete)
	}
}

func TestAWSConfigEndpoints(t *testing.T) {
	cfg, err := lambdakit.AWSConfig(context.Background(), lambdakit.AWSOptions{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
		Endpoints:   map[string]string{"SQS": "http://127.0.0.1:4566"},
	})
	if err != nil {
		t.Fatalf("AWSConfig() error = %v", err)
	}
	if cfg.Region != "eu-west-1" {
		t.Errorf("Region = %q, want eu-west-1", cfg.Region)
	}
	got := aws.ToString(sqs.NewFromConfig(cfg).Options().BaseEndpoint)
	if got != "http://127.0.0.1:4566" {
		t.Errorf("sqs BaseEndpoint = %q, want the configured endpoint", got)
	}
}
