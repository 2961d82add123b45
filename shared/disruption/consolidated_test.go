package disruption_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// settled is a cluster consolidation simulates and leaves alone: two
// m5.large nodes (the cheapest type), each 1.5 of its 2 CPUs requested, so
// neither's pods fit on the other and no replacement is cheaper. Node c's
// pool waits 10 minutes after a pod event: c's last one was 8 minutes
// before now, so c becomes a candidate 2 minutes after now.
func settled() *cluster {
	c := newCluster(onDemandTypes(), pool("general"), pool("slow", consolidateAfter("10m")))
	c.node("a", large, "us-east-1a", od, "general")
	c.node("b", large, "us-east-1a", od, "general")
	c.node("c", large, "us-east-1a", od, "slow", lastPodEvent(now.Add(-8*time.Minute)))
	c.pods("node-a", "1500m", "web-a")
	c.pods("node-b", "1500m", "web-b")
	c.pods("node-c", "1500m", "web-c")
	return c
}

// first evaluates c and checks that consolidation simulated, found nothing
// and left its outcome to keep.
func first(t *testing.T, c *cluster) disruption.Result {
	t.Helper()
	res, solves, err := disruption.EvaluateCounted(t.Context(), c.in, false)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if solves == 0 || len(res.Commands) != 0 || res.ConsolidationSkipped || res.Consolidated == nil || res.Consolidated.Fingerprint == "" {
		t.Fatalf("first Evaluate() = %d simulations, %d commands, skipped %v, consolidated %+v; want simulations, no command, an outcome to keep",
			solves, len(res.Commands), res.ConsolidationSkipped, res.Consolidated)
	}
	return res
}

func TestConsolidatedOutcomeStandsWhileNothingChanges(t *testing.T) {
	c := settled()
	kept := first(t, c).Consolidated
	later := now.Add(time.Minute)
	c.in.Now = later
	full, fullSolves, err := disruption.EvaluateCounted(t.Context(), c.in, false)
	if err != nil || fullSolves == 0 {
		t.Fatalf("Evaluate() without a kept outcome = %d simulations, %v; want simulations", fullSolves, err)
	}
	c.in.Consolidated = kept
	got, solves, err := disruption.EvaluateCounted(t.Context(), c.in, false)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if solves != 0 || !got.ConsolidationSkipped || got.Consolidated != kept {
		t.Errorf("Evaluate() with the kept outcome = %d simulations, skipped %v; want 0, true, the kept outcome", solves, got.ConsolidationSkipped)
	}
	if diff := cmp.Diff(summarize(full), summarize(got)); diff != "" {
		t.Errorf("skipped evaluation differs from a full one (-full +skipped):\n%s", diff)
	}
	if len(got.Blocked) != 3 {
		t.Errorf("Blocked = %+v, want a reason for each of a, b and c", got.Blocked)
	}
}

func TestConsolidatedOutcomeSurvivesAnIdenticalPodReplacingAnother(t *testing.T) {
	c := settled()
	kept := first(t, c).Consolidated
	// web-a's controller deleted it and created web-a2 with the same spec
	// on the same node: only its name, UID, creation, start and
	// resourceVersion differ. Its NodeClaim recorded the pod event (node
	// a's pool consolidates after 0s, so a stays a candidate), and the
	// Nodes' kubelets sent heartbeats.
	p := &c.in.Pods[0]
	p.Name, p.UID, p.CreationTimestamp, p.ResourceVersion = "web-a2", types.UID("uid-web-a2"), metav1.NewTime(now), "42"
	p.Status.StartTime = &metav1.Time{Time: now}
	c.in.NodeClaims[0].Status.LastPodEventTime = metav1.NewTime(now.Add(-time.Second))
	for i := range c.in.Nodes {
		c.in.Nodes[i].Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(now)
		c.in.Nodes[i].ResourceVersion = "7"
	}
	c.in.Now, c.in.Consolidated = now.Add(time.Minute), kept
	got, solves, err := disruption.EvaluateCounted(t.Context(), c.in, false)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if solves != 0 || !got.ConsolidationSkipped {
		t.Errorf("Evaluate() after an identical pod replaced web-a = %d simulations, skipped %v; want 0, true", solves, got.ConsolidationSkipped)
	}
}

