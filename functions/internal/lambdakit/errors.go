package lambdakit

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/lambda/messages"

	"github.com/nodewright/nodewright/shared/workflow"
)

// Rule names the workflow error for one kind of domain error. Handlers pass
// the rules of the use cases they call to AsWorkflowError, since lambdakit
// imports no use-case package.
type Rule func(err error) (name string, ok bool)

// Is is the Rule "errors.Is(err, target) => name".
func Is(target error, name string) Rule {
	return func(err error) (string, bool) { return name, errors.Is(err, target) }
}

// As is the Rule "errors.As(err, *T) => name", for error types such as
// *launch.InsufficientCapacityError.
func As[T error](name string) Rule {
	return func(err error) (string, bool) {
		var target T
		return name, errors.As(err, &target)
	}
}

// AsWorkflowError returns err as a messages.InvokeResponse_Error whose Type
// is a workflow error name and whose Message is err's message, so the
// caller (Step Functions, a Lambda destination, the logs) sees a name from
// the closed set rather than a Go type such as "*fmt.wrapError". The name
// is the first of: a *workflow.Error in err's chain; the first matching
// rule; workflow.ErrTimeout for context.DeadlineExceeded and
// context.Canceled; workflow.ErrInternal. It returns nil for nil.
func AsWorkflowError(err error, rules ...Rule) error {
	if err == nil {
		return nil
	}
	return messages.InvokeResponse_Error{Type: WorkflowName(err, rules...), Message: err.Error()}
}

// WorkflowName is the name AsWorkflowError reports for err.
func WorkflowName(err error, rules ...Rule) string {
	if name, ok := workflow.NameOf(err); ok {
		return name
	}
	for _, r := range rules {
		if name, ok := r(err); ok {
			return name
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return workflow.ErrTimeout
	}
	return workflow.ErrInternal
}
