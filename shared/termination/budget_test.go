package termination_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

func TestAcquireBudget(t *testing.T) {
	tests := []struct {
		name   string
		nodes  []runtime.Object
		claims []v1.NodeClaim
		// leases are other executions' leases on pool general.
		leases      map[string]int
		give        workflow.DisruptionState
		wantPools   []workflow.PoolLease
		wantHolders map[string]int
	}{
		{
			name:        "should lease as many nodes as the command disrupts when the budget has room",
			nodes:       []runtime.Object{node("node-a"), node("node-b")},
			claims:      []v1.NodeClaim{nodeClaim("a"), nodeClaim("b")},
			give:        state(workflow.MethodEmpty, 2, "a", "b"),
			wantPools:   []workflow.PoolLease{{NodePool: "general", Leased: 2, Allowed: 2, Limit: 2, DisruptingElsewhere: []string{}, Holders: []string{}}},
			wantHolders: map[string]int{execID: 2},
		},
		{
			name:   "should count nodes NotReady, deleting or tainted outside nodewright's leases against the budget",
			nodes:  []runtime.Object{node("node-a"), node("node-x", notReady), node("node-y", disrupted), node("node-z", func(n *corev1.Node) { n.Labels[v1.LabelNodePool] = "other"; notReady(n) })},
			claims: []v1.NodeClaim{nodeClaim("a")},
			give:   state(workflow.MethodDrifted, 3, "a"),
			wantPools: []workflow.PoolLease{{NodePool: "general", Leased: 1, Allowed: 3, Limit: 1,
				DisruptingElsewhere: []string{"node-x (NotReady)", "node-y (tainted karpenter.sh/disrupted)"}, Holders: []string{}}},
			wantHolders: map[string]int{execID: 1},
		},
		{
			name:   "should not count a node of a live leased execution twice",
			nodes:  []runtime.Object{node("node-a"), node("node-b", disrupted)},
			claims: []v1.NodeClaim{nodeClaim("a"), nodeClaim("b", claimedBy("drift-general-b-1111111111", workflow.MethodDrifted, t0.Add(time.Minute)))},
			leases: map[string]int{"drift-general-b-1111111111": 1},
			give:   state(workflow.MethodDrifted, 2, "a"),
			wantPools: []workflow.PoolLease{{NodePool: "general", Leased: 1, Allowed: 2, Limit: 2,
				DisruptingElsewhere: []string{}, Holders: []string{"drift-general-b-1111111111 (1)"}}},
			wantHolders: map[string]int{execID: 1, "drift-general-b-1111111111": 1},
		},
		{
			name:   "should leave uninitialized nodes out of the disrupting count",
			nodes:  []runtime.Object{node("node-a"), node("node-new", notReady, func(n *corev1.Node) { delete(n.Labels, v1.LabelInitialized) })},
			claims: []v1.NodeClaim{nodeClaim("a")},
			give:   state(workflow.MethodUnderutilized, 1, "a"),
			wantPools: []workflow.PoolLease{{NodePool: "general", Leased: 1, Allowed: 1, Limit: 1,
				DisruptingElsewhere: []string{}, Holders: []string{}}},
			wantHolders: map[string]int{execID: 1},
		},
		{
			name:   "should treat a pool no budget limits as unlimited",
			nodes:  []runtime.Object{node("node-a")},
			claims: []v1.NodeClaim{nodeClaim("a")},
			leases: map[string]int{"empty-general-q-1111111111": 50},
			give:   state(workflow.MethodEmpty, -1, "a"),
			wantPools: []workflow.PoolLease{{NodePool: "general", Leased: 1, Allowed: -1, Limit: 2147483647,
				DisruptingElsewhere: []string{}, Holders: []string{"empty-general-q-1111111111 (50)"}}},
			wantHolders: map[string]int{execID: 1, "empty-general-q-1111111111": 50},
		},
		{
			name:        "should lease nothing for an expiration, which no budget limits",
			nodes:       []runtime.Object{node("node-a")},
			claims:      []v1.NodeClaim{nodeClaim("a")},
			give:        state(workflow.MethodExpired, 0, "a"),
			wantPools:   []workflow.PoolLease{},
			wantHolders: map[string]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.nodes...)
			for _, c := range tt.claims {
				e.claims.put(c)
			}
			for h, n := range tt.leases {
				if err := e.budgets.AcquireBudget(t.Context(), "general", h, n, 1000, t0, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			got, err := e.svc.AcquireBudget(t.Context(), tt.give, t0)
			if err != nil {
				t.Fatalf("AcquireBudget() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantPools, got.Pools); diff != "" {
				t.Errorf("Pools mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHolders, e.budgets.holders("general")); diff != "" {
				t.Errorf("leases mismatch (-want +got):\n%s", diff)
			}
			for _, cand := range tt.give.Candidates {
				cl := termination.ClaimOf(ptr(e.claims.get(t, cand.NodeClaim)))
				want := termination.Claim{Holder: execID, Method: tt.give.Method, Until: t0.Add(termination.LeaseDuration)}
				if diff := cmp.Diff(want, cl); diff != "" {
					t.Errorf("claim on %s mismatch (-want +got):\n%s", cand.NodeClaim, diff)
				}
			}
		})
	}
}

func TestAcquireBudgetRefuses(t *testing.T) {
	tests := []struct {
		name     string
		nodes    []runtime.Object
		claims   []v1.NodeClaim
		leases   map[string]int
		give     workflow.DisruptionState
		wantName string
	}{
		{
			name:     "should refuse when other executions' leases fill the budget",
			nodes:    []runtime.Object{node("node-a")},
			claims:   []v1.NodeClaim{nodeClaim("a")},
			leases:   map[string]int{"drift-general-b-1111111111": 1},
			give:     state(workflow.MethodDrifted, 1, "a"),
			wantName: workflow.ErrBudgetExhausted,
		},
		{
			name:     "should refuse when a NotReady node already uses the budget",
			nodes:    []runtime.Object{node("node-a"), node("node-x", notReady)},
			claims:   []v1.NodeClaim{nodeClaim("a")},
			give:     state(workflow.MethodUnderutilized, 1, "a"),
			wantName: workflow.ErrBudgetExhausted,
		},
		{
			name:     "should refuse a budget of 0 nodes",
			nodes:    []runtime.Object{node("node-a")},
			claims:   []v1.NodeClaim{nodeClaim("a")},
			give:     state(workflow.MethodEmpty, 0, "a"),
			wantName: workflow.ErrBudgetExhausted,
		},
		{
			name:     "should refuse a candidate another live execution holds",
			nodes:    []runtime.Object{node("node-a")},
			claims:   []v1.NodeClaim{nodeClaim("a", claimedBy("empty-general-a-9999999999", workflow.MethodEmpty, t0.Add(time.Minute)))},
			give:     state(workflow.MethodUnderutilized, 5, "a"),
			wantName: workflow.ErrNoLongerEligible,
		},
		{
			name:     "should refuse a candidate that is gone",
			nodes:    []runtime.Object{node("node-a")},
			give:     state(workflow.MethodUnderutilized, 5, "a"),
			wantName: workflow.ErrNoLongerEligible,
		},
		{
			name:   "should refuse a state without a budget for the candidates' pool",
			nodes:  []runtime.Object{node("node-a")},
			claims: []v1.NodeClaim{nodeClaim("a")},
			give: func() workflow.DisruptionState {
				st := state(workflow.MethodEmpty, 1, "a")
				st.Budget.Pools = nil
				return st
			}(),
			wantName: workflow.ErrInvalidInput,
		},
		{
			name:     "should refuse a state without candidates",
			give:     state(workflow.MethodEmpty, 1),
			wantName: workflow.ErrInvalidInput,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.nodes...)
			for _, c := range tt.claims {
				e.claims.put(c)
			}
			for h, n := range tt.leases {
				if err := e.budgets.AcquireBudget(t.Context(), "general", h, n, 1000, t0, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			_, err := e.svc.AcquireBudget(t.Context(), tt.give, t0)
			if got := workflowName(t, err); got != tt.wantName {
				t.Errorf("AcquireBudget() error = %v (%q), want %s", err, got, tt.wantName)
			}
			if _, ok := e.budgets.holders("general")[execID]; ok {
				t.Errorf("a refused execution holds a lease: %v", e.budgets.holders("general"))
			}
		})
	}
}

func TestAcquireBudgetClaims(t *testing.T) {
	tests := []struct {
		name       string
		claim      v1.NodeClaim
		method     string
		wantHolder string
	}{
		{name: "should take over a claim that lapsed", claim: nodeClaim("a", claimedBy("drift-general-a-1", workflow.MethodDrifted, t0.Add(-time.Second))),
			method: workflow.MethodUnderutilized, wantHolder: execID},
		{name: "should let an expiration take a node from a budgeted command", claim: nodeClaim("a", claimedBy("consolidate-general-a-1", workflow.MethodUnderutilized, t0.Add(time.Minute))),
			method: workflow.MethodExpired, wantHolder: execID},
		{name: "should renew its own claim when repeated", claim: nodeClaim("a", claimedBy(execID, workflow.MethodUnderutilized, t0.Add(time.Second))),
			method: workflow.MethodUnderutilized, wantHolder: execID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, node("node-a"))
			e.claims.put(tt.claim)
			if _, err := e.svc.AcquireBudget(t.Context(), state(tt.method, 5, "a"), t0); err != nil {
				t.Fatalf("AcquireBudget() error = %v", err)
			}
			c := e.claims.get(t, "a")
			if got := termination.ClaimOf(&c); got.Holder != tt.wantHolder || !got.Until.Equal(t0.Add(termination.LeaseDuration)) {
				t.Errorf("claim = %+v, want %s until %s", got, tt.wantHolder, t0.Add(termination.LeaseDuration))
			}
			if !hasCondition(c, v1.ConditionTypeDisruptionReason, tt.method) {
				t.Errorf("conditions = %+v, want DisruptionReason=True with reason %s", c.Status.Conditions, tt.method)
			}
		})
	}
}

