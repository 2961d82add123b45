package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func TestClaimIdempotencyKey(t *testing.T) {
	ctx := context.Background()
	type step struct {
		scope string
		key   string
		at    time.Time
	}
	claim := func(scope, key string, at time.Time) step { return step{scope: scope, key: key, at: at} }
	ttl := 10 * time.Minute
	tests := []struct {
		name  string
		steps []step
		// wantSeen is each claim step's result, in order.
		wantSeen []bool
	}{
		{
			name:     "should report a key seen twice as already seen",
			steps:    []step{claim("batch", "b-1", t0), claim("batch", "b-1", t0.Add(time.Second))},
			wantSeen: []bool{false, true},
		},
		{
			name:     "should treat an expired key as unseen before DynamoDB deletes it",
			steps:    []step{claim("batch", "b-1", t0), claim("batch", "b-1", t0.Add(ttl)), claim("batch", "b-1", t0.Add(ttl+time.Second))},
			wantSeen: []bool{false, false, true},
		},
		{
			name:     "should keep scopes apart",
			steps:    []step{claim("batch", "k", t0), claim("interruption", "k", t0)},
			wantSeen: []bool{false, false},
		},
		{
			name:     "should accept keys with separators and long keys",
			steps:    []step{claim("batch", "a#b/c:d", t0), claim("batch", strings.Repeat("x", 512), t0), claim("batch", "a#b/c:d", t0)},
			wantSeen: []bool{false, false, true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t, testCluster)
			got := []bool{}
			for _, st := range tt.steps {
				seen, err := s.ClaimIdempotencyKey(ctx, st.scope, st.key, st.at, ttl)
				if err != nil {
					t.Fatalf("ClaimIdempotencyKey(%s, %s) error = %v", st.scope, st.key, err)
				}
				got = append(got, seen)
			}
			if diff := cmp.Diff(tt.wantSeen, got); diff != "" {
				t.Errorf("seen results mismatch (-want +got):\n%s", diff)
			}
			// Another cluster in the same table has its own keys.
			seen, err := e.store(t, "other-cluster").ClaimIdempotencyKey(ctx, tt.steps[0].scope, tt.steps[0].key, t0, ttl)
			if err != nil || seen {
				t.Errorf("another cluster's ClaimIdempotencyKey() = %v, %v; want unseen", seen, err)
			}
		})
	}
}

