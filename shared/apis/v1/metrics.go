package v1

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindMetricList is the kind of RouteMetrics' answer.
const KindMetricList = "MetricList"

// Metric names. Each is Karpenter's (v1.14, karpenter.sh/docs/reference/metrics
// and karpenter-spec.md section 10.1), with the same labels, so dashboards
// and alerts written for Karpenter read them unchanged.
const (
	// Stored by the Lambdas (MetricSample, listed by RouteMetrics).
	MetricNodeClaimsCreated    = "karpenter_nodeclaims_created_total"    // counter {reason, nodepool, min_values_relaxed}
	MetricNodeClaimsTerminated = "karpenter_nodeclaims_terminated_total" // counter {nodepool, capacity_type, zone}
	MetricNodeClaimsDisrupted  = "karpenter_nodeclaims_disrupted_total"  // counter {reason, nodepool, capacity_type}
	MetricNodesCreated         = "karpenter_nodes_created_total"         // counter {nodepool}
	MetricNodesTerminated      = "karpenter_nodes_terminated_total"      // counter {nodepool}
	MetricDisruptionDecisions  = "karpenter_voluntary_disruption_decisions_total"
	MetricDisruptionEligible   = "karpenter_voluntary_disruption_eligible_nodes" // gauge {reason}
	MetricInterruptionReceived = "karpenter_interruption_received_messages_total"
	MetricCloudProviderErrors  = "karpenter_cloudprovider_errors_total"
	MetricCloudProviderSeconds = "karpenter_cloudprovider_duration_seconds"
	MetricSchedulingSeconds    = "karpenter_scheduler_scheduling_duration_seconds"
	// MetricNodeClaimsTerminationSeconds is a histogram {nodepool}: from a
	// NodeClaim's deletionTimestamp to its removal from the store (its
	// instance terminated).
	MetricNodeClaimsTerminationSeconds = "karpenter_nodeclaims_termination_duration_seconds"
	// MetricNodesTerminationSeconds is stored as a histogram {nodepool} and
	// served as Karpenter's summary (quantiles 0, 0.5, 0.9, 0.99, 1
	// estimated from the stored buckets): the same span, for a NodeClaim
	// that had a Node.
	MetricNodesTerminationSeconds = "karpenter_nodes_termination_duration_seconds"
	// MetricNodePoolsAllowedDisruptions is a gauge {nodepool, reason}: the
	// nodes a NodePool's budgets let be disrupting at once for a reason
	// (Drifted, Empty, Underutilized; MaxInt32 when no budget applies), set
	// by every disruption evaluation.
	MetricNodePoolsAllowedDisruptions = "karpenter_nodepools_allowed_disruptions"

	// Derived by the forwarder from the cluster it watches.
	MetricNodesAllocatable        = "karpenter_nodes_allocatable"
	MetricNodesTotalPodRequests   = "karpenter_nodes_total_pod_requests"
	MetricNodesTotalPodLimits     = "karpenter_nodes_total_pod_limits"
	MetricNodesTotalDaemonRequest = "karpenter_nodes_total_daemon_requests"
	MetricNodesTotalDaemonLimits  = "karpenter_nodes_total_daemon_limits"
	MetricNodePoolsUsage          = "karpenter_nodepools_usage"
	MetricNodePoolsLimit          = "karpenter_nodepools_limit"
	MetricPodsState               = "karpenter_pods_state"
	MetricPodsStartupSeconds      = "karpenter_pods_startup_duration_seconds"
	MetricSchedulerQueueDepth     = "karpenter_scheduler_queue_depth"
	MetricBuildInfo               = "karpenter_build_info"
)

// MetricType is how a stored sample accumulates.
type MetricType string

// Metric types.
const (
	// MetricCounter: Value only grows, by the increments recorded.
	MetricCounter MetricType = "counter"
	// MetricGauge: Value is the last one set.
	MetricGauge MetricType = "gauge"
	// MetricHistogram: Count, Sum and Buckets (cumulative counts per upper
	// bound, MetricBuckets) of the observations recorded.
	MetricHistogram MetricType = "histogram"
)

// MetricBuckets are the upper bounds (seconds) of every stored histogram:
// Karpenter's duration buckets (its metrics.DurationBuckets, 0.005 s to
// 600 s).
var MetricBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 25, 30, 40, 50, 60, 90, 120, 150, 180, 240, 300, 360, 420, 480, 540, 600}

// MetricSample is one stored series: a metric name and its label values.
type MetricSample struct {
	Name   string            `json:"name"`
	Type   MetricType        `json:"type"`
	Labels map[string]string `json:"labels,omitempty"`
	// Value is a counter's total or a gauge's value.
	Value float64 `json:"value,omitempty"`
	// Count, Sum and Buckets summarise a histogram's observations; Buckets[i]
	// counts those <= MetricBuckets[i].
	Count   uint64   `json:"count,omitempty"`
	Sum     float64  `json:"sum,omitempty"`
	Buckets []uint64 `json:"buckets,omitempty"`
}

// SeriesKey identifies s's series: the name and its labels sorted by name,
// name{k="v",...}, the Prometheus text form.
func (s MetricSample) SeriesKey() string { return SeriesKey(s.Name, s.Labels) }

// SeriesKey is name{k="v",...} with labels sorted by name.
func SeriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// MetricList answers GET RouteMetrics: every stored series, sorted by
// SeriesKey.
type MetricList struct {
	metav1.TypeMeta `json:",inline"`
	Items           []MetricSample `json:"items"`
}
