package intake_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/intake"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

const (
	accessKey = "AKIDEXAMPLE"
	secretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	token     = "session-token"
	region    = "eu-west-1"
)

var signingEpoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func credentials() aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey, SessionToken: token, Source: "test"}, nil
	})
}

func batch() *v1.PodBatch {
	return &v1.PodBatch{
		TypeMeta:  metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatch},
		ID:        "pb-1767268800000-0123456789abcdef",
		Cluster:   "prod",
		CreatedAt: metav1.NewTime(signingEpoch),
		Pods: []v1.PodSummary{{
			Name: "web-0", Namespace: "shop", UID: "uid-web-0", CreationTimestamp: metav1.NewTime(signingEpoch),
			Spec: v1.PodSpecSummary{Containers: []v1.ContainerSummary{{
				Name: "web", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}},
		}},
	}
}

// received is one request as the test server saw it, with the verdict of an
// independent SigV4 check.
type received struct {
	Method, Path, Query, IdempotencyKey string
	Body                                []byte
	SignedHeaders                       []string
	Scope                               string
	SignatureValid                      bool
	SignatureProblem                    string
}

// verifySigV4 recomputes the SigV4 signature of r from the secret key,
// following the published algorithm (canonical request, string to sign,
// derived key), without the SDK's signer.
func verifySigV4(r *http.Request, body []byte) received {
	got := received{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, IdempotencyKey: r.Header.Get(v1.HeaderIdempotencyKey), Body: body}
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		got.SignatureProblem = "no AWS4-HMAC-SHA256 Authorization header: " + auth
		return got
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(part, "=")
		fields[k] = v
	}
	cred := strings.SplitN(fields["Credential"], "/", 2)
	if len(cred) != 2 || cred[0] != accessKey {
		got.SignatureProblem = "bad credential " + fields["Credential"]
		return got
	}
	got.Scope = cred[1]
	got.SignedHeaders = strings.Split(fields["SignedHeaders"], ";")

	var canonicalHeaders strings.Builder
	for _, h := range got.SignedHeaders {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = strconv.FormatInt(r.ContentLength, 10)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		canonicalHeaders.WriteString(h + ":" + strings.TrimSpace(v) + "\n")
	}
	bodyHash := sha256.Sum256(body)
	canonicalRequest := strings.Join([]string{
		r.Method, r.URL.EscapedPath(), r.URL.RawQuery, canonicalHeaders.String(),
		fields["SignedHeaders"], hex.EncodeToString(bodyHash[:]),
	}, "\n")
	crHash := sha256.Sum256([]byte(canonicalRequest))
	stringToSign := strings.Join([]string{"AWS4-HMAC-SHA256", r.Header.Get("X-Amz-Date"), got.Scope, hex.EncodeToString(crHash[:])}, "\n")
	scope := strings.Split(got.Scope, "/") // date/region/service/aws4_request
	key := []byte("AWS4" + secretKey)
	for _, part := range scope {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, stringToSign))
	got.SignatureValid = hmac.Equal([]byte(want), []byte(fields["Signature"]))
	if !got.SignatureValid {
		got.SignatureProblem = "signature mismatch; canonical request:\n" + canonicalRequest
	}
	return got
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// server answers with the scripted responses in turn (the last one repeats)
// and records every request.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []received
}

// response is one scripted answer; drop closes the connection instead.
type response struct {
	status     int
	body       string
	retryAfter string
	drop       bool
}

