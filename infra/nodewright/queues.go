package nodewright

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// Queue names (queues' rows, and functions' trigger.queue).
const (
	queueProvisioning = "provisioning"
	queueInterruption = "interruption"
)

// queueSpec is one SQS queue with its dead-letter queue.
type queueSpec struct {
	name string
	fifo bool
	// retention bounds how long an undelivered message is worth acting on.
	retention time.Duration
	// maxReceiveCount moves a message to the DLQ after this many failed
	// deliveries.
	maxReceiveCount int
	// visibilityFactor times the consumer's timeout is the visibility
	// timeout: longer than one invocation (a message is never handed to a
	// second consumer while the first still runs), short enough that a
	// crashed invocation's message comes back soon.
	visibilityFactor int
}

// queues is every queue nodewright deploys. A queue is created only when
// a deployed function consumes it (functions.go trigger.queue).
var queues = []queueSpec{
	{
		// intake -> provisioner. FIFO, one message group per cluster: the
		// provisioner's single writer (functions/provisioner). Messages
		// are deduplicated by message ID (the intake sets it). A day-old
		// pod batch is stale (the forwarder posts still-pending pods
		// again), and the intake keeps claim-checked payloads for 4 days,
		// longer than this retention.
		name:             queueProvisioning,
		fifo:             true,
		retention:        24 * time.Hour,
		maxReceiveCount:  5,
		visibilityFactor: 3,
	},
	{
		// EventBridge -> interruption. Karpenter's interruption queue
		// keeps messages 300 s (karpenter-spec 8.1): a two-minute Spot
		// warning is worthless after that.
		name:             queueInterruption,
		retention:        300 * time.Second,
		maxReceiveCount:  3,
		visibilityFactor: 3,
	},
}

// queuePair is a deployed queue and its DLQ (for a standard queue, the
// deployment's one standard DLQ, standardDeadLetters).
type queuePair struct {
	spec  queueSpec
	queue awssqs.Queue
	dlq   awssqs.Queue
}

// deadLetterRetention keeps failed messages for inspection as long as SQS
// allows.
var deadLetterRetention = awscdk.Duration_Days(jsii.Number(14))

// newQueues creates each queue a function in specs consumes, sized to its
// consumer's timeout, encrypted (SSE-SQS) and refusing non-TLS requests. A
// FIFO queue gets a FIFO DLQ of its own (SQS requires a FIFO queue's DLQ
// to be FIFO); a standard queue dead-letters into standardDeadLetters.
func newQueues(d *deployment, specs []functionSpec) {
	for _, q := range queues {
		var consumer *functionSpec
		for i := range specs {
			if specs[i].trigger.kind == triggerQueue && specs[i].trigger.queue == q.name {
				consumer = &specs[i]
			}
		}
		if consumer == nil {
			continue
		}
		id := camel(q.name) + "Queue"
		var dlq awssqs.Queue
		if q.fifo {
			dlq = newDeadLetterQueue(d, id+"DLQ", true)
		} else {
			dlq = standardDeadLetters(d)
		}
		queue := awssqs.NewQueue(d.scope, jsii.String(id), &awssqs.QueueProps{
			Fifo:              fifo(q.fifo),
			RetentionPeriod:   awscdk.Duration_Seconds(jsii.Number(q.retention.Seconds())),
			VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(float64(q.visibilityFactor) * consumer.timeout.Seconds())),
			Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:        jsii.Bool(true),
			DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(float64(q.maxReceiveCount))},
		})
		d.queues[q.name] = &queuePair{spec: q, queue: queue, dlq: dlq}
	}
}

// standardDeadLetters returns the deployment's one standard dead-letter
// queue, creating it on first use. It holds what every standard source
// could not deliver: the interruption queue's messages after
// maxReceiveCount failed receives, the interruption events EventBridge
// could not deliver to that queue (events.go), and the schedule
// invocations EventBridge Scheduler could not deliver (throttled,
// permission denied). One queue, so one alarm (DeadLetterAlarm,
// monitoring.go) pages for all three; a message says which it is by its
// shape (an EventBridge event, or Scheduler's dead-letter event). All
// three sources require a standard queue (Scheduler supports no FIFO DLQ:
// https://docs.aws.amazon.com/scheduler/latest/UserGuide/configuring-schedule-dlq.html).
func standardDeadLetters(d *deployment) awssqs.Queue {
	if d.deadLetters == nil {
		d.deadLetters = newDeadLetterQueue(d, "DeadLetterQueue", false)
	}
	return d.deadLetters
}

// newDeadLetterQueue is one dead-letter queue: the longest retention SQS
// allows, encrypted, TLS only.
func newDeadLetterQueue(d *deployment, id string, isFIFO bool) awssqs.Queue {
	return awssqs.NewQueue(d.scope, jsii.String(id), &awssqs.QueueProps{
		Fifo:            fifo(isFIFO),
		RetentionPeriod: deadLetterRetention,
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
	})
}

func fifo(b bool) *bool {
	if !b {
		return nil
	}
	return jsii.Bool(true)
}
