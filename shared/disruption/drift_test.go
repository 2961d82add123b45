package disruption_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// stampedBy annotates a NodeClaim with the static-drift hashes of the
// NodePool and EC2NodeClass it was launched from.
func stampedBy(t *testing.T, np v1.NodePool, nc v1.EC2NodeClass) managedOption {
	t.Helper()
	poolHash, err := disruption.NodePoolHash(&np)
	if err != nil {
		t.Fatalf("NodePoolHash() error = %v", err)
	}
	classHash, ver, err := disruption.EC2NodeClassHash(&nc, "")
	if err != nil {
		t.Fatalf("EC2NodeClassHash() error = %v", err)
	}
	return claimAnnotations(
		v1.AnnotationNodePoolHash, poolHash, v1.AnnotationNodePoolHashVersion, v1.NodePoolHashVersion,
		v1.AnnotationEC2NodeClassHash, classHash, v1.AnnotationEC2NodeClassHashVersion, ver,
	)
}

func claimTGP(nc *v1.NodeClaim, _ *corev1.Node) {
	nc.Spec.TerminationGracePeriod = v1.NewDuration(3600e9)
}

func withAMIs(nc *v1.EC2NodeClass, ids ...string) {
	for _, id := range ids {
		nc.Status.AMIs = append(nc.Status.AMIs, v1.AMI{ID: id, Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		}})
	}
}

