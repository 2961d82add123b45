// Package handler is the instance-status Lambda, invoked by EventBridge
// Scheduler every minute: the DescribeInstanceStatus half of Karpenter's
// interruption handling, which runs whether or not an interruption queue
// exists (karpenter-spec.md section 8.2; aws:
// pkg/controllers/interruption/instancestatus_controller.go). Each run:
//
//  1. lists the cluster's NodeClaims (DynamoDB) that have an instance and
//     are not being deleted;
//  2. reads their status with EC2 DescribeInstanceStatus, 100 instance IDs
//     a call (running instances only; EBS status ignored);
//  3. decides with interruption.DecideStatuses: a status check impaired for
//     120 s or more is handled forcefully (the interruption execution's
//     termination deadline is now: no grace), one of Karpenter's five
//     scheduled events deletes the NodeClaim with its grace;
//  4. per decision, unless the occurrence was handled already, starts the
//     interruption execution (statemachines/interruption.asl.json) with the
//     input and naming scheme of the interruption Lambda, records the
//     TerminatingOnInterruption event for the forwarder, and records the
//     occurrence as handled.
//
// Every effect is idempotent (the execution name and the event record ID
// derive from the occurrence's key), so an overlapping or retried run is
// harmless. The Lambda's main and the local stack both wire it with New.
package handler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/interruption"
	"github.com/nodewright/nodewright/shared/workflow"
)

// Config is the instance-status Lambda's configuration.
type Config struct {
	// Cluster is the EKS cluster name (ddbstore's key prefix).
	Cluster string
	// Table is the DynamoDB table (ddbstore).
	Table string
	// StateMachineARN is the interruption state machine (STANDARD), the
	// one the interruption Lambda starts.
	StateMachineARN string
	// IdempotencyTTL is how long a handled occurrence is remembered.
	// Default 24 h; the execution name dedupes beyond it in any case.
	IdempotencyTTL time.Duration
	// EventTTL is how long an event record waits for the forwarder.
	// Default ddbstore.EventTTL.
	EventTTL time.Duration
	// LogLevel is the slog level.
	LogLevel slog.Level
}

// LoadConfig reads CLUSTER_NAME, TABLE_NAME and STATE_MACHINE_ARN
// (required), IDEMPOTENCY_TTL and EVENT_TTL (Go durations) and LOG_LEVEL.
// It reports every problem at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	e := lambdakit.NewEnv(getenv)
	c := Config{
		Cluster:         e.String("CLUSTER_NAME"),
		Table:           e.String("TABLE_NAME"),
		StateMachineARN: e.String("STATE_MACHINE_ARN"),
		IdempotencyTTL:  e.Duration("IDEMPOTENCY_TTL", 24*time.Hour, 10*time.Minute),
		EventTTL:        e.Duration("EVENT_TTL", ddbstore.EventTTL, time.Minute),
		LogLevel:        e.Level("LOG_LEVEL"),
	}
	return c, e.Err()
}

// EC2API is the EC2 call the handler makes: only
// ec2:DescribeInstanceStatus. *ec2.Client satisfies it.
type EC2API interface {
	DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
}

var _ EC2API = (*ec2.Client)(nil)

// store is what the handler reads and writes in DynamoDB (*ddbstore.Store).
type store interface {
	ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error)
	HasIdempotencyKey(ctx context.Context, scope, key string, now time.Time) (bool, error)
	ClaimIdempotencyKey(ctx context.Context, scope, key string, now time.Time, ttl time.Duration) (bool, error)
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

// IdempotencyScope is the ddbstore idempotency scope of the occurrences the
// poll handled, keyed by interruption.StatusDecision.Key.
const IdempotencyScope = ddbstore.ScopeInstanceStatus

// MaxInstanceIDsPerCall is how many instance IDs one DescribeInstanceStatus
// call names (EC2 accepts at most 100).
const MaxInstanceIDsPerCall = 100

