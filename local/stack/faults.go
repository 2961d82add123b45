package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/queue"
	"github.com/nodewright/nodewright/shared/catalog"
)

// faults holds the faults queued for the provisioning queue pump (the
// provisioner Lambda's stand-in) and the intake front, and the intake's
// answers.
type faults struct {
	mu          sync.Mutex
	kills       []time.Duration
	redeliver   int
	intakeKills []intakeKill
	answers     []IntakeAnswer
	redelivered []string // kinds of the messages redelivered
}

// IntakeAnswer is one answer of the intake front (API Gateway's) to the
// forwarder, as Stack.IntakeAnswers lists them.
type IntakeAnswer struct {
	Method, Path   string
	IdempotencyKey string // the request's Idempotency-Key header
	// Status is the HTTP status; 502 for an invocation that failed or was
	// killed.
	Status int
	// RetryAfter is the Retry-After header (seconds), if any.
	RetryAfter string
	// Duplicate is set when the answer is a Receipt with duplicate set.
	Duplicate bool
	// Killed is set when the invocation was killed (KillLambda).
	Killed bool
}

// intakeKill is a queued kill of an intake invocation on route ("": any).
type intakeKill struct {
	after time.Duration
	route string
}

// takeIntakeKill pops the first queued kill of an intake invocation that
// route matches, if any.
func (f *faults) takeIntakeKill(route string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, k := range f.intakeKills {
		if k.route == "" || k.route == route {
			f.intakeKills = append(f.intakeKills[:i], f.intakeKills[i+1:]...)
			return k.after, true
		}
	}
	return 0, false
}

func (f *faults) recordAnswer(a IntakeAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, a)
}

// IntakeAnswers lists the intake front's answers so far, oldest first.
func (s *Stack) IntakeAnswers() []IntakeAnswer {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return append([]IntakeAnswer(nil), s.faults.answers...)
}

// killMark is the context value of an intake invocation to be killed at at.
type killMark struct{ at time.Time }

// withKill gives a killed intake invocation its context: cancelled after
// after and marked, so that killableStore and killableSender stop acting
// for it from then on, also under context.WithoutCancel.
func withKill(ctx context.Context, after time.Duration) (context.Context, context.CancelFunc) {
	at := time.Now().Add(after)
	return context.WithDeadline(context.WithValue(ctx, killMark{}, killMark{at: at}), at)
}

// errKilled is what a killed invocation's calls fail with.
var errKilled = errors.New("intake invocation killed (fault injected)")

// killed reports whether ctx belongs to a killed invocation whose kill
// time has passed; with wait it first waits for the kill time, as a call
// still running when the process dies.
func killed(ctx context.Context, wait bool) bool {
	m, ok := ctx.Value(killMark{}).(killMark)
	if !ok {
		return false
	}
	if wait {
		time.Sleep(time.Until(m.at))
		return true
	}
	return !time.Now().Before(m.at)
}

// killableStore is the intake's store: a killed invocation (KillLambda)
// never records the outcome of its apply, neither done nor abandoned, as
// an intake process killed mid-apply: its claim stays pending.
type killableStore struct{ *ddbstore.Store }

func (k killableStore) CompleteApply(ctx context.Context, scope, key, holder string, now time.Time, ttl time.Duration) error {
	if killed(ctx, true) {
		return errKilled
	}
	return k.Store.CompleteApply(ctx, scope, key, holder, now, ttl)
}

func (k killableStore) AbandonApply(ctx context.Context, scope, key, holder string) error {
	if killed(ctx, true) {
		return errKilled
	}
	return k.Store.AbandonApply(ctx, scope, key, holder)
}

// killableSender is the intake's queue: a killed invocation sends nothing
// once its kill time passed.
type killableSender struct{ *queue.Queue }

func (k killableSender) Send(ctx context.Context, m queue.Message) error {
	if killed(ctx, false) {
		return errKilled
	}
	return k.Queue.Send(ctx, m)
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

// takeRedelivery reports whether a handled message of kind is to be
// delivered again, counting it.
func (f *faults) takeRedelivery(kind string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.redeliver <= 0 {
		return false
	}
	f.redeliver--
	f.redelivered = append(f.redelivered, kind)
	return true
}

// Redelivered lists the kinds (the queue message's kind attribute, e.g.
// "PodBatch") of the provisioning messages RedeliverProvisioning made
// the queue deliver again so far, oldest first.
func (s *Stack) Redelivered() []string {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return append([]string(nil), s.faults.redelivered...)
}

// KillLambda makes the next n invocations of the function name
// ("provisioner", "intake", "intake:<route>" such as
// "intake:/v1/registrations", or "disrupttask") die after running for after,
// as a Lambda whose process is killed mid-call: the handler's context is
// cancelled then, what it did before stays done, and the invocation fails
// (a provisioner message is left for redelivery; an intake request is
// answered 502 by API Gateway, and its apply's outcome is never recorded,
// neither done nor abandoned, so its idempotency claim stays pending until
// it lapses after Options.ApplyLease; only requests carrying a message,
// with an Idempotency-Key, are killed; a disrupttask invocation fails with
// Runtime.ExitError, which its state's Retry sees). An intake invocation
// that applies faster than after dies while recording the outcome, at
// after. It returns an error for any other function, or for disrupttask
// when disruption is not wired.
func (s *Stack) KillLambda(name string, after time.Duration, n int) error {
	if route, ok := strings.CutPrefix(name, "intake"); ok && (route == "" || strings.HasPrefix(route, ":/")) {
		s.faults.mu.Lock()
		defer s.faults.mu.Unlock()
		for range n {
			s.faults.intakeKills = append(s.faults.intakeKills, intakeKill{after: after, route: strings.TrimPrefix(route, ":")})
		}
		return nil
	}
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
	return fmt.Errorf("kill %s: only provisioner, intake and disrupttask can be killed", name)
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
// catalog.UnavailableOfferingsTTL, as the provisioner does after
// insufficient capacity: the next solve and launch leave it out.
func (s *Stack) MarkOfferingUnavailable(ctx context.Context, capacityType, instanceType, zone string) error {
	if s.store == nil {
		return errors.New("mark offering unavailable: the stack has no store yet")
	}
	return s.store.MarkUnavailable(ctx, catalog.OfferingKey{CapacityType: capacityType, InstanceType: instanceType, Zone: zone},
		"marked by a test", s.now(), catalog.UnavailableOfferingsTTL)
}