func TestReleaseBudget(t *testing.T) {
	e := newEnv(t, node("node-a"))
	e.claims.put(nodeClaim("a"))
	st := state(workflow.MethodUnderutilized, 1, "a")
	if _, err := e.svc.AcquireBudget(t.Context(), st, t0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := e.svc.ReleaseBudget(t.Context(), st, t0)
		if err != nil {
			t.Fatalf("ReleaseBudget() error = %v", err)
		}
		if !got.BudgetReleased {
			t.Errorf("BudgetReleased = false, want true")
		}
	}
	if h := e.budgets.holders("general"); len(h) != 0 {
		t.Errorf("leases after release = %v, want none", h)
	}
	if cl := termination.ClaimOf(ptr(e.claims.get(t, "a"))); cl.Holder != "" {
		t.Errorf("claim after release = %+v, want none", cl)
	}
}

func TestInFlight(t *testing.T) {
	list := []v1.NodeClaim{
		nodeClaim("a", claimedBy("drift-general-a-1", workflow.MethodDrifted, t0.Add(time.Minute))),
		nodeClaim("b", claimedBy("empty-general-b-1", workflow.MethodEmpty, t0.Add(time.Minute))),
		nodeClaim("c", claimedBy("empty-general-b-1", workflow.MethodEmpty, t0.Add(time.Minute))),
		nodeClaim("d", claimedBy("drift-general-d-1", workflow.MethodDrifted, t0.Add(-time.Minute))),
		nodeClaim("e"),
	}
	got := termination.InFlight(list, t0)
	var ids []string
	var cands [][]string
	for _, c := range got {
		ids = append(ids, c.ID)
		var names []string
		for _, cand := range c.Candidates {
			names = append(names, cand.NodeClaim+"@"+cand.Node)
		}
		cands = append(cands, names)
	}
	if diff := cmp.Diff([]string{"drift-general-a-1", "empty-general-b-1"}, ids); diff != "" {
		t.Errorf("InFlight() IDs mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"a@node-a"}, {"b@node-b", "c@node-c"}}, cands); diff != "" {
		t.Errorf("InFlight() candidates mismatch (-want +got):\n%s", diff)
	}
	if got[1].Method != "Empty" || !got[1].Budgeted || got[1].NodePool != "general" {
		t.Errorf("InFlight()[1] = %+v, want a budgeted Empty command of pool general", got[1])
	}
}

func ptr[T any](v T) *T { return &v }

func hasCondition(c v1.NodeClaim, t, reason string) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == t {
			return cond.Status == metav1.ConditionTrue && cond.Reason == reason
		}
	}
	return false
}
