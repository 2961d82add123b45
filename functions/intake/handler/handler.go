// Package handler is the intake Lambda: the API Gateway (REST API, proxy
// integration, IAM authorization) front of nodewright. It serves the routes
// of the forwarder <-> API contract (shared/apis/v1 podbatch.go):
//
//	POST /v1/podbatches       validate, dedupe, enqueue to the provisioning FIFO queue -> 202 PodBatchResult (Queued)
//	GET  /v1/podbatches/{id}  the stored PodBatchResult (Queued while the provisioner has not stored one)
//	POST /v1/config           validate, dedupe, store the NodePools and EC2NodeClasses as one versioned item -> 202 Receipt
//	POST /v1/registrations    validate, dedupe, enqueue on the same FIFO group as the batches -> 202 Receipt
//	POST /v1/snapshots        validate, dedupe, store the part; the snapshot becomes current when complete -> 202 Receipt
//	GET  /v1/nodeclaims       every NodeClaim of the cluster, paged with ?limit= -> 200 NodeClaimList
//	GET  /v1/events           the newest unexpired event records (ddbstore.ListEvents), at most
//	                          v1.MaxEventsPerList and 4 MiB of them, oldest first -> 200 EventList
//	GET  /v1/nodeclasses      what the Lambdas last resolved for each EC2NodeClass, by name, paged -> 200 NodeClassStatusList
//	GET  /v1/sync             the three answers above in one (v1.Sync), each part that does not fit deferred
//	                          to its own route -> 200 Sync
//
// A body over v1.MaxMessageBytes is refused with 413 before it is decoded.
// A malformed or invalid message (truncated JSON, wrong types, unknown
// kind, missing fields, another cluster's, an Idempotency-Key header that
// differs from the body's id) gets a 4xx ErrorResponse naming the field
// paths at fault, and nothing is stored or enqueued. Every POST is
// idempotent by message ID: the first accepted request takes the ID's
// pending claim (a DynamoDB conditional write) before acting and records it
// as done only after the effect; a repeat of a done ID is answered as the
// first one was, with Duplicate set, and changes nothing; a repeat while the
// claim is pending (the first request still applying, or killed mid-apply
// until its claim lapses) gets 409 with Retry-After and changes nothing; if
// acting fails, the claim is abandoned so the sender's retry is applied, and
// the answer is a 5xx the sender retries. Registrations share the pod batches'
// message group (the cluster name), so every NodeClaim write stays with the
// single provisioner invocation of the cluster. A message's SQS
// deduplication ID is its kind and ID ("PodBatch-<id>"), so a pod batch and
// a registrations message that happen to share an ID are never taken for
// one another within the queue's 5-minute deduplication window.
//
// A message too large for the queue even gzipped (SQS takes 256 KiB) is
// stored in DynamoDB (ddbstore.PutPayload, the claim-check pattern) and the
// queue carries its reference.
package handler

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/functions/internal/apigw"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/queue"
)

// Config is the intake Lambda's configuration.
type Config struct {
	// Cluster is the EKS cluster name; messages naming another are refused.
	Cluster string
	// Table is the DynamoDB table (ddbstore).
	Table string
	// QueueURL is the provisioning FIFO queue.
	QueueURL string
	// IdempotencyTTL is how long a message ID is remembered: longer than
	// the forwarder retries one message (about a minute). Default 1 h.
	IdempotencyTTL time.Duration
	// ApplyLease is how long one request holds a message ID while applying
	// it; a repeat meanwhile is told to retry. It must exceed the Lambda's
	// timeout (25 s), so a live apply is never taken over; a claim left by an
	// invocation killed mid-apply lapses after it. Default 30 s.
	ApplyLease time.Duration
	// PayloadTTL keeps claim-checked payloads; it must exceed the queue's
	// message retention. Default 4 days (SQS's default retention).
	PayloadTTL time.Duration
	// LogLevel is the slog level.
	LogLevel slog.Level
}

// LoadConfig reads the configuration: CLUSTER_NAME, TABLE_NAME and
// QUEUE_URL (required), IDEMPOTENCY_TTL, APPLY_LEASE and PAYLOAD_TTL (Go
// durations) and LOG_LEVEL. It reports every problem at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	e := lambdakit.NewEnv(getenv)
	c := Config{
		Cluster:        e.String("CLUSTER_NAME"),
		Table:          e.String("TABLE_NAME"),
		QueueURL:       e.String("QUEUE_URL"),
		IdempotencyTTL: e.Duration("IDEMPOTENCY_TTL", time.Hour, time.Minute),
		ApplyLease:     e.Duration("APPLY_LEASE", 30*time.Second, time.Second),
		PayloadTTL:     e.Duration("PAYLOAD_TTL", 96*time.Hour, time.Hour),
		LogLevel:       e.Level("LOG_LEVEL"),
	}
	return c, e.Err()
}

