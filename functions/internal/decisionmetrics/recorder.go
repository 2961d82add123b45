// Package decisionmetrics records the Lambdas' decision metrics (Karpenter's
// karpenter_* names, shared/apis/v1) in the two places they are read: the
// stored series in DynamoDB (ddbstore's METRIC partition), which the
// forwarder serves on /metrics so that counters outlive every process, and
// one CloudWatch embedded-metric-format (EMF) line per update on the
// Lambda's log, which CloudWatch Logs turns into CloudWatch metrics with no
// API call (namespace Namespace, dimensions "cluster" plus every label).
//
// The label rules of each metric (which labels, which values) live here
// only: handlers call the named methods, never AddCounter with hand-built
// labels.
package decisionmetrics

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Namespace is the CloudWatch namespace of the EMF metrics.
const Namespace = "Nodewright"

// Store is where the series are kept (ddbstore.Store).
type Store interface {
	AddCounter(ctx context.Context, name string, labels map[string]string, delta float64) error
	SetGauge(ctx context.Context, name string, labels map[string]string, value float64) error
	Observe(ctx context.Context, name string, labels map[string]string, value float64) error
}

// Recorder writes each update to the store and as one EMF line to out. A
// store error is logged as a warning and does not fail the decision that
// was measured: the metric is behind by that update, the decision stands.
// A nil *Recorder records nothing. Safe for concurrent use.
type Recorder struct {
	store   Store
	out     io.Writer
	log     *slog.Logger
	cluster string
	now     func() time.Time
	mu      sync.Mutex // one EMF line per Write
}

// New returns a recorder for cluster. out is the Lambda's stdout (the
// log stream CloudWatch Logs reads; nil discards the EMF lines and keeps
// storing), now stamps the EMF lines.
func New(store Store, out io.Writer, log *slog.Logger, cluster string, now func() time.Time) *Recorder {
	if out == nil {
		out = io.Discard
	}
	return &Recorder{store: store, out: out, log: log, cluster: cluster, now: now}
}

func (r *Recorder) record(ctx context.Context, typ v1.MetricType, name string, labels map[string]string, value float64) {
	if r == nil {
		return
	}
	var err error
	switch typ {
	case v1.MetricCounter:
		err = r.store.AddCounter(ctx, name, labels, value)
	case v1.MetricGauge:
		err = r.store.SetGauge(ctx, name, labels, value)
	case v1.MetricHistogram:
		err = r.store.Observe(ctx, name, labels, value)
	}
	if err != nil {
		r.log.WarnContext(ctx, "metric not stored", "metric", name, "labels", labels, "error", err)
	}
	r.logEMF(ctx, typ, name, labels, value)
}