func newServer(t *testing.T, script ...response) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, verifySigV4(r, body))
		n := len(s.requests)
		s.mu.Unlock()
		resp := script[min(n, len(script))-1]
		if resp.drop {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		if resp.retryAfter != "" {
			w.Header().Set("Retry-After", resp.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.status)
		io.WriteString(w, resp.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) seen() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// newClient returns a client whose sleeps are recorded instead of waited and
// whose jitter always picks the longest delay.
func newClient(t *testing.T, endpoint string, sleeps *[]time.Duration) *intake.Client {
	t.Helper()
	tick := signingEpoch
	c, err := intake.New(intake.Options{
		Endpoint:    endpoint + "/prod",
		Region:      region,
		Credentials: credentials(),
		Now:         func() time.Time { tick = tick.Add(time.Second); return tick },
		Sleep: func(ctx context.Context, d time.Duration) error {
			*sleeps = append(*sleeps, d)
			return ctx.Err()
		},
		Jitter: func(max time.Duration) time.Duration { return max },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const queued = `{"apiVersion":"nodewright.dev/v1","kind":"PodBatchResult","batchID":"pb-1767268800000-0123456789abcdef","state":"Queued"}`

func TestPostPodBatchSignsWithSigV4(t *testing.T) {
	srv := newServer(t, response{status: http.StatusAccepted, body: queued})
	var sleeps []time.Duration
	got, err := newClient(t, srv.URL, &sleeps).PostPodBatch(t.Context(), batch())
	if err != nil {
		t.Fatalf("PostPodBatch() error = %v", err)
	}
	if got.State != v1.BatchQueued || got.BatchID != batch().ID {
		t.Errorf("PostPodBatch() = %+v", got)
	}
	reqs := srv.seen()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(reqs))
	}
	r := reqs[0]
	if !r.SignatureValid {
		t.Errorf("signature invalid: %s", r.SignatureProblem)
	}
	wantScope := "20260101/" + region + "/execute-api/aws4_request"
	if r.Scope != wantScope {
		t.Errorf("credential scope = %q, want %q", r.Scope, wantScope)
	}
	for _, h := range []string{"content-length", "content-type", "host", "idempotency-key", "x-amz-date", "x-amz-security-token"} {
		if !slices.Contains(r.SignedHeaders, h) {
			t.Errorf("signed headers %v lack %q", r.SignedHeaders, h)
		}
	}
	if r.Method != http.MethodPost || r.Path != "/prod/v1/podbatches" {
		t.Errorf("request = %s %s, want POST /prod/v1/podbatches", r.Method, r.Path)
	}
	var sent v1.PodBatch
	if err := json.Unmarshal(r.Body, &sent); err != nil {
		t.Fatal(err)
	}
	if r.IdempotencyKey != batch().ID || sent.ID != batch().ID {
		t.Errorf("idempotency key header %q, body id %q, want both %q", r.IdempotencyKey, sent.ID, batch().ID)
	}
}

func TestSignatureCoversTheBody(t *testing.T) {
	var verdict received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// A proxy that altered one byte of the body would be caught.
		body[len(body)-2] ^= 1
		verdict = verifySigV4(r, body)
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, queued)
	}))
	defer srv.Close()
	var sleeps []time.Duration
	if _, err := newClient(t, srv.URL, &sleeps).PostPodBatch(t.Context(), batch()); err != nil {
		t.Fatal(err)
	}
	if verdict.SignatureValid {
		t.Error("signature still valid for an altered body; the payload hash is not signed")
	}
}

func TestPostRetries(t *testing.T) {
	tests := []struct {
		name       string
		script     []response
		wantSleeps []time.Duration
	}{
		{
			// The dropped connection comes first: on a reused connection
			// net/http itself retries a request carrying Idempotency-Key.
			name: "should retry a dropped connection, 503, 429 and 500 with doubling delays",
			script: []response{
				{drop: true},
				{status: http.StatusServiceUnavailable, body: `{"message":"busy"}`},
				{status: http.StatusTooManyRequests, body: `{"message":"slow down"}`},
				{status: http.StatusInternalServerError, body: `oops`},
				{status: http.StatusAccepted, body: queued},
			},
			wantSleeps: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond},
		},
		{
			name: "should wait as long as Retry-After asks on 429",
			script: []response{
				{status: http.StatusTooManyRequests, retryAfter: "3", body: `{"message":"slow down"}`},
				{status: http.StatusAccepted, body: queued},
			},
			wantSleeps: []time.Duration{3 * time.Second},
		},
		{
			name: "should retry a 409 for a message still being applied, waiting as long as Retry-After asks up to the longest delay",
			script: []response{
				{status: http.StatusConflict, retryAfter: "30", body: `{"message":"PodBatch pb-1 is being applied by another request; retry after 30 s"}`},
				{status: http.StatusConflict, retryAfter: "2", body: `{"message":"PodBatch pb-1 is being applied by another request; retry after 2 s"}`},
				{status: http.StatusAccepted, body: queued},
			},
			wantSleeps: []time.Duration{10 * time.Second, 2 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.script...)
			var sleeps []time.Duration
			got, err := newClient(t, srv.URL, &sleeps).PostPodBatch(t.Context(), batch())
			if err != nil {
				t.Fatalf("PostPodBatch() error = %v", err)
			}
			if got.State != v1.BatchQueued {
				t.Errorf("PostPodBatch() = %+v", got)
			}
			if diff := cmp.Diff(tt.wantSleeps, sleeps); diff != "" {
				t.Errorf("backoff delays mismatch (-want +got):\n%s", diff)
			}
			reqs := srv.seen()
			if len(reqs) != len(tt.script) {
				t.Fatalf("requests = %d, want %d", len(reqs), len(tt.script))
			}
			for i, r := range reqs {
				if !r.SignatureValid {
					t.Errorf("attempt %d: %s", i+1, r.SignatureProblem)
				}
				if r.IdempotencyKey != batch().ID {
					t.Errorf("attempt %d: idempotency key %q, want %q", i+1, r.IdempotencyKey, batch().ID)
				}
				if diff := cmp.Diff(string(reqs[0].Body), string(r.Body)); diff != "" {
					t.Errorf("attempt %d: body differs from the first attempt (-first +this):\n%s", i+1, diff)
				}
			}
		})
	}
}

