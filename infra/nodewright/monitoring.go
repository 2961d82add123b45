package nodewright

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"
)

// newForwarderAlarms creates the two alarms about the in-cluster forwarder.
// A live forwarder posts a snapshot every 30 s, so an alarm
// period without one means it is dead or not elected; a forwarder whose
// posts are refused is paged by ApiClientErrorsAlarm (4xx) or, for 5xx,
// ApiServerErrorsAlarm, so the silent alarm needs only the post count (one
// alarm metric, $0.10 a month, where "count less refusals" took three).
// Both treat missing data as breaching: API Gateway publishes nothing for
// an API nobody calls, and a forwarder that calls nothing is the failure.
//   - ForwarderSilentAlarm: fewer than one POST /v1/snapshots (Count of that
//     method) in five minutes;
//   - ApiClientErrorsAlarm: any request answered 4xx (the forwarder's role,
//     endpoint or cluster name is wrong; the forwarder also writes an Event
//     on its Deployment).
func newForwarderAlarms(d *deployment, action awscloudwatch.IAlarmAction) []awscloudwatch.Alarm {
	posted := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:  jsii.String("AWS/ApiGateway"),
		MetricName: jsii.String("Count"),
		DimensionsMap: &map[string]*string{
			"ApiName": d.api.RestApiName(), "Stage": jsii.String(apiStage),
			"Resource": jsii.String(snapshotRoute.path), "Method": jsii.String(snapshotRoute.method),
		},
		Period:    alarmPeriod,
		Statistic: jsii.String("Sum"),
	})
	missing := awscloudwatch.TreatMissingData_BREACHING
	return []awscloudwatch.Alarm{
		newAlarm(d, action, alarmSpec{id: "ForwarderSilentAlarm",
			desc:   "the forwarder posted no snapshot for 5 minutes (forwarder down or no leader; refused posts page ApiClientErrorsAlarm or ApiServerErrorsAlarm: docs/troubleshooting.md)",
			metric: posted, threshold: 1, op: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD, missing: missing}),
		newAlarm(d, action, alarmSpec{id: "ApiClientErrorsAlarm",
			desc:      "the intake API refused requests (4xx: the forwarder's IAM role, API endpoint or cluster name; kubectl -n nodewright describe deployment nodewright-forwarder)",
			metric:    d.api.MetricClientError(&awscloudwatch.MetricOptions{Period: alarmPeriod, Statistic: jsii.String("Sum")}),
			threshold: 1, op: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD, missing: missing}),
	}
}

// alarmSpec is one alarm: one evaluation period of metric against
// threshold.
type alarmSpec struct {
	id, desc  string
	metric    awscloudwatch.IMetric
	threshold float64
	op        awscloudwatch.ComparisonOperator
	missing   awscloudwatch.TreatMissingData
}

// newAlarm creates the alarm of spec, notifying action when it is not nil.
func newAlarm(d *deployment, action awscloudwatch.IAlarmAction, spec alarmSpec) awscloudwatch.Alarm {
	a := awscloudwatch.NewAlarm(d.scope, jsii.String(spec.id), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String("nodewright " + d.props.Cluster.Name + ": " + spec.desc),
		Metric:             spec.metric,
		Threshold:          jsii.Number(spec.threshold),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: spec.op,
		TreatMissingData:   spec.missing,
	})
	if action != nil {
		a.AddAlarmAction(action)
	}
	return a
}

// alarmPeriod is the period of every alarm: long enough to smooth single
// data points, short enough to page within minutes.
var alarmPeriod = awscdk.Duration_Minutes(jsii.Number(5))

// provisioningAgeLimit: a provisioning message older than this means the
// cluster's message group is stuck (pods stay pending).
const provisioningAgeLimit = 10 * 60

