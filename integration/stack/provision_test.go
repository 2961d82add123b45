package stack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/deploy/demo"
	"github.com/nodewright/nodewright/local/stack"
)

func TestScaleUpFromZero(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(t.Context(), deployment("inflate", 10, "1", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := eventually(t, s, 2*time.Minute, "10 pods running on launched nodes", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 10 && st.PendingPods == 0
	})
	if st.Nodes == 0 || st.Instances != st.Nodes {
		t.Errorf("status = %+v, want one Node per launched instance, at least one", st)
	}
	if st.PricePerHour <= 0 {
		t.Errorf("PricePerHour = %v, want > 0", st.PricePerHour)
	}
	t.Logf("scale-up from 0: %+v", st)
}

func TestPodsThatFitInFlightCapacityLaunchNothing(t *testing.T) {
	// A long boot keeps the first NodeClaim in flight (launched, no Node)
	// while the second pod arrives.
	s := startStack(t, func(o *stack.Options) { o.BootDelay = 20 * time.Second })
	applyGuide(t, s)
	ctx := t.Context()
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("first", 1, "100m", "128Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, time.Minute, "the first pod's instance launched", func(context.Context, stack.Status) bool {
		return len(s.Sim.CallsTo("CreateFleet")) == 1
	})
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("second", 1, "100m", "128Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := eventually(t, s, 2*time.Minute, "both pods running", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 2 && st.PendingPods == 0
	})
	if got := len(s.Sim.CallsTo("CreateFleet")); got != 1 {
		t.Errorf("CreateFleet calls = %d, want 1 (the second pod fits the in-flight NodeClaim)", got)
	}
	if st.Instances != 1 || st.Nodes != 1 {
		t.Errorf("status = %+v, want one instance and one Node", st)
	}
}

func TestNodePoolLimitStopsProvisioningWithReasonOnPodEvents(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s, "ec2nodeclass.yaml")
	data, err := demo.GuideComplete.ReadFile("guide-complete/nodepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	limited := strings.Replace(string(data), "cpu: '1000'", "cpu: '4'", 1)
	if limited == string(data) {
		t.Fatal("nodepool.yaml: cpu limit line not found")
	}
	ctx := t.Context()
	if err := s.Apply(ctx, []byte(limited)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("inflate", 10, "1", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var reason string
	eventually(t, s, 2*time.Minute, "a FailedScheduling event naming the limit", func(ctx context.Context, st stack.Status) bool {
		evs, err := s.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "Pod" && strings.Contains(ev.Message, "limit") {
				reason = ev.Message
				return true
			}
		}
		return false
	})
	t.Logf("event: %s", reason)
	// Let the launches settle, then check the pool's CPU.
	eventually(t, s, 2*time.Minute, "launched nodes running pods", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods > 0 && st.Nodes == st.Instances
	})
	var cpus int64
	for _, n := range nodeList(t, s) {
		cpus += n.Status.Capacity.Cpu().Value()
	}
	if cpus > 4 {
		t.Errorf("launched capacity = %d CPUs, want at most the NodePool's limit of 4", cpus)
	}
	st, err := s.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingPods == 0 {
		t.Errorf("status = %+v, want pods left pending by the limit", st)
	}
}
