package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func TestBudget(t *testing.T) {
	ctx := context.Background()
	const ttl = 10 * time.Minute
	type step struct {
		release   bool // release instead of acquire
		renew     bool // renew instead of acquire
		execution string
		nodes     int
		limit     int
		at        time.Time
		want      error
	}
	acquire := func(exec string, nodes, limit int, at time.Time, want error) step {
		return step{execution: exec, nodes: nodes, limit: limit, at: at, want: want}
	}
	release := func(exec string, at time.Time) step { return step{release: true, execution: exec, at: at} }
	renew := func(exec string, at time.Time, want error) step {
		return step{renew: true, execution: exec, at: at, want: want}
	}
	tests := []struct {
		name   string
		steps  []step
		listAt time.Time
		want   []ddbstore.BudgetLease
	}{
		{
			name: "should grant leases up to the limit and refuse the next",
			steps: []step{
				acquire("drift-a", 1, 2, t0, nil),
				acquire("drift-b", 1, 2, t0, nil),
				acquire("drift-c", 1, 2, t0, ddbstore.ErrBudgetExhausted),
			},
			listAt: t0,
			want: []ddbstore.BudgetLease{
				{Execution: "drift-a", Nodes: 1, Until: t0.Add(ttl)},
				{Execution: "drift-b", Nodes: 1, Until: t0.Add(ttl)},
			},
		},
		{
			name: "should count nodes, not executions",
			steps: []step{
				acquire("multi-a", 3, 4, t0, nil),
				acquire("multi-b", 2, 4, t0, ddbstore.ErrBudgetExhausted),
				acquire("single-c", 1, 4, t0, nil),
			},
			listAt: t0,
			want: []ddbstore.BudgetLease{
				{Execution: "multi-a", Nodes: 3, Until: t0.Add(ttl)},
				{Execution: "single-c", Nodes: 1, Until: t0.Add(ttl)},
			},
		},
		{
			name: "should renew, not double count, a lease acquired again by its execution",
			steps: []step{
				acquire("drift-a", 1, 1, t0, nil),
				acquire("drift-a", 1, 1, t0.Add(time.Minute), nil),
				acquire("drift-b", 1, 1, t0.Add(time.Minute), ddbstore.ErrBudgetExhausted),
			},
			listAt: t0.Add(time.Minute),
			want:   []ddbstore.BudgetLease{{Execution: "drift-a", Nodes: 1, Until: t0.Add(time.Minute + ttl)}},
		},
		{
			name: "should grant the share a released lease frees",
			steps: []step{
				acquire("drift-a", 1, 1, t0, nil),
				release("drift-a", t0.Add(time.Second)),
				acquire("drift-b", 1, 1, t0.Add(time.Second), nil),
			},
			listAt: t0.Add(time.Second),
			want:   []ddbstore.BudgetLease{{Execution: "drift-b", Nodes: 1, Until: t0.Add(time.Second + ttl)}},
		},
		{
			name: "should not count expired leases",
			steps: []step{
				acquire("crashed", 1, 1, t0, nil),
				acquire("next", 1, 1, t0.Add(ttl), nil),
			},
			listAt: t0.Add(ttl),
			want:   []ddbstore.BudgetLease{{Execution: "next", Nodes: 1, Until: t0.Add(2 * ttl)}},
		},
		{
			name: "should refuse everything with a limit of zero",
			steps: []step{
				acquire("drift-a", 1, 0, t0, ddbstore.ErrBudgetExhausted),
			},
			listAt: t0,
			want:   []ddbstore.BudgetLease{},
		},
		{
			name: "should keep granted leases when the limit shrinks, and refuse new ones",
			steps: []step{
				acquire("a", 1, 3, t0, nil),
				acquire("b", 1, 3, t0, nil),
				acquire("c", 1, 1, t0, ddbstore.ErrBudgetExhausted),
			},
			listAt: t0,
			want: []ddbstore.BudgetLease{
				{Execution: "a", Nodes: 1, Until: t0.Add(ttl)},
				{Execution: "b", Nodes: 1, Until: t0.Add(ttl)},
			},
		},
		{
			name: "should extend an unexpired lease on renewal, keeping its nodes",
			steps: []step{
				acquire("drift-a", 2, 2, t0, nil),
				renew("drift-a", t0.Add(ttl-time.Second), nil),
				acquire("drift-b", 1, 2, t0.Add(ttl), ddbstore.ErrBudgetExhausted),
			},
			listAt: t0.Add(ttl),
			want:   []ddbstore.BudgetLease{{Execution: "drift-a", Nodes: 2, Until: t0.Add(2*ttl - time.Second)}},
		},
		{
			name: "should never renew a lease that lapsed while another execution took its room",
			steps: []step{
				acquire("slow-drain", 1, 1, t0, nil),
				acquire("next", 1, 1, t0.Add(ttl), nil),
				renew("slow-drain", t0.Add(ttl+time.Second), ddbstore.ErrLeaseLapsed),
			},
			listAt: t0.Add(ttl + time.Second),
			want:   []ddbstore.BudgetLease{{Execution: "next", Nodes: 1, Until: t0.Add(2 * ttl)}},
		},
		{
			name: "should never renew a released lease",
			steps: []step{
				acquire("drift-a", 1, 1, t0, nil),
				release("drift-a", t0.Add(time.Second)),
				renew("drift-a", t0.Add(2*time.Second), ddbstore.ErrLeaseLapsed),
				renew("never", t0.Add(2*time.Second), ddbstore.ErrLeaseLapsed),
			},
			listAt: t0.Add(2 * time.Second),
			want:   []ddbstore.BudgetLease{},
		},
		{
			name: "should release a lease it does not hold without error",
			steps: []step{
				release("never", t0),
				acquire("a", 1, 1, t0, nil),
				release("never", t0),
			},
			listAt: t0,
			want:   []ddbstore.BudgetLease{{Execution: "a", Nodes: 1, Until: t0.Add(ttl)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t, testCluster)
			for i, st := range tt.steps {
				var err error
				switch {
				case st.release:
					err = s.ReleaseBudget(ctx, "default", st.execution, st.at)
				case st.renew:
					err = s.RenewBudget(ctx, "default", st.execution, st.at, ttl)
				default:
					err = s.AcquireBudget(ctx, ddbstore.BudgetRequest{NodePool: "default", Execution: st.execution, Nodes: st.nodes, Limit: st.limit}, st.at, ttl)
				}
				if !errors.Is(err, st.want) {
					t.Fatalf("step %d (%s): error = %v, want %v", i, st.execution, err, st.want)
				}
			}
			got, err := s.ListBudgetLeases(ctx, "default", tt.listAt)
			if err != nil {
				t.Fatalf("ListBudgetLeases() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListBudgetLeases() mismatch (-want +got):\n%s", diff)
			}
			// Budgets are per NodePool and per cluster.
			for _, other := range []struct{ cluster, pool string }{{testCluster, "other"}, {"other-cluster", "default"}} {
				got, err := e.store(t, other.cluster).ListBudgetLeases(ctx, other.pool, tt.listAt)
				if err != nil || len(got) != 0 {
					t.Errorf("ListBudgetLeases(%s/%s) = %v, %v; want nothing", other.cluster, other.pool, got, err)
				}
			}
		})
	}
}

func TestAcquireBudgetErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		req  ddbstore.BudgetRequest
		ttl  time.Duration
	}{
		{name: "should refuse an empty nodepool", req: ddbstore.BudgetRequest{Execution: "e", Nodes: 1, Limit: 1}, ttl: time.Minute},
		{name: "should refuse an empty execution", req: ddbstore.BudgetRequest{NodePool: "p", Nodes: 1, Limit: 1}, ttl: time.Minute},
		{name: "should refuse zero nodes", req: ddbstore.BudgetRequest{NodePool: "p", Execution: "e", Nodes: 0, Limit: 1}, ttl: time.Minute},
		{name: "should refuse a negative limit", req: ddbstore.BudgetRequest{NodePool: "p", Execution: "e", Nodes: 1, Limit: -1}, ttl: time.Minute},
		{name: "should refuse a zero TTL", req: ddbstore.BudgetRequest{NodePool: "p", Execution: "e", Nodes: 1, Limit: 1}, ttl: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			if err := s.AcquireBudget(ctx, tt.req, t0, tt.ttl); !errors.Is(err, ddbstore.ErrInvalid) {
				t.Errorf("AcquireBudget() error = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestBudgetConcurrency races many executions for one NodePool's budget.
// Each holder counts itself in while it holds a lease; the count must never
// pass the limit, however the store's reads and writes interleave.
func TestBudgetConcurrency(t *testing.T) {
	ctx := context.Background()
	const (
		limit   = 3
		workers = 24
		rounds  = 4
	)
	tests := []struct {
		name    string
		release bool
	}{
		{name: "should never grant more than the limit to concurrent acquirers"},
		{name: "should never exceed the limit while executions acquire and release", release: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			var (
				holding, maxHolding, granted atomic.Int64
				wg                           sync.WaitGroup
				mu                           sync.Mutex
				errs                         []error
			)
			for w := range workers {
				wg.Go(func() {
					for r := range rounds {
						exec := fmt.Sprintf("exec-%02d-%d", w, r)
						req := ddbstore.BudgetRequest{NodePool: "default", Execution: exec, Nodes: 1, Limit: limit}
						err := retryConflicts(func() error { return s.AcquireBudget(ctx, req, t0, time.Hour) })
						if errors.Is(err, ddbstore.ErrBudgetExhausted) {
							continue
						}
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						granted.Add(1)
						n := holding.Add(1)
						for {
							m := maxHolding.Load()
							if n <= m || maxHolding.CompareAndSwap(m, n) {
								break
							}
						}
						if !tt.release {
							continue
						}
						holding.Add(-1)
						if err := retryConflicts(func() error { return s.ReleaseBudget(ctx, "default", exec, t0) }); err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
					}
				})
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("budget errors: %v", errs)
			}
			if m := maxHolding.Load(); m > limit {
				t.Errorf("%d executions held budget leases at once, limit %d", m, limit)
			}
			leases, err := s.ListBudgetLeases(ctx, "default", t0)
			if err != nil {
				t.Fatalf("ListBudgetLeases() error = %v", err)
			}
			if tt.release {
				if len(leases) != 0 {
					t.Errorf("ListBudgetLeases() after every release = %v, want none", leases)
				}
				if granted.Load() < limit {
					t.Errorf("%d leases granted in all, want at least %d", granted.Load(), limit)
				}
				return
			}
			if granted.Load() != limit || len(leases) != limit {
				t.Errorf("granted %d leases, %d stored, want exactly %d of each", granted.Load(), len(leases), limit)
			}
		})
	}
}

// retryConflicts calls op again while it returns a *ddbstore.ConflictError,
// as the disruption state machine retries the Conflict error of every
// budget step: a call that lost all its attempts to other writers is safe
// to repeat, and under 24 racing workers any call (a release as much as an
// acquire) may.
func retryConflicts(op func() error) error {
	for {
		err := op()
		var ce *ddbstore.ConflictError
		if !errors.As(err, &ce) {
			return err
		}
	}
}
