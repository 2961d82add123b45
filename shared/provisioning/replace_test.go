package provisioning_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// replacement is a planned replacement NodeClaim of pool "default" allowing
// instanceTypes on demand.
func replacement(name string, instanceTypes ...string) v1.NodeClaim {
	return v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "default"}, CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelInstanceType, Operator: "In", Values: instanceTypes},
				{Key: v1.LabelCapacityType, Operator: "In", Values: []string{v1.CapacityTypeOnDemand}},
			},
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
	}
}

func TestLaunchNodeClaims(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	p := e.provisioner(t)
	planned := []v1.NodeClaim{replacement("default-r1", "m5.large")}

	got, _, err := p.LaunchNodeClaims(t.Context(), planned, t0)
	if err != nil {
		t.Fatalf("LaunchNodeClaims() error = %v", err)
	}
	if len(e.ec2.instances) != 1 {
		t.Fatalf("instances launched = %d, want 1", len(e.ec2.instances))
	}
	want := []provisioning.Launch{{NodeClaim: "default-r1", Status: launch.Launched, ProviderID: e.ec2.instances[0].ProviderID()}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LaunchNodeClaims() mismatch (-want +got):\n%s", diff)
	}
	stored, err := e.store.GetNodeClaim(t.Context(), "default-r1")
	if err != nil || stored.Status.ProviderID != want[0].ProviderID || stored.Labels[v1.LabelInstanceType] != "m5.large" {
		t.Errorf("stored replacement = %+v, %v; want it launched as m5.large", stored.Status, err)
	}

	again, _, err := p.LaunchNodeClaims(t.Context(), planned, t0)
	if err != nil {
		t.Fatalf("second LaunchNodeClaims() error = %v", err)
	}
	wantAgain := []provisioning.Launch{{NodeClaim: "default-r1", Status: launch.AlreadyLaunched, ProviderID: want[0].ProviderID}}
	if diff := cmp.Diff(wantAgain, again); diff != "" {
		t.Errorf("second LaunchNodeClaims() mismatch (-want +got):\n%s", diff)
	}
	if len(e.ec2.instances) != 1 {
		t.Errorf("instances after a repeated call = %d, want 1", len(e.ec2.instances))
	}
}

func TestLaunchNodeClaimsInsufficientCapacity(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	for _, zone := range []string{"us-east-1a", "us-east-1b"} {
		e.ec2.ice[catalog.OfferingKey{CapacityType: v1.CapacityTypeOnDemand, InstanceType: "m5.large", Zone: zone}] = true
	}
	got, _, err := e.provisioner(t).LaunchNodeClaims(t.Context(), []v1.NodeClaim{replacement("default-r1", "m5.large")}, t0)
	if err != nil {
		t.Fatalf("LaunchNodeClaims() error = %v", err)
	}
	if len(got) != 1 || got[0].Status != launch.InsufficientCapacity {
		t.Fatalf("LaunchNodeClaims() = %+v, want InsufficientCapacity", got)
	}
	if _, err := e.store.GetNodeClaim(t.Context(), "default-r1"); err == nil {
		t.Error("the replacement NodeClaim is still stored after insufficient capacity, want it deleted")
	}
}

// A replacement for a class whose stored authorization verdict is denied is
// not launched: the class is left out with the verdict's reason, as in
// Provision (the disruption task reads the provisioner's verdicts only).
func TestLaunchNodeClaimsAuthDenied(t *testing.T) {
	nc := nodeClass(t)
	nc.UID = "uid-denied"
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nc})
	verdicts := memVerdicts{"uid-denied": {Key: "k", CheckedAt: t0, Reason: provisioning.ReasonCreateFleetAuthCheckFailed,
		Message: "not authorized to call ec2:CreateFleet: You are not authorized to perform this operation."}}
	p, err := provisioning.NewProvisioner(provisioning.ProvisionerPorts{
		Claims: e.store, Config: e.config, NodeClass: e.resolver, Cluster: e.cluster,
		Offerings: e.offerings, Batches: e.store, Launcher: e.ec2,
		Auth: &provisioning.AuthChecker{Verdicts: verdicts},
	}, provisioning.ProvisionerOptions{Cluster: testCluster, Region: testRegion, SpotPriceRatio: 0.35})
	if err != nil {
		t.Fatalf("NewProvisioner() error = %v", err)
	}
	got, warnings, err := p.LaunchNodeClaims(t.Context(), []v1.NodeClaim{replacement("default-r1", "m5.large")}, t0)
	if err != nil {
		t.Fatalf("LaunchNodeClaims() error = %v", err)
	}
	if len(e.ec2.instances) != 0 {
		t.Errorf("instances launched = %d, want 0 for a denied class", len(e.ec2.instances))
	}
	if len(got) != 1 || got[0].Status != launch.NodeClassNotReady || !strings.Contains(got[0].Reason, "CreateFleetAuthCheckFailed") {
		t.Errorf("LaunchNodeClaims() = %+v, want one claim NodeClassNotReady naming CreateFleetAuthCheckFailed", got)
	}
	found := false
	for _, w := range warnings {
		if strings.Contains(w, "CreateFleetAuthCheckFailed") && strings.Contains(w, "ec2:CreateFleet") {
			found = true
		}
	}
	if !found {
		t.Errorf("warnings = %q, want one naming CreateFleetAuthCheckFailed and ec2:CreateFleet", warnings)
	}
}
