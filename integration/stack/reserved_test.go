package stack_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// reservationClassYAML is the guide's EC2NodeClass renamed name and
// selecting capacity reservation id (capacityReservationSelectorTerms).
func reservationClassYAML(t testing.TB, name, id string) []byte {
	t.Helper()
	return guideClassYAML(t, name, fmt.Sprintf("capacityReservationSelectorTerms:\n    - id: %s", id))
}

// guideClassYAML is the guide's EC2NodeClass renamed name with spec
// lines appended (YAML indented for the spec, first line unindented).
func guideClassYAML(t testing.TB, name, spec string) []byte {
	t.Helper()
	data, err := guideFile("ec2nodeclass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("name: production"), []byte("name: "+name), 1)
	return append(bytes.TrimRight(data, "\n"), []byte("\n  "+spec+"\n")...)
}

// reservedPoolYAML is a NodePool called name over the EC2NodeClass of the
// same name that launches only instanceType, reserved first and on-demand
// after; consolidation never acts, so only a test's cause disrupts it.
func reservedPoolYAML(name, instanceType string) []byte {
	return []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: ` + name + `
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ['reserved', 'on-demand']
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ['` + instanceType + `']
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: ` + name + `
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
`)
}

// TestReservedPoolFillsTheReservationThenOnDemand: a targeted On-Demand
// Capacity Reservation of 2 instances, selected by the guide's
// EC2NodeClass renamed "reserved" (capacityReservationSelectorTerms by id), and a NodePool of
// capacity types reserved and on-demand; 3 pods that each need a node of
// their own launch 2 instances into the reservation (EC2 reports their
// CapacityReservationId, their nodes are labelled capacity-type reserved
// with the reservation's id) and the third on-demand, outside it: the
// solver counts the reservation's free instances within the round
// (karpenter-spec, capacity reservations).
func TestReservedPoolFillsTheReservationThenOnDemand(t *testing.T) {
	s := startStack(t)
	ctx := t.Context()
	const instanceType = "m6i.large"
	cr, err := s.Sim.AddCapacityReservation(ec2sim.CapacityReservation{
		InstanceType: instanceType, Zone: s.Sim.Zones()[0], TotalInstanceCount: 2, InstanceMatchCriteria: "targeted",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, reservationClassYAML(t, "reserved", cr.ID)); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, reservedPoolYAML("reserved", instanceType)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, spreadOnePerNode(deployment("inflate", 3, "500m", "512Mi")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "3 pods running", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 3 && st.PendingPods == 0
	})

	inReservation, outside := 0, 0
	for _, in := range s.Sim.Instances() {
		if in.State != "running" {
			continue
		}
		switch in.CapacityReservationID {
		case cr.ID:
			inReservation++
		case "":
			outside++
		default:
			t.Errorf("instance %s runs in reservation %q; want %s or none", in.ID, in.CapacityReservationID, cr.ID)
		}
	}
	if inReservation != 2 || outside != 1 {
		t.Errorf("running instances: %d in %s, %d outside; want 2 and 1", inReservation, cr.ID, outside)
	}
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]int{}
	for _, n := range nodes.Items {
		ct := n.Labels[v1.LabelCapacityType]
		byType[ct]++
		if id := n.Labels[v1.LabelCapacityReservationID]; (ct == v1.CapacityTypeReserved) != (id == cr.ID) {
			t.Errorf("node %s: capacity-type %q, capacity-reservation-id %q; want the reservation's id exactly on reserved nodes", n.Name, ct, id)
		}
	}
	if byType[v1.CapacityTypeReserved] != 2 || byType[v1.CapacityTypeOnDemand] != 1 {
		t.Errorf("nodes by capacity type = %v; want 2 reserved and 1 on-demand", byType)
	}
	if got := s.Sim.CapacityReservations(); len(got) != 1 || got[0].AvailableInstanceCount != 0 {
		t.Errorf("reservations after the launches = %+v; want %s with 0 available", got, cr.ID)
	}
}
