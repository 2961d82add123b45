package stepfunctions_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/stepfunctions"
)

// newService serves the sample machine as "sample" behind the real Step
// Functions client.
func newService(t *testing.T) (*sfn.Client, *stepfunctions.Service, string) {
	t.Helper()
	r, _ := runner(t)
	svc := stepfunctions.NewService(r)
	t.Cleanup(svc.Close)
	arn, err := svc.Register("sample", sample(t))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(svc)
	t.Cleanup(hs.Close)
	client := sfn.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")},
		func(o *sfn.Options) { o.BaseEndpoint = aws.String(hs.URL) })
	return client, svc, arn
}

func wait(t *testing.T, svc *stepfunctions.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := svc.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestServiceRunsStartedExecutions(t *testing.T) {
	client, svc, arn := newService(t)
	start, err := client.StartExecution(t.Context(), &sfn.StartExecutionInput{
		StateMachineArn: &arn, Name: aws.String("run-1"), Input: aws.String(`{"n":1,"fail":"","pause":0}`),
	})
	if err != nil {
		t.Fatalf("StartExecution() error = %v", err)
	}
	wait(t, svc)
	d, err := client.DescribeExecution(t.Context(), &sfn.DescribeExecutionInput{ExecutionArn: start.ExecutionArn})
	if err != nil {
		t.Fatalf("DescribeExecution() error = %v", err)
	}
	if d.Status != types.ExecutionStatusSucceeded || aws.ToString(d.Name) != "run-1" || d.StopDate == nil {
		t.Errorf("DescribeExecution() = %s %s, want run-1 SUCCEEDED with a stop date", aws.ToString(d.Name), d.Status)
	}
	list, err := client.ListExecutions(t.Context(), &sfn.ListExecutionsInput{StateMachineArn: &arn})
	if err != nil || len(list.Executions) != 1 {
		t.Fatalf("ListExecutions() = %+v, %v; want one execution", list, err)
	}
	h, err := client.GetExecutionHistory(t.Context(), &sfn.GetExecutionHistoryInput{ExecutionArn: start.ExecutionArn})
	if err != nil {
		t.Fatalf("GetExecutionHistory() error = %v", err)
	}
	var kinds []types.HistoryEventType
	for _, e := range h.Events {
		kinds = append(kinds, e.Type)
	}
	want := []types.HistoryEventType{"ExecutionStarted", "TaskStateEntered", "TaskStateExited", "ChoiceStateEntered", "ChoiceStateExited",
		"WaitStateEntered", "WaitStateExited", "PassStateEntered", "PassStateExited", "TaskStateEntered", "TaskStateExited",
		"ChoiceStateEntered", "ChoiceStateExited", "SucceedStateEntered", "SucceedStateExited", "ExecutionSucceeded"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("history mismatch (-want +got):\n%s", diff)
	}
	if got := svc.Executions(); len(got) != 1 || got[0].Status != "SUCCEEDED" {
		t.Errorf("Executions() = %+v, want one succeeded", got)
	}
}

func TestServiceStartsANameOnce(t *testing.T) {
	client, svc, arn := newService(t)
	in := &sfn.StartExecutionInput{StateMachineArn: &arn, Name: aws.String("once"), Input: aws.String(`{"n":2,"fail":"","pause":0}`)}
	if _, err := client.StartExecution(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	wait(t, svc)
	_, err := client.StartExecution(t.Context(), in)
	var exists *types.ExecutionAlreadyExists
	if !errors.As(err, &exists) {
		t.Errorf("second StartExecution() error = %v, want ExecutionAlreadyExists", err)
	}
	if n := len(svc.Executions()); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
}

func TestServiceErrors(t *testing.T) {
	client, _, _ := newService(t)
	_, err := client.StartExecution(t.Context(), &sfn.StartExecutionInput{StateMachineArn: aws.String("arn:aws:states:us-east-1:000000000000:stateMachine:nope"), Name: aws.String("x")})
	var missing *types.StateMachineDoesNotExist
	if !errors.As(err, &missing) {
		t.Errorf("StartExecution(unknown machine) error = %v, want StateMachineDoesNotExist", err)
	}
	_, err = client.DescribeExecution(t.Context(), &sfn.DescribeExecutionInput{ExecutionArn: aws.String("arn:aws:states:us-east-1:000000000000:execution:sample:nope")})
	var noExec *types.ExecutionDoesNotExist
	if !errors.As(err, &noExec) {
		t.Errorf("DescribeExecution(unknown) error = %v, want ExecutionDoesNotExist", err)
	}
}

func TestServiceRegisterRefusesPlaceholders(t *testing.T) {
	r, _ := runner(t)
	if _, err := stepfunctions.NewService(r).Register("x", []byte(`{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"${Fn}","End":true}}}`)); err == nil {
		t.Error("Register() with a placeholder: error = nil")
	}
}
