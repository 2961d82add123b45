// Package sfnstarter starts executions of one Step Functions state machine
// under names the caller derives from what the execution is about, so that
// starting the same thing twice starts it once: Step Functions refuses a
// second execution of a name for 90 days (StartExecution,
// ExecutionAlreadyExists), and this package reports that refusal as
// success. Names must therefore be deterministic, and the state machine must
// be a STANDARD one (EXPRESS executions are not deduplicated by name).
//
// The package declares the narrow API it calls; *sfn.Client satisfies it.
package sfnstarter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// API is the subset of the Step Functions client this package calls: only
// states:StartExecution.
type API interface {
	StartExecution(context.Context, *sfn.StartExecutionInput, ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
}

var _ API = (*sfn.Client)(nil)

// Limits of StartExecution (Step Functions quotas).
const (
	// MaxNameLength is the longest execution name.
	MaxNameLength = 80
	// MaxInputBytes is the largest execution input (256 KiB of UTF-8).
	MaxInputBytes = 256 * 1024
)

// ErrInvalid is wrapped by New and Start when an argument can never be
// accepted: a malformed state machine ARN, an execution name Step Functions
// refuses, or an input that does not marshal or is too large. Retrying does
// not help.
var ErrInvalid = errors.New("invalid argument")

// Starter starts executions of one state machine. It is safe for concurrent
// use and holds no state besides its configuration.
type Starter struct {
	api API
	arn string
	// executionPrefix is the ARN of an execution without its name:
	// "arn:<partition>:states:<region>:<account>:execution:<machine>:".
	executionPrefix string
}

// New returns a Starter for the state machine stateMachineARN, of the form
// "arn:<partition>:states:<region>:<account>:stateMachine:<name>". It
// returns an error wrapping ErrInvalid for any other form (a version or
// alias ARN included: their execution ARNs cannot be derived).
func New(api API, stateMachineARN string) (*Starter, error) {
	parts := strings.Split(stateMachineARN, ":")
	if len(parts) != 7 || parts[0] != "arn" || parts[1] == "" || parts[2] != "states" ||
		parts[3] == "" || parts[4] == "" || parts[5] != "stateMachine" || parts[6] == "" {
		return nil, fmt.Errorf("state machine ARN %q: want arn:<partition>:states:<region>:<account>:stateMachine:<name>: %w", stateMachineARN, ErrInvalid)
	}
	prefix := strings.Join(parts[:5], ":") + ":execution:" + parts[6] + ":"
	return &Starter{api: api, arn: stateMachineARN, executionPrefix: prefix}, nil
}

// Execution is the outcome of Start.
type Execution struct {
	// ARN is the execution's ARN, whether this call started it or not.
	ARN string
	// AlreadyExisted is true when Step Functions reported an execution of
	// that name already (ExecutionAlreadyExists): this call started
	// nothing. Step Functions also answers a repeat of a still-running
	// STANDARD execution with the same input as a fresh start; then
	// AlreadyExisted is false, and still only one execution exists.
	AlreadyExisted bool
}

// Start starts an execution named name with input marshalled as JSON. It
// is idempotent per name: if an execution of that name exists (running or
// closed, with any input), it returns that execution's ARN with
// AlreadyExisted set and a nil error. It returns an error wrapping
// ErrInvalid, without calling Step Functions, when name is empty, longer
// than MaxNameLength bytes or has a character Step Functions refuses (white
// space, control characters, U+FFFE, U+FFFF, invalid UTF-8,
// < > { } [ ] ? * " # % \ ^ | ~ ` $ & , ; : /),
// or when input does not marshal or exceeds MaxInputBytes; any other error
// is the API's, wrapped.
func (s *Starter) Start(ctx context.Context, name string, input any) (Execution, error) {
	if err := checkName(name); err != nil {
		return Execution{}, fmt.Errorf("start execution: %w", err)
	}
	body, err := json.Marshal(input)
	if err != nil {
		return Execution{}, fmt.Errorf("start execution %s: input: %w: %w", name, err, ErrInvalid)
	}
	if len(body) > MaxInputBytes {
		return Execution{}, fmt.Errorf("start execution %s: input is %d bytes, at most %d: %w", name, len(body), MaxInputBytes, ErrInvalid)
	}
	in := string(body)
	out, err := s.api.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &s.arn, Name: &name, Input: &in})
	var exists *types.ExecutionAlreadyExists
	switch {
	case errors.As(err, &exists):
		return Execution{ARN: s.executionPrefix + name, AlreadyExisted: true}, nil
	case err != nil:
		return Execution{}, fmt.Errorf("start execution %s: %w", name, err)
	}
	arn := s.executionPrefix + name
	if out != nil && out.ExecutionArn != nil {
		arn = *out.ExecutionArn
	}
	return Execution{ARN: arn}, nil
}

// forbidden are the printable characters Step Functions refuses in names.
const forbidden = `<>{}[]?*"#%\^|~` + "`" + `$&,;:/`

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLength {
		return fmt.Errorf("execution name %q: %d characters, want 1 to %d: %w", name, len(name), MaxNameLength, ErrInvalid)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar || r == 0xFFFE || r == 0xFFFF || strings.ContainsRune(forbidden, r) {
			return fmt.Errorf("execution name %q: character %q is not allowed: %w", name, r, ErrInvalid)
		}
	}
	return nil
}

// DescribeAPI is the Step Functions call Status makes:
// states:DescribeExecution. *sfn.Client satisfies it.
type DescribeAPI interface {
	DescribeExecution(context.Context, *sfn.DescribeExecutionInput, ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
}

var _ DescribeAPI = (*sfn.Client)(nil)

// Status is what DescribeExecution says of one execution.
type Status string

// Statuses.
const (
	// StatusRunning: RUNNING, or PENDING_REDRIVE (a redrive is about to
	// run it again).
	StatusRunning Status = "Running"
	// StatusEnded: SUCCEEDED, FAILED, TIMED_OUT or ABORTED.
	StatusEnded Status = "Ended"
	// StatusMissing: ExecutionDoesNotExist (never started, or its history
	// expired 90 days after it closed).
	StatusMissing Status = "Missing"
)

// Status returns the status of the execution called name of this
// Starter's state machine (DescribeExecution on its derived ARN). It
// returns an error wrapping ErrInvalid, without calling Step Functions,
// when name would be refused; other errors are the API's, wrapped.
func (s *Starter) Status(ctx context.Context, api DescribeAPI, name string) (Status, error) {
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("describe execution: %w", err)
	}
	arn := s.executionPrefix + name
	out, err := api.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: &arn})
	var missing *types.ExecutionDoesNotExist
	switch {
	case errors.As(err, &missing):
		return StatusMissing, nil
	case err != nil:
		return "", fmt.Errorf("describe execution %s: %w", name, err)
	}
	switch out.Status {
	case types.ExecutionStatusRunning, types.ExecutionStatusPendingRedrive:
		return StatusRunning, nil
	}
	return StatusEnded, nil
}
