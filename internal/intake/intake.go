// Package intake is the HTTP client of the nodewright intake API (API
// Gateway with IAM authorization), used by the forwarder and by the
// operator CLI (nodewright replace). Every request is signed with AWS
// Signature Version 4 for the "execute-api" service, with credentials from a
// provider (the SDK's default chain resolves EKS Pod Identity and IRSA). POSTs
// carry the message's idempotency key in the Idempotency-Key header and the
// body, and are retried with exponential, jittered backoff on 5xx, 429, 409
// (an earlier attempt of the same message is still being applied) and network
// errors, resending the identical body and waiting at least as long as a
// Retry-After header asks (up to MaxDelay); other 4xx answers are not
// retried. With the defaults a 409 is retried for about 50 s, longer than
// the API holds a message it is applying (30 s). Bodies are bounded by v1.MaxMessageBytes. The routes and message
// shapes are those of shared/apis/v1 (podbatch.go, replacement.go).
package intake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// SigningService is the SigV4 service name of API Gateway.
const SigningService = "execute-api"

// MaxResponseBytes bounds how much of an answer is read.
const MaxResponseBytes = 16 << 20

// Default retry policy: 6 attempts, delays of 200 ms doubling up to 10 s
// (each delay is drawn between half and all of its nominal value).
const (
	DefaultMaxAttempts = 6
	DefaultBaseDelay   = 200 * time.Millisecond
	DefaultMaxDelay    = 10 * time.Second
)

// Options configure a Client. Endpoint, Region and Credentials are required.
type Options struct {
	// Endpoint is the API's base URL including the stage, for example
	// "https://abc123.execute-api.eu-west-1.amazonaws.com/prod". It must be
	// https, except for loopback hosts (local stack and tests).
	Endpoint string
	// Region is the API's AWS region, part of the signature's scope.
	Region string
	// Credentials signs requests; Retrieve is called before every attempt,
	// so wrap a provider in aws.NewCredentialsCache.
	Credentials aws.CredentialsProvider
	// HTTPClient defaults to a client with a 30 s timeout.
	HTTPClient *http.Client
	// MaxAttempts, BaseDelay and MaxDelay shape retries; zero takes the
	// defaults.
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
	// Now is the signing clock; defaults to time.Now.
	Now func() time.Time
	// Sleep waits between attempts, returning early with ctx's error;
	// defaults to a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a duration in [0, max]; defaults to a uniform draw.
	Jitter func(max time.Duration) time.Duration
	// OnRetry, when set, is told about every failed attempt that will be
	// retried: the route, the HTTP status (0 for a network error) and the
	// error.
	OnRetry func(route string, status int, err error)
}

// Client talks to the intake API. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	opts   Options
	signer *v4.Signer
	httpc  *http.Client

	mu sync.Mutex
	// synced is the NodeClaims of the last Sync answer that held them
	// whole (not deferred), encoded, and the generation it named.
	synced syncedClaims
}

// syncedClaims is a Sync answer's NodeClaims as JSON and their
// v1.Sync.NodeClaimsGeneration (0: none kept).
type syncedClaims struct {
	gen  int64
	json []byte
}

// New returns a Client, or an error naming the option that is missing or
// malformed.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("intake endpoint %q: %w", opts.Endpoint, err)
	}
	if u.Host == "" || (u.Scheme != "https" && (u.Scheme != "http" || !loopback(u.Hostname()))) {
		return nil, fmt.Errorf("intake endpoint %q: must be an https URL (http only for loopback hosts)", opts.Endpoint)
	}
	if opts.Region == "" {
		return nil, errors.New("intake region: required")
	}
	if opts.Credentials == nil {
		return nil, errors.New("intake credentials: required")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = DefaultBaseDelay
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func(max time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(max) + 1)) }
	}
	httpc := opts.HTTPClient
	if httpc == nil {
		httpc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: u, opts: opts, signer: v4.NewSigner(), httpc: httpc}, nil
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// StatusError is an answer outside 2xx: a 4xx other than 409 and 429 at
// once, or a 5xx, 409 or 429 once the attempts are spent.
type StatusError struct {
	Route      string
	StatusCode int
	// Response is the API's ErrorResponse; Message holds the raw body when it
	// was not one.
	Response v1.ErrorResponse
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s answered %d: %s", e.Route, e.StatusCode, e.Response.Message)
}

