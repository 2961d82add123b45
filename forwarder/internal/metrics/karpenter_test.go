package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/forwarder/internal/metrics"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func cluster() metrics.Cluster {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-5", Labels: map[string]string{
			v1.LabelNodePool: "default", v1.LabelCapacityType: "on-demand", corev1.LabelInstanceTypeStable: "m5.large",
			corev1.LabelTopologyZone: "us-east-1a", corev1.LabelArchStable: "amd64",
		}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi")},
		},
	}
	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-7d9"}}},
		Spec: corev1.PodSpec{NodeName: "ip-10-0-1-5", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	ds := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent-x", Namespace: "kube-system", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "node-agent"}}},
		Spec: corev1.PodSpec{NodeName: "ip-10-0-1-5", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	pending := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
	return metrics.Cluster{
		Nodes: func() ([]*corev1.Node, error) { return []*corev1.Node{node}, nil },
		Pods:  func() ([]*corev1.Pod, error) { return []*corev1.Pod{web, ds, pending}, nil },
		Limits: func() (map[string]corev1.ResourceList, error) {
			return map[string]corev1.ResourceList{"default": {corev1.ResourceCPU: resource.MustParse("1000")}}, nil
		},
	}
}

// storedList has one series of every metric the Lambdas store.
func storedList() v1.MetricList {
	return v1.MetricList{Items: []v1.MetricSample{
		{Name: v1.MetricNodeClaimsCreated, Type: v1.MetricCounter, Labels: map[string]string{"reason": "provisioning", "nodepool": "default", "min_values_relaxed": "false"}, Value: 3},
		{Name: v1.MetricNodeClaimsCreated, Type: v1.MetricCounter, Labels: map[string]string{"reason": "drifted", "nodepool": "default", "min_values_relaxed": "false"}, Value: 1},
		{Name: v1.MetricNodeClaimsTerminated, Type: v1.MetricCounter, Labels: map[string]string{"nodepool": "default", "capacity_type": "on-demand", "zone": "us-east-1a"}, Value: 1},
		{Name: v1.MetricNodeClaimsDisrupted, Type: v1.MetricCounter, Labels: map[string]string{"reason": "drifted", "nodepool": "default", "capacity_type": "on-demand"}, Value: 1},
		{Name: v1.MetricNodesCreated, Type: v1.MetricCounter, Labels: map[string]string{"nodepool": "default"}, Value: 4},
		{Name: v1.MetricNodesTerminated, Type: v1.MetricCounter, Labels: map[string]string{"nodepool": "default"}, Value: 1},
		{Name: v1.MetricDisruptionDecisions, Type: v1.MetricCounter, Labels: map[string]string{"decision": "replace", "reason": "drifted", "consolidation_type": ""}, Value: 1},
		{Name: v1.MetricDisruptionEligible, Type: v1.MetricGauge, Labels: map[string]string{"reason": "drifted"}, Value: 0},
		{Name: v1.MetricInterruptionReceived, Type: v1.MetricCounter, Labels: map[string]string{"message_type": "spot_interrupted"}, Value: 1},
		{Name: v1.MetricCloudProviderErrors, Type: v1.MetricCounter, Labels: map[string]string{"controller": "provisioner", "method": "Create", "provider": "aws", "error": "InsufficientCapacityError"}, Value: 1},
		{Name: v1.MetricCloudProviderSeconds, Type: v1.MetricHistogram, Labels: map[string]string{"controller": "provisioner", "method": "Create", "provider": "aws"}, Count: 1, Sum: 0.2, Buckets: make([]uint64, len(v1.MetricBuckets))},
		{Name: v1.MetricSchedulingSeconds, Type: v1.MetricHistogram, Labels: map[string]string{"controller": "provisioner"}, Count: 1, Sum: 0.01, Buckets: make([]uint64, len(v1.MetricBuckets))},
		{Name: v1.MetricNodeClaimsTerminationSeconds, Type: v1.MetricHistogram, Labels: map[string]string{"nodepool": "default"}, Count: 4, Sum: 150, Buckets: terminations()},
		{Name: v1.MetricNodesTerminationSeconds, Type: v1.MetricHistogram, Labels: map[string]string{"nodepool": "default"}, Count: 4, Sum: 150, Buckets: terminations()},
		{Name: v1.MetricNodePoolsAllowedDisruptions, Type: v1.MetricGauge, Labels: map[string]string{"nodepool": "default", "reason": "Drifted"}, Value: 1},
	}}
}

// terminations are the cumulative buckets of four terminations: two in
// (20 s, 25 s], one in (30 s, 40 s] and one in (50 s, 60 s].
func terminations() []uint64 {
	b := make([]uint64, len(v1.MetricBuckets))
	for i, le := range v1.MetricBuckets {
		switch {
		case le >= 60:
			b[i] = 4
		case le >= 40:
			b[i] = 3
		case le >= 25:
			b[i] = 2
		}
	}
	return b
}

func gather(t *testing.T, k *metrics.Karpenter) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(k); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() error = %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func value(f *dto.MetricFamily, labels map[string]string) (float64, bool) {
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			if got[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestKarpenterServesStoredAndClusterMetrics(t *testing.T) {
	k := metrics.NewKarpenter(func(context.Context) (v1.MetricList, error) { return storedList(), nil }, cluster(), "v0.1.0", "abc123", 10*time.Second, func() time.Time { return t0 })
	fams := gather(t, k)
	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"should serve created_total by reason", v1.MetricNodeClaimsCreated, map[string]string{"reason": "provisioning", "nodepool": "default"}, 3},
		{"should serve disrupted_total by reason", v1.MetricNodeClaimsDisrupted, map[string]string{"reason": "drifted", "nodepool": "default", "capacity_type": "on-demand"}, 1},
		{"should serve a stored histogram's count", v1.MetricSchedulingSeconds, map[string]string{"controller": "provisioner"}, 1},
		{"should serve node allocatable", v1.MetricNodesAllocatable, map[string]string{"node_name": "ip-10-0-1-5", "nodepool": "default", "resource_type": "cpu", "instance_type": "m5.large", "capacity_type": "on-demand", "zone": "us-east-1a", "arch": "amd64"}, 1.93},
		{"should count workload requests apart from daemonset overhead", v1.MetricNodesTotalPodRequests, map[string]string{"node_name": "ip-10-0-1-5", "resource_type": "cpu"}, 0.5},
		{"should count daemonset requests", v1.MetricNodesTotalDaemonRequest, map[string]string{"node_name": "ip-10-0-1-5", "resource_type": "cpu"}, 0.1},
		{"should serve a nodepool's usage from its nodes' capacity", v1.MetricNodePoolsUsage, map[string]string{"nodepool": "default", "resource_type": "cpu"}, 2},
		{"should serve a nodepool's limit", v1.MetricNodePoolsLimit, map[string]string{"nodepool": "default", "resource_type": "cpu"}, 1000},
		{"should count unschedulable pods as the queue", v1.MetricSchedulerQueueDepth, map[string]string{"controller": "provisioner"}, 1},
		{"should label a pod's state with its node's offering", v1.MetricPodsState, map[string]string{"name": "web-0", "namespace": "shop", "owner": "web-7d9", "nodepool": "default", "instance_type": "m5.large", "phase": "Running"}, 1},
		{"should serve build info", v1.MetricBuildInfo, map[string]string{"version": "v0.1.0", "commit": "abc123"}, 1},
		{"should count workload limits", v1.MetricNodesTotalPodLimits, map[string]string{"node_name": "ip-10-0-1-5", "resource_type": "memory"}, 1 << 30},
		{"should serve a stored termination histogram's count", v1.MetricNodeClaimsTerminationSeconds, map[string]string{"nodepool": "default"}, 4},
		{"should serve a nodepool's allowed disruptions by reason", v1.MetricNodePoolsAllowedDisruptions, map[string]string{"nodepool": "default", "reason": "Drifted"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := fams[tt.metric]
			if !ok {
				t.Fatalf("%s not served", tt.metric)
			}
			got, ok := value(f, tt.labels)
			if !ok {
				t.Fatalf("%s has no series with labels %v", tt.metric, tt.labels)
			}
			if got != tt.want {
				t.Errorf("%s%v = %v, want %v", tt.metric, tt.labels, got, tt.want)
			}
		})
	}
}

func TestKarpenterServesTheLastStoredSeriesWhenTheAPIFails(t *testing.T) {
	now := t0
	fail := false
	k := metrics.NewKarpenter(func(context.Context) (v1.MetricList, error) {
		if fail {
			return v1.MetricList{}, errors.New("503 Service Unavailable")
		}
		return storedList(), nil
	}, cluster(), "v0.1.0", "abc123", 10*time.Second, func() time.Time { return now })
	gather(t, k)
	fail, now = true, now.Add(time.Minute)
	fams := gather(t, k)
	if got, ok := value(fams[v1.MetricNodeClaimsCreated], map[string]string{"reason": "provisioning"}); !ok || got != 3 {
		t.Errorf("created_total after a failed read = %v (served %v), want the last read's 3", got, ok)
	}
}

// notServed are the metrics Karpenter's dashboards query that the
// forwarder does not serve (docs/compatibility.md says why).
var notServed = []string{
	"controller_runtime_reconcile_time_seconds_bucket", // no controllers: decisions run in Lambdas
	"controller_runtime_reconcile_time_seconds_count",
	"controller_runtime_reconcile_total",
	"node_boot_time_seconds", // node-exporter's, not Karpenter's
	"node_time_seconds",
}

func TestKarpenterDashboardsQueryOnlyServedMetrics(t *testing.T) {
	k := metrics.NewKarpenter(func(context.Context) (v1.MetricList, error) { return storedList(), nil }, cluster(), "v0.1.0", "abc123", 10*time.Second, func() time.Time { return t0 })
	fams := gather(t, k)
	f, err := os.Open("testdata/karpenter-dashboards.promql")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A metric name in PromQL: an identifier followed by a selector, a
	// range, a closing parenthesis, an operator or the end, that is not a
	// function or keyword.
	ident := regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	keywords := map[string]bool{"sum": true, "by": true, "rate": true, "count": true, "max": true, "or": true, "vector": true,
		"histogram_quantile": true, "label_replace": true, "label_values": true, "without": true, "ignoring": true, "group_left": true}
	missing := map[string]bool{}
	queries := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		queries++
		line = regexp.MustCompile(`\{[^}]*\}|"[^"]*"|\[[^\]]*\]|#.*$|\$\w+`).ReplaceAllString(line, " ")
		line = regexp.MustCompile(`(by|without)\s*\([^)]*\)`).ReplaceAllString(line, " ")
		line = regexp.MustCompile(`label_values\(\s*([^,)]+),[^)]*\)`).ReplaceAllString(line, " $1 ") // its second argument is a label
		for _, name := range ident.FindAllString(line, -1) {
			if keywords[name] || !strings.Contains(name, "_") {
				continue
			}
			if _, ok := fams[name]; ok {
				continue
			}
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
			if _, ok := fams[base]; ok {
				continue
			}
			missing[name] = true
		}
	}
	if queries < 30 {
		t.Fatalf("read %d queries, want the dashboards' 40-odd", queries)
	}
	var got []string
	for n := range missing {
		got = append(got, n)
	}
	slices.Sort(got)
	if diff := cmp.Diff(notServed, got); diff != "" {
		t.Errorf("metrics the dashboards query and the forwarder does not serve (-want +got):\n%s", diff)
	}
}