// store is what the intake reads and writes in DynamoDB (*ddbstore.Store).
type store interface {
	BeginApply(ctx context.Context, scope, key, holder string, now time.Time, pendingFor time.Duration) (ddbstore.KeyClaim, error)
	CompleteApply(ctx context.Context, scope, key, holder string, now time.Time, ttl time.Duration) error
	AbandonApply(ctx context.Context, scope, key, holder string) error
	HasIdempotencyKey(ctx context.Context, scope, key string, now time.Time) (bool, error)
	BatchResult(ctx context.Context, batchID string, now time.Time) (v1.PodBatchResult, bool, error)
	GetConfig(ctx context.Context) (ddbstore.ConfigSnapshot, error)
	PutConfig(ctx context.Context, cfg ddbstore.Config, expectedVersion int64) (ddbstore.ConfigSnapshot, error)
	PutSnapshotPart(ctx context.Context, part *v1.ClusterSnapshot, now time.Time) (ddbstore.SnapshotPartResult, error)
	PutPayload(ctx context.Context, key string, data []byte, now time.Time, ttl time.Duration) error
	ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error)
	NodeClaimGeneration(ctx context.Context) (int64, error)
	ListNodeClaimsPage(ctx context.Context, after string, limit int) ([]v1.NodeClaim, bool, error)
	ListNodeClassStatusesPage(ctx context.Context, after string, limit int) ([]v1.NodeClassStatus, bool, error)
	ListEvents(ctx context.Context, now time.Time) ([]ddbstore.Event, error)
	ListMetrics(ctx context.Context) ([]v1.MetricSample, error)
	ListNodeClassStatuses(ctx context.Context) ([]v1.NodeClassStatus, error)
}

// sender enqueues to the provisioning queue (*queue.Queue).
type sender interface {
	Send(ctx context.Context, m queue.Message) error
}

var (
	_ store  = (*ddbstore.Store)(nil)
	_ sender = (*queue.Queue)(nil)
)

// Deps are the handler's collaborators. All are required.
type Deps struct {
	Store store
	Queue sender
	Log   *slog.Logger
	// Now is the clock (time.Now in main).
	Now func() time.Time
}

// Handler serves the intake routes. It holds no state between invocations.
type Handler struct {
	cfg  Config
	deps Deps
}

// New returns a Handler, or an error naming a missing setting or
// dependency.
func New(cfg Config, deps Deps) (*Handler, error) {
	switch {
	case cfg.Cluster == "":
		return nil, errors.New("intake: cluster: required")
	case cfg.IdempotencyTTL <= 0 || cfg.PayloadTTL <= 0 || cfg.ApplyLease <= 0:
		return nil, errors.New("intake: IdempotencyTTL, ApplyLease and PayloadTTL must be positive")
	case deps.Store == nil || deps.Queue == nil || deps.Log == nil || deps.Now == nil:
		return nil, errors.New("intake: Store, Queue, Log and Now are required")
	}
	return &Handler{cfg: cfg, deps: deps}, nil
}

// configAttempts bounds the version-checked config writes of one request.
const configAttempts = 5

// maxResponseBytes bounds an answer's body. A Lambda's response is at most
// 6 MB, and the body travels inside it as an escaped JSON string that can
// grow by a third and more.
const maxResponseBytes = 4 << 20

