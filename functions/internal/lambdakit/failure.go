package lambdakit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambda/messages"

	"github.com/nodewright/nodewright/internal/logfield"
)

// InvocationFailed is the message of the one ERROR line a nodewright Lambda
// writes when an invocation fails in its handler: the handler returned an
// error, or panicked. The deployment's function-error alarm counts these
// lines with a log metric filter on this message (infra/nodewright
// monitoring.go; testdata/invocation-failed.json is the line, which the
// infra test holds its filter to); failures outside the handler (a
// timeout, a crash of the process) are the Lambda platform's own lines in
// the same log group.
const InvocationFailed = "invocation failed"

// ErrorTypeKey is the key of the failure line's error name: the Type the
// Lambda runtime reports (a workflow error name, AsWorkflowError), or
// "panic".
const ErrorTypeKey = "error-type"

// WithFailureLine returns handler (any shape lambda.Start accepts) as a
// lambda.Handler that writes the InvocationFailed line to log for every
// invocation that returns an error or panics, then returns the same error
// or re-panics with the same value, so that the runtime reports exactly
// what it would have (the error's Type is what Step Functions matches).
func WithFailureLine(handler any, log *slog.Logger) lambda.Handler {
	return failureLine{next: lambda.NewHandler(handler), log: log}
}

type failureLine struct {
	next lambda.Handler
	log  *slog.Logger
}

func (f failureLine) Invoke(ctx context.Context, payload []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			f.log.ErrorContext(ctx, InvocationFailed, ErrorTypeKey, "panic", logfield.Error, fmt.Sprint(r))
			panic(r)
		}
	}()
	out, err = f.next.Invoke(ctx, payload)
	if err != nil {
		name, msg := reported(err)
		f.log.ErrorContext(ctx, InvocationFailed, ErrorTypeKey, name, logfield.Error, msg)
	}
	return out, err
}

// reported is the Type and message the Lambda runtime reports for err: an
// InvokeResponse_Error's own, else the error's Go type name (as
// aws-lambda-go names it) and its Error().
func reported(err error) (name, message string) {
	var ire messages.InvokeResponse_Error
	if errors.As(err, &ire) {
		return ire.Type, ire.Message
	}
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name(), err.Error()
}
