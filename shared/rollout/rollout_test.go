package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/rollout"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

var large = st.InstanceType("m5.large", "2", "8Gi", "29", 0.096)

// day is the first forecast day; the fixtures were created a day before.
var day = time.Date(2026, time.January, 2, 0, 0, 0, 0, time.UTC)

func at(hhmmss string) time.Time {
	t, err := time.Parse("2006-01-02T15:04:05Z", "2026-01-02T"+hhmmss+"Z")
	if err != nil {
		panic(err)
	}
	return t
}

// nightly is the budget set of the practitioners' advice: no disruption
// except 10% of the nodes from 02:00 to 03:00 UTC (the "0" budget is
// active 03:00 to 02:00 the next day; Karpenter takes the minimum of the
// active budgets).
var nightly = []v1.Budget{
	{Nodes: "10%"},
	{Nodes: "0", Schedule: ptr("0 3 * * *"), Duration: v1.NewDuration(23 * time.Hour)},
}

func ptr[T any](v T) *T { return &v }

// drifted30 is 30 on-demand m5.large nodes of NodePool general, all
// running ami-old while the EC2NodeClass now selects ami-new (AMI drift),
// each with one Ready pod of 1.5 cpu (no other node has room for it, so drift replaces rather than deletes). Node "n-07" runs a do-not-disrupt pod and node
// "n-13" a pod whose PodDisruptionBudget allows no eviction.
func drifted30(budgets []v1.Budget) disruption.Input {
	pool := st.NodePool("general", func(np *v1.NodePool) {
		np.Spec.Disruption.Budgets = budgets
		np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillable("Never")
	})
	class := st.EC2NodeClass(st.DefaultNodeClass)
	class.Status.AMIs = []v1.AMI{{ID: "ami-new", Requirements: []v1.NodeSelectorRequirementWithMinValues{
		{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}}}
	in := disruption.Input{
		NodePools: []v1.NodePool{pool}, NodeClasses: []v1.EC2NodeClass{class},
		InstanceTypes: map[string][]*catalog.InstanceType{st.DefaultNodeClass: {large}},
	}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	for i := range 30 {
		name := fmt.Sprintf("n-%02d", i)
		zone := zones[i%3]
		claim := st.NodeClaim(name, st.ClaimType(large, zone, v1.CapacityTypeOnDemand), st.ClaimPool("general"), st.ClaimNode(name))
		claim.Status.ProviderID = "aws:///" + zone + "/i-" + name
		claim.Status.ImageID = "ami-old"
		claim.Status.Conditions = append(claim.Status.Conditions,
			metav1.Condition{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.NewTime(st.Epoch)},
			metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(st.Epoch)})
		n := st.Node(name, st.NodeType(large, zone, v1.CapacityTypeOnDemand), st.ManagedBy("general"))
		n.Spec.ProviderID = claim.Status.ProviderID
		in.NodeClaims, in.Nodes = append(in.NodeClaims, *claim), append(in.Nodes, *n)
		p := st.Pod("app-"+name, st.BoundTo(name), st.Requests("1500m", "256Mi"), func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			switch name {
			case "n-07":
				p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
			case "n-13":
				p.Labels = map[string]string{"app": "ledger"}
			}
		})
		in.Pods = append(in.Pods, *p)
	}
	zero := intstr.FromInt32(0)
	in.PodDisruptionBudgets = []policyv1.PodDisruptionBudget{{
		ObjectMeta: metav1.ObjectMeta{Name: "ledger", Namespace: st.DefaultNamespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ledger"}}, MaxUnavailable: &zero},
	}}
	return in
}

// starts returns the steps' NodeClaims and start times as "n-00@02:00:00".
func starts(tl rollout.Timeline) []string {
	var out []string
	for _, s := range tl.Steps {
		out = append(out, s.NodeClaim+"@"+s.Start.Format("15:04:05"))
	}
	return out
}

