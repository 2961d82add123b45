package ddbstore_test

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func TestConcurrentCounterAddsLoseNoIncrement(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, testCluster)
	labels := map[string]string{"reason": "provisioning", "nodepool": "default", "min_values_relaxed": "false"}
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() { errs <- s.AddCounter(t.Context(), v1.MetricNodeClaimsCreated, labels, 1) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("AddCounter() error = %v", err)
		}
	}
	got, err := s.ListMetrics(t.Context())
	if err != nil {
		t.Fatalf("ListMetrics() error = %v", err)
	}
	want := []v1.MetricSample{{Name: v1.MetricNodeClaimsCreated, Type: v1.MetricCounter, Labels: labels, Value: writers}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListMetrics() after %d concurrent adds mismatch (-want +got):\n%s", writers, diff)
	}
}

func TestMetricsKeepEachSeriesApart(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, testCluster)
	ctx := t.Context()
	drift := map[string]string{"reason": "drifted", "nodepool": "default", "capacity_type": "on-demand"}
	empty := map[string]string{"reason": "empty", "nodepool": "default", "capacity_type": "on-demand"}
	for _, step := range []error{
		s.AddCounter(ctx, v1.MetricNodeClaimsDisrupted, drift, 1),
		s.AddCounter(ctx, v1.MetricNodeClaimsDisrupted, empty, 1),
		s.AddCounter(ctx, v1.MetricNodeClaimsDisrupted, drift, 2),
		s.SetGauge(ctx, v1.MetricDisruptionEligible, map[string]string{"reason": "drifted"}, 3),
		s.SetGauge(ctx, v1.MetricDisruptionEligible, map[string]string{"reason": "drifted"}, 1),
		s.Observe(ctx, v1.MetricSchedulingSeconds, nil, 0.02),
		s.Observe(ctx, v1.MetricSchedulingSeconds, nil, 700),
	} {
		if step != nil {
			t.Fatalf("update error = %v", step)
		}
	}
	// Another cluster's series stay out of ours.
	if err := e.store(t, "other-cluster").AddCounter(ctx, v1.MetricNodeClaimsDisrupted, drift, 5); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListMetrics(ctx)
	if err != nil {
		t.Fatalf("ListMetrics() error = %v", err)
	}
	buckets := make([]uint64, len(v1.MetricBuckets))
	for i, le := range v1.MetricBuckets {
		if 0.02 <= le {
			buckets[i] = 1
		}
	}
	want := []v1.MetricSample{
		{Name: v1.MetricNodeClaimsDisrupted, Type: v1.MetricCounter, Labels: drift, Value: 3},
		{Name: v1.MetricNodeClaimsDisrupted, Type: v1.MetricCounter, Labels: empty, Value: 1},
		{Name: v1.MetricSchedulingSeconds, Type: v1.MetricHistogram, Count: 2, Sum: 700.02, Buckets: buckets},
		{Name: v1.MetricDisruptionEligible, Type: v1.MetricGauge, Labels: map[string]string{"reason": "drifted"}, Value: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListMetrics() mismatch (-want +got):\n%s", diff)
	}
}

func TestMetricUpdateErrors(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, testCluster)
	ctx := t.Context()
	if err := s.AddCounter(ctx, v1.MetricNodesCreated, nil, 1); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
	}{
		{name: "should refuse a negative counter increment", err: s.AddCounter(ctx, v1.MetricNodesCreated, nil, -1)},
		{name: "should refuse a NaN gauge", err: s.SetGauge(ctx, v1.MetricDisruptionEligible, nil, math.NaN())},
		{name: "should refuse a negative observation", err: s.Observe(ctx, v1.MetricSchedulingSeconds, nil, -0.5)},
		{name: "should refuse an empty name", err: s.AddCounter(ctx, "", nil, 1)},
		{name: "should refuse to update a counter as a gauge", err: s.SetGauge(ctx, v1.MetricNodesCreated, nil, 4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, ddbstore.ErrInvalid) {
				t.Errorf("error = %v, want ErrInvalid", tt.err)
			}
		})
	}
	got, err := s.ListMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]v1.MetricSample{{Name: v1.MetricNodesCreated, Type: v1.MetricCounter, Value: 1}}, got); diff != "" {
		t.Errorf("refused updates changed the store (-want +got):\n%s", diff)
	}
}

// TestMetricUpdatesWriteOnlyAChange checks that a gauge set to the value it
// holds, or a counter added 0, is not written again (no PutItem), and that
// a new series and a changed value are, and read back.
func TestMetricUpdatesWriteOnlyAChange(t *testing.T) {
	e := newEnv(t)
	api := &countingAPI{API: e.client}
	s := e.storeWith(t, api, testCluster)
	ctx := t.Context()
	eligible := map[string]string{"reason": "drifted"}
	created := map[string]string{"reason": "provisioning", "nodepool": "default", "min_values_relaxed": "false"}
	steps := []struct {
		name     string
		update   func() error
		wantPuts int
	}{
		{"a new gauge", func() error { return s.SetGauge(ctx, v1.MetricDisruptionEligible, eligible, 3) }, 1},
		{"the gauge set to its value", func() error { return s.SetGauge(ctx, v1.MetricDisruptionEligible, eligible, 3) }, 0},
		{"the gauge set to its value again", func() error { return s.SetGauge(ctx, v1.MetricDisruptionEligible, eligible, 3) }, 0},
		{"the gauge changed", func() error { return s.SetGauge(ctx, v1.MetricDisruptionEligible, eligible, 0) }, 1},
		{"the gauge set to 0 again", func() error { return s.SetGauge(ctx, v1.MetricDisruptionEligible, eligible, 0) }, 0},
		{"a new counter at 0", func() error { return s.AddCounter(ctx, v1.MetricNodeClaimsCreated, created, 0) }, 1},
		{"the counter added 0", func() error { return s.AddCounter(ctx, v1.MetricNodeClaimsCreated, created, 0) }, 0},
		{"the counter added 1", func() error { return s.AddCounter(ctx, v1.MetricNodeClaimsCreated, created, 1) }, 1},
	}
	for _, step := range steps {
		before := api.puts
		if err := step.update(); err != nil {
			t.Fatalf("%s: error = %v", step.name, err)
		}
		if got := api.puts - before; got != step.wantPuts {
			t.Errorf("%s: %d PutItem, want %d", step.name, got, step.wantPuts)
		}
	}
	got, err := s.ListMetrics(ctx)
	if err != nil {
		t.Fatalf("ListMetrics() error = %v", err)
	}
	want := []v1.MetricSample{
		{Name: v1.MetricNodeClaimsCreated, Type: v1.MetricCounter, Labels: created, Value: 1},
		{Name: v1.MetricDisruptionEligible, Type: v1.MetricGauge, Labels: eligible},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListMetrics() mismatch (-want +got):\n%s", diff)
	}
}