// Handle serves one API Gateway proxy request. It always answers with a
// response (a 5xx for its own failures, which the forwarder retries) and
// never returns an error, since API Gateway would turn one into a bare 502.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	start := time.Now()
	resp := h.route(ctx, req)
	level := slog.LevelInfo
	if resp.StatusCode >= 500 {
		level = slog.LevelError
	}
	h.deps.Log.Log(ctx, level, "request", "method", req.HTTPMethod, "path", req.Path, "status", resp.StatusCode,
		"caller", req.RequestContext.Identity.UserArn, "ms", time.Since(start).Milliseconds())
	return resp, nil
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func (h *Handler) route(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	path := strings.TrimSuffix(req.Path, "/")
	type route struct {
		method string
		serve  func() events.APIGatewayProxyResponse
	}
	var routes []route
	switch {
	case path == v1.RoutePodBatches:
		routes = []route{{http.MethodPost, func() events.APIGatewayProxyResponse { return h.postPodBatch(ctx, req) }}}
	case strings.HasPrefix(path, v1.RoutePodBatches+"/"):
		id := strings.TrimPrefix(path, v1.RoutePodBatches+"/")
		routes = []route{{http.MethodGet, func() events.APIGatewayProxyResponse { return h.getPodBatch(ctx, id) }}}
	case path == v1.RouteConfig:
		routes = []route{{http.MethodPost, func() events.APIGatewayProxyResponse { return h.postConfig(ctx, req) }}}
	case path == v1.RouteRegistrations:
		routes = []route{{http.MethodPost, func() events.APIGatewayProxyResponse { return h.postRegistrations(ctx, req) }}}
	case path == v1.RouteSnapshots:
		routes = []route{{http.MethodPost, func() events.APIGatewayProxyResponse { return h.postSnapshot(ctx, req) }}}
	case path == v1.RouteNodeClaims:
		routes = []route{{http.MethodGet, func() events.APIGatewayProxyResponse { return h.getNodeClaims(ctx, req) }}}
	case path == v1.RouteEvents:
		routes = []route{{http.MethodGet, func() events.APIGatewayProxyResponse { return h.getEvents(ctx) }}}
	case path == v1.RouteNodeClasses:
		routes = []route{{http.MethodGet, func() events.APIGatewayProxyResponse { return h.getNodeClasses(ctx, req) }}}
	case path == v1.RouteSync:
		routes = []route{{http.MethodGet, func() events.APIGatewayProxyResponse { return h.getSync(ctx, req) }}}
	case path == v1.RouteMetrics:
		routes = []route{{http.MethodGet, func() events.APIGatewayProxyResponse { return h.getMetrics(ctx) }}}
	default:
		return errorResponse(http.StatusNotFound, v1.ErrorResponse{Message: fmt.Sprintf("no route %s", req.Path)})
	}
	for _, r := range routes {
		if r.method == req.HTTPMethod {
			return r.serve()
		}
	}
	resp := errorResponse(http.StatusMethodNotAllowed, v1.ErrorResponse{Message: fmt.Sprintf("%s does not serve %s", req.Path, req.HTTPMethod)})
	resp.Headers["Allow"] = routes[0].method
	return resp
}

// checkEnvelope checks what the Decode functions cannot: the
// Idempotency-Key header equals the body's id, and the message is this
// cluster's.
func (h *Handler) checkEnvelope(req events.APIGatewayProxyRequest, kind, id, cluster string) error {
	var fields []v1.FieldError
	switch key := header(req, v1.HeaderIdempotencyKey); {
	case key == "":
		fields = append(fields, v1.FieldError{Path: "header " + v1.HeaderIdempotencyKey, Message: "required: the message id"})
	case key != id:
		fields = append(fields, v1.FieldError{Path: "header " + v1.HeaderIdempotencyKey, Message: fmt.Sprintf("%q differs from the body's id %q", key, id)})
	}
	if cluster != h.cfg.Cluster {
		fields = append(fields, v1.FieldError{Path: "cluster", Message: fmt.Sprintf("this API serves cluster %q, got %q", h.cfg.Cluster, cluster)})
	}
	if len(fields) > 0 {
		return &v1.ValidationError{Kind: kind, Name: id, Fields: fields}
	}
	return nil
}

