package handler_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/functions/disrupttask/handler"
	"github.com/nodewright/nodewright/functions/internal/adapters"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/workflow"
)

// recorder is a service that records the step it ran and fails with err.
type recorder struct {
	called string
	at     time.Time
	err    error
}

func (r *recorder) rec(step string, now time.Time) error { r.called, r.at = step, now; return r.err }

func (r *recorder) AcquireBudget(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.BudgetOutput, error) {
	return workflow.BudgetOutput{}, r.rec(workflow.StepAcquireBudget, now)
}
func (r *recorder) LaunchReplacements(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.LaunchOutput, error) {
	return workflow.LaunchOutput{}, r.rec(workflow.StepLaunchReplacements, now)
}
func (r *recorder) CheckReplacements(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.ReadinessOutput, error) {
	return workflow.ReadinessOutput{}, r.rec(workflow.StepCheckReplacements, now)
}
func (r *recorder) Taint(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	return workflow.NodesOutput{}, r.rec(workflow.StepTaint, now)
}
func (r *recorder) Revalidate(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	return workflow.NodesOutput{}, r.rec(workflow.StepRevalidate, now)
}
func (r *recorder) BeginTermination(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	return workflow.NodesOutput{}, r.rec(workflow.StepBeginTermination, now)
}
func (r *recorder) Drain(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.DrainOutput, error) {
	return workflow.DrainOutput{}, r.rec(workflow.StepDrain, now)
}
func (r *recorder) Terminate(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	return workflow.NodesOutput{}, r.rec(workflow.StepTerminate, now)
}
func (r *recorder) Delete(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	return workflow.NodesOutput{}, r.rec(workflow.StepDelete, now)
}
func (r *recorder) ReleaseBudget(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.ReleaseOutput, error) {
	return workflow.ReleaseOutput{}, r.rec(workflow.StepReleaseBudget, now)
}
func (r *recorder) Rollback(_ context.Context, _ workflow.DisruptionState, now time.Time) (workflow.RollbackOutput, error) {
	return workflow.RollbackOutput{}, r.rec(workflow.StepRollback, now)
}
func (r *recorder) ContinueAsNew(_ context.Context, _ workflow.DisruptionState, machine string) (workflow.ContinueOutput, error) {
	return workflow.ContinueOutput{Execution: machine}, r.rec(workflow.StepContinueAsNew, time.Time{})
}

