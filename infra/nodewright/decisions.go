package nodewright

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"
)

// emfNamespace is the CloudWatch namespace of the Lambdas' decision
// metrics (functions/internal/decisionmetrics.Namespace), which they log in
// CloudWatch's embedded metric format.
const emfNamespace = "Nodewright"

// emfMetric is one decision metric as the Lambdas emit it: its name and
// its whole dimension set ("cluster", then the labels sorted), which a
// SEARCH must name exactly to find its series. The list the Lambdas emit
// is functions/internal/decisionmetrics/testdata/emf-metrics.json; the
// dashboard test holds these to it.
type emfMetric struct {
	name string
	dims []string
}

// The decision metrics the dashboard graphs.
var (
	emfQueueDepth     = emfMetric{"karpenter_scheduler_queue_depth", []string{"cluster", "controller"}}
	emfUnschedulable  = emfMetric{"karpenter_scheduler_unschedulable_pods_count", []string{"cluster", "controller"}}
	emfCreated        = emfMetric{"karpenter_nodeclaims_created_total", []string{"cluster", "min_values_relaxed", "nodepool", "reason"}}
	emfCloudErrors    = emfMetric{"karpenter_cloudprovider_errors_total", []string{"cluster", "controller", "error", "method", "provider"}}
	emfDecisions      = emfMetric{"karpenter_voluntary_disruption_decisions_total", []string{"cluster", "consolidation_type", "decision", "reason"}}
	emfBlocked        = emfMetric{"nodewright_disruption_blocked_nodes", []string{"cluster", "reason"}}
	emfAllowed        = emfMetric{"karpenter_nodepools_allowed_disruptions", []string{"cluster", "nodepool", "reason"}}
	emfConsuming      = emfMetric{"karpenter_nodepools_nodes_consuming_budgets", []string{"cluster", "nodepool", "reason"}}
	emfInterruptions  = emfMetric{"karpenter_interruption_received_messages_total", []string{"cluster", "message_type"}}
	emfFirstEviction  = emfMetric{"nodewright_interruption_first_eviction_seconds", []string{"cluster", "message_type"}}
	emfDisruptedTotal = emfMetric{"karpenter_nodeclaims_disrupted_total", []string{"cluster", "capacity_type", "nodepool", "reason"}}
)

// search is a CloudWatch SEARCH expression over m's series of this
// cluster, with the extra dimension filters (key=value, each one of m's
// dimensions), aggregated by stat over alarmPeriod; each series it finds
// is labelled by its dimension values.
func (d *deployment) search(m emfMetric, stat string, filters ...string) awscloudwatch.IMetric {
	var where strings.Builder
	fmt.Fprintf(&where, "MetricName=%q cluster=%q", m.name, d.props.Cluster.Name)
	for _, f := range filters {
		k, v, _ := strings.Cut(f, "=")
		fmt.Fprintf(&where, " %s=%q", k, v)
	}
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(fmt.Sprintf("SEARCH('{%s,%s} %s', '%s', %d)",
			emfNamespace, strings.Join(m.dims, ","), where.String(), stat, int(*alarmPeriod.ToSeconds(nil)))),
		Label:  jsii.String(""),
		Period: alarmPeriod,
	})
}

// decisionRows are the dashboard rows of the Lambdas' decision metrics
// (karpenter_* names, CloudWatch EMF; docs/operations.md):
//   - provisioning: pending pods (pods of each provisioning round and
//     those it could not place), NodeClaims launched by NodePool,
//     insufficient-capacity errors of CreateFleet;
//   - disruption: commands by method and decision, NodeClaims disrupted
//     by reason, blocked nodes by the event reason recorded for them,
//     budget use (allowed disruptions and nodes consuming them, per
//     NodePool and reason);
//   - interruption: messages by kind, time from the interruption event to
//     the first eviction.
func (d *deployment) decisionRows() [][]awscloudwatch.IWidget {
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(8)})
	}
	return [][]awscloudwatch.IWidget{
		{
			graph("Provisioning: pending pods", d.search(emfQueueDepth, "Maximum"), d.search(emfUnschedulable, "Maximum")),
			graph("Provisioning: NodeClaims launched", d.search(emfCreated, "Sum", "reason=provisioning")),
			graph("Provisioning: insufficient capacity errors", d.search(emfCloudErrors, "Sum", "error=InsufficientCapacityError")),
		},
		{
			graph("Disruption: commands by method", d.search(emfDecisions, "Sum"), d.search(emfDisruptedTotal, "Sum")),
			graph("Disruption: blocked nodes by reason", d.search(emfBlocked, "Maximum")),
			graph("Disruption: budget use", d.search(emfAllowed, "Minimum"), d.search(emfConsuming, "Maximum")),
		},
		{
			graph("Interruption: events by kind", d.search(emfInterruptions, "Sum")),
			graph("Interruption: time to first eviction (s)", d.search(emfFirstEviction, "Maximum"), d.search(emfFirstEviction, "Average")),
		},
	}
}
