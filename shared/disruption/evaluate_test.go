package disruption_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

const od, spot = v1.CapacityTypeOnDemand, v1.CapacityTypeSpot

// evaluation is one table case: a cluster and what an evaluation at now
// must start. blocked maps a NodeClaim to a fragment of its reason; events
// maps each of them to its Blocked.Event ("" for none).
type evaluation struct {
	name    string
	types   []*catalog.InstanceType
	pools   []v1.NodePool
	build   func(c *cluster)
	want    []cmdSummary
	blocked map[string]string
	events  map[string]string
}

func runEvaluations(t *testing.T, tests []evaluation) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			types := tt.types
			if types == nil {
				types = onDemandTypes()
			}
			pools := tt.pools
			if pools == nil {
				pools = []v1.NodePool{pool("general")}
			}
			c := newCluster(types, pools...)
			tt.build(c)
			res, err := disruption.Evaluate(t.Context(), c.in)
			if err != nil {
				t.Fatalf("Evaluate() error = %v", err)
			}
			got := summarize(res)
			if diff := cmp.Diff(tt.want, got.Commands); diff != "" {
				t.Errorf("Evaluate() commands mismatch (-want +got):\n%s", diff)
			}
			for claim, fragment := range tt.blocked {
				reason, ok := got.Blocked[claim]
				if !ok {
					t.Errorf("Evaluate() did not block %s, want a reason containing %q", claim, fragment)
				} else if !strings.Contains(reason, fragment) {
					t.Errorf("Evaluate() blocked %s with %q, want it to contain %q", claim, reason, fragment)
				}
				if _, ok := tt.events[claim]; !ok {
					t.Errorf("test case lists %s in blocked but not in events", claim)
				}
			}
			for claim, want := range tt.events {
				if event, ok := got.Events[claim]; !ok {
					t.Errorf("Evaluate() did not block %s, want event %q", claim, want)
				} else if event != want {
					t.Errorf("Evaluate() blocked %s (%q) with event %q, want %q", claim, got.Blocked[claim], event, want)
				}
			}
		})
	}
}

func del(m disruption.Method, claims ...string) cmdSummary {
	return cmdSummary{Method: m, Decision: disruption.DecisionDelete, Candidates: claims}
}

func replace(m disruption.Method, capacity string, types []string, claims ...string) cmdSummary {
	return cmdSummary{Method: m, Decision: disruption.DecisionReplace, Candidates: claims, Types: types, Capacity: capacity}
}

func TestEmptiness(t *testing.T) {
	runEvaluations(t, []evaluation{
		{
			name: "should delete every empty node in one command after consolidateAfter (11.3 item 25)",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.node("c", xlarge, "us-east-1a", od, "general")
				c.pods("node-c", "1", "web-0")
			},
			want:    []cmdSummary{del(disruption.MethodEmpty, "a", "b")},
			blocked: map[string]string{"c": "the Empty method acted"},
			events:  map[string]string{"c": ""},
		},
		{
			name:  "should delete only as many empty nodes as the Empty budget allows",
			pools: []v1.NodePool{pool("general", budgets(v1.Budget{Nodes: "1"}))},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge, "us-east-1a", od, "general")
			},
			want:    []cmdSummary{del(disruption.MethodEmpty, "a")},
			blocked: map[string]string{"b": "empty, but the Empty budget of NodePool general is used up by this evaluation's command"},
			events:  map[string]string{"b": ""},
		},
		{
			name: "should count a node whose only pods are DaemonSet pods as empty",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.pod("agent-a", "node-a", st.OwnedBy("apps/v1", "DaemonSet", "agent"), st.Requests("100m", "64Mi"))
			},
			want: []cmdSummary{del(disruption.MethodEmpty, "a")},
		},
		{
			name:  "should make one command per NodePool",
			pools: []v1.NodePool{pool("a-pool"), pool("b-pool")},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "a-pool")
				c.node("b", xlarge, "us-east-1a", od, "b-pool")
			},
			want: []cmdSummary{del(disruption.MethodEmpty, "a"), del(disruption.MethodEmpty, "b")},
		},
		{
			name:  "should not delete an empty node before consolidateAfter has passed since its last pod event",
			pools: []v1.NodePool{pool("general", consolidateAfter("2h"))},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", lastPodEvent(now.Add(-30*time.Minute)))
			},
			blocked: map[string]string{"a": "not consolidatable yet: consolidateAfter 2h0m0s runs from the last pod event or initialization at 2026-01-01T00:30:00Z until 2026-01-01T02:30:00Z"},
			events:  map[string]string{"a": ""},
		},
		{
			name:    "should not delete an empty node when consolidateAfter is Never",
			pools:   []v1.NodePool{pool("general", consolidateAfter("Never"))},
			build:   func(c *cluster) { c.node("a", xlarge, "us-east-1a", od, "general") },
			blocked: map[string]string{"a": "consolidation is disabled: NodePool general has consolidateAfter: Never"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should delete empty nodes under consolidationPolicy WhenEmpty",
			pools: []v1.NodePool{pool("general", policy(v1.ConsolidationPolicyWhenEmpty))},
			build: func(c *cluster) { c.node("a", xlarge, "us-east-1a", od, "general") },
			want:  []cmdSummary{del(disruption.MethodEmpty, "a")},
		},
	})
}

