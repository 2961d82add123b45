package fleet_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/catalog"
)

// requestLog is an in-memory fleet.RequestLog: the first body per token
// wins, as ddbstore.PutPayloadOnce does.
type requestLog struct {
	mu     sync.Mutex
	bodies map[string][]byte
	err    error
}

func (l *requestLog) RecordRequest(_ context.Context, token string, body []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	if b, ok := l.bodies[token]; ok {
		return b, nil
	}
	l.bodies[token] = body
	return body, nil
}

// The interleaving of issue "launching twice after a lost CreateFleet
// answer": EC2 launched, the answer never arrived, and before the retry an
// offering of the first request was marked unavailable (and a subnet
// filled up), so the rebuilt request differs under the same ClientToken.
func TestLaunchRetriedAfterALostAnswerGetsTheFirstInstanceAlthoughTheOfferingsChanged(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	claim := nodeClaim()
	log := &requestLog{bodies: map[string][]byte{}}
	c := fleet.New(ec2api)
	first := request(ec2api, claim, instanceType("m5.large", 2, 0.096, 0), instanceType("m5.xlarge", 4, 0.192, 0))
	first.Requests = log
	ec2api.On.CreateFleet.LoseAnswers(1)
	if _, err := c.Launch(t.Context(), first); !errors.Is(err, awstest.ErrAnswerLost) {
		t.Fatalf("first Launch() error = %v, want the lost answer", err)
	}
	if n := len(ec2api.Instances()); n != 1 {
		t.Fatalf("instances after the lost answer = %d, want 1 (EC2 launched)", n)
	}
	launched := aws.ToString(ec2api.Instances()[0].InstanceId)

	retry := request(ec2api, claim,
		instanceType("m5.large", 2, 0.096, 0, unavailableIn("us-east-1a", v1.CapacityTypeOnDemand)),
		instanceType("m5.xlarge", 4, 0.192, 0))
	retry.Subnets[len(retry.Subnets)-1].Unavailable = true
	retry.Requests = log
	got, err := c.Launch(t.Context(), retry)
	if err != nil {
		t.Fatalf("retried Launch() error = %v, want EC2's first answer", err)
	}
	if got.Instance.ID != launched {
		t.Errorf("retry got instance %s, want the first launch's %s", got.Instance.ID, launched)
	}
	if n := len(ec2api.Instances()); n != 1 {
		t.Errorf("instances = %d, want exactly 1", n)
	}
	ins := ec2api.On.CreateFleet.Inputs()
	if len(ins) != 2 || !reflect.DeepEqual(ins[0], ins[1]) {
		t.Errorf("the retry did not send the first request again")
	}
}

// Without the request log the same interleaving is the defect: EC2 refuses
// the rebuilt request. The double must say so, as EC2 does.
func TestRebuiltRequestUnderTheSameTokenIsRefusedWithIdempotentParameterMismatch(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	claim := nodeClaim()
	c := fleet.New(ec2api)
	ec2api.On.CreateFleet.LoseAnswers(1)
	if _, err := c.Launch(t.Context(), request(ec2api, claim, instanceType("m5.large", 2, 0.096, 0), instanceType("m5.xlarge", 4, 0.192, 0))); err == nil {
		t.Fatal("first Launch() succeeded, want the lost answer")
	}
	_, err := c.Launch(t.Context(), request(ec2api, claim, instanceType("m5.large", 2, 0.096, 0, unavailableIn("us-east-1a", v1.CapacityTypeOnDemand)), instanceType("m5.xlarge", 4, 0.192, 0)))
	if code := awserr.Code(err); code != "IdempotentParameterMismatch" {
		t.Errorf("rebuilt Launch() error = %v (code %q), want IdempotentParameterMismatch", err, code)
	}
}

func TestLaunchMakesNoCallWhenTheRequestCannotBeRecorded(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	r := request(ec2api, nodeClaim(), []*catalog.InstanceType{instanceType("m5.large", 2, 0.096, 0)}...)
	r.Requests = &requestLog{err: errors.New("dynamodb: throttled")}
	if _, err := fleet.New(ec2api).Launch(t.Context(), r); err == nil {
		t.Fatal("Launch() succeeded, want the log's error")
	}
	if n := ec2api.On.CreateFleet.Count(); n != 0 {
		t.Errorf("CreateFleet calls = %d, want none before the request is recorded", n)
	}
}