// Retryable reports whether the status is worth retrying (409, 429 and
// 5xx): the message may still be accepted later.
func (e *StatusError) Retryable() bool {
	return retryableStatus(e.StatusCode)
}

// retryableStatus: 409 is the API's answer to a message an earlier attempt
// is still applying (v1 contract), 429 and 5xx are transient.
func retryableStatus(status int) bool {
	return status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500
}

// PostPodBatch sends b and returns the API's answer (State Queued for a new
// batch; for a repeated ID, what the API knows of it, with Duplicate set).
func (c *Client) PostPodBatch(ctx context.Context, b *v1.PodBatch) (v1.PodBatchResult, error) {
	var out v1.PodBatchResult
	err := c.post(ctx, v1.RoutePodBatches, b.ID, b, &out)
	return out, err
}

// PodBatchResult returns what the API knows of the batch with this ID.
func (c *Client) PodBatchResult(ctx context.Context, id string) (v1.PodBatchResult, error) {
	var out v1.PodBatchResult
	err := c.do(ctx, http.MethodGet, v1.RoutePodBatches+"/"+url.PathEscape(id), "", nil, &out)
	return out, err
}

// PostConfig sends the cluster's NodePools and EC2NodeClasses.
func (c *Client) PostConfig(ctx context.Context, cfg *v1.ClusterConfig) (v1.Receipt, error) {
	var out v1.Receipt
	err := c.post(ctx, v1.RouteConfig, cfg.ID, cfg, &out)
	return out, err
}

// PostRegistrations sends node registrations and removals.
func (c *Client) PostRegistrations(ctx context.Context, r *v1.NodeRegistrations) (v1.Receipt, error) {
	var out v1.Receipt
	err := c.post(ctx, v1.RouteRegistrations, r.ID, r, &out)
	return out, err
}

// PostSnapshot sends one part of a cluster snapshot.
func (c *Client) PostSnapshot(ctx context.Context, s *v1.ClusterSnapshot) (v1.Receipt, error) {
	var out v1.Receipt
	err := c.post(ctx, v1.RouteSnapshots, s.ID, s, &out)
	return out, err
}

// PageLimit is how many items the client asks for per page of a paged list
// (v1 contract, Paging); the API answers fewer when they would not fit.
const PageLimit = 500

// maxPages bounds one listing (PageLimit x maxPages items), in case an API
// never stops handing out tokens.
const maxPages = 1000

// NodeClaims returns every NodeClaim the API holds for the cluster, sorted
// by name, following the API's pages; a NodeClaim that exists for the whole
// listing is returned exactly once.
func (c *Client) NodeClaims(ctx context.Context) ([]v1.NodeClaim, error) {
	return listAll(ctx, c, v1.RouteNodeClaims, func(l *v1.NodeClaimList) ([]v1.NodeClaim, string) { return l.Items, l.Continue })
}

// listAll GETs route page by page (limit PageLimit, then each answer's
// continue token) and returns the items of every page.
func listAll[L any, T any](ctx context.Context, c *Client, route string, items func(*L) ([]T, string)) ([]T, error) {
	var all []T
	token := ""
	for range maxPages {
		q := url.Values{v1.QueryLimit: {strconv.Itoa(PageLimit)}}
		if token != "" {
			q.Set(v1.QueryContinue, token)
		}
		var page L
		if err := c.do(ctx, http.MethodGet, route+"?"+q.Encode(), "", nil, &page); err != nil {
			return nil, err
		}
		got, next := items(&page)
		all = append(all, got...)
		if next == "" {
			return all, nil
		}
		if next == token {
			return nil, fmt.Errorf("GET %s: the API answered the same continue token twice", route)
		}
		token = next
	}
	return nil, fmt.Errorf("GET %s: more than %d pages", route, maxPages)
}

// Events returns the newest unexpired event records the API holds for the
// cluster (GET v1.RouteEvents), oldest first; see v1.EventList.
func (c *Client) Events(ctx context.Context) (v1.EventList, error) {
	var out v1.EventList
	err := c.do(ctx, http.MethodGet, v1.RouteEvents, "", nil, &out)
	return out, err
}

