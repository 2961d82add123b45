package nodewright

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"
)

// interruptionRule is one EventBridge rule of Karpenter's interruption
// infrastructure (karpenter-spec 8.1): every rule targets the interruption
// queue.
type interruptionRule struct {
	id         string
	source     string
	detailType string
}

var interruptionRules = []interruptionRule{
	{id: "ScheduledChangeRule", source: "aws.health", detailType: "AWS Health Event"},
	{id: "SpotInterruptionRule", source: "aws.ec2", detailType: "EC2 Spot Instance Interruption Warning"},
	{id: "RebalanceRule", source: "aws.ec2", detailType: "EC2 Instance Rebalance Recommendation"},
	{id: "InstanceStateChangeRule", source: "aws.ec2", detailType: "EC2 Instance State-change Notification"},
	{id: "CapacityReservationInterruptionRule", source: "aws.ec2", detailType: "EC2 Capacity Reservation Instance Interruption Warning"},
}

// newInterruptionRules routes the interruption events to the interruption
// queue when it is deployed. The queue policy each target adds admits
// events.amazonaws.com only, and only from that rule (aws:SourceArn).
// Events EventBridge cannot deliver within the queue's retention go to the
// queue's DLQ (the standard one, standardDeadLetters).
func newInterruptionRules(d *deployment) {
	q, ok := d.queues[queueInterruption]
	if !ok {
		return
	}
	for _, r := range interruptionRules {
		rule := awsevents.NewRule(d.scope, jsii.String(r.id), &awsevents.RuleProps{
			Description: jsii.String("nodewright " + d.props.Cluster.Name + ": " + r.detailType + " -> interruption queue"),
			EventPattern: &awsevents.EventPattern{
				Source:     jsii.Strings(r.source),
				DetailType: jsii.Strings(r.detailType),
			},
		})
		rule.AddTarget(awseventstargets.NewSqsQueue(q.queue, &awseventstargets.SqsQueueProps{
			DeadLetterQueue: q.dlq,
			MaxEventAge:     awscdk.Duration_Seconds(jsii.Number(q.spec.retention.Seconds())),
		}))
	}
}

// newTriggers connects each function to what invokes it (the API is wired
// in api.go): queue consumers through an event source mapping that
// reports partial batch failures (STYLE rule 9), scheduled functions
// through an EventBridge Scheduler schedule. A scheduled run is never
// retried, by the scheduler or by Lambda: the next one comes within the
// period anyway, and retries would only overlap it.
func newTriggers(d *deployment, specs []functionSpec) {
	for _, spec := range specs {
		f := d.functions[spec.name]
		switch spec.trigger.kind {
		case triggerQueue:
			f.fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(d.queues[spec.trigger.queue].queue, &awslambdaeventsources.SqsEventSourceProps{
				BatchSize:               jsii.Number(float64(spec.trigger.batchSize)),
				ReportBatchItemFailures: jsii.Bool(true),
			}))
		case triggerSchedule:
			newSchedule(d, f)
		}
	}
}

// newSchedule invokes f every f.spec.trigger.every through EventBridge
// Scheduler, with a role of its own that may invoke exactly f and write
// undeliverable invocations to the standard DLQ (standardDeadLetters).
func newSchedule(d *deployment, f *builtFunction) {
	dlq := standardDeadLetters(d)
	every := f.spec.trigger.every
	id := camel(f.spec.name) + "Schedule"
	role := awsiam.NewRole(d.scope, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewPrincipalWithConditions(awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), nil), &map[string]any{
			"StringEquals": map[string]any{"aws:SourceAccount": d.stack.Account()},
		}),
		Description: jsii.String("nodewright schedule of " + f.spec.name),
	})
	role.AddToPrincipalPolicy(statement("InvokeFunction", []string{"lambda:InvokeFunction"}, []*string{f.fn.FunctionArn()}, nil))
	role.AddToPrincipalPolicy(statement("DeadLetter", []string{"sqs:SendMessage"}, []*string{dlq.QueueArn()}, nil))
	f.fn.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(every.Seconds())),
	})
	schedule := awsscheduler.NewCfnSchedule(d.scope, jsii.String(id), &awsscheduler.CfnScheduleProps{
		Description:        jsii.String("nodewright " + d.props.Cluster.Name + ": " + f.spec.name + " every " + every.String()),
		ScheduleExpression: jsii.String(rateExpression(every)),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
		State:              jsii.String("ENABLED"),
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:              f.fn.FunctionArn(),
			RoleArn:          role.RoleArn(),
			RetryPolicy:      &awsscheduler.CfnSchedule_RetryPolicyProperty{MaximumRetryAttempts: jsii.Number(0), MaximumEventAgeInSeconds: jsii.Number(every.Seconds())},
			DeadLetterConfig: &awsscheduler.CfnSchedule_DeadLetterConfigProperty{Arn: dlq.QueueArn()},
		},
	})
	// The schedule must not fire before its role may invoke the function.
	schedule.Node().AddDependency(role)
}

// rateExpression renders a whole number of minutes as a Scheduler rate
// (the functions table uses only minutes).
func rateExpression(every time.Duration) string {
	n := int(every / time.Minute)
	if n == 1 {
		return "rate(1 minute)"
	}
	return fmt.Sprintf("rate(%d minutes)", n)
}
