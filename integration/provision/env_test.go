// Package provision_test drives the provisioning hot path end to end, in
// one process, with the real aws-sdk-go-v2 clients against protocol-level
// stand-ins: kumo for DynamoDB and SQS (FIFO), local/ec2sim for EC2 and
// SSM, and a client-go fake clientset for the Kubernetes API.
//
//	signed HTTP client --SigV4--> API Gateway shim --proxy event--> intake handler
//	    -> DynamoDB (kumo) + provisioning FIFO queue (kumo SQS)
//	    -> event-source-mapping emulation (receive, SQSEvent, delete acknowledged,
//	       make failed messages visible again) -> provisioner handler
//	    -> ec2sim (CreateFleet, launch templates, AMIs through SSM) + DynamoDB
//	    -> fake clientset (registration)
//	scheduled invocation -> gc handler -> DynamoDB + ec2sim + fake clientset
//
// kumo's SQS implements FIFO queues (message groups locked while a message
// is in flight, deduplication within 5 minutes), so messages go through a
// real queue; only the event source mapping, which kumo does not run, is
// emulated by the test (drain). Every handler reads the simulator's fake
// clock, so "15 minutes later" is an Advance, not a wait.
//
// The forwarder's own intake client lives under forwarder/internal and
// cannot be imported from here; apiClient does what it does on the wire
// (JSON body, Idempotency-Key header, SigV4 for execute-api, retries on 5xx),
// and the shim checks the signature as API Gateway's IAM authorization would.
package provision_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/sivchari/kumo"
	"k8s.io/client-go/kubernetes/fake"

	gchandler "github.com/nodewright/nodewright/functions/gc/handler"
	intakehandler "github.com/nodewright/nodewright/functions/intake/handler"
	provisionerhandler "github.com/nodewright/nodewright/functions/provisioner/handler"
	"github.com/nodewright/nodewright/local/ec2sim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/queue"
	"github.com/nodewright/nodewright/shared/kube"
)

const (
	cluster = "e2e-cluster"
	region  = "us-east-1"
	stage   = "/prod"
	// caData is a placeholder CA bundle (base64 PEM) for the user data.
	caData = "Y2EtYnVuZGxlCg=="
)

// epoch is the fake clock's start: in the future, so kumo's TTL reaper
// (wall clock) never deletes what the test writes.
var epoch = time.Date(2030, 3, 2, 10, 0, 0, 0, time.UTC)

// envSeq numbers the envs of the process.
var envSeq atomic.Int64

var creds = credentials.NewStaticCredentialsProvider("AKIDE2E", "e2e-secret", "")

// env is one test's whole system. Nothing is shared between tests: kumo's
// state is per process, so each env has its own table and queue.
type env struct {
	t     testing.TB
	clock *ec2sim.FakeClock
	sim   *ec2sim.Server
	ec2   *ec2.Client
	ddb   *dynamodb.Client
	sqs   *sqs.Client
	url   string // queue URL
	table string
	store *ddbstore.Store
	kube  *fake.Clientset
	api   *apiClient

	intake      *intakehandler.Handler
	provisioner *provisionerhandler.Handler
	gc          *gchandler.Handler
	// calls records each function's DynamoDB calls, by function name.
	calls map[string]*awstest.DynamoDBRecorder
	ssm   *ssm.Client
	// ec2API is what the provisioner calls: ec2, possibly wrapped.
	ec2API *flakyEC2
	log    *bytes.Buffer
}

// flakyEC2 passes every call to EC2; LoseCreateFleet makes the next n
// CreateFleet calls fail after EC2 has launched (a response lost on the
// way back).
type flakyEC2 struct {
	*ec2.Client
	LoseCreateFleet atomic.Int32
}