// logEMF writes the EMF line of one update to out.
func (r *Recorder) logEMF(ctx context.Context, typ v1.MetricType, name string, labels map[string]string, value float64) {
	line, err := EMF(r.now(), r.cluster, typ, name, labels, value)
	if err != nil {
		r.log.WarnContext(ctx, "metric not logged", "metric", name, "error", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.out.Write(line)
}

// EMF returns one embedded-metric-format log line (with its newline):
// {"_aws":{"Timestamp":<ms>,"CloudWatchMetrics":[{"Namespace":"Nodewright",
// "Dimensions":[["cluster",<labels sorted>...]],"Metrics":[{"Name":name,
// "Unit":"Count"|"Seconds"|"None"}]}]},"cluster":...,<label>:<value>,
// name:value}; an empty label value is logged as "none" (CloudWatch's "Specification: Embedded metric format").
// A counter's value is its increment, a histogram's the observation in
// seconds, a gauge's its value.
func EMF(at time.Time, cluster string, typ v1.MetricType, name string, labels map[string]string, value float64) ([]byte, error) {
	dims := append([]string{"cluster"}, slices.Sorted(maps.Keys(labels))...)
	unit := "None"
	switch typ {
	case v1.MetricCounter:
		unit = "Count"
	case v1.MetricHistogram:
		unit = "Seconds"
	}
	doc := map[string]any{
		"_aws": map[string]any{
			"Timestamp": at.UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  Namespace,
				"Dimensions": [][]string{dims},
				"Metrics":    []any{map[string]string{"Name": name, "Unit": unit}},
			}},
		},
		"cluster": cluster,
		name:      value,
	}
	for k, v := range labels {
		if v == "" {
			v = "none" // CloudWatch drops a metric with an empty dimension value
		}
		doc[k] = v
	}
	line, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// NodeClaimCreated counts karpenter_nodeclaims_created_total{reason,
// nodepool, min_values_relaxed} for a NodeClaim just created (create-only,
// so once): reason is "provisioning", or the lower-cased disruption method
// of the command whose replacement it is (Karpenter's reason label).
func (r *Recorder) NodeClaimCreated(ctx context.Context, claim v1.NodeClaim, reason string) {
	relaxed := "false"
	if claim.Annotations[v1.AnnotationNodeClaimMinValuesRelaxed] == "true" {
		relaxed = "true"
	}
	r.record(ctx, v1.MetricCounter, v1.MetricNodeClaimsCreated, map[string]string{
		"reason": strings.ToLower(reason), "nodepool": claim.Labels[v1.LabelNodePool], "min_values_relaxed": relaxed,
	}, 1)
}

// NodeClaimTerminated counts karpenter_nodeclaims_terminated_total{nodepool,
// capacity_type, zone} for a NodeClaim just deleted from the store, and
// karpenter_nodes_terminated_total{nodepool} when it had a Node. A claim
// marked deleting (deletionTimestamp, set when its termination began) also
// observes the seconds from that mark to now, the recorder's clock, in
// karpenter_nodeclaims_termination_duration_seconds{nodepool} and, with a
// Node, karpenter_nodes_termination_duration_seconds{nodepool}: Karpenter
// measures from the deletion request to the finalizer's removal; here the
// span ends when the instance is terminated and the record deleted, which
// comes after the Node is gone. A claim deleted without the mark (a launch
// that failed, garbage collection) observes nothing, as Karpenter observes
// only claims that went through its termination finalizer.
func (r *Recorder) NodeClaimTerminated(ctx context.Context, claim v1.NodeClaim) {
	pool := claim.Labels[v1.LabelNodePool]
	r.record(ctx, v1.MetricCounter, v1.MetricNodeClaimsTerminated, map[string]string{
		"nodepool": pool, "capacity_type": claim.Labels[v1.LabelCapacityType], "zone": claim.Labels[v1.LabelTopologyZone],
	}, 1)
	if claim.Status.NodeName != "" {
		r.record(ctx, v1.MetricCounter, v1.MetricNodesTerminated, map[string]string{"nodepool": pool}, 1)
	}
	if r == nil || claim.DeletionTimestamp == nil {
		return
	}
	took := max(r.now().Sub(claim.DeletionTimestamp.Time).Seconds(), 0)
	r.record(ctx, v1.MetricHistogram, v1.MetricNodeClaimsTerminationSeconds, map[string]string{"nodepool": pool}, took)
	if claim.Status.NodeName != "" {
		r.record(ctx, v1.MetricHistogram, v1.MetricNodesTerminationSeconds, map[string]string{"nodepool": pool}, took)
	}
}

// AllowedDisruptions sets karpenter_nodepools_allowed_disruptions{nodepool,
// reason} to what one evaluation computed for a NodePool and a budgeted
// reason: reason as Karpenter labels it (its DisruptionReason, "Drifted",
// "Empty", "Underutilized", not lower-cased), allowed the nodes the active
// budgets let be disrupting at once, or negative for no applicable budget,
// served as Karpenter's unlimited (math.MaxInt32).
func (r *Recorder) AllowedDisruptions(ctx context.Context, nodePool, reason string, allowed int) {
	if allowed < 0 {
		allowed = math.MaxInt32
	}
	r.record(ctx, v1.MetricGauge, v1.MetricNodePoolsAllowedDisruptions, map[string]string{"nodepool": nodePool, "reason": reason}, float64(allowed))
}

// NodeRegistered counts karpenter_nodes_created_total{nodepool} for a
// NodeClaim whose Node registered for the first time.
func (r *Recorder) NodeRegistered(ctx context.Context, claim v1.NodeClaim) {
	r.record(ctx, v1.MetricCounter, v1.MetricNodesCreated, map[string]string{"nodepool": claim.Labels[v1.LabelNodePool]}, 1)
}

// NodeClaimDisrupted counts karpenter_nodeclaims_disrupted_total{reason,
// nodepool, capacity_type} for one candidate of an execution just started
// (a name Step Functions had not seen, so once): reason is the lower-cased
// disruption method ("drifted", "underutilized", "empty", "expired") or the
// interruption kind ("spot_interrupted", ...).
func (r *Recorder) NodeClaimDisrupted(ctx context.Context, reason, nodePool, capacityType string) {
	r.record(ctx, v1.MetricCounter, v1.MetricNodeClaimsDisrupted, map[string]string{
		"reason": strings.ToLower(reason), "nodepool": nodePool, "capacity_type": capacityType,
	}, 1)
}

// DisruptionDecision counts karpenter_voluntary_disruption_decisions_total
// {decision, reason, consolidation_type} for a command just started:
// decision "delete" or "replace", consolidation_type "empty", "single" or
// "multi" for Underutilized and Empty, "" otherwise.
func (r *Recorder) DisruptionDecision(ctx context.Context, decision, reason, consolidationType string) {
	r.record(ctx, v1.MetricCounter, v1.MetricDisruptionDecisions, map[string]string{
		"decision": decision, "reason": strings.ToLower(reason), "consolidation_type": consolidationType,
	}, 1)
}

// EligibleNodes sets karpenter_voluntary_disruption_eligible_nodes{reason}
// to the candidates one evaluation found for a method.
func (r *Recorder) EligibleNodes(ctx context.Context, reason string, n int) {
	r.record(ctx, v1.MetricGauge, v1.MetricDisruptionEligible, map[string]string{"reason": strings.ToLower(reason)}, float64(n))
}

// InterruptionReceived counts karpenter_interruption_received_messages_total
// {message_type} for a queue message seen for the first time.
func (r *Recorder) InterruptionReceived(ctx context.Context, messageType string) {
	r.record(ctx, v1.MetricCounter, v1.MetricInterruptionReceived, map[string]string{"message_type": messageType}, 1)
}

// CloudProviderCall observes karpenter_cloudprovider_duration_seconds
// {controller, method, provider="aws"} and, when errName is not empty,
// counts karpenter_cloudprovider_errors_total{controller, method, provider,
// error}.
func (r *Recorder) CloudProviderCall(ctx context.Context, controller, method string, took time.Duration, errName string) {
	labels := map[string]string{"controller": controller, "method": method, "provider": "aws"}
	r.record(ctx, v1.MetricHistogram, v1.MetricCloudProviderSeconds, labels, took.Seconds())
	if errName != "" {
		errLabels := maps.Clone(labels)
		errLabels["error"] = errName
		r.record(ctx, v1.MetricCounter, v1.MetricCloudProviderErrors, errLabels, 1)
	}
}

// SchedulingRound observes karpenter_scheduler_scheduling_duration_seconds
// {controller="provisioner"} for one provisioning round that solved.
func (r *Recorder) SchedulingRound(ctx context.Context, took time.Duration) {
	r.record(ctx, v1.MetricHistogram, v1.MetricSchedulingSeconds, map[string]string{"controller": "provisioner"}, took.Seconds())
}

// CloudWatch-only metrics: the dashboard's series that no stored series
// backs. The forwarder serves the same facts from its snapshot
// (karpenter_scheduler_queue_depth) or they have no Karpenter counterpart
// (the nodewright_* names), so they are logged as EMF and never written
// to the store.
const (
	// MetricUnschedulablePods is Karpenter's
	// karpenter_scheduler_unschedulable_pods_count gauge {controller}.
	MetricUnschedulablePods = "karpenter_scheduler_unschedulable_pods_count"
	// MetricNodesConsumingBudgets is Karpenter's
	// karpenter_nodepools_nodes_consuming_budgets gauge {nodepool, reason}
	// (karpenter-spec.md section 10.1).
	MetricNodesConsumingBudgets = "karpenter_nodepools_nodes_consuming_budgets"
	// MetricBlockedNodes is nodewright's gauge {reason}: the NodeClaims
	// one disruption evaluation left out, by the event reason recorded for
	// them (DisruptionBlocked, Unconsolidatable, or Waiting when none is:
	// a spent budget, consolidateAfter running, another method acting).
	MetricBlockedNodes = "nodewright_disruption_blocked_nodes"
	// MetricFirstEviction is nodewright's histogram {message_type}: seconds
	// from an interruption event's time to the first drain round of its
	// execution that evicted or deleted a pod.
	MetricFirstEviction = "nodewright_interruption_first_eviction_seconds"
)

// BlockedWaiting is MetricBlockedNodes' reason for a NodeClaim left out
// without an event.
const BlockedWaiting = "Waiting"

// emit logs one EMF line for a CloudWatch-only metric (not stored).
func (r *Recorder) emit(ctx context.Context, typ v1.MetricType, name string, labels map[string]string, value float64) {
	if r == nil {
		return
	}
	r.logEMF(ctx, typ, name, labels, value)
}

// PendingPods sets karpenter_scheduler_queue_depth{controller="provisioner"}
// to the pods of a provisioning round and
// karpenter_scheduler_unschedulable_pods_count{controller="provisioner"} to
// those it could not place (CloudWatch only).
func (r *Recorder) PendingPods(ctx context.Context, pending, unschedulable int) {
	labels := map[string]string{"controller": "provisioner"}
	r.emit(ctx, v1.MetricGauge, v1.MetricSchedulerQueueDepth, labels, float64(pending))
	r.emit(ctx, v1.MetricGauge, MetricUnschedulablePods, labels, float64(unschedulable))
}

// NodesConsumingBudgets sets karpenter_nodepools_nodes_consuming_budgets
// {nodepool, reason} to the pool's nodes already disrupting (NotReady or
// being deleted) as one evaluation counted them against its budgets for
// reason (CloudWatch only). reason is the budget reason as
// karpenter_nodepools_allowed_disruptions (AllowedDisruptions, stored)
// labels it: Drifted, Empty or Underutilized.
func (r *Recorder) NodesConsumingBudgets(ctx context.Context, nodePool, reason string, disrupting int) {
	r.emit(ctx, v1.MetricGauge, MetricNodesConsumingBudgets, map[string]string{"nodepool": nodePool, "reason": reason}, float64(disrupting))
}

// BlockedNodes sets nodewright_disruption_blocked_nodes{reason} to n
// (CloudWatch only); reason is DisruptionBlocked, Unconsolidatable or
// BlockedWaiting.
func (r *Recorder) BlockedNodes(ctx context.Context, reason string, n int) {
	r.emit(ctx, v1.MetricGauge, MetricBlockedNodes, map[string]string{"reason": reason}, float64(n))
}

// FirstEviction observes nodewright_interruption_first_eviction_seconds
// {message_type} (CloudWatch only): took is from the interruption event's
// time to the drain round that first evicted a pod.
func (r *Recorder) FirstEviction(ctx context.Context, messageType string, took time.Duration) {
	r.emit(ctx, v1.MetricHistogram, MetricFirstEviction, map[string]string{"message_type": messageType}, took.Seconds())
}
