package disruption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func budget(nodes string, reasons ...v1.DisruptionReason) v1.Budget {
	return v1.Budget{Nodes: nodes, Reasons: reasons}
}

func scheduled(b v1.Budget, schedule string, d time.Duration) v1.Budget {
	b.Schedule = &schedule
	b.Duration = &v1.Duration{Duration: d}
	return b
}

func poolWith(budgets ...v1.Budget) *v1.NodePool {
	np := &v1.NodePool{}
	np.Name = "general"
	np.Spec.Disruption.Budgets = budgets
	return np
}

// 2026-01-05 is a Monday.
var (
	mondayNoon  = time.Date(2026, time.January, 5, 12, 0, 0, 0, time.UTC)
	mondayNight = time.Date(2026, time.January, 5, 20, 0, 0, 0, time.UTC)
	saturday    = time.Date(2026, time.January, 10, 12, 0, 0, 0, time.UTC)
)

func TestAllowedDisruptions(t *testing.T) {
	window := func(b v1.Budget) v1.Budget { return scheduled(b, "0 9 * * mon-fri", 8*time.Hour) }
	sixSix := []v1.Budget{
		budget("20%", v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted),
		budget("5"),
		window(budget("0")),
	}
	tests := []struct {
		name    string
		budgets []v1.Budget
		now     time.Time
		nodes   int
		reason  Method
		want    int
	}{
		{"should round 20% of 19 nodes up to 4", []v1.Budget{budget("20%")}, mondayNoon, 19, MethodDrifted, 4},
		{"should round 10% of 5 nodes up to 1", []v1.Budget{budget("10%")}, mondayNoon, 5, MethodEmpty, 1},
		{"should allow 0 with nodes 0", []v1.Budget{budget("0")}, mondayNoon, 5, MethodUnderutilized, 0},
		{"should allow 100% of the nodes", []v1.Budget{budget("100%")}, mondayNoon, 7, MethodUnderutilized, 7},
		{"should be unlimited without budgets", nil, mondayNoon, 7, MethodUnderutilized, unlimited},
		{"should take the minimum of the budgets for Empty outside the window", sixSix, mondayNight, 19, MethodEmpty, 4},
		{"should take the minimum of the budgets for Drifted outside the window", sixSix, saturday, 19, MethodDrifted, 4},
		{"should apply only unrestricted budgets to Underutilized outside the window", sixSix, mondayNight, 19, MethodUnderutilized, 5},
		{"should block Empty inside the Monday-Friday 09:00-17:00 UTC window", sixSix, mondayNoon, 19, MethodEmpty, 0},
		{"should block Underutilized inside the window", sixSix, mondayNoon, 19, MethodUnderutilized, 0},
		{"should still be active one second before hit plus duration", []v1.Budget{window(budget("0"))},
			time.Date(2026, time.January, 5, 16, 59, 59, 0, time.UTC), 10, MethodDrifted, 0},
		{"should be inactive at hit plus duration (the cron library looks for hits after now minus duration)", []v1.Budget{window(budget("0"))},
			time.Date(2026, time.January, 5, 17, 0, 0, 0, time.UTC), 10, MethodDrifted, unlimited},
		{"should be active at the schedule hit", []v1.Budget{window(budget("0"))},
			time.Date(2026, time.January, 5, 9, 0, 0, 0, time.UTC), 10, MethodDrifted, 0},
		{"should read the schedule in UTC whatever the zone of now", []v1.Budget{window(budget("0"))},
			time.Date(2026, time.January, 5, 4, 30, 0, 0, time.FixedZone("EST", -5*3600)), 10, MethodDrifted, 0},
		{"should accept @daily with a duration", []v1.Budget{scheduled(budget("1"), "@daily", time.Hour)},
			time.Date(2026, time.January, 5, 0, 30, 0, 0, time.UTC), 10, MethodDrifted, 1},
		{"should skip a budget for other reasons", []v1.Budget{budget("0", v1.DisruptionReasonDrifted)}, mondayNoon, 10, MethodEmpty, unlimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := allowedDisruptions(poolWith(tt.budgets...), tt.now, tt.nodes, tt.reason)
			if err != nil {
				t.Fatalf("allowedDisruptions() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("allowedDisruptions() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAllowedDisruptionsFailsClosed(t *testing.T) {
	tests := []struct {
		name    string
		budgets []v1.Budget
	}{
		{"invalid schedule", []v1.Budget{budget("100%"), scheduled(budget("5"), "every day", time.Hour)}},
		{"schedule too short", []v1.Budget{scheduled(budget("5"), "0 9 *", time.Hour)}},
		{"schedule with a CRON_TZ prefix validation refuses", []v1.Budget{scheduled(budget("5"), "CRON_TZ=Asia/Tokyo 0 9 * * *", time.Hour)}},
		{"duration without schedule", []v1.Budget{{Nodes: "5", Duration: &v1.Duration{Duration: time.Hour}}}},
		{"invalid nodes", []v1.Budget{budget("lots")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := allowedDisruptions(poolWith(tt.budgets...), mondayNoon, 10, MethodDrifted)
			if err == nil {
				t.Fatalf("allowedDisruptions() = %d, want an error", got)
			}
			if got != 0 {
				t.Errorf("allowedDisruptions() = %d, want 0 (fail closed)", got)
			}
		})
	}
}

func TestBudgetsTake(t *testing.T) {
	b := budgets{"a": {MethodEmpty: 1}}
	c := b.clone()
	got := []bool{c.take("a", MethodEmpty), c.take("a", MethodEmpty), c.take("b", MethodEmpty)}
	if diff := cmp.Diff([]bool{true, false, false}, got); diff != "" {
		t.Errorf("take() mismatch (-want +got):\n%s", diff)
	}
	if b["a"][MethodEmpty] != 1 {
		t.Errorf("clone() shares state: original = %d, want 1", b["a"][MethodEmpty])
	}
}
