package stack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

// faults holds the faults queued for the provisioning queue pump (the
// provisioner Lambda's stand-in).
type faults struct {
	mu        sync.Mutex
	kills     []time.Duration
	redeliver int
}

// takeKill pops the next kill of a provisioner invocation, if any.
func (f *faults) takeKill() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.kills) == 0 {
		return 0, false
	}
	d := f.kills[0]
	f.kills = f.kills[1:]
	return d, true
}

// takeRedelivery reports whether a handled message is to be delivered
// again, counting it.
func (f *faults) takeRedelivery() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.redeliver <= 0 {
		return false
	}
	f.redeliver--
	return true
}

// KillLambda makes the next n invocations of the function name
// ("provisioner" or "disrupttask") die after running for after, as a
// Lambda whose process is killed mid-call: the handler's context is
// cancelled then, what it did before stays done, and the invocation fails
// (a provisioner message is left for redelivery; a disrupttask invocation
// fails with Runtime.ExitError, which its state's Retry sees). It returns
// an error for any other function, or for disrupttask when disruption is
// not wired.
func (s *Stack) KillLambda(name string, after time.Duration, n int) error {
	switch name {
	case "provisioner":
		s.faults.mu.Lock()
		defer s.faults.mu.Unlock()
		for range n {
			s.faults.kills = append(s.faults.kills, after)
		}
		return nil
	case "disrupttask":
		if s.lambdas == nil {
			return fmt.Errorf("kill %s: disruption is not wired", name)
		}
		s.lambdas.Kill(name, after, n)
		return nil
	}
	return fmt.Errorf("kill %s: only provisioner and disrupttask can be killed", name)
}

// RedeliverProvisioning makes the provisioning queue deliver each of the
// next n messages the provisioner handled successfully once more (made
// visible again instead of deleted), as SQS's at-least-once delivery may.
func (s *Stack) RedeliverProvisioning(n int) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.redeliver += n
}

// MarkOfferingUnavailable records the offering (capacity type, instance
// type, zone) as unavailable in the stack's DynamoDB store for
// ddbstore.UnavailableOfferingsTTL, as the provisioner does after
// insufficient capacity: the next solve and launch leave it out.
func (s *Stack) MarkOfferingUnavailable(ctx context.Context, capacityType, instanceType, zone string) error {
	if s.store == nil {
		return errors.New("mark offering unavailable: the stack has no store yet")
	}
	return s.store.MarkUnavailable(ctx, ddbstore.OfferingKey{CapacityType: capacityType, InstanceType: instanceType, Zone: zone},
		"marked by a test", time.Now(), ddbstore.UnavailableOfferingsTTL)
}
