package stack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestCapacityBlockExpiryDrainsAndReplaces checks a capacity block end to
// end (karpenter-spec §4 steps 6-7 and §5: capacity blocks are expiring 40
// minutes before their end, and their NodeClaims are deleted then): a
// reserved NodePool's pod launches a node into the block with the market
// type capacity-block and the block's labels; the node is left alone
// until 40 minutes before the block's end; from then on a disruption run
// starts a cbexpire-<nodeclaim>-<hash> execution that drains it and
// terminates its instance, and the pod moves to an on-demand node (the
// expiring block offers nothing). The control plane and the simulator run
// on one clock moved ahead, so "an hour later" is not waited for.
func TestCapacityBlockExpiryDrainsAndReplaces(t *testing.T) {
	ahead := &aheadClock{}
	s := startStack(t, func(o *stack.Options) { o.Disruption = true; o.Clock = ahead.Now; o.SimClock = ahead })
	if !s.Wired().Drift {
		t.Skip("capacity block expiry needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	end := ahead.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	block, err := s.Sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", Zone: s.Zones[0], TotalInstanceCount: 1,
		ReservationType: ec2sim.ReservationTypeCapacityBlock, EndDate: end})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, reservationClassYAML(t, "blocks", block.ID)); err != nil {
		t.Fatalf("apply EC2NodeClass: %v", err)
	}
	if err := s.Apply(ctx, reservedPoolYAML("blocks", "m5.large")); err != nil {
		t.Fatalf("apply NodePool: %v", err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("trainer", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "the pod Running on a node", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0 && st.ReadyNodes == 1
	})

	// The node runs in the block, launched as Karpenter launches into one.
	node := nodeList(t, s)[0]
	instanceID := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
	in, ok := s.Sim.Instance(instanceID)
	if !ok || in.CapacityReservationID != block.ID {
		t.Fatalf("node %s: instance %s in reservation %q, want capacity block %s", node.Name, instanceID, in.CapacityReservationID, block.ID)
	}
	for k, want := range map[string]string{
		v1.LabelCapacityType:            v1.CapacityTypeReserved,
		v1.LabelCapacityReservationID:   block.ID,
		v1.LabelCapacityReservationType: v1.ReservationTypeCapacityBlock,
	} {
		if got := node.Labels[k]; got != want {
			t.Errorf("node %s label %s = %q, want %q", node.Name, k, got, want)
		}
	}
	lt, ok := s.Sim.LaunchTemplate(in.LaunchTemplateName)
	if !ok || lt.Data["InstanceMarketOptions.MarketType"] != "capacity-block" {
		t.Errorf("launch template %q: market type %q, want capacity-block", in.LaunchTemplateName, lt.Data["InstanceMarketOptions.MarketType"])
	}
	claim := claimOfNode(t, s, []corev1.Node{node})[node.Name]
	if claim == "" {
		t.Fatalf("node %s has no NodeClaim", node.Name)
	}

	// A minute before the expiry window the node stays.
	ahead.Advance(time.Until(end.Add(-v1.CapacityBlockExpiryLead - time.Minute)))
	waitDisruptionRuns(t, s, 2)
	for _, e := range s.Executions() {
		t.Errorf("execution %s (%s) started before the block was expiring", e.Name, e.Status)
	}
	if n := nodeList(t, s); len(n) != 1 || n[0].Name != node.Name || n[0].DeletionTimestamp != nil || disrupting(n) != 0 {
		t.Fatalf("before the expiry window: nodes %v, want %s undisturbed", nodeNames(n), node.Name)
	}

	// From 40 minutes before the end the block's NodeClaim is drained and
	// its pod moves to on-demand.
	ahead.Advance(90 * time.Second)
	exec, ok := finishedExecution(t, s, "cbexpire-"+claim+"-", 3*time.Minute)
	if !ok {
		t.Fatalf("no finished cbexpire-%s- execution (executions %+v)", claim, s.Executions())
	}
	if exec.Status != "SUCCEEDED" {
		t.Errorf("execution %s: %s %s %s", exec.Name, exec.Status, exec.Error, exec.Cause)
	}
	st := eventually(t, s, 3*time.Minute, "the pod Running on a replacement node", func(ctx context.Context, st stack.Status) bool {
		if st.RunningPods != 1 || st.PendingPods != 0 || st.ReadyNodes != 1 {
			return false
		}
		n := nodeList(t, s)
		return len(n) == 1 && n[0].Spec.ProviderID != node.Spec.ProviderID
	})
	if in, _ := s.Sim.Instance(instanceID); in.State != ec2sim.StateShuttingDown && in.State != ec2sim.StateTerminated {
		t.Errorf("block instance %s is %s, want terminated", instanceID, in.State)
	}
	repl := nodeList(t, s)[0]
	if got := repl.Labels[v1.LabelCapacityType]; got != v1.CapacityTypeOnDemand {
		t.Errorf("replacement node %s: capacity type %q, want on-demand (the expiring block offers nothing)", repl.Name, got)
	}
	replID := repl.Spec.ProviderID[strings.LastIndex(repl.Spec.ProviderID, "/")+1:]
	if in, _ := s.Sim.Instance(replID); in.CapacityReservationID != "" {
		t.Errorf("replacement instance %s runs in reservation %s, want none", replID, in.CapacityReservationID)
	}
	t.Logf("capacity block %s (end %s): %s ran %s; status %+v", block.ID, end.Format(time.RFC3339), exec.Name, exec.Finished.Sub(exec.Started).Round(100*time.Millisecond), st)
}

// waitDisruptionRuns waits until n disruption runs have begun and ended
// since the call, failing t after two minutes.
func waitDisruptionRuns(t testing.TB, s *stack.Stack, n int) {
	t.Helper()
	since := time.Now()
	deadline := since.Add(2 * time.Minute)
	for {
		done := 0
		for _, r := range s.DisruptionRuns() {
			if r.At.After(since) {
				done++
			}
		}
		if done >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d disruption runs after %s", done, n, since.Format(time.RFC3339))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func nodeNames(nodes []corev1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}
