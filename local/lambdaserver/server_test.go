package lambdaserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/lambdaserver"
)

type greeting struct {
	Name string `json:"name"`
}

type answer struct {
	Message   string `json:"message"`
	RequestID string `json:"requestID"`
	Deadline  bool   `json:"deadline"`
}

// notReadyError is a custom error type: its Go type name is what the
// runtime reports.
type notReadyError struct{}

func (notReadyError) Error() string { return "replacement is not initialized" }

func greet(ctx context.Context, in greeting) (answer, error) {
	lc, _ := lambdacontext.FromContext(ctx)
	_, hasDeadline := ctx.Deadline()
	switch in.Name {
	case "typed":
		return answer{}, messages.InvokeResponse_Error{Type: "BudgetExhausted", Message: "no room in nodepool general"}
	case "custom":
		return answer{}, &notReadyError{}
	case "wrapped":
		return answer{}, errors.New("boom")
	case "panic":
		panic("handler bug")
	}
	return answer{Message: "hello " + in.Name, RequestID: lc.AwsRequestID, Deadline: hasDeadline}, nil
}

// newClient returns the real Lambda client pointed at a server running
// greet as "greeter".
func newClient(t *testing.T) (*awslambda.Client, *lambdaserver.Server) {
	t.Helper()
	srv := lambdaserver.New()
	if err := srv.Register("greeter", greet, lambdaserver.WithTimeout(5*time.Second)); err != nil {
		t.Fatalf("Register() error = %v", err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	client := awslambda.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, func(o *awslambda.Options) { o.BaseEndpoint = aws.String(hs.URL) })
	return client, srv
}

func TestInvokeSucceeds(t *testing.T) {
	tests := []struct {
		name     string
		function string
		payload  string
		want     string
	}{
		{name: "should run the handler named by its function name", function: "greeter", payload: `{"name":"node-3"}`,
			want: `{"message":"hello node-3","requestID":"00000001-0000-4000-8000-000000000001","deadline":true}`},
		{name: "should accept a full ARN with a qualifier", function: "arn:aws:lambda:us-east-1:123456789012:function:greeter:live", payload: `{"name":"a"}`,
			want: `{"message":"hello a","requestID":"00000001-0000-4000-8000-000000000001","deadline":true}`},
		{name: "should accept a partial ARN", function: "123456789012:function:greeter", payload: `{"name":"b"}`,
			want: `{"message":"hello b","requestID":"00000001-0000-4000-8000-000000000001","deadline":true}`},
		{name: "should treat an empty payload as an empty object", function: "greeter", payload: ``,
			want: `{"message":"hello ","requestID":"00000001-0000-4000-8000-000000000001","deadline":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, srv := newClient(t)
			out, err := client.Invoke(t.Context(), &awslambda.InvokeInput{FunctionName: aws.String(tt.function), Payload: []byte(tt.payload)})
			if err != nil {
				t.Fatalf("Invoke() error = %v", err)
			}
			if out.FunctionError != nil {
				t.Fatalf("Invoke() FunctionError = %q, payload %s", *out.FunctionError, out.Payload)
			}
			if diff := cmp.Diff(tt.want, string(out.Payload)); diff != "" {
				t.Errorf("payload mismatch (-want +got):\n%s", diff)
			}
			if got := len(srv.Invocations()); got != 1 {
				t.Errorf("Invocations() has %d entries, want 1", got)
			}
		})
	}
}

func TestInvokeReportsFunctionErrors(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{name: "should report the type of a messages.InvokeResponse_Error", payload: `{"name":"typed"}`,
			want: `{"errorMessage":"no room in nodepool general","errorType":"BudgetExhausted"}`},
		{name: "should report a custom error by its Go type name", payload: `{"name":"custom"}`,
			want: `{"errorMessage":"replacement is not initialized","errorType":"notReadyError"}`},
		{name: "should report a plain error by its Go type name", payload: `{"name":"wrapped"}`,
			want: `{"errorMessage":"boom","errorType":"errorString"}`},
		{name: "should report a panic without stopping the server", payload: `{"name":"panic"}`,
			want: `{"errorMessage":"handler panicked: handler bug","errorType":"Runtime.Panic"}`},
		{name: "should report a payload that does not decode", payload: `{"name":3}`,
			want: `{"errorMessage":"json: cannot unmarshal number into Go struct field greeting.name of type string","errorType":"UnmarshalTypeError"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, srv := newClient(t)
			out, err := client.Invoke(t.Context(), &awslambda.InvokeInput{FunctionName: aws.String("greeter"), Payload: []byte(tt.payload)})
			if err != nil {
				t.Fatalf("Invoke() error = %v", err)
			}
			if got := aws.ToString(out.FunctionError); got != "Unhandled" {
				t.Errorf("FunctionError = %q, want Unhandled", got)
			}
			if diff := cmp.Diff(tt.want, string(out.Payload)); diff != "" {
				t.Errorf("payload mismatch (-want +got):\n%s", diff)
			}
			inv := srv.Invocations()
			if len(inv) != 1 || inv[0].ErrorType == "" || inv[0].Response != nil {
				t.Errorf("Invocations() = %+v, want one failed invocation", inv)
			}
		})
	}
}

func TestInvokeRejectsRequests(t *testing.T) {
	tests := []struct {
		name     string
		function string
		payload  []byte
		check    func(error) bool
	}{
		{name: "should answer ResourceNotFoundException for an unknown function", function: "missing", payload: []byte(`{}`),
			check: func(err error) bool { var nf *types.ResourceNotFoundException; return errors.As(err, &nf) }},
		{name: "should answer RequestTooLargeException past 6 MB", function: "greeter",
			payload: []byte(`{"name":"` + strings.Repeat("x", lambdaserver.MaxPayloadBytes) + `"}`),
			check:   func(err error) bool { var tl *types.RequestTooLargeException; return errors.As(err, &tl) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, _ := newClient(t)
			_, err := client.Invoke(t.Context(), &awslambda.InvokeInput{FunctionName: aws.String(tt.function), Payload: tt.payload},
				func(o *awslambda.Options) { o.RetryMaxAttempts = 1 })
			if err == nil || !tt.check(err) {
				t.Errorf("Invoke() error = %v, want the API's refusal", err)
			}
		})
	}
}

func TestInvocationTypes(t *testing.T) {
	tests := []struct {
		name       string
		kind       types.InvocationType
		wantStatus int32
	}{
		{name: "should answer 204 to a dry run without invoking", kind: types.InvocationTypeDryRun, wantStatus: http.StatusNoContent},
		{name: "should answer 202 to an event and invoke in the background", kind: types.InvocationTypeEvent, wantStatus: http.StatusAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, srv := newClient(t)
			out, err := client.Invoke(t.Context(), &awslambda.InvokeInput{FunctionName: aws.String("greeter"), InvocationType: tt.kind, Payload: []byte(`{"name":"x"}`)})
			if err != nil {
				t.Fatalf("Invoke() error = %v", err)
			}
			if out.StatusCode != tt.wantStatus {
				t.Errorf("StatusCode = %d, want %d", out.StatusCode, tt.wantStatus)
			}
			srv.Wait()
			wantInvocations := 0
			if tt.kind == types.InvocationTypeEvent {
				wantInvocations = 1
			}
			if got := len(srv.Invocations()); got != wantInvocations {
				t.Errorf("Invocations() has %d entries, want %d", got, wantInvocations)
			}
		})
	}
}

func TestRegisterRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "a/b", "fn:alias"} {
		if err := lambdaserver.New().Register(name, greet); err == nil {
			t.Errorf("Register(%q) error = nil, want an error", name)
		}
	}
}

func TestFunctionName(t *testing.T) {
	tests := []struct{ give, want string }{
		{give: "my-fn", want: "my-fn"},
		{give: "my-fn:live", want: "my-fn"},
		{give: "123456789012:function:my-fn", want: "my-fn"},
		{give: "arn:aws:lambda:us-east-1:123456789012:function:my-fn:3", want: "my-fn"},
	}
	for _, tt := range tests {
		if got := lambdaserver.FunctionName(tt.give); got != tt.want {
			t.Errorf("FunctionName(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestKilledInvocationFailsWithExitErrorAfterWhatItDid(t *testing.T) {
	srv := lambdaserver.New()
	var did, cutOff bool
	slow := func(ctx context.Context, _ greeting) (answer, error) {
		did = true // the part before the kill takes effect
		select {
		case <-ctx.Done():
			cutOff = true
			return answer{}, ctx.Err()
		case <-time.After(5 * time.Second):
			return answer{Message: "finished"}, nil
		}
	}
	if err := srv.Register("slow", slow); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	client := awslambda.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")},
		func(o *awslambda.Options) { o.BaseEndpoint = aws.String(hs.URL) })
	srv.Kill("slow", 50*time.Millisecond, 1)

	out, err := client.Invoke(t.Context(), &awslambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{}`)})
	if err != nil {
		t.Fatalf("Invoke() error = %v", err)
	}
	if aws.ToString(out.FunctionError) != "Unhandled" || !strings.Contains(string(out.Payload), lambdaserver.ErrorTypeKilled) {
		t.Errorf("killed Invoke() = %q %s, want an Unhandled %s", aws.ToString(out.FunctionError), out.Payload, lambdaserver.ErrorTypeKilled)
	}
	if !did || !cutOff {
		t.Errorf("handler ran = %v, cut off = %v; want both", did, cutOff)
	}
	srv.Kill("slow", time.Hour, 0)
	if got := srv.Invocations(); len(got) != 1 || got[0].ErrorType != lambdaserver.ErrorTypeKilled {
		t.Errorf("Invocations() = %+v, want one killed invocation", got)
	}
}