// header returns the first value of a header, matched case-insensitively.
func header(req events.APIGatewayProxyRequest, name string) string {
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	for k, vs := range req.MultiValueHeaders {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

// accepted is how accept ended when it did not fail.
type accepted struct {
	// duplicate: the ID was applied before; nothing was applied now.
	duplicate bool
	// retryAt is set when another request holds the ID's pending claim
	// (its apply is in flight, or it died mid-apply): nothing was applied,
	// and the sender must retry after this time.
	retryAt time.Time
}

// accept runs apply once per (scope, id), acknowledging only what was
// applied: it takes the ID's pending claim (ddbstore.BeginApply, held by
// this request for ApplyLease), applies, and records the ID as done
// (CompleteApply) only after the effect. If applying fails it abandons the
// claim so the retry applies at once; if this invocation dies mid-apply the
// claim lapses after ApplyLease. A repeat while the claim stands is told to
// retry (retryAt), never answered as a duplicate. Every apply is itself
// idempotent (SQS deduplication IDs, content-hashed config),
// so an apply taken over after a lapse cannot apply twice.
func (h *Handler) accept(ctx context.Context, req events.APIGatewayProxyRequest, scope, id string, apply func(context.Context) error) (accepted, error) {
	holder := req.RequestContext.RequestID
	if holder == "" {
		holder = rand.Text()
	}
	claim, err := h.deps.Store.BeginApply(ctx, scope, id, holder, h.deps.Now(), h.cfg.ApplyLease)
	if err != nil {
		return accepted{}, err
	}
	switch claim.State {
	case ddbstore.KeyDone:
		return accepted{duplicate: true}, nil
	case ddbstore.KeyPending:
		return accepted{retryAt: claim.Until}, nil
	}
	if err := apply(ctx); err != nil {
		// Abandon even if the request's context is done: a claim left
		// behind makes the sender wait for it to lapse.
		if rerr := h.deps.Store.AbandonApply(context.WithoutCancel(ctx), scope, id, holder); rerr != nil {
			return accepted{}, errors.Join(err, fmt.Errorf("abandon idempotency key: %w", rerr))
		}
		return accepted{}, err
	}
	// Recorded even if the request's context is done: the effect happened.
	if err := h.deps.Store.CompleteApply(context.WithoutCancel(ctx), scope, id, holder, h.deps.Now(), h.cfg.IdempotencyTTL); err != nil {
		// The claim stays pending and lapses; the retry re-applies, which
		// the apply's own idempotency absorbs.
		return accepted{}, fmt.Errorf("record applied: %w", err)
	}
	return accepted{}, nil
}

// inFlight answers a repeat of a message whose apply another request holds:
// 409 Conflict with Retry-After (whole seconds, at least 1), as the IETF
// Idempotency-Key header draft answers a request retried while the original
// is still being processed.
func (h *Handler) inFlight(kind, id string, retryAt time.Time) events.APIGatewayProxyResponse {
	secs := max(1, int(math.Ceil(retryAt.Sub(h.deps.Now()).Seconds())))
	resp := errorResponse(http.StatusConflict, v1.ErrorResponse{
		Message: fmt.Sprintf("%s %s is being applied by another request; retry after %d s", kind, id, secs),
	})
	resp.Headers["Retry-After"] = strconv.Itoa(secs)
	return resp
}

// enqueue sends a message to the cluster's message group, as a claim check
// when it is too large for the queue.
func (h *Handler) enqueue(kind, id string, data []byte) func(context.Context) error {
	return func(ctx context.Context) error {
		m := queue.Message{GroupID: h.cfg.Cluster, DeduplicationID: kind + "-" + id, Kind: kind, Body: data}
		err := h.deps.Queue.Send(ctx, m)
		if !errors.Is(err, queue.ErrTooLarge) {
			return err
		}
		ref := kind + "-" + id
		if err := h.deps.Store.PutPayload(ctx, ref, data, h.deps.Now(), h.cfg.PayloadTTL); err != nil {
			return fmt.Errorf("store oversized message: %w", err)
		}
		m.Body, m.PayloadRef = nil, ref
		return h.deps.Queue.Send(ctx, m)
	}
}

func (h *Handler) postPodBatch(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	data, err := apigw.Body(req)
	if err != nil {
		return rejected(err)
	}
	b, warnings, err := v1.DecodePodBatch(data)
	if err != nil {
		return rejected(err)
	}
	if err := h.checkEnvelope(req, v1.KindPodBatch, b.ID, b.Cluster); err != nil {
		return rejected(err)
	}
	h.logWarnings(ctx, v1.KindPodBatch, b.ID, warnings)
	acc, err := h.accept(ctx, req, ddbstore.ScopeBatch, b.ID, h.enqueue(v1.KindPodBatch, b.ID, data))
	if err != nil {
		return h.failed(ctx, "accept pod batch "+b.ID, err)
	}
	if !acc.retryAt.IsZero() {
		return h.inFlight(v1.KindPodBatch, b.ID, acc.retryAt)
	}
	answer := queued(b.ID)
	if acc.duplicate {
		if stored, found, err := h.deps.Store.BatchResult(ctx, b.ID, h.deps.Now()); err != nil {
			return h.failed(ctx, "read batch "+b.ID, err)
		} else if found {
			answer = stored
		}
		answer.Duplicate = true
	}
	return apigw.JSON(http.StatusAccepted, answer)
}

func queued(id string) v1.PodBatchResult {
	return v1.PodBatchResult{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatchResult},
		BatchID:  id,
		State:    v1.BatchQueued,
	}
}

func (h *Handler) getPodBatch(ctx context.Context, id string) events.APIGatewayProxyResponse {
	if !idPattern.MatchString(id) {
		return rejected(&v1.ValidationError{Kind: v1.KindPodBatch, Name: id, Fields: []v1.FieldError{{Path: "id", Message: "must be 1 to 80 letters, digits, '-' or '_'"}}})
	}
	now := h.deps.Now()
	stored, found, err := h.deps.Store.BatchResult(ctx, id, now)
	if err != nil {
		return h.failed(ctx, "read batch "+id, err)
	}
	if found {
		stored.Duplicate = false
		return apigw.JSON(http.StatusOK, stored)
	}
	accepted, err := h.deps.Store.HasIdempotencyKey(ctx, ddbstore.ScopeBatch, id, now)
	if err != nil {
		return h.failed(ctx, "read batch "+id, err)
	}
	if !accepted {
		return errorResponse(http.StatusNotFound, v1.ErrorResponse{Message: fmt.Sprintf("no pod batch %q", id)})
	}
	return apigw.JSON(http.StatusOK, queued(id))
}

func (h *Handler) postConfig(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	data, err := apigw.Body(req)
	if err != nil {
		return rejected(err)
	}
	c, warnings, err := v1.DecodeClusterConfig(data)
	if err != nil {
		return rejected(err)
	}
	if err := h.checkEnvelope(req, v1.KindClusterConfig, c.ID, c.Cluster); err != nil {
		return rejected(err)
	}
	h.logWarnings(ctx, v1.KindClusterConfig, c.ID, warnings)
	acc, err := h.accept(ctx, req, ddbstore.ScopeConfig, c.ID, func(ctx context.Context) error {
		return h.putConfig(ctx, ddbstore.Config{NodePools: c.NodePools, NodeClasses: c.EC2NodeClasses,
			CreatedAt: c.CreatedAt.Time, Generation: c.Generation})
	})
	if err != nil {
		return h.failed(ctx, "store config "+c.ID, err)
	}
	return h.receipt(v1.KindClusterConfig, c.ID, acc)
}

// putConfig replaces the stored configuration, re-reading its version when
// another writer got there first. The configuration is one item, so it is
// replaced whole or not at all. A configuration older than the stored one
// is done without writing: the contract keeps the newest
// (v1.ClusterConfig.CreatedAt), so a delayed retry of an old config never
// brings back a NodePool deleted since.
func (h *Handler) putConfig(ctx context.Context, cfg ddbstore.Config) error {
	for range configAttempts {
		var version int64
		cur, err := h.deps.Store.GetConfig(ctx)
		switch {
		case err == nil:
			version = cur.Version
		case !errors.Is(err, ddbstore.ErrNotFound):
			return err
		}
		_, err = h.deps.Store.PutConfig(ctx, cfg, version)
		if errors.Is(err, ddbstore.ErrSuperseded) {
			h.deps.Log.InfoContext(ctx, "config older than the stored one; kept the stored one", "reason", err)
			return nil
		}
		var conflict *ddbstore.ConflictError
		if errors.As(err, &conflict) {
			continue
		}
		return err
	}
	return fmt.Errorf("put config: %d attempts lost to concurrent writers", configAttempts)
}

func (h *Handler) postRegistrations(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	data, err := apigw.Body(req)
	if err != nil {
		return rejected(err)
	}
	r, warnings, err := v1.DecodeNodeRegistrations(data)
	if err != nil {
		return rejected(err)
	}
	if err := h.checkEnvelope(req, v1.KindNodeRegistrations, r.ID, r.Cluster); err != nil {
		return rejected(err)
	}
	h.logWarnings(ctx, v1.KindNodeRegistrations, r.ID, warnings)
	acc, err := h.accept(ctx, req, ddbstore.ScopeRegistrations, r.ID, h.enqueue(v1.KindNodeRegistrations, r.ID, data))
	if err != nil {
		return h.failed(ctx, "accept registrations "+r.ID, err)
	}
	return h.receipt(v1.KindNodeRegistrations, r.ID, acc)
}

func (h *Handler) postSnapshot(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	data, err := apigw.Body(req)
	if err != nil {
		return rejected(err)
	}
	s, warnings, err := v1.DecodeClusterSnapshot(data)
	if err != nil {
		return rejected(err)
	}
	if err := h.checkEnvelope(req, v1.KindClusterSnapshot, s.ID, s.Cluster); err != nil {
		return rejected(err)
	}
	h.logWarnings(ctx, v1.KindClusterSnapshot, s.ID, warnings)
	// No idempotency key (accept): storing a part again rewrites the same
	// blob and leaves the pointer at the newest complete snapshot
	// (ddbstore.PutSnapshotPart), so a repeat is applied again, harmlessly,
	// and answered as accepted, never as a duplicate. The key's two writes
	// would be most of a post's.
	res, err := h.deps.Store.PutSnapshotPart(ctx, s, h.deps.Now())
	if err != nil {
		return h.refusedOrFailed(ctx, "store snapshot part "+s.ID, err)
	}
	h.deps.Log.DebugContext(ctx, "snapshot part stored", "snapshot", s.SnapshotID, "part", s.Part,
		"received", res.Received, "parts", res.Parts, "current", res.Current)
	return h.receipt(v1.KindClusterSnapshot, s.ID, accepted{})
}

// receipt answers an accepted message: 202 Receipt, or 409 while another
// request applies it.
func (h *Handler) receipt(kind, id string, acc accepted) events.APIGatewayProxyResponse {
	if !acc.retryAt.IsZero() {
		return h.inFlight(kind, id, acc.retryAt)
	}
	r := v1.Receipt{TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindReceipt}, ID: id, Duplicate: acc.duplicate}
	return apigw.JSON(http.StatusAccepted, r)
}

