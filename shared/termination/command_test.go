package termination_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/scheduling"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

func TestPrepare(t *testing.T) {
	types := make([]string, 30)
	for i := range types {
		types[i] = "t" + string(rune('a'+i%26)) + ".large"
	}
	cmd := disruption.Command{
		ID: "consolidate-general-nc-3-1a2b3c4d", Method: disruption.MethodUnderutilized, Decision: disruption.DecisionReplace,
		NodePool: "general", Budgeted: true, Reason: "node-3 can be replaced by a cheaper node", SavingsPerHour: 0.05,
		Candidates: []disruption.Candidate{{NodeClaim: "general-nc-3", Node: "node-3", NodePool: "general", InstanceType: "m5.large", PricePerHour: 0.096}},
		Replacements: []disruption.Replacement{{
			InstanceTypes: types,
			Expected:      scheduling.ExpectedOffering{InstanceType: "ta.large", Zone: "us-east-1a", CapacityType: "spot", PricePerHour: 0.03},
			NodeClaim:     v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "suggested", Labels: map[string]string{v1.LabelNodePool: "general"}}},
		}},
	}
	budgets := []disruption.BudgetStatus{
		{NodePool: "general", Reason: disruption.MethodEmpty, Allowed: 5},
		{NodePool: "general", Reason: disruption.MethodUnderutilized, Allowed: 2},
	}
	got := termination.Prepare(cmd, budgets, t0)

	if got.Name != termination.ExecutionName(cmd.ID, t0) || got.Input.ID != got.Name || !strings.HasPrefix(got.Name, "consolidate-general-nc-3-") {
		t.Errorf("Name = %q, Input.ID = %q; want ExecutionName of the command", got.Name, got.Input.ID)
	}
	wantName := termination.ReplacementName("general", got.Name, 0)
	if len(got.Replacements) != 1 || got.Replacements[0].Name != wantName ||
		got.Replacements[0].Annotations[termination.AnnotationReplacementFor] != got.Name || !got.Replacements[0].CreationTimestamp.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("Replacements = %+v, want one named %s, annotated and created at the decision", got.Replacements, wantName)
	}
	wantRep := []workflow.Replacement{{NodeClaim: wantName, InstanceTypes: types[:20], InstanceTypeCount: 30,
		Expected: &workflow.ExpectedOffering{InstanceType: "ta.large", Zone: "us-east-1a", CapacityType: "spot", PricePerHour: 0.03}}}
	if diff := cmp.Diff(wantRep, got.Input.Replacements); diff != "" {
		t.Errorf("Input.Replacements mismatch (-want +got):\n%s", diff)
	}
	wantBudget := workflow.Budget{Budgeted: true, Pools: []workflow.PoolBudget{{NodePool: "general", Allowed: 2}}}
	if diff := cmp.Diff(wantBudget, got.Input.Budget); diff != "" {
		t.Errorf("Input.Budget mismatch (-want +got):\n%s", diff)
	}
	if got.Input.ReplacementCount != 1 || got.Input.CommandRef != termination.CommandRef(got.Name) || got.Input.Settings.ValidationDelaySeconds != 15 {
		t.Errorf("Input = %+v, want one replacement stored under the command ref and Karpenter's timers", got.Input)
	}

	data, err := termination.EncodeReplacements(got.Replacements)
	if err != nil {
		t.Fatal(err)
	}
	back, err := termination.DecodeReplacements(data)
	if err != nil || len(back) != 1 || back[0].Name != wantName {
		t.Errorf("DecodeReplacements() = %v, %v; want the encoded replacement", back, err)
	}
}

func TestHeldReplacementsBelongToTheirCommandUntilItEnds(t *testing.T) {
	const running, ended = "drift-a-0123456789", "drift-b-0123456789"
	replacement := func(name, cmd string) v1.NodeClaim {
		return nodeClaim(name, func(c *v1.NodeClaim) { c.Annotations = map[string]string{termination.AnnotationReplacementFor: cmd} })
	}
	claims := []v1.NodeClaim{
		nodeClaim("a", claimedBy(running, workflow.MethodDrifted, t0.Add(time.Minute))),
		nodeClaim("b", claimedBy(ended, workflow.MethodDrifted, t0.Add(-time.Minute))),
		replacement("general-ra", running),
		replacement("general-rb", ended),
		nodeClaim("c"),
	}
	got := termination.HeldReplacements(claims, termination.InFlight(claims, t0))
	if diff := cmp.Diff(map[string]string{"general-ra": running}, got); diff != "" {
		t.Errorf("HeldReplacements() mismatch (-want +got):\n%s", diff)
	}
}
