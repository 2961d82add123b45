package provisioning_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// karpenterClaim is testdata/karpenter-nodeclaim.yaml: a NodeClaim as
// Karpenter writes it, with its Node ip-10-0-1-17.ec2.internal and
// instance i-0a1b2c3d4e5f60718.
func karpenterClaim(t testing.TB) v1.NodeClaim {
	t.Helper()
	data, err := os.ReadFile("testdata/karpenter-nodeclaim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := v1.DecodeNodeClaim(j)
	if err != nil {
		t.Fatalf("DecodeNodeClaim() error = %v", err)
	}
	return *c
}

// adoptionInput is a cluster where Karpenter launched claim: its Node,
// its instance (Karpenter's tags) and the NodePool and EC2NodeClass
// "default" exist.
func adoptionInput(t testing.TB, claim v1.NodeClaim) provisioning.AdoptionInput {
	inst := karpenterInstance("i-0a1b2c3d4e5f60718", t0)
	inst.Tags[v1.TagKeyEKSClusterName] = testCluster
	return provisioning.AdoptionInput{
		Cluster:     testCluster,
		Foreign:     []v1.NodeClaim{claim},
		NodePools:   []v1.NodePool{nodePool(t, "default", "[]")},
		NodeClasses: []v1.EC2NodeClass{nodeClass(t)},
		Nodes:       []corev1.Node{gcNode("ip-10-0-1-17.ec2.internal", claim.Status.ProviderID, true)},
		Instances:   []launch.Instance{inst},
		Now:         t0.Add(time.Hour),
	}
}

func TestPlanAdoption(t *testing.T) {
	claim := karpenterClaim(t)
	t.Run("should adopt a refused NodeClaim with its Adopted condition turned True", func(t *testing.T) {
		refusedOnce := claim
		refusedOnce.Status.Conditions = v1.SetCondition(claim.Status.Conditions, v1.ConditionTypeAdopted, metav1.ConditionFalse,
			string(provisioning.AdoptionNodePoolNotFound), "not adopted", 0, t0)
		adopt, _ := provisioning.PlanAdoption(adoptionInput(t, refusedOnce))
		if len(adopt) != 1 {
			t.Fatalf("PlanAdoption() adopted %d, want 1", len(adopt))
		}
		var adopted []metav1.Condition
		for _, c := range adopt[0].Status.Conditions {
			if c.Type == v1.ConditionTypeAdopted {
				adopted = append(adopted, c)
			}
		}
		if len(adopted) != 1 || adopted[0].Status != metav1.ConditionTrue || adopted[0].Reason != provisioning.ReasonAdopted ||
			!adopted[0].LastTransitionTime.Equal(&metav1.Time{Time: t0.Add(time.Hour)}) {
			t.Errorf("Adopted conditions %+v, want one, True, reason Adopted, changed at the adoption", adopted)
		}
	})
	t.Run("should adopt a registered Karpenter NodeClaim as it is, without finalizers, owner references or resource version", func(t *testing.T) {
		adopt, refused := provisioning.PlanAdoption(adoptionInput(t, claim))
		if len(refused) != 0 || len(adopt) != 1 {
			t.Fatalf("PlanAdoption() = %d adopted, refused %+v; want one adopted", len(adopt), refused)
		}
		got := adopt[0]
		want := claim
		want.ResourceVersion, want.Generation = "", 0
		want.Finalizers, want.OwnerReferences = nil, nil
		want.Annotations = map[string]string{}
		for k, v := range claim.Annotations {
			want.Annotations[k] = v
		}
		want.Annotations[v1.AnnotationAdoptedFrom] = provisioning.AdoptedFromKarpenter
		want.Status.Conditions = append(slices.Clone(claim.Status.Conditions), metav1.Condition{
			Type: v1.ConditionTypeAdopted, Status: metav1.ConditionTrue, Reason: provisioning.ReasonAdopted, ObservedGeneration: claim.Generation,
			Message:            `adopted from Karpenter: a NodeClaim of NodePool "default"; nodewright disrupts it within the NodePool's budgets`,
			LastTransitionTime: metav1.NewTime(t0.Add(time.Hour)),
		})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("adopted record mismatch (-want +got):\n%s", diff)
		}
		if !provisioning.Adopted(&got) {
			t.Error("Adopted() = false for the adopted record")
		}
	})

	tests := []struct {
		name   string
		edit   func(in *provisioning.AdoptionInput)
		reason provisioning.AdoptionRefusalReason
	}{
		{name: "should adopt nothing while Karpenter's controller is active", edit: func(in *provisioning.AdoptionInput) {
			in.KarpenterActive = "lease kube-system/karpenter-leader-election renewed 3s ago"
		}, reason: provisioning.AdoptionKarpenterActive},
		{name: "should leave alone a NodeClaim whose NodePool does not exist", edit: func(in *provisioning.AdoptionInput) {
			in.NodePools = []v1.NodePool{nodePool(t, "other", "[]")}
		}, reason: provisioning.AdoptionNodePoolNotFound},
		{name: "should leave alone a NodeClaim whose EC2NodeClass does not exist", edit: func(in *provisioning.AdoptionInput) {
			in.NodeClasses = nil
		}, reason: provisioning.AdoptionNodeClassNotFound},
		{name: "should leave alone a NodeClaim without a registered Node", edit: func(in *provisioning.AdoptionInput) {
			in.Nodes = nil
		}, reason: provisioning.AdoptionNotRegistered},
		{name: "should leave alone a NodeClaim whose instance is not listed", edit: func(in *provisioning.AdoptionInput) {
			in.Instances = nil
		}, reason: provisioning.AdoptionInstanceNotFound},
		{name: "should leave alone a NodeClaim whose instance lacks the cluster tag the termination role requires", edit: func(in *provisioning.AdoptionInput) {
			delete(in.Instances[0].Tags, v1.TagKeyClusterPrefix+testCluster)
		}, reason: provisioning.AdoptionInstanceNotFound},
		{name: "should leave alone a NodeClaim whose instance's cluster tag is shared, not owned", edit: func(in *provisioning.AdoptionInput) {
			in.Instances[0].Tags[v1.TagKeyClusterPrefix+testCluster] = "shared"
		}, reason: provisioning.AdoptionInstanceNotFound},
		{name: "should leave alone a NodeClaim whose instance is another NodePool's", edit: func(in *provisioning.AdoptionInput) {
			in.Instances[0].Tags[v1.TagKeyNodePool] = "other"
		}, reason: provisioning.AdoptionInstanceNotFound},
		{name: "should leave alone a NodeClaim whose instance is terminating", edit: func(in *provisioning.AdoptionInput) {
			in.Instances[0].State = "shutting-down"
		}, reason: provisioning.AdoptionInstanceNotFound},
		{name: "should leave a NodeClaim being deleted to its deletion", edit: func(in *provisioning.AdoptionInput) {
			in.Foreign[0].DeletionTimestamp = &metav1.Time{Time: t0}
		}, reason: provisioning.AdoptionDeleting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := adoptionInput(t, karpenterClaim(t))
			tt.edit(&in)
			adopt, refused := provisioning.PlanAdoption(in)
			if len(adopt) != 0 {
				t.Errorf("PlanAdoption() adopted %d, want none", len(adopt))
			}
			if len(refused) != 1 || refused[0].Reason != tt.reason || refused[0].NodeClaim != claim.Name || refused[0].Node != claim.Status.NodeName {
				t.Errorf("PlanAdoption() refused %+v, want one %s for %s", refused, tt.reason, claim.Name)
			}
		})
	}

	t.Run("should not adopt a NodeClaim a stored one already names, by name or providerID", func(t *testing.T) {
		for _, stored := range []v1.NodeClaim{
			{ObjectMeta: metav1.ObjectMeta{Name: claim.Name}},
			{ObjectMeta: metav1.ObjectMeta{Name: "nodewright-1"}, Status: v1.NodeClaimStatus{ProviderID: claim.Status.ProviderID}},
		} {
			in := adoptionInput(t, claim)
			in.Stored = []v1.NodeClaim{stored}
			if adopt, refused := provisioning.PlanAdoption(in); len(adopt)+len(refused) != 0 {
				t.Errorf("with %s stored: PlanAdoption() = %d adopted, refused %+v; want nothing", stored.Name, len(adopt), refused)
			}
		}
	})
}

