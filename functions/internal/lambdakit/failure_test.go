package lambdakit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/shared/workflow"
)

// invocation is one invocation's result through WithFailureLine and the
// lines it logged, without their timestamps.
type invocation struct {
	out      []byte
	err      error
	panicked any
	lines    []map[string]any
}

// failureLines runs one invocation of h through WithFailureLine.
func failureLines(t *testing.T, h any) invocation {
	t.Helper()
	var buf bytes.Buffer
	log := lambdakit.NewLogger(&buf, slog.LevelInfo)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	var inv invocation
	func() {
		defer func() { inv.panicked = recover() }()
		inv.out, inv.err = lambdakit.WithFailureLine(h, log).Invoke(ctx, []byte(`{"name":"x"}`))
	}()
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if jerr := json.Unmarshal([]byte(l), &m); jerr != nil {
			t.Fatalf("line %q is not JSON: %v", l, jerr)
		}
		delete(m, "timestamp")
		inv.lines = append(inv.lines, m)
	}
	return inv
}

type input struct{ Name string }

func TestWithFailureLineWritesTheAlarmedLineForAFailedInvocation(t *testing.T) {
	failed := lambdakit.AsWorkflowError(errors.New("launch nodeclaim default-abc: no offering"))
	inv := failureLines(t, func(context.Context, input) (string, error) { return "", failed })
	err, lines := inv.err, inv.lines
	var ire messages.InvokeResponse_Error
	if !errors.As(err, &ire) || ire.Type != workflow.ErrInternal {
		t.Errorf("error = %#v, want the handler's InvokeResponse_Error of type %s unchanged", err, workflow.ErrInternal)
	}
	// The alarmed line, as the infra test reads it (its log metric filter
	// matches its message).
	raw, rerr := os.ReadFile("testdata/invocation-failed.json")
	if rerr != nil {
		t.Fatal(rerr)
	}
	var want map[string]any
	if jerr := json.Unmarshal(raw, &want); jerr != nil {
		t.Fatal(jerr)
	}
	if diff := cmp.Diff([]map[string]any{want}, lines); diff != "" {
		t.Errorf("lines mismatch with testdata/invocation-failed.json (-want +got):\n%s", diff)
	}
	if want["message"] != lambdakit.InvocationFailed || want["level"] != "ERROR" {
		t.Errorf("testdata/invocation-failed.json = %v, want an ERROR line with message %q", want, lambdakit.InvocationFailed)
	}
}

func TestWithFailureLineWritesTheLineForAPanicAndPanicsAgain(t *testing.T) {
	inv := failureLines(t, func(context.Context, input) (string, error) { panic("nil map") })
	panicked, lines := inv.panicked, inv.lines
	if panicked != "nil map" {
		t.Errorf("recovered %v, want the handler's panic value re-raised", panicked)
	}
	want := []map[string]any{{"level": "ERROR", "message": lambdakit.InvocationFailed, lambdakit.ErrorTypeKey: "panic", "error": "nil map", "requestId": "req-1"}}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
}

func TestWithFailureLineIsSilentForASuccessfulInvocation(t *testing.T) {
	inv := failureLines(t, func(_ context.Context, in input) (string, error) { return "hello " + in.Name, nil })
	out, err, lines := inv.out, inv.err, inv.lines
	if err != nil || string(out) != `"hello x"` {
		t.Errorf("Invoke() = %s, %v; want \"hello x\", nil", out, err)
	}
	if len(lines) != 0 {
		t.Errorf("logged %v, want nothing", lines)
	}
}

func TestWithFailureLineNamesAPlainErrorByItsGoType(t *testing.T) {
	lines := failureLines(t, func(context.Context, input) (string, error) {
		return "", &os.PathError{Op: "open", Path: "/x", Err: os.ErrNotExist}
	}).lines
	if len(lines) != 1 || lines[0][lambdakit.ErrorTypeKey] != "PathError" {
		t.Errorf("lines = %v, want one failure line with %s PathError (what the runtime reports)", lines, lambdakit.ErrorTypeKey)
	}
}
