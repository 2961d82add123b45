package termination_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// withReplacements adds replacements named names to st, stored under its
// command ref in cmds.
func withReplacements(st workflow.DisruptionState, cmds commands, names ...string) workflow.DisruptionState {
	st.CommandRef = termination.CommandRef(st.ID)
	var planned []v1.NodeClaim
	for _, n := range names {
		st.Replacements = append(st.Replacements, workflow.Replacement{NodeClaim: n, InstanceTypes: []string{"m5.large"}, InstanceTypeCount: 1})
		planned = append(planned, v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{v1.LabelNodePool: "general"}}})
	}
	st.ReplacementCount = len(names)
	cmds[st.CommandRef] = planned
	return st
}

func TestLaunchReplacements(t *testing.T) {
	e := newEnv(t)
	st := e.hold(withReplacements(state(workflow.MethodUnderutilized, 1, "a"), e.commands, "general-r1"))

	got, err := e.svc.LaunchReplacements(t.Context(), st, t0)
	if err != nil {
		t.Fatalf("LaunchReplacements() error = %v", err)
	}
	want := []workflow.ReplacementStatus{{NodeClaim: "general-r1", Status: "Launched", ProviderID: "aws:///us-east-1a/i-0000000000000r0"}}
	if diff := cmp.Diff(want, got.Replacements); diff != "" {
		t.Errorf("Replacements mismatch (-want +got):\n%s", diff)
	}
	again, err := e.svc.LaunchReplacements(t.Context(), st, t0)
	if err != nil {
		t.Fatalf("repeated LaunchReplacements() error = %v", err)
	}
	if again.Replacements[0].Status != "AlreadyLaunched" {
		t.Errorf("repeated launch status = %s, want AlreadyLaunched", again.Replacements[0].Status)
	}
}

func TestLaunchReplacementsErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   launch.Status
		mangle   func(*workflow.DisruptionState, commands)
		wantName string
	}{
		{name: "should fail the command when EC2 has no capacity for a replacement", status: launch.InsufficientCapacity, wantName: workflow.ErrReplacementFailed},
		{name: "should fail the command when the replacement's EC2NodeClass is not ready", status: launch.NodeClassNotReady, wantName: workflow.ErrReplacementFailed},
		{name: "should ask for a retry when a launch failed otherwise", status: launch.LaunchFailed, wantName: workflow.ErrLaunchIncomplete},
		{name: "should refuse when nothing is stored under the command ref", mangle: func(st *workflow.DisruptionState, c commands) { delete(c, st.CommandRef) },
			wantName: workflow.ErrInvalidInput},
		{name: "should refuse stored replacements that do not match the state", mangle: func(st *workflow.DisruptionState, _ commands) { st.Replacements[0].NodeClaim = "other" },
			wantName: workflow.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			st := e.hold(withReplacements(state(workflow.MethodUnderutilized, 1, "a"), e.commands, "general-r1"))
			if tt.status != "" {
				e.launcher.statuses["general-r1"] = tt.status
			}
			if tt.mangle != nil {
				tt.mangle(&st, e.commands)
			}
			_, err := e.svc.LaunchReplacements(t.Context(), st, t0)
			if got := workflowName(t, err); got != tt.wantName {
				t.Errorf("LaunchReplacements() error = %v (%q), want %s", err, got, tt.wantName)
			}
		})
	}
}

func TestLaunchReplacementsWithoutReplacementsDoesNothing(t *testing.T) {
	e := newEnv(t)
	got, err := e.svc.LaunchReplacements(t.Context(), state(workflow.MethodEmpty, 1, "a"), t0)
	if err != nil || len(got.Replacements) != 0 || e.launcher.calls != 0 {
		t.Errorf("LaunchReplacements() = %+v, %v after %d launches; want nothing done", got, err, e.launcher.calls)
	}
}

