// Package batcher groups triggers into windows the way Karpenter's
// provisioning batcher does (karpenter: pkg/controllers/provisioning/batcher.go,
// karpenter-spec section 3.1): the first trigger opens a window; the window
// closes once no trigger has arrived for the idle duration (default 1 s), or
// when it has been open for the maximum duration (default 10 s), whichever
// comes first. Time comes from an injected Clock.
package batcher

import (
	"context"
	"sync"
	"time"
)

// Default window durations (Karpenter's BATCH_IDLE_DURATION and
// BATCH_MAX_DURATION defaults, karpenter-spec section 10.3).
const (
	DefaultIdle = time.Second
	DefaultMax  = 10 * time.Second
)

// Clock is the time source of a Batcher.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock reads the time package.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a Batcher. Zero values take the defaults.
type Options struct {
	// Idle closes a window after this long without a new trigger.
	Idle time.Duration
	// Max closes a window this long after it opened, however busy.
	Max time.Duration
	// Clock defaults to SystemClock.
	Clock Clock
}

// Window is one closed batch.
type Window[K comparable] struct {
	// Keys are the distinct keys added during the window, in first-added
	// order.
	Keys []K
	// Opened is when the first key was added; Closed is when the window
	// closed (by the Batcher's clock).
	Opened, Closed time.Time
}

// Batcher collects keys into windows. Add and Next are safe for concurrent
// use; one goroutine should call Next.
type Batcher[K comparable] struct {
	idle, max time.Duration
	clock     Clock

	mu       sync.Mutex
	keys     []K
	seen     map[K]struct{}
	opened   time.Time
	lastAdd  time.Time
	notified chan struct{}
}

// New returns a Batcher with opts (defaults for zero fields).
func New[K comparable](opts Options) *Batcher[K] {
	b := &Batcher[K]{idle: opts.Idle, max: opts.Max, clock: opts.Clock, notified: make(chan struct{}, 1)}
	if b.idle <= 0 {
		b.idle = DefaultIdle
	}
	if b.max <= 0 {
		b.max = DefaultMax
	}
	if b.clock == nil {
		b.clock = SystemClock{}
	}
	return b
}

// Add triggers the current window with keys, opening a window if none is
// open. A key already in the window is not repeated but still counts as a
// trigger (it restarts the idle period). Add never blocks.
func (b *Batcher[K]) Add(keys ...K) {
	if len(keys) == 0 {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	if len(b.keys) == 0 {
		b.opened = now
		b.seen = map[K]struct{}{}
	}
	b.lastAdd = now
	for _, k := range keys {
		if _, dup := b.seen[k]; !dup {
			b.seen[k] = struct{}{}
			b.keys = append(b.keys, k)
		}
	}
	b.mu.Unlock()
	select {
	case b.notified <- struct{}{}:
	default:
	}
}

// Next blocks until a window closes and returns it, or returns ctx's error
// when ctx is done first (the open window's keys stay for the next call).
// Keys added while no one is in Next still count from when they were added:
// a window whose idle or maximum deadline has already passed is returned at
// once.
func (b *Batcher[K]) Next(ctx context.Context) (Window[K], error) {
	for {
		b.mu.Lock()
		open := len(b.keys) > 0
		var deadline time.Time
		if open {
			deadline = b.lastAdd.Add(b.idle)
			if maxAt := b.opened.Add(b.max); maxAt.Before(deadline) {
				deadline = maxAt
			}
			if now := b.clock.Now(); !now.Before(deadline) {
				w := Window[K]{Keys: b.keys, Opened: b.opened, Closed: now}
				b.keys, b.seen = nil, nil
				b.mu.Unlock()
				return w, nil
			}
		}
		b.mu.Unlock()

		var timer <-chan time.Time
		if open {
			timer = b.clock.After(deadline.Sub(b.clock.Now()))
		}
		select {
		case <-ctx.Done():
			return Window[K]{}, ctx.Err()
		case <-b.notified:
		case <-timer:
		}
	}
}