// getNodeClaims answers the cluster's NodeClaims, a page at a time when the
// request asks for pages (v1 contract, Paging).
func (h *Handler) getNodeClaims(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	claims, cont, err := listPage(ctx, req, v1.KindNodeClaim, h.deps.Store.ListNodeClaims, h.deps.Store.ListNodeClaimsPage,
		func(c v1.NodeClaim) string { return c.Name })
	if err != nil {
		return h.refusedOrFailed(ctx, "list nodeclaims", err)
	}
	list := v1.NodeClaimList{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.Group + "/v1", Kind: v1.KindNodeClaim + "List"},
		ListMeta: metav1.ListMeta{Continue: cont},
		Items:    claims,
	}
	return apigw.JSON(http.StatusOK, list)
}

// getNodeClasses answers every recorded EC2NodeClass resolution (see
// v1.NodeClassStatusList), a page at a time when asked.
func (h *Handler) getNodeClasses(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	recs, cont, err := listPage(ctx, req, v1.KindNodeClassStatuses, h.deps.Store.ListNodeClassStatuses, h.deps.Store.ListNodeClassStatusesPage,
		func(r v1.NodeClassStatus) string { return r.Name })
	if err != nil {
		return h.refusedOrFailed(ctx, "list nodeclass status", err)
	}
	list := v1.NodeClassStatusList{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindNodeClassStatuses},
		ListMeta: metav1.ListMeta{Continue: cont},
		Items:    recs,
	}
	return apigw.JSON(http.StatusOK, list)
}