// quantiles returns the quantiles of f's series with labels (a summary).
func quantiles(t *testing.T, f *dto.MetricFamily, labels map[string]string) (map[float64]float64, uint64) {
	t.Helper()
	if f.GetType() != dto.MetricType_SUMMARY {
		t.Fatalf("%s is a %v, want a summary (dashboards query its quantile label)", f.GetName(), f.GetType())
	}
	for _, m := range f.GetMetric() {
		match := true
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		out := map[float64]float64{}
		for _, q := range m.GetSummary().GetQuantile() {
			out[q.GetQuantile()] = q.GetValue()
		}
		return out, m.GetSummary().GetSampleCount()
	}
	t.Fatalf("%s has no series with labels %v", f.GetName(), labels)
	return nil, 0
}

func TestKarpenterServesNodeTerminationAsASummaryEstimatedFromTheStoredBuckets(t *testing.T) {
	k := metrics.NewKarpenter(func(context.Context) (v1.MetricList, error) { return storedList(), nil }, cluster(), "v0.1.0", "abc123", 10*time.Second, func() time.Time { return t0 })
	got, count := quantiles(t, gather(t, k)[v1.MetricNodesTerminationSeconds], map[string]string{"nodepool": "default"})
	// Ranks over 4 observations: 0 -> the first bucket's lower bound (20),
	// 2 -> the top of (20, 25], 3.6 -> 60% into (50, 60], 3.96 and 4 -> near and at 60.
	want := map[float64]float64{0: 20, 0.5: 25, 0.9: 56, 0.99: 59.6, 1: 60}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("quantiles mismatch (-want +got):\n%s", diff)
	}
	if count != 4 {
		t.Errorf("count = %d, want the stored 4", count)
	}
}