func (f *flakyEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	out, err := f.Client.CreateFleet(ctx, in, opts...)
	if err == nil && f.LoseCreateFleet.Add(-1) >= 0 {
		return nil, fmt.Errorf("create fleet: read response: connection reset by peer")
	}
	return out, err
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, clock: ec2sim.NewFakeClock(epoch), log: &bytes.Buffer{}}
	log := slog.New(slog.NewJSONHandler(&syncWriter{w: e.log}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("handler logs:\n%s", e.log.String())
		}
	})

	// EC2 and SSM.
	sim, err := ec2sim.New(ec2sim.Options{Region: region, ClusterName: cluster, Clock: e.clock})
	if err != nil {
		t.Fatalf("ec2sim.New() error = %v", err)
	}
	e.sim = sim
	simSrv := httptest.NewServer(sim)
	t.Cleanup(simSrv.Close)
	loop := &http.Client{Transport: ec2sim.LoopbackTransport(simSrv.Client().Transport)}
	e.ec2 = ec2.New(ec2.Options{Region: region, BaseEndpoint: aws.String(simSrv.URL), Credentials: creds, HTTPClient: loop, RetryMaxAttempts: 1})
	ssmClient := ssm.New(ssm.Options{Region: region, BaseEndpoint: aws.String(simSrv.URL), Credentials: creds, HTTPClient: loop})
	e.ssm = ssmClient
	e.ec2API = &flakyEC2{Client: e.ec2}

	// DynamoDB and SQS.
	k := kumo.NewServer()
	t.Cleanup(k.Close)
	awsCfg := aws.Config{Region: region, Credentials: creds}
	e.ddb = dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(k.URL) })
	e.sqs = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(k.URL) })
	// kumo's state is per process: a table and a queue per env.
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", t.Name(), envSeq.Add(1))))
	name := "e2e-" + hex.EncodeToString(sum[:8])
	e.table = name
	if err := ddbstore.CreateTable(ctx, e.ddb, e.table, time.Minute); err != nil {
		t.Fatalf("CreateTable() error = %v", err)
	}
	q, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "360"},
	})
	if err != nil {
		t.Fatalf("CreateQueue() error = %v", err)
	}
	e.url = aws.ToString(q.QueueUrl)
	if e.store, err = ddbstore.New(e.ddb, e.table, cluster); err != nil {
		t.Fatal(err)
	}

	// Kubernetes.
	e.kube = fake.NewClientset()
	nodes := kube.NewFromClientset(e.kube)

	// The three functions, wired as their mains wire them, each through
	// its own recorder: at the end every call must be within the access
	// ddbstore.Schema gives that function (its role's dynamodb:LeadingKeys).
	e.calls = map[string]*awstest.DynamoDBRecorder{}
	for _, fn := range []string{"intake", "provisioner", "gc"} {
		e.calls[fn] = &awstest.DynamoDBRecorder{Next: e.ddb, PartitionKey: "pk"}
	}
	t.Cleanup(func() { e.checkAccess(t) })
	env := map[string]string{
		"CLUSTER_NAME": cluster, "TABLE_NAME": e.table, "QUEUE_URL": e.url, "AWS_REGION": region,
		"KUBERNETES_VERSION": "1.33", "CLUSTER_ENDPOINT": "https://e2e-cluster.example", "CLUSTER_CA_DATA": caData,
		"SERVICE_CIDR": "10.100.0.0/16", "CLUSTER_DNS": "10.100.0.10",
	}
	getenv := func(k string) string { return env[k] }
	icfg, err := intakehandler.LoadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	store, err := ddbstore.New(e.calls["intake"], e.table, cluster)
	if err != nil {
		t.Fatal(err)
	}
	queueSender, err := queue.New(e.sqs, e.url)
	if err != nil {
		t.Fatal(err)
	}
	if e.intake, err = intakehandler.New(icfg, intakehandler.Deps{Store: store, Queue: queueSender, Log: log.With("function", "intake"), Now: e.clock.Now}); err != nil {
		t.Fatal(err)
	}
	pcfg, err := provisionerhandler.LoadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	e.provisioner, err = provisionerhandler.New(pcfg, provisionerhandler.Clients{DynamoDB: e.calls["provisioner"], EC2: e.ec2API, SSM: ssmClient, Nodes: nodes},
		log.With("function", "provisioner"), e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	gcfg, err := gchandler.LoadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if e.gc, err = gchandler.New(gcfg, gchandler.Clients{DynamoDB: e.calls["gc"], EC2: e.ec2, Nodes: nodes}, log.With("function", "gc"), e.clock.Now); err != nil {
		t.Fatal(err)
	}

	// API Gateway in front of the intake function.
	apiSrv := httptest.NewServer(&apiGateway{intake: e.intake, t: t})
	t.Cleanup(apiSrv.Close)
	e.api = &apiClient{base: apiSrv.URL + stage, now: e.clock.Now}
	return e
}

