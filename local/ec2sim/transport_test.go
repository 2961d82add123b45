package ec2sim_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/nodewright/nodewright/local/ec2sim"
)

// captureTransport records the request it is given.
type captureTransport struct{ got *http.Request }

func (c *captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.got = r
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

// writerToBody is a request body with WriteTo, like the SDK's.
type writerToBody struct{ *bytes.Reader }

func (writerToBody) Close() error { return nil }

func TestLoopbackTransportHidesWriteTo(t *testing.T) {
	base := &captureTransport{}
	body := writerToBody{bytes.NewReader([]byte("Action=DescribeInstances"))}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/", body)
	if err != nil {
		t.Fatalf("NewRequest() error = %v", err)
	}
	if _, err := ec2sim.LoopbackTransport(base).RoundTrip(req); err != nil {
		t.Fatalf("RoundTrip() error = %v", err)
	}
	if _, ok := base.got.Body.(io.WriterTo); ok {
		t.Error("the wrapped transport saw a body with WriteTo")
	}
	if req.Body != io.ReadCloser(body) {
		t.Error("RoundTrip() replaced the caller's request body")
	}
	sent, _ := io.ReadAll(base.got.Body)
	if string(sent) != "Action=DescribeInstances" {
		t.Errorf("body sent = %q", sent)
	}
}

// TestLoopbackTransportKeepsLargeAnswersIntact repeats a ~120 kB answer;
// without LoopbackTransport about one in four fails with "use of closed
// network connection" on a 2-core machine.
func TestLoopbackTransportKeepsLargeAnswersIntact(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	for i := range 40 {
		out, err := e.ec2.DescribeInstanceTypeOfferings(t.Context(), &ec2.DescribeInstanceTypeOfferingsInput{})
		if err != nil {
			t.Fatalf("call %d: DescribeInstanceTypeOfferings() error = %v", i, err)
		}
		if len(out.InstanceTypeOfferings) != 1000 {
			t.Fatalf("call %d: %d offerings, want a full page of 1000", i, len(out.InstanceTypeOfferings))
		}
	}
}
