package handler_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/functions/gc/handler"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/workflow"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// collector returns scripted results, checking it runs at the handler's
// clock.
type collector struct {
	results []provisioning.CleanupResult
	err     error
}

func (c collector) CollectGarbage(_ context.Context, now time.Time) ([]provisioning.CleanupResult, error) {
	if !now.Equal(t0) {
		return nil, fmt.Errorf("now = %v, want the handler's clock", now)
	}
	return c.results, c.err
}

func newHandler(t *testing.T, c collector) *handler.Handler {
	t.Helper()
	h, err := handler.NewWithCollector(c, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var (
	timeout = provisioning.Cleanup{Reason: provisioning.CleanupRegistrationTimeout, NodeClaim: "default-a", ResourceVersion: "3", InstanceID: "i-a"}
	leaked  = provisioning.Cleanup{Reason: provisioning.CleanupLeakedInstance, InstanceID: "i-b", Node: "node-b"}
)

func TestHandle(t *testing.T) {
	tests := []struct {
		name string
		give collector
		want handler.Output
	}{
		{name: "should report nothing when nothing is garbage", give: collector{}, want: handler.Output{Cleanups: []handler.Cleanup{}}},
		{
			name: "should report every executed cleanup, skipped ones marked",
			give: collector{results: []provisioning.CleanupResult{{Cleanup: timeout}, {Cleanup: leaked, Skipped: true}}},
			want: handler.Output{Cleanups: []handler.Cleanup{{Cleanup: timeout}, {Cleanup: leaked, Skipped: true}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newHandler(t, tt.give).Handle(context.Background(), []byte(`{}`))
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Handle() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandleErrors(t *testing.T) {
	failedStep := errors.New("registration_timeout: terminate instance i-a: throttled")
	tests := []struct {
		name     string
		give     collector
		wantType string
		wantOut  int
	}{
		{
			name:     "should report a failed cleanup as a workflow error and keep the others",
			give:     collector{results: []provisioning.CleanupResult{{Cleanup: timeout, Err: failedStep}, {Cleanup: leaked}}, err: fmt.Errorf("collect garbage: %w", failedStep)},
			wantType: workflow.ErrInternal,
			wantOut:  2,
		},
		{
			name:     "should report a deadline as a timeout",
			give:     collector{err: fmt.Errorf("collect garbage: list instances: %w", context.DeadlineExceeded)},
			wantType: workflow.ErrTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newHandler(t, tt.give).Handle(context.Background(), nil)
			var ire messages.InvokeResponse_Error
			if !errors.As(err, &ire) || ire.Type != tt.wantType {
				t.Fatalf("Handle() error = %#v, want errorType %q", err, tt.wantType)
			}
			if len(out.Cleanups) != tt.wantOut {
				t.Errorf("Handle() reported %d cleanups, want %d", len(out.Cleanups), tt.wantOut)
			}
			if tt.wantOut > 0 && !strings.Contains(out.Cleanups[0].Error, "throttled") {
				t.Errorf("first cleanup error = %q, want the cause", out.Cleanups[0].Error)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	env := map[string]string{"CLUSTER_NAME": "prod", "TABLE_NAME": "nw", "AWS_REGION": "ap-northeast-1", "CLUSTER_ENDPOINT": "https://k", "CLUSTER_CA_DATA": "Y2E="}
	got, err := handler.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig() error = %v", err)
	}
	if diff := cmp.Diff(handler.Config{Cluster: "prod", Table: "nw", Region: "ap-northeast-1", Endpoint: "https://k", CAData: "Y2E="}, got); diff != "" {
		t.Errorf("LoadConfig() mismatch (-want +got):\n%s", diff)
	}
	env["ISOLATED_VPC"] = "true"
	if got, err := handler.LoadConfig(func(k string) string { return env[k] }); err != nil || !got.IsolatedVPC {
		t.Errorf("LoadConfig(ISOLATED_VPC=true) = %+v, %v; want IsolatedVPC", got, err)
	}
	env["ISOLATED_VPC"] = "maybe"
	if _, err := handler.LoadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "ISOLATED_VPC") {
		t.Errorf("LoadConfig(ISOLATED_VPC=maybe) error = %v, want one naming ISOLATED_VPC", err)
	}
	if _, err := handler.LoadConfig(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "TABLE_NAME: required") {
		t.Errorf("LoadConfig(empty) error = %v, want the missing settings", err)
	}
}