func newHandler(t *testing.T, svc *recorder) *handler.Handler {
	t.Helper()
	h, err := handler.NewWithService(svc, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHandleDispatchesOnTheStep(t *testing.T) {
	for _, step := range workflow.Steps() {
		t.Run("should run "+step, func(t *testing.T) {
			svc := &recorder{}
			if _, err := newHandler(t, svc).Handle(t.Context(), workflow.TaskInput{Step: step, StateMachine: machineARN}); err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			if svc.called != step {
				t.Errorf("ran %q, want %q", svc.called, step)
			}
		})
	}
}

func TestHandleNamesErrors(t *testing.T) {
	tests := []struct {
		name  string
		step  string
		err   error
		wantT string
	}{
		{name: "should keep a workflow error's name", step: workflow.StepAcquireBudget,
			err: fmt.Errorf("acquire: %w", workflow.NewError(workflow.ErrBudgetExhausted, errors.New("no room"))), wantT: workflow.ErrBudgetExhausted},
		{name: "should report a version conflict as Conflict", step: workflow.StepTaint,
			err: fmt.Errorf("claim: %w", v1.ErrConflict), wantT: workflow.ErrConflict},
		{name: "should report a deadline as Timeout", step: workflow.StepDrain, err: context.DeadlineExceeded, wantT: workflow.ErrTimeout},
		{name: "should report anything else as Internal", step: workflow.StepDelete, err: errors.New("boom"), wantT: workflow.ErrInternal},
		{name: "should refuse an unknown step as InvalidInput", step: "Dance", wantT: workflow.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newHandler(t, &recorder{err: tt.err}).Handle(t.Context(), workflow.TaskInput{Step: tt.step})
			var ire messages.InvokeResponse_Error
			if !errors.As(err, &ire) || ire.Type != tt.wantT {
				t.Errorf("Handle() error = %#v, want type %s", err, tt.wantT)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	env := map[string]string{
		"CLUSTER_NAME": "prod", "TABLE_NAME": "nodewright", "AWS_REGION": "us-east-1", "KUBERNETES_VERSION": "1.33",
		"CLUSTER_ENDPOINT": "https://example.eks.amazonaws.com", "CLUSTER_CA_DATA": "Y2E=",
	}
	got, err := handler.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig() error = %v", err)
	}
	want := handler.Config{Cluster: "prod", Table: "nodewright", Region: "us-east-1", KubernetesVersion: "1.33",
		Endpoint: "https://example.eks.amazonaws.com", CAData: "Y2E="}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig() mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{name: "should name every missing setting", env: map[string]string{}},
		{name: "should refuse a CA bundle that is not base64", env: map[string]string{
			"CLUSTER_NAME": "prod", "TABLE_NAME": "t", "AWS_REGION": "us-east-1", "KUBERNETES_VERSION": "1.33",
			"CLUSTER_ENDPOINT": "https://x", "CLUSTER_CA_DATA": "not base64!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := handler.LoadConfig(func(k string) string { return tt.env[k] }); err == nil {
				t.Error("LoadConfig() error = nil, want an error")
			}
		})
	}
}

// TestLaunchStatusesMatchProvisioning pins the launch statuses the adapter
// passes through by name.
func TestLaunchStatusesMatchProvisioning(t *testing.T) {
	pairs := map[launch.Status]launch.Status{
		launch.Launched: launch.Launched, launch.AlreadyLaunched: launch.AlreadyLaunched,
		launch.InsufficientCapacity: launch.InsufficientCapacity, launch.NodeClassNotReady: launch.NodeClassNotReady,
		launch.Abandoned: launch.Abandoned, launch.LaunchFailed: launch.LaunchFailed,
	}
	for p, want := range pairs {
		got, err := adapters.ReplacementLauncher{Provisioner: fixedLaunch{status: p}}.LaunchNodeClaims(t.Context(), []v1.NodeClaim{{}}, t0)
		if err != nil || got[0].Status != want {
			t.Errorf("LaunchNodeClaims() with %s = %+v, %v; want %s", p, got, err, want)
		}
	}
}

type fixedLaunch struct{ status launch.Status }

func (f fixedLaunch) LaunchNodeClaims(context.Context, []v1.NodeClaim, time.Time) ([]provisioning.Launch, []string, error) {
	return []provisioning.Launch{{NodeClaim: "x", Status: f.status}}, nil, nil
}

func TestAdaptersTranslateErrors(t *testing.T) {
	_, store := newRecordedStores(t)
	if _, err := (adapters.TerminationClaims{Store: store}).GetNodeClaim(t.Context(), "missing"); !errors.Is(err, v1.ErrNotFound) || !errors.Is(err, ddbstore.ErrNotFound) {
		t.Errorf("GetNodeClaim(missing) error = %v, want v1.ErrNotFound (keeping ddbstore's)", err)
	}
	b := adapters.Budgets{Store: store}
	if err := b.AcquireBudget(t.Context(), "general", "x", 1, 0, t0, time.Minute); !errors.Is(err, v1.ErrBudgetExhausted) {
		t.Errorf("AcquireBudget(limit 0) error = %v, want v1.ErrBudgetExhausted", err)
	}
	k := adapters.Kube{Client: failingKube{err: fmt.Errorf("get node n: %w", kube.ErrNotFound)}}
	if _, err := k.GetNode(t.Context(), "n"); !errors.Is(err, v1.ErrNotFound) {
		t.Errorf("GetNode() error = %v, want v1.ErrNotFound", err)
	}
}

// failingKube fails every call with err.
type failingKube struct{ err error }

func (f failingKube) ListNodes(context.Context) ([]corev1.Node, error) { return nil, f.err }
func (f failingKube) GetNode(context.Context, string) (*corev1.Node, error) {
	return nil, f.err
}
func (f failingKube) UpdateNode(context.Context, string, func(*corev1.Node) error) error {
	return f.err
}
func (f failingKube) DeleteNode(context.Context, string) error                     { return f.err }
func (f failingKube) ListPodsOnNode(context.Context, string) ([]corev1.Pod, error) { return nil, f.err }
func (f failingKube) Evict(context.Context, *corev1.Pod, time.Duration) (kube.Eviction, error) {
	return kube.Eviction{}, f.err
}
func (f failingKube) DeletePod(context.Context, *corev1.Pod, time.Duration) error { return f.err }
