// Package stepfunctions runs nodewright's Amazon States Language state
// machines (statemachines/*.asl.json) on one machine: each execution is a
// `node` subprocess running aws-local-stepfunctions (npm, Node 22), whose
// Task states call Lambda through the AWS SDK at AWS_ENDPOINT_URL_LAMBDA,
// normally a local/lambdaserver serving the real handlers. It also
// validates definitions with asl-validator.
//
// Both npm packages and Node 22 itself are installed by `make sfn-deps`
// into <repo>/.cache/npm; Find locates them and reports ErrNotInstalled
// when they are absent, so tests can skip with a message naming the
// target. The engine speaks JSONPath only (a JSONata machine runs wrong
// silently) and treats every Resource as a Lambda function: write direct
// Lambda ARNs, or ${Placeholder}s that Substitute fills.
package stepfunctions

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

//go:embed runner.mjs
var runnerScript string

// ErrNotInstalled is returned by Find when Node 22 or the npm packages are
// missing.
var ErrNotInstalled = errors.New("aws-local-stepfunctions, asl-validator and Node 22 are not installed: run `make sfn-deps`")

// NPMDir is where `make sfn-deps` installs the npm packages, relative to
// the repository root.
const NPMDir = ".cache/npm"

// Runner runs executions and validations. It holds only paths and
// settings and is safe for concurrent use: every execution is its own
// process.
type Runner struct {
	node    string
	modules string
	// lambdaEndpoint is AWS_ENDPOINT_URL_LAMBDA for the executions.
	lambdaEndpoint string
	region         string
}

// Find returns a Runner over the packages installed under dir (a
// repository's .cache/npm): node_modules/.bin/node (Node 22),
// aws-local-stepfunctions and asl-validator. It returns an error wrapping
// ErrNotInstalled when any is missing.
func Find(dir string) (*Runner, error) {
	r := &Runner{
		node:    filepath.Join(dir, "node_modules", ".bin", "node"),
		modules: filepath.Join(dir, "node_modules"),
		region:  "us-east-1",
	}
	for _, p := range []string{r.node, r.engineModule(), r.validatorScript()} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("find %s: %w", p, ErrNotInstalled)
		}
	}
	return r, nil
}

// FindFromRepo walks up from start to the first directory holding go.mod
// and returns Find(<that directory>/.cache/npm).
func FindFromRepo(start string) (*Runner, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return nil, fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return Find(filepath.Join(dir, NPMDir))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no go.mod above %s: %w", start, ErrNotInstalled)
		}
		dir = parent
	}
}

// WithLambda returns a copy of r whose executions call Lambda at endpoint
// (a URL such as httptest.Server.URL) in region.
func (r *Runner) WithLambda(endpoint, region string) *Runner {
	c := *r
	c.lambdaEndpoint = endpoint
	if region != "" {
		c.region = region
	}
	return &c
}

func (r *Runner) engineModule() string {
	return filepath.Join(r.modules, "aws-local-stepfunctions", "build", "main.node.esm.js")
}

func (r *Runner) validatorScript() string {
	return filepath.Join(r.modules, "asl-validator", "dist", "bin", "asl-validator.js")
}

// Execution describes one run.
type Execution struct {
	// Name is the execution's name ($$.Execution.Name); Run derives
	// $$.Execution.Id from it and StateMachineARN.
	Name string
	// StateMachineARN is $$.StateMachine.Id.
	StateMachineARN string
	// Input is the execution input, marshalled as JSON.
	Input any
	// StartTime is $$.Execution.StartTime; zero means now.
	StartTime time.Time
	// WaitOverrides pause the named Wait states for the given time
	// instead of their Seconds/SecondsPath (aws-local-stepfunctions'
	// waitTimeOverrides).
	WaitOverrides map[string]time.Duration
	// RetryOverrides replace the named states' Retry intervals.
	RetryOverrides map[string]time.Duration
}

// Status is an execution's final status, as Step Functions names it.
type Status string

// Statuses.
const (
	Succeeded Status = "SUCCEEDED"
	Failed    Status = "FAILED"
	TimedOut  Status = "TIMED_OUT"
	// Invalid means the definition did not validate; nothing ran.
	Invalid Status = "INVALID"
)

// Result is an execution's outcome with its history.
type Result struct {
	Status Status
	// Output is the final output of a succeeded execution.
	Output json.RawMessage
	// Error and Cause describe a failed execution.
	Error string
	Cause string
	// Events is the execution's history, in order.
	Events []Event
}

// Event is one history event (aws-local-stepfunctions' event logs).
type Event struct {
	// Type is ExecutionStarted, StateEntered, StateExited, StateFailed,
	// StateRetried, StateCaught, MapIteration*, ParallelBranch*,
	// ExecutionSucceeded or ExecutionFailed.
	Type string `json:"type"`
	// Timestamp is in Unix milliseconds.
	Timestamp int64 `json:"timestamp"`
	// State is the state an event of a state is about.
	State *EventState `json:"state,omitempty"`
	// Index is the Map iteration of the event, if any.
	Index *int `json:"index,omitempty"`
	// Error and Cause describe a failure.
	Error string          `json:"Error,omitempty"`
	Cause json.RawMessage `json:"Cause,omitempty"`
	// Retry describes a StateRetried event.
	Retry *struct {
		Attempt int `json:"attempt"`
	} `json:"retry,omitempty"`
}