// Clients are the API clients New wires the handler with.
type Clients struct {
	DynamoDB ddbstore.API
	EC2      EC2API
	// SFN starts executions of Config.StateMachineARN.
	SFN sfnstarter.API
}

// Handler runs the instance-status poll. It holds no state between
// invocations.
type Handler struct {
	cfg     Config
	store   store
	ec2     EC2API
	starter starter
	log     *slog.Logger
	now     func() time.Time
}

// New wires the handler the way the Lambda runs it: the DynamoDB store
// (NodeClaims, idempotency keys, event records), EC2, and the Step
// Functions starter of cfg.StateMachineARN. now is the clock (time.Now in
// main). It fails on an incomplete cfg or a missing client.
func New(cfg Config, c Clients, log *slog.Logger, now func() time.Time) (*Handler, error) {
	st, err := ddbstore.New(c.DynamoDB, cfg.Table, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("instancestatus: %w", err)
	}
	// A warm poll re-reads the NodeClaims only after a write.
	st = st.WithNodeClaimCache()
	sf, err := sfnstarter.New(c.SFN, cfg.StateMachineARN)
	if err != nil {
		return nil, fmt.Errorf("instancestatus: %w", err)
	}
	if c.EC2 == nil || log == nil || now == nil {
		return nil, errors.New("instancestatus: the EC2 client, log and now are required")
	}
	if cfg.IdempotencyTTL <= 0 || cfg.EventTTL <= 0 {
		return nil, errors.New("instancestatus: IdempotencyTTL and EventTTL must be positive")
	}
	return &Handler{cfg: cfg, store: st, ec2: c.EC2, starter: sf, log: log, now: now}, nil
}

// Output summarizes one run.
type Output struct {
	// Checked is how many instances were asked about.
	Checked int `json:"checked"`
	// Reported is how many statuses EC2 returned (running instances).
	Reported int `json:"reported"`
	// Decisions are the instances acted on, in decision order.
	Decisions []Decision `json:"decisions"`
}

// Decision is what became of one interruption.StatusDecision.
type Decision struct {
	InstanceID string `json:"instanceID"`
	NodeClaim  string `json:"nodeClaim"`
	// Kind is instance_status, system_status or event_status.
	Kind string `json:"kind"`
	// Key is the occurrence (interruption.StatusDecision.Key).
	Key string `json:"key"`
	// Forceful is true when the execution has no grace.
	Forceful bool `json:"forceful,omitempty"`
	// Execution is the interruption execution's name; empty if none was
	// started.
	Execution string `json:"execution,omitempty"`
	// Duplicate is true when the occurrence was handled by an earlier run.
	Duplicate bool `json:"duplicate,omitempty"`
	// Error is why the decision was not carried out, if it was not.
	Error string `json:"error,omitempty"`
}

// Handle runs one poll. The scheduler's input is ignored. A decision that
// fails does not stop the others; Handle then returns a workflow error
// (Throttled for an EC2 or DynamoDB throttle, else Internal) with
// everything done in Output, and the next minute's run retries it.
func (h *Handler) Handle(ctx context.Context, _ json.RawMessage) (Output, error) {
	out, err := h.poll(ctx)
	if err != nil {
		return out, lambdakit.AsWorkflowError(fmt.Errorf("instance-status poll incomplete (%d checked, %d decisions): %w", out.Checked, len(out.Decisions), err), throttled)
	}
	h.log.InfoContext(ctx, "instance-status poll done", "checked", out.Checked, "reported", out.Reported, "decisions", len(out.Decisions))
	return out, nil
}

// throttled names throttling errors workflow.ErrThrottled.
func throttled(err error) (string, bool) {
	return workflow.ErrThrottled, awserr.Classify(err) == awserr.Throttled
}

