package stepfunctions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Service is a local Step Functions endpoint (the AWS JSON 1.0 protocol,
// X-Amz-Target AWSStepFunctions.*) over a Runner: the unmodified Step
// Functions clients of the Lambdas (AWS_ENDPOINT_URL_SFN) start executions
// of registered state machines, and the operator and the tests read them
// back. It serves StartExecution (with the service's name rules: a name
// is used once per state machine; the same name and input while running
// returns the running execution, anything else is ExecutionAlreadyExists),
// DescribeExecution, ListExecutions and GetExecutionHistory (the engine's
// events translated to Step Functions history event types). Executions
// run in the background, at most Parallel at once.
type Service struct {
	runner *Runner
	// Parallel bounds the executions running at once (node processes); 0
	// means 4. Set it before the first request.
	Parallel int
	// Region and Account make up the ARNs of registered state machines.
	Region, Account string

	mu       sync.Mutex
	machines map[string][]byte // ARN -> definition, placeholders filled
	execs    map[string]*execution
	order    []string
	sem      chan struct{}
	wg       sync.WaitGroup
	ctx      context.Context //nolint:containedctx // the service's lifetime (Close cancels it): executions outlive StartExecution
	cancel   context.CancelFunc
	now      func() time.Time
}

type execution struct {
	arn, machine, name string
	input              json.RawMessage
	start, stop        time.Time
	status             string // RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED
	result             Result
}

// NewService returns a Service running executions with r (whose Lambda
// endpoint the tasks call).
func NewService(r *Runner) *Service {
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{runner: r, Region: "us-east-1", Account: "000000000000", machines: map[string][]byte{},
		execs: map[string]*execution{}, ctx: ctx, cancel: cancel, now: time.Now}
}

// Register makes definition (placeholders filled, see Substitute) the
// state machine name and returns its ARN.
func (s *Service) Register(name string, definition []byte) (string, error) {
	if m := placeholder.Find(definition); m != nil {
		return "", fmt.Errorf("register %s: placeholder %s has no value", name, m)
	}
	var probe struct {
		StartAt string          `json:"StartAt"`
		States  json.RawMessage `json:"States"`
	}
	if err := json.Unmarshal(definition, &probe); err != nil || probe.StartAt == "" {
		return "", fmt.Errorf("register %s: not an ASL definition", name)
	}
	arn := "arn:aws:states:" + s.Region + ":" + s.Account + ":stateMachine:" + name
	s.mu.Lock()
	defer s.mu.Unlock()
	s.machines[arn] = definition
	return arn, nil
}

// ExecutionRecord is an execution as the Service reports it.
type ExecutionRecord struct {
	ARN, StateMachineARN, Name string
	Input                      json.RawMessage
	Status                     string
	Start, Stop                time.Time
	// Result is the outcome and history once the execution stopped.
	Result Result
}

// Executions returns every execution started so far, in start order.
func (s *Service) Executions() []ExecutionRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ExecutionRecord, 0, len(s.order))
	for _, arn := range s.order {
		e := s.execs[arn]
		out = append(out, ExecutionRecord{ARN: e.arn, StateMachineARN: e.machine, Name: e.name, Input: e.input, Status: e.status,
			Start: e.start, Stop: e.stop, Result: e.result})
	}
	return out
}

// Wait blocks until no execution runs or ctx ends.
func (s *Service) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the running executions (they end ABORTED) and waits for
// them.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

// ServeHTTP answers the AWS JSON 1.0 requests.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AWSStepFunctions.")
	if r.Method != http.MethodPost || !ok {
		writeError(w, http.StatusBadRequest, "UnknownOperationException", "want POST with X-Amz-Target AWSStepFunctions.<operation>")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	var out any
	switch op {
	case "StartExecution":
		out, err = s.startExecution(body)
	case "DescribeExecution":
		out, err = s.describeExecution(body)
	case "ListExecutions":
		out, err = s.listExecutions(body)
	case "GetExecutionHistory":
		out, err = s.getExecutionHistory(body)
	default:
		writeError(w, http.StatusBadRequest, "UnknownOperationException", "operation "+op+" is not served locally")
		return
	}
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, http.StatusBadRequest, ae.code, ae.message)
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}

type apiError struct{ code, message string }

func (e *apiError) Error() string { return e.code + ": " + e.message }

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
}

