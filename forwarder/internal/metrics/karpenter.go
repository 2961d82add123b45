package metrics

import (
	"context"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// karpenterHelp is the help text of each Karpenter metric the forwarder
// serves (karpenter.sh/docs/reference/metrics, v1.14).
var karpenterHelp = map[string]string{
	v1.MetricNodeClaimsCreated:       "Number of nodeclaims created in total by nodewright. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed.",
	v1.MetricNodeClaimsTerminated:    "Number of nodeclaims terminated in total by nodewright. Labeled by the owning nodepool, capacity type, and zone.",
	v1.MetricNodeClaimsDisrupted:     "Number of nodeclaims disrupted in total by nodewright. Labeled by reason the nodeclaim was disrupted, the owning nodepool and capacity type.",
	v1.MetricNodesCreated:            "Number of nodes created in total by nodewright. Labeled by owning nodepool.",
	v1.MetricNodesTerminated:         "Number of nodes terminated in total by nodewright. Labeled by owning nodepool.",
	v1.MetricDisruptionDecisions:     "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
	v1.MetricDisruptionEligible:      "Number of nodes eligible for disruption. Labeled by disruption reason.",
	v1.MetricInterruptionReceived:    "Count of interruption messages received for this cluster's instances. Labeled by message type.",
	v1.MetricCloudProviderErrors:     "Total number of errors returned from CloudProvider calls.",
	v1.MetricCloudProviderSeconds:    "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
	v1.MetricSchedulingSeconds:       "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
	v1.MetricNodesAllocatable:        "Node allocatable are the resources allocatable by nodes.",
	v1.MetricNodesTotalPodRequests:   "Node total pod requests are the resources requested by non-DaemonSet pods bound to nodes.",
	v1.MetricNodesTotalDaemonRequest: "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
	v1.MetricNodePoolsUsage:          "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
	v1.MetricNodePoolsLimit:          "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
	v1.MetricPodsState:               "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type and pod phase.",
	v1.MetricSchedulerQueueDepth:     "The number of pods waiting to be scheduled.",
	v1.MetricBuildInfo:               "A metric with a constant '1' value labeled by version from which nodewright was built.",

	v1.MetricNodesTotalPodLimits:          "The resource limits of the non-DaemonSet pods bound to a node.",
	v1.MetricNodesTotalDaemonLimits:       "The resource limits of the DaemonSet pods bound to a node.",
	v1.MetricNodeClaimsTerminationSeconds: "Duration of NodeClaim termination in seconds: from its deletion mark until its instance is terminated and its record deleted.",
	v1.MetricNodesTerminationSeconds:      "The time taken between a node's deletion request and the end of its termination, by owning nodepool; quantiles estimated from the stored buckets.",
	v1.MetricNodePoolsAllowedDisruptions:  "Nodes a NodePool's disruption budgets let be disrupting at once, by NodePool and disruption reason; set by each disruption evaluation.",
	v1.MetricPodsStartupSeconds:           "The time from pod creation until the pod is ready; quantiles over the pods that became ready in the last 10 minutes, count and sum over the active ready pods.",
}

// Cluster is what the forwarder's caches hold for the derived metrics.
type Cluster struct {
	// Nodes and Pods list the informer caches (the pod cache holds active
	// pods only, trimmed to their summary, container limits and their
	// PodScheduled and Ready conditions).
	Nodes func() ([]*corev1.Node, error)
	Pods  func() ([]*corev1.Pod, error)
	// Limits returns each NodePool's spec.limits.
	Limits func() (map[string]corev1.ResourceList, error)
	// NodePools lists the cached NodePools' names; a stored per-NodePool
	// gauge (poolGauges) of a NodePool not listed is not served, as
	// Karpenter deletes those series with their NodePool. Nil (or an
	// error) serves every stored series.
	NodePools func() ([]string, error)
}

// poolGauges are the stored gauges that describe a NodePool's current
// state (labeled nodepool), served only while the NodePool exists.
var poolGauges = map[string]bool{v1.MetricNodePoolsAllowedDisruptions: true}

// Karpenter serves Karpenter's metrics (v1.Metric*): the counters,
// gauges and histograms the Lambdas stored (read through stored, at most
// once per refresh, so a scrape every few seconds costs one API call per
// refresh), and gauges derived from the cluster at each scrape. Every
// value comes from state that outlives the forwarder, so a restarted or
// newly elected replica serves the same counters. A failed read serves the
// last series read (none before the first success).
type Karpenter struct {
	stored  func(ctx context.Context) (v1.MetricList, error)
	cluster Cluster
	version string
	commit  string
	refresh time.Duration
	now     func() time.Time

	mu      sync.Mutex
	last    []v1.MetricSample
	fetched time.Time
}

// NewKarpenter returns the collector; register it with the forwarder's
// registry. refresh bounds how often stored is called (e.g. 10 s).
func NewKarpenter(stored func(ctx context.Context) (v1.MetricList, error), cluster Cluster, version, commit string, refresh time.Duration, now func() time.Time) *Karpenter {
	return &Karpenter{stored: stored, cluster: cluster, version: version, commit: commit, refresh: refresh, now: now}
}

// Describe sends nothing: the label sets of the stored series are known
// only when read, so the collector is unchecked.
func (k *Karpenter) Describe(chan<- *prometheus.Desc) {}

// Collect sends every metric.
func (k *Karpenter) Collect(ch chan<- prometheus.Metric) {
	k.collectStored(ch)
	k.collectCluster(ch)
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(v1.MetricBuildInfo, karpenterHelp[v1.MetricBuildInfo], []string{"version", "goversion", "goarch", "commit"}, nil),
		prometheus.GaugeValue, 1, k.version, runtime.Version(), runtime.GOARCH, k.commit)
}

