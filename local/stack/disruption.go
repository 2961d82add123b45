package stack

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	disruptionhandler "github.com/nodewright/nodewright/functions/decider"
	disrupttaskhandler "github.com/nodewright/nodewright/functions/disrupttask/handler"
	replacehandler "github.com/nodewright/nodewright/functions/replace/handler"
	"github.com/nodewright/nodewright/local/lambdaserver"
	"github.com/nodewright/nodewright/local/meter"
	"github.com/nodewright/nodewright/local/stepfunctions"
	"github.com/nodewright/nodewright/shared/workflow"
)

const account = "111122223333"

// localSFN stands in for the Step Functions StartExecution API
// (sfnstarter.API): each execution runs the repository's state machine
// definition on aws-local-stepfunctions (local/stepfunctions, a Node 22
// subprocess) in the background, its Lambda tasks invoking the real
// handlers through local/lambdaserver. Names are unique per state machine,
// as Step Functions keeps them for 90 days: a reused name fails with
// ExecutionAlreadyExists.
type localSFN struct {
	runner *stepfunctions.Runner
	defs   map[string][]byte // state machine ARN -> definition; guarded by mu
	ctx    context.Context   //nolint:containedctx // the stack's lifetime, not a request's: executions outlive StartExecution
	wg     *sync.WaitGroup
	log    *slog.Logger

	mu    sync.Mutex
	names map[string]bool
	// runs are the executions started, in start order.
	runs []*Execution
	// meter counts the executions' state transitions.
	meter *meter.Meter
}

// Execution is one disruption execution the local Step Functions ran or
// runs, as Stack.Executions reports it.
type Execution struct {
	// Name is the execution name the disruption handler chose
	// (termination.ExecutionName: drift-<nodeclaim>-<hash>, ...).
	Name string
	// ARN is the execution's ARN.
	ARN string
	// Started and Finished are wall-clock times; Finished is zero while the
	// execution runs.
	Started, Finished time.Time
	// Status is RUNNING until the execution ends, then SUCCEEDED, FAILED,
	// ABORTED or TIMED_OUT (Step Functions' ExecutionStatus), or ERROR
	// when the runner could not run it.
	Status string
	// Error and Cause describe a failed execution.
	Error, Cause string
	// History is the execution's event history once it finished (states
	// entered and exited with their data, retries, failures).
	History []stepfunctions.Event
}

// Executions returns a copy of the disruption executions started so far,
// in start order; nil when disruption is not wired.
func (s *Stack) Executions() []Execution {
	if s.sfn == nil {
		return nil
	}
	s.sfn.mu.Lock()
	defer s.sfn.mu.Unlock()
	out := make([]Execution, 0, len(s.sfn.runs))
	for _, r := range s.sfn.runs {
		out = append(out, *r)
	}
	return out
}

func (s *localSFN) StartExecution(_ context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	arn, name := aws.ToString(in.StateMachineArn), aws.ToString(in.Name)
	s.mu.Lock()
	def, ok := s.defs[arn]
	if !ok {
		s.mu.Unlock()
		return nil, &sfntypes.StateMachineDoesNotExist{Message: aws.String("State Machine Does Not Exist: '" + arn + "'")}
	}
	if s.names[arn+"/"+name] {
		s.mu.Unlock()
		return nil, &sfntypes.ExecutionAlreadyExists{Message: aws.String("Execution Already Exists: '" + name + "'")}
	}
	s.names[arn+"/"+name] = true
	now := time.Now()
	run := &Execution{Name: name, ARN: executionARN(arn, name), Started: now, Status: "RUNNING"}
	s.runs = append(s.runs, run)
	s.mu.Unlock()
	input := json.RawMessage(aws.ToString(in.Input))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res, err := s.runner.Run(s.ctx, def, stepfunctions.Execution{Name: name, StateMachineARN: arn, Input: input})
		if err == nil {
			s.meter.Transitions(machineName(arn), transitions(res.Events))
		}
		s.mu.Lock()
		run.Finished = time.Now()
		if err != nil {
			run.Status, run.Error = "ERROR", err.Error()
		} else {
			run.Status, run.Error, run.Cause, run.History = string(res.Status), res.Error, res.Cause, res.Events
		}
		s.mu.Unlock()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("execution could not run", "execution", name, "err", err)
			}
			return
		}
		s.log.Info("execution finished", "execution", name, "status", res.Status, "error", res.Error, "cause", res.Cause)
	}()
	return &sfn.StartExecutionOutput{ExecutionArn: aws.String(executionARN(arn, name)), StartDate: &now}, nil
}