func TestKarpenterDerivesPodStartupFromReadyTransitions(t *testing.T) {
	pod := func(name string, created, ready time.Time) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)}}},
		}
	}
	c := cluster()
	pods := []*corev1.Pod{
		pod("a", t0.Add(-70*time.Second), t0.Add(-60*time.Second)),       // 10 s, recent
		pod("b", t0.Add(-130*time.Second), t0.Add(-100*time.Second)),     // 30 s, recent
		pod("c", t0.Add(-2*time.Minute), t0.Add(-30*time.Second)),        // 90 s, recent
		pod("old", t0.Add(-time.Hour), t0.Add(-time.Hour+5*time.Second)), // 5 s, outside the window
		{ObjectMeta: metav1.ObjectMeta{Name: "pending", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
	}
	c.Pods = func() ([]*corev1.Pod, error) { return pods, nil }
	k := metrics.NewKarpenter(func(context.Context) (v1.MetricList, error) { return v1.MetricList{}, nil }, c, "v0.1.0", "abc123", 10*time.Second, func() time.Time { return t0 })
	f := gather(t, k)[v1.MetricPodsStartupSeconds]
	got, count := quantiles(t, f, nil)
	want := map[float64]float64{0: 10, 0.5: 30, 0.9: 90, 0.99: 90, 1: 90}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("quantiles mismatch (-want +got):\n%s", diff)
	}
	if sum := f.GetMetric()[0].GetSummary().GetSampleSum(); count != 4 || sum != 135 {
		t.Errorf("count, sum = %d, %v; want 4 ready pods, 135 s", count, sum)
	}
}

