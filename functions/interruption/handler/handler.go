// Package handler is the interruption Lambda: it consumes the interruption
// queue, to which EventBridge rules deliver EC2 Spot interruption
// warnings, rebalance recommendations, instance state changes, AWS Health
// scheduled changes and capacity-reservation interruption warnings, and
// turns them into interruption executions (Step Functions,
// statemachines/interruption.asl.json), unavailable-offering marks and
// event records, as Karpenter's interruption controller does (see
// Handler). The Lambda's main and the local stack (local/stack) both wire
// it with New.
package handler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"golang.org/x/sync/errgroup"

	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/interruption"
	"github.com/nodewright/nodewright/shared/workflow"
)

// Config is the interruption Lambda's configuration.
type Config struct {
	// Cluster is the EKS cluster name (ddbstore's key prefix).
	Cluster string
	// Table is the DynamoDB table (ddbstore).
	Table string
	// StateMachineARN is the interruption state machine (STANDARD).
	StateMachineARN string
	// IdempotencyTTL is how long a handled event id is remembered; it must
	// outlast every redelivery of the event (the queue's retention, 5
	// minutes in Karpenter's reference queue). Default 24 h.
	IdempotencyTTL time.Duration
	// EventTTL is how long an event record waits for the forwarder.
	// Default ddbstore.EventTTL.
	EventTTL time.Duration
	// Parallelism is how many records of a batch are handled at once
	// (Karpenter handles 10 messages at once). Default 10.
	Parallelism int
	// LogLevel is the slog level.
	LogLevel slog.Level
}

// LoadConfig reads CLUSTER_NAME, TABLE_NAME and STATE_MACHINE_ARN
// (required), IDEMPOTENCY_TTL and EVENT_TTL (Go durations), PARALLELISM and
// LOG_LEVEL. It reports every problem at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	e := lambdakit.NewEnv(getenv)
	c := Config{
		Cluster:         e.String("CLUSTER_NAME"),
		Table:           e.String("TABLE_NAME"),
		StateMachineARN: e.String("STATE_MACHINE_ARN"),
		IdempotencyTTL:  e.Duration("IDEMPOTENCY_TTL", 24*time.Hour, 10*time.Minute),
		EventTTL:        e.Duration("EVENT_TTL", ddbstore.EventTTL, time.Minute),
		Parallelism:     e.Int("PARALLELISM", 10, 1, 100),
		LogLevel:        e.Level("LOG_LEVEL"),
	}
	return c, e.Err()
}

// store is what the handler reads and writes in DynamoDB (*ddbstore.Store).
type store interface {
	FindByInstanceID(ctx context.Context, instanceID string) (v1.NodeClaim, error)
	HasIdempotencyKey(ctx context.Context, scope, key string, now time.Time) (bool, error)
	ClaimIdempotencyKey(ctx context.Context, scope, key string, now time.Time, ttl time.Duration) (bool, error)
	MarkUnavailable(ctx context.Context, offering catalog.OfferingKey, reason string, now time.Time, ttl time.Duration) error
	PutEvent(ctx context.Context, e ddbstore.Event, now time.Time, ttl time.Duration) error
}

// starter starts interruption executions (*sfnstarter.Starter); a name
// already started is a success.
type starter interface {
	Start(ctx context.Context, name string, input any) (sfnstarter.Execution, error)
}

var (
	_ store   = (*ddbstore.Store)(nil)
	_ starter = (*sfnstarter.Starter)(nil)
)

// Handler consumes the interruption queue: EventBridge events for EC2 Spot
// interruption warnings, rebalance recommendations, instance state changes,
// AWS Health events and capacity-reservation interruption warnings
// (shared/interruption), delivered by an SQS event source mapping with
// ReportBatchItemFailures on a standard queue.
//
// Per record, following Karpenter's interruption controller
// (karpenter-spec.md section 8.2) and STYLE rule 9:
//   - a body that does not parse, or names an event type nodewright does
//     not handle, is logged, counted and acknowledged, never retried;
//   - an event that calls for nothing (a no-op kind, or no instance that
//     maps to one of the cluster's NodeClaims) is acknowledged without a
//     write;
//   - an event already handled (its id is recorded) is acknowledged as a
//     duplicate;
//   - otherwise, per NodeClaim: mark the offering unavailable (Spot
//     interruption; the NodeClaim's capacity reservation, by its ID, for a
//     capacity-reservation interruption), start the interruption execution unless the NodeClaim
//     is already being deleted, and record the Kubernetes events; then
//     record the event id. Every effect is idempotent (fixed execution
//     names, overwriting writes keyed by the event), so the id is recorded
//     only after all of them: a failure or a timeout part-way leaves the
//     message to be redelivered and finished, never skipped.
//
// A record whose effects fail is reported in BatchItemFailures, so SQS
// redelivers it alone; the queue's redrive policy moves it to the
// dead-letter queue after a few receives, and its retention bounds it in
// any case.
type Handler struct {
	cfg     Config
	store   store
	starter starter
	log     *slog.Logger
	now     func() time.Time
	metrics *decisionmetrics.Recorder
}

