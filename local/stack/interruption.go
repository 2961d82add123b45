package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	interruptionhandler "github.com/nodewright/nodewright/functions/interruption/handler"
	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/meter"
	"github.com/nodewright/nodewright/local/stepfunctions"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/interruption"
)

// Local settings of the interruption queue and its event source mapping.
const (
	// interruptionVisibility is the interruption queue's visibility
	// timeout: how long a record the handler reported as failed waits
	// before it is redelivered. The deployed queue's is three times the
	// Lambda's timeout; locally a short one retries before the two-minute
	// Spot reclaim.
	interruptionVisibility = 15 * time.Second
	// interruptionRetention is Karpenter's interruption queue retention
	// (karpenter-spec.md section 8.1: 300 s).
	interruptionRetention = 300 * time.Second
	// interruptionTimeout bounds one invocation of the handler (the
	// deployed Lambda's timeout is of the same order).
	interruptionTimeout = time.Minute
	// eventBuffer is how many simulator events wait for the EventBridge
	// stand-in before new ones are dropped (logged).
	eventBuffer = 1024
)

// interruptionClients are what startInterruption needs from startAWS.
type interruptionClients struct {
	ddb    *dynamodb.Client
	sqs    *sqs.Client
	suffix string // the stack's unique resource-name suffix
}

// startInterruption wires interruption handling next to disruption (it
// needs the Step Functions runner that startDisruption set up):
//
//	ec2sim events --EventBridge rules (the detail types of
//	  shared/interruption.EventTypes)--> SQS standard queue (kumo)
//	  "nodewright-interruption-<suffix>"
//	  -> event source mapping (long poll, batches of up to 10,
//	     ReportBatchItemFailures) -> functions/interruption handler
//	  -> statemachines/interruption.asl.json on the same local
//	     Step Functions as the disruption machine, its tasks on the
//	     disrupttask handler.
//
// It returns false (and logs why) when the definition is missing.
func (s *Stack) startInterruption(startCtx, runCtx context.Context, env map[string]string, c interruptionClients) (bool, error) {
	if s.sfn == nil {
		s.log.Info("interruption not wired: no local Step Functions (disruption is off)")
		return false, nil
	}
	raw, err := os.ReadFile(filepath.Join(s.opts.RepoRoot, "statemachines", "interruption.asl.json"))
	if err != nil {
		s.log.Info("interruption not wired: no state machine definition", "err", err)
		return false, nil
	}
	region := s.opts.Region
	fnARN := fmt.Sprintf("arn:aws:lambda:%s:%s:function:disrupttask", region, account)
	machineARN := fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:nodewright-interruption", region, account)
	def, err := stepfunctions.Substitute(raw, map[string]string{"DisrupttaskFunctionArn": fnARN})
	if err != nil {
		return false, fmt.Errorf("interruption state machine: %w", err)
	}
	s.sfn.register(machineARN, def)

	q, err := c.sqs.CreateQueue(startCtx, &sqs.CreateQueueInput{
		QueueName: aws.String("nodewright-interruption-" + c.suffix),
		Attributes: map[string]string{
			"VisibilityTimeout":      fmt.Sprint(int(interruptionVisibility.Seconds())),
			"MessageRetentionPeriod": fmt.Sprint(int(interruptionRetention.Seconds())),
		},
	})
	if err != nil {
		return false, fmt.Errorf("interruption queue: %w", err)
	}
	queueURL := aws.ToString(q.QueueUrl)

	ienv := maps.Clone(env)
	ienv["STATE_MACHINE_ARN"] = machineARN
	cfg, err := interruptionhandler.LoadConfig(func(k string) string { return ienv[k] })
	if err != nil {
		return false, fmt.Errorf("interruption config: %w", err)
	}
	h, err := interruptionhandler.New(cfg, interruptionhandler.Clients{DynamoDB: c.ddb, SFN: s.sfn},
		s.functionLog("interruption"), s.now)
	if err != nil {
		return false, fmt.Errorf("interruption: %w", err)
	}

	s.enqueued = &enqueueLog{}
	rules := &eventRules{sqs: c.sqs, url: queueURL, events: make(chan ec2sim.Event, eventBuffer),
		match: map[interruption.EventType]bool{}, log: s.log.With("component", "eventbridge"), enqueued: s.enqueued, meter: s.meter}
	for _, t := range interruption.EventTypes() {
		rules.match[t] = true
	}
	invoke := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return meter.Timed(s.meter, "interruption", func() (events.SQSEventResponse, error) { return h.Handle(meter.WithCaller(ctx, "interruption"), ev) })
	}
	pump := &eventSourceMapping{sqs: c.sqs, url: queueURL, invoke: invoke, log: s.log.With("component", "interruption-pump"),
		region: region, arn: fmt.Sprintf("arn:aws:sqs:%s:%s:nodewright-interruption-%s", region, account, c.suffix)}
	s.goLoop(runCtx, rules.run)
	s.goLoop(runCtx, pump.run)
	s.Sim.SetEventSink(rules.put)
	s.closers = append(s.closers, func() { s.Sim.SetEventSink(nil) })
	if err := s.startInstanceStatus(runCtx, env, machineARN, c.ddb); err != nil {
		return false, err
	}
	return true, nil
}

