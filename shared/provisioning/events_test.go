package provisioning_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

func TestEventsRecordInsufficientCapacityErrorOnTheNodeClaimOfAnICELaunch(t *testing.T) {
	pool := nodePool(t, "default", `
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}`)
	e := newEnv([]v1.NodePool{pool}, []v1.EC2NodeClass{nodeClass(t)})
	e.ec2.ice[catalog.OfferingKey{CapacityType: v1.CapacityTypeSpot, InstanceType: "m5.large", Zone: "us-east-1a"}] = true

	res, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0)
	if err != nil {
		t.Fatalf("Provision() error = %v", err)
	}
	name := provisioning.ClaimName("default", "batch-1", 0)
	if len(res.Launches) != 1 || res.Launches[0].Status != launch.InsufficientCapacity {
		t.Fatalf("launches = %+v, want one InsufficientCapacity", res.Launches)
	}
	want := []v1.EventRecord{{
		ID: "InsufficientCapacityError:" + name, Time: metav1.NewTime(t0), Type: "Warning",
		Reason: "InsufficientCapacityError", NodeClaim: name,
		Message: "NodeClaim " + name + " event: " + res.Launches[0].Reason,
	}}
	if diff := cmp.Diff(want, provisioning.Events(res, t0)); diff != "" {
		t.Errorf("Events() mismatch (-want +got):\n%s", diff)
	}
}

func TestEventsRecordNodeClassNotReadyOnTheNodeClaimWhoseEC2NodeClassIsNotReadyAtLaunch(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	e.ec2.errs = []error{errors.New("InternalError")}
	batch := podBatch("batch-1", podSummary("a", "1"))
	if _, err := e.provisioner(t).Provision(t.Context(), batch, t0); !errors.Is(err, provisioning.ErrLaunchIncomplete) {
		t.Fatalf("first Provision() error = %v, want ErrLaunchIncomplete", err)
	}
	e.resolver.fail = map[string]error{"default": errors.New("no security groups match")}
	now := t0.Add(time.Minute)
	res, err := e.provisioner(t).Provision(t.Context(), batch, now)
	if err != nil {
		t.Fatalf("retry Provision() error = %v", err)
	}
	name := provisioning.ClaimName("default", "batch-1", 0)
	if len(res.Launches) != 1 || res.Launches[0].Status != launch.NodeClassNotReady {
		t.Fatalf("launches = %+v, want one NodeClassNotReady", res.Launches)
	}
	want := []v1.EventRecord{{
		ID: "NodeClassNotReady:" + name, Time: metav1.NewTime(now), Type: "Warning",
		Reason: "NodeClassNotReady", NodeClaim: name,
		Message: "NodeClaim " + name + ` event: EC2NodeClass "default" is missing, invalid or not ready`,
	}}
	if diff := cmp.Diff(want, provisioning.Events(res, now)); diff != "" {
		t.Errorf("Events() mismatch (-want +got):\n%s", diff)
	}
}

func TestEventsRecordNoCompatibleInstanceTypesOnlyOnTheNodePoolThatFiltersOutEveryType(t *testing.T) {
	pools := []v1.NodePool{
		nodePool(t, "default", onDemandM5),
		nodePool(t, "gpu", `
      - {key: node.kubernetes.io/instance-type, operator: In, values: [p9.nonexistent]}`),
	}
	e := newEnv(pools, []v1.EC2NodeClass{nodeClass(t)})
	res, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0.Add(30*time.Second))
	if err != nil {
		t.Fatalf("Provision() error = %v", err)
	}
	got := provisioning.Events(res, t0.Add(30*time.Second))
	want := []v1.EventRecord{{
		ID: "NoCompatibleInstanceTypes:gpu:20261129T1200", Time: metav1.NewTime(t0.Add(30 * time.Second)), Type: "Warning",
		Reason: "NoCompatibleInstanceTypes", NodePool: "gpu",
		Message: "NodePool requirements filtered out all compatible available instance types",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Events() mismatch (-want +got):\n%s", diff)
	}
	// A repeat in the same minute is the same record; the next minute's is new.
	if again := provisioning.Events(res, t0.Add(59*time.Second)); again[0].ID != got[0].ID {
		t.Errorf("ID within the minute = %s, want %s", again[0].ID, got[0].ID)
	}
	if next := provisioning.Events(res, t0.Add(time.Minute)); next[0].ID == got[0].ID {
		t.Errorf("ID a minute later = %s, want a new one", next[0].ID)
	}
}

func TestEventsRecordNothingForLaunchedNodeClaims(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	res, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0)
	if err != nil {
		t.Fatalf("Provision() error = %v", err)
	}
	if len(res.Launches) != 1 || res.Launches[0].Status != launch.Launched {
		t.Fatalf("launches = %+v, want one Launched", res.Launches)
	}
	if got := provisioning.Events(res, t0); len(got) != 0 {
		t.Errorf("Events() = %+v, want none", got)
	}
}
