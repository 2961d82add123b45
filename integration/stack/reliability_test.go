package stack_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/stack"
)

// sdkAttempts is the aws-sdk-go-v2 standard retryer's attempts per call:
// dropping as many answers fails the provisioner's CreateFleet call after
// EC2 launched.
const sdkAttempts = 3

// The interleaving of issue "launching twice after a lost CreateFleet
// answer", end to end: EC2 launches, every answer of the call (and of the
// SDK's retries) is lost, and before the redelivered batch is retried the
// offering EC2 chose is marked unavailable, so a rebuilt request would
// differ under the same ClientToken.
func TestLostCreateFleetAnswerThenAnUnavailableOfferingLaunchesExactlyOneInstance(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s)
	ctx := t.Context()
	s.Sim.DropAnswers("CreateFleet", sdkAttempts)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("lost-answer", 1, "100m", "128Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, time.Minute, "EC2 launched for the pod", func(context.Context, stack.Status) bool {
		return len(s.Sim.Instances()) == 1
	})
	first := s.Sim.Instances()[0]
	if err := s.MarkOfferingUnavailable(ctx, first.CapacityType, first.InstanceType, first.Zone); err != nil {
		t.Fatal(err)
	}

	st := eventually(t, s, 2*time.Minute, "the pod running", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0
	})
	var got []string
	for _, in := range s.Sim.Instances() {
		got = append(got, in.ID+" ("+in.State+")")
	}
	if len(got) != 1 || got[0] != first.ID+" (running)" || st.Nodes != 1 {
		t.Errorf("instances = %v, nodes %d; want exactly the first instance %s, running, and its Node", got, st.Nodes, first.ID)
	}
	var mismatches, dropped int
	for _, c := range s.Sim.CallsTo("CreateFleet") {
		if c.ErrorCode == "IdempotentParameterMismatch" {
			mismatches++
		}
		if c.AnswerFault != "" {
			dropped++
		}
	}
	if dropped != sdkAttempts || mismatches != 0 {
		t.Errorf("CreateFleet calls: %d answers dropped, %d IdempotentParameterMismatch; want %d and 0", dropped, mismatches, sdkAttempts)
	}
}