// reportSource returns a fixed adoption report.
type reportSource struct{ report provisioning.AdoptionReport }

func (r reportSource) AdoptionReport(context.Context) (provisioning.AdoptionReport, error) {
	return r.report, nil
}

func TestAdopt(t *testing.T) {
	claim := karpenterClaim(t)
	in := adoptionInput(t, claim)
	s := newStore()
	ec2 := &gcEC2{instances: in.Instances}
	cfg := &config{pools: in.NodePools, classes: in.NodeClasses}
	a, err := provisioning.NewAdopter(testCluster, reportSource{provisioning.AdoptionReport{Foreign: in.Foreign, Nodes: in.Nodes, TakenAt: t0.Add(-30 * time.Second)}}, s, cfg, ec2)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Adopt(t.Context(), t0)
	if err != nil {
		t.Fatalf("Adopt() error = %v", err)
	}
	if diff := cmp.Diff(provisioning.AdoptionResult{Adopted: []string{claim.Name}}, res, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Adopt() mismatch (-want +got):\n%s", diff)
	}
	stored, err := s.GetNodeClaim(t.Context(), claim.Name)
	if err != nil {
		t.Fatalf("adopted NodeClaim not stored: %v", err)
	}
	if stored.Status.ProviderID != claim.Status.ProviderID || !provisioning.Adopted(&stored) {
		t.Errorf("stored %+v, want the adopted record", stored)
	}

	// Garbage collection now counts the adopted node as a NodeClaim's,
	// and a second adoption run adopts nothing again.
	col, _ := provisioning.NewCollector(testCluster, s, ec2, &kube{nodes: in.Nodes})
	if results, err := col.CollectGarbage(t.Context(), t0.Add(24*time.Hour)); err != nil || len(results) != 0 {
		t.Errorf("CollectGarbage() after adoption = %+v, %v; want nothing", results, err)
	}
	if res, err := a.Adopt(t.Context(), t0); err != nil || len(res.Adopted)+len(res.Refused) != 0 {
		t.Errorf("second Adopt() = %+v, %v; want nothing", res, err)
	}
	if len(ec2.terminated) != 0 {
		t.Errorf("terminated %v, want nothing", ec2.terminated)
	}
}

