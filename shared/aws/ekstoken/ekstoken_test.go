package ekstoken_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ekstoken"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// fakePresigner returns scripted presigned requests and counts its calls.
type fakePresigner struct {
	mu    sync.Mutex
	calls int
	// out builds the answer of call n (from 1); nil answers a request
	// that signs x-k8s-aws-id with cluster "prod".
	out func(n int) (*v4.PresignedHTTPRequest, error)
}

func (f *fakePresigner) PresignGetCallerIdentity(_ context.Context, _ *sts.GetCallerIdentityInput, optFns ...func(*sts.PresignOptions)) (*v4.PresignedHTTPRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(optFns) == 0 {
		return nil, errors.New("fake presigner: no options, so no x-k8s-aws-id header")
	}
	if f.out != nil {
		return f.out(f.calls)
	}
	return signedFor("prod", "https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&call="+strings.Repeat("x", f.calls)), nil
}

func (f *fakePresigner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func signedFor(cluster, url string) *v4.PresignedHTTPRequest {
	return &v4.PresignedHTTPRequest{
		URL:          url,
		Method:       http.MethodGet,
		SignedHeader: http.Header{"Host": {"sts.eu-west-1.amazonaws.com"}, "X-K8s-Aws-Id": {cluster}},
	}
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func TestTokenEncoding(t *testing.T) {
	tests := []struct {
		name string
		url  string
	}{
		// Lengths 1 and 2 modulo 3 would need '=' padding in standard
		// base64; bytes 0xfb/0xff would give '+' and '/'.
		{name: "URL whose length needs no padding", url: "https://sts.amazonaws.com/?a=1"},
		{name: "URL needing padding", url: "https://sts.amazonaws.com/?ab=1"},
		{name: "URL whose standard base64 has + and /", url: "https://sts.amazonaws.com/?x=~~~>>>???"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakePresigner{out: func(int) (*v4.PresignedHTTPRequest, error) { return signedFor("prod", tt.url), nil }}
			tok, _, err := ekstoken.New(p, "prod", ekstoken.WithClock(func() time.Time { return t0 })).Token(t.Context())
			if err != nil {
				t.Fatalf("Token() error = %v", err)
			}
			body, ok := strings.CutPrefix(tok, "k8s-aws-v1.")
			if !ok {
				t.Fatalf("Token() = %q, want prefix k8s-aws-v1.", tok)
			}
			if strings.ContainsAny(body, "=+/") {
				t.Errorf("token body %q has padding or non-URL-safe characters", body)
			}
			decoded, err := base64.RawURLEncoding.DecodeString(body)
			if err != nil {
				t.Fatalf("token body is not unpadded URL-safe base64: %v", err)
			}
			if diff := cmp.Diff(tt.url, string(decoded)); diff != "" {
				t.Errorf("decoded token mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTokenReuse(t *testing.T) {
	tests := []struct {
		name string
		// second is when the second call happens, after a first at t0.
		second     time.Duration
		wantSigns  int
		wantExpiry time.Time
	}{
		{name: "reused a second later", second: time.Second, wantSigns: 1, wantExpiry: t0.Add(14 * time.Minute)},
		{name: "reused until a minute before expiry", second: 13*time.Minute - time.Nanosecond, wantSigns: 1, wantExpiry: t0.Add(14 * time.Minute)},
		{name: "signed anew a minute before expiry", second: 13 * time.Minute, wantSigns: 2, wantExpiry: t0.Add(27 * time.Minute)},
		{name: "signed anew after expiry", second: time.Hour, wantSigns: 2, wantExpiry: t0.Add(time.Hour + 14*time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakePresigner{}
			clk := &clock{now: t0}
			src := ekstoken.New(p, "prod", ekstoken.WithClock(clk.Now))
			first, exp1, err := src.Token(t.Context())
			if err != nil {
				t.Fatalf("first Token() error = %v", err)
			}
			if want := t0.Add(ekstoken.Lifetime); !exp1.Equal(want) {
				t.Errorf("first Token() expiry = %v, want %v (14 minutes after signing)", exp1, want)
			}
			clk.set(t0.Add(tt.second))
			second, exp2, err := src.Token(t.Context())
			if err != nil {
				t.Fatalf("second Token() error = %v", err)
			}
			if got := p.count(); got != tt.wantSigns {
				t.Errorf("presigned %d times, want %d", got, tt.wantSigns)
			}
			if (first == second) != (tt.wantSigns == 1) {
				t.Errorf("second token equal to first = %t, want %t", first == second, tt.wantSigns == 1)
			}
			if !exp2.Equal(tt.wantExpiry) {
				t.Errorf("second Token() expiry = %v, want %v", exp2, tt.wantExpiry)
			}
		})
	}
}

func TestTokenConcurrentCallersShareOneSignature(t *testing.T) {
	p := &fakePresigner{}
	src := ekstoken.New(p, "prod", ekstoken.WithClock(func() time.Time { return t0 }))
	var wg sync.WaitGroup
	toks := make([]string, 16)
	for i := range toks {
		wg.Go(func() {
			tok, _, err := src.Token(t.Context())
			if err != nil {
				t.Errorf("Token() error = %v", err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	if got := p.count(); got != 1 {
		t.Errorf("presigned %d times for 16 concurrent callers, want 1", got)
	}
	for _, tok := range toks[1:] {
		if tok != toks[0] {
			t.Fatalf("concurrent callers got different tokens")
		}
	}
}

func TestBearerTokenIsTokenWithoutExpiry(t *testing.T) {
	src := ekstoken.New(&fakePresigner{}, "prod", ekstoken.WithClock(func() time.Time { return t0 }))
	want, _, err := src.Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.BearerToken(t.Context())
	if err != nil || got != want {
		t.Errorf("BearerToken() = %q, %v; want %q, nil", got, err, want)
	}
}

func TestTokenErrors(t *testing.T) {
	errNoCreds := errors.New("no EC2 IMDS role found")
	tests := []struct {
		name      string
		presigner ekstoken.Presigner
		cluster   string
		wantIs    error
	}{
		{name: "empty cluster name", presigner: &fakePresigner{}},
		{name: "nil presigner", cluster: "prod"},
		{
			name:      "presigner error is wrapped",
			presigner: &fakePresigner{out: func(int) (*v4.PresignedHTTPRequest, error) { return nil, errNoCreds }},
			cluster:   "prod", wantIs: errNoCreds,
		},
		{
			name:      "presigner returning nothing",
			presigner: &fakePresigner{out: func(int) (*v4.PresignedHTTPRequest, error) { return nil, nil }},
			cluster:   "prod",
		},
		{
			name: "request that does not sign x-k8s-aws-id",
			presigner: &fakePresigner{out: func(int) (*v4.PresignedHTTPRequest, error) {
				return &v4.PresignedHTTPRequest{URL: "https://sts.amazonaws.com/", SignedHeader: http.Header{"Host": {"sts.amazonaws.com"}}}, nil
			}},
			cluster: "prod",
		},
		{
			name: "request signed for another cluster",
			presigner: &fakePresigner{out: func(int) (*v4.PresignedHTTPRequest, error) {
				return signedFor("staging", "https://sts.amazonaws.com/"), nil
			}},
			cluster: "prod",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := ekstoken.New(tt.presigner, tt.cluster, ekstoken.WithClock(func() time.Time { return t0 }))
			tok, exp, err := src.Token(t.Context())
			if err == nil {
				t.Fatalf("Token() = %q, want an error", tok)
			}
			if tok != "" || !exp.IsZero() {
				t.Errorf("Token() returned %q, %v with its error, want zero values", tok, exp)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Token() error = %v, want it to wrap %v", err, tt.wantIs)
			}
		})
	}
}

func TestTokenErrorIsNotCached(t *testing.T) {
	p := &fakePresigner{out: func(n int) (*v4.PresignedHTTPRequest, error) {
		if n == 1 {
			return nil, errors.New("throttled")
		}
		return signedFor("prod", "https://sts.amazonaws.com/?ok"), nil
	}}
	src := ekstoken.New(p, "prod", ekstoken.WithClock(func() time.Time { return t0 }))
	if _, _, err := src.Token(t.Context()); err == nil {
		t.Fatal("first Token() error = nil, want the presigner's error")
	}
	if _, _, err := src.Token(t.Context()); err != nil {
		t.Errorf("second Token() error = %v, want a fresh signature", err)
	}
}