// recorder returns a new recorder of fn's DynamoDB calls, checked with
// the others when the test ends.
func (e *env) recorder(fn string) *awstest.DynamoDBRecorder {
	r := &awstest.DynamoDBRecorder{Next: e.ddb, PartitionKey: "pk"}
	e.calls[fn] = r
	return r
}

// checkAccess reports each DynamoDB call a function made that its role, as
// the CDK app builds it from ddbstore.Schema().Access, would deny.
func (e *env) checkAccess(t testing.TB) {
	t.Helper()
	schema := ddbstore.Schema()
	for _, fn := range slices.Sorted(maps.Keys(e.calls)) {
		access := schema.Access[fn]
		for _, c := range e.calls[fn].Denied(func(c awstest.DynamoDBCall) bool { return access.Allows(cluster, c.Op, c.Index, c.PartitionKey) }) {
			t.Errorf("%s: %s %s %s: not in its access (ddbstore.Schema): its role would be denied", fn, c.Op, c.Index, c.PartitionKey)
		}
	}
}

// syncWriter serializes writes from concurrent launches.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// apiGateway stands in for API Gateway with IAM authorization and a Lambda
// proxy integration: it refuses requests whose SigV4 signature does not
// verify, strips the stage from the path and turns the request into the
// proxy event the intake function receives.
type apiGateway struct {
	intake *intakehandler.Handler
	t      testing.TB
	seq    atomic.Int64
}

func (g *apiGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 11<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := verifySignature(r, body); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(v1.ErrorResponse{Message: err.Error()})
		return
	}
	req := events.APIGatewayProxyRequest{
		Resource:              "/{proxy+}",
		Path:                  strings.TrimPrefix(r.URL.Path, stage),
		HTTPMethod:            r.Method,
		Headers:               map[string]string{},
		MultiValueHeaders:     map[string][]string{},
		Body:                  string(body),
		QueryStringParameters: map[string]string{}, MultiValueQueryStringParameters: map[string][]string{},
		RequestContext: events.APIGatewayProxyRequestContext{
			Stage:     strings.TrimPrefix(stage, "/"),
			RequestID: fmt.Sprintf("req-%d", g.seq.Add(1)),
			Identity:  events.APIGatewayRequestIdentity{UserArn: "arn:aws:sts::111122223333:assumed-role/nodewright-forwarder/pod"},
		},
	}
	for k, vs := range r.Header {
		req.Headers[k] = vs[0]
		req.MultiValueHeaders[k] = vs
	}
	for k, vs := range r.URL.Query() {
		req.QueryStringParameters[k] = vs[0]
		req.MultiValueQueryStringParameters[k] = vs
	}
	ctx := lambdacontext.NewContext(r.Context(), &lambdacontext.LambdaContext{AwsRequestID: req.RequestContext.RequestID})
	resp, err := g.intake.Handle(ctx, req)
	if err != nil {
		http.Error(w, "Internal server error", http.StatusBadGateway)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, resp.Body)
}

// verifySignature recomputes the request's SigV4 signature with the known
// credentials, as API Gateway's IAM authorization does (it then maps the
// access key to an IAM principal and evaluates execute-api:Invoke).
func verifySignature(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return fmt.Errorf("missing authentication token")
	}
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("x-amz-date: %w", err)
	}
	var signed []string
	for _, part := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ", ") {
		if v, ok := strings.CutPrefix(part, "SignedHeaders="); ok {
			signed = strings.Split(v, ";")
		}
	}
	check, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range signed {
		if h == "host" || h == "content-length" {
			continue
		}
		check.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	if len(body) == 0 {
		check.ContentLength = 0
	}
	sum := sha256.Sum256(body)
	c, _ := creds.Retrieve(context.Background())
	if err := v4.NewSigner().SignHTTP(context.Background(), c, check, hex.EncodeToString(sum[:]), "execute-api", region, signedAt); err != nil {
		return err
	}
	if check.Header.Get("Authorization") != auth {
		return fmt.Errorf("the request signature we calculated does not match the signature you provided")
	}
	return nil
}

