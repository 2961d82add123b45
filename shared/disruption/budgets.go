package disruption

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// unlimited is what a budget that does not apply allows (Karpenter uses
// MaxInt32).
const unlimited = math.MaxInt32

// budgetMethods are the budgeted reasons, in report order.
var budgetMethods = []Method{MethodEmpty, MethodDrifted, MethodUnderutilized}

// allowedDisruptions is the number of nodes np's budgets let be disrupting
// at now for reason, with numNodes nodes in the pool: the minimum over the
// budgets that are active and apply to reason (reasons unset, or listing
// it) of ceil(percent × numNodes) or the integer; unlimited when none
// applies. A budget with an invalid schedule or nodes value fails closed:
// the pool then allows 0 for every reason, as Karpenter's
// MustGetAllowedDisruptions does (karpenter: pkg/apis/v1/nodepool.go
// GetAllowedDisruptionsByReason; karpenter-spec §6.3).
func allowedDisruptions(np *v1.NodePool, now time.Time, numNodes int, reason Method) (int, error) {
	allowed := unlimited
	var errs []error
	for i := range np.Spec.Disruption.Budgets {
		b := &np.Spec.Disruption.Budgets[i]
		val, err := budgetValue(b, now, numNodes)
		if err != nil {
			errs = append(errs, fmt.Errorf("budgets[%d]: %w", i, err))
			continue
		}
		if b.Reasons == nil || containsReason(b.Reasons, reason) {
			allowed = min(allowed, val)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return allowed, nil
}

func containsReason(rs []v1.DisruptionReason, m Method) bool {
	for _, r := range rs {
		if string(r) == string(m) {
			return true
		}
	}
	return false
}

// budgetValue is one budget's allowance at now: unlimited when inactive,
// else nodes scaled to numNodes, percentages rounded up (so 10% of 5
// nodes is 1, as Kubernetes rounds PDB maxUnavailable).
func budgetValue(b *v1.Budget, now time.Time, numNodes int) (int, error) {
	on, err := budgetActive(b, now)
	if err != nil {
		return 0, err
	}
	if !on {
		return unlimited, nil
	}
	v := intstr.FromString(b.Nodes)
	if n, err := strconv.Atoi(b.Nodes); err == nil {
		v = intstr.FromInt(n)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, numNodes, true)
	if err != nil {
		return 0, fmt.Errorf("nodes %q: %w", b.Nodes, err)
	}
	return n, nil
}

// budgetActive reports whether b is in force at now. Without schedule and
// duration it always is; otherwise it is when the schedule's last hit, in
// UTC, is at most duration before now: the next hit after now - duration is
// not after now (karpenter: Budget.IsActive; the schedule is parsed by
// v1.ParseBudgetSchedule, the parser validation uses).
func budgetActive(b *v1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	schedule := ""
	if b.Schedule != nil {
		schedule = *b.Schedule
	}
	sched, err := v1.ParseBudgetSchedule(schedule)
	if err != nil {
		return false, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	var d time.Duration
	if b.Duration != nil {
		d = b.Duration.Duration
	}
	now = now.UTC()
	return !sched.Next(now.Add(-d)).After(now), nil
}

// budgets holds what each pool may still disrupt per reason in this
// evaluation.
type budgets map[string]map[Method]int

// clone copies b so a method can consume it without touching the others'.
func (b budgets) clone() budgets {
	out := make(budgets, len(b))
	for pool, m := range b {
		out[pool] = make(map[Method]int, len(m))
		for r, v := range m {
			out[pool][r] = v
		}
	}
	return out
}

// take consumes one disruption of pool for reason; false when none is
// left.
func (b budgets) take(pool string, reason Method) bool {
	if b[pool][reason] <= 0 {
		return false
	}
	b[pool][reason]--
	return true
}

// computeBudgets counts, per pool, the managed initialized nodes that are
// not terminating (the base of percentages) and those of them already
// disrupting (NotReady or being deleted), and returns what remains
// available per reason and the report (karpenter: helpers.go
// BuildDisruptionBudgetMapping; karpenter-spec §6.3, §6.6).
func (e *evaluation) computeBudgets() (budgets, []BudgetStatus) {
	count := map[string]int{}
	disrupting := map[string]int{}
	for _, n := range e.nodes {
		if n.node == nil || !n.initialized || n.pool == nil || meta.IsStatusConditionTrue(n.claim.Status.Conditions, v1.ConditionTypeInstanceTerminating) {
			continue
		}
		count[n.pool.Name]++
		if !n.ready || n.deleting {
			disrupting[n.pool.Name]++
		}
	}
	names := make([]string, 0, len(e.pools))
	for name := range e.pools {
		names = append(names, name)
	}
	sort.Strings(names)
	out := budgets{}
	var report []BudgetStatus
	for _, name := range names {
		np := e.pools[name]
		out[name] = map[Method]int{}
		for _, r := range budgetMethods {
			allowed, err := allowedDisruptions(np, e.now, count[name], r)
			if err != nil {
				allowed = 0
			}
			avail := max(allowed-disrupting[name], 0)
			out[name][r] = avail
			st := BudgetStatus{NodePool: name, Reason: r, Nodes: count[name], Allowed: allowed, Disrupting: disrupting[name], Available: avail}
			if allowed == unlimited {
				st.Allowed, st.Available = -1, -1
			}
			report = append(report, st)
		}
	}
	return out, report
}

// describeBudget says why pool has no disruption left for reason.
func (e *evaluation) describeBudget(pool string, reason Method) string {
	for _, st := range e.budgetReport {
		if st.NodePool == pool && st.Reason == reason {
			if st.Available == 0 && st.Allowed > 0 {
				return fmt.Sprintf("the %s budget of NodePool %s is spent: %d allowed, %d of %d nodes already disrupting", reason, pool, st.Allowed, st.Disrupting, st.Nodes)
			}
			if st.Allowed == 0 {
				return fmt.Sprintf("the %s budget of NodePool %s allows no disruption now (%d nodes)", reason, pool, st.Nodes)
			}
		}
	}
	return fmt.Sprintf("the %s budget of NodePool %s is used up by this evaluation's command", reason, pool)
}