func forecast(t *testing.T, in disruption.Input, opts rollout.Options) rollout.Timeline {
	t.Helper()
	tl, err := rollout.Forecast(context.Background(), in, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// With the nightly budgets, drift starts at 02:00 and not before; a
// command takes Boot + Drain = 2m30s, so at a one-minute poll three
// commands overlap and one starts every minute (the engine starts one
// Drifted command per evaluation): 28 nodes from 02:00 to 02:27, done at
// 02:29:30. The do-not-disrupt node and the node behind the PDB at zero
// are never replaced, with the engine's reasons.
func TestForecastReplacesDriftedNodesOnlyInsideTheBudgetWindow(t *testing.T) {
	tl := forecast(t, drifted30(nightly), rollout.Options{From: day, Until: at("06:00:00")})
	if len(tl.Steps) != 28 {
		t.Fatalf("steps %d, want 28: %q", len(tl.Steps), starts(tl))
	}
	for i, s := range tl.Steps {
		want := at("02:00:00").Add(time.Duration(i) * time.Minute)
		if !s.Start.Equal(want) || !s.Ready.Equal(want.Add(90*time.Second)) || !s.Done.Equal(want.Add(150*time.Second)) {
			t.Errorf("step %d %s: start %s ready %s done %s, want start %s, ready +90s, done +150s", i, s.NodeClaim, s.Start, s.Ready, s.Done, want)
		}
		if s.Method != disruption.MethodDrifted || s.Decision != disruption.DecisionReplace || len(s.Replacements) != 1 || !strings.HasPrefix(s.Replacements[0], "m5.large on-demand ") {
			t.Errorf("step %d: %s %s replaced by %q, want a Drifted replace by one m5.large on-demand", i, s.Method, s.Decision, s.Replacements)
		}
		if s.NodeClaim == "n-07" || s.NodeClaim == "n-13" {
			t.Errorf("step %d replaces %s, which must never be", i, s.NodeClaim)
		}
	}
	if tl.PeakExtraNodes != 3 || tl.PeakDisrupting != 3 || fmt.Sprintf("%.3f", tl.PeakExtraPerHour) != "0.288" {
		t.Errorf("peaks: %d extra nodes, %d disrupting, %.4f/h; want 3, 3 and 3 x 0.096", tl.PeakExtraNodes, tl.PeakDisrupting, tl.PeakExtraPerHour)
	}
	if len(tl.Never) != 2 || tl.Never[0].NodeClaim != "n-07" || !strings.Contains(tl.Never[0].Reason, "do-not-disrupt") ||
		tl.Never[1].NodeClaim != "n-13" || !strings.Contains(tl.Never[1].Reason, "PodDisruptionBudget") {
		t.Errorf("never = %+v; want n-07 (do-not-disrupt) and n-13 (PodDisruptionBudget)", tl.Never)
	}
	if tl.Finished || tl.Finish != nil {
		t.Errorf("finished %v at %v; want unfinished: two nodes stay drifted", tl.Finished, tl.Finish)
	}
	wantWindow := rollout.Window{NodePool: "general", Reason: disruption.MethodDrifted, Start: at("02:00:00"), End: at("03:00:00")}
	if len(tl.Windows) != 1 || tl.Windows[0] != wantWindow {
		t.Errorf("windows = %+v, want %+v", tl.Windows, wantWindow)
	}
}

// When a command takes longer than the poll times the budget, the budget
// paces the rollout: 10% of 30 is 3 nodes at once; with Boot 5m and
// Drain 2m a command takes 7 minutes, so three start at 02:00, 02:01 and
// 02:02, the next three when those are gone (02:07, 02:08, 02:09), and so
// on; nine rounds fit in the window (the last at 02:56-02:58), 27 nodes:
// the 28th waits for the next night's 02:00.
func TestForecastBudgetPacesTheRolloutAndTheWindowClosesIt(t *testing.T) {
	tl := forecast(t, drifted30(nightly), rollout.Options{From: day, Until: at("23:59:00").Add(4 * time.Hour), Boot: 5 * time.Minute, Drain: 2 * time.Minute})
	got := starts(tl)
	want := []string{}
	for round := range 10 {
		for k := range 3 {
			start := at("02:00:00").Add(time.Duration(7*round+k) * time.Minute)
			if start.Before(at("03:00:00")) && len(want) < 28 {
				want = append(want, start.Format("15:04:05"))
			}
		}
	}
	if len(got) != 28 {
		t.Fatalf("steps %d, want 28 over two nights: %q", len(got), got)
	}
	for i, w := range want {
		if !strings.HasSuffix(got[i], "@"+w) {
			t.Errorf("step %d = %s, want a start at %s", i, got[i], w)
		}
	}
	if len(want) != 27 {
		t.Fatalf("the expectation holds %d starts in the first night, want 27", len(want))
	}
	if d := tl.Steps[27].Start; !d.Equal(at("02:00:00").Add(24 * time.Hour)) {
		t.Errorf("step 27 starts %s, want the next night's 02:00", d)
	}
	if tl.Finished || len(tl.Never) != 2 {
		t.Errorf("finished %v, never %+v; want the two protected nodes never replaced", tl.Finished, tl.Never)
	}
	if tl.PeakDisrupting != 3 {
		t.Errorf("peak disrupting %d, want the budget's 3", tl.PeakDisrupting)
	}
}

// A budget that is always zero replaces nothing, and says so.
func TestForecastNeverReplacesUnderABudgetAlwaysZero(t *testing.T) {
	tl := forecast(t, drifted30([]v1.Budget{{Nodes: "0"}}), rollout.Options{From: day, Until: at("06:00:00")})
	if len(tl.Steps) != 0 || len(tl.Never) != 30 || len(tl.Windows) != 0 {
		t.Fatalf("%d steps, %d never, windows %+v; want 0, 30 and none", len(tl.Steps), len(tl.Never), tl.Windows)
	}
	if r := tl.Never[0].Reason; !strings.Contains(r, "budget") {
		t.Errorf("reason %q, want the budget named", r)
	}
}

// Without a drifted node (the change changed nothing) the forecast is
// finished at From.
func TestForecastOfNoChangeFinishesAtOnce(t *testing.T) {
	in := drifted30(nightly)
	in.NodeClasses[0].Status.AMIs[0].ID = "ami-old"
	tl := forecast(t, in, rollout.Options{From: day, Until: at("03:00:00")})
	if len(tl.Steps) != 0 || !tl.Finished || tl.Finish == nil || !tl.Finish.Equal(day) {
		t.Errorf("steps %q, finished %v at %v; want none, finished at %s", starts(tl), tl.Finished, tl.Finish, day)
	}
}

// expireAfter: every node created a day before From with expireAfter 25h
// expires at 01:00, outside the window: expiration is forceful, so all 30
// go at the 01:00 poll, the do-not-disrupt node too; its drain never ends
// without a terminationGracePeriod.
func TestForecastExpirationIgnoresBudgetsAndWaitsForDoNotDisrupt(t *testing.T) {
	in := drifted30(nightly)
	in.NodeClasses[0].Status.AMIs[0].ID = "ami-old" // no drift
	for i := range in.NodeClaims {
		in.NodeClaims[i].Spec.ExpireAfter = v1.MustParseNillable("25h")
	}
	tl := forecast(t, in, rollout.Options{From: day, Until: at("03:00:00")})
	if len(tl.Steps) != 30 {
		t.Fatalf("steps %d, want 30: %q", len(tl.Steps), starts(tl))
	}
	for _, s := range tl.Steps {
		if s.Method != disruption.MethodExpired || !s.Start.Equal(at("01:00:00")) {
			t.Errorf("%s: %s at %s, want Expired at 01:00", s.NodeClaim, s.Method, s.Start)
		}
	}
	if len(tl.Never) != 1 || tl.Never[0].NodeClaim != "n-07" || !strings.Contains(tl.Never[0].Reason, "terminationGracePeriod") {
		t.Errorf("never = %+v, want n-07 stuck draining (no terminationGracePeriod)", tl.Never)
	}
}

func TestForecastRejectsBadOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts rollout.Options
		want string
	}{
		{"should require From", rollout.Options{}, "From"},
		{"should reject Until before From", rollout.Options{From: day, Until: day.Add(-time.Hour)}, "Until"},
		{"should reject a negative Boot", rollout.Options{From: day, Boot: -time.Second}, "Boot"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rollout.Forecast(context.Background(), drifted30(nightly), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to name %s", err, tt.want)
			}
		})
	}
}

