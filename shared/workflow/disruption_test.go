package workflow_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/workflow"
)

// TestDisruptionInputJSON pins the field names the disruption state
// machine reads ($.resumeAt, $.budget.budgeted, $.replacementCount,
// $.settings.*, ...): every one is present even when zero.
func TestDisruptionInputJSON(t *testing.T) {
	give := workflow.DisruptionInput{
		ID: "empty-general-nc-3-0123456789", Method: workflow.MethodEmpty, NodePool: "general", Reason: "node-3 is empty",
		DecidedAt:  time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Candidates: []workflow.Candidate{{NodeClaim: "general-nc-3", Node: "node-3"}},
		Budget:     workflow.Budget{Budgeted: true, Pools: []workflow.PoolBudget{{NodePool: "general", Allowed: 1}}},
	}
	want := `{"id":"empty-general-nc-3-0123456789","method":"Empty","nodePool":"general","reason":"node-3 is empty",` +
		`"decidedAt":"2026-11-29T12:00:00Z","candidates":[{"nodeClaim":"general-nc-3","node":"node-3"}],"replacements":null,` +
		`"replacementCount":0,"savingsPerHour":0,"commandRef":"","budget":{"budgeted":true,"pools":[{"nodePool":"general","allowed":1}]},` +
		`"settings":{"validationDelaySeconds":0,"pollSeconds":0,"replacementTimeoutSeconds":0,"drainPollSeconds":0,` +
		`"drainPollMaxSeconds":0,"maxDrainRounds":0,"leaseSeconds":0},"resumeAt":"","committed":false,"terminated":false,"continuation":0}`
	got, err := json.Marshal(give)
	if err != nil {
		t.Fatalf("Marshal() error = %v", err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("Marshal() mismatch (-want +got):\n%s", diff)
	}
}

// TestDisruptionStateReadsStepOutputs checks that a state carrying the
// outputs the steps added (and keys the tasks ignore) decodes into
// DisruptionState.
func TestDisruptionStateReadsStepOutputs(t *testing.T) {
	raw := `{"id":"x","method":"Drifted","candidates":[{"nodeClaim":"a","node":"node-a"}],"launch":{"replacements":[]},` +
		`"drain":{"round":3,"drained":false,"stalls":2,"nextPollSeconds":20,"nodes":[]},` +
		`"error":{"Error":"ReplacementFailed","Cause":"replacement gone"}}`
	var st workflow.DisruptionState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	if st.Drain == nil || st.Drain.Round != 3 || st.Drain.Stalls != 2 {
		t.Errorf("Drain = %+v, want round 3 with 2 stalls", st.Drain)
	}
	if diff := cmp.Diff(&workflow.TaskError{Error: "ReplacementFailed", Cause: "replacement gone"}, st.Error); diff != "" {
		t.Errorf("Error mismatch (-want +got):\n%s", diff)
	}
}

func TestCandidateList(t *testing.T) {
	tests := []struct {
		name string
		give workflow.DisruptionState
		want []workflow.Candidate
	}{
		{
			name: "should list a command's candidates",
			give: workflow.DisruptionState{DisruptionInput: workflow.DisruptionInput{Candidates: []workflow.Candidate{{NodeClaim: "a", Node: "node-a"}}}},
			want: []workflow.Candidate{{NodeClaim: "a", Node: "node-a"}},
		},
		{
			name: "should list an interruption's NodeClaim",
			give: workflow.DisruptionState{Interruption: &workflow.InterruptionInput{NodeClaim: "b", Node: "node-b", InstanceID: "i-0b"}},
			want: []workflow.Candidate{{NodeClaim: "b", Node: "node-b"}},
		},
		{name: "should list nothing for an empty state", give: workflow.DisruptionState{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.give.CandidateList()); diff != "" {
				t.Errorf("CandidateList() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamesIncludeTheDisruptionErrors(t *testing.T) {
	for _, n := range []string{workflow.ErrBudgetExhausted, workflow.ErrNoLongerEligible, workflow.ErrReplacementFailed} {
		if !slices.Contains(workflow.Names(), n) || !workflow.Known(n) {
			t.Errorf("Names() = %v, missing %s", workflow.Names(), n)
		}
	}
}

func TestIsBudgetedMethod(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{workflow.MethodEmpty, true}, {workflow.MethodDrifted, true}, {workflow.MethodUnderutilized, true},
		{workflow.MethodExpired, false}, {workflow.MethodInterrupted, false}, {workflow.MethodManual, false}, {"", false},
	}
	for _, tt := range tests {
		if got := workflow.IsBudgetedMethod(tt.give); got != tt.want {
			t.Errorf("IsBudgetedMethod(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestIsForcefulMethod(t *testing.T) {
	for m, want := range map[string]bool{
		workflow.MethodEmpty: false, workflow.MethodDrifted: false, workflow.MethodUnderutilized: false, workflow.MethodManual: false,
		workflow.MethodExpired: true, workflow.MethodInterrupted: true, "": false,
	} {
		if got := workflow.IsForcefulMethod(m); got != want {
			t.Errorf("IsForcefulMethod(%q) = %v, want %v", m, got, want)
		}
	}
}

// TestDisruptionStateMachinesUseTheDisruptionErrors keeps the ErrorEquals
// check from passing vacuously: both state machines exist, and the
// disruption machine routes every disruption error name somewhere.
func TestDisruptionStateMachinesUseTheDisruptionErrors(t *testing.T) {
	dir := filepath.Join("..", "..", "statemachines")
	for _, f := range []string{"disruption.asl.json", "interruption.asl.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("statemachines/%s: %v", f, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "disruption.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	names, err := errorEquals(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{workflow.ErrBudgetExhausted, workflow.ErrNoLongerEligible, workflow.ErrReplacementFailed} {
		if !slices.Contains(names, n) {
			t.Errorf("disruption.asl.json never names %s in an ErrorEquals", n)
		}
	}
}
