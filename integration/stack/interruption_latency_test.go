package stack_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestInterruptionEnqueuedToFirstEvictionLatency measures issue #7's
// interruption latency: over 20 Spot interruption warnings (after one
// unmeasured warm-up), the time from the warning entering the interruption
// queue (Stack.InterruptionEnqueued: the instant SQS SendMessage returned)
// to the first eviction on its node, taken as the client-side receive time
// of the first watch event showing the node's pod with a
// deletionTimestamp (the Eviction API sets it; kwok then deletes the pod)
// or deleted. Both instants are read from this process's clock. Each pod
// repels the others by hostname anti-affinity, so each of the 21 Spot
// nodes holds one; the nodes are interrupted one after another, each once
// the previous node is drained (its pod deleted), so a measurement shares
// the machine with the previous replacement's launch, as a burst of
// warnings would. The figures are logged (median, p99, min, max); the test
// fails only if a node is not drained before EC2's two-minute reclaim, or
// the pods do not all run again on other nodes.
func TestInterruptionEnqueuedToFirstEvictionLatency(t *testing.T) {
	const runs = 20
	const replicas = runs + 1 // the first interruption warms up and is not measured
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Interrupts {
		t.Skip("interruption is not wired: the local Step Functions engine is missing (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, []byte(spotNodePool)); err != nil {
		t.Fatalf("Apply(spot NodePool) error = %v", err)
	}

	w, err := s.Kube.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=intlat"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	evictedAt := map[string]time.Time{} // node -> first deletion seen of a pod on it
	deletedAt := map[string]time.Time{} // node -> last pod deletion completed on it
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || pod.Spec.NodeName == "" {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, seen := evictedAt[pod.Spec.NodeName]; !seen && (pod.DeletionTimestamp != nil || ev.Type == watch.Deleted) {
				evictedAt[pod.Spec.NodeName] = now
			}
			if ev.Type == watch.Deleted {
				deletedAt[pod.Spec.NodeName] = now
			}
			mu.Unlock()
		}
	}()

	d := deployment("intlat", replicas, "100m", "128Mi")
	d.Spec.Template.Spec.Affinity = hostnameAntiAffinity(d)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	eventually(t, s, 4*time.Minute, "every pod running on a Spot node of its own", func(ctx context.Context, st stack.Status) bool {
		pods := runningPods(t, s, "intlat")
		if len(pods) != replicas {
			return false
		}
		nodes = nodes[:0]
		for _, p := range pods {
			n, err := s.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil || n.Labels[v1.LabelCapacityType] != v1.CapacityTypeSpot {
				return false
			}
			nodes = append(nodes, n.Name)
		}
		slices.Sort(nodes)
		return len(slices.Compact(nodes)) == replicas
	})

	var latencies []time.Duration
	interrupted := map[string]bool{}
	for i, node := range nodes {
		warning, err := s.InterruptNode(ctx, node)
		if err != nil {
			t.Fatalf("InterruptNode(%s) error = %v", node, err)
		}
		interrupted[node] = true
		var enqueued, evicted, deleted time.Time
		for {
			for _, e := range s.InterruptionEnqueued() {
				if e.InstanceID == warning.InstanceID && e.DetailType == ec2sim.DetailTypeSpotInterruptionWarning {
					enqueued = e.At
				}
			}
			mu.Lock()
			evicted, deleted = evictedAt[node], deletedAt[node]
			mu.Unlock()
			if !enqueued.IsZero() && !deleted.IsZero() {
				break
			}
			if time.Now().After(warning.ReclaimTime) {
				t.Fatalf("interruption %d of node %s: not drained by the reclaim at %s (enqueued %v, first eviction %v, pod deleted %v)",
					i, node, warning.ReclaimTime.Format(time.RFC3339), !enqueued.IsZero(), !evicted.IsZero(), !deleted.IsZero())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !deleted.Before(warning.ReclaimTime) {
			t.Errorf("interruption %d of node %s: its pod was deleted at %s, not before the reclaim at %s", i, node, deleted.Format(time.RFC3339Nano), warning.ReclaimTime.Format(time.RFC3339))
		}
		lat := evicted.Sub(enqueued)
		t.Logf("interruption %d: node %s, enqueued -> first eviction %s, warning -> pod deleted %s", i, node, lat.Round(time.Millisecond), deleted.Sub(warning.WarningTime).Round(time.Millisecond))
		if i > 0 {
			latencies = append(latencies, lat)
		}
	}
	// Every node's pod runs again off the interrupted nodes.
	eventually(t, s, 4*time.Minute, "every pod running again off the interrupted nodes", func(context.Context, stack.Status) bool {
		pods := runningPods(t, s, "intlat")
		return len(pods) == replicas && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return interrupted[p.Spec.NodeName] })
	})
	slices.Sort(latencies)
	median := latencies[len(latencies)/2]
	p99 := latencies[(len(latencies)*99+99)/100-1]
	t.Logf("interruption enqueued -> first eviction over %d Spot interruption warnings: median %s, p99 %s, min %s, max %s",
		len(latencies), median.Round(time.Millisecond), p99.Round(time.Millisecond),
		latencies[0].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
}

// hostnameAntiAffinity keeps d's pods on nodes of their own.
func hostnameAntiAffinity(d *appsv1.Deployment) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: d.Spec.Selector,
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
}
