package disruption_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestBlockedEvent covers the reasons the other tables leave out: each
// blocked NodeClaim carries the event Karpenter records for its reason
// (karpenter-spec §6.2, §6.4), whatever the reason's wording.
func TestBlockedEvent(t *testing.T) {
	static := func(np *v1.NodePool) { r := int64(1); np.Spec.Replicas = &r }
	noZone := func(_ *v1.NodeClaim, n *corev1.Node) { delete(n.Labels, v1.LabelTopologyZone) }
	amiDrift := func(c *cluster) { withAMIs(&c.in.NodeClasses[0], "ami-new") }
	runEvaluations(t, []evaluation{
		{
			name:    "should record DisruptionBlocked for a node of an unknown NodePool",
			build:   func(c *cluster) { c.node("a", xlarge, "us-east-1a", od, "gone") },
			blocked: map[string]string{"a": `NodePool "gone" not found`},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name:    "should record DisruptionBlocked for a node of a static NodePool",
			pools:   []v1.NodePool{pool("general", static)},
			build:   func(c *cluster) { c.node("a", xlarge, "us-east-1a", od, "general") },
			blocked: map[string]string{"a": "NodePool general is static"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should record DisruptionBlocked for a drifted node whose pods fit nowhere",
			build: func(c *cluster) {
				amiDrift(c)
				c.node("a", xlarge, "us-east-1a", od, "general", imageID("ami-old"))
				c.pods("node-a", "16", "huge-0")
			},
			blocked: map[string]string{"a": "drifted (AMIDrift), but pod default/huge-0 cannot be rescheduled"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should record nothing for a drifted node while another method acts",
			build: func(c *cluster) {
				amiDrift(c)
				c.node("a", xlarge, "us-east-1a", od, "general", imageID("ami-old"))
				c.node("b", xlarge, "us-east-1a", od, "general", imageID("ami-new"))
				c.pods("node-a", "1", "a-0")
			},
			want:    []cmdSummary{del(disruption.MethodEmpty, "b")},
			blocked: map[string]string{"a": "drifted (AMIDrift) but not evaluated: the Empty method acted"},
			events:  map[string]string{"a": ""},
		},
		{
			name: "should record Unconsolidatable for a node whose pods fit nowhere",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.pods("node-a", "16", "huge-0")
			},
			blocked: map[string]string{"a": "pod default/huge-0 cannot be rescheduled"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name: "should record Unconsolidatable for a node consolidation cannot price",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", noZone)
				c.pods("node-a", "1", "a-0")
			},
			blocked: map[string]string{"a": "cannot price the node: label topology.kubernetes.io/zone is missing"},
			events:  map[string]string{"a": disruption.EventUnconsolidatable},
		},
		{
			name: "should record nothing for a NodeClaim without a Node",
			build: func(c *cluster) {
				c.in.NodeClaims = append(c.in.NodeClaims, *st.NodeClaim("a", st.ClaimType(xlarge, "us-east-1a", od), st.ClaimPool("general")))
				c.node("b", xlarge, "us-east-1a", od, "general", nodeAnnotations(v1.AnnotationDoNotDisrupt, "true"))
			},
			blocked: map[string]string{"a": "not registered", "b": "the Node is annotated"},
			events:  map[string]string{"a": "", "b": disruption.EventDisruptionBlocked},
		},
	})
}