func TestClaimIdempotencyKeyConcurrently(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)
	const callers = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		unseen int
		errs   []error
	)
	for range callers {
		wg.Go(func() {
			seen, err := s.ClaimIdempotencyKey(ctx, ddbstore.ScopeBatch, "b-1", t0, time.Hour)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if !seen {
				unseen++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("ClaimIdempotencyKey() errors = %v", errs)
	}
	if unseen != 1 {
		t.Errorf("%d of %d concurrent claims of one key saw it unseen, want exactly 1", unseen, callers)
	}
}

func TestClaimIdempotencyKeyErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		scope string
		key   string
		ttl   time.Duration
	}{
		{name: "should refuse an empty key", scope: "batch", key: "", ttl: time.Minute},
		{name: "should refuse a key over 512 bytes", scope: "batch", key: strings.Repeat("x", 513), ttl: time.Minute},
		{name: "should refuse an empty scope", scope: "", key: "k", ttl: time.Minute},
		{name: "should refuse a scope containing the key separator", scope: "a#b", key: "k", ttl: time.Minute},
		{name: "should refuse a zero TTL", scope: "batch", key: "k", ttl: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			if _, err := s.ClaimIdempotencyKey(ctx, tt.scope, tt.key, t0, tt.ttl); !errors.Is(err, ddbstore.ErrInvalid) {
				t.Errorf("ClaimIdempotencyKey() error = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestBeginApply(t *testing.T) {
	ctx := context.Background()
	const pending, ttl = 30 * time.Second, time.Hour
	type step struct {
		op     string // "begin", "complete", "abandon"
		holder string
		at     time.Time
	}
	begin := func(holder string, at time.Time) step { return step{op: "begin", holder: holder, at: at} }
	complete := func(holder string, at time.Time) step { return step{op: "complete", holder: holder, at: at} }
	abandon := func(holder string) step { return step{op: "abandon", holder: holder} }
	tests := []struct {
		name  string
		steps []step
		// want is each begin step's answer, in order.
		want []ddbstore.KeyClaim
	}{
		{
			name:  "should tell a retry of an apply still in flight to wait until the claim lapses",
			steps: []step{begin("r1", t0), begin("r2", t0.Add(time.Second))},
			want:  []ddbstore.KeyClaim{{State: ddbstore.KeyAcquired, Until: t0.Add(pending)}, {State: ddbstore.KeyPending, Until: t0.Add(pending)}},
		},
		{
			name:  "should answer a repeat of a completed apply as done",
			steps: []step{begin("r1", t0), complete("r1", t0.Add(time.Second)), begin("r2", t0.Add(2*time.Second))},
			want:  []ddbstore.KeyClaim{{State: ddbstore.KeyAcquired, Until: t0.Add(pending)}, {State: ddbstore.KeyDone, Until: t0.Add(time.Second + ttl)}},
		},
		{
			name:  "should hand the key to a retry once a caller that died mid-apply lets its claim lapse",
			steps: []step{begin("r1", t0), begin("r2", t0.Add(pending))},
			want:  []ddbstore.KeyClaim{{State: ddbstore.KeyAcquired, Until: t0.Add(pending)}, {State: ddbstore.KeyAcquired, Until: t0.Add(2 * pending)}},
		},
		{
			name:  "should hand the key to a retry at once after the holder abandons a failed apply",
			steps: []step{begin("r1", t0), abandon("r1"), begin("r2", t0.Add(time.Second))},
			want:  []ddbstore.KeyClaim{{State: ddbstore.KeyAcquired, Until: t0.Add(pending)}, {State: ddbstore.KeyAcquired, Until: t0.Add(time.Second + pending)}},
		},
		{
			name: "should not let a caller whose claim was taken over abandon the new holder's claim",
			steps: []step{begin("r1", t0), begin("r2", t0.Add(pending)), abandon("r1"),
				begin("r3", t0.Add(pending+time.Second))},
			want: []ddbstore.KeyClaim{{State: ddbstore.KeyAcquired, Until: t0.Add(pending)}, {State: ddbstore.KeyAcquired, Until: t0.Add(2 * pending)},
				{State: ddbstore.KeyPending, Until: t0.Add(2 * pending)}},
		},
		{
			name:  "should not abandon a completed key",
			steps: []step{begin("r1", t0), complete("r1", t0), abandon("r1"), begin("r2", t0.Add(time.Second))},
			want:  []ddbstore.KeyClaim{{State: ddbstore.KeyAcquired, Until: t0.Add(pending)}, {State: ddbstore.KeyDone, Until: t0.Add(ttl)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			var got []ddbstore.KeyClaim
			for _, st := range tt.steps {
				var err error
				switch st.op {
				case "begin":
					var c ddbstore.KeyClaim
					c, err = s.BeginApply(ctx, ddbstore.ScopeRegistrations, "r-1", st.holder, st.at, pending)
					got = append(got, c)
				case "complete":
					err = s.CompleteApply(ctx, ddbstore.ScopeRegistrations, "r-1", st.holder, st.at, ttl)
				case "abandon":
					err = s.AbandonApply(ctx, ddbstore.ScopeRegistrations, "r-1", st.holder)
				}
				if err != nil {
					t.Fatalf("%s(%s) error = %v", st.op, st.holder, err)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("BeginApply() answers mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBeginApplyConcurrently(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)
	const callers = 16
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		acquired int
		errs     []error
	)
	for i := range callers {
		wg.Go(func() {
			c, err := s.BeginApply(ctx, ddbstore.ScopeBatch, "b-1", fmt.Sprint("req-", i), t0, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if c.State == ddbstore.KeyAcquired {
				acquired++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("BeginApply() errors = %v", errs)
	}
	if acquired != 1 {
		t.Errorf("%d of %d concurrent BeginApply calls of one key acquired it, want exactly 1", acquired, callers)
	}
}

func TestHasIdempotencyKeyIgnoresPendingApplies(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)
	if _, err := s.BeginApply(ctx, ddbstore.ScopeBatch, "b-1", "r1", t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasIdempotencyKey(ctx, ddbstore.ScopeBatch, "b-1", t0); err != nil || has {
		t.Errorf("HasIdempotencyKey() of a pending apply = %v, %v; want false", has, err)
	}
	if err := s.CompleteApply(ctx, ddbstore.ScopeBatch, "b-1", "r1", t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasIdempotencyKey(ctx, ddbstore.ScopeBatch, "b-1", t0); err != nil || !has {
		t.Errorf("HasIdempotencyKey() of a completed apply = %v, %v; want true", has, err)
	}
}
