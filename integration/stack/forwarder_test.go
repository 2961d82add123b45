package stack_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/stack"
)

func TestForwarderRestartMidBatchLosesNoPod(t *testing.T) {
	// A long idle window keeps the batch open while the forwarder dies.
	s := startStack(t, func(o *stack.Options) { o.BatchIdle, o.BatchMax = 5*time.Second, 20*time.Second })
	applyGuide(t, s)
	ctx := t.Context()
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("inflate", 5, "1", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, time.Minute, "5 pods pending", func(_ context.Context, st stack.Status) bool { return st.PendingPods == 5 })
	s.KillForwarder()
	if got := len(s.Sim.CallsTo("CreateFleet")); got != 0 {
		t.Fatalf("CreateFleet calls before the kill = %d, want 0 (the batch must still be open when the forwarder dies)", got)
	}
	// More pods arrive while no forwarder runs.
	patch := []byte(`{"spec":{"replicas":8}}`)
	if _, err := s.Kube.AppsV1().Deployments("default").Patch(ctx, "inflate", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, time.Minute, "8 pods pending", func(_ context.Context, st stack.Status) bool { return st.PendingPods == 8 })
	if err := s.StartForwarder(); err != nil {
		t.Fatalf("StartForwarder() error = %v", err)
	}
	st := eventually(t, s, 3*time.Minute, "every pod running after the restart", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 8 && st.PendingPods == 0
	})
	if st.Nodes != st.Instances {
		t.Errorf("status = %+v, want a Node per instance", st)
	}
}