// listEnvelope is room left in a list answer for everything but its items
// (apiVersion, kind, the continue token, brackets).
const listEnvelope = 4 << 10

// listPage reads the items of a paged list route (v1 contract, Paging):
// every item (all) when the request names no limit, else the page after the
// request's continue token (page), cut further so that the items encode to
// at most maxResponseBytes. It returns the items (never nil), the next
// page's token ("" for the last page), and a *v1.ValidationError for a bad
// limit or token, or an error when everything does not fit one answer.
func listPage[T any](ctx context.Context, req events.APIGatewayProxyRequest, kind string, all func(context.Context) ([]T, error),
	page func(context.Context, string, int) ([]T, bool, error), name func(T) string) ([]T, string, error) {
	limit, after, err := pageRequest(req, kind)
	if err != nil {
		return nil, "", err
	}
	var (
		items []T
		more  bool
	)
	if limit == 0 {
		items, err = all(ctx)
	} else {
		items, more, err = page(ctx, after, limit)
	}
	if err != nil {
		return nil, "", err
	}
	size := listEnvelope
	for i, it := range items {
		data, err := json.Marshal(it)
		if err != nil {
			return nil, "", fmt.Errorf("encode %s: %w", name(it), err)
		}
		size += len(data) + 1
		if size <= maxResponseBytes {
			continue
		}
		if limit == 0 || i == 0 {
			return nil, "", fmt.Errorf("%d items encode to more than a Lambda response carries (%d bytes); ask for pages (%s)", len(items), maxResponseBytes, v1.QueryLimit)
		}
		items, more = items[:i], true
		break
	}
	if items == nil {
		items = []T{}
	}
	if !more || len(items) == 0 {
		return items, "", nil
	}
	return items, base64.RawURLEncoding.EncodeToString([]byte(name(items[len(items)-1]))), nil
}

