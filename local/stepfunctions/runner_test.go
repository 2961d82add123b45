package stepfunctions_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/lambdaserver"
	"github.com/nodewright/nodewright/local/stepfunctions"
)

const machineARN = "arn:aws:states:us-east-1:000000000000:stateMachine:sample"

// runner returns a Runner whose Lambda calls reach the counter function, or
// skips the test when the npm packages are not installed.
func runner(t *testing.T) (*stepfunctions.Runner, *counter) {
	t.Helper()
	r, err := stepfunctions.FindFromRepo(".")
	if errors.Is(err, stepfunctions.ErrNotInstalled) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	srv := lambdaserver.New()
	if err := srv.Register("counter", c.handle); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return r.WithLambda(hs.URL, "us-east-1"), c
}

type counter struct {
	mu         sync.Mutex
	throttles  int
	executions []string
}

type countInput struct {
	N         int    `json:"n"`
	Fail      string `json:"fail"`
	Execution string `json:"execution"`
}

// handle adds one to n. fail "throttle-once" fails the first call with
// Throttled; "always" fails every call with InvalidInput.
func (c *counter) handle(_ context.Context, in countInput) (map[string]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.executions = append(c.executions, in.Execution)
	switch {
	case in.Fail == "always":
		return nil, messages.InvokeResponse_Error{Type: "InvalidInput", Message: "never works"}
	case in.Fail == "throttle-once" && c.throttles == 0:
		c.throttles++
		return nil, messages.InvokeResponse_Error{Type: "Throttled", Message: "slow down"}
	}
	return map[string]int{"n": in.N + 1}, nil
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func sample(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "sample.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	def, err := stepfunctions.Substitute(raw, map[string]string{"CounterFunctionArn": "arn:aws:lambda:us-east-1:000000000000:function:counter"})
	if err != nil {
		t.Fatal(err)
	}
	return def
}

func TestRunExecutesTheDefinition(t *testing.T) {
	tests := []struct {
		name       string
		input      map[string]any
		wantStatus stepfunctions.Status
		wantOutput string
		wantStates []string
	}{
		{
			name:       "should loop through Wait with SecondsPath until the Choice ends it",
			input:      map[string]any{"n": 1, "fail": "", "pause": 0},
			wantStatus: stepfunctions.Succeeded,
			wantOutput: `{"n":2,"fail":"","pause":0,"counted":{"n":3}}`,
			wantStates: []string{"Count", "Done?", "Pause", "Again", "Count", "Done?", "Finish"},
		},
		{
			name:       "should retry a custom error name the Lambda reports",
			input:      map[string]any{"n": 2, "fail": "throttle-once", "pause": 0},
			wantStatus: stepfunctions.Succeeded,
			wantOutput: `{"n":2,"fail":"throttle-once","pause":0,"counted":{"n":3}}`,
			wantStates: []string{"Count", "Done?", "Finish"},
		},
		{
			name:       "should catch an error that is not retried",
			input:      map[string]any{"n": 2, "fail": "always", "pause": 0},
			wantStatus: stepfunctions.Succeeded,
			wantOutput: `{"n":2,"fail":"always","pause":0,"error":{"Error":"InvalidInput","Cause":"InvalidInput: never works"},"outcome":"recovered"}`,
			wantStates: []string{"Count", "Recover"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c := runner(t)
			res, err := r.Run(t.Context(), sample(t), stepfunctions.Execution{Name: "exec-1", StateMachineARN: machineARN, Input: tt.input})
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			if res.Status != tt.wantStatus {
				t.Fatalf("Status = %s (%s: %s), want %s", res.Status, res.Error, res.Cause, tt.wantStatus)
			}
			if diff := cmp.Diff(decode(t, tt.wantOutput), decode(t, string(res.Output))); diff != "" {
				t.Errorf("Output mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStates, res.StatesEntered()); diff != "" {
				t.Errorf("StatesEntered() mismatch (-want +got):\n%s", diff)
			}
			for _, e := range c.executions {
				if e != "exec-1" {
					t.Errorf("the task saw $$.Execution.Name %q, want exec-1", e)
				}
			}
		})
	}
}

func TestRunReportsFailures(t *testing.T) {
	tests := []struct {
		name       string
		definition string
		wantStatus stepfunctions.Status
		wantError  string
	}{
		{name: "should fail an execution that reaches a Fail state",
			definition: `{"StartAt":"F","States":{"F":{"Type":"Fail","Error":"RolledBack","Cause":"replacement failed"}}}`,
			wantStatus: stepfunctions.Failed, wantError: "RolledBack"},
		{name: "should report a definition that does not validate",
			definition: `{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"Missing"}}}`,
			wantStatus: stepfunctions.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := runner(t)
			res, err := r.Run(t.Context(), []byte(tt.definition), stepfunctions.Execution{Name: "exec-1", StateMachineARN: machineARN, Input: map[string]any{}})
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			if res.Status != tt.wantStatus || (tt.wantError != "" && res.Error != tt.wantError) {
				t.Errorf("Run() = %s %q (%s), want %s %q", res.Status, res.Error, res.Cause, tt.wantStatus, tt.wantError)
			}
		})
	}
}

func TestRunRefusesPlaceholders(t *testing.T) {
	r, _ := runner(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "sample.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context(), raw, stepfunctions.Execution{Name: "x", StateMachineARN: machineARN, Input: map[string]any{}}); err == nil {
		t.Error("Run() with a placeholder left: error = nil, want an error")
	}
}

func TestValidate(t *testing.T) {
	r, _ := runner(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.asl.json")
	bad := filepath.Join(dir, "bad.asl.json")
	if err := os.WriteFile(good, sample(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"B"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(t.Context(), good); err != nil {
		t.Errorf("Validate(good) error = %v", err)
	}
	if err := r.Validate(t.Context(), bad); err == nil {
		t.Error("Validate(bad) error = nil, want the missing transition")
	}
}

func TestSubstitute(t *testing.T) {
	def := []byte(`{"a":"${One}","b":"${Two}","c":"${One}"}`)
	got, err := stepfunctions.Substitute(def, map[string]string{"One": "1", "Two": "2"})
	if err != nil {
		t.Fatalf("Substitute() error = %v", err)
	}
	if diff := cmp.Diff(`{"a":"1","b":"2","c":"1"}`, string(got)); diff != "" {
		t.Errorf("Substitute() mismatch (-want +got):\n%s", diff)
	}
	if _, err := stepfunctions.Substitute(def, map[string]string{"One": "1"}); err == nil {
		t.Error("Substitute() without Two: error = nil, want an error")
	}
	if diff := cmp.Diff([]string{"One", "Two"}, stepfunctions.Placeholders(def)); diff != "" {
		t.Errorf("Placeholders() mismatch (-want +got):\n%s", diff)
	}
}

func TestFindReportsMissingPackages(t *testing.T) {
	_, err := stepfunctions.Find(t.TempDir())
	if !errors.Is(err, stepfunctions.ErrNotInstalled) {
		t.Errorf("Find(empty dir) error = %v, want ErrNotInstalled", err)
	}
}

// TestResultHelpers checks StateOutput on a hand-made history.
func TestResultHelpers(t *testing.T) {
	var res stepfunctions.Result
	if err := json.Unmarshal([]byte(`{"Events":[
		{"type":"StateEntered","state":{"name":"A","type":"Task"}},
		{"type":"StateExited","state":{"name":"A","type":"Task","output":{"x":1}}},
		{"type":"StateExited","state":{"name":"A","type":"Task","output":{"x":2}}}]}`), &res); err != nil {
		t.Fatal(err)
	}
	out, ok := res.StateOutput("A")
	if !ok || string(out) != `{"x":2}` {
		t.Errorf("StateOutput(A) = %s, %v, want the last exit", out, ok)
	}
	if _, ok := res.StateOutput("B"); ok {
		t.Error("StateOutput(B) found an output for a state that never ran")
	}
}