func TestBackoffJitterStaysWithinHalfAndFullDelay(t *testing.T) {
	srv := newServer(t, response{status: http.StatusBadGateway, body: `{"message":"bad gateway"}`})
	var sleeps []time.Duration
	var asked []time.Duration
	c, err := intake.New(intake.Options{
		Endpoint: srv.URL, Region: region, Credentials: credentials(), MaxAttempts: 8,
		Sleep:  func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil },
		Jitter: func(max time.Duration) time.Duration { asked = append(asked, max); return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostPodBatch(t.Context(), batch()); err == nil {
		t.Fatal("PostPodBatch() = nil error, want the last 502")
	}
	// With jitter 0 every delay is half its nominal value; the nominal
	// value doubles from 200 ms and stops at 10 s.
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second}
	if diff := cmp.Diff(want, sleeps); diff != "" {
		t.Errorf("delays mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, asked); diff != "" {
		t.Errorf("jitter ranges mismatch (-want +got):\n%s", diff)
	}
}

func TestPostErrors(t *testing.T) {
	badBatch := `{"message":"PodBatch \"pb-1\": pods[0].uid: required","fields":[{"path":"pods[0].uid","message":"required"}]}`
	tests := []struct {
		name         string
		script       []response
		wantRequests int
		wantStatus   int
		wantFields   []v1.ErrorField
	}{
		{
			name:         "should not retry a 400 and should return its field paths",
			script:       []response{{status: http.StatusBadRequest, body: badBatch}},
			wantRequests: 1,
			wantStatus:   http.StatusBadRequest,
			wantFields:   []v1.ErrorField{{Path: "pods[0].uid", Message: "required"}},
		},
		{
			name:         "should not retry a 403",
			script:       []response{{status: http.StatusForbidden, body: `{"message":"User is not authorized to access this resource"}`}},
			wantRequests: 1,
			wantStatus:   http.StatusForbidden,
		},
		{
			name:         "should not retry a 413",
			script:       []response{{status: http.StatusRequestEntityTooLarge, body: `{"message":"too large"}`}},
			wantRequests: 1,
			wantStatus:   http.StatusRequestEntityTooLarge,
		},
		{
			name:         "should give up after six attempts of 503",
			script:       []response{{status: http.StatusServiceUnavailable, body: `{"message":"busy"}`}},
			wantRequests: intake.DefaultMaxAttempts,
			wantStatus:   http.StatusServiceUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.script...)
			var sleeps []time.Duration
			_, err := newClient(t, srv.URL, &sleeps).PostPodBatch(t.Context(), batch())
			var se *intake.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("PostPodBatch() error = %v, want a *StatusError", err)
			}
			if se.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", se.StatusCode, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantFields, se.Response.Fields); diff != "" {
				t.Errorf("fields mismatch (-want +got):\n%s", diff)
			}
			if got := len(srv.seen()); got != tt.wantRequests {
				t.Errorf("requests = %d, want %d", got, tt.wantRequests)
			}
			if len(sleeps) != tt.wantRequests-1 {
				t.Errorf("sleeps = %v, want %d", sleeps, tt.wantRequests-1)
			}
		})
	}
}

func TestPostRefusesAnOversizedBody(t *testing.T) {
	srv := newServer(t, response{status: http.StatusAccepted, body: queued})
	b := batch()
	b.Pods[0].Labels = map[string]string{"blob": strings.Repeat("x", v1.MaxMessageBytes)}
	var sleeps []time.Duration
	_, err := newClient(t, srv.URL, &sleeps).PostPodBatch(t.Context(), b)
	if !errors.Is(err, v1.ErrMessageTooLarge) {
		t.Fatalf("PostPodBatch() error = %v, want ErrMessageTooLarge", err)
	}
	if n := len(srv.seen()); n != 0 {
		t.Errorf("requests = %d, want none", n)
	}
}

