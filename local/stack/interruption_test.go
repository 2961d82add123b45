package stack

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"
	"github.com/sivchari/kumo"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/interruption"
)

// newQueue starts kumo and creates a standard queue with the given
// visibility timeout (seconds); kumo keeps state per process, so the name
// is the test's.
func newQueue(t *testing.T, visibility string) (*sqs.Client, string) {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	client := sqs.NewFromConfig(aws.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")},
		func(o *sqs.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	q, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{
		QueueName: aws.String("interruption-" + t.Name()), Attributes: map[string]string{"VisibilityTimeout": visibility},
	})
	if err != nil {
		t.Fatalf("CreateQueue() error = %v", err)
	}
	return client, aws.ToString(q.QueueUrl)
}

func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewJSONHandler(t.Output(), nil)) }

func TestEventRulesSendOnlyTheInterruptionDetailTypes(t *testing.T) {
	client, url := newQueue(t, "30")
	rules := &eventRules{sqs: client, url: url, events: make(chan ec2sim.Event, 10), match: map[interruption.EventType]bool{}, log: testLogger(t)}
	for _, et := range interruption.EventTypes() {
		rules.match[et] = true
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = rules.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	event := func(id, detailType string, detail map[string]string) ec2sim.Event {
		return ec2sim.Event{Version: "0", ID: id, DetailType: detailType, Source: "aws.ec2", Account: "111122223333",
			Time: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC), Region: "us-west-2",
			Resources: []string{"arn:aws:ec2:us-west-2:111122223333:instance/i-0b8f7e6d5c4a39281"}, Detail: detail}
	}
	instance := map[string]string{"instance-id": "i-0b8f7e6d5c4a39281"}
	rules.put(event("e-1", ec2sim.DetailTypeSpotInterruptionWarning, map[string]string{"instance-id": "i-0b8f7e6d5c4a39281", "instance-action": "terminate"}))
	rules.put(event("e-2", "EC2 Spot Instance Request Fulfillment", instance))
	rules.put(event("e-3", ec2sim.DetailTypeRebalanceRecommendation, instance))
	rules.put(event("e-4", ec2sim.DetailTypeStateChange, map[string]string{"instance-id": "i-0b8f7e6d5c4a39281", "state": "running"}))

	got := map[string]interruption.Kind{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("ReceiveMessage() error = %v", err)
		}
		for _, m := range out.Messages {
			msg, err := interruption.Parse([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatalf("Parse(%s) error = %v", aws.ToString(m.Body), err)
			}
			got[msg.EventID] = msg.Kind
		}
	}
	want := map[string]interruption.Kind{
		"e-1": interruption.KindSpotInterruption, "e-3": interruption.KindRebalanceRecommendation, "e-4": interruption.KindNoOp,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queued events mismatch (-want +got):\n%s", diff)
	}
}

func TestEventRulesPutNeverBlocks(t *testing.T) {
	rules := &eventRules{events: make(chan ec2sim.Event, 1), match: map[interruption.EventType]bool{
		{Source: "aws.ec2", DetailType: ec2sim.DetailTypeStateChange}: true,
	}, log: testLogger(t)}
	for range 3 {
		rules.put(ec2sim.Event{Source: "aws.ec2", DetailType: ec2sim.DetailTypeStateChange})
	}
	if got := len(rules.events); got != 1 {
		t.Errorf("buffered events = %d, want 1 (the rest dropped)", got)
	}
}

// batchRecorder is a handler that records each batch's message bodies and
// fails the records whose body is in fail, the first time only.
type batchRecorder struct {
	mu      sync.Mutex
	batches [][]string
	fail    map[string]bool
}

func (b *batchRecorder) invoke(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var bodies []string
	resp := events.SQSEventResponse{}
	for _, r := range ev.Records {
		bodies = append(bodies, r.Body)
		if b.fail[r.Body] {
			delete(b.fail, r.Body)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	b.batches = append(b.batches, bodies)
	return resp, nil
}

func (b *batchRecorder) delivered() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for _, batch := range b.batches {
		for _, body := range batch {
			out[body]++
		}
	}
	return out
}

func TestEventSourceMappingRedeliversOnlyFailedRecords(t *testing.T) {
	client, url := newQueue(t, "1")
	var bodies []string
	for i := range 12 {
		body, _ := json.Marshal(map[string]int{"n": i})
		bodies = append(bodies, string(body))
		if _, err := client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(body))}); err != nil {
			t.Fatalf("SendMessage() error = %v", err)
		}
	}
	rec := &batchRecorder{fail: map[string]bool{bodies[3]: true}}
	pump := &eventSourceMapping{sqs: client, url: url, region: "us-west-2", arn: "arn:aws:sqs:us-west-2:111122223333:q", invoke: rec.invoke, log: testLogger(t)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = pump.run(ctx) }()

	want := map[string]int{}
	for _, b := range bodies {
		want[b] = 1
	}
	want[bodies[3]] = 2 // failed once, redelivered after the visibility timeout
	deadline := time.Now().Add(30 * time.Second)
	for !cmp.Equal(want, rec.delivered()) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	// Nothing else comes back: the acknowledged records were deleted.
	time.Sleep(2500 * time.Millisecond)
	cancel()
	<-done
	if diff := cmp.Diff(want, rec.delivered()); diff != "" {
		t.Errorf("deliveries per body mismatch (-want +got):\n%s", diff)
	}
	for _, b := range rec.batches {
		if len(b) > 10 {
			t.Errorf("batch of %d records, want at most 10", len(b))
		}
	}
}