func TestAdoptNothingFromAStaleSnapshot(t *testing.T) {
	claim := karpenterClaim(t)
	in := adoptionInput(t, claim)
	s := newStore()
	ec2 := &gcEC2{instances: in.Instances}
	taken := t0.Add(-provisioning.MaxAdoptionSnapshotAge - time.Second)
	a, err := provisioning.NewAdopter(testCluster, reportSource{provisioning.AdoptionReport{Foreign: in.Foreign, Nodes: in.Nodes, TakenAt: taken}}, s,
		&config{pools: in.NodePools, classes: in.NodeClasses}, ec2)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Adopt(t.Context(), t0)
	if err != nil {
		t.Fatalf("Adopt() error = %v", err)
	}
	if len(res.Adopted) != 0 || res.Skipped == "" {
		t.Errorf("Adopt() = %+v from a snapshot taken %s before now, want nothing adopted and Skipped set", res, t0.Sub(taken))
	}
	if claims, _ := s.ListNodeClaims(t.Context()); len(claims) != 0 {
		t.Errorf("stored %d NodeClaims from a stale snapshot, want none", len(claims))
	}
}

func TestAdoptErrors(t *testing.T) {
	claim := karpenterClaim(t)
	in := adoptionInput(t, claim)
	s := newStore()
	ec2 := &gcEC2{listErr: errors.New("RequestLimitExceeded")}
	a, _ := provisioning.NewAdopter(testCluster, reportSource{provisioning.AdoptionReport{Foreign: in.Foreign, Nodes: in.Nodes, TakenAt: t0.Add(-30 * time.Second)}}, s,
		&config{pools: in.NodePools, classes: in.NodeClasses}, ec2)
	if _, err := a.Adopt(t.Context(), t0); err == nil {
		t.Fatal("Adopt() error = nil, want the list failure")
	}
	if claims, _ := s.ListNodeClaims(t.Context()); len(claims) != 0 {
		t.Errorf("stored %d NodeClaims after a failed list, want none", len(claims))
	}
	if _, err := provisioning.NewAdopter("", reportSource{}, s, &config{}, ec2); err == nil {
		t.Error("NewAdopter() without a cluster: error = nil")
	}
}