func epoch(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func (s *Service) startExecution(body []byte) (any, error) {
	var req struct {
		StateMachineArn string  `json:"stateMachineArn"`
		Name            string  `json:"name"`
		Input           *string `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	input := "{}"
	if req.Input != nil {
		input = *req.Input
	}
	if !json.Valid([]byte(input)) {
		return nil, &apiError{"InvalidExecutionInput", "input is not JSON"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	def, ok := s.machines[req.StateMachineArn]
	if !ok {
		return nil, &apiError{"StateMachineDoesNotExist", "state machine does not exist: " + req.StateMachineArn}
	}
	if req.Name == "" {
		req.Name = fmt.Sprintf("%d", s.now().UnixNano())
	}
	arn := executionARN(req.StateMachineArn, req.Name)
	if e, ok := s.execs[arn]; ok {
		if e.status == "RUNNING" && string(e.input) == input {
			return map[string]any{"executionArn": arn, "startDate": epoch(e.start)}, nil
		}
		return nil, &apiError{"ExecutionAlreadyExists", "Execution Already Exists: '" + arn + "'"}
	}
	e := &execution{arn: arn, machine: req.StateMachineArn, name: req.Name, input: json.RawMessage(input), start: s.now(), status: "RUNNING"}
	s.execs[arn] = e
	s.order = append(s.order, arn)
	if s.sem == nil {
		n := s.Parallel
		if n <= 0 {
			n = 4
		}
		s.sem = make(chan struct{}, n)
	}
	s.wg.Add(1)
	go s.run(e, def)
	return map[string]any{"executionArn": arn, "startDate": epoch(e.start)}, nil
}

// run executes e in the background and records its outcome.
func (s *Service) run(e *execution, def []byte) {
	defer s.wg.Done()
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-s.ctx.Done():
		s.finish(e, Result{Status: "ABORTED"})
		return
	}
	res, err := s.runner.Run(s.ctx, def, Execution{Name: e.name, StateMachineARN: e.machine, Input: e.input, StartTime: e.start})
	if err != nil {
		status := Failed
		if s.ctx.Err() != nil {
			status = "ABORTED"
		}
		res = Result{Status: status, Error: "States.Runtime", Cause: err.Error()}
	}
	s.finish(e, res)
}

func (s *Service) finish(e *execution, res Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.result, e.status, e.stop = res, string(res.Status), s.now()
	if res.Status == Invalid {
		e.status = string(Failed)
	}
}

func (s *Service) lookup(arn string) (*execution, error) {
	e, ok := s.execs[arn]
	if !ok {
		return nil, &apiError{"ExecutionDoesNotExist", "execution does not exist: " + arn}
	}
	return e, nil
}

func (s *Service) describeExecution(body []byte) (any, error) {
	var req struct {
		ExecutionArn string `json:"executionArn"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.lookup(req.ExecutionArn)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"executionArn": e.arn, "stateMachineArn": e.machine, "name": e.name, "status": e.status,
		"startDate": epoch(e.start), "input": string(e.input)}
	if !e.stop.IsZero() {
		out["stopDate"] = epoch(e.stop)
	}
	if e.result.Output != nil {
		out["output"] = string(e.result.Output)
	}
	if e.result.Error != "" {
		out["error"], out["cause"] = e.result.Error, e.result.Cause
	}
	return out, nil
}

func (s *Service) listExecutions(body []byte) (any, error) {
	var req struct {
		StateMachineArn string `json:"stateMachineArn"`
		StatusFilter    string `json:"statusFilter"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.machines[req.StateMachineArn]; !ok {
		return nil, &apiError{"StateMachineDoesNotExist", "state machine does not exist: " + req.StateMachineArn}
	}
	items := []map[string]any{}
	// Newest first, as the service lists them.
	for i := len(s.order) - 1; i >= 0; i-- {
		e := s.execs[s.order[i]]
		if e.machine != req.StateMachineArn || (req.StatusFilter != "" && e.status != req.StatusFilter) {
			continue
		}
		item := map[string]any{"executionArn": e.arn, "stateMachineArn": e.machine, "name": e.name, "status": e.status, "startDate": epoch(e.start)}
		if !e.stop.IsZero() {
			item["stopDate"] = epoch(e.stop)
		}
		items = append(items, item)
	}
	return map[string]any{"executions": items}, nil
}

func (s *Service) getExecutionHistory(body []byte) (any, error) {
	var req struct {
		ExecutionArn string `json:"executionArn"`
		ReverseOrder bool   `json:"reverseOrder"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	e, err := s.lookup(req.ExecutionArn)
	var events []Event
	if err == nil {
		events = e.result.Events
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := HistoryEvents(events)
	if req.ReverseOrder {
		sort.SliceStable(out, func(i, j int) bool { return out[i]["id"].(int) > out[j]["id"].(int) })
	}
	return map[string]any{"events": out}, nil
}

// HistoryEvents translates the engine's events into Step Functions history
// events (GetExecutionHistory's shape): ExecutionStarted,
// <StateType>StateEntered / StateExited with the state's input and output,
// TaskFailed for a failed or retried task, ExecutionSucceeded,
// ExecutionFailed; ids count from 1.
func HistoryEvents(events []Event) []map[string]any {
	out := []map[string]any{}
	add := func(e Event, typ string, details map[string]any) {
		ev := map[string]any{"id": len(out) + 1, "previousEventId": len(out), "timestamp": float64(e.Timestamp) / 1000, "type": typ}
		for k, v := range details {
			ev[k] = v
		}
		out = append(out, ev)
	}
	for _, e := range events {
		stateType := ""
		if e.State != nil {
			stateType = e.State.Type
		}
		switch e.Type {
		case "ExecutionStarted":
			add(e, "ExecutionStarted", nil)
		case "StateEntered":
			add(e, stateType+"StateEntered", map[string]any{"stateEnteredEventDetails": map[string]any{"name": e.State.Name, "input": string(e.State.Input)}})
		case "StateExited":
			add(e, stateType+"StateExited", map[string]any{"stateExitedEventDetails": map[string]any{"name": e.State.Name, "output": string(e.State.Output)}})
		case "StateFailed", "StateRetried":
			if stateType == "Task" {
				add(e, "TaskFailed", map[string]any{"taskFailedEventDetails": map[string]any{"error": e.Error, "cause": causeText(e.Cause)}})
			}
		case "ExecutionSucceeded":
			add(e, "ExecutionSucceeded", nil)
		case "ExecutionFailed":
			add(e, "ExecutionFailed", map[string]any{"executionFailedEventDetails": map[string]any{"error": e.Error, "cause": causeText(e.Cause)}})
		}
	}
	return out
}

// causeText is an event's cause as text: a JSON string unquoted, anything
// else as JSON.
func causeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
