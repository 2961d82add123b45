package stack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodewright/nodewright/shared/aws/queue"
)

func TestKillLambdaIntakeKillsOnlyItsRoute(t *testing.T) {
	s := &Stack{}
	if err := s.KillLambda("intake:/v1/registrations", time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.KillLambda("intake", 2*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	// The snapshot takes the any-route kill, the registration its own.
	if after, ok := s.faults.takeIntakeKill("/v1/snapshots"); !ok || after != 2*time.Second {
		t.Errorf("kill of a snapshot = %v, %v; want the any-route kill, 2s", after, ok)
	}
	if _, ok := s.faults.takeIntakeKill("/v1/snapshots"); ok {
		t.Error("a second snapshot was killed; the registration's kill must wait for a registration")
	}
	if after, ok := s.faults.takeIntakeKill("/v1/registrations"); !ok || after != time.Second {
		t.Errorf("kill of a registration = %v, %v; want 1s", after, ok)
	}
	if _, ok := s.faults.takeIntakeKill("/v1/registrations"); ok {
		t.Error("more kills than queued")
	}
}

func TestKillLambdaRejectsOtherFunctions(t *testing.T) {
	s := &Stack{}
	for _, name := range []string{"gc", "intakes", "intake:registrations", "disrupttask"} {
		if err := s.KillLambda(name, time.Second, 1); err == nil {
			t.Errorf("KillLambda(%q) = nil, want an error", name)
		}
	}
}

func TestKilledIntakeNeverRecordsItsApply(t *testing.T) {
	ctx, cancel := withKill(context.Background(), 50*time.Millisecond)
	defer cancel()
	// A nil store: reaching it would panic, so only a dead invocation
	// passes.
	k := killableStore{}
	if err := k.CompleteApply(context.WithoutCancel(ctx), "msg", "id", "holder", time.Now(), time.Minute); !errors.Is(err, errKilled) {
		t.Errorf("CompleteApply of a killed invocation = %v, want errKilled", err)
	}
	if err := k.AbandonApply(context.WithoutCancel(ctx), "msg", "id", "holder"); !errors.Is(err, errKilled) {
		t.Errorf("AbandonApply of a killed invocation = %v, want errKilled", err)
	}
	if err := (killableSender{}).Send(ctx, queue.Message{}); !errors.Is(err, errKilled) {
		t.Errorf("Send after the kill = %v, want errKilled", err)
	}
}
