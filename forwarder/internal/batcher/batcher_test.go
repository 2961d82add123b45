package batcher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/forwarder/internal/batcher"
)

// arrival is one Add at an offset from the start of the test.
type arrival struct {
	at  time.Duration
	key string
}

// closed is a window as observed: its keys and when it opened and closed,
// relative to the start of the test.
type closed struct {
	Keys           []string
	Opened, Closed time.Duration
}

// run adds the arrivals at their times and collects windows until want
// windows have closed. It runs inside a synctest bubble, so time is virtual
// and the results are exact.
func run(t *testing.T, opts batcher.Options, arrivals []arrival, want int) []closed {
	t.Helper()
	var got []closed
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		b := batcher.New[string](opts)
		go func() {
			for _, a := range arrivals {
				time.Sleep(time.Until(start.Add(a.at)))
				b.Add(a.key)
			}
		}()
		for range want {
			w, err := b.Next(t.Context())
			if err != nil {
				t.Fatalf("Next() error = %v", err)
			}
			got = append(got, closed{Keys: w.Keys, Opened: w.Opened.Sub(start), Closed: w.Closed.Sub(start)})
		}
	})
	return got
}

func stream(every, until time.Duration) []arrival {
	var out []arrival
	for at, i := time.Duration(0), 0; at < until; at, i = at+every, i+1 {
		out = append(out, arrival{at: at, key: string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	return out
}

func keys(arrivals []arrival) []string {
	out := make([]string, len(arrivals))
	for i, a := range arrivals {
		out[i] = a.key
	}
	return out
}

func TestBatcherWindows(t *testing.T) {
	continuous := stream(300*time.Millisecond, 15*time.Second) // 0 s, 0.3 s, ... 14.7 s
	tests := []struct {
		name     string
		opts     batcher.Options
		arrivals []arrival
		want     []closed
	}{
		{
			name:     "should put two pods arriving 0.5 s apart in one batch",
			arrivals: []arrival{{0, "a"}, {500 * time.Millisecond, "b"}},
			want:     []closed{{Keys: []string{"a", "b"}, Opened: 0, Closed: 1500 * time.Millisecond}},
		},
		{
			name:     "should start a new batch for a pod arriving 1.5 s after the previous one",
			arrivals: []arrival{{0, "a"}, {1500 * time.Millisecond, "b"}},
			want: []closed{
				{Keys: []string{"a"}, Opened: 0, Closed: time.Second},
				{Keys: []string{"b"}, Opened: 1500 * time.Millisecond, Closed: 2500 * time.Millisecond},
			},
		},
		{
			name:     "should cut a continuous stream at 10 s",
			arrivals: continuous,
			want: []closed{
				{Keys: keys(continuous[:34]), Opened: 0, Closed: 10 * time.Second}, // 0 s .. 9.9 s
				{Keys: keys(continuous[34:]), Opened: 10200 * time.Millisecond, Closed: 15700 * time.Millisecond},
			},
		},
		{
			name:     "should count a repeated key once and let it extend the idle period",
			arrivals: []arrival{{0, "a"}, {800 * time.Millisecond, "a"}, {1600 * time.Millisecond, "b"}},
			want:     []closed{{Keys: []string{"a", "b"}, Opened: 0, Closed: 2600 * time.Millisecond}},
		},
		{
			name:     "should honour configured idle and max durations",
			opts:     batcher.Options{Idle: 2 * time.Second, Max: 3 * time.Second},
			arrivals: []arrival{{0, "a"}, {1500 * time.Millisecond, "b"}, {2500 * time.Millisecond, "c"}, {3500 * time.Millisecond, "d"}},
			want: []closed{
				{Keys: []string{"a", "b", "c"}, Opened: 0, Closed: 3 * time.Second},
				{Keys: []string{"d"}, Opened: 3500 * time.Millisecond, Closed: 5500 * time.Millisecond},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, tt.opts, tt.arrivals, len(tt.want))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("windows mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBatcherKeysAddedWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		b := batcher.New[string](batcher.Options{})
		b.Add("a", "b")
		time.Sleep(5 * time.Second) // the consumer is busy posting the previous batch
		b.Add("c")
		w, err := b.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := closed{Keys: w.Keys, Opened: w.Opened.Sub(start), Closed: w.Closed.Sub(start)}
		want := closed{Keys: []string{"a", "b", "c"}, Opened: 0, Closed: 6 * time.Second}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("window mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestBatcherNextStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := batcher.New[string](batcher.Options{})
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		b.Add("a")
		if _, err := b.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next() error = %v, want context.DeadlineExceeded", err)
		}
		w, err := b.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a"}, w.Keys); diff != "" {
			t.Errorf("the open window lost keys (-want +got):\n%s", diff)
		}
	})
}

// fakeClock is a manual clock: time moves only in Advance.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

func TestBatcherUsesInjectedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := &fakeClock{now: epoch}
		b := batcher.New[int](batcher.Options{Clock: clock})
		done := make(chan batcher.Window[int], 1)
		go func() {
			w, err := b.Next(t.Context())
			if err != nil {
				t.Error(err)
			}
			done <- w
		}()
		b.Add(1)
		clock.Advance(900 * time.Millisecond)
		b.Add(2)
		synctest.Wait()
		clock.Advance(900 * time.Millisecond) // 0.9 s after the last add: still open
		synctest.Wait()
		select {
		case w := <-done:
			t.Fatalf("window closed early: %+v", w)
		default:
		}
		clock.Advance(100 * time.Millisecond)
		w := <-done
		want := batcher.Window[int]{Keys: []int{1, 2}, Opened: epoch, Closed: epoch.Add(1900 * time.Millisecond)}
		if diff := cmp.Diff(want, w); diff != "" {
			t.Errorf("window mismatch (-want +got):\n%s", diff)
		}
	})
}
