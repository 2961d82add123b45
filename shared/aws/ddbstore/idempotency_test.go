package ddbstore_test

import (
	"context"
	"errors"
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
		op    string // "claim" or "release"
		scope string
		key   string
		at    time.Time
	}
	claim := func(scope, key string, at time.Time) step { return step{op: "claim", scope: scope, key: key, at: at} }
	release := func(scope, key string) step { return step{op: "release", scope: scope, key: key} }
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
			name:     "should accept a key again after it is released",
			steps:    []step{claim("batch", "b-1", t0), release("batch", "b-1"), claim("batch", "b-1", t0.Add(time.Second))},
			wantSeen: []bool{false, false},
		},
		{
			name:     "should release an absent key without error",
			steps:    []step{release("batch", "never-claimed"), claim("batch", "never-claimed", t0)},
			wantSeen: []bool{false},
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
				switch st.op {
				case "claim":
					seen, err := s.ClaimIdempotencyKey(ctx, st.scope, st.key, st.at, ttl)
					if err != nil {
						t.Fatalf("ClaimIdempotencyKey(%s, %s) error = %v", st.scope, st.key, err)
					}
					got = append(got, seen)
				case "release":
					if err := s.ReleaseIdempotencyKey(ctx, st.scope, st.key); err != nil {
						t.Fatalf("ReleaseIdempotencyKey(%s, %s) error = %v", st.scope, st.key, err)
					}
				}
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
