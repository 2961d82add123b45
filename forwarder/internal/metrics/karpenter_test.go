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
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}},
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
	}}
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
	"karpenter_nodes_termination_duration_seconds", // not yet stored
	"karpenter_pods_startup_duration_seconds",      // the pod cache keeps no Ready condition yet
	"node_boot_time_seconds",                       // node-exporter's, not Karpenter's
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