func TestCandidateEligibility(t *testing.T) {
	runEvaluations(t, []evaluation{
		{
			name: "should never take a node with a remaining startup taint (11.3 item 20)",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", startupTaint("example.com/agent-not-ready"))
			},
			blocked: map[string]string{"a": "not initialized: startup taint example.com/agent-not-ready:NoSchedule is still on the Node"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should not take a NodeClaim that has no Node",
			build: func(c *cluster) {
				c.in.NodeClaims = append(c.in.NodeClaims, *st.NodeClaim("a", st.ClaimType(xlarge, "us-east-1a", od), st.ClaimPool("general")))
			},
			blocked: map[string]string{"a": "not registered"},
			events:  map[string]string{"a": ""},
		},
		{
			name: "should not take a Node annotated do-not-disrupt",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", nodeAnnotations(v1.AnnotationDoNotDisrupt, "true"))
			},
			blocked: map[string]string{"a": `the Node is annotated karpenter.sh/do-not-disrupt: "true"`},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should not take a NodeClaim annotated do-not-disrupt",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", claimAnnotations(v1.AnnotationDoNotDisrupt, "true"))
			},
			blocked: map[string]string{"a": `the NodeClaim is annotated karpenter.sh/do-not-disrupt: "true"`},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should not take a nominated node",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				p := st.Pod("incoming", st.Requests("1", "1Gi"))
				p.Status.NominatedNodeName = "node-a"
				c.in.Pods = append(c.in.Pods, *p)
			},
			blocked: map[string]string{"a": "nominated: pending pod default/incoming is expected to land on it"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should not take a node inside its nomination window",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.in.NominatedUntil = map[string]time.Time{"node-a": now.Add(5 * time.Second)}
			},
			blocked: map[string]string{"a": "nominated until 2026-01-01T01:00:05Z"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should not take the replacement of a command still in flight, even when it is empty",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.in.HeldReplacements = map[string]string{"a": "drift-old-0123456789"}
			},
			blocked: map[string]string{"a": "replacement launched by command drift-old-0123456789, which is still in flight"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should take a node whose nomination window has passed",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.in.NominatedUntil = map[string]time.Time{"node-a": now.Add(-time.Second)}
			},
			want: []cmdSummary{del(disruption.MethodEmpty, "a")},
		},
		{
			name: "should not consolidate a node whose pod is protected by a PodDisruptionBudget",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.pod("api-0", "node-a", st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": "api"}))
				c.pods("node-b", "1", "web-0")
				c.in.PodDisruptionBudgets = []policyv1.PodDisruptionBudget{pdb("api-pdb", map[string]string{"app": "api"}, nil, intOrStr(intstr.FromInt32(0)))}
			},
			want:    []cmdSummary{del(disruption.MethodUnderutilized, "b")},
			blocked: map[string]string{"a": "pod default/api-0 is protected by PodDisruptionBudget default/api-pdb (0 disruptions allowed)"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should consolidate when the PodDisruptionBudget allows a disruption",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.pod("api-0", "node-a", st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": "api"}))
				c.pod("api-1", "node-b", st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": "api"}))
				c.in.PodDisruptionBudgets = []policyv1.PodDisruptionBudget{pdb("api-pdb", map[string]string{"app": "api"}, intOrStr(intstr.FromInt32(1)), nil)}
			},
			want: []cmdSummary{replace(disruption.MethodUnderutilized, od, []string{"m5.large"}, "a", "b")},
		},
		{
			name: "should not consolidate a node whose pod two PodDisruptionBudgets select",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.pod("api-0", "node-a", st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": "api", "tier": "web"}))
				c.in.PodDisruptionBudgets = []policyv1.PodDisruptionBudget{
					pdb("api-pdb", map[string]string{"app": "api"}, nil, intOrStr(intstr.FromString("50%"))),
					pdb("web-pdb", map[string]string{"tier": "web"}, nil, intOrStr(intstr.FromString("50%"))),
				}
			},
			blocked: map[string]string{"a": "pod default/api-0 is selected by more than one PodDisruptionBudget (default/api-pdb, default/web-pdb)"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should not let a PodDisruptionBudget block a pod that tolerates the disrupted taint",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.pod("agent", "node-a", st.OwnedBy("apps/v1", "DaemonSet", "agent"), st.Labels(map[string]string{"app": "agent"}),
					func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} })
				c.in.PodDisruptionBudgets = []policyv1.PodDisruptionBudget{pdb("agent-pdb", map[string]string{"app": "agent"}, nil, intOrStr(intstr.FromInt32(0)))}
			},
			want: []cmdSummary{del(disruption.MethodEmpty, "a")},
		},
		{
			name: "should block consolidation with a do-not-disrupt pod (11.3 item 28)",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.pod("batch-0", "node-a", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "true"))
			},
			blocked: map[string]string{"a": `pod default/batch-0 has karpenter.sh/do-not-disrupt: "true"`},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should block only while the pod is younger than a do-not-disrupt duration (11.3 item 28)",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.pod("young", "node-a", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "30m"), startedAt(now.Add(-10*time.Minute)))
				c.pod("old", "node-b", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "30m"), startedAt(now.Add(-40*time.Minute)))
			},
			want:    []cmdSummary{del(disruption.MethodUnderutilized, "b")},
			blocked: map[string]string{"a": `pod default/young has karpenter.sh/do-not-disrupt: "30m" and started 10m0s ago (protected until 2026-01-01T01:20:00Z)`},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should ignore an invalid do-not-disrupt value",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.pod("a-0", "node-a", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "soon"))
				c.pods("node-b", "1", "b-0")
			},
			want: []cmdSummary{replace(disruption.MethodUnderutilized, od, []string{"m5.large"}, "a", "b")},
		},
	})
}

