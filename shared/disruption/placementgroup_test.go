package disruption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

// inPlacementGroup labels a NodeClaim and its Node as launched into
// placement group id.
func inPlacementGroup(id string) managedOption {
	return func(nc *v1.NodeClaim, n *corev1.Node) {
		nc.Labels[v1.LabelPlacementGroupID] = id
		n.Labels[v1.LabelPlacementGroupID] = id
	}
}

// placementGroup sets the default class's spec.placementGroupSelector to
// name and, when id is not "", its resolved status.placementGroup.
func (c *cluster) placementGroup(name, id string) {
	nc := &c.in.NodeClasses[0]
	nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: name}
	if id != "" {
		nc.Status.PlacementGroup = &v1.PlacementGroup{ID: id, Name: name, Strategy: v1.PlacementStrategyCluster}
	}
}

func TestPlacementGroupDrift(t *testing.T) {
	tests := []struct {
		name  string
		build func(c *cluster)
		want  []disruption.DriftStatus
	}{
		{name: "should drift a node outside the group the class now resolves", build: func(c *cluster) {
			c.placementGroup("training", "pg-0new")
			c.node("a", xlarge, "us-east-1a", od, "general", inPlacementGroup("pg-0old"))
		}, want: []disruption.DriftStatus{{NodeClaim: "a", Reason: disruption.DriftPlacementGroup,
			Detail: "it runs in placement group pg-0old and EC2NodeClass default selects pg-0new"}}},
		{name: "should drift a node in no group once the class selects one", build: func(c *cluster) {
			c.placementGroup("training", "pg-0new")
			c.node("a", xlarge, "us-east-1a", od, "general")
		}, want: []disruption.DriftStatus{{NodeClaim: "a", Reason: disruption.DriftPlacementGroup,
			Detail: "EC2NodeClass default selects placement group pg-0new and it runs in none"}}},
		{name: "should drift a node in a group once the class selects none", build: func(c *cluster) {
			c.node("a", xlarge, "us-east-1a", od, "general", inPlacementGroup("pg-0old"))
		}, want: []disruption.DriftStatus{{NodeClaim: "a", Reason: disruption.DriftPlacementGroup,
			Detail: "it runs in placement group pg-0old and EC2NodeClass default selects none"}}},
		{name: "should not drift a node in the resolved group", build: func(c *cluster) {
			c.placementGroup("training", "pg-0a1")
			c.node("a", xlarge, "us-east-1a", od, "general", inPlacementGroup("pg-0a1"))
		}, want: []disruption.DriftStatus{{NodeClaim: "a"}}},
		{name: "should not drift while the selector's group is not resolved", build: func(c *cluster) {
			c.placementGroup("training", "")
			c.node("a", xlarge, "us-east-1a", od, "general", inPlacementGroup("pg-0old"))
		}, want: []disruption.DriftStatus{{NodeClaim: "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(onDemandTypes(), pool("general"))
			tt.build(c)
			res, err := disruption.Evaluate(t.Context(), c.in)
			if err != nil {
				t.Fatalf("Evaluate() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, res.Drift); diff != "" {
				t.Errorf("Drift mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