func TestPostStopsWhenContextEnds(t *testing.T) {
	srv := newServer(t, response{status: http.StatusServiceUnavailable, body: `{"message":"busy"}`})
	ctx, cancel := context.WithCancel(t.Context())
	c, err := intake.New(intake.Options{
		Endpoint: srv.URL, Region: region, Credentials: credentials(),
		Sleep: func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostPodBatch(ctx, batch()); !errors.Is(err, context.Canceled) {
		t.Fatalf("PostPodBatch() error = %v, want context.Canceled", err)
	}
	if n := len(srv.seen()); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestGets(t *testing.T) {
	list := `{"apiVersion":"karpenter.sh/v1","kind":"NodeClaimList","items":[{"metadata":{"name":"default-abc"},"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}}}]}`
	srv := newServer(t, response{status: http.StatusOK, body: list})
	var sleeps []time.Duration
	c := newClient(t, srv.URL, &sleeps)
	claims, err := c.NodeClaims(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].Name != "default-abc" {
		t.Errorf("NodeClaims() = %+v", claims)
	}
	r := srv.seen()[0]
	if r.Method != http.MethodGet || r.Path != "/prod/v1/nodeclaims" || !r.SignatureValid || r.IdempotencyKey != "" {
		t.Errorf("request = %+v", r)
	}
}

func TestNodeClaimsFollowsPages(t *testing.T) {
	claim := func(name string) string {
		return `{"metadata":{"name":"` + name + `"},"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}}}`
	}
	srv := newServer(t,
		response{status: http.StatusOK, body: `{"kind":"NodeClaimList","metadata":{"continue":"ZGVmYXVsdC1i"},"items":[` + claim("default-a") + `,` + claim("default-b") + `]}`},
		response{status: http.StatusOK, body: `{"kind":"NodeClaimList","metadata":{"continue":"ZGVmYXVsdC1j"},"items":[` + claim("default-c") + `]}`},
		response{status: http.StatusOK, body: `{"kind":"NodeClaimList","items":[]}`},
	)
	var sleeps []time.Duration
	claims, err := newClient(t, srv.URL, &sleeps).NodeClaims(t.Context())
	if err != nil {
		t.Fatalf("NodeClaims() error = %v", err)
	}
	var names []string
	for _, c := range claims {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"default-a", "default-b", "default-c"}, names); diff != "" {
		t.Errorf("NodeClaims() names mismatch (-want +got):\n%s", diff)
	}
	var queries []string
	for _, r := range srv.seen() {
		queries = append(queries, r.Query)
		if !r.SignatureValid {
			t.Errorf("request %s?%s: %s", r.Path, r.Query, r.SignatureProblem)
		}
	}
	want := []string{"limit=500", "continue=ZGVmYXVsdC1i&limit=500", "continue=ZGVmYXVsdC1j&limit=500"}
	if diff := cmp.Diff(want, queries); diff != "" {
		t.Errorf("page queries mismatch (-want +got):\n%s", diff)
	}
}

func TestNodeClaimsStopsOnARepeatedToken(t *testing.T) {
	srv := newServer(t, response{status: http.StatusOK, body: `{"kind":"NodeClaimList","metadata":{"continue":"YQ"},"items":[]}`})
	var sleeps []time.Duration
	if _, err := newClient(t, srv.URL, &sleeps).NodeClaims(t.Context()); err == nil || !strings.Contains(err.Error(), "same continue token") {
		t.Errorf("NodeClaims() error = %v, want the repeated token named", err)
	}
	if n := len(srv.seen()); n != 2 {
		t.Errorf("requests = %d, want 2", n)
	}
}

func TestEvents(t *testing.T) {
	list := `{"apiVersion":"nodewright.dev/v1","kind":"EventList","items":[{"id":"r1","time":"2030-01-02T03:04:05Z","type":"Warning","reason":"SpotInterrupted","message":"reclaimed","nodeClaim":"default-abc","node":"ip-10-0-0-1"}],"omitted":2}`
	srv := newServer(t, response{status: http.StatusOK, body: list})
	var sleeps []time.Duration
	c := newClient(t, srv.URL, &sleeps)
	got, err := c.Events(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := v1.EventList{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindEventList},
		Items: []v1.EventRecord{{ID: "r1", Time: metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)), Type: "Warning",
			Reason: "SpotInterrupted", Message: "reclaimed", NodeClaim: "default-abc", Node: "ip-10-0-0-1"}},
		Omitted: 2,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Events() mismatch (-want +got):\n%s", diff)
	}
	r := srv.seen()[0]
	if r.Method != http.MethodGet || r.Path != "/prod/v1/events" || !r.SignatureValid || r.IdempotencyKey != "" {
		t.Errorf("request = %+v", r)
	}
}