func (k *Karpenter) samples() []v1.MetricSample {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now := k.now(); k.fetched.IsZero() || now.Sub(k.fetched) >= k.refresh {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if list, err := k.stored(ctx); err == nil {
			k.last, k.fetched = list.Items, now
		}
	}
	return k.last
}

func (k *Karpenter) collectStored(ch chan<- prometheus.Metric) {
	samples := k.samples()
	if k.cluster.NodePools != nil {
		if pools, err := k.cluster.NodePools(); err == nil {
			samples = slices.DeleteFunc(slices.Clone(samples), func(s v1.MetricSample) bool {
				return poolGauges[s.Name] && !slices.Contains(pools, s.Labels["nodepool"])
			})
		}
	}
	// One label set per metric name, the union of its series' labels (a
	// label a series lacks is served empty), as Prometheus requires.
	names := map[string]map[string]bool{}
	for _, s := range samples {
		if names[s.Name] == nil {
			names[s.Name] = map[string]bool{}
		}
		for l := range s.Labels {
			names[s.Name][l] = true
		}
	}
	descs := map[string]*prometheus.Desc{}
	keys := map[string][]string{}
	for name, set := range names {
		keys[name] = slices.Sorted(maps.Keys(set))
		descs[name] = prometheus.NewDesc(name, karpenterHelp[name], keys[name], nil)
	}
	for _, s := range samples {
		values := make([]string, len(keys[s.Name]))
		for i, l := range keys[s.Name] {
			values[i] = s.Labels[l]
		}
		switch s.Type {
		case v1.MetricCounter:
			ch <- prometheus.MustNewConstMetric(descs[s.Name], prometheus.CounterValue, s.Value, values...)
		case v1.MetricGauge:
			ch <- prometheus.MustNewConstMetric(descs[s.Name], prometheus.GaugeValue, s.Value, values...)
		case v1.MetricHistogram:
			if storedSummaries[s.Name] {
				ch <- prometheus.MustNewConstSummary(descs[s.Name], s.Count, s.Sum, bucketQuantiles(s.Count, s.Buckets), values...)
				continue
			}
			buckets := map[float64]uint64{}
			for i, le := range v1.MetricBuckets {
				if i < len(s.Buckets) {
					buckets[le] = s.Buckets[i]
				}
			}
			ch <- prometheus.MustNewConstHistogram(descs[s.Name], s.Count, s.Sum, buckets, values...)
		}
	}
}

// storedSummaries are the stored histograms Karpenter serves as summaries:
// the forwarder serves them as summaries too, so that dashboards querying
// their quantile label read them.
var storedSummaries = map[string]bool{v1.MetricNodesTerminationSeconds: true}

// summaryQuantiles are the quantiles of Karpenter's summaries (its
// metrics.SummaryObjectives: 0, 0.5, 0.9, 0.99, 1).
var summaryQuantiles = []float64{0, 0.5, 0.9, 0.99, 1}