// Clients are the API clients New wires the handler with.
type Clients struct {
	DynamoDB ddbstore.API
	// SFN starts executions of Config.StateMachineARN.
	SFN sfnstarter.API
	// Metrics receives the decision metrics as CloudWatch EMF lines (the
	// Lambda's stdout); nil stores them without logging them.
	Metrics io.Writer
}

// New wires the handler the way the Lambda runs it: the DynamoDB store
// (NodeClaims by instance, idempotency keys, unavailable offerings, event
// records) and the Step Functions starter of cfg.StateMachineARN. now is
// the clock (time.Now in main). It fails on an incomplete cfg.
func New(cfg Config, c Clients, log *slog.Logger, now func() time.Time) (*Handler, error) {
	store, err := ddbstore.New(c.DynamoDB, cfg.Table, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("interruption: %w", err)
	}
	starter, err := sfnstarter.New(c.SFN, cfg.StateMachineARN)
	if err != nil {
		return nil, fmt.Errorf("interruption: %w", err)
	}
	if cfg.Parallelism < 1 {
		return nil, errors.New("interruption: Parallelism must be at least 1")
	}
	return &Handler{cfg: cfg, store: store, starter: starter, log: log, now: now,
		metrics: decisionmetrics.New(store, c.Metrics, log, cfg.Cluster, now)}, nil
}

// outcome is what became of one record.
type outcome string

const (
	outcomeActed     outcome = "acted"
	outcomeIgnored   outcome = "ignored"
	outcomeDuplicate outcome = "duplicate"
	outcomeDropped   outcome = "dropped"
	outcomeFailed    outcome = "failed"
)

// summary counts a batch's records, by outcome and by kind (the kind of a
// dropped record is unknown).
type summary struct {
	Outcomes map[outcome]int
	Kinds    map[interruption.Kind]int
}

// Handle handles one batch and returns the records to redeliver. It never
// returns an error: a failed record is reported alone, so the others are
// not redelivered with it.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp, sum := h.handle(ctx, ev)
	// The queue carries every EC2 state change of the account: a batch in
	// which nothing was acted on, dropped or failed (only other instances'
	// events, or duplicates) is logged at debug. Each action has its own
	// "interruption handled" line at info.
	level := slog.LevelDebug
	if sum.Outcomes[outcomeActed]+sum.Outcomes[outcomeDropped]+sum.Outcomes[outcomeFailed] > 0 {
		level = slog.LevelInfo
	}
	h.log.Log(ctx, level, "batch handled", "records", len(ev.Records),
		"acted", sum.Outcomes[outcomeActed], "ignored", sum.Outcomes[outcomeIgnored],
		"duplicate", sum.Outcomes[outcomeDuplicate], "dropped", sum.Outcomes[outcomeDropped],
		"failed", sum.Outcomes[outcomeFailed], "kinds", sum.Kinds)
	return resp, nil
}