// pageRequest reads a paged GET's limit (0 when absent: no paging) and the
// name its continue token resumes after.
func pageRequest(req events.APIGatewayProxyRequest, kind string) (int, string, error) {
	var fields []v1.FieldError
	limit := 0
	if raw, ok := req.QueryStringParameters[v1.QueryLimit]; ok {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > v1.MaxListLimit {
			fields = append(fields, v1.FieldError{Path: "query " + v1.QueryLimit, Message: fmt.Sprintf("must be a whole number from 1 to %d, got %q", v1.MaxListLimit, raw)})
		}
		limit = n
	}
	var after string
	if tok := req.QueryStringParameters[v1.QueryContinue]; tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		switch {
		case err != nil || len(raw) == 0:
			fields = append(fields, v1.FieldError{Path: "query " + v1.QueryContinue, Message: "not a token this API gave"})
		case limit == 0:
			fields = append(fields, v1.FieldError{Path: "query " + v1.QueryContinue, Message: "requires " + v1.QueryLimit})
		}
		after = string(raw)
	}
	if len(fields) > 0 {
		return 0, "", &v1.ValidationError{Kind: kind + "List", Fields: fields}
	}
	return limit, after, nil
}

// refusedOrFailed answers an error met after decoding: 400 with the field
// paths for a request found invalid then (a bad page token, a snapshot part
// that disagrees with its siblings), else the API's own failure.
func (h *Handler) refusedOrFailed(ctx context.Context, what string, err error) events.APIGatewayProxyResponse {
	var invalid *v1.ValidationError
	if errors.As(err, &invalid) {
		return rejected(err)
	}
	return h.failed(ctx, what, err)
}

// getEvents answers the newest unexpired event records (see v1.EventList):
// at most v1.MaxEventsPerList, and no more than fit maxResponseBytes, since
// one record may hold up to ddbstore.MaxBodyBytes.
func (h *Handler) getEvents(ctx context.Context) events.APIGatewayProxyResponse {
	records, err := h.deps.Store.ListEvents(ctx, h.deps.Now())
	if err != nil {
		return h.failed(ctx, "list events", err)
	}
	list, err := newestEvents(ddbstore.Expand(records), v1.MaxEventsPerList, maxResponseBytes-eventListEnvelope)
	if err != nil {
		return h.failed(ctx, "list events", err)
	}
	return apigw.JSON(http.StatusOK, list)
}

// getSync answers GET v1.RouteSync (see v1.Sync): every NodeClassStatus,
// every NodeClaim and the EventList GET v1.RouteEvents answers, read
// concurrently. The NodeClaim generation is read first; when the request's
// v1.QueryNodeClaimsGeneration is still that generation the NodeClaims are
// not read (NodeClaimsUnchanged), else they are listed after it, so they
// hold every write the answered generation counts. The parts are placed in
// that order while their encodings fit maxResponseBytes; a part that does
// not is left empty and its route deferred, so the answer never holds a
// part cut short.
func (h *Handler) getSync(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	known, err := knownGeneration(req)
	if err != nil {
		return rejected(err)
	}
	gen, err := h.deps.Store.NodeClaimGeneration(ctx)
	if err != nil {
		return h.failed(ctx, "sync", err)
	}
	unchanged := known != 0 && known == gen
	var (
		classes []v1.NodeClassStatus
		claims  []v1.NodeClaim
		records []ddbstore.Event
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { classes, err = h.deps.Store.ListNodeClassStatuses(gctx); return err })
	if !unchanged {
		g.Go(func() (err error) { claims, err = h.deps.Store.ListNodeClaims(gctx); return err })
	}
	g.Go(func() (err error) { records, err = h.deps.Store.ListEvents(gctx, h.deps.Now()); return err })
	if err := g.Wait(); err != nil {
		return h.failed(ctx, "sync", err)
	}
	evs, err := newestEvents(ddbstore.Expand(records), v1.MaxEventsPerList, maxResponseBytes-eventListEnvelope)
	if err != nil {
		return h.failed(ctx, "sync", err)
	}
	out := v1.Sync{TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindSync},
		NodeClasses: []v1.NodeClassStatus{}, NodeClaims: []v1.NodeClaim{},
		Events:               v1.EventList{TypeMeta: evs.TypeMeta, Items: []v1.EventRecord{}},
		NodeClaimsGeneration: gen, NodeClaimsUnchanged: unchanged}
	budget := maxResponseBytes - syncEnvelope
	fits := func(route string, part any) (bool, error) {
		data, err := json.Marshal(part)
		if err != nil {
			return false, fmt.Errorf("encode %s: %w", route, err)
		}
		if len(data) > budget {
			out.Deferred = append(out.Deferred, route)
			return false, nil
		}
		budget -= len(data)
		return true, nil
	}
	for _, p := range []struct {
		route string
		part  any
		keep  func()
	}{
		{v1.RouteNodeClasses, classes, func() { out.NodeClasses = append(out.NodeClasses, classes...) }},
		{v1.RouteNodeClaims, claims, func() { out.NodeClaims = append(out.NodeClaims, claims...) }},
		{v1.RouteEvents, evs, func() { out.Events = evs }},
	} {
		ok, err := fits(p.route, p.part)
		if err != nil {
			return h.failed(ctx, "sync", err)
		}
		if ok {
			p.keep()
		}
	}
	return apigw.JSON(http.StatusOK, out)
}