// bucketQuantiles estimates summaryQuantiles from a stored histogram's
// cumulative bucket counts over v1.MetricBuckets (seconds), interpolating
// linearly within the bucket that holds the rank, as PromQL's
// histogram_quantile does: quantile 0 is the lower bound of the first
// non-empty bucket, a rank beyond the last bucket (observations over
// 600 s) is its upper bound. No observation gives NaN, as a summary with
// none does.
func bucketQuantiles(count uint64, buckets []uint64) map[float64]float64 {
	out := make(map[float64]float64, len(summaryQuantiles))
	for _, q := range summaryQuantiles {
		out[q] = math.NaN()
		if count == 0 {
			continue
		}
		rank := q * float64(count)
		out[q] = v1.MetricBuckets[len(v1.MetricBuckets)-1]
		var below uint64
		lower := 0.0
		for i, le := range v1.MetricBuckets {
			if i >= len(buckets) {
				break
			}
			in := buckets[i] - below
			if in > 0 && float64(buckets[i]) >= rank {
				out[q] = lower + (le-lower)*(rank-float64(below))/float64(in)
				break
			}
			below, lower = buckets[i], le
		}
	}
	return out
}

// startupWindow is how far back karpenter_pods_startup_duration_seconds'
// quantiles look: the 10-minute age of a Prometheus summary's
// observations (client_golang's DefMaxAge), which Karpenter's summary
// keeps.
const startupWindow = 10 * time.Minute

// nodeLabels are the labels of Karpenter's karpenter_nodes_* gauges.
var nodeLabels = []string{"node_name", "nodepool", "resource_type", "arch", "capacity_type", "instance_type", "zone"}

