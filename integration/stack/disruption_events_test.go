package stack_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestDisruptionEventsAndKarpenterMetricsReachTheCluster scales a pool up
// to one node, drifts it (an AMI pin, budget 1) and then consolidates it
// away, and checks what a Karpenter operator watches:
//   - the disruption's event records become the Kubernetes Events Karpenter
//     would have written, through the forwarder's relay: DisruptionTerminating
//     on the drifted Node, Evicted on the pod it ran (in the pod's namespace,
//     with the pod's UID, so `kubectl describe pod` would list it), and
//     DisruptionLaunching on the replacement NodeClaim; it logs how long
//     after the drifted node was tainted each Event appeared (the relay
//     polls every 10 s);
//   - the forwarder's /metrics serves Karpenter's metrics with its labels and
//     values that match what happened (karpenter_nodeclaims_created_total ==
//     the NodeClaims launched, karpenter_nodeclaims_disrupted_total by reason
//     == the disruption executions started, ...), and serves the same
//     counters after the forwarder is killed and started again (they are
//     derived from stored state, not counted in its memory).
func TestDisruptionEventsAndKarpenterMetricsReachTheCluster(t *testing.T) {
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Drift {
		t.Skip("drift needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, limitedPool("Never")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("moved", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "the pod Running on a Ready node", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0 && st.Nodes == 1 && st.ReadyNodes == 1
	})
	old := nodeList(t, s)[0]
	oldClaim := claimOfNode(t, s, []corev1.Node{old})[old.Name]
	pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=moved"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of app=moved: %v, %v; want one", pods, err)
	}
	oldPod := pods.Items[0]

	img := addImage(t, s, "amazon-eks-node-al2023-x86_64-standard-1.34-v20261121")
	pinAMI(t, s, "production", img.ID)
	pinned := time.Now()

	// The drifted node goes once its pod runs on the replacement.
	var tainted time.Time
	eventually(t, s, 5*time.Minute, "the drifted node replaced", func(ctx context.Context, st stack.Status) bool {
		nodes := nodeList(t, s)
		if tainted.IsZero() && disrupting(nodes) > 0 {
			tainted = time.Now()
		}
		for _, n := range nodes {
			if n.Spec.ProviderID == old.Spec.ProviderID {
				return false
			}
		}
		return st.RunningPods == 1 && st.PendingPods == 0
	})
	if tainted.IsZero() {
		tainted = pinned
	}

	type want struct {
		reason, kind, namespace, name string
		uid                           string // "" for any
	}
	wants := []want{
		{reason: "DisruptionTerminating", kind: "Node", namespace: "default", name: old.Name},
		{reason: "DisruptionTerminating", kind: "NodeClaim", namespace: "default", name: oldClaim},
		{reason: "Evicted", kind: "Pod", namespace: oldPod.Namespace, name: oldPod.Name, uid: string(oldPod.UID)},
		{reason: "DisruptionLaunching", kind: "NodeClaim", namespace: "default"},
	}
	seen := map[int]time.Duration{}
	var all []string
	deadline := time.Now().Add(time.Minute)
	for len(seen) < len(wants) {
		all = all[:0]
		for i, w := range wants {
			sel := fields.Set{"reason": w.reason, "involvedObject.kind": w.kind}
			if w.name != "" {
				sel["involvedObject.name"] = w.name
			}
			evs, err := s.Kube.CoreV1().Events(w.namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs.Items {
				all = append(all, fmt.Sprintf("%s %s %s/%s uid=%s: %s", e.Reason, e.InvolvedObject.Kind, e.Namespace, e.InvolvedObject.Name, e.InvolvedObject.UID, e.Message))
				if _, ok := seen[i]; ok || (w.uid != "" && string(e.InvolvedObject.UID) != w.uid) {
					continue
				}
				// A Node Event carries the drifted Node's UID, or none when the
				// relay wrote it after the Node was deleted (the record names
				// the Node only; its UID is looked up at relay time). Another
				// Node's UID is a defect.
				if e.ReportingController == "" || e.InvolvedObject.Kind == "Node" && e.InvolvedObject.UID != old.UID && e.InvolvedObject.UID != "" {
					continue
				}
				seen[i] = time.Since(tainted)
			}
		}
		if time.Now().After(deadline) {
			var missing []string
			for i, w := range wants {
				if _, ok := seen[i]; !ok {
					missing = append(missing, fmt.Sprintf("%s on %s %s/%s", w.reason, w.kind, w.namespace, w.name))
				}
			}
			slices.Sort(all)
			t.Fatalf("a minute after the drift completed, missing Events: %s; found:\n%s", strings.Join(missing, "; "), strings.Join(all, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The Events are looked for once the drifted node is gone, so these
	// are upper bounds of their delay.
	for i, w := range wants {
		name := w.name
		if name == "" {
			name = "(the replacement)"
		}
		t.Logf("%s on %s %s: seen %s after the node was tainted (tainted %s after the pin)",
			w.reason, w.kind, name, seen[i].Round(time.Second), tainted.Sub(pinned).Round(time.Second))
	}

	// Karpenter's metrics while the replacement runs the pod: the gauges
	// derived from the cluster, and the drift counted.
	live := eventuallyMetrics(t, s, time.Minute, "after the drift", []metricWant{
		{name: v1.MetricNodeClaimsCreated, labels: map[string]string{"reason": "provisioning", "nodepool": "drift", "min_values_relaxed": "false"}, want: 1},
		{name: v1.MetricNodeClaimsCreated, labels: map[string]string{"reason": "drifted", "nodepool": "drift", "min_values_relaxed": "false"}, want: 1},
		{name: v1.MetricNodePoolsAllowedDisruptions, labels: map[string]string{"nodepool": "drift", "reason": "Drifted"}, want: 1},
		{name: v1.MetricNodesAllocatable, labels: map[string]string{"nodepool": "drift", "resource_type": "pods", "capacity_type": "on-demand", "arch": "amd64"}, want: 1, atLeast: true},
		{name: v1.MetricNodesTotalPodRequests, labels: map[string]string{"nodepool": "drift", "resource_type": "pods"}, want: 1},
		{name: v1.MetricNodePoolsUsage, labels: map[string]string{"nodepool": "drift", "resource_type": "cpu"}, want: 1, atLeast: true},
		{name: v1.MetricNodePoolsLimit, labels: map[string]string{"nodepool": "drift", "resource_type": "cpu"}, want: 100},
		{name: v1.MetricPodsState, labels: map[string]string{"namespace": "default", "nodepool": "drift", "phase": "Running"}, want: 1},
		{name: v1.MetricPodsStartupSeconds + "_count", want: 1, atLeast: true},
		{name: v1.MetricSchedulerQueueDepth, labels: map[string]string{"controller": "provisioner"}, want: 0},
		{name: v1.MetricBuildInfo, want: 1},
	})
	// The pod moved onto an initialized replacement, so it may have been
	// Ready within its creation's second: any number, not NaN (the pod
	// became Ready within the summary's 10 minutes).
	if q, ok := live.sum(v1.MetricPodsStartupSeconds, map[string]string{"quantile": "0.5"}); !ok || math.IsNaN(q) || q < 0 {
		t.Errorf("%s{quantile=\"0.5\"} = %v (served %v), want the seconds from the pod's creation to its Ready", v1.MetricPodsStartupSeconds, q, ok)
	}

	// Consolidation: the pod goes, the pool consolidates its empty node.
	if err := s.Apply(ctx, limitedPool("0s")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Patch(ctx, "moved", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 4*time.Minute, "the empty node consolidated", func(_ context.Context, st stack.Status) bool {
		return st.Nodes == 0 && st.NodeClaims == 0
	})
	if _, ok := finishedExecution(t, s, "empty-", time.Minute); !ok {
		t.Fatalf("no finished empty-<nodeclaim>-<hash> execution: %v", executionNames(s))
	}
	launched, drifts, empties := launchedNodeClaims(s), startedExecutions(s, "drift-"), startedExecutions(s, "empty-")
	t.Logf("launched %d NodeClaims; started %d drift and %d empty executions", launched, drifts, empties)
	if launched != 2 || drifts != 1 || empties != 1 {
		t.Fatalf("launched %d NodeClaims, %d drift and %d empty executions; want 2, 1 and 1 (the scenario did not run as planned: %v)", launched, drifts, empties, executionNames(s))
	}
	counted := []metricWant{
		{name: v1.MetricNodeClaimsCreated, want: float64(launched)},
		{name: v1.MetricNodeClaimsCreated, labels: map[string]string{"reason": "provisioning", "nodepool": "drift"}, want: 1},
		{name: v1.MetricNodeClaimsCreated, labels: map[string]string{"reason": "drifted", "nodepool": "drift"}, want: float64(drifts)},
		{name: v1.MetricNodeClaimsDisrupted, labels: map[string]string{"reason": "drifted", "nodepool": "drift", "capacity_type": "on-demand"}, want: float64(drifts)},
		{name: v1.MetricNodeClaimsDisrupted, labels: map[string]string{"reason": "empty", "nodepool": "drift", "capacity_type": "on-demand"}, want: float64(empties)},
		{name: v1.MetricNodeClaimsDisrupted, want: float64(drifts + empties)},
		{name: v1.MetricDisruptionDecisions, labels: map[string]string{"decision": "replace", "reason": "drifted"}, want: float64(drifts)},
		{name: v1.MetricDisruptionDecisions, labels: map[string]string{"decision": "delete", "reason": "empty", "consolidation_type": "empty"}, want: float64(empties)},
		{name: v1.MetricNodeClaimsTerminated, labels: map[string]string{"nodepool": "drift", "capacity_type": "on-demand"}, want: float64(launched)},
		{name: v1.MetricNodesCreated, labels: map[string]string{"nodepool": "drift"}, want: float64(launched)},
		{name: v1.MetricNodesTerminated, labels: map[string]string{"nodepool": "drift"}, want: float64(launched)},
		{name: v1.MetricNodeClaimsTerminationSeconds + "_count", labels: map[string]string{"nodepool": "drift"}, want: float64(launched)},
		{name: v1.MetricNodesTerminationSeconds + "_count", labels: map[string]string{"nodepool": "drift"}, want: float64(launched)},
		{name: v1.MetricNodesTerminationSeconds, labels: map[string]string{"nodepool": "drift", "quantile": "1"}, want: 0.005, atLeast: true},
		{name: v1.MetricNodePoolsAllowedDisruptions, labels: map[string]string{"nodepool": "drift", "reason": "Empty"}, want: 1},
		{name: v1.MetricNodePoolsAllowedDisruptions, labels: map[string]string{"nodepool": "drift", "reason": "Underutilized"}, want: 1},
		{name: v1.MetricDisruptionEligible, labels: map[string]string{"reason": "drifted"}, want: 0},
		{name: v1.MetricCloudProviderSeconds + "_count", labels: map[string]string{"method": "Create", "provider": "aws"}, want: float64(launched), atLeast: true},
		{name: v1.MetricSchedulingSeconds + "_count", labels: map[string]string{"controller": "provisioner"}, want: 1, atLeast: true},
		{name: v1.MetricBuildInfo, want: 1},
	}
	before := eventuallyMetrics(t, s, time.Minute, "after the consolidation", counted)

	// A restarted forwarder serves the same counters from the first scrape.
	s.KillForwarder()
	if err := s.StartForwarder(); err != nil {
		t.Fatalf("StartForwarder() error = %v", err)
	}
	after := scrapeForwarder(t, s)
	if bad := after.mismatches(counted); len(bad) > 0 {
		t.Errorf("after the forwarder restarted, its /metrics has:\n%s", strings.Join(bad, "\n"))
	}
	if diff := diffCounters(before.counters(), after.counters()); len(diff) > 0 {
		t.Errorf("counters changed across the forwarder's restart:\n%s", strings.Join(diff, "\n"))
	}
}

// limitedPool is the drift test's pool (budget 1) with a cpu limit of 100
// and consolidateAfter set to after ("Never" keeps its node; "0s"
// consolidates it once empty).
func limitedPool(after string) []byte {
	pool := string(poolYAML("drift", "1", ""))
	pool = strings.Replace(pool, "  disruption:\n", "  limits:\n    cpu: '100'\n  disruption:\n", 1)
	return []byte(strings.Replace(pool, "consolidateAfter: Never", "consolidateAfter: "+after, 1))
}