// Sync returns in one request (GET v1.RouteSync) every NodeClassStatus,
// every NodeClaim and the newest event records, as NodeClasses, NodeClaims
// and Events return them; a part the API deferred (v1.Sync.Deferred) is
// fetched from its own route, so the Sync returned is complete and its
// Deferred empty. An API that names a route it has no part for is an error.
//
// The client keeps the NodeClaims of the last answer that held them and
// sends their generation (v1.QueryNodeClaimsGeneration); an answer with
// NodeClaimsUnchanged gets those NodeClaims back in its NodeClaims, so the
// API reads and sends them only when one changed. An answer claiming
// "unchanged" for a generation the client did not send is an error.
func (c *Client) Sync(ctx context.Context) (v1.Sync, error) {
	c.mu.Lock()
	known := c.synced
	c.mu.Unlock()
	route := v1.RouteSync
	if known.gen > 0 {
		route += "?" + url.Values{v1.QueryNodeClaimsGeneration: {strconv.FormatInt(known.gen, 10)}}.Encode()
	}
	var out v1.Sync
	if err := c.do(ctx, http.MethodGet, route, "", nil, &out); err != nil {
		return v1.Sync{}, err
	}
	deferred := out.Deferred
	out.Deferred = nil
	switch {
	case out.NodeClaimsUnchanged:
		if known.gen == 0 || out.NodeClaimsGeneration != known.gen {
			return v1.Sync{}, fmt.Errorf("GET %s: NodeClaims unchanged at generation %d, but the client asked with %d", v1.RouteSync, out.NodeClaimsGeneration, known.gen)
		}
		if err := json.Unmarshal(known.json, &out.NodeClaims); err != nil {
			return v1.Sync{}, fmt.Errorf("GET %s: decode the kept NodeClaims: %w", v1.RouteSync, err)
		}
	case out.NodeClaimsGeneration > 0 && !slices.Contains(deferred, v1.RouteNodeClaims):
		raw, err := json.Marshal(out.NodeClaims)
		if err != nil {
			return v1.Sync{}, fmt.Errorf("GET %s: encode the NodeClaims to keep: %w", v1.RouteSync, err)
		}
		c.keepSynced(syncedClaims{gen: out.NodeClaimsGeneration, json: raw})
	default:
		c.keepSynced(syncedClaims{})
	}
	for _, route := range deferred {
		var err error
		switch route {
		case v1.RouteNodeClasses:
			var l v1.NodeClassStatusList
			l, err = c.NodeClasses(ctx)
			out.NodeClasses = l.Items
		case v1.RouteNodeClaims:
			out.NodeClaims, err = c.NodeClaims(ctx)
		case v1.RouteEvents:
			out.Events, err = c.Events(ctx)
		default:
			err = fmt.Errorf("GET %s: deferred %q, not a route of its parts", v1.RouteSync, route)
		}
		if err != nil {
			return v1.Sync{}, err
		}
	}
	return out, nil
}

// keepSynced replaces the kept NodeClaims with k, unless k is older than
// them (a concurrent Sync answered a newer generation); an empty k always
// replaces them.
func (c *Client) keepSynced(k syncedClaims) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k.gen == 0 || k.gen >= c.synced.gen {
		c.synced = k
	}
}

// Metrics returns the decision metrics the Lambdas stored (GET
// v1.RouteMetrics); see v1.MetricList.
func (c *Client) Metrics(ctx context.Context) (v1.MetricList, error) {
	var out v1.MetricList
	err := c.do(ctx, http.MethodGet, v1.RouteMetrics, "", nil, &out)
	return out, err
}

// NodeClasses returns what the API last resolved for each EC2NodeClass
// (GET v1.RouteNodeClasses, every page); see v1.NodeClassStatusList.
func (c *Client) NodeClasses(ctx context.Context) (v1.NodeClassStatusList, error) {
	items, err := listAll(ctx, c, v1.RouteNodeClasses, func(l *v1.NodeClassStatusList) ([]v1.NodeClassStatus, string) { return l.Items, l.Continue })
	if err != nil {
		return v1.NodeClassStatusList{}, err
	}
	if items == nil {
		items = []v1.NodeClassStatus{}
	}
	return v1.NodeClassStatusList{TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindNodeClassStatuses}, Items: items}, nil
}

// PostReplacement asks for the manual replacement of r's nodes
// (v1.RouteReplacements). The request carries no idempotency key: its
// executions are named by the request itself, so a retry starts nothing
// new. A refusal is a *StatusError with status 422 and one field per
// refused node; it is not retried.
func (c *Client) PostReplacement(ctx context.Context, r *v1.ReplacementRequest) (v1.ReplacementResult, error) {
	var out v1.ReplacementResult
	err := c.post(ctx, v1.RouteReplacements, "", r, &out)
	return out, err
}