func TestConsolidatedOutcomeIsDroppedWhenAnInputChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *cluster)
		// acts: the changed cluster consolidates.
		acts bool
	}{
		{name: "five minutes passed (karpenter's consolidation state timeout)", change: func(c *cluster) {
			c.in.Now = now.Add(disruption.ConsolidationRevalidate)
		}},
		{name: "a pod's request shrank so b's pods fit on a", acts: true, change: func(c *cluster) {
			c.in.Pods[0].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("250m")
			c.in.Pods[1].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("250m")
		}},
		{name: "a pod was deleted", acts: true, change: func(c *cluster) {
			c.in.Pods = c.in.Pods[1:]
		}},
		{name: "a pod was added", change: func(c *cluster) {
			c.pods("node-a", "100m", "sidecar")
		}},
		{name: "a pod moved to another node", acts: true, change: func(c *cluster) {
			c.in.Pods[0].Spec.NodeName = "node-b"
		}},
		{name: "a pod got a label", change: func(c *cluster) {
			c.in.Pods[0].Labels = map[string]string{"app": "web"}
		}},
		{name: "a pod became not Ready", change: func(c *cluster) {
			c.in.Pods[0].Status.Conditions = nil
		}},
		{name: "a node was added", acts: true, change: func(c *cluster) {
			c.node("d", xlarge2, "us-east-1a", od, "general")
			c.pods("node-d", "1", "batch")
		}},
		{name: "a Node got a label", change: func(c *cluster) {
			c.in.Nodes[1].Labels["team"] = "blue"
		}},
		{name: "a NodePool's budget changed", change: func(c *cluster) {
			c.in.NodePools[0].Spec.Disruption.Budgets = []v1.Budget{{Nodes: "50%"}}
		}},
		{name: "an instance type's price changed", change: func(c *cluster) {
			cheaper := st.InstanceType("m5.large", "2", "8Gi", "29", 0.05)
			c.in.InstanceTypes = map[string][]*catalog.InstanceType{st.DefaultNodeClass: {cheaper, xlarge, xlarge2}}
		}},
		{name: "consolidateAfter elapsed for node c, a new candidate", change: func(c *cluster) {
			c.in.Now = now.Add(2 * time.Minute)
		}},
		{name: "the kept outcome is from the future (clock went back)", change: func(c *cluster) {
			c.in.Now = now.Add(-time.Minute)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := settled()
			kept := first(t, c).Consolidated
			c.in.Now = now.Add(time.Minute)
			tt.change(c)
			c.in.Consolidated = kept
			got, solves, err := disruption.EvaluateCounted(t.Context(), c.in, false)
			if err != nil {
				t.Fatalf("Evaluate() error = %v", err)
			}
			// Emptiness acts before consolidation when a node emptied.
			if got.ConsolidationSkipped || solves == 0 && !tt.acts {
				t.Fatalf("Evaluate() = %d simulations, skipped %v; want consolidation to simulate again", solves, got.ConsolidationSkipped)
			}
			c.in.Consolidated = nil
			full, err := disruption.Evaluate(t.Context(), c.in)
			if err != nil {
				t.Fatalf("Evaluate() error = %v", err)
			}
			if diff := cmp.Diff(summarize(full), summarize(got)); diff != "" {
				t.Errorf("evaluation with a stale kept outcome differs from a full one (-full +got):\n%s", diff)
			}
			if acted := len(got.Commands) > 0; acted != tt.acts {
				t.Errorf("Evaluate() commands = %+v, want commands %v", summarize(got).Commands, tt.acts)
			}
			if tt.acts && got.Consolidated != nil {
				t.Errorf("Consolidated = %+v after a command, want nil (drop the kept outcome)", got.Consolidated)
			}
			if !tt.acts && (got.Consolidated == nil || !got.Consolidated.EvaluatedAt.Equal(c.in.Now)) {
				t.Errorf("Consolidated = %+v, want a new outcome to keep", got.Consolidated)
			}
		})
	}
}

func TestConsolidatedOutcomeIsNotLeftWhenConsolidationIsNotReached(t *testing.T) {
	c := newCluster(onDemandTypes(), pool("general"))
	c.node("a", large, "us-east-1a", od, "general") // empty: emptiness deletes it
	res, err := disruption.Evaluate(t.Context(), c.in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if len(res.Commands) != 1 || res.Commands[0].Method != disruption.MethodEmpty || res.Consolidated != nil {
		t.Errorf("Evaluate() = %+v, consolidated %+v; want emptiness's command and no outcome to keep", summarize(res).Commands, res.Consolidated)
	}
}
