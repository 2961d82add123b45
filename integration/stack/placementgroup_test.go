package stack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// classStatus reads EC2NodeClass name's status from the cluster.
func classStatus(t testing.TB, s *stack.Stack, name string) v1.EC2NodeClassStatus {
	t.Helper()
	u, err := s.Dynamic.Resource(ec2NodeClassResource).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get ec2nodeclass %s: %v", name, err)
	}
	raw, err := json.Marshal(u.Object["status"])
	if err != nil {
		t.Fatal(err)
	}
	var st v1.EC2NodeClassStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("decode ec2nodeclass %s status %s: %v", name, raw, err)
	}
	return st
}

// TestPlacementGroupSelectorLaunchesIntoTheGroup: a cluster placement
// group created in the simulator and selected by name by the guide's
// EC2NodeClass renamed "placed" (spec.placementGroupSelector); a pod of
// its NodePool launches one instance that EC2 reports in the group
// (Placement.GroupId and GroupName), its node carries
// karpenter.k8s.aws/placement-group-id with the group's ID, and the class
// is PlacementGroupReady and Ready (karpenter-spec, placement groups).
func TestPlacementGroupSelectorLaunchesIntoTheGroup(t *testing.T) {
	s := startStack(t)
	ctx := t.Context()
	pg, err := s.Sim.AddPlacementGroup(ec2sim.PlacementGroup{Name: "training", Strategy: ec2sim.PlacementCluster})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, guideClassYAML(t, "placed", "placementGroupSelector:\n    name: training")); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, reservedPoolYAML("placed", "m6i.large")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("inflate", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "1 pod running", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0
	})
	running := 0
	for _, in := range s.Sim.Instances() {
		if in.State != "running" {
			continue
		}
		running++
		if in.PlacementGroupID != pg.ID || in.PlacementGroupName != "training" {
			t.Errorf("instance %s placement group %q %q; want %s training", in.ID, in.PlacementGroupID, in.PlacementGroupName, pg.ID)
		}
	}
	if running != 1 {
		t.Errorf("%d running instances; want 1", running)
	}
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Labels[v1.LabelPlacementGroupID] != pg.ID {
		for _, n := range nodes.Items {
			t.Errorf("node %s: %s = %q", n.Name, v1.LabelPlacementGroupID, n.Labels[v1.LabelPlacementGroupID])
		}
		t.Fatalf("%d nodes; want 1 labelled %s=%s", len(nodes.Items), v1.LabelPlacementGroupID, pg.ID)
	}
	st := classStatus(t, s, "placed")
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionTypePlacementGroupReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("PlacementGroupReady = %+v; want True", c)
	}
	if readyOf(st.Conditions) != metav1.ConditionTrue {
		t.Errorf("Ready = %q; want True", readyOf(st.Conditions))
	}
}

// TestPlacementGroupSelectorOfAMissingGroupLaunchesNothing: the guide's
// EC2NodeClass renamed "misplaced" selects a placement group the account
// does not hold; the class becomes PlacementGroupReady=False
// (PlacementGroupNotFound, the message naming spec.placementGroupSelector)
// and Ready=False, and its pending pod launches nothing.
func TestPlacementGroupSelectorOfAMissingGroupLaunchesNothing(t *testing.T) {
	s := startStack(t)
	ctx := t.Context()
	if err := s.Apply(ctx, guideClassYAML(t, "misplaced", "placementGroupSelector:\n    name: nowhere")); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, reservedPoolYAML("misplaced", "m6i.large")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("inflate", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var st v1.EC2NodeClassStatus
	eventually(t, s, 2*time.Minute, "EC2NodeClass PlacementGroupReady=False", func(context.Context, stack.Status) bool {
		st = classStatus(t, s, "misplaced")
		c := meta.FindStatusCondition(st.Conditions, v1.ConditionTypePlacementGroupReady)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	c := meta.FindStatusCondition(st.Conditions, v1.ConditionTypePlacementGroupReady)
	if c.Reason != v1.ConditionReasonPlacementGroupNotFound || !strings.Contains(c.Message, "spec.placementGroupSelector") {
		t.Errorf("PlacementGroupReady = %+v; want reason %s and a message naming spec.placementGroupSelector", c, v1.ConditionReasonPlacementGroupNotFound)
	}
	if readyOf(st.Conditions) != metav1.ConditionFalse {
		t.Errorf("Ready = %q in %+v; want False", readyOf(st.Conditions), st.Conditions)
	}
	time.Sleep(5 * time.Second) // a few more rounds
	obs, err := s.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if obs.PendingPods != 1 || obs.Instances != 0 || len(s.Sim.CallsTo("CreateFleet")) != 0 {
		t.Errorf("status %+v after %d CreateFleet calls; want the pod pending, no instance and no CreateFleet", obs, len(s.Sim.CallsTo("CreateFleet")))
	}
}
