package handler_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sivchari/kumo"

	"github.com/nodewright/nodewright/functions/intake/handler"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/queue"
)

const cluster = "test-cluster"

// t0 is the handler's clock. kumo's TTL reaper deletes items whose TTL is
// before the wall clock; a time in the future keeps it away.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is one test's intake: the handler over the real DynamoDB and SQS
// clients against an in-process kumo, with a table and a FIFO queue of its
// own (kumo's state is per process).
type env struct {
	h      *handler.Handler
	ddb    *dynamodb.Client
	sqs    *sqs.Client
	table  string
	url    string
	store  *ddbstore.Store
	queue  *queue.Queue
	sender *flakySender
	faults *faultyDDB
	// calls records every DynamoDB call the store makes (through faults).
	calls *awstest.DynamoDBRecorder
	clock *clock
}

// clock is the handler's clock, t0 until a test advances it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// faultyDDB passes calls to DynamoDB, failing the next FailDeletes
// DeleteItem calls as a connection lost on the way (or a Lambda killed
// before the call) would, and cutting Query answers at 1 MB as DynamoDB
// does (kumo does not).
type faultyDDB struct {
	ddbstore.API
	pages       *awstest.DynamoDBPages
	mu          sync.Mutex
	FailDeletes int
}

func (f *faultyDDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return f.pages.Query(ctx, in, opts...)
}

func (f *faultyDDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.mu.Lock()
	fail := f.FailDeletes > 0
	if fail {
		f.FailDeletes--
	}
	f.mu.Unlock()
	if fail {
		return nil, errors.New("DeleteItem: connection reset")
	}
	return f.API.DeleteItem(ctx, in, opts...)
}

// flakySender passes messages to the real queue, failing the next Fail
// sends, and answering queue.ErrTooLarge for message bodies when TooLarge
// is set (as the queue does for a body that stays too large gzipped).
type flakySender struct {
	mu       sync.Mutex
	q        *queue.Queue
	Fail     int
	TooLarge bool
	// Block, when set, holds every send until it is closed (an apply in
	// flight).
	Block chan struct{}
	// Sending, when set, is told when a send starts to block.
	Sending chan struct{}
	sent    int
}

func (f *flakySender) Send(ctx context.Context, m queue.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Fail > 0 {
		f.Fail--
		return fmt.Errorf("send message %s: connection reset", m.DeduplicationID)
	}
	if f.Block != nil {
		block, sending := f.Block, f.Sending
		f.mu.Unlock()
		if sending != nil {
			sending <- struct{}{}
		}
		<-block
		f.mu.Lock()
	}
	if f.TooLarge && m.PayloadRef == "" {
		return fmt.Errorf("send message %s: %w", m.DeduplicationID, queue.ErrTooLarge)
	}
	f.sent++
	return f.q.Send(ctx, m)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	e := &env{
		ddb: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) }),
		sqs: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(srv.URL) }),
	}
	// kumo's state is per process: a name per test, short enough for SQS
	// (80 characters with ".fifo").
	sum := sha256.Sum256([]byte(t.Name()))
	name := hex.EncodeToString(sum[:8])
	e.table = "intake-" + name
	ctx := context.Background()
	if err := ddbstore.CreateTable(ctx, e.ddb, e.table, time.Minute); err != nil {
		t.Fatalf("CreateTable() error = %v", err)
	}
	out, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String("intake-" + name + ".fifo"), Attributes: map[string]string{"FifoQueue": "true"},
	})
	if err != nil {
		t.Fatalf("CreateQueue() error = %v", err)
	}
	e.url = aws.ToString(out.QueueUrl)
	e.faults = &faultyDDB{API: e.ddb, pages: &awstest.DynamoDBPages{Next: e.ddb, Keys: []string{"pk", "sk"}}}
	e.clock = &clock{now: t0}
	e.calls = &awstest.DynamoDBRecorder{Next: e.faults, PartitionKey: "pk"}
	if e.store, err = ddbstore.New(e.calls, e.table, cluster); err != nil {
		t.Fatal(err)
	}
	if e.queue, err = queue.New(e.sqs, e.url); err != nil {
		t.Fatal(err)
	}
	e.sender = &flakySender{q: e.queue}
	cfgH := handler.Config{Cluster: cluster, Table: e.table, QueueURL: e.url, IdempotencyTTL: time.Hour, ApplyLease: 30 * time.Second, PayloadTTL: 96 * time.Hour}
	e.h, err = handler.New(cfgH, handler.Deps{
		// As the Lambda's main wires it (functions/intake/main.go).
		Store: e.store.WithNodeClaimCache(), Queue: e.sender, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// do serves one request and decodes the answer's body into out (when not
// nil), failing the test on an unexpected status.
func (e *env) do(t *testing.T, req events.APIGatewayProxyRequest, wantStatus int, out any) events.APIGatewayProxyResponse {
	t.Helper()
	resp, err := e.h.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	if resp.StatusCode != wantStatus {
		t.Fatalf("Handle(%s %s) status = %d, want %d; body %s", req.HTTPMethod, req.Path, resp.StatusCode, wantStatus, resp.Body)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
			t.Fatalf("decode answer %q: %v", resp.Body, err)
		}
	}
	return resp
}

// received returns the messages waiting in the queue (up to 10), decoded.
func (e *env) received(t *testing.T) []queue.Message {
	t.Helper()
	out, err := e.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
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
		dm, err := queue.Decode(aws.ToString(m.Body), attrs, cluster, "")
		if err != nil {
			t.Fatalf("Decode() error = %v", err)
		}
		msgs = append(msgs, dm)
	}
	return msgs
}