// DescribeExecution answers Step Functions' DescribeExecution for the
// executions started here (status RUNNING until the runner returns), and
// ExecutionDoesNotExist for any other ARN.
func (s *localSFN) DescribeExecution(_ context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	arn := aws.ToString(in.ExecutionArn)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if r.ARN != arn {
			continue
		}
		status := sfntypes.ExecutionStatus(r.Status)
		if r.Status == "ERROR" {
			status = sfntypes.ExecutionStatusFailed
		}
		return &sfn.DescribeExecutionOutput{ExecutionArn: &arn, Name: aws.String(r.Name), Status: status, StartDate: aws.Time(r.Started)}, nil
	}
	return nil, &sfntypes.ExecutionDoesNotExist{Message: aws.String("Execution Does Not Exist: '" + arn + "'")}
}

func executionARN(machineARN, name string) string {
	// arn:aws:states:<region>:<account>:stateMachine:<machine> -> ...:execution:<machine>:<name>
	const marker = ":stateMachine:"
	for i := 0; i+len(marker) <= len(machineARN); i++ {
		if machineARN[i:i+len(marker)] == marker {
			return machineARN[:i] + ":execution:" + machineARN[i+len(marker):] + ":" + name
		}
	}
	return machineARN + ":" + name
}

// DisruptionPoll is how often the stack invokes the disruption handler:
// Karpenter's disruption poll period (10 s), where production's
// EventBridge schedule runs the Lambda every minute.
const DisruptionPoll = 10 * time.Second

// startDisruption wires consolidation, drift and expiry when the
// Step Functions runner is installed (`make sfn-deps`): the disruption
// handler on a 10-second ticker (Karpenter's disruption poll period), the
// disrupttask handler behind local/lambdaserver, and the disruption state
// machine (statemachines/disruption.asl.json) on aws-local-stepfunctions.
// It returns false (and logs why) when the runner or the definition is
// missing.
func (s *Stack) startDisruption(runCtx context.Context, env map[string]string, c disruptionClients) (bool, error) {
	runner, err := stepfunctions.Find(filepath.Join(s.opts.RepoRoot, stepfunctions.NPMDir))
	if err != nil {
		s.log.Info("disruption not wired: Step Functions runner missing (make sfn-deps)", "err", err)
		return false, nil
	}
	raw, err := os.ReadFile(filepath.Join(s.opts.RepoRoot, "statemachines", "disruption.asl.json"))
	if err != nil {
		s.log.Info("disruption not wired: no state machine definition", "err", err)
		return false, nil
	}
	region := s.opts.Region
	fnARN := fmt.Sprintf("arn:aws:lambda:%s:%s:function:disrupttask", region, account)
	machineARN := fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:nodewright-disruption", region, account)
	def, err := stepfunctions.Substitute(raw, map[string]string{"DisrupttaskFunctionArn": fnARN})
	if err != nil {
		return false, fmt.Errorf("disruption state machine: %w", err)
	}
	env["STATE_MACHINE_ARN"] = machineARN
	// startInterruption registers this machine when interruption is on;
	// the stale-lease sweep asks it about interruption executions.
	env["INTERRUPTION_STATE_MACHINE_ARN"] = fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:nodewright-interruption", region, account)
	getenv := func(k string) string { return env[k] }
	sfnAPI := &localSFN{defs: map[string][]byte{machineARN: def}, ctx: runCtx, wg: &s.wg, log: s.log.With("component", "stepfunctions"), names: map[string]bool{}, meter: s.meter}
	s.sfn = sfnAPI

	tcfg, err := disrupttaskhandler.LoadConfig(getenv)
	if err != nil {
		return false, fmt.Errorf("disrupttask config: %w", err)
	}
	task, err := disrupttaskhandler.New(tcfg, disrupttaskhandler.Clients{DynamoDB: c.ddb, EC2: c.ec2, SSM: c.ssm, IAM: c.iam, SFN: sfnAPI, Kube: c.kube},
		s.functionLog("disrupttask"), s.now)
	if err != nil {
		return false, fmt.Errorf("disrupttask: %w", err)
	}
	lambdas := lambdaserver.New()
	s.lambdas = lambdas
	if err := lambdas.Register("disrupttask", func(ctx context.Context, in workflow.TaskInput) (any, error) {
		return meter.Timed(s.meter, "disrupttask", func() (any, error) { return task.Handle(meter.WithCaller(ctx, "disrupttask"), in) })
	}); err != nil {
		return false, fmt.Errorf("lambda server: %w", err)
	}
	lambdaURL, err := s.serve(lambdas)
	if err != nil {
		return false, fmt.Errorf("lambda server: %w", err)
	}
	sfnAPI.runner = runner.WithLambda(lambdaURL, region)

	dcfg, err := disruptionhandler.LoadConfig(getenv)
	if err != nil {
		return false, fmt.Errorf("disruption config: %w", err)
	}
	decider, err := disruptionhandler.New(dcfg, disruptionhandler.Clients{DynamoDB: c.ddb, EC2: c.ec2, SSM: c.ssm, IAM: c.iam, SFN: sfnAPI, Kube: c.kube},
		s.functionLog("disruption"), s.now)
	if err != nil {
		return false, fmt.Errorf("disruption: %w", err)
	}
	s.replace = replacehandler.New(decider, s.functionLog("replace"))
	s.goLoop(runCtx, func(ctx context.Context) error {
		t := time.NewTicker(cmp.Or(s.opts.DisruptionPoll, DisruptionPoll))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				ictx := meter.WithCaller(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "local-disruption"}), "disruption")
				begin := time.Now()
				s.meter.Scheduled("disruption")
				out, err := decider.Handle(ictx, nil)
				s.meter.Invocation("disruption", time.Since(begin))
				s.runs.add(newDisruptionRun(begin, time.Since(begin), out, err))
				if err != nil && ctx.Err() == nil {
					s.log.Warn("disruption invocation failed", "err", err)
				}
			}
		}
	})
	return true, nil
}

