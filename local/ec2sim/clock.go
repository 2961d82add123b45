package ec2sim

import (
	"sync"
	"time"
)

// Clock tells the simulator the time. Boot delays, shutdown delays, Spot
// reclaims and AMI deprecation are all measured on it, so a test that
// injects a FakeClock never sleeps.
type Clock interface {
	Now() time.Time
}

// systemClock is the wall clock, used when Options.Clock is nil.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// FakeClock is a manually advanced Clock, safe for concurrent use. The zero
// value is not usable; call NewFakeClock.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a clock stopped at start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start}
}

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a negative d moves it back).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