func (h *Handler) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, summary) {
	type result struct {
		kind    interruption.Kind
		outcome outcome
	}
	results := make([]result, len(ev.Records))
	var g errgroup.Group
	g.SetLimit(h.cfg.Parallelism)
	for i, rec := range ev.Records {
		g.Go(func() error {
			kind, out := h.handleRecord(ctx, rec)
			results[i] = result{kind, out}
			return nil
		})
	}
	_ = g.Wait() // the functions return nil: failures are per record

	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	sum := summary{Outcomes: map[outcome]int{}, Kinds: map[interruption.Kind]int{}}
	for i, r := range results {
		sum.Outcomes[r.outcome]++
		if r.kind != "" {
			sum.Kinds[r.kind]++
		}
		if r.outcome == outcomeFailed {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	return resp, sum
}

// handleRecord handles one record and logs what went wrong, if anything.
func (h *Handler) handleRecord(ctx context.Context, rec events.SQSMessage) (interruption.Kind, outcome) {
	msg, err := interruption.Parse([]byte(rec.Body))
	if err != nil {
		h.log.WarnContext(ctx, "dropping unparseable message", "message-id", rec.MessageId,
			"unknown-type", errors.Is(err, interruption.ErrUnknownEvent), "error", err)
		return "", outcomeDropped
	}
	out, err := h.handleMessage(ctx, msg)
	if err != nil {
		h.log.ErrorContext(ctx, "interruption not handled; the message is redelivered", "message-id", rec.MessageId,
			"event-id", msg.EventID, "kind", msg.Kind, "error", err)
		return msg.Kind, outcomeFailed
	}
	return msg.Kind, out
}

// target is a NodeClaim of the cluster that an event names.
type target struct {
	instanceID string
	claim      v1.NodeClaim
}

func (h *Handler) handleMessage(ctx context.Context, msg interruption.Message) (outcome, error) {
	handling := msg.Kind.Handling()
	if handling.Action == interruption.ActionNone || len(msg.InstanceIDs) == 0 {
		return outcomeIgnored, nil
	}
	// Every cluster's queue receives every event of the account and
	// region: most name instances of other clusters, and cost one index
	// read each, no write.
	var targets []target
	for _, id := range msg.InstanceIDs {
		claim, err := h.store.FindByInstanceID(ctx, id)
		if errors.Is(err, ddbstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", err
		}
		targets = append(targets, target{instanceID: id, claim: claim})
	}
	if len(targets) == 0 {
		return outcomeIgnored, nil
	}
	now := h.now()
	seen, err := h.store.HasIdempotencyKey(ctx, ddbstore.ScopeInterruption, msg.EventID, now)
	if err != nil {
		return "", err
	}
	if seen {
		return outcomeDuplicate, nil
	}
	// Counted once per event that names this cluster's instances (the
	// queue also carries every other cluster's events of the account).
	h.metrics.InterruptionReceived(ctx, string(msg.Kind))
	for _, t := range targets {
		if err := h.act(ctx, msg, handling, t, now); err != nil {
			return "", fmt.Errorf("nodeclaim %s: %w", t.claim.Name, err)
		}
		h.log.InfoContext(ctx, "interruption handled", "event-id", msg.EventID, "kind", msg.Kind,
			"action", handling.Action, "nodeclaim", t.claim.Name, "instance-id", t.instanceID)
	}
	// A concurrent duplicate may have recorded the id first; both did the
	// same idempotent work, so either answer is success.
	if _, err := h.store.ClaimIdempotencyKey(ctx, ddbstore.ScopeInterruption, msg.EventID, now, h.cfg.IdempotencyTTL); err != nil {
		return "", err
	}
	return outcomeActed, nil
}

// act applies handling to one NodeClaim: mark, start, record, in that
// order, so the offering is avoided before any replacement is launched.
func (h *Handler) act(ctx context.Context, msg interruption.Message, handling interruption.Handling, t target, now time.Time) error {
	claim := t.claim
	if key, ok := unavailableOffering(handling.Mark, claim); ok {
		if err := h.store.MarkUnavailable(ctx, key, string(msg.Kind), now, catalog.UnavailableOfferingsTTL); err != nil {
			return err
		}
	}
	notices := []interruption.Notice{handling.Notice}
	// Karpenter skips a NodeClaim already being deleted: its termination
	// is under way.
	if handling.Action == interruption.ActionCordonAndDrain && claim.DeletionTimestamp == nil {
		in := workflow.InterruptionInput{
			NodeClaim:  claim.Name,
			Node:       claim.Status.NodeName,
			InstanceID: t.instanceID,
			Reason:     string(msg.Kind),
			EventID:    msg.EventID,
			Deadline:   msg.Deadline.UTC().Truncate(time.Second),
			EventTime:  msg.Time.UTC(),
		}
		exe, err := h.starter.Start(ctx, interruption.ExecutionName(claim.Name, msg.EventID), in)
		if err != nil {
			return err
		}
		if !exe.AlreadyExisted {
			h.metrics.NodeClaimDisrupted(ctx, string(msg.Kind), claim.Labels[v1.LabelNodePool], claim.Labels[v1.LabelCapacityType])
		}
		notices = append(notices, interruption.TerminatingNotice())
	}
	for _, n := range notices {
		e := ddbstore.Event{
			ID:   eventRecordID(msg.EventID, claim.Name, n.Reason),
			Time: msg.Time, Type: n.Type, Reason: n.Reason, Message: n.Message,
			NodeClaim: claim.Name, Node: claim.Status.NodeName,
		}
		if err := h.store.PutEvent(ctx, e, now, h.cfg.EventTTL); err != nil {
			return err
		}
	}
	return nil
}

// unavailableOffering is the offering to mark for mark, read from the
// NodeClaim's labels as Karpenter reads them: for a Spot interruption the
// (spot, instance type, zone) offering, no mark without both; for a
// capacity-reservation interruption the reservation the NodeClaim was
// launched into (karpenter.k8s.aws/capacity-reservation-id), and only that
// reservation's offerings (catalog.OfferingKey.ReservationID), no mark
// without the label (aws: pkg/controllers/interruption marks the
// reservation by the NodeClaim's reservation ID).
func unavailableOffering(mark interruption.Mark, claim v1.NodeClaim) (catalog.OfferingKey, bool) {
	instanceType, zone := claim.Labels[v1.LabelInstanceType], claim.Labels[v1.LabelTopologyZone]
	switch mark {
	case interruption.MarkSpotOffering:
		if instanceType == "" || zone == "" {
			return catalog.OfferingKey{}, false
		}
		return catalog.OfferingKey{CapacityType: v1.CapacityTypeSpot, InstanceType: instanceType, Zone: zone}, true
	case interruption.MarkReservation:
		id := claim.Labels[v1.LabelCapacityReservationID]
		if id == "" {
			return catalog.OfferingKey{}, false
		}
		return catalog.OfferingKey{CapacityType: v1.CapacityTypeReserved, InstanceType: instanceType, Zone: zone, ReservationID: id}, true
	}
	return catalog.OfferingKey{}, false
}

// eventRecordID derives an event record's id from what it records, so a
// redelivered event rewrites its records instead of adding more.
func eventRecordID(eventID, nodeClaim, reason string) string {
	sum := sha256.Sum256([]byte(eventID + "\x00" + nodeClaim + "\x00" + reason))
	return hex.EncodeToString(sum[:16])
}