func TestExpiration(t *testing.T) {
	expired := createdAt(now.Add(-721 * time.Hour))
	runEvaluations(t, []evaluation{
		{
			name:  "should delete expired NodeClaims regardless of budgets and do-not-disrupt (11.3 item 24)",
			pools: []v1.NodePool{pool("general", budgets(v1.Budget{Nodes: "0"}))},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", expired, nodeAnnotations(v1.AnnotationDoNotDisrupt, "true"))
				c.pod("batch-0", "node-a", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "true"))
			},
			want: []cmdSummary{del(disruption.MethodExpired, "a")},
		},
		{
			name: "should expire but not consolidate around a do-not-disrupt pod",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", expired)
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.pod("a-0", "node-a", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "true"))
				c.pod("b-0", "node-b", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "true"))
			},
			want:    []cmdSummary{del(disruption.MethodExpired, "a")},
			blocked: map[string]string{"b": `pod default/b-0 has karpenter.sh/do-not-disrupt: "true"`},
			events:  map[string]string{"b": disruption.EventDisruptionBlocked},
		},
		{
			name: "should report expiration next to the method that acts",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", expired)
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.pods("node-a", "1", "a-0")
			},
			want: []cmdSummary{del(disruption.MethodEmpty, "b"), del(disruption.MethodExpired, "a")},
		},
		{
			name: "should never expire a NodeClaim with expireAfter Never",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", expired, func(nc *v1.NodeClaim, _ *corev1.Node) {
					nc.Spec.ExpireAfter = v1.MustParseNillable("Never")
				})
				c.pods("node-a", "4", "a-0")
			},
			blocked: map[string]string{"a": "can't replace with a cheaper node"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should count an expiring node against the budgets of the other methods",
			pools: []v1.NodePool{pool("general", budgets(v1.Budget{Nodes: "1"}))},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", expired)
				c.node("b", xlarge, "us-east-1a", od, "general")
			},
			want:    []cmdSummary{del(disruption.MethodExpired, "a")},
			blocked: map[string]string{"b": "empty, but the Empty budget of NodePool general is spent: 1 allowed, 1 of 2 nodes already disrupting"},
			events:  map[string]string{"b": ""},
		},
	})
}

