package stack_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodewright/nodewright/local/stack"
)

// TestUnschedulableToCreateFleetLatency measures, over 20 scale-ups, the
// time from a pod becoming unschedulable (the scheduler's
// PodScheduled=False/Unschedulable, as a watch sees it) to the CreateFleet
// call that launches its node (the simulator's record of the call),
// minus the forwarder's batch idle window. Each pod repels the others by
// hostname anti-affinity, so each needs a node of its own. The figures are
// logged (median, p99, max); the test fails only if a scale-up does not
// happen at all.
func TestUnschedulableToCreateFleetLatency(t *testing.T) {
	const idle = 100 * time.Millisecond
	const runs = 20
	s := startStack(t, func(o *stack.Options) {
		o.BatchIdle, o.BatchMax = idle, time.Second
		o.BootDelay = 10 * time.Minute // nodes never register: only launches are measured
	})
	applyGuide(t, s)
	ctx := t.Context()

	w, err := s.Kube.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=latency"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	unschedulableAt := map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					mu.Lock()
					if _, seen := unschedulableAt[pod.Name]; !seen {
						unschedulableAt[pod.Name] = time.Now()
					}
					mu.Unlock()
				}
			}
		}
	}()

	// Warm-up: the first batch waits for the forwarder's config of the
	// NodePool; it is not measured.
	var latencies []time.Duration
	for i := range runs + 1 {
		name := fmt.Sprintf("latency-%02d", i)
		if _, err := s.Kube.CoreV1().Pods("default").Create(ctx, latencyPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for len(s.Sim.CallsTo("CreateFleet")) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("scale-up %d: no CreateFleet call within a minute", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		calls := s.Sim.CallsTo("CreateFleet")
		mu.Lock()
		at, ok := unschedulableAt[name]
		mu.Unlock()
		if !ok {
			t.Fatalf("scale-up %d: pod %s launched before it was seen unschedulable", i, name)
		}
		if i == 0 {
			continue
		}
		latencies = append(latencies, calls[i].Time.Sub(at)-idle)
	}
	slices.Sort(latencies)
	median := latencies[len(latencies)/2]
	p99 := latencies[(len(latencies)*99+99)/100-1]
	t.Logf("unschedulable -> CreateFleet, minus the %s batch idle window, over %d scale-ups: median %s, p99 %s, min %s, max %s",
		idle, len(latencies), median.Round(time.Millisecond), p99.Round(time.Millisecond),
		latencies[0].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
}

// latencyPod is a pod that no node holding another latency pod may take.
func latencyPod(name string) *corev1.Pod {
	labels := map[string]string{"app": "latency"}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					TopologyKey:   corev1.LabelHostname,
				}},
			}},
		},
	}
}
