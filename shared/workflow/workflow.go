// Package workflow names the errors nodewright's Lambdas report, a closed
// set. aws-lambda-go reports a handler's error to its caller as the Go type
// name of the error unless the handler returns a
// messages.InvokeResponse_Error with a Type of its choosing; functions/
// internal/lambdakit turns domain errors into one of the names below. Step
// Functions Retry and Catch blocks (statemachines/*.asl.json) may match only
// these names or the States.* names, and a test here fails on any other.
//
// The package imports the standard library only.
package workflow

import (
	"errors"
	"slices"
	"strings"
)

// Error names. Each is the errorType a Lambda reports; the list is closed:
// add a name here before any caller may use it.
const (
	// ErrInsufficientCapacity: EC2 had no capacity for a launch; retrying
	// later, or on other offerings, may succeed.
	ErrInsufficientCapacity = "InsufficientCapacity"
	// ErrLaunchIncomplete: some launches of a batch failed for reasons
	// other than capacity; the same input should be retried.
	ErrLaunchIncomplete = "LaunchIncomplete"
	// ErrNodeClassNotReady: the EC2NodeClass is missing, invalid or does
	// not resolve (subnets, security groups, AMIs).
	ErrNodeClassNotReady = "NodeClassNotReady"
	// ErrInvalidInput: the input can never succeed; do not retry.
	ErrInvalidInput = "InvalidInput"
	// ErrConflict: a version-checked write lost a race; retry reads again.
	ErrConflict = "Conflict"
	// ErrThrottled: an AWS or Kubernetes API rate-limited the call; retry
	// with backoff.
	ErrThrottled = "Throttled"
	// ErrTimeout: the invocation ran out of time before finishing.
	ErrTimeout = "Timeout"
	// ErrInternal: anything else. Retrying may help.
	ErrInternal = "Internal"
)

// Names returns every error name, sorted: the names above and the
// disruption steps' (disruption.go).
func Names() []string {
	names := []string{
		ErrConflict, ErrInsufficientCapacity, ErrInternal, ErrInvalidInput,
		ErrLaunchIncomplete, ErrNodeClassNotReady, ErrThrottled, ErrTimeout,
	}
	names = append(names, disruptionNames...)
	slices.Sort(names)
	return names
}

// Known reports whether name may appear in an ASL ErrorEquals list: one of
// Names or a Step Functions name (States.ALL, States.Timeout, ...).
func Known(name string) bool {
	return slices.Contains(Names(), name) || strings.HasPrefix(name, "States.")
}

// Error is a failure carrying its workflow error name. Code that knows what
// an error means for the workflow wraps it in an *Error; lambdakit reports
// Name as the error type.
type Error struct {
	// Name is one of the names above.
	Name string
	// Err is the failure; its message is reported.
	Err error
}

// NewError returns an *Error named name wrapping err.
func NewError(name string, err error) *Error { return &Error{Name: name, Err: err} }

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Name
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped failure.
func (e *Error) Unwrap() error { return e.Err }

// NameOf returns the name of the first *Error in err's chain, if any.
func NameOf(err error) (string, bool) {
	var we *Error
	if errors.As(err, &we) {
		return we.Name, true
	}
	return "", false
}