// knownGeneration returns the request's v1.QueryNodeClaimsGeneration, 0
// when absent, and a *v1.ValidationError naming the parameter when it is
// not a whole number of at least 1.
func knownGeneration(req events.APIGatewayProxyRequest) (int64, error) {
	raw, ok := req.QueryStringParameters[v1.QueryNodeClaimsGeneration]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 {
		return 0, &v1.ValidationError{Kind: v1.KindSync, Fields: []v1.FieldError{{Path: "query " + v1.QueryNodeClaimsGeneration,
			Message: fmt.Sprintf("must be a whole number of at least 1 (a Sync's nodeClaimsGeneration), got %q", raw)}}}
	}
	return n, nil
}

// syncEnvelope is room left in a Sync answer for everything but its parts
// (apiVersion, kind, field names, the deferred routes).
const syncEnvelope = 1 << 10

// getMetrics answers every stored metric series (see v1.MetricList). The
// series are few (one per metric and label set: NodePools x reasons x
// capacity types), far below v1.MaxMessageBytes.
func (h *Handler) getMetrics(ctx context.Context) events.APIGatewayProxyResponse {
	items, err := h.deps.Store.ListMetrics(ctx)
	if err != nil {
		return h.failed(ctx, "list metrics", err)
	}
	return apigw.JSON(http.StatusOK, v1.MetricList{TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindMetricList}, Items: items})
}

// eventListEnvelope is room left in an EventList answer for everything but
// its items (apiVersion, kind, omitted, brackets).
const eventListEnvelope = 1 << 10

// newestEvents returns an EventList of the newest records (records are
// oldest first, as ddbstore.ListEvents returns them), at most maxItems of
// them whose items encode to at most maxBytes, oldest first; Omitted
// counts the rest.
func newestEvents(records []ddbstore.Event, maxItems, maxBytes int) (v1.EventList, error) {
	first, size := len(records), 0
	for first > 0 && len(records)-first < maxItems {
		data, err := json.Marshal(eventRecord(records[first-1]))
		if err != nil {
			return v1.EventList{}, fmt.Errorf("encode event %s: %w", records[first-1].ID, err)
		}
		if size+len(data)+1 > maxBytes {
			break
		}
		size += len(data) + 1 // and a comma
		first--
	}
	list := v1.EventList{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindEventList},
		Items:    make([]v1.EventRecord, 0, len(records)-first),
		Omitted:  first,
	}
	for _, e := range records[first:] {
		list.Items = append(list.Items, eventRecord(e))
	}
	return list, nil
}

func eventRecord(e ddbstore.Event) v1.EventRecord {
	return v1.EventRecord{
		ID: e.ID, Time: metav1.NewTime(e.Time), Type: e.Type, Reason: e.Reason, Message: e.Message,
		NodeClaim: e.NodeClaim, Node: e.Node, Pod: e.Pod, PodUID: types.UID(e.PodUID), NodePool: e.NodePool,
		Condition: e.Condition,
	}
}

func (h *Handler) logWarnings(ctx context.Context, kind, id string, warnings []v1.FieldError) {
	if len(warnings) == 0 {
		return
	}
	msgs := make([]string, len(warnings))
	for i, w := range warnings {
		msgs[i] = w.Error()
	}
	h.deps.Log.InfoContext(ctx, "message has fields this API does not know", "kind", kind, "id", id, "warnings", msgs)
}

// rejected answers a decode or validation error with its status (413 or
// 400) and field paths.
func rejected(err error) events.APIGatewayProxyResponse {
	return errorResponse(v1.HTTPStatus(err), v1.NewErrorResponse(err))
}

// failed answers the API's own failure: 503 when AWS throttled it, else
// 500; both tell the sender to retry.
func (h *Handler) failed(ctx context.Context, what string, err error) events.APIGatewayProxyResponse {
	h.deps.Log.ErrorContext(ctx, what, "error", err)
	status := http.StatusInternalServerError
	if awserr.Classify(err) == awserr.Throttled {
		status = http.StatusServiceUnavailable
	}
	return errorResponse(status, v1.ErrorResponse{Message: what + ": " + err.Error()})
}

func errorResponse(status int, e v1.ErrorResponse) events.APIGatewayProxyResponse {
	return apigw.JSON(status, e)
}
