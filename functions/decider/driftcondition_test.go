package decider_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

// TestHandleRecordsTheDriftedConditionOnlyWhenItChanges polls three times
// (karpenter-spec section 7, the Drifted condition): a NodeClaim on an
// image the EC2NodeClass no longer resolves gets Drifted=True with reason
// AMIDrift; the next poll of the same state writes nothing; once the
// NodeClaim is on the resolved image again, the condition is removed.
func TestHandleRecordsTheDriftedConditionOnlyWhenItChanges(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	cfg, err := e.store.GetConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodePools[0].Spec.Disruption.ConsolidateAfter = v1.MustParseNillable(v1.Never)
	if _, err := e.store.PutConfig(t.Context(), cfg.Config, cfg.Version); err != nil {
		t.Fatal(err)
	}
	setImage := func(image string) {
		t.Helper()
		c, err := e.store.GetNodeClaim(t.Context(), "general-a")
		if err != nil {
			t.Fatal(err)
		}
		c.Status.ImageID = image
		if _, err := e.store.UpdateNodeClaim(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	drifted := func() (*metav1.Condition, string) {
		t.Helper()
		c, err := e.store.GetNodeClaim(t.Context(), "general-a")
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.Status.Conditions {
			if c.Status.Conditions[i].Type == v1.ConditionTypeDrifted {
				return &c.Status.Conditions[i], c.ResourceVersion
			}
		}
		return nil, c.ResourceVersion
	}
	setImage("ami-old")

	steps := []struct {
		name        string
		at          time.Time
		image       string // set before the poll; "" keeps it
		wantWritten int
		wantReason  string // "" wants no Drifted condition
	}{
		{name: "a drifted NodeClaim gets Drifted=True with its reason", at: t0, wantWritten: 1, wantReason: disruption.DriftAMI},
		{name: "the next poll of the same state writes nothing", at: t0.Add(time.Minute), wantWritten: 0, wantReason: disruption.DriftAMI},
		{name: "a NodeClaim no longer drifted loses the condition", at: t0.Add(2 * time.Minute), image: "ami-1", wantWritten: 1},
		{name: "a clean NodeClaim is not written again", at: t0.Add(3 * time.Minute), wantWritten: 0},
	}
	for _, s := range steps {
		if s.image != "" {
			setImage(s.image)
		}
		_, before := drifted()
		out, err := e.handler(t, s.at).Handle(t.Context(), nil)
		if err != nil {
			t.Fatalf("%s: Handle() error = %v", s.name, err)
		}
		cond, after := drifted()
		if out.DriftConditions != s.wantWritten {
			t.Errorf("%s: DriftConditions = %d, want %d", s.name, out.DriftConditions, s.wantWritten)
		}
		if s.wantWritten == 0 && after != before {
			t.Errorf("%s: resourceVersion %s -> %s, want no write", s.name, before, after)
		}
		if s.wantReason == "" {
			if cond != nil {
				t.Errorf("%s: Drifted = %+v, want none", s.name, *cond)
			}
			continue
		}
		if cond == nil {
			t.Fatalf("%s: no Drifted condition, want True/%s", s.name, s.wantReason)
		}
		got := metav1.Condition{Type: cond.Type, Status: cond.Status, Reason: cond.Reason, LastTransitionTime: cond.LastTransitionTime}
		want := metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: s.wantReason, LastTransitionTime: metav1.NewTime(t0)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: Drifted condition (-want +got):\n%s", s.name, diff)
		}
		if cond.Message == "" {
			t.Errorf("%s: Drifted message empty, want what changed", s.name)
		}
	}
}
