package handler

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sivchari/kumo"

	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/interruption"
)

// TestHandleWithRealAdapters runs two polls over ddbstore and sfnstarter
// against an in-process kumo (DynamoDB and Step Functions) with the real
// SDK clients: an impaired instance and one with a scheduled event start
// one execution each, with the input the interruption state machine reads,
// and the second poll starts nothing more.
func TestHandleWithRealAdapters(t *testing.T) {
	ctx := t.Context()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	awsCfg := aws.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	sf := sfn.NewFromConfig(awsCfg, func(o *sfn.Options) { o.BaseEndpoint = aws.String(srv.URL) })

	// kumo keeps state per process: names are the test's own.
	table := "nw-" + t.Name()
	if err := ddbstore.CreateTable(ctx, ddb, table, time.Minute); err != nil {
		t.Fatalf("CreateTable() error = %v", err)
	}
	sm, err := sf.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
		Name:       aws.String("interruption-" + t.Name()),
		Definition: aws.String(`{"StartAt":"Drain","States":{"Drain":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::111122223333:role/interruption"),
		Type:       sfntypes.StateMachineTypeStandard,
	})
	if err != nil {
		t.Fatalf("CreateStateMachine() error = %v", err)
	}
	calls := &awstest.DynamoDBRecorder{Next: ddb, PartitionKey: "pk"}
	st, err := ddbstore.New(calls, table, "test")
	if err != nil {
		t.Fatalf("ddbstore.New() error = %v", err)
	}
	starter, err := sfnstarter.New(sf, aws.ToString(sm.StateMachineArn))
	if err != nil {
		t.Fatalf("sfnstarter.New() error = %v", err)
	}
	a, err := st.PutNodeClaim(ctx, nodeClaim("default-aaaaa", instA))
	if err != nil {
		t.Fatalf("PutNodeClaim() error = %v", err)
	}
	c, err := st.PutNodeClaim(ctx, nodeClaim("default-ccccc", instC))
	if err != nil {
		t.Fatalf("PutNodeClaim() error = %v", err)
	}
	// kumo's TTL reaper deletes items whose expiresAt is before the wall
	// clock; a clock ahead of it keeps the reaper away.
	clock := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	notBefore := clock.Add(72 * time.Hour)
	ec := newFakeEC2(
		status(instA, instanceImpaired(clock.Add(-4*time.Minute))),
		status(instC, scheduled("instance-event-0d59937288b749b32", ec2types.EventCodeSystemMaintenance, notBefore)),
	)
	calls.Reset()
	h := newHandler(t, st, ec, starter)

	for i := range 2 {
		at := clock.Add(time.Duration(i) * time.Minute)
		h.now = func() time.Time { return at }
		if _, err := h.Handle(ctx, nil); err != nil {
			t.Fatalf("poll %d: Handle() error = %v", i+1, err)
		}
	}

	// Every call is within the role the CDK app builds from the schema's
	// access (dynamodb:LeadingKeys): IAM and the store cannot disagree.
	access := ddbstore.Schema().Access["instancestatus"]
	for _, c := range calls.Denied(func(c awstest.DynamoDBCall) bool { return access.Allows("test", c.Op, c.Index, c.PartitionKey) }) {
		t.Errorf("%s %s %s: not in the instancestatus function's access (ddbstore.Schema): its role would be denied", c.Op, c.Index, c.PartitionKey)
	}

	list, err := sf.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: sm.StateMachineArn})
	if err != nil {
		t.Fatalf("ListExecutions() error = %v", err)
	}
	keyA := "instance_status/" + instA + "/2030-01-02T03:00:05Z"
	keyC := "event_status/" + instC + "/instance-event-0d59937288b749b32"
	want := map[string]string{
		interruption.ExecutionName(a.Name, keyA): `{"nodeClaim":"default-aaaaa","node":"node-default-aaaaa","instanceID":"` + instA + `",` +
			`"reason":"instance_status","eventID":"` + keyA + `","deadline":"2030-01-02T03:04:05Z","eventTime":"2030-01-02T03:00:05Z"}`,
		interruption.ExecutionName(c.Name, keyC): `{"nodeClaim":"default-ccccc","node":"node-default-ccccc","instanceID":"` + instC + `",` +
			`"reason":"event_status","eventID":"` + keyC + `","deadline":"2030-01-05T03:04:05Z","eventTime":"2030-01-02T03:04:05Z"}`,
	}
	got := map[string]string{}
	for _, e := range list.Executions {
		desc, err := sf.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: e.ExecutionArn})
		if err != nil {
			t.Fatalf("DescribeExecution() error = %v", err)
		}
		got[aws.ToString(e.Name)] = aws.ToString(desc.Input)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("executions mismatch (-want +got):\n%s", diff)
	}

	recorded, err := st.ListEvents(ctx, clock)
	if err != nil {
		t.Fatalf("ListEvents() error = %v", err)
	}
	var reasons []string
	for _, e := range recorded {
		reasons = append(reasons, e.NodeClaim+" "+e.Type+" "+e.Reason)
	}
	if diff := cmp.Diff([]string{"default-aaaaa Warning TerminatingOnInterruption", "default-ccccc Warning TerminatingOnInterruption"}, reasons,
		cmpopts.SortSlices(func(x, y string) bool { return x < y })); diff != "" {
		t.Errorf("event records mismatch (-want +got):\n%s", diff)
	}
	for _, key := range []string{keyA, keyC} {
		seen, err := st.HasIdempotencyKey(ctx, IdempotencyScope, key, clock.Add(time.Minute))
		if err != nil || !seen {
			t.Errorf("HasIdempotencyKey(%s) = %v, %v; want the occurrence recorded as handled", key, seen, err)
		}
	}
}