func (k *Karpenter) collectCluster(ch chan<- prometheus.Metric) {
	nodes, err := k.cluster.Nodes()
	if err != nil {
		return
	}
	pods, err := k.cluster.Pods()
	if err != nil {
		return
	}
	allocatable := prometheus.NewDesc(v1.MetricNodesAllocatable, karpenterHelp[v1.MetricNodesAllocatable], nodeLabels, nil)
	podRequests := prometheus.NewDesc(v1.MetricNodesTotalPodRequests, karpenterHelp[v1.MetricNodesTotalPodRequests], nodeLabels, nil)
	daemonRequests := prometheus.NewDesc(v1.MetricNodesTotalDaemonRequest, karpenterHelp[v1.MetricNodesTotalDaemonRequest], nodeLabels, nil)
	podLimits := prometheus.NewDesc(v1.MetricNodesTotalPodLimits, karpenterHelp[v1.MetricNodesTotalPodLimits], nodeLabels, nil)
	daemonLimits := prometheus.NewDesc(v1.MetricNodesTotalDaemonLimits, karpenterHelp[v1.MetricNodesTotalDaemonLimits], nodeLabels, nil)
	usage := map[string]corev1.ResourceList{}
	byNode := map[string][]*corev1.Pod{}
	pending := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				pending++
			}
		}
	}
	for _, n := range nodes {
		pool := n.Labels[v1.LabelNodePool]
		if pool == "" {
			continue // not a NodePool's node (Karpenter serves these as N/A; nodewright leaves them out)
		}
		lv := func(res corev1.ResourceName) []string {
			return []string{n.Name, pool, string(res), n.Labels[corev1.LabelArchStable], n.Labels[v1.LabelCapacityType], n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone]}
		}
		pod, daemon := corev1.ResourceList{}, corev1.ResourceList{}
		podLim, daemonLim := corev1.ResourceList{}, corev1.ResourceList{}
		for _, p := range byNode[n.Name] {
			into, lim := pod, podLim
			if v1.OwnedByDaemonSet(p) {
				into, lim = daemon, daemonLim
			}
			count := into[corev1.ResourcePods]
			count.Add(*resource.NewQuantity(1, resource.DecimalSI))
			into[corev1.ResourcePods] = count
			for _, c := range p.Spec.Containers {
				addAll(into, c.Resources.Requests)
				addAll(lim, c.Resources.Limits)
			}
		}
		for res, q := range n.Status.Allocatable {
			ch <- prometheus.MustNewConstMetric(allocatable, prometheus.GaugeValue, q.AsApproximateFloat64(), lv(res)...)
		}
		for _, g := range []struct {
			desc *prometheus.Desc
			list corev1.ResourceList
		}{{podRequests, pod}, {daemonRequests, daemon}, {podLimits, podLim}, {daemonLimits, daemonLim}} {
			for res, q := range g.list {
				ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, q.AsApproximateFloat64(), lv(res)...)
			}
		}
		if usage[pool] == nil {
			usage[pool] = corev1.ResourceList{}
		}
		for res, q := range n.Status.Capacity {
			cur := usage[pool][res]
			cur.Add(q)
			usage[pool][res] = cur
		}
	}
	poolDesc := func(name string) *prometheus.Desc {
		return prometheus.NewDesc(name, karpenterHelp[name], []string{"nodepool", "resource_type"}, nil)
	}
	usageDesc := poolDesc(v1.MetricNodePoolsUsage)
	for pool, list := range usage {
		for res, q := range list {
			ch <- prometheus.MustNewConstMetric(usageDesc, prometheus.GaugeValue, q.AsApproximateFloat64(), pool, string(res))
		}
	}
	if k.cluster.Limits != nil {
		if limits, err := k.cluster.Limits(); err == nil {
			limitDesc := poolDesc(v1.MetricNodePoolsLimit)
			for pool, list := range limits {
				for res, q := range list {
					ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, q.AsApproximateFloat64(), pool, string(res))
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(v1.MetricSchedulerQueueDepth, karpenterHelp[v1.MetricSchedulerQueueDepth], []string{"controller"}, nil),
		prometheus.GaugeValue, float64(pending), "provisioner")
	k.collectPods(ch, pods, nodes)
	k.collectStartup(ch, pods)
}

// addAll adds every quantity of add into into.
func addAll(into, add corev1.ResourceList) {
	for res, q := range add {
		cur := into[res]
		cur.Add(q)
		into[res] = cur
	}
}

// collectStartup serves karpenter_pods_startup_duration_seconds, the
// summary Karpenter observes once per pod when it becomes ready: the
// seconds from the pod's creation to its Ready condition's last
// transition to True. It is derived from the active pods at each scrape,
// so every replica serves the same: the quantiles (summaryQuantiles,
// exact, nearest rank) are over the pods that became ready within
// startupWindow of now (NaN when none did, as a summary with no recent
// observation), count and sum over every active ready pod (they drop when
// pods end, unlike Karpenter's process-lifetime totals).
func (k *Karpenter) collectStartup(ch chan<- prometheus.Metric, pods []*corev1.Pod) {
	now := k.now()
	var recent []float64
	var count uint64
	var sum float64
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue || c.LastTransitionTime.IsZero() {
				continue
			}
			took := max(c.LastTransitionTime.Sub(p.CreationTimestamp.Time).Seconds(), 0)
			count++
			sum += took
			if now.Sub(c.LastTransitionTime.Time) <= startupWindow {
				recent = append(recent, took)
			}
		}
	}
	slices.Sort(recent)
	quantiles := make(map[float64]float64, len(summaryQuantiles))
	for _, q := range summaryQuantiles {
		quantiles[q] = math.NaN()
		if len(recent) > 0 {
			i := int(math.Ceil(q*float64(len(recent)))) - 1
			quantiles[q] = recent[min(max(i, 0), len(recent)-1)]
		}
	}
	ch <- prometheus.MustNewConstSummary(prometheus.NewDesc(v1.MetricPodsStartupSeconds, karpenterHelp[v1.MetricPodsStartupSeconds], nil, nil),
		count, sum, quantiles)
}

// collectPods serves karpenter_pods_state: 1 per active pod, labeled as
// Karpenter labels it.
func (k *Karpenter) collectPods(ch chan<- prometheus.Metric, pods []*corev1.Pod, nodes []*corev1.Node) {
	desc := prometheus.NewDesc(v1.MetricPodsState, karpenterHelp[v1.MetricPodsState],
		[]string{"name", "namespace", "owner", "node", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase"}, nil)
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, p := range pods {
		owner := ""
		if len(p.OwnerReferences) > 0 {
			owner = p.OwnerReferences[0].Name
		}
		nl := labels.Set{}
		if n := byName[p.Spec.NodeName]; n != nil {
			nl = n.Labels
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, 1, p.Name, p.Namespace, owner, p.Spec.NodeName,
			nl[v1.LabelNodePool], nl[corev1.LabelTopologyZone], nl[corev1.LabelArchStable], nl[v1.LabelCapacityType], nl[corev1.LabelInstanceTypeStable], string(p.Status.Phase))
	}
}