// register adds a state machine definition (before or while executions
// run).
func (s *localSFN) register(arn string, def []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defs[arn] = def
}

// eventRules stands in for the EventBridge rules of the interruption
// queue: events whose (source, detail-type) a rule matches are sent to the
// queue, the event JSON as the message body; others are dropped, as no
// rule matches them.
type eventRules struct {
	sqs    *sqs.Client
	url    string
	events chan ec2sim.Event
	match  map[interruption.EventType]bool
	log    *slog.Logger
	// enqueued records each event the queue accepted.
	enqueued *enqueueLog
	// meter counts the events the rules match (EC2's events on the default
	// bus: AWS service events, which EventBridge does not bill).
	meter *meter.Meter
}

// put is the simulator's event sink: it never blocks (a full buffer drops
// the event, logged).
func (r *eventRules) put(ev ec2sim.Event) {
	if !r.match[interruption.EventType{Source: ev.Source, DetailType: ev.DetailType}] {
		return
	}
	r.meter.Event(ev.DetailType)
	select {
	case r.events <- ev:
	default:
		r.log.Warn("event dropped: buffer full", "id", ev.ID, "detailType", ev.DetailType)
	}
}

func (r *eventRules) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-r.events:
			body, err := json.Marshal(ev)
			if err != nil {
				r.log.Error("event not sent", "id", ev.ID, "err", err)
				continue
			}
			// EventBridge retries a failed delivery for up to the rule's
			// maximum event age; a few quick tries do locally.
			for attempt := 1; ; attempt++ {
				_, err = r.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(r.url), MessageBody: aws.String(string(body))})
				if err == nil || ctx.Err() != nil || attempt == 3 {
					break
				}
				sleep(ctx, time.Second)
			}
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("event not delivered", "id", ev.ID, "detailType", ev.DetailType, "err", err)
				}
				continue
			}
			r.enqueued.add(EnqueuedEvent{ID: ev.ID, DetailType: ev.DetailType, InstanceID: ev.Detail["instance-id"], At: time.Now()})
			r.log.Debug("event delivered", "id", ev.ID, "detailType", ev.DetailType, "instance", ev.Detail["instance-id"])
		}
	}
}

// EnqueuedEvent is an EC2 event the stand-in EventBridge rules put on the
// interruption queue.
type EnqueuedEvent struct {
	// ID is the event's id (a UUID) and DetailType its detail-type, e.g.
	// "EC2 Spot Instance Interruption Warning".
	ID, DetailType string
	// InstanceID is the event's detail.instance-id.
	InstanceID string
	// At is when the queue accepted the message: the wall-clock instant
	// SQS SendMessage returned, in this process (the stack's simulator and
	// handlers share its clock).
	At time.Time
}

// maxEnqueued bounds the enqueue record; older entries are dropped.
const maxEnqueued = 4096

// enqueueLog is the record behind Stack.InterruptionEnqueued.
type enqueueLog struct {
	mu     sync.Mutex
	events []EnqueuedEvent
}

// add records e; a nil log records nothing.
func (l *enqueueLog) add(e EnqueuedEvent) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == maxEnqueued {
		l.events = slices.Delete(l.events, 0, 1)
	}
	l.events = append(l.events, e)
}

// InterruptionEnqueued returns the events the interruption queue accepted
// so far (at most the last 4096), in the order they were sent, the instant
// each entered the queue included: the start of the interruption latency
// (issue #7, event enqueued -> first eviction). It is empty when
// interruption is not wired.
func (s *Stack) InterruptionEnqueued() []EnqueuedEvent {
	if s.enqueued == nil {
		return nil
	}
	s.enqueued.mu.Lock()
	defer s.enqueued.mu.Unlock()
	return slices.Clone(s.enqueued.events)
}

// eventSourceMapping is the interruption queue's SQS event source mapping
// with ReportBatchItemFailures: it long-polls the standard queue, invokes
// the handler with up to ten records, deletes the records the handler did
// not report as failed and leaves the failed ones to reappear after the
// queue's visibility timeout. An invocation error leaves the whole batch.
type eventSourceMapping struct {
	sqs         *sqs.Client
	url         string
	region, arn string // the records' awsRegion and eventSourceARN
	invoke      func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	log         *slog.Logger
}