// BenchmarkForecast48h is a two-day forecast (2,881 evaluations) of the
// 30 drifted nodes under the nightly budgets.
func BenchmarkForecast48h(b *testing.B) {
	in := drifted30(nightly)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rollout.Forecast(context.Background(), in, rollout.Options{From: day}); err != nil {
			b.Fatal(err)
		}
	}
}

// terminationGracePeriod caps the drain: with 20s on every NodeClaim a
// drift replacement is done Boot + 20s after it starts, and an expired
// node with a do-not-disrupt pod is gone 20s after its drain starts
// instead of never.
func TestForecastTerminationGracePeriodCapsTheDrain(t *testing.T) {
	in := drifted30(nightly)
	for i := range in.NodeClaims {
		in.NodeClaims[i].Spec.TerminationGracePeriod = v1.NewDuration(20 * time.Second)
	}
	tl := forecast(t, in, rollout.Options{From: at("01:59:00"), Until: at("02:01:00")})
	if len(tl.Steps) == 0 || !tl.Steps[0].Done.Equal(at("02:01:50")) {
		t.Errorf("steps %+v; want the first, started 02:00:00, done at 02:01:50 (90s boot + 20s)", tl.Steps)
	}
	in.NodeClasses[0].Status.AMIs[0].ID = "ami-old"
	for i := range in.NodeClaims {
		in.NodeClaims[i].Spec.ExpireAfter = v1.MustParseNillable("25h")
	}
	tl = forecast(t, in, rollout.Options{From: day, Until: at("01:05:00")})
	for _, s := range tl.Steps {
		if s.NodeClaim == "n-07" && !s.Done.Equal(at("01:00:20")) {
			t.Errorf("expired do-not-disrupt node done at %s, want 01:00:20", s.Done)
		}
	}
	if len(tl.Never) != 0 {
		t.Errorf("never = %+v, want none: terminationGracePeriod ends every drain", tl.Never)
	}
}
