package queue_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sivchari/kumo"

	"github.com/nodewright/nodewright/shared/aws/queue"
)

// env is one test's FIFO queue on an in-process kumo server, reached with
// the real SQS client. kumo keeps SQS state per process, so every test
// creates a queue named after itself.
type env struct {
	client *sqs.Client
	url    string
}

func newEnv(t *testing.T) env {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	client := sqs.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, func(o *sqs.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	name := "q-" + regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "-")
	if len(name) > 70 {
		name = name[:70]
	}
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName:  aws.String(name + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "MaximumMessageSize": "1048576"},
	})
	if err != nil {
		t.Fatalf("CreateQueue() error = %v", err)
	}
	return env{client: client, url: aws.ToString(out.QueueUrl)}
}

// receive returns every message available now, decoded.
func (e env) receive(t *testing.T) []queue.Message {
	t.Helper()
	out, err := e.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(e.url), MaxNumberOfMessages: 10,
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"},
	})
	if err != nil {
		t.Fatalf("ReceiveMessage() error = %v", err)
	}
	var msgs []queue.Message
	for _, m := range out.Messages {
		attrs := map[string]string{}
		for k, v := range m.MessageAttributes {
			attrs[k] = aws.ToString(v.StringValue)
		}
		dm, err := queue.Decode(aws.ToString(m.Body), attrs, m.Attributes["MessageGroupId"], m.Attributes["MessageDeduplicationId"])
		if err != nil {
			t.Fatalf("Decode() error = %v", err)
		}
		msgs = append(msgs, dm)
	}
	return msgs
}

// incompressible returns n bytes of JSON-safe text that gzip cannot shrink
// below the limit.
func incompressible(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return b
}

func TestSendAndDecode(t *testing.T) {
	large := []byte(`{"kind":"PodBatch","pods":"` + strings.Repeat("pod-", 70_000) + `"}`)
	tests := []struct {
		name string
		give queue.Message
	}{
		{name: "a small message travels as plain JSON", give: queue.Message{GroupID: "c1", DeduplicationID: "b1", Kind: "PodBatch", Body: []byte(`{"id":"b1"}`)}},
		{name: "a body over the limit travels gzipped and comes back whole", give: queue.Message{GroupID: "c1", DeduplicationID: "b2", Kind: "PodBatch", Body: large}},
		{name: "a claim check carries only its reference", give: queue.Message{GroupID: "c1", DeduplicationID: "b3", Kind: "NodeRegistrations", PayloadRef: "payload-b3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			q, err := queue.New(e.client, e.url)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Send(context.Background(), tt.give); err != nil {
				t.Fatalf("Send() error = %v", err)
			}
			got := e.receive(t)
			// kumo does not report the MessageGroupId and
			// MessageDeduplicationId system attributes (SQS and Lambda
			// do); TestDecodeKeepsTheFIFOIdentifiers covers them.
			ignoreIDs := cmpopts.IgnoreFields(queue.Message{}, "GroupID", "DeduplicationID")
			if diff := cmp.Diff([]queue.Message{tt.give}, got, ignoreIDs); diff != "" {
				t.Errorf("received mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSendDeduplicatesWithinTheWindow(t *testing.T) {
	e := newEnv(t)
	q, err := queue.New(e.client, e.url)
	if err != nil {
		t.Fatal(err)
	}
	m := queue.Message{GroupID: "c1", DeduplicationID: "b1", Kind: "PodBatch", Body: []byte(`{"id":"b1"}`)}
	for range 2 {
		if err := q.Send(context.Background(), m); err != nil {
			t.Fatalf("Send() error = %v", err)
		}
	}
	if got := e.receive(t); len(got) != 1 {
		t.Errorf("received %d messages, want 1", len(got))
	}
}

// recordingAPI fails the test if SendMessage is called.
type recordingAPI struct{ calls int }

func (r *recordingAPI) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.calls++
	return &sqs.SendMessageOutput{}, nil
}

func TestSendErrors(t *testing.T) {
	tests := []struct {
		name    string
		give    queue.Message
		wantErr error
	}{
		{name: "a body that stays too large compressed", give: queue.Message{GroupID: "c", DeduplicationID: "d", Kind: "PodBatch", Body: incompressible(400 << 10)}, wantErr: queue.ErrTooLarge},
		{name: "a message without a group", give: queue.Message{DeduplicationID: "d", Kind: "PodBatch", Body: []byte("{}")}},
		{name: "a message without a body or reference", give: queue.Message{GroupID: "c", DeduplicationID: "d", Kind: "PodBatch"}},
		{name: "a deduplication id over 128 characters", give: queue.Message{GroupID: "c", DeduplicationID: strings.Repeat("d", 129), Kind: "PodBatch", Body: []byte("{}")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &recordingAPI{}
			q, err := queue.New(api, "https://sqs.example/q.fifo")
			if err != nil {
				t.Fatal(err)
			}
			err = q.Send(context.Background(), tt.give)
			if err == nil {
				t.Fatal("Send() error = nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Send() error = %v, want %v", err, tt.wantErr)
			}
			if api.calls != 0 {
				t.Errorf("SendMessage called %d times, want 0", api.calls)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		attrs map[string]string
	}{
		{name: "no kind", body: "{}", attrs: map[string]string{}},
		{name: "unknown encoding", body: "{}", attrs: map[string]string{"kind": "PodBatch", "content-encoding": "br"}},
		{name: "gzip that is not base64", body: "{}", attrs: map[string]string{"kind": "PodBatch", "content-encoding": "gzip"}},
		{name: "base64 that is not gzip", body: "e30=", attrs: map[string]string{"kind": "PodBatch", "content-encoding": "gzip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := queue.Decode(tt.body, tt.attrs, "g", "d"); err == nil {
				t.Error("Decode() error = nil, want an error")
			}
		})
	}
}

func TestDecodeKeepsTheFIFOIdentifiers(t *testing.T) {
	got, err := queue.Decode(`{"id":"b1"}`, map[string]string{"kind": "PodBatch"}, "c1", "b1")
	if err != nil {
		t.Fatalf("Decode() error = %v", err)
	}
	want := queue.Message{GroupID: "c1", DeduplicationID: "b1", Kind: "PodBatch", Body: []byte(`{"id":"b1"}`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decode() mismatch (-want +got):\n%s", diff)
	}
}
