package disruption_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/disruption"
)

// mixedCluster has something for every method: an expired node, empty
// nodes, a drifted-by-AMI node and underutilized ones.
func mixedCluster() *cluster {
	c := newCluster(onDemandTypes(), pool("general"))
	withAMIs(&c.in.NodeClasses[0], "ami-new")
	c.node("a", xlarge, "us-east-1a", od, "general", imageID("ami-new"))
	c.node("b", xlarge2, "us-east-1b", od, "general", imageID("ami-new"))
	c.node("c", xlarge, "us-east-1c", od, "general", imageID("ami-old"))
	c.node("d", xlarge, "us-east-1a", od, "general", imageID("ami-new"), createdAt(now.Add(-800*3600e9)))
	c.pods("node-a", "1", "a-0", "a-1")
	c.pods("node-b", "1", "b-0")
	c.pods("node-c", "1", "c-0")
	c.pods("node-d", "1", "d-0")
	return c
}

func TestEvaluateIsDeterministic(t *testing.T) {
	base := mixedCluster()
	want, err := disruption.Evaluate(t.Context(), base.in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5; i++ {
		c := mixedCluster()
		r.Shuffle(len(c.in.NodeClaims), func(i, j int) { c.in.NodeClaims[i], c.in.NodeClaims[j] = c.in.NodeClaims[j], c.in.NodeClaims[i] })
		r.Shuffle(len(c.in.Nodes), func(i, j int) { c.in.Nodes[i], c.in.Nodes[j] = c.in.Nodes[j], c.in.Nodes[i] })
		r.Shuffle(len(c.in.Pods), func(i, j int) { c.in.Pods[i], c.in.Pods[j] = c.in.Pods[j], c.in.Pods[i] })
		got, err := disruption.Evaluate(t.Context(), c.in)
		if err != nil {
			t.Fatalf("Evaluate() error = %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Evaluate() of a shuffled snapshot differs (-first +shuffled):\n%s", diff)
		}
	}
}

func TestEvaluateDoesNotChangeItsInput(t *testing.T) {
	c := mixedCluster()
	before, err := json.Marshal(c.in)
	if err != nil {
		t.Fatalf("json.Marshal() error = %v", err)
	}
	if _, err := disruption.Evaluate(t.Context(), c.in); err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	after, _ := json.Marshal(c.in)
	if string(before) != string(after) {
		t.Errorf("Evaluate() changed its input")
	}
}

// TestResultJSONShape checks the field names the JSON shape fixes
// and that the result survives a JSON round trip.
func TestResultJSONShape(t *testing.T) {
	res, err := disruption.Evaluate(t.Context(), mixedCluster().in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("json.Marshal() error = %v", err)
	}
	var generic struct {
		Commands []map[string]json.RawMessage `json:"commands"`
		Blocked  []map[string]json.RawMessage `json:"blocked"`
	}
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatalf("json.Unmarshal() error = %v", err)
	}
	if len(generic.Commands) == 0 || len(generic.Blocked) == 0 {
		t.Fatalf("result %s: want commands and blocked entries", b)
	}
	for _, key := range []string{"method", "nodePool", "candidates", "replacements", "savingsPerHour"} {
		if _, ok := generic.Commands[0][key]; !ok {
			t.Errorf("command JSON lacks %q: %s", key, b)
		}
	}
	for _, key := range []string{"nodeClaim", "node", "reason"} {
		if _, ok := generic.Blocked[0][key]; !ok {
			t.Errorf("blocked JSON lacks %q: %s", key, b)
		}
	}
	var back disruption.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("json.Unmarshal(Result) error = %v", err)
	}
	again, _ := json.Marshal(back)
	if string(again) != string(b) {
		t.Errorf("Result does not survive a JSON round trip:\n%s\n%s", b, again)
	}
}

func TestMixedClusterOutcome(t *testing.T) {
	res, err := disruption.Evaluate(t.Context(), mixedCluster().in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	want := []cmdSummary{del(disruption.MethodDrifted, "c"), del(disruption.MethodExpired, "d")}
	if diff := cmp.Diff(want, summarize(res).Commands); diff != "" {
		t.Errorf("Evaluate() commands mismatch (-want +got):\n%s", diff)
	}
}
