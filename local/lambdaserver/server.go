// Package lambdaserver serves the AWS Lambda Invoke API
// (POST /2015-03-31/functions/{name}/invocations) over handlers registered
// in the same process, so that unmodified Lambda clients (the AWS SDKs, and
// aws-local-stepfunctions through AWS_ENDPOINT_URL_LAMBDA) run the real
// nodewright handlers on one machine. Each invocation goes through
// aws-lambda-go's lambda.NewHandler(h).Invoke, the same JSON decoding and
// encoding a deployed function performs.
//
// Answers follow the Lambda API: a handler's result is the 200 response
// body; a handler's error is also a 200 response, with the header
// X-Amz-Function-Error: Unhandled and the body {"errorType","errorMessage"},
// where errorType is what the Go runtime reports (the Type of a
// messages.InvokeResponse_Error, otherwise the error's Go type name). A
// panicking handler is reported the same way, with errorType
// "Runtime.Panic" (the process survives). An unknown function is a 404
// ResourceNotFoundException, a request over 6 MB a 413
// RequestTooLargeException. InvocationType Event runs the handler in
// the background and answers 202; DryRun answers 204. Kill injects a
// Lambda killed mid-call.
package lambdaserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Limits of the Invoke API (Lambda quotas).
const (
	// MaxPayloadBytes bounds a synchronous request and response payload
	// (6 MB).
	MaxPayloadBytes = 6 * 1024 * 1024
	// DefaultTimeout is a function's timeout unless WithTimeout says
	// otherwise (Lambda's default, 3 s, is too short for the local stack).
	DefaultTimeout = time.Minute
	// DefaultRegion and DefaultAccount make up the ARNs handlers see in
	// their lambdacontext.
	DefaultRegion  = "us-east-1"
	DefaultAccount = "000000000000"
)

// ErrorTypePanic is the errorType of an invocation whose handler panicked.
const ErrorTypePanic = "Runtime.Panic"

// Server runs registered handlers behind the Invoke API. It is an
// http.Handler (serve it with httptest.NewServer or an http.Server) and is
// safe for concurrent use: one function may run several invocations at
// once, as Lambda does.
type Server struct {
	mu          sync.Mutex
	fns         map[string]*function
	invocations []Invocation
	seq         int
	background  sync.WaitGroup
	kills       map[string][]time.Duration // function -> queued kills (after how long)
}

// ErrorTypeKilled is the errorType of an invocation Kill ended, Lambda's
// for a runtime that exited mid-invocation.
const ErrorTypeKilled = "Runtime.ExitError"

// Kill makes the next n invocations of function name die after running
// for after: the handler's context is cancelled then (what it did before
// stays done, a call in flight is cut off), and the invocation fails with
// ErrorTypeKilled whatever the handler returns, as a Lambda whose process
// was killed mid-call (out of memory, sandbox recycled) does. Kills queue
// up in order.
func (s *Server) Kill(name string, after time.Duration, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kills == nil {
		s.kills = map[string][]time.Duration{}
	}
	for range n {
		s.kills[name] = append(s.kills[name], after)
	}
}

// takeKill pops the next kill of function name, if any.
func (s *Server) takeKill(name string) (time.Duration, bool) {
	q := s.kills[name]
	if len(q) == 0 {
		return 0, false
	}
	s.kills[name] = q[1:]
	return q[0], true
}

type function struct {
	name    string
	handler lambda.Handler
	timeout time.Duration
}

// Option configures a registered function.
type Option func(*function)

// WithTimeout sets the function's timeout: the handler's context deadline.
func WithTimeout(d time.Duration) Option {
	return func(f *function) { f.timeout = d }
}

// Invocation is one invocation, as recorded for tests and timelines.
type Invocation struct {
	// Function is the function's name.
	Function string
	// RequestID is the AwsRequestID the handler saw.
	RequestID string
	// Payload is the request body.
	Payload json.RawMessage
	// Response is the handler's result; nil after an error.
	Response json.RawMessage
	// ErrorType and ErrorMessage describe the error, if any.
	ErrorType    string
	ErrorMessage string
	// Start is when the handler was called; Duration how long it ran.
	Start    time.Time
	Duration time.Duration
}

// New returns a server with no functions.
func New() *Server {
	return &Server{fns: map[string]*function{}}
}

// Register serves handler under name, replacing any function of that name.
// handler is anything lambda.NewHandler accepts (a function such as
// func(context.Context, In) (Out, error), or a lambda.Handler). It returns
// an error for an empty name or one containing '/' or ':'.
func (s *Server) Register(name string, handler any, opts ...Option) error {
	if name == "" || strings.ContainsAny(name, "/:") {
		return fmt.Errorf("register function %q: a name is non-empty and has no '/' or ':'", name)
	}
	f := &function{name: name, timeout: DefaultTimeout}
	if h, ok := handler.(lambda.Handler); ok {
		f.handler = h
	} else {
		f.handler = lambda.NewHandler(handler)
	}
	for _, o := range opts {
		o(f)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fns[name] = f
	return nil
}

// Invocations returns the invocations finished so far, in the order they
// finished.
func (s *Server) Invocations() []Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Invocation(nil), s.invocations...)
}

// Wait blocks until every background (InvocationType Event) invocation has
// finished.
func (s *Server) Wait() { s.background.Wait() }

const invokePrefix = "/2015-03-31/functions/"