func TestNodeClasses(t *testing.T) {
	list := `{"apiVersion":"nodewright.dev/v1","kind":"NodeClassStatusList","items":[{"name":"default","generation":2,"changedAt":"2030-01-02T03:04:05Z","status":{"subnets":[{"id":"subnet-a","zone":"us-east-1a"}]}}]}`
	srv := newServer(t, response{status: http.StatusOK, body: list})
	var sleeps []time.Duration
	c := newClient(t, srv.URL, &sleeps)
	got, err := c.NodeClasses(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := v1.NodeClassStatusList{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindNodeClassStatuses},
		Items: []v1.NodeClassStatus{{Name: "default", Generation: 2, ChangedAt: metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
			Status: v1.EC2NodeClassStatus{Subnets: []v1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeClasses() mismatch (-want +got):\n%s", diff)
	}
	r := srv.seen()[0]
	if r.Method != http.MethodGet || r.Path != "/prod/v1/nodeclasses" || !r.SignatureValid || r.IdempotencyKey != "" {
		t.Errorf("request = %+v", r)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		give intake.Options
	}{
		{name: "plain http to a remote host", give: intake.Options{Endpoint: "http://abc.execute-api.eu-west-1.amazonaws.com/prod", Region: region, Credentials: credentials()}},
		{name: "no host", give: intake.Options{Endpoint: "/prod", Region: region, Credentials: credentials()}},
		{name: "no region", give: intake.Options{Endpoint: "https://abc.execute-api.eu-west-1.amazonaws.com/prod", Credentials: credentials()}},
		{name: "no credentials", give: intake.Options{Endpoint: "https://abc.execute-api.eu-west-1.amazonaws.com/prod", Region: region}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := intake.New(tt.give); err == nil {
				t.Error("New() = nil error, want one")
			}
		})
	}
}

func TestSync(t *testing.T) {
	claim := `{"metadata":{"name":"default-a"},"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}}}`
	events := `{"apiVersion":"nodewright.dev/v1","kind":"EventList","items":[{"id":"r1","time":"2030-01-02T03:04:05Z","type":"Normal","reason":"Launched","message":"m","nodeClaim":"default-a"}]}`
	classes := `[{"name":"default","generation":2,"changedAt":"2030-01-02T03:04:05Z","status":{}}]`
	t.Run("should answer from one request when nothing is deferred", func(t *testing.T) {
		srv := newServer(t, response{status: http.StatusOK, body: `{"apiVersion":"nodewright.dev/v1","kind":"Sync","nodeClasses":` + classes +
			`,"nodeClaims":[` + claim + `],"events":` + events + `}`})
		var sleeps []time.Duration
		got, err := newClient(t, srv.URL, &sleeps).Sync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(got.NodeClasses) != 1 || len(got.NodeClaims) != 1 || len(got.Events.Items) != 1 || got.Deferred != nil {
			t.Errorf("Sync() = %+v, want one class, one claim, one event and nothing deferred", got)
		}
		var paths []string
		for _, r := range srv.seen() {
			paths = append(paths, r.Method+" "+r.Path)
			if !r.SignatureValid {
				t.Errorf("request %s: %s", r.Path, r.SignatureProblem)
			}
		}
		if diff := cmp.Diff([]string{"GET /prod/v1/sync"}, paths); diff != "" {
			t.Errorf("requests mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should fetch a deferred part from its own route, following its pages", func(t *testing.T) {
		srv := newServer(t,
			response{status: http.StatusOK, body: `{"apiVersion":"nodewright.dev/v1","kind":"Sync","nodeClasses":` + classes +
				`,"nodeClaims":[],"events":` + events + `,"deferred":["/v1/nodeclaims"]}`},
			response{status: http.StatusOK, body: `{"kind":"NodeClaimList","metadata":{"continue":"YQ"},"items":[` + claim + `]}`},
			response{status: http.StatusOK, body: `{"kind":"NodeClaimList","items":[]}`},
		)
		var sleeps []time.Duration
		got, err := newClient(t, srv.URL, &sleeps).Sync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(got.NodeClaims) != 1 || got.NodeClaims[0].Name != "default-a" || len(got.NodeClasses) != 1 || got.Deferred != nil {
			t.Errorf("Sync() = %+v, want the paged claim, the class and nothing deferred", got)
		}
		var paths []string
		for _, r := range srv.seen() {
			paths = append(paths, r.Path)
		}
		if diff := cmp.Diff([]string{"/prod/v1/sync", "/prod/v1/nodeclaims", "/prod/v1/nodeclaims"}, paths); diff != "" {
			t.Errorf("requests mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should send the kept generation and answer the kept NodeClaims while they are unchanged", func(t *testing.T) {
		srv := newServer(t,
			response{status: http.StatusOK, body: `{"kind":"Sync","nodeClaims":[` + claim + `],"events":` + events + `,"nodeClaimsGeneration":7}`},
			response{status: http.StatusOK, body: `{"kind":"Sync","nodeClaims":[],"events":` + events + `,"nodeClaimsGeneration":7,"nodeClaimsUnchanged":true}`},
			response{status: http.StatusOK, body: `{"kind":"Sync","nodeClaims":[],"events":` + events + `,"nodeClaimsGeneration":8}`},
			response{status: http.StatusOK, body: `{"kind":"Sync","nodeClaims":[],"events":` + events + `,"nodeClaimsGeneration":8,"nodeClaimsUnchanged":true}`},
		)
		var sleeps []time.Duration
		c := newClient(t, srv.URL, &sleeps)
		var counts []int
		for range 4 {
			got, err := c.Sync(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			counts = append(counts, len(got.NodeClaims))
		}
		// The third answer moved to generation 8 with no NodeClaim: the
		// fourth must not bring back the one of generation 7.
		if diff := cmp.Diff([]int{1, 1, 0, 0}, counts); diff != "" {
			t.Errorf("NodeClaims per Sync mismatch (-want +got):\n%s", diff)
		}
		var queries []string
		for _, r := range srv.seen() {
			queries = append(queries, r.Query)
		}
		if diff := cmp.Diff([]string{"", "nodeClaimsGeneration=7", "nodeClaimsGeneration=7", "nodeClaimsGeneration=8"}, queries); diff != "" {
			t.Errorf("queries mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should keep nothing from an answer whose NodeClaims were deferred", func(t *testing.T) {
		srv := newServer(t,
			response{status: http.StatusOK, body: `{"kind":"Sync","nodeClaims":[],"deferred":["/v1/nodeclaims"],"nodeClaimsGeneration":3}`},
			response{status: http.StatusOK, body: `{"kind":"NodeClaimList","items":[` + claim + `]}`},
			response{status: http.StatusOK, body: `{"kind":"Sync","nodeClaims":[` + claim + `],"nodeClaimsGeneration":3}`},
		)
		var sleeps []time.Duration
		c := newClient(t, srv.URL, &sleeps)
		for range 2 {
			if _, err := c.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if q := srv.seen()[2].Query; q != "" {
			t.Errorf("second Sync query = %q, want none (nothing kept from a deferred part)", q)
		}
	})
	t.Run("should fail on an unchanged answer to a generation it did not send", func(t *testing.T) {
		srv := newServer(t, response{status: http.StatusOK, body: `{"kind":"Sync","nodeClaims":[],"nodeClaimsGeneration":4,"nodeClaimsUnchanged":true}`})
		var sleeps []time.Duration
		if _, err := newClient(t, srv.URL, &sleeps).Sync(t.Context()); err == nil || !strings.Contains(err.Error(), "unchanged") {
			t.Errorf("Sync() error = %v, want the unasked unchanged answer refused", err)
		}
	})
	t.Run("should fail on a deferred route that is not one of its parts", func(t *testing.T) {
		srv := newServer(t, response{status: http.StatusOK, body: `{"kind":"Sync","deferred":["/v1/metrics"]}`})
		var sleeps []time.Duration
		if _, err := newClient(t, srv.URL, &sleeps).Sync(t.Context()); err == nil || !strings.Contains(err.Error(), "/v1/metrics") {
			t.Errorf("Sync() error = %v, want the route named", err)
		}
	})
}
