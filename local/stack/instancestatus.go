package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	instancestatushandler "github.com/nodewright/nodewright/functions/instancestatus/handler"
	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/meter"
)

// InstanceStatusInterval is how often the local stack runs the
// instance-status poll. The deployed schedule is every minute; locally a
// shorter one lets an impaired instance be handled within seconds of its
// 120 s threshold.
const InstanceStatusInterval = 10 * time.Second

// ImpairedLead is how far in the past ImpairInstance (and `nodewright local
// impair`) dates an impairment: Karpenter acts on a status check impaired
// for 120 s or more (karpenter-spec.md section 8.2), so the next poll
// handles it.
const ImpairedLead = 2 * time.Minute

// startInstanceStatus wires functions/instancestatus next to the
// interruption queue: a ticker invokes its handler every
// InstanceStatusInterval, with the simulator's clock as its now, against
// the simulator's DescribeInstanceStatus, the stack's table and the
// interruption state machine (machineARN, registered by startInterruption)
// on the shared local Step Functions.
func (s *Stack) startInstanceStatus(runCtx context.Context, env map[string]string, machineARN string, ddb *dynamodb.Client) error {
	senv := maps.Clone(env)
	senv["STATE_MACHINE_ARN"] = machineARN
	cfg, err := instancestatushandler.LoadConfig(func(k string) string { return senv[k] })
	if err != nil {
		return fmt.Errorf("instancestatus config: %w", err)
	}
	loop := &http.Client{Transport: ec2sim.LoopbackTransport(http.DefaultTransport.(*http.Transport).Clone())}
	ec2Client := ec2.New(ec2.Options{Region: s.opts.Region, BaseEndpoint: aws.String(s.SimURL),
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""), HTTPClient: loop})
	h, err := instancestatushandler.New(cfg, instancestatushandler.Clients{DynamoDB: ddb, EC2: ec2Client, SFN: s.sfn},
		s.functionLog("instancestatus"), s.Sim.Now)
	if err != nil {
		return fmt.Errorf("instancestatus: %w", err)
	}
	log := s.log.With("component", "instancestatus-schedule")
	s.goLoop(runCtx, func(ctx context.Context) error {
		t := time.NewTicker(InstanceStatusInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				ictx := meter.WithCaller(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "local-instancestatus"}), "instancestatus")
				s.meter.Scheduled("instancestatus")
				_, err := meter.Timed(s.meter, "instancestatus", func() (instancestatushandler.Output, error) { return h.Handle(ictx, json.RawMessage(`{}`)) })
				if err != nil && ctx.Err() == nil {
					log.Warn("instancestatus invocation failed", "err", err)
				}
			}
		}
	})
	return nil
}

// ImpairInstance makes one status check (ec2sim.CheckInstance or
// ec2sim.CheckSystem) of the instance behind a Node (named as for
// InterruptNode) impaired since ImpairedLead ago, and returns the
// instance's health. When Wired().Interrupts, the next instance-status
// poll (within InstanceStatusInterval) starts an interruption execution
// that drains the Node forcefully (Karpenter's instance_status or
// system_status kind: no grace). It fails for an unknown check or an
// unknown or terminating instance.
func (s *Stack) ImpairInstance(_ context.Context, node, check string) (ec2sim.InstanceHealth, error) {
	in, err := s.instanceOf(node)
	if err != nil {
		return ec2sim.InstanceHealth{}, err
	}
	h, err := s.Sim.SetStatus(in.ID, check, true, s.Sim.Now().Add(-ImpairedLead))
	if err != nil {
		return ec2sim.InstanceHealth{}, fmt.Errorf("impair node %s: %w", node, err)
	}
	return h, nil
}