func TestKarpenterServesAllowedDisruptionsOnlyForExistingNodePools(t *testing.T) {
	list := storedList()
	list.Items = append(list.Items, v1.MetricSample{Name: v1.MetricNodePoolsAllowedDisruptions, Type: v1.MetricGauge,
		Labels: map[string]string{"nodepool": "deleted", "reason": "Drifted"}, Value: 3})
	c := cluster()
	c.NodePools = func() ([]string, error) { return []string{"default"}, nil }
	k := metrics.NewKarpenter(func(context.Context) (v1.MetricList, error) { return list, nil }, c, "v0.1.0", "abc123", 10*time.Second, func() time.Time { return t0 })
	fams := gather(t, k)
	if got, ok := value(fams[v1.MetricNodePoolsAllowedDisruptions], map[string]string{"nodepool": "default"}); !ok || got != 1 {
		t.Errorf("allowed disruptions of the existing NodePool = %v (served %v), want 1", got, ok)
	}
	if got, ok := value(fams[v1.MetricNodePoolsAllowedDisruptions], map[string]string{"nodepool": "deleted"}); ok {
		t.Errorf("allowed disruptions of a deleted NodePool served (%v), want its series gone as Karpenter deletes it", got)
	}
	if got, ok := value(fams[v1.MetricNodeClaimsCreated], map[string]string{"reason": "provisioning"}); !ok || got != 3 {
		t.Errorf("created_total = %v (served %v), want counters kept", got, ok)
	}
}