// Encode returns the JSON body of msg, or an error wrapping
// v1.ErrMessageTooLarge when it exceeds v1.MaxMessageBytes; senders use it to
// decide how to split.
func Encode(msg any) ([]byte, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	if len(body) > v1.MaxMessageBytes {
		return nil, fmt.Errorf("message of %d bytes, limit %d: %w", len(body), v1.MaxMessageBytes, v1.ErrMessageTooLarge)
	}
	return body, nil
}

func (c *Client) post(ctx context.Context, route, id string, msg, out any) error {
	body, err := Encode(msg)
	if err != nil {
		return fmt.Errorf("post %s %s: %w", route, id, err)
	}
	return c.do(ctx, http.MethodPost, route, id, body, out)
}

// do sends one request, retrying as the package comment says, and decodes a
// 2xx answer into out. The body and idempotency key are identical on every
// attempt; each attempt is signed afresh.
func (c *Client) do(ctx context.Context, method, route, idempotencyKey string, body []byte, out any) error {
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	var lastErr error
	for attempt := 1; ; attempt++ {
		status, retryAfter, err := c.attempt(ctx, method, route, idempotencyKey, body, payloadHash, out)
		if err == nil {
			return nil
		}
		lastErr = err
		retryable := status == 0 || retryableStatus(status)
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", method, route, ctx.Err())
		}
		if !retryable {
			return err
		}
		if attempt >= c.opts.MaxAttempts {
			return fmt.Errorf("%s %s after %d attempts: %w", method, route, attempt, lastErr)
		}
		if c.opts.OnRetry != nil {
			c.opts.OnRetry(route, status, err)
		}
		if err := c.opts.Sleep(ctx, max(c.backoff(attempt), min(retryAfter, c.opts.MaxDelay))); err != nil {
			return fmt.Errorf("%s %s: %w (last attempt: %w)", method, route, err, lastErr)
		}
	}
}

// backoff is the delay after the given failed attempt: BaseDelay doubled per
// attempt, capped at MaxDelay, drawn between half and all of that.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.MaxDelay
	if attempt < 32 {
		d = min(c.opts.BaseDelay<<(attempt-1), c.opts.MaxDelay)
	}
	return d/2 + c.opts.Jitter(d-d/2)
}

// attempt sends once. It returns the HTTP status (0 when no answer came,
// which is worth retrying; -1 for a local failure that retrying cannot fix), a
// Retry-After delay if the answer named one, and an error for anything but a
// decoded 2xx answer.
func (c *Client) attempt(ctx context.Context, method, route, idempotencyKey string, body []byte, payloadHash string, out any) (int, time.Duration, error) {
	u := *c.base
	path, query, _ := strings.Cut(route, "?")
	u.Path += path
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return -1, 0, fmt.Errorf("build %s request: %w", route, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set(v1.HeaderIdempotencyKey, idempotencyKey)
	}
	creds, err := c.opts.Credentials.Retrieve(ctx)
	if err != nil {
		// Credentials that cannot be fetched now may be fetchable later
		// (the Pod Identity agent or STS being briefly unavailable).
		return 0, 0, fmt.Errorf("retrieve aws credentials: %w", err)
	}
	if err := c.signer.SignHTTP(ctx, creds, req, payloadHash, SigningService, c.opts.Region, c.opts.Now()); err != nil {
		return -1, 0, fmt.Errorf("sign %s request: %w", route, err)
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("%s %s: %w", method, route, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return 0, 0, fmt.Errorf("read %s answer: %w", route, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{Route: route, StatusCode: resp.StatusCode}
		if json.Unmarshal(data, &se.Response) != nil || se.Response.Message == "" {
			se.Response = v1.ErrorResponse{Message: strings.TrimSpace(string(data))}
		}
		return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), se
	}
	if len(data) > MaxResponseBytes {
		return -1, 0, fmt.Errorf("%s answer: larger than %d bytes", route, MaxResponseBytes)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return -1, 0, fmt.Errorf("decode %s answer: %w", route, err)
		}
	}
	return resp.StatusCode, 0, nil
}

// retryAfter parses a Retry-After header given in seconds; 0 otherwise.
func retryAfter(h string) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}