func TestConsolidation(t *testing.T) {
	withSpot := func(it *catalog.InstanceType) *catalog.InstanceType {
		c := *it
		c.Offerings = nil
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			c.Offerings = append(c.Offerings, st.Offering(z, od, it.Offerings[0].Price), st.Offering(z, spot, it.Offerings[0].Price*0.3))
		}
		return &c
	}
	mixed := []*catalog.InstanceType{withSpot(large), withSpot(xlarge), withSpot(xlarge2)}
	runEvaluations(t, []evaluation{
		{
			name: "should delete a node whose pods fit on the other nodes",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge2, "us-east-1a", od, "general")
				c.pods("node-a", "1", "a-0")
				c.pods("node-b", "1", "b-0", "b-1", "b-2", "b-3", "b-4", "b-5")
			},
			want:    []cmdSummary{del(disruption.MethodUnderutilized, "a")},
			blocked: map[string]string{"b": "not evaluated"},
			events:  map[string]string{"b": ""},
		},
		{
			name: "should replace several nodes with one cheaper node (multi-node)",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge2, "us-east-1a", od, "general")
				c.pods("node-a", "1", "a-0")
				c.pods("node-b", "1", "b-0")
			},
			want: []cmdSummary{replace(disruption.MethodUnderutilized, od, []string{"m5.large"}, "b", "a")},
		},
		{
			name: "should never replace with an option whose worst-case price is not below the current price (11.3 item 26)",
			build: func(c *cluster) {
				c.node("a", large, "us-east-1a", od, "general")
				c.pods("node-a", "1500m", "a-0")
			},
			blocked: map[string]string{"a": "can't replace with a cheaper node: every option's worst-case launch price is at least 0.0960/h"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should give a candidate past the budget its own reason when multi-node consolidation starts nothing",
			pools: []v1.NodePool{pool("general", budgets(v1.Budget{Nodes: "1"}))},
			build: func(c *cluster) {
				c.node("a", large, "us-east-1a", od, "general")
				c.node("b", large, "us-east-1a", od, "general")
				c.pods("node-a", "1500m", "a-0")
				c.pods("node-b", "1500m", "b-0")
			},
			blocked: map[string]string{"a": "can't replace with a cheaper node", "b": "can't replace with a cheaper node"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable, "b": disruption.EventUnconsolidatable},
		},
		{
			name: "should never replace one node with more than one (11.3 item 26)",
			build: func(c *cluster) {
				c.node("a", xlarge2, "us-east-1a", od, "general")
				c.pods("node-a", "1900m", "a-0", "a-1", "a-2")
			},
			blocked: map[string]string{"a": "new NodeClaims; consolidation never replaces nodes with more than one"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should force spot and keep only types whose worst spot price is cheaper for an on-demand node in a spot and on-demand pool (6.6)",
			types: mixed,
			build: func(c *cluster) {
				c.node("a", mixed[2], "us-east-1a", od, "general")
				c.pods("node-a", "3", "a-0")
			},
			want: []cmdSummary{replace(disruption.MethodUnderutilized, spot, []string{"m5.xlarge", "m5.2xlarge"}, "a")},
		},
		{
			name:  "should keep an on-demand replacement on-demand in an on-demand pool",
			types: mixed,
			pools: []v1.NodePool{pool("general", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, od))},
			build: func(c *cluster) {
				c.node("a", mixed[2], "us-east-1a", od, "general")
				c.pods("node-a", "3", "a-0")
			},
			want: []cmdSummary{replace(disruption.MethodUnderutilized, od, []string{"m5.xlarge"}, "a")},
		},
		{
			name:  "should not consolidate non-empty nodes under consolidationPolicy WhenEmpty",
			pools: []v1.NodePool{pool("general", policy(v1.ConsolidationPolicyWhenEmpty))},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.pods("node-a", "1", "a-0")
			},
			blocked: map[string]string{"a": "consolidationPolicy of NodePool general is WhenEmpty and the node has 1 pods to reschedule"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name: "should not move a host-port pod onto a node whose DaemonSet binds the port before its daemon pod is bound",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge2, "us-east-1b", od, "general")
				c.pod("a-0", "node-a", st.Requests("1", "256Mi"), st.HostPort(9100, corev1.ProtocolTCP))
				c.pods("node-b", "1", "b-0", "b-1", "b-2", "b-3", "b-4", "b-5")
				c.in.DaemonSets = append(c.in.DaemonSets, st.DaemonSet("exporter", st.Requests("10m", ""), st.HostPort(9100, corev1.ProtocolTCP),
					st.NodeSelector(map[string]string{v1.LabelTopologyZone: "us-east-1b"})))
			},
			want:    []cmdSummary{replace(disruption.MethodUnderutilized, od, []string{"m5.xlarge"}, "b")},
			blocked: map[string]string{"a": `pod default/a-0 cannot be rescheduled: NodePool "general": host port 0.0.0.0:9100/TCP is taken by DaemonSet kube-system/exporter`},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name: "should not move pods onto an uninitialized node",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge, "us-east-1a", od, "general", startupTaint("example.com/agent-not-ready"))
				c.pods("node-a", "1", "a-0")
			},
			blocked: map[string]string{"a": "pod default/a-0 would move to node node-b, which is not initialized yet"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should not consolidate when the Underutilized budget is spent",
			pools: []v1.NodePool{pool("general", budgets(v1.Budget{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonUnderutilized}}))},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.pods("node-a", "1", "a-0")
				c.pods("node-b", "1", "b-0")
			},
			blocked: map[string]string{"a": "the Underutilized budget of NodePool general allows no disruption now (2 nodes)"},
			events:  map[string]string{"a": ""},
		},
	})
}