// newMonitoring creates the alarms (any failed Lambda invocation, any
// message in a dead-letter queue, any failed or aborted state machine
// execution, any intake 5xx, a stuck provisioning queue) and, when
// Props.Dashboard is set,
// one dashboard showing them with the traffic behind them, then the Lambdas'
// decision metrics (decisionRows). Alarms notify Props.AlarmTopicARN when set.
func newMonitoring(d *deployment) {
	var action awscloudwatch.IAlarmAction
	if arn := d.props.AlarmTopicARN; arn != "" {
		action = awscloudwatchactions.NewSnsAction(awssns.Topic_FromTopicArn(d.scope, jsii.String("AlarmTopic"), jsii.String(arn)))
	}
	var alarms []awscloudwatch.Alarm
	alarm := func(id, desc string, metric awscloudwatch.IMetric, threshold float64) {
		alarms = append(alarms, newAlarm(d, action, alarmSpec{id: id, desc: desc, metric: metric, threshold: threshold,
			op: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD, missing: awscloudwatch.TreatMissingData_NOT_BREACHING}))
	}
	sum := &awscloudwatch.MetricOptions{Period: alarmPeriod, Statistic: jsii.String("Sum")}
	maximum := &awscloudwatch.MetricOptions{Period: alarmPeriod, Statistic: jsii.String("Maximum")}

	alarm("FunctionErrorsAlarm", "a Lambda invocation failed: its handler returned an error or panicked, it timed out or its process crashed "+
		"(the lines in the functions' log groups: docs/troubleshooting.md)", functionErrors(d), 1)
	var fnErrors, fnInvocations, fnDuration, fnThrottles []awscloudwatch.IMetric
	for _, name := range slices.Sorted(maps.Keys(d.functions)) {
		f := d.functions[name]
		label := &awscloudwatch.MetricOptions{Label: jsii.String(name)}
		fnErrors = append(fnErrors, f.fn.MetricErrors(label))
		fnInvocations = append(fnInvocations, f.fn.MetricInvocations(label))
		fnThrottles = append(fnThrottles, f.fn.MetricThrottles(label))
		fnDuration = append(fnDuration, f.fn.MetricDuration(&awscloudwatch.MetricOptions{Label: jsii.String(name + " p99"), Statistic: jsii.String("p99")}))
	}

	// One alarm per dead-letter queue: a FIFO queue's own, and the one
	// standard DLQ every standard source shares (queues.go
	// standardDeadLetters).
	dlqs := map[string]awssqs.Queue{}
	var queueDepth, queueAge []awscloudwatch.IMetric
	for _, name := range slices.Sorted(maps.Keys(d.queues)) {
		q := d.queues[name]
		if q.spec.fifo {
			dlqs[camel(name)] = q.dlq
		}
		queueDepth = append(queueDepth, q.queue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Label: jsii.String(name)}))
		queueAge = append(queueAge, q.queue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Label: jsii.String(name), Statistic: jsii.String("Maximum")}))
	}
	if d.deadLetters != nil {
		dlqs[""] = d.deadLetters
	}
	var dlqDepth []awscloudwatch.IMetric
	for _, name := range slices.Sorted(maps.Keys(dlqs)) {
		what := "messages in the " + strings.ToLower(name) + " dead-letter queue"
		if name == "" {
			what = "messages in the dead-letter queue (interruption messages that failed 3 deliveries, interruption events EventBridge could not deliver, schedule invocations Scheduler could not deliver)"
		}
		alarm(name+"DeadLetterAlarm", what, dlqs[name].MetricApproximateNumberOfMessagesVisible(maximum), 1)
		label := strings.TrimSpace(strings.ToLower(name) + " DLQ")
		dlqDepth = append(dlqDepth, dlqs[name].MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Label: jsii.String(label), Statistic: jsii.String("Maximum")}))
	}
	if q, ok := d.queues[queueProvisioning]; ok {
		alarm("ProvisioningQueueStuckAlarm", "the oldest provisioning message waits for 10 minutes or more (pods stay pending)",
			q.queue.MetricApproximateAgeOfOldestMessage(maximum), provisioningAgeLimit)
	}

	var smStarted, smFailed []awscloudwatch.IMetric
	for i, name := range slices.Sorted(maps.Keys(d.machines)) {
		sm := d.machines[name].sm
		// Metric IDs must be unique within a graph that shows every machine.
		// ExecutionsTimedOut is left out: no machine has an execution
		// timeout (no top-level TimeoutSeconds; TestStateMachinesHaveNoExecutionTimeout),
		// so it is always 0 and would cost an alarm metric for nothing.
		f, a := fmt.Sprintf("failed%d", i), fmt.Sprintf("aborted%d", i)
		failed := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf("FILL(%s, 0) + FILL(%s, 0)", f, a)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				f: sm.MetricFailed(sum), a: sm.MetricAborted(sum),
			},
			Label:  jsii.String(name + " failed or aborted"),
			Period: alarmPeriod,
		})
		// The alarm watches ExecutionsFailed alone: nodewright never stops
		// an execution, so an aborted one is an operator's StopExecution,
		// and once its claims' lease lapses the disruption run's stale-claim
		// sweep gives its nodes back (termination.Service.ReleaseStale); ExecutionsAborted
		// would be one more alarm metric ($0.10 a month) paging for it.
		alarm(camel(name)+"FailedExecutionsAlarm", "executions of state machine "+name+" failed (an aborted one is an operator's: its nodes are given back when its claims' lease lapses)",
			sm.MetricFailed(sum), 1)
		smStarted = append(smStarted, sm.MetricStarted(&awscloudwatch.MetricOptions{Label: jsii.String(name + " started")}))
		smFailed = append(smFailed, failed)
	}

	alarm("ApiServerErrorsAlarm", "the intake API answered 5xx", d.api.MetricServerError(sum), 1)
	alarms = append(alarms, newForwarderAlarms(d, action)...)
	if !d.props.Dashboard {
		return
	}

	graph := func(title string, left []awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &left, Width: jsii.Number(8)})
	}
	alarmRefs := make([]interfacesawscloudwatch.IAlarmRef, len(alarms))
	for i, a := range alarms {
		alarmRefs[i] = a
	}
	rows := [][]awscloudwatch.IWidget{
		{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
			Title: jsii.String("Alarms"), Alarms: &alarmRefs, Width: jsii.Number(24),
		})},
		{
			graph("Intake API requests", []awscloudwatch.IMetric{d.api.MetricCount(nil)}),
			graph("Intake API errors", []awscloudwatch.IMetric{d.api.MetricClientError(nil), d.api.MetricServerError(nil)}),
			graph("Intake API latency p99", []awscloudwatch.IMetric{d.api.MetricLatency(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99")})}),
		},
		{graph("Lambda invocations", fnInvocations), graph("Lambda errors", fnErrors), graph("Lambda duration p99", fnDuration)},
		{graph("Lambda throttles", fnThrottles), graph("Queue depth", queueDepth), graph("Oldest message age (s)", queueAge)},
		{graph("Dead-letter queue depth", dlqDepth)},
	}
	if len(smStarted) > 0 {
		rows[len(rows)-1] = append(rows[len(rows)-1], graph("Executions started", smStarted), graph("Executions failed", smFailed))
	}
	rows = append(rows, d.decisionRows()...)
	widgets := make([]*[]awscloudwatch.IWidget, len(rows))
	for i := range rows {
		widgets[i] = &rows[i]
	}
	awscloudwatch.NewDashboard(d.scope, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{Widgets: &widgets})
}

// The function-error alarm's log lines. CloudWatch bills an alarm per
// metric it watches ($0.10 a month) and a custom metric $0.30 a month
// (https://aws.amazon.com/cloudwatch/pricing/; metric filters themselves
// are free), so every function's failures are counted into one metric by
// metric filters on the functions' log groups, and one alarm watches it:
// $0.40 a month for all of them, where an alarm on each function's Errors
// metric was $0.10 a function. The filters count what Lambda's Errors
// metric counts:
//   - failureMessage: the handler returned an error or panicked; the line
//     functions/internal/lambdakit writes (lambdakit.InvocationFailed,
//     its testdata/invocation-failed.json);
//   - platformErrorTerms: the Lambda platform's own lines in the
//     function's log group when the invocation fails outside the handler:
//     "Task timed out after N seconds" (the timeout), "Runtime exited with
//     error: ..." followed by the error type "Runtime.ExitError" (the
//     process crashed or was killed, out of memory included, or exited
//     during init), "Sandbox.Timedout" (init ran out of time;
//     https://docs.aws.amazon.com/lambda/latest/dg/troubleshooting-invocation.html).
const (
	failureMessageField = "$.message"
	failureMessage      = "invocation failed"
)

var platformErrorTerms = []string{"Task timed out", "Runtime exited", "Runtime.ExitError", "Sandbox.Timedout"}

// functionErrorsMetric is the name, in the Lambdas' namespace
// (emfNamespace), of the metric the filters publish: one per cluster, so
// that two deployments in one account do not page each other (a metric
// filter's dimensions can only come from fields of the line, and the
// platform's lines have none).
func (d *deployment) functionErrorsMetric() string {
	return "FunctionErrors-" + d.props.Cluster.Name
}

// functionErrors adds the two metric filters to every function's log
// group and returns their one metric, summed over alarmPeriod. A filter
// publishes only when a line matches (no default value), so the metric
// has data only in periods with a failure, and the alarm treats missing
// data as not breaching.
func functionErrors(d *deployment) awscloudwatch.IMetric {
	for _, name := range slices.Sorted(maps.Keys(d.functions)) {
		f := d.functions[name]
		for id, pattern := range map[string]awslogs.IFilterPattern{
			"FailureLineFilter":   awslogs.FilterPattern_StringValue(jsii.String(failureMessageField), jsii.String("="), jsii.String(failureMessage)),
			"PlatformErrorFilter": awslogs.FilterPattern_AnyTerm(*jsii.Strings(platformErrorTerms...)...),
		} {
			awslogs.NewMetricFilter(d.scope, jsii.String(camel(name)+id), &awslogs.MetricFilterProps{
				LogGroup:        f.logGroup,
				FilterPattern:   pattern,
				MetricNamespace: jsii.String(emfNamespace),
				MetricName:      jsii.String(d.functionErrorsMetric()),
				MetricValue:     jsii.String("1"),
			})
		}
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:  jsii.String(emfNamespace),
		MetricName: jsii.String(d.functionErrorsMetric()),
		Period:     alarmPeriod,
		Statistic:  jsii.String("Sum"),
	})
}
