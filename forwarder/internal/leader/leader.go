// Package leader runs the forwarder's posting loop on one replica at a time,
// with client-go leader election over a coordination.k8s.io Lease.
//
// The loop is stopped before the lease is let go: on shutdown, Run cancels
// the loop, waits for it to return, and only then releases the lease, so the
// next leader cannot start while this one still posts. When renewal fails,
// the loop's context is cancelled RenewDeadline after the last renewal, while
// another replica can take the lease only LeaseDuration after it, so the loop
// has LeaseDuration - RenewDeadline (5 s by default) to stop.
package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Default timings (client-go's and Karpenter's defaults).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ErrLeadershipLost is returned by Run when the lease could not be renewed;
// the process should exit and start afresh.
var ErrLeadershipLost = errors.New("leadership lost")

// Config names the Lease and this replica.
type Config struct {
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity is this replica's holder identity (its pod name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to the values
	// above when zero.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnNewLeader, when set, is told the identity of every new leader.
	OnNewLeader func(identity string)
}

// Run campaigns for the Lease until ctx is done. While this replica holds
// it, lead runs with a context that is cancelled when ctx is done or the
// lease is lost. Run returns nil after a shutdown through ctx, lead's error
// if lead fails, or ErrLeadershipLost. It returns an error at once for an
// invalid Config.
func Run(ctx context.Context, client kubernetes.Interface, cfg Config, lead func(ctx context.Context) error) error {
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}

	// electCtx outlives ctx: renewal goes on until lead has returned.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	var (
		mu       sync.Mutex
		started  bool // lead was started
		finished bool // the elector returned; lead must not start any more
		leadErr  error
		lost     bool
	)
	leadDone := make(chan struct{})
	stopIfIdle := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			stopElecting()
		}
	})
	defer stopIfIdle()

	callbacks := leaderelection.LeaderCallbacks{
		OnStartedLeading: func(leaseCtx context.Context) {
			mu.Lock()
			if finished || ctx.Err() != nil || leaseCtx.Err() != nil {
				mu.Unlock()
				stopElecting()
				return
			}
			started = true
			mu.Unlock()
			defer close(leadDone)
			runCtx, cancel := context.WithCancel(leaseCtx)
			stop := context.AfterFunc(ctx, cancel)
			err := lead(runCtx)
			stop()
			cancel()
			mu.Lock()
			leadErr = err
			lost = leaseCtx.Err() != nil && ctx.Err() == nil
			mu.Unlock()
			stopElecting()
		},
		OnStoppedLeading: func() {},
		OnNewLeader:      cfg.OnNewLeader,
	}
	if callbacks.OnNewLeader == nil {
		callbacks.OnNewLeader = func(string) {}
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		Callbacks:     callbacks,
		// The lease is released below, after lead has returned; the
		// elector's own release could run while lead still posts.
		ReleaseOnCancel: false,
		Name:            cfg.Name,
	})
	if err != nil {
		return fmt.Errorf("leader election config: %w", err)
	}
	elector.Run(electCtx)

	mu.Lock()
	finished = true
	ran := started
	mu.Unlock()
	if !ran {
		return nil
	}
	<-leadDone
	release(lock, cfg)

	mu.Lock()
	defer mu.Unlock()
	switch {
	case leadErr != nil && !errors.Is(leadErr, context.Canceled):
		return fmt.Errorf("leader loop: %w", leadErr)
	case lost:
		return ErrLeadershipLost
	}
	return nil
}

// release gives up the Lease if it still names this replica, so that another
// replica can take over at once (as client-go's ReleaseOnCancel does: empty
// holder, 1 s duration). Failure is harmless: the lease then expires.
func release(lock *resourcelock.LeaseLock, cfg Config) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RenewDeadline)
	defer cancel()
	record, _, err := lock.Get(ctx)
	if err != nil || record.HolderIdentity != cfg.Identity {
		return
	}
	now := metav1.NewTime(time.Now())
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    record.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	})
}