func TestSpotToSpotConsolidation(t *testing.T) {
	spotPool := pool("general", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, spot))
	fifteen, fortyOne := spotTypes(15), spotTypes(41)
	gate := func(c *cluster) { c.in.FeatureGates.SpotToSpotConsolidation = true }
	runEvaluations(t, []evaluation{
		{
			name:  "should not replace a spot node with a spot node while SpotToSpotConsolidation is off (11.3 item 27)",
			types: fortyOne,
			pools: []v1.NodePool{spotPool},
			build: func(c *cluster) {
				c.node("a", fortyOne[40], "us-east-1a", spot, "general")
				c.pods("node-a", "1", "a-0")
			},
			blocked: map[string]string{"a": "SpotToSpotConsolidation is disabled"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should still delete a spot node while SpotToSpotConsolidation is off (11.3 item 27)",
			types: fortyOne,
			pools: []v1.NodePool{spotPool},
			build: func(c *cluster) {
				c.node("a", fortyOne[40], "us-east-1a", spot, "general")
				c.node("b", fortyOne[0], "us-east-1a", spot, "general")
				c.pods("node-a", "500m", "a-0")
				c.pods("node-b", "1", "b-0")
			},
			want: []cmdSummary{del(disruption.MethodUnderutilized, "a")},
		},
		{
			name:  "should refuse spot-to-spot with only 14 cheaper types (6.6)",
			types: fifteen,
			pools: []v1.NodePool{spotPool},
			build: func(c *cluster) {
				gate(c)
				c.node("a", fifteen[14], "us-east-1a", spot, "general")
				c.pods("node-a", "1", "a-0")
			},
			blocked: map[string]string{"a": "SpotToSpotConsolidation needs 15 cheaper instance types than the candidate, found 14"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should launch a spot-to-spot replacement with the 15 cheapest of 40 cheaper types (6.6)",
			types: fortyOne,
			pools: []v1.NodePool{spotPool},
			build: func(c *cluster) {
				gate(c)
				c.node("a", fortyOne[40], "us-east-1a", spot, "general")
				c.pods("node-a", "1", "a-0")
			},
			want: []cmdSummary{replace(disruption.MethodUnderutilized, spot, []string{"c00.large", "c01.large", "c02.large"}, "a")},
		},
	})
}

func TestSpotToSpotReplacementCarriesTheFifteenCheapest(t *testing.T) {
	types := spotTypes(41)
	c := newCluster(types, pool("general", st.PoolRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, spot)))
	c.in.FeatureGates.SpotToSpotConsolidation = true
	c.node("a", types[40], "us-east-1a", spot, "general")
	c.pods("node-a", "1", "a-0")
	res, err := disruption.Evaluate(t.Context(), c.in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if len(res.Commands) != 1 || len(res.Commands[0].Replacements) != 1 {
		t.Fatalf("Evaluate() = %+v, want one command with one replacement", res.Commands)
	}
	r := res.Commands[0].Replacements[0]
	var want []string
	for _, it := range types[:15] {
		want = append(want, it.Name)
	}
	if diff := cmp.Diff(want, r.InstanceTypes); diff != "" {
		t.Errorf("replacement instance types mismatch (-want +got):\n%s", diff)
	}
	var reqTypes, reqCapacity []string
	for _, req := range r.NodeClaim.Spec.Requirements {
		switch req.Key {
		case v1.LabelInstanceType:
			reqTypes = req.Values
		case v1.LabelCapacityType:
			reqCapacity = req.Values
		}
	}
	if diff := cmp.Diff(want, reqTypes); diff != "" {
		t.Errorf("NodeClaim instance-type requirement mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{spot}, reqCapacity); diff != "" {
		t.Errorf("NodeClaim capacity-type requirement mismatch (-want +got):\n%s", diff)
	}
	if r.Expected.InstanceType != "c00.large" || r.Expected.CapacityType != spot || r.Expected.PricePerHour != 0.010 {
		t.Errorf("Expected = %+v, want c00.large spot at 0.010", r.Expected)
	}
	if got := res.Commands[0].SavingsPerHour; got != 0.04 {
		t.Errorf("SavingsPerHour = %v, want 0.04 (0.050 - 0.010)", got)
	}
}

func TestBalancedPolicy(t *testing.T) {
	// c holds three pods whose priority makes them expensive to evict
	// (eviction cost 10 each); d's one 7-cpu pod fits nowhere cheaper. c's
	// pods go one to d's last cpu and two to a new m5.large: the move saves
	// 0.288 of the pool's 0.768 (37.5%) for 31 of its 33 disruption units.
	build := func(c *cluster) {
		c.node("c", xlarge2, "us-east-1a", od, "general")
		c.node("d", xlarge2, "us-east-1a", od, "general")
		high := func(p *corev1.Pod) { p.Spec.Priority = ptr(int32(9 << 25)) }
		for _, n := range []string{"c-0", "c-1", "c-2"} {
			c.pod(n, "node-c", st.Requests("1", "1Gi"), high)
		}
		c.pods("node-d", "7", "d-0")
	}
	runEvaluations(t, []evaluation{
		{
			name:  "should replace under WhenEmptyOrUnderutilized",
			build: build,
			want:  []cmdSummary{replace(disruption.MethodUnderutilized, od, []string{"m5.large", "m5.xlarge"}, "c")},
		},
		{
			name:    "should reject a move whose savings share is under half its disruption share under Balanced",
			pools:   []v1.NodePool{pool("general", policy(v1.ConsolidationPolicyBalanced))},
			build:   build,
			blocked: map[string]string{"c": "consolidationPolicy Balanced of NodePool general: the move saves 37.5% of the pool's cost for 93.9% of its disruption (score 0.40, needs 0.50)"},
			events:  map[string]string{"c": disruption.EventUnconsolidatable},
		},
	})
}

func TestBudgetsCountDisruptingNodes(t *testing.T) {
	tenPercent := []v1.NodePool{pool("general", budgets(v1.Budget{Nodes: "10%"}))}
	tenNodes := func(c *cluster) {
		for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
			c.node(n, xlarge, "us-east-1a", od, "general")
		}
	}
	runEvaluations(t, []evaluation{
		{
			name:  "should allow 10% of 10 nodes, one (6.6)",
			pools: tenPercent,
			build: tenNodes,
			want:  []cmdSummary{del(disruption.MethodEmpty, "a")},
		},
		{
			name:  "should allow nothing while one of 10 nodes is NotReady (6.6)",
			pools: tenPercent,
			build: func(c *cluster) {
				tenNodes(c)
				c.in.Nodes[9].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
			},
			blocked: map[string]string{"a": "empty, but the Empty budget of NodePool general is spent: 1 allowed, 1 of 10 nodes already disrupting"},
			events:  map[string]string{"a": ""},
		},
		{
			name:  "should allow nothing while one of 10 nodes is being deleted",
			pools: tenPercent,
			build: func(c *cluster) {
				tenNodes(c)
				c.in.NodeClaims[0].DeletionTimestamp = &metav1.Time{Time: now}
			},
			blocked: map[string]string{"a": "already being deleted", "b": "the Empty budget of NodePool general is spent"},
			events:  map[string]string{"a": "", "b": ""},
		},
		{
			name:  "should count an in-flight command's candidates as disrupting and never take them again",
			pools: tenPercent,
			build: func(c *cluster) {
				tenNodes(c)
				c.in.InFlight = []disruption.Command{{ID: "drift-j-0000", Candidates: []disruption.Candidate{{NodeClaim: "j"}}}}
			},
			blocked: map[string]string{"j": "already a candidate of in-flight command drift-j-0000", "a": "the Empty budget of NodePool general is spent"},
			events:  map[string]string{"j": "", "a": ""},
		},
		{
			name:    "should block the listed reasons only inside a budget's cron window",
			pools:   []v1.NodePool{pool("general", budgets(v1.Budget{Nodes: "100%"}, v1.Budget{Nodes: "0", Schedule: ptr("0 0 * * *"), Duration: &v1.Duration{Duration: 2 * time.Hour}}))},
			build:   tenNodes,
			blocked: map[string]string{"a": "the Empty budget of NodePool general allows no disruption now (10 nodes)"},
			events:  map[string]string{"a": ""},
		},
		{
			name:  "should act once the cron window has closed",
			pools: []v1.NodePool{pool("general", budgets(v1.Budget{Nodes: "100%"}, v1.Budget{Nodes: "0", Schedule: ptr("0 0 * * *"), Duration: &v1.Duration{Duration: 30 * time.Minute}}))},
			build: tenNodes,
			want:  []cmdSummary{del(disruption.MethodEmpty, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j")},
		},
	})
}

func TestBudgetReport(t *testing.T) {
	c := newCluster(onDemandTypes(), pool("general", budgets(
		v1.Budget{Nodes: "20%", Reasons: []v1.DisruptionReason{v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted}},
		v1.Budget{Nodes: "5"},
	)))
	for i := 0; i < 19; i++ {
		c.node(string(rune('a'+i)), xlarge, "us-east-1a", od, "general")
		c.pods("node-"+string(rune('a'+i)), "3", "p-"+string(rune('a'+i)))
	}
	c.in.Nodes[0].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	res, err := disruption.Evaluate(t.Context(), c.in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	want := []disruption.BudgetStatus{
		{NodePool: "general", Reason: disruption.MethodEmpty, Nodes: 19, Allowed: 4, Disrupting: 1, Available: 3},
		{NodePool: "general", Reason: disruption.MethodDrifted, Nodes: 19, Allowed: 4, Disrupting: 1, Available: 3},
		{NodePool: "general", Reason: disruption.MethodUnderutilized, Nodes: 19, Allowed: 5, Disrupting: 1, Available: 4},
	}
	if diff := cmp.Diff(want, res.Budgets); diff != "" {
		t.Errorf("Evaluate() budgets mismatch (-want +got):\n%s", diff)
	}
}

func TestEvaluateErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(c *cluster)
		ctx   func(t *testing.T) (ctxDone bool)
		want  string
	}{
		{
			name: "should reject two NodeClaims with one name",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.in.NodeClaims = append(c.in.NodeClaims, c.in.NodeClaims[0])
			},
			want: "nodeclaim a: listed twice",
		},
		{
			name: "should reject two NodePools with one name",
			build: func(c *cluster) {
				c.in.NodePools = append(c.in.NodePools, c.in.NodePools[0])
			},
			want: "nodepool general: listed twice",
		},
		{
			name: "should reject a PodDisruptionBudget with an invalid selector",
			build: func(c *cluster) {
				b := pdb("bad", nil, nil, intOrStr(intstr.FromInt32(0)))
				b.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
				c.in.PodDisruptionBudgets = append(c.in.PodDisruptionBudgets, b)
			},
			want: "poddisruptionbudget default/bad: selector",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(onDemandTypes(), pool("general"))
			tt.build(c)
			_, err := disruption.Evaluate(t.Context(), c.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Evaluate() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestEvaluateHonoursCancellation(t *testing.T) {
	c := newCluster(onDemandTypes(), pool("general"))
	c.node("a", xlarge, "us-east-1a", od, "general")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := disruption.Evaluate(ctx, c.in); err == nil {
		t.Errorf("Evaluate() with a cancelled context error = nil, want context.Canceled")
	}
}
