package disruption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// requests sets the NodeClaim's spec.resources.requests.
func requests(kv ...string) managedOption {
	return func(c *v1.NodeClaim, _ *corev1.Node) {
		c.Spec.Resources.Requests = corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			c.Spec.Resources.Requests[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
	}
}

// nodeCapacity overrides the Node's status.capacity of one resource.
func nodeCapacity(name, q string) managedOption {
	return func(_ *v1.NodeClaim, n *corev1.Node) {
		n.Status.Capacity[corev1.ResourceName(name)] = resource.MustParse(q)
	}
}

func deletingClaim(c *v1.NodeClaim, _ *corev1.Node) {
	t := metav1.NewTime(now)
	c.DeletionTimestamp = &t
}

func uninitialized(c *v1.NodeClaim, _ *corev1.Node) {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == v1.ConditionTypeInitialized {
			c.Status.Conditions[i].Status = metav1.ConditionFalse
		}
	}
}

func TestConsistencyChecks(t *testing.T) {
	zero := intOrStr(intstr.FromInt32(0))
	tests := []struct {
		name  string
		build func(c *cluster)
		want  []disruption.Inconsistency
	}{
		{
			name: "should report a node with less than 90% of the memory its NodeClaim expects",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", requests("cpu", "1", "memory", "1Gi"), nodeCapacity("memory", "14Gi"))
			},
			want: []disruption.Inconsistency{{NodeClaim: "a", Node: "node-a",
				Message: "expected 16Gi of resource memory, but found 14Gi (87.5% of expected)"}},
		},
		{
			name: "should accept a node with 90% of what its NodeClaim expects",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", requests("cpu", "1", "memory", "1Gi"), nodeCapacity("memory", "15461882266"))
			},
		},
		{
			name: "should not check a resource the NodeClaim does not request",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", requests("cpu", "1"), nodeCapacity("memory", "1Gi"))
			},
		},
		{
			name: "should not check the shape of a NodeClaim that is not initialized",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", requests("memory", "1Gi"), nodeCapacity("memory", "1Gi"), uninitialized)
			},
		},
		{
			name: "should report a deleting NodeClaim whose pod a PodDisruptionBudget keeps, and not its shape",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", requests("memory", "1Gi"), nodeCapacity("memory", "1Gi"), deletingClaim)
				c.pod("web-0", "node-a", st.Labels(map[string]string{"app": "web"}))
				c.in.PodDisruptionBudgets = append(c.in.PodDisruptionBudgets, pdb("web", map[string]string{"app": "web"}, nil, zero))
			},
			want: []disruption.Inconsistency{{NodeClaim: "a", Node: "node-a",
				Message: "can't drain node, pod default/web-0 is protected by PodDisruptionBudget default/web (0 disruptions allowed)"}},
		},
		{
			name: "should not report a deleting NodeClaim whose pods may all be evicted",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general", deletingClaim)
				c.pod("web-0", "node-a", st.Labels(map[string]string{"app": "web"}))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(onDemandTypes(), pool("general"))
			tt.build(c)
			res, err := disruption.Evaluate(t.Context(), c.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Inconsistencies); diff != "" {
				t.Errorf("Inconsistencies mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