// ServeHTTP answers POST /2015-03-31/functions/{name}/invocations.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), invokePrefix)
	if !ok || !strings.HasSuffix(rest, "/invocations") {
		writeAPIError(w, http.StatusNotFound, "UnknownOperationException", "unknown operation "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		writeAPIError(w, http.StatusMethodNotAllowed, "UnknownOperationException", "the Invoke API takes POST")
		return
	}
	raw, err := url.PathUnescape(strings.TrimSuffix(rest, "/invocations"))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "InvalidParameterValueException", "function name: "+err.Error())
		return
	}
	name := FunctionName(raw)
	s.mu.Lock()
	f := s.fns[name]
	s.mu.Unlock()
	if f == nil {
		writeAPIError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+s.arn(name))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayloadBytes+1))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequestContentException", "read request: "+err.Error())
		return
	}
	if len(body) > MaxPayloadBytes {
		writeAPIError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException",
			fmt.Sprintf("request payload exceeds %d bytes", MaxPayloadBytes))
		return
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	switch r.Header.Get("X-Amz-Invocation-Type") {
	case "", "RequestResponse":
	case "DryRun":
		w.WriteHeader(http.StatusNoContent)
		return
	case "Event":
		s.background.Add(1)
		go func() {
			defer s.background.Done()
			s.invoke(context.WithoutCancel(r.Context()), f, body)
		}()
		w.WriteHeader(http.StatusAccepted)
		return
	default:
		writeAPIError(w, http.StatusBadRequest, "InvalidParameterValueException", "unknown invocation type "+r.Header.Get("X-Amz-Invocation-Type"))
		return
	}
	inv := s.invoke(r.Context(), f, body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	if inv.ErrorType != "" {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		payload, _ := json.Marshal(map[string]string{"errorType": inv.ErrorType, "errorMessage": inv.ErrorMessage})
		_, _ = w.Write(payload)
		return
	}
	_, _ = w.Write(inv.Response)
}

// invoke runs one invocation and records it.
func (s *Server) invoke(ctx context.Context, f *function, payload []byte) Invocation {
	s.mu.Lock()
	s.seq++
	reqID := fmt.Sprintf("%08d-0000-4000-8000-%012d", s.seq, s.seq)
	killAfter, killed := s.takeKill(f.name)
	s.mu.Unlock()
	timeout := f.timeout
	if killed {
		timeout = min(timeout, killAfter)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: reqID, InvokedFunctionArn: s.arn(f.name)})
	inv := Invocation{Function: f.name, RequestID: reqID, Payload: bytes.Clone(payload), Start: time.Now()}
	out, err := callHandler(ctx, f.handler, payload)
	inv.Duration = time.Since(inv.Start)
	switch {
	case killed:
		inv.ErrorType = ErrorTypeKilled
		inv.ErrorMessage = fmt.Sprintf("RequestId: %s Error: Runtime exited without providing a reason (killed after %v)", reqID, killAfter)
	case err != nil:
		inv.ErrorType, inv.ErrorMessage = errorType(err), errorMessage(err)
	case len(out) > MaxPayloadBytes:
		inv.ErrorType = "Function.ResponseSizeTooLarge"
		inv.ErrorMessage = fmt.Sprintf("response payload is %d bytes, at most %d", len(out), MaxPayloadBytes)
	default:
		inv.Response = out
	}
	s.mu.Lock()
	s.invocations = append(s.invocations, inv)
	s.mu.Unlock()
	return inv
}

// panicError is a recovered panic.
type panicError struct{ value any }

func (p panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.value) }

func callHandler(ctx context.Context, h lambda.Handler, payload []byte) (out []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, panicError{value: v}
		}
	}()
	return h.Invoke(ctx, payload)
}

// errorType is the errorType the Go runtime reports for err: the Type of a
// messages.InvokeResponse_Error, otherwise the name of err's Go type
// (without the pointer), as aws-lambda-go's runtime loop computes it.
func errorType(err error) string {
	var ire messages.InvokeResponse_Error
	if errors.As(err, &ire) {
		return ire.Type
	}
	var pire *messages.InvokeResponse_Error
	if errors.As(err, &pire) && pire != nil {
		return pire.Type
	}
	var pe panicError
	if errors.As(err, &pe) {
		return ErrorTypePanic
	}
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		return t.Elem().Name()
	}
	return t.Name()
}

func errorMessage(err error) string {
	var ire messages.InvokeResponse_Error
	if errors.As(err, &ire) {
		return ire.Message
	}
	var pire *messages.InvokeResponse_Error
	if errors.As(err, &pire) && pire != nil {
		return pire.Message
	}
	return err.Error()
}

// FunctionName returns the function name in any form the Invoke API
// accepts: a name ("my-fn"), a name with a qualifier ("my-fn:live"), a
// partial ARN ("123456789012:function:my-fn") or a full ARN
// ("arn:aws:lambda:us-east-1:123456789012:function:my-fn:3").
func FunctionName(s string) string {
	if _, after, ok := strings.Cut(s, "function:"); ok {
		s = after
	}
	name, _, _ := strings.Cut(s, ":")
	return name
}

func (s *Server) arn(name string) string {
	return "arn:aws:lambda:" + DefaultRegion + ":" + DefaultAccount + ":function:" + name
}

// writeAPIError writes a Lambda service error as the REST JSON protocol
// carries it (the SDKs read the x-amzn-ErrorType header).
func writeAPIError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	payload, _ := json.Marshal(map[string]string{"Type": "User", "message": message})
	_, _ = w.Write(payload)
}