// apiClient posts the forwarder's messages as the forwarder's intake
// client does on the wire.
type apiClient struct {
	base string
	now  func() time.Time
}

// do sends one request, retrying 5xx answers, and decodes a 2xx answer
// into out. It returns the final status.
func (c *apiClient) do(t testing.TB, method, route, id string, msg, out any) int {
	t.Helper()
	var body []byte
	if msg != nil {
		var err error
		if body, err = json.Marshal(msg); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(body)
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequest(method, c.base+route, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json")
		if msg != nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(v1.HeaderIdempotencyKey, id)
		}
		cr, _ := creds.Retrieve(context.Background())
		if err := v4.NewSigner().SignHTTP(context.Background(), cr, req, hex.EncodeToString(sum[:]), "execute-api", region, c.now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, route, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 && attempt < 3 {
			continue
		}
		if resp.StatusCode/100 == 2 && out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("decode %s answer %s: %v", route, data, err)
			}
		}
		if resp.StatusCode/100 != 2 {
			t.Logf("%s %s answered %d: %s", method, route, resp.StatusCode, data)
		}
		return resp.StatusCode
	}
}

// drain is the SQS event source mapping: it receives up to batchSize
// messages, invokes the provisioner with them, deletes the acknowledged
// ones and makes the failed ones visible again (their visibility timeout
// expiring), until the queue is empty or rounds invocations were made. It
// returns the invocations' responses.
func (e *env) drain(rounds int) []events.SQSEventResponse {
	e.t.Helper()
	ctx := context.Background()
	var responses []events.SQSEventResponse
	for range rounds {
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.url), MaxNumberOfMessages: 5,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"},
		})
		if err != nil {
			e.t.Fatalf("ReceiveMessage() error = %v", err)
		}
		if len(out.Messages) == 0 {
			return responses
		}
		ev := sqsEvent(out.Messages)
		resp := e.invokeProvisioner(ev)
		responses = append(responses, resp)
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range out.Messages {
			if failed[aws.ToString(m.MessageId)] {
				_, err = e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(e.url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
			} else {
				_, err = e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.url), ReceiptHandle: m.ReceiptHandle})
			}
			if err != nil {
				e.t.Fatalf("settle message: %v", err)
			}
		}
	}
	return responses
}

// invokeProvisioner runs one invocation with a Lambda context and a
// deadline, as the runtime does.
func (e *env) invokeProvisioner(ev events.SQSEvent) events.SQSEventResponse {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "provisioner-invocation"})
	resp, err := e.provisioner.Handle(ctx, ev)
	if err != nil {
		e.t.Fatalf("provisioner Handle() error = %v", err)
	}
	return resp
}

// sqsEvent is the event Lambda builds from received messages. kumo does
// not report the FIFO system attributes, so the group is set here.
func sqsEvent(msgs []sqstypes.Message) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		rec := events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: map[string]string{}, MessageAttributes: map[string]events.SQSMessageAttribute{},
			EventSource: "aws:sqs",
		}
		for k, v := range m.Attributes {
			rec.Attributes[k] = v
		}
		rec.Attributes["MessageGroupId"] = cluster
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}

// runGC runs one scheduled garbage-collection invocation.
func (e *env) runGC() gchandler.Output {
	e.t.Helper()
	out, err := e.gc.Handle(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		e.t.Fatalf("gc Handle() error = %v", err)
	}
	return out
}

// sqsRecord is a record of the provisioning queue as Lambda delivers it.
func sqsRecord(id, kind, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: body, EventSource: "aws:sqs",
		Attributes:        map[string]string{"MessageGroupId": cluster, "ApproximateReceiveCount": "2"},
		MessageAttributes: map[string]events.SQSMessageAttribute{queue.AttrKind: {DataType: "String", StringValue: aws.String(kind)}},
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