func (p *eventSourceMapping) run(ctx context.Context) error {
	for ctx.Err() == nil {
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			// kumo ends a long poll early for a new message but not for
			// one whose visibility timeout ran out: short polls keep
			// redeliveries prompt.
			QueueUrl: aws.String(p.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("receive", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		if len(out.Messages) > 0 {
			p.deliver(ctx, out.Messages)
		}
	}
	return ctx.Err()
}

// deliver invokes the handler with one batch and settles its records.
func (p *eventSourceMapping) deliver(ctx context.Context, msgs []sqstypes.Message) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, m := range msgs {
		rec := events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: map[string]string{}, MessageAttributes: map[string]events.SQSMessageAttribute{},
			EventSource: "aws:sqs", EventSourceARN: p.arn, AWSRegion: p.region,
		}
		maps.Copy(rec.Attributes, m.Attributes)
		ev.Records = append(ev.Records, rec)
	}
	ictx, cancel := context.WithTimeout(ctx, interruptionTimeout)
	defer cancel()
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{AwsRequestID: "local-" + aws.ToString(msgs[0].MessageId)})
	resp, err := p.invoke(ictx, ev)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("interruption invocation failed; the batch is redelivered", "records", len(msgs), "err", err)
		}
		return
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range msgs {
		if failed[aws.ToString(m.MessageId)] {
			continue
		}
		if _, err := p.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.url), ReceiptHandle: m.ReceiptHandle}); err != nil && ctx.Err() == nil {
			p.log.Warn("delete message", "err", err)
		}
	}
}

// InterruptNode issues a Spot interruption warning for the instance behind
// a Node (named by its Node name, which is the instance's private DNS
// name, its instance ID or its providerID), as EC2 does two minutes before
// it reclaims a Spot instance, and returns the warning: its ReclaimTime is
// when the simulator reclaims the instance. When Wired().Interrupts, the
// warning reaches the interruption handler, which drains the Node and
// marks the offering unavailable before then. It fails for an unknown,
// on-demand or terminating instance.
func (s *Stack) InterruptNode(_ context.Context, node string) (ec2sim.SpotInterruption, error) {
	in, err := s.instanceOf(node)
	if err != nil {
		return ec2sim.SpotInterruption{}, err
	}
	iv, err := s.Sim.InterruptSpot(in.ID)
	if err != nil {
		return ec2sim.SpotInterruption{}, fmt.Errorf("interrupt node %s: %w", node, err)
	}
	return iv, nil
}

// RecommendRebalance issues an EC2 rebalance recommendation for the Spot
// instance behind a Node (named as for InterruptNode). Karpenter only
// records an event for it (a SpotRebalanceRecommendation event record, when
// Wired().Interrupts); nothing is drained. It fails for an unknown,
// on-demand or terminating instance.
func (s *Stack) RecommendRebalance(_ context.Context, node string) (ec2sim.RebalanceRecommendation, error) {
	in, err := s.instanceOf(node)
	if err != nil {
		return ec2sim.RebalanceRecommendation{}, err
	}
	rb, err := s.Sim.RecommendRebalance(in.ID)
	if err != nil {
		return ec2sim.RebalanceRecommendation{}, fmt.Errorf("rebalance node %s: %w", node, err)
	}
	return rb, nil
}

// EventRecords returns the unexpired event records the handlers wrote to
// DynamoDB (ddbstore.Event: what the forwarder relays as Kubernetes
// Events), as the intake API lists them: a paired record
// (ddbstore.Event.OnNodeClaim) as its two events (ddbstore.Expand).
// Errors are ListEvents'.
func (s *Stack) EventRecords(ctx context.Context) ([]ddbstore.Event, error) {
	if s.store == nil {
		return nil, errors.New("event records: the stack's store is not running")
	}
	l, err := s.store.ListEvents(ctx, s.now())
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	return ddbstore.Expand(l), nil
}

// BudgetLeases returns nodePool's disruption budget leases unexpired now
// (ddbstore.Store.ListBudgetLeases): the executions holding part of its
// budget and how many nodes each.
func (s *Stack) BudgetLeases(ctx context.Context, nodePool string) ([]ddbstore.BudgetLease, error) {
	if s.store == nil {
		return nil, errors.New("budget leases: the stack's store is not running")
	}
	l, err := s.store.ListBudgetLeases(ctx, nodePool, s.now())
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	return l, nil
}

// instanceOf finds the simulator instance named by a Node name (private
// DNS name), an instance ID or a providerID (aws:///<zone>/<id>).
func (s *Stack) instanceOf(name string) (ec2sim.Instance, error) {
	id := name[strings.LastIndex(name, "/")+1:]
	var found []ec2sim.Instance
	for _, in := range s.Sim.Instances() {
		if in.ID == id {
			return in, nil
		}
		if in.PrivateDNSName == name {
			found = append(found, in)
		}
	}
	// A Node name is the private DNS name, which a later instance reuses
	// once an earlier one has released its address: the live one wins.
	for _, in := range found {
		if in.State == ec2sim.StatePending || in.State == ec2sim.StateRunning {
			return in, nil
		}
	}
	if len(found) > 0 {
		return found[len(found)-1], nil
	}
	return ec2sim.Instance{}, fmt.Errorf("node %q: no instance has that name, instance ID or providerID", name)
}
