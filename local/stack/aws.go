package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	gchandler "github.com/nodewright/nodewright/functions/gc/handler"
	intakehandler "github.com/nodewright/nodewright/functions/intake/handler"
	provisionerhandler "github.com/nodewright/nodewright/functions/provisioner/handler"
	replacehandler "github.com/nodewright/nodewright/functions/replace/handler"
	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/meter"
	"github.com/nodewright/nodewright/shared/apis/crds"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/queue"
)

// apiFront stands in for API Gateway with a Lambda proxy integration in
// front of the intake function: it strips the stage from the path and
// turns each request into the APIGatewayProxyRequest the function gets.
// IAM authorization is NOT checked locally: any signature (or none) is
// accepted, and the caller is reported as the forwarder's role.
type apiFront struct {
	intake *intakehandler.Handler
	// replace serves v1.RouteReplacements when disruption is wired; the
	// caller is then the signature's access key ID as an IAM user of the
	// account (none without a SigV4 signature), as API Gateway reports
	// an IAM caller.
	replace *replacehandler.Handler
	faults  *faults
	meter   *meter.Meter
	seq     atomic.Int64
}

// signer returns the IAM ARN the local front reports for a request
// signed with access key ID akid, or "" when r is not SigV4-signed.
func signer(r *http.Request) string {
	const prefix = "AWS4-HMAC-SHA256 Credential="
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, prefix) {
		return ""
	}
	akid, _, _ := strings.Cut(strings.TrimPrefix(auth, prefix), "/")
	return "arn:aws:iam::" + account + ":user/" + akid
}

func (g *apiFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// API Gateway's payload limit is 10 MB.
	body, err := io.ReadAll(io.LimitReader(r.Body, 11<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := events.APIGatewayProxyRequest{
		Resource: "/{proxy+}", Path: strings.TrimPrefix(r.URL.Path, stage), HTTPMethod: r.Method,
		Headers: map[string]string{}, MultiValueHeaders: map[string][]string{}, Body: string(body),
		QueryStringParameters: map[string]string{}, MultiValueQueryStringParameters: map[string][]string{},
		RequestContext: events.APIGatewayProxyRequestContext{
			Stage:     strings.TrimPrefix(stage, "/"),
			RequestID: fmt.Sprintf("local-%d", g.seq.Add(1)),
			Identity:  events.APIGatewayRequestIdentity{UserArn: "arn:aws:sts::111122223333:assumed-role/nodewright-forwarder/local"},
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
	var (
		killAfter time.Duration
		killed    bool
	)
	if r.Header.Get(v1.HeaderIdempotencyKey) != "" {
		killAfter, killed = g.faults.takeIntakeKill(req.Path)
	}
	var cancel context.CancelFunc = func() {}
	if killed {
		ctx, cancel = withKill(ctx, killAfter)
	}
	var resp events.APIGatewayProxyResponse
	g.meter.APIRequest(r.Method + " " + route(req.Path))
	begin := time.Now()
	if g.replace != nil && strings.TrimSuffix(req.Path, "/") == v1.RouteReplacements {
		req.RequestContext.Identity.UserArn = signer(r)
		resp, err = g.replace.Handle(meter.WithCaller(ctx, "replace"), req)
		g.meter.Invocation("replace", time.Since(begin))
	} else {
		resp, err = g.intake.Handle(meter.WithCaller(ctx, "intake"), req)
		g.meter.Invocation("intake", time.Since(begin))
	}
	cancel()
	answer := IntakeAnswer{Method: r.Method, Path: req.Path, IdempotencyKey: r.Header.Get(v1.HeaderIdempotencyKey), Killed: killed}
	switch {
	case killed:
		// A Lambda killed mid-call answers nothing: API Gateway answers
		// 502, whatever the handler did before it died.
		answer.Status = http.StatusBadGateway
	case err != nil:
		answer.Status = http.StatusBadGateway
	default:
		answer.Status, answer.RetryAfter = resp.StatusCode, resp.Headers["Retry-After"]
		answer.Duplicate = strings.Contains(resp.Body, `"duplicate":true`)
	}
	g.faults.recordAnswer(answer)
	if killed {
		http.Error(w, "Internal server error", http.StatusBadGateway)
		return
	}
	if err != nil {
		// API Gateway answers a failed integration with 502.
		http.Error(w, "Internal server error", http.StatusBadGateway)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, resp.Body)
}

// queuePump is the SQS event source mapping of the provisioning queue:
// it long-polls the FIFO queue (kumo), invokes the provisioner with up to
// ten messages, deletes the acknowledged ones and makes the reported
// failures visible again, as Lambda's ReportBatchItemFailures does.
type queuePump struct {
	sqs     *sqs.Client
	url     string
	group   string
	handler *provisionerhandler.Handler
	log     *slog.Logger
	faults  *faults
	meter   *meter.Meter
}

func (p *queuePump) run(ctx context.Context) error {
	for ctx.Err() == nil {
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"},
		})
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("receive", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		p.invoke(ctx, out.Messages)
	}
	return ctx.Err()
}

func (p *queuePump) invoke(ctx context.Context, msgs []sqstypes.Message) {
	var ev events.SQSEvent
	for _, m := range msgs {
		rec := events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: map[string]string{}, MessageAttributes: map[string]events.SQSMessageAttribute{}, EventSource: "aws:sqs",
		}
		for k, v := range m.Attributes {
			rec.Attributes[k] = v
		}
		// kumo does not report the FIFO system attributes.
		rec.Attributes["MessageGroupId"] = p.group
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		}
		ev.Records = append(ev.Records, rec)
	}
	// The provisioner Lambda's timeout (5 minutes).
	timeout := 5 * time.Minute
	killAfter, killed := p.faults.takeKill()
	if killed {
		timeout = killAfter
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{AwsRequestID: "local-" + aws.ToString(msgs[0].MessageId)})
	begin := time.Now()
	resp, err := p.handler.Handle(meter.WithCaller(ictx, "provisioner"), ev)
	p.meter.Invocation("provisioner", time.Since(begin))
	if killed {
		// A killed Lambda answers nothing: the whole batch stays.
		err = fmt.Errorf("provisioner killed after %v (fault injected)", killAfter)
	}
	failed := map[string]bool{}
	if err != nil {
		p.log.Error("provisioner invocation failed", "err", err)
		for _, m := range msgs {
			failed[aws.ToString(m.MessageId)] = true
		}
	}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range msgs {
		var err error
		if failed[aws.ToString(m.MessageId)] {
			// Retried after a short visibility timeout rather than the
			// queue's 6 minutes, so that the local stack recovers quickly.
			_, err = p.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(p.url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 2})
		} else if p.faults.takeRedelivery(aws.ToString(m.MessageAttributes[queue.AttrKind].StringValue)) {
			// Delivered again at once, as SQS's at-least-once delivery
			// may (fault injected).
			_, err = p.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(p.url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		} else {
			_, err = p.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.url), ReceiptHandle: m.ReceiptHandle})
		}
		if err != nil && ctx.Err() == nil {
			p.log.Warn("settle message", "err", err)
		}
	}
}

