package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCheckBudgetWindow checks the demo's fail-fast on the guide NodePool's
// zero budget (nodes: "0", schedule "0 2 * * *", duration 1h): drift and
// consolidation cannot act from 02:00 to 03:00 UTC.
func TestCheckBudgetWindow(t *testing.T) {
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		now     time.Time
		within  time.Duration
		wantErr string // substring; "" for none
	}{
		{name: "should pass well outside the window", now: day.Add(14 * time.Hour), within: 10 * time.Minute},
		{name: "should pass right after the window ends", now: day.Add(3 * time.Hour), within: 10 * time.Minute},
		{name: "should pass when the window opens after the demo's timeout", now: day.Add(time.Hour + 49*time.Minute), within: 10 * time.Minute},
		{name: "should fail inside the window, naming when it ends", now: day.Add(2*time.Hour + 30*time.Minute), within: 10 * time.Minute, wantErr: "from 02:00 to 03:00 UTC"},
		{name: "should fail at the window's first minute", now: day.Add(2 * time.Hour), within: 10 * time.Minute, wantErr: "run the demo after 03:00 UTC"},
		{name: "should fail when the window opens before the demo's timeout", now: day.Add(time.Hour + 55*time.Minute), within: 10 * time.Minute, wantErr: "allows no disruption"},
		{name: "should read the schedule in UTC whatever the caller's zone", now: day.Add(2*time.Hour + 10*time.Minute).In(time.FixedZone("JST", 9*3600)), within: time.Minute, wantErr: "from 02:00 to 03:00 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkBudgetWindow(tt.now, tt.within)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
				t.Errorf("checkBudgetWindow(%s, %s) = %q, want an error containing %q", tt.now.Format(time.RFC3339), tt.within, got, tt.wantErr)
			}
		})
	}
}

// TestPoolBudget checks the drift step's reading of the guide's always-on
// budget (nodes: 10%, rounded up as Karpenter scales percentages).
func TestPoolBudget(t *testing.T) {
	type result struct {
		Allowed int
		Words   string
	}
	var got []result
	for _, n := range []int{1, 4, 10, 11, 25} {
		a, w := poolBudget(n)
		got = append(got, result{a, w})
	}
	want := []result{{1, "nodes: 10%"}, {1, "nodes: 10%"}, {1, "nodes: 10%"}, {2, "nodes: 10%"}, {3, "nodes: 10%"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("poolBudget mismatch (-want +got):\n%s", diff)
	}
}

// TestDemoFailsFastInTheZeroBudgetWindow checks that runDemo refuses to
// start (exit 1, the reason on stderr, no stack started) when the guide's
// zero budget is open.
func TestDemoFailsFastInTheZeroBudgetWindow(t *testing.T) {
	demoNow = func() time.Time { return time.Date(2026, 11, 29, 2, 15, 0, 0, time.UTC) }
	t.Cleanup(func() { demoNow = time.Now })
	dir := t.TempDir() + "/stack"
	var out, errOut bytes.Buffer
	code := runDemo(context.Background(), []string{"--dir", dir}, nil, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "run the demo after 03:00 UTC") {
		t.Errorf("runDemo() = %d, stderr %q; want 1 and the window's end", code, errOut.String())
	}
	if strings.Contains(out.String(), "bringing the local stack up") {
		t.Errorf("runDemo() started a stack inside the window:\n%s", out.String())
	}
}
