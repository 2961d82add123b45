package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func TestLease(t *testing.T) {
	ctx := context.Background()
	const d = time.Minute
	lease := func(holder string, until time.Time) ddbstore.Lease {
		return ddbstore.Lease{Name: ddbstore.LeaseProvisioning, Holder: holder, Until: until}
	}
	// Each step runs one call and states its outcome: the lease returned,
	// or the error it wraps (a *LeaseHeldError is compared by value).
	type step struct {
		call       string // acquire, renew, release
		holder     string
		at         time.Time
		want       ddbstore.Lease
		wantErr    error
		wantHeldBy *ddbstore.LeaseHeldError
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "should grant a free lease",
			steps: []step{
				{call: "acquire", holder: "a", at: t0, want: lease("a", t0.Add(d))},
			},
		},
		{
			name: "should refuse a held lease and name its holder",
			steps: []step{
				{call: "acquire", holder: "a", at: t0, want: lease("a", t0.Add(d))},
				{call: "acquire", holder: "b", at: t0.Add(59 * time.Second), wantHeldBy: &ddbstore.LeaseHeldError{Name: ddbstore.LeaseProvisioning, Holder: "a", Until: t0.Add(d)}},
			},
		},
		{
			name: "should let its holder acquire it again, extending it",
			steps: []step{
				{call: "acquire", holder: "a", at: t0, want: lease("a", t0.Add(d))},
				{call: "acquire", holder: "a", at: t0.Add(30 * time.Second), want: lease("a", t0.Add(30*time.Second+d))},
				{call: "acquire", holder: "b", at: t0.Add(d), wantHeldBy: &ddbstore.LeaseHeldError{Name: ddbstore.LeaseProvisioning, Holder: "a", Until: t0.Add(30*time.Second + d)}},
			},
		},
		{
			name: "should grant an expired lease to another holder",
			steps: []step{
				{call: "acquire", holder: "a", at: t0, want: lease("a", t0.Add(d))},
				{call: "acquire", holder: "b", at: t0.Add(d), want: lease("b", t0.Add(2*d))},
				{call: "renew", holder: "a", at: t0.Add(d), wantErr: ddbstore.ErrLeaseLost},
			},
		},
		{
			name: "should renew an unexpired lease for its holder only",
			steps: []step{
				{call: "acquire", holder: "a", at: t0, want: lease("a", t0.Add(d))},
				{call: "renew", holder: "a", at: t0.Add(50 * time.Second), want: lease("a", t0.Add(50*time.Second+d))},
				{call: "renew", holder: "b", at: t0.Add(50 * time.Second), wantErr: ddbstore.ErrLeaseLost},
			},
		},
		{
			name: "should not renew an expired lease",
			steps: []step{
				{call: "acquire", holder: "a", at: t0, want: lease("a", t0.Add(d))},
				{call: "renew", holder: "a", at: t0.Add(d), wantErr: ddbstore.ErrLeaseLost},
			},
		},
		{
			name: "should not renew a lease never acquired",
			steps: []step{
				{call: "renew", holder: "a", at: t0, wantErr: ddbstore.ErrLeaseLost},
			},
		},
		{
			name: "should free a lease released by its holder",
			steps: []step{
				{call: "acquire", holder: "a", at: t0, want: lease("a", t0.Add(d))},
				{call: "release", holder: "a"},
				{call: "acquire", holder: "b", at: t0.Add(time.Second), want: lease("b", t0.Add(time.Second+d))},
			},
		},
		{
			name: "should ignore a release by another holder",
			steps: []step{
				{call: "acquire", holder: "a", at: t0, want: lease("a", t0.Add(d))},
				{call: "release", holder: "b"},
				{call: "acquire", holder: "b", at: t0.Add(time.Second), wantHeldBy: &ddbstore.LeaseHeldError{Name: ddbstore.LeaseProvisioning, Holder: "a", Until: t0.Add(d)}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			for i, st := range tt.steps {
				var got ddbstore.Lease
				var err error
				switch st.call {
				case "acquire":
					got, err = s.AcquireLease(ctx, ddbstore.LeaseProvisioning, st.holder, st.at, d)
				case "renew":
					got, err = s.RenewLease(ctx, ddbstore.LeaseProvisioning, st.holder, st.at, d)
				case "release":
					err = s.ReleaseLease(ctx, ddbstore.LeaseProvisioning, st.holder)
				}
				label := fmt.Sprintf("step %d: %s by %s", i, st.call, st.holder)
				if st.wantHeldBy != nil {
					var held *ddbstore.LeaseHeldError
					if !errors.As(err, &held) {
						t.Fatalf("%s: error = %v, want a *LeaseHeldError", label, err)
					}
					if diff := cmp.Diff(st.wantHeldBy, held); diff != "" {
						t.Errorf("%s: LeaseHeldError mismatch (-want +got):\n%s", label, diff)
					}
					continue
				}
				if !errors.Is(err, st.wantErr) {
					t.Fatalf("%s: error = %v, want %v", label, err, st.wantErr)
				}
				if diff := cmp.Diff(st.want, got); diff != "" {
					t.Errorf("%s: lease mismatch (-want +got):\n%s", label, diff)
				}
			}
		})
	}
}

func TestLeaseErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		lease  string
		holder string
		d      time.Duration
	}{
		{name: "should refuse an empty lease name", lease: "", holder: "a", d: time.Minute},
		{name: "should refuse an empty holder", lease: "l", holder: "", d: time.Minute},
		{name: "should refuse a zero duration", lease: "l", holder: "a", d: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			if _, err := s.AcquireLease(ctx, tt.lease, tt.holder, t0, tt.d); !errors.Is(err, ddbstore.ErrInvalid) {
				t.Errorf("AcquireLease() error = %v, want ErrInvalid", err)
			}
			if _, err := s.RenewLease(ctx, tt.lease, tt.holder, t0, tt.d); !errors.Is(err, ddbstore.ErrInvalid) {
				t.Errorf("RenewLease() error = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestLeaseContention(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)
	const contenders = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
		errs    []error
	)
	for i := range contenders {
		holder := fmt.Sprintf("invocation-%02d", i)
		wg.Go(func() {
			_, err := s.AcquireLease(ctx, ddbstore.LeaseProvisioning, holder, t0, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			var held *ddbstore.LeaseHeldError
			switch {
			case err == nil:
				winners = append(winners, holder)
			case !errors.As(err, &held):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("AcquireLease() errors other than LeaseHeldError: %v", errs)
	}
	if len(winners) != 1 {
		t.Fatalf("%d contenders acquired the lease (%v), want exactly 1", len(winners), winners)
	}
	// The lease names the winner.
	_, err := s.AcquireLease(ctx, ddbstore.LeaseProvisioning, "late", t0.Add(time.Second), time.Minute)
	var held *ddbstore.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != winners[0] {
		t.Errorf("AcquireLease(late) error = %v, want held by %s", err, winners[0])
	}
}