// EventState is the state an event is about, with its data.
type EventState struct {
	Name   string          `json:"name"`
	Type   string          `json:"type"`
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
}

// StatesEntered returns the names of the states the execution entered, in
// order (nested Map and Parallel states included).
func (r Result) StatesEntered() []string {
	var out []string
	for _, e := range r.Events {
		if e.Type == "StateEntered" && e.State != nil {
			out = append(out, e.State.Name)
		}
	}
	return out
}

// StateOutput returns the output of the last exit of the named state.
func (r Result) StateOutput(name string) (json.RawMessage, bool) {
	for i := len(r.Events) - 1; i >= 0; i-- {
		e := r.Events[i]
		if e.Type == "StateExited" && e.State != nil && e.State.Name == name {
			return e.State.Output, true
		}
	}
	return nil, false
}

type request struct {
	Definition             json.RawMessage  `json:"definition"`
	Input                  json.RawMessage  `json:"input"`
	Context                map[string]any   `json:"context"`
	WaitTimeOverrides      map[string]int64 `json:"waitTimeOverrides"`
	RetryIntervalOverrides map[string]int64 `json:"retryIntervalOverrides"`
}

type response struct {
	Status Status          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  string          `json:"error"`
	Cause  string          `json:"cause"`
	Events []Event         `json:"events"`
}

// Run executes definition (ASL JSON with no placeholders left) and returns
// its result. A failed execution is a Result with Status Failed, not an
// error; errors are for a run that could not happen (bad input, the
// subprocess failing, ctx ending).
func (r *Runner) Run(ctx context.Context, definition []byte, ex Execution) (Result, error) {
	if m := placeholder.Find(definition); m != nil {
		return Result{}, fmt.Errorf("run %s: definition still has placeholder %s", ex.Name, m)
	}
	input, err := json.Marshal(ex.Input)
	if err != nil {
		return Result{}, fmt.Errorf("run %s: input: %w", ex.Name, err)
	}
	start := ex.StartTime
	if start.IsZero() {
		start = time.Now()
	}
	req := request{
		Definition: definition,
		Input:      input,
		Context: map[string]any{
			"Execution": map[string]any{
				"Id":        executionARN(ex.StateMachineARN, ex.Name),
				"Name":      ex.Name,
				"Input":     json.RawMessage(input),
				"StartTime": start.UTC().Format(time.RFC3339Nano),
			},
			"StateMachine": map[string]any{"Id": ex.StateMachineARN, "Name": machineName(ex.StateMachineARN)},
		},
		WaitTimeOverrides:      millis(ex.WaitOverrides),
		RetryIntervalOverrides: millis(ex.RetryOverrides),
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("run %s: %w", ex.Name, err)
	}
	cmd := exec.CommandContext(ctx, r.node, "--input-type=module", "-e", runnerScript)
	cmd.Env = r.env()
	cmd.Stdin = bytes.NewReader(body)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("run %s: node: %w: %s", ex.Name, err, strings.TrimSpace(stderr.String()))
	}
	var resp response
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return Result{}, fmt.Errorf("run %s: decode engine output: %w: %.500s", ex.Name, err, stdout.String())
	}
	return Result(resp), nil
}

// Validate runs asl-validator on the definition file at path (JSONPath
// checks and ARN checks included) and returns an error listing its
// findings when it is invalid.
func (r *Runner) Validate(ctx context.Context, path string) error {
	cmd := exec.CommandContext(ctx, r.node, r.validatorScript(), "--json-path", path)
	cmd.Env = r.env()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return fmt.Errorf("validate %s: %s", path, strings.TrimSpace(string(out)))
	case err != nil:
		return fmt.Errorf("validate %s: %w", path, err)
	}
	return nil
}

// env is the subprocess environment: nothing of the caller's but PATH, so
// no real AWS credentials or endpoints leak in.
func (r *Runner) env() []string {
	env := []string{
		"PATH=" + filepath.Dir(r.node) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
		"NW_SFN_MODULE=" + r.engineModule(),
		"AWS_REGION=" + r.region,
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
	if r.lambdaEndpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL_LAMBDA="+r.lambdaEndpoint)
	}
	return env
}

var placeholder = regexp.MustCompile(`\$\{[A-Za-z0-9_]+\}`)

// Substitute replaces every ${Name} in definition with values[Name], as
// the CDK's DefinitionSubstitutions do, and fails if a placeholder has no
// value.
func Substitute(definition []byte, values map[string]string) ([]byte, error) {
	var missing []string
	out := placeholder.ReplaceAllFunc(definition, func(m []byte) []byte {
		name := string(m[2 : len(m)-1])
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return []byte(v)
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("substitute: no value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// Placeholders returns the distinct ${Name}s of definition, sorted.
func Placeholders(definition []byte) []string {
	seen := map[string]bool{}
	for _, m := range placeholder.FindAll(definition, -1) {
		seen[string(m[2:len(m)-1])] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// executionARN derives an execution's ARN from its state machine's ARN.
func executionARN(machine, name string) string {
	if i := strings.Index(machine, ":stateMachine:"); i >= 0 {
		return machine[:i] + ":execution:" + machine[i+len(":stateMachine:"):] + ":" + name
	}
	return name
}

func machineName(arn string) string {
	return arn[strings.LastIndex(arn, ":")+1:]
}

func millis(m map[string]time.Duration) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v.Milliseconds()
	}
	return out
}
