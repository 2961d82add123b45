package kube

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/client-go/rest"
)

// Client-side limits RESTConfig sets, sized for a Lambda that evicts or
// relabels up to a few hundred objects per invocation and must not hang on
// one request until its own timeout.
const (
	// DefaultQPS and DefaultBurst bound the request rate (client-go's token
	// bucket); client-go's own defaults are 5 and 10.
	DefaultQPS   = 50
	DefaultBurst = 100
	// DefaultRequestTimeout bounds one HTTP request, retries excluded.
	DefaultRequestTimeout = 15 * time.Second
	// UserAgent identifies nodewright in the API server's audit log.
	UserAgent = "nodewright"
)

// RESTConfig returns a client configuration for the API server at endpoint
// (an https URL, as EKS DescribeCluster reports it) whose serving
// certificate chains to caPEM (PEM, the cluster's certificate authority
// data once base64-decoded). Every request carries "Authorization: Bearer
// <token>", with token called for that request; a request fails without
// being sent when token fails. token is responsible for caching its value
// until near its expiry: ekstoken.Source does, reusing an EKS IAM token
// until a minute before its 14-minute lifetime ends, so a request that is
// signed just before the cut-off still has a minute of validity.
//
// Limits are DefaultQPS, DefaultBurst and DefaultRequestTimeout; built-in
// types are exchanged as protobuf, falling back to JSON.
func RESTConfig(endpoint string, caPEM []byte, token func(ctx context.Context) (string, error)) *rest.Config {
	return &rest.Config{
		Host:            endpoint,
		TLSClientConfig: rest.TLSClientConfig{CAData: slices.Clone(caPEM)},
		QPS:             DefaultQPS,
		Burst:           DefaultBurst,
		Timeout:         DefaultRequestTimeout,
		UserAgent:       UserAgent,
		ContentConfig: rest.ContentConfig{
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
			ContentType:        "application/vnd.kubernetes.protobuf",
		},
		WrapTransport: func(next http.RoundTripper) http.RoundTripper {
			return &bearerTransport{next: next, token: token}
		},
	}
}

// bearerTransport sets the Authorization header from token on every
// request.
type bearerTransport struct {
	next  http.RoundTripper
	token func(ctx context.Context) (string, error)
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.token(req.Context())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("bearer token: %w", err)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.next.RoundTrip(r)
}

// WrappedRoundTripper returns the transport bearerTransport wraps, so that
// client-go can reach the TLS transport beneath it (for instance to close
// idle connections).
func (t *bearerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