// runTicker invokes the gc handler every interval, as its EventBridge
// Scheduler schedule does.
func runTicker(ctx context.Context, interval time.Duration, gc *gchandler.Handler, log *slog.Logger, m *meter.Meter) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			ictx := meter.WithCaller(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "local-gc"}), "gc")
			m.Scheduled("gc")
			_, err := meter.Timed(m, "gc", func() (gchandler.Output, error) { return gc.Handle(ictx, json.RawMessage(`{}`)) })
			if err != nil && ctx.Err() == nil {
				log.Warn("gc invocation failed", "err", err)
			}
		}
	}
}

// RunGC runs one garbage-collection pass now, at Options.GCClock, as the
// ticker does, and returns its output.
func (s *Stack) RunGC(ctx context.Context) (gchandler.Output, error) {
	ictx := meter.WithCaller(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "local-gc"}), "gc")
	return meter.Timed(s.meter, "gc", func() (gchandler.Output, error) { return s.gc.Handle(ictx, json.RawMessage(`{}`)) })
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// tagPrivateSubnets adds network-type=private to the simulator's private
// subnets, as the VPC of the Karpenter guide's complete example is tagged
// (its EC2NodeClass selects subnets by that tag), through EC2 CreateTags.
func tagPrivateSubnets(ctx context.Context, client *ec2.Client, sim *ec2sim.Server) error {
	var ids []string
	for _, sn := range sim.Network().Subnets {
		if !sn.Public {
			ids = append(ids, sn.ID)
		}
	}
	_, err := client.CreateTags(ctx, &ec2.CreateTagsInput{
		Resources: ids,
		Tags:      []ec2types.Tag{{Key: aws.String("network-type"), Value: aws.String("private")}},
	})
	if err != nil {
		return fmt.Errorf("tag private subnets: %w", err)
	}
	return nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// applyCRDs creates the CRDs of shared/apis/crds and waits until each is
// Established.
func applyCRDs(ctx context.Context, dyn dynamic.Interface) error {
	var names []string
	for _, crd := range crds.All() {
		raw, err := yaml.YAMLToJSON(crd.YAML)
		if err != nil {
			return fmt.Errorf("crd %s: %w", crd.File, err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("crd %s: %w", crd.File, err)
		}
		if _, err := dyn.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create crd %s: %w", crd.File, err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("crd %s not established: %w", name, err)
		}
	}
	return nil
}

// NodeClaimResource is the karpenter.sh/v1 NodeClaim resource.
var NodeClaimResource = schema.GroupVersionResource{Group: v1.Group, Version: "v1", Resource: "nodeclaims"}