// items returns the number of items in the table.
func (e *env) items(t *testing.T) int {
	t.Helper()
	out, err := e.ddb.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(e.table)})
	if err != nil {
		t.Fatalf("Scan() error = %v", err)
	}
	return len(out.Items)
}

func post(path, id, body string) events.APIGatewayProxyRequest {
	req := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: path, Body: body, Headers: map[string]string{"Content-Type": "application/json"}}
	if id != "" {
		req.Headers["Idempotency-Key"] = id
	}
	return req
}

func get(path string) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: path}
}

const createdAt = `"createdAt":"2030-01-02T03:04:00Z"`

// pod is a valid pod summary named name with UID uid.
func pod(name, uid string) string {
	return fmt.Sprintf(`{"name":%q,"namespace":"default","uid":%q,"creationTimestamp":"2030-01-02T03:00:00Z","spec":{"containers":[{"name":"app","requests":{"cpu":"500m","memory":"1Gi"}}]}}`, name, uid)
}

// podBatch is a PodBatch body with id, the given cluster and pods (a JSON
// value for "pods").
func podBatch(id, clusterName, pods string) string {
	return fmt.Sprintf(`{"apiVersion":"nodewright.dev/v1","kind":"PodBatch","id":%q,"cluster":%q,%s,"pods":%s}`, id, clusterName, createdAt, pods)
}

func okBatch(id string) string { return podBatch(id, cluster, "["+pod("web-0", "uid-web-0")+"]") }

func config(id string, pools ...string) string {
	var nps []string
	for _, p := range pools {
		nps = append(nps, fmt.Sprintf(`{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":%q},"spec":{"template":{"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"requirements":[]}}}}`, p))
	}
	return fmt.Sprintf(`{"apiVersion":"nodewright.dev/v1","kind":"ClusterConfig","id":%q,"cluster":%q,%s,"nodePools":[%s],"ec2NodeClasses":[]}`, id, cluster, createdAt, strings.Join(nps, ","))
}

func registrations(id string) string {
	return fmt.Sprintf(`{"apiVersion":"nodewright.dev/v1","kind":"NodeRegistrations","id":%q,"cluster":%q,%s,"nodes":[{"name":"ip-10-0-0-1","providerID":"aws:///us-east-1a/i-0123","creationTimestamp":"2030-01-02T03:00:00Z"}]}`, id, cluster, createdAt)
}

func snapshot(id, sid string, part, parts int) string {
	return fmt.Sprintf(`{"apiVersion":"nodewright.dev/v1","kind":"ClusterSnapshot","id":%q,"cluster":%q,%s,"snapshotID":%q,"part":%d,"parts":%d,"nodes":[{"name":"node-%d","creationTimestamp":"2030-01-02T03:00:00Z"}]}`, id, cluster, createdAt, sid, part, parts, part)
}