// replacement is a stored replacement NodeClaim whose lifecycle reached
// the conditions given.
func replacement(name string, conds ...string) v1.NodeClaim {
	c := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelInstanceType: "m5.large"}},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-" + name}}
	for _, t := range conds {
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue})
	}
	return c
}

func TestCheckReplacements(t *testing.T) {
	tests := []struct {
		name       string
		stored     []v1.NodeClaim
		now        time.Time
		wantReady  bool
		wantStatus []string
	}{
		{name: "should wait while a replacement is not initialized", now: t0.Add(time.Minute),
			stored:     []v1.NodeClaim{replacement("general-r1", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered), replacement("general-r2", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized)},
			wantStatus: []string{"Registered", "Initialized"}},
		{name: "should report ready once every replacement is initialized", now: t0.Add(time.Minute), wantReady: true,
			stored:     []v1.NodeClaim{replacement("general-r1", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized), replacement("general-r2", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized)},
			wantStatus: []string{"Initialized", "Initialized"}},
		{name: "should report ready past the deadline when every replacement is initialized", now: t0.Add(time.Hour), wantReady: true,
			stored:     []v1.NodeClaim{replacement("general-r1", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized), replacement("general-r2", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized)},
			wantStatus: []string{"Initialized", "Initialized"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.claims.put(nodeClaim("a"))
			for _, c := range tt.stored {
				e.claims.put(c)
			}
			st := e.hold(withReplacements(state(workflow.MethodUnderutilized, 1, "a"), e.commands, "general-r1", "general-r2"))
			got, err := e.svc.CheckReplacements(t.Context(), st, tt.now)
			if err != nil {
				t.Fatalf("CheckReplacements() error = %v", err)
			}
			var status []string
			for _, r := range got.Replacements {
				status = append(status, r.Status)
			}
			if got.Ready != tt.wantReady || !cmp.Equal(status, tt.wantStatus) {
				t.Errorf("CheckReplacements() = ready %v %v, want %v %v", got.Ready, status, tt.wantReady, tt.wantStatus)
			}
			if !got.Deadline.Equal(t0.Add(termination.ReplacementTimeout)) {
				t.Errorf("Deadline = %s, want %s", got.Deadline, t0.Add(termination.ReplacementTimeout))
			}
			lease := time.Duration(st.Settings.LeaseSeconds) * time.Second
			if cl := termination.ClaimOf(ptr(e.claims.get(t, "a"))); !cl.Until.Equal(tt.now.Add(lease)) {
				t.Errorf("claim until = %s, want it renewed to %s", cl.Until, tt.now.Add(lease))
			}
		})
	}
}

func TestCheckReplacementsFails(t *testing.T) {
	tests := []struct {
		name   string
		stored []v1.NodeClaim
		now    time.Time
	}{
		{name: "should fail when a replacement was deleted (launch or registration failed)", now: t0.Add(time.Minute)},
		{name: "should fail when a replacement is being deleted", now: t0.Add(time.Minute),
			stored: []v1.NodeClaim{func() v1.NodeClaim {
				c := replacement("general-r1", v1.ConditionTypeLaunched)
				c.DeletionTimestamp = &metav1.Time{Time: t0}
				return c
			}()}},
		{name: "should fail when a replacement does not initialize within the command timeout", now: t0.Add(termination.ReplacementTimeout),
			stored: []v1.NodeClaim{replacement("general-r1", v1.ConditionTypeLaunched, v1.ConditionTypeRegistered)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.claims.put(nodeClaim("a"))
			for _, c := range tt.stored {
				e.claims.put(c)
			}
			st := e.hold(withReplacements(state(workflow.MethodUnderutilized, 1, "a"), e.commands, "general-r1"))
			_, err := e.svc.CheckReplacements(t.Context(), st, tt.now)
			if got := workflowName(t, err); got != workflow.ErrReplacementFailed {
				t.Errorf("CheckReplacements() error = %v (%q), want ReplacementFailed", err, got)
			}
		})
	}
}