// DisruptionRun is one invocation of the disruption handler
// (functions/disruption) by the stack's 10-second ticker.
type DisruptionRun struct {
	// At is when the invocation began; Took is its wall time, the figure
	// the disruption Lambda's timeout bounds.
	At   time.Time
	Took time.Duration
	// Snapshot is the ID of the cluster snapshot evaluated; empty when the
	// run skipped (no snapshot or config yet).
	Snapshot string
	// Decided counts the NodeClaims the evaluation placed: the candidates
	// of the commands it started plus the NodeClaims it left undisrupted
	// (Output.Blocked).
	Decided int
	// Commands are the started commands' methods with their candidate
	// counts, in Evaluate's order.
	Commands []DisruptionCommand
	// Err is the invocation's error, if any.
	Err string
}

// DisruptionCommand is one command a DisruptionRun started.
type DisruptionCommand struct {
	Method     string
	Candidates int
}

func newDisruptionRun(at time.Time, took time.Duration, out disruptionhandler.Output, err error) DisruptionRun {
	r := DisruptionRun{At: at, Took: took, Snapshot: out.Snapshot, Decided: out.Blocked}
	for _, st := range out.Started {
		r.Decided += len(st.Candidates)
		r.Commands = append(r.Commands, DisruptionCommand{Method: st.Method, Candidates: len(st.Candidates)})
	}
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// maxDisruptionRuns bounds the runs kept: about 20 minutes of ticks.
const maxDisruptionRuns = 128

// disruptionRuns keeps the latest runs; safe for concurrent use.
type disruptionRuns struct {
	mu   sync.Mutex
	runs []DisruptionRun
}

func (d *disruptionRuns) add(r DisruptionRun) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs = append(d.runs, r)
	if len(d.runs) > maxDisruptionRuns {
		d.runs = append([]DisruptionRun(nil), d.runs[len(d.runs)-maxDisruptionRuns:]...)
	}
}

// DisruptionRuns returns the disruption handler's latest invocations
// (at most 128), oldest first; empty when disruption is not wired.
func (s *Stack) DisruptionRuns() []DisruptionRun {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	return append([]DisruptionRun(nil), s.runs.runs...)
}