func (h *Handler) poll(ctx context.Context) (Output, error) {
	out := Output{Decisions: []Decision{}}
	claims, err := h.store.ListNodeClaims(ctx)
	if err != nil {
		return out, err
	}
	// Karpenter skips a NodeClaim already being deleted: its termination
	// is under way.
	byInstance := map[string]v1.NodeClaim{}
	for _, c := range claims {
		if c.DeletionTimestamp != nil || c.Status.ProviderID == "" {
			continue
		}
		id, err := ddbstore.InstanceIDFromProviderID(c.Status.ProviderID)
		if err != nil {
			continue
		}
		byInstance[id] = c
	}
	ids := make([]string, 0, len(byInstance))
	for id := range byInstance {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out.Checked = len(ids)

	statuses, err := h.describe(ctx, ids)
	if err != nil {
		return out, err
	}
	out.Reported = len(statuses)
	now := h.now()
	var errs []error
	for _, d := range interruption.DecideStatuses(statuses, now) {
		claim, ok := byInstance[d.InstanceID]
		if !ok {
			continue
		}
		res, err := h.act(ctx, d, claim, now)
		if err != nil {
			res.Error = err.Error()
			errs = append(errs, fmt.Errorf("nodeclaim %s: %w", claim.Name, err))
		}
		out.Decisions = append(out.Decisions, res)
		level := slog.LevelInfo
		if err != nil {
			level = slog.LevelError
		}
		h.log.Log(ctx, level, "instance status handled", "instance-id", d.InstanceID, "nodeclaim", claim.Name,
			"kind", d.Kind, "key", d.Key, "forceful", res.Forceful, "execution", res.Execution,
			"duplicate", res.Duplicate, "error", res.Error)
	}
	return out, errors.Join(errs...)
}

// act carries out one decision: start, record, remember, in that order, so
// a failure part-way is finished by the next run.
func (h *Handler) act(ctx context.Context, d interruption.StatusDecision, claim v1.NodeClaim, now time.Time) (Decision, error) {
	handling := d.Kind.Handling()
	res := Decision{InstanceID: d.InstanceID, NodeClaim: claim.Name, Kind: string(d.Kind), Key: d.Key, Forceful: handling.Forceful()}
	seen, err := h.store.HasIdempotencyKey(ctx, IdempotencyScope, d.Key, now)
	if err != nil {
		return res, err
	}
	if seen {
		res.Duplicate = true
		return res, nil
	}
	in := workflow.InterruptionInput{
		NodeClaim:  claim.Name,
		Node:       claim.Status.NodeName,
		InstanceID: d.InstanceID,
		Reason:     string(d.Kind),
		EventID:    d.Key,
	}
	if !d.Since.IsZero() {
		in.EventTime = d.Since.UTC()
	}
	if !d.Deadline.IsZero() {
		in.Deadline = d.Deadline.UTC().Truncate(time.Second)
	}
	name := interruption.ExecutionName(claim.Name, d.Key)
	if _, err := h.starter.Start(ctx, name, in); err != nil {
		return res, err
	}
	res.Execution = name
	n := handling.Notice
	e := ddbstore.Event{
		ID:   eventRecordID(d.Key, claim.Name, n.Reason),
		Time: now, Type: n.Type, Reason: n.Reason, Message: n.Message,
		NodeClaim: claim.Name, Node: claim.Status.NodeName,
	}
	if err := h.store.PutEvent(ctx, e, now, h.cfg.EventTTL); err != nil {
		return res, err
	}
	if _, err := h.store.ClaimIdempotencyKey(ctx, IdempotencyScope, d.Key, now, h.cfg.IdempotencyTTL); err != nil {
		return res, err
	}
	return res, nil
}

// describe reads the status of ids, MaxInstanceIDsPerCall a call. An
// instance EC2 no longer knows fails its whole call
// (InvalidInstanceID.NotFound); the call is repeated once without the
// instances the error names (a NodeClaim whose instance is long gone is the
// garbage collector's).
func (h *Handler) describe(ctx context.Context, ids []string) ([]interruption.InstanceStatus, error) {
	var out []interruption.InstanceStatus
	for chunk := range slices.Chunk(ids, MaxInstanceIDsPerCall) {
		got, err := h.describeChunk(ctx, chunk)
		if code := awserr.Code(err); code == "InvalidInstanceID.NotFound" {
			missing := missingInstances(err)
			rest := slices.DeleteFunc(slices.Clone(chunk), func(id string) bool { return slices.Contains(missing, id) })
			if len(missing) == 0 || len(rest) == len(chunk) {
				return nil, fmt.Errorf("describe instance status: %w", err)
			}
			h.log.InfoContext(ctx, "instances gone from EC2 skipped", "instance-ids", missing)
			got, err = nil, nil
			if len(rest) > 0 {
				got, err = h.describeChunk(ctx, rest)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("describe instance status: %w", err)
		}
		out = append(out, got...)
	}
	return out, nil
}

func (h *Handler) describeChunk(ctx context.Context, ids []string) ([]interruption.InstanceStatus, error) {
	var out []interruption.InstanceStatus
	in := &ec2.DescribeInstanceStatusInput{InstanceIds: ids}
	for {
		resp, err := h.ec2.DescribeInstanceStatus(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, s := range resp.InstanceStatuses {
			out = append(out, fromEC2(s))
		}
		if resp.NextToken == nil || *resp.NextToken == "" {
			return out, nil
		}
		in = &ec2.DescribeInstanceStatusInput{InstanceIds: ids, NextToken: resp.NextToken}
	}
}

// instanceIDPattern matches the instance IDs in an
// InvalidInstanceID.NotFound message ("The instance ID 'i-0123' does not
// exist", "The instance IDs 'i-0123, i-4567' do not exist").
var instanceIDPattern = regexp.MustCompile(`\bi-[0-9a-f]{8,17}\b`)

// missingInstances returns the instance IDs an InvalidInstanceID.NotFound
// error names.
func missingInstances(err error) []string {
	var msg string
	if parts := strings.SplitN(err.Error(), "InvalidInstanceID.NotFound", 2); len(parts) == 2 {
		msg = parts[1]
	}
	return instanceIDPattern.FindAllString(msg, -1)
}

// fromEC2 translates one DescribeInstanceStatus entry. Of each status
// check it reads the "reachability" detail (the only one EC2 reports), or
// the first failed detail.
func fromEC2(s ec2types.InstanceStatus) interruption.InstanceStatus {
	st := interruption.InstanceStatus{InstanceID: deref(s.InstanceId)}
	if s.InstanceStatus != nil {
		st.Instance = check(s.InstanceStatus.Details)
	}
	if s.SystemStatus != nil {
		st.System = check(s.SystemStatus.Details)
	}
	for _, e := range s.Events {
		ev := interruption.ScheduledEvent{ID: deref(e.InstanceEventId), Code: interruption.EventCode(e.Code), Description: deref(e.Description)}
		if e.NotBefore != nil {
			ev.NotBefore = e.NotBefore.UTC()
		}
		st.Events = append(st.Events, ev)
	}
	return st
}

func check(details []ec2types.InstanceStatusDetails) interruption.StatusCheck {
	i := slices.IndexFunc(details, func(d ec2types.InstanceStatusDetails) bool { return d.Name == ec2types.StatusNameReachability })
	if i < 0 {
		i = slices.IndexFunc(details, func(d ec2types.InstanceStatusDetails) bool { return d.Status == ec2types.StatusTypeFailed })
	}
	if i < 0 {
		return interruption.StatusCheck{}
	}
	c := interruption.StatusCheck{Status: interruption.CheckStatus(details[i].Status)}
	if t := details[i].ImpairedSince; t != nil && c.Status == interruption.CheckFailed {
		c.ImpairedSince = t.UTC()
	}
	return c
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// eventRecordID derives an event record's id from the occurrence, so a
// retried run rewrites its record instead of adding another.
func eventRecordID(key, nodeClaim, reason string) string {
	sum := sha256.Sum256([]byte(key + "\x00" + nodeClaim + "\x00" + reason))
	return hex.EncodeToString(sum[:16])
}