func TestDrift(t *testing.T) {
	launchedPool := pool("general", consolidateAfter("Never"))
	launchedClass := st.EC2NodeClass(st.DefaultNodeClass)
	labelled := pool("general", consolidateAfter("Never"), st.PoolLabels(map[string]string{"team": "payments"}))
	narrowed := pool("general", consolidateAfter("Never"), st.PoolRequirement(v1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large"))
	widened := pool("general", consolidateAfter("Never"), st.PoolRequirement(v1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.xlarge", "m5.large"))
	behavioural := pool("general", consolidateAfter("Never"), st.PoolWeight(50), st.PoolLimits("cpu", "1000"), policy(v1.ConsolidationPolicyWhenEmpty))

	runEvaluations(t, []evaluation{
		{
			name:  "should drift every NodeClaim of the pool when template labels change (11.3 item 29)",
			pools: []v1.NodePool{labelled},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.node("b", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.pods("node-a", "1", "a-0")
				c.pods("node-b", "1", "b-0")
			},
			want:    []cmdSummary{del(disruption.MethodDrifted, "a")},
			blocked: map[string]string{"b": "drifted (NodePoolDrifted): waiting, drift starts one command per evaluation"},
			events:  map[string]string{"b": ""},
		},
		{
			name:  "should not drift when requirements widen (11.3 item 29)",
			pools: []v1.NodePool{widened},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
			},
			blocked: map[string]string{"a": "consolidation is disabled"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should drift a node whose instance type the narrowed requirements exclude (11.3 item 29)",
			pools: []v1.NodePool{narrowed},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.pods("node-a", "1", "a-0")
			},
			want: []cmdSummary{replace(disruption.MethodDrifted, od, []string{"m5.large"}, "a")},
		},
		{
			name:  "should never drift on weight, limits or disruption changes",
			pools: []v1.NodePool{behavioural},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.pods("node-a", "1", "a-0")
			},
			blocked: map[string]string{"a": "consolidation is disabled"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should not compare a NodePool hash stamped under another hash version",
			pools: []v1.NodePool{labelled},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass),
					claimAnnotations(v1.AnnotationNodePoolHashVersion, "v2"))
			},
			blocked: map[string]string{"a": "consolidation is disabled"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should not drift a NodeClaim without hash annotations",
			pools: []v1.NodePool{labelled},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
			},
			blocked: map[string]string{"a": "consolidation is disabled"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should drift on EC2NodeClass tags (11.3 item 30)",
			pools: []v1.NodePool{launchedPool},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.in.NodeClasses[0].Spec.Tags = map[string]string{"cost-center": "42"}
			},
			want: []cmdSummary{del(disruption.MethodDrifted, "a")},
		},
		{
			name:  "should drift on EC2NodeClass userData (11.3 item 30)",
			pools: []v1.NodePool{launchedPool},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.in.NodeClasses[0].Spec.UserData = ptr("echo hello")
			},
			want: []cmdSummary{del(disruption.MethodDrifted, "a")},
		},
		{
			name:  "should drift only the nodes whose subnet is no longer selected (11.3 item 30)",
			pools: []v1.NodePool{launchedPool},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.node("b", xlarge, "us-east-1b", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.in.NodeClasses[0].Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{ID: "subnet-us-east-1a"}}
				st.ClassZones("us-east-1a")(&c.in.NodeClasses[0])
				c.in.Instances = []disruption.Instance{
					{ProviderID: "aws:///us-east-1a/i-a", SubnetID: "subnet-us-east-1a"},
					{ProviderID: "aws:///us-east-1b/i-b", SubnetID: "subnet-us-east-1b"},
				}
			},
			want:    []cmdSummary{del(disruption.MethodDrifted, "b")},
			blocked: map[string]string{"a": "consolidation is disabled"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should drift nodes whose security groups are no longer those selected",
			pools: []v1.NodePool{launchedPool},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.in.NodeClasses[0].Status.SecurityGroups = []v1.SecurityGroup{{ID: "sg-new"}}
				c.in.Instances = []disruption.Instance{{ProviderID: "aws:///us-east-1a/i-a", SecurityGroupIDs: []string{"sg-old"}}}
			},
			want: []cmdSummary{del(disruption.MethodDrifted, "a")},
		},
		{
			name:  "should drift every node whose image is not the newest AMI behind the alias (11.3 item 31)",
			pools: []v1.NodePool{launchedPool},
			build: func(c *cluster) {
				withAMIs(&c.in.NodeClasses[0], "ami-new", "ami-old")
				c.node("a", xlarge, "us-east-1a", od, "general", imageID("ami-old"))
				c.node("b", xlarge, "us-east-1a", od, "general", imageID("ami-old"))
				c.node("c", xlarge, "us-east-1a", od, "general", imageID("ami-new"))
			},
			want:    []cmdSummary{del(disruption.MethodDrifted, "a")},
			blocked: map[string]string{"b": "drifted (AMIDrift)", "c": "consolidation is disabled"},
			events:  map[string]string{"b": "", "c": disruption.EventUnconsolidatable},
		},
		{
			name:  "should drift a node whose instance type is gone after an hour",
			pools: []v1.NodePool{launchedPool},
			types: []*catalog.InstanceType{large, xlarge2},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", createdAt(now.Add(-2*time.Hour)))
			},
			want: []cmdSummary{del(disruption.MethodDrifted, "a")},
		},
		{
			name:  "should not drift a node younger than an hour whose instance type is gone",
			pools: []v1.NodePool{launchedPool},
			types: []*catalog.InstanceType{large, xlarge2},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
			},
			blocked: map[string]string{"a": "consolidation is disabled"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name:  "should not drift a node with a do-not-disrupt pod without terminationGracePeriod (11.3 item 28)",
			pools: []v1.NodePool{labelled},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.pod("batch-0", "node-a", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "true"))
			},
			blocked: map[string]string{"a": `drifted (NodePoolDrifted) but pod default/batch-0 has karpenter.sh/do-not-disrupt: "true"; a terminationGracePeriod on the NodePool would let drift proceed`},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name:  "should drift past a do-not-disrupt pod when the NodeClaim has a terminationGracePeriod (11.3 item 28)",
			pools: []v1.NodePool{labelled},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass), claimTGP)
				c.pod("batch-0", "node-a", st.Requests("1", "1Gi"), annotate(v1.AnnotationDoNotDisrupt, "true"))
			},
			want: []cmdSummary{replace(disruption.MethodDrifted, od, []string{"m5.large", "m5.xlarge", "m5.2xlarge"}, "a")},
		},
		{
			name:  "should still respect do-not-disrupt on the Node for drift",
			pools: []v1.NodePool{labelled},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass), claimTGP,
					nodeAnnotations(v1.AnnotationDoNotDisrupt, "true"))
			},
			blocked: map[string]string{"a": "the Node is annotated"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name:  "should replace empty drifted nodes first",
			pools: []v1.NodePool{labelled},
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.node("b", xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				c.pods("node-a", "1", "a-0")
			},
			want: []cmdSummary{del(disruption.MethodDrifted, "b")},
		},
		{
			name: "should take one drifted node per evaluation within a budget of 1 (6.6)",
			pools: []v1.NodePool{pool("general", consolidateAfter("Never"), budgets(v1.Budget{Nodes: "1"}),
				st.PoolLabels(map[string]string{"team": "payments"}))},
			build: func(c *cluster) {
				for _, n := range []string{"a", "b", "c"} {
					c.node(n, xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				}
			},
			want:    []cmdSummary{del(disruption.MethodDrifted, "a")},
			blocked: map[string]string{"b": "waiting", "c": "waiting"},
			events:  map[string]string{"b": "", "c": ""},
		},
		{
			name: "should wait for the first drift command to finish before the next (6.6)",
			pools: []v1.NodePool{pool("general", consolidateAfter("Never"), budgets(v1.Budget{Nodes: "1"}),
				st.PoolLabels(map[string]string{"team": "payments"}))},
			build: func(c *cluster) {
				for _, n := range []string{"a", "b", "c"} {
					c.node(n, xlarge, "us-east-1a", od, "general", stampedBy(t, launchedPool, launchedClass))
				}
				c.in.InFlight = []disruption.Command{{ID: "drift-a-1", Candidates: []disruption.Candidate{{NodeClaim: "a"}}}}
			},
			blocked: map[string]string{"b": "drifted (NodePoolDrifted), but the Drifted budget of NodePool general is spent: 1 allowed, 1 of 3 nodes already disrupting"},
			events:  map[string]string{"b": ""},
		},
	})
}

func TestDriftCommandNamesItsReason(t *testing.T) {
	launchedPool := pool("general", consolidateAfter("Never"))
	c := newCluster(onDemandTypes(), launchedPool)
	withAMIs(&c.in.NodeClasses[0], "ami-new")
	c.node("a", xlarge, "us-east-1a", od, "general", imageID("ami-old"))
	res, err := disruption.Evaluate(t.Context(), c.in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if len(res.Commands) != 1 {
		t.Fatalf("Evaluate() commands = %+v, want one", res.Commands)
	}
	cmd := res.Commands[0]
	if got := cmd.Candidates[0].DriftReason; got != disruption.DriftAMI {
		t.Errorf("DriftReason = %q, want %q", got, disruption.DriftAMI)
	}
	want := "NodeClaim a drifted (AMIDrift): image ami-old is not the AMI EC2NodeClass default now selects for m5.xlarge (ami-new); its pods reschedule with 0 replacement NodeClaim(s)"
	if cmd.Reason != want {
		t.Errorf("Reason = %q, want %q", cmd.Reason, want)
	}
}
