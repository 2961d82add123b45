package stack_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// applyLease is the intake's apply lease on the stack of
// TestKilledOrRedeliveredLambdas: a message whose intake invocation was
// killed mid-apply is answered 409 for at most this long.
const applyLease = 3 * time.Second

// The promises "nothing acknowledged that was not applied" and "no
// duplicate launches" of issue 13 under a killed intake Lambda and a
// redelivered provisioning message, on one stack: each subtest uses its
// own Deployment.
func TestKilledOrRedeliveredLambdas(t *testing.T) {
	s := startStack(t, func(o *stack.Options) { o.ApplyLease = applyLease })
	applyGuide(t, s)
	t.Run("IntakeKilledMidApplyIsRetriedUntilTheMessageIsAppliedOnce", func(t *testing.T) {
		intakeKilledMidApplyIsRetriedUntilAppliedOnce(t, s)
	})
	t.Run("ProvisioningMessageRedeliveredAfterItsLaunchLaunchesNoSecondInstance", func(t *testing.T) {
		redeliveredProvisioningLaunchesNoSecondInstance(t, s)
	})
}

// The intake invocation of the next node registration (the new node's,
// whose loss would let gc's registration timeout terminate it) dies after
// it applied but before it recorded the apply: the forwarder's retry is
// answered 409 with Retry-After while the dead invocation's claim stands,
// and is applied once after the claim lapsed; no answer for the message
// is a 2xx before that, none a Duplicate before it was recorded.
func intakeKilledMidApplyIsRetriedUntilAppliedOnce(t *testing.T, s *stack.Stack) {
	ctx := t.Context()
	before := len(s.IntakeAnswers())
	if err := s.KillLambda("intake:"+v1.RouteRegistrations, time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("killed-intake", 1, "100m", "128Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var key string
	eventually(t, s, 2*time.Minute, "the pod running, and the killed message acknowledged", func(_ context.Context, st stack.Status) bool {
		answers := s.IntakeAnswers()[before:]
		if key == "" {
			for _, a := range answers {
				if a.Killed {
					key = a.IdempotencyKey
				}
			}
		}
		return key != "" && st.RunningPods == 1 && st.PendingPods == 0 && slices.ContainsFunc(answers, func(a stack.IntakeAnswer) bool {
			return a.IdempotencyKey == key && a.Status/100 == 2
		})
	})
	var got []stack.IntakeAnswer
	for _, a := range s.IntakeAnswers()[before:] {
		if a.IdempotencyKey == key {
			got = append(got, a)
		}
	}
	t.Logf("answers to message %s: %+v", key, got)
	if len(got) < 3 || !got[0].Killed || got[0].Status != http.StatusBadGateway || got[0].Path != v1.RouteRegistrations {
		t.Fatalf("answers to %s = %+v; want the killed invocation's 502, then 409s, then one 2xx", key, got)
	}
	applied := 0
	conflicts := 0
	for i, a := range got[1:] {
		switch {
		case a.Status == http.StatusConflict:
			if a.RetryAfter == "" {
				t.Errorf("answer %d to %s: 409 without Retry-After", i+1, key)
			}
			if applied > 0 {
				t.Errorf("answer %d to %s: 409 after the message was applied", i+1, key)
			}
			conflicts++
		case a.Status/100 == 2 && !a.Duplicate:
			applied++
		case a.Status/100 == 2 && a.Duplicate:
			if applied == 0 {
				t.Errorf("answer %d to %s: acknowledged as a duplicate before it was applied", i+1, key)
			}
		default:
			t.Errorf("answer %d to %s: status %d", i+1, key, a.Status)
		}
	}
	if conflicts == 0 || applied != 1 {
		t.Errorf("answers to %s after the kill: %d 409 and %d applied; want at least one 409 while the dead claim stood (%v), then exactly one apply", key, conflicts, applied, applyLease)
	}
	if n := len(s.Sim.Instances()); n != 1 {
		t.Errorf("instances = %d, want 1 for the one pod", n)
	}
}

// Every provisioning message handled from now on (the pod batch that
// launches included) is delivered once more after it succeeded, as SQS
// may: the redelivered batch finds its NodeClaim launched, and exactly
// one new instance and NodeClaim serve the pod.
func redeliveredProvisioningLaunchesNoSecondInstance(t *testing.T, s *stack.Stack) {
	ctx := t.Context()
	st, err := s.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := s.Redelivered()
	s.RedeliverProvisioning(5)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("redelivered", 1, "3", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 2*time.Minute, "the pod running and its pod batch redelivered", func(_ context.Context, now stack.Status) bool {
		return now.RunningPods == st.RunningPods+1 && now.PendingPods == 0 &&
			slices.Contains(s.Redelivered()[len(before):], v1.KindPodBatch)
	})
	// The redelivered batch is handled within a pump round or two.
	time.Sleep(2 * time.Second)
	after, err := s.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("redelivered: %v", s.Redelivered()[len(before):])
	if after.Instances != st.Instances+1 || after.NodeClaims != st.NodeClaims+1 {
		t.Errorf("instances %d -> %d, NodeClaims %d -> %d; want exactly one more of each", st.Instances, after.Instances, st.NodeClaims, after.NodeClaims)
	}
}
