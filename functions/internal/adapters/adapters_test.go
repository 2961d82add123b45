package adapters_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/go-cmp/cmp"
	"github.com/sivchari/kumo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/functions/internal/adapters"
	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/iamsim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newStore(t *testing.T) *ddbstore.Store {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	client := dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")},
		func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	// kumo's state is per process: one table per test.
	sum := sha256.Sum256([]byte(t.Name()))
	table := "adapters-" + hex.EncodeToString(sum[:8])
	if err := ddbstore.CreateTable(context.Background(), client, table, time.Minute); err != nil {
		t.Fatal(err)
	}
	s, err := ddbstore.New(client, table, "c1")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClaimsTranslatesStoreErrors checks that the store's errors match the
// sentinels provisioning branches on, keeping their messages.
func TestClaimsTranslatesStoreErrors(t *testing.T) {
	ctx := context.Background()
	claims := adapters.Claims{Store: newStore(t)}
	created, err := claims.CreateNodeClaim(ctx, v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a", UID: "u1"}})
	if err != nil {
		t.Fatal(err)
	}
	stale := created
	if _, err := claims.UpdateNodeClaim(ctx, created); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{name: "a create of a taken name is ErrAlreadyExists", call: func() error {
			_, err := claims.CreateNodeClaim(ctx, v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a"}})
			return err
		}, want: v1.ErrAlreadyExists},
		{name: "a read of a missing NodeClaim is ErrNotFound", call: func() error {
			_, err := claims.GetNodeClaim(ctx, "default-b")
			return err
		}, want: v1.ErrNotFound},
		{name: "an update at an old version is ErrConflict", call: func() error {
			_, err := claims.UpdateNodeClaim(ctx, stale)
			return err
		}, want: v1.ErrConflict},
		{name: "a delete at an old version is ErrConflict", call: func() error {
			return claims.DeleteNodeClaim(ctx, "default-a", stale.ResourceVersion)
		}, want: v1.ErrConflict},
		{name: "a delete of a missing NodeClaim is ErrNotFound", call: func() error {
			return claims.DeleteNodeClaim(ctx, "default-b", "1")
		}, want: v1.ErrNotFound},
		{name: "a providerID no NodeClaim carries is ErrNotFound", call: func() error {
			_, err := claims.NodeClaimByProviderID(ctx, "aws:///us-east-1a/i-0123")
			return err
		}, want: v1.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want it to match %v", err, tt.want)
			}
			if err.Error() == tt.want.Error() {
				t.Errorf("error = %q, want the store's message kept", err)
			}
		})
	}
}

func TestConfigAndClusterWithoutData(t *testing.T) {
	s := newStore(t)
	pools, classes, err := adapters.Config{Store: s}.ClusterConfig(context.Background())
	if err != nil || pools != nil || classes != nil {
		t.Errorf("ClusterConfig() = %v, %v, %v; want empty lists and no error before any config", pools, classes, err)
	}
	st, err := adapters.Cluster{Store: s, Now: func() time.Time { return t0 }}.ClusterState(context.Background())
	if err != nil || len(st.Nodes)+len(st.Pods)+len(st.DaemonSets) != 0 {
		t.Errorf("ClusterState() = %+v, %v; want an empty state before any snapshot", st, err)
	}
}

func TestOfferingsRoundTrip(t *testing.T) {
	o := adapters.Offerings{Store: newStore(t)}
	ctx := context.Background()
	spot := catalog.OfferingKey{CapacityType: "spot"}
	exact := catalog.OfferingKey{CapacityType: "on-demand", InstanceType: "m5.large", Zone: "us-east-1a"}
	for _, off := range []catalog.OfferingKey{exact, spot} {
		if err := o.MarkUnavailable(ctx, off, "InsufficientInstanceCapacity", t0, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	got, err := o.UnavailableOfferings(ctx, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]catalog.OfferingKey{exact, spot}, got); diff != "" {
		t.Errorf("UnavailableOfferings() mismatch (-want +got):\n%s", diff)
	}
}

func TestClusterStateOf(t *testing.T) {
	snap := ddbstore.Snapshot{
		Nodes: []v1.NodeSummary{{Name: "n1", ProviderID: "aws:///us-east-1a/i-1", Labels: map[string]string{"a": "b"}}},
		Pods:  []v1.PodSummary{{Name: "p1", Namespace: "default", UID: "u1", NodeName: "n1", Spec: v1.PodSpecSummary{Containers: []v1.ContainerSummary{{Name: "c"}}}}},
		DaemonSets: []v1.DaemonSetSummary{{Name: "ds", Namespace: "kube-system", UID: "d1", Template: v1.PodSummary{
			Labels: map[string]string{"app": "ds"}, Spec: v1.PodSpecSummary{Containers: []v1.ContainerSummary{{Name: "agent"}}},
		}}},
	}
	st := adapters.ClusterStateOf(snap)
	type view struct {
		Node, NodeProvider, Pod, PodNode, DS string
		DSUID                                types.UID
		DSLabels                             map[string]string
		DSContainers                         []string
	}
	got := view{Node: st.Nodes[0].Name, NodeProvider: st.Nodes[0].Spec.ProviderID, Pod: st.Pods[0].Name, PodNode: st.Pods[0].Spec.NodeName,
		DS: st.DaemonSets[0].Namespace + "/" + st.DaemonSets[0].Name, DSUID: st.DaemonSets[0].UID, DSLabels: st.DaemonSets[0].Spec.Template.Labels}
	for _, c := range st.DaemonSets[0].Spec.Template.Spec.Containers {
		got.DSContainers = append(got.DSContainers, c.Name)
	}
	want := view{Node: "n1", NodeProvider: "aws:///us-east-1a/i-1", Pod: "p1", PodNode: "n1", DS: "kube-system/ds", DSUID: "d1",
		DSLabels: map[string]string{"app": "ds"}, DSContainers: []string{"agent"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClusterStateOf() mismatch (-want +got):\n%s", diff)
	}
}

func TestNodeClassesResolve(t *testing.T) {
	sim, err := ec2sim.New(ec2sim.Options{ClusterName: "c1", Clock: ec2sim.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	creds := credentials.NewStaticCredentialsProvider("a", "b", "")
	hc := &http.Client{Transport: ec2sim.LoopbackTransport(srv.Client().Transport)}
	resolver := nodeclass.New(
		ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, HTTPClient: hc}),
		ssm.New(ssm.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, HTTPClient: hc}),
		func() time.Time { return t0 })
	training, err := sim.AddPlacementGroup(ec2sim.PlacementGroup{Name: "training", Strategy: ec2sim.PlacementCluster})
	if err != nil {
		t.Fatal(err)
	}
	nc := func(discovery string, mutate func(*v1.EC2NodeClass)) v1.EC2NodeClass {
		c := v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 3}, Spec: v1.EC2NodeClassSpec{
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "NodeRole",
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": discovery}}},
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
		}}
		if mutate != nil {
			mutate(&c)
		}
		return c
	}
	profile := "explicit-profile"
	tests := []struct {
		name        string
		give        v1.EC2NodeClass
		wantReady   metav1.ConditionStatus
		wantReason  string
		wantProfile string
		wantSubnets int
		wantGroup   *v1.PlacementGroup
		wantMessage string
	}{
		{name: "a class that resolves is Ready with the role's instance profile", give: nc("c1", nil), wantReady: metav1.ConditionTrue, wantReason: v1.ConditionTypeReady, wantProfile: "NodeRole", wantSubnets: 3},
		{name: "spec.instanceProfile is used as is", give: nc("c1", func(c *v1.EC2NodeClass) { c.Spec.Role, c.Spec.InstanceProfile = "", &profile }), wantReady: metav1.ConditionTrue, wantReason: v1.ConditionTypeReady, wantProfile: profile, wantSubnets: 3},
		{name: "a class whose subnets match nothing is not Ready", give: nc("nobody", nil), wantReady: metav1.ConditionFalse, wantReason: "SubnetsNotFound"},
		{name: "a class whose AMI alias Kubernetes 1.33 does not support is not Ready with UnsupportedAlias, not an error", give: nc("c1", func(c *v1.EC2NodeClass) {
			c.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "al2@latest"}}
		}), wantReady: metav1.ConditionFalse, wantReason: "UnsupportedAlias"},
		{name: "a class whose placement group the simulator holds is Ready with the group in its status", give: nc("c1", func(c *v1.EC2NodeClass) {
			c.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: "training"}
		}), wantReady: metav1.ConditionTrue, wantReason: v1.ConditionTypeReady, wantProfile: "NodeRole", wantSubnets: 3,
			wantGroup: &v1.PlacementGroup{ID: training.ID, Name: "training", Strategy: "cluster"}},
		{name: "a class naming a missing placement group is not Ready with PlacementGroupNotFound, the rest resolved", give: nc("c1", func(c *v1.EC2NodeClass) {
			c.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{ID: "pg-0123456789abcdef0"}
		}), wantReady: metav1.ConditionFalse, wantReason: v1.ConditionReasonPlacementGroupNotFound, wantProfile: "NodeRole", wantSubnets: 3,
			wantMessage: `spec.placementGroupSelector (id "pg-0123456789abcdef0")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var observed []v1.EC2NodeClass
			onResolved := func(_ context.Context, nc v1.EC2NodeClass) { observed = append(observed, nc) }
			res, err := adapters.NodeClasses{Resolver: resolver, KubernetesVersion: "1.33", OnResolved: onResolved}.ResolveNodeClass(context.Background(), tt.give)
			if err != nil {
				t.Fatalf("ResolveNodeClass() error = %v", err)
			}
			if len(observed) != 1 || !cmp.Equal(observed[0].Status, res.NodeClass.Status) {
				t.Errorf("OnResolved saw %+v; want the resolved class once", observed)
			}
			conds := res.NodeClass.Status.Conditions
			if len(conds) != 1 || conds[0].Type != v1.ConditionTypeReady || conds[0].Status != tt.wantReady || conds[0].Reason != tt.wantReason || conds[0].ObservedGeneration != 3 {
				t.Errorf("conditions = %+v, want Ready=%s reason %s at generation 3", conds, tt.wantReady, tt.wantReason)
			}
			if res.NodeClass.Status.InstanceProfile != tt.wantProfile || len(res.Subnets) != tt.wantSubnets {
				t.Errorf("instance profile %q, %d subnets; want %q, %d", res.NodeClass.Status.InstanceProfile, len(res.Subnets), tt.wantProfile, tt.wantSubnets)
			}
			if (tt.wantReady == metav1.ConditionTrue || tt.wantGroup != nil || tt.wantMessage != "") && (len(res.NodeClass.Status.AMIs) == 0 || len(res.NodeClass.Status.SecurityGroups) == 0) {
				t.Errorf("status = %+v, want AMIs and security groups", res.NodeClass.Status)
			}
			if diff := cmp.Diff(tt.wantGroup, res.NodeClass.Status.PlacementGroup); diff != "" {
				t.Errorf("status.placementGroup (-want +got):\n%s", diff)
			}
			if len(conds) == 1 && !strings.Contains(conds[0].Message, tt.wantMessage) {
				t.Errorf("Ready message = %q; want it to name %s", conds[0].Message, tt.wantMessage)
			}
		})
	}
}

func TestNodeClassesEnsureTheRolesInstanceProfile(t *testing.T) {
	sim, err := ec2sim.New(ec2sim.Options{ClusterName: "c1", Clock: ec2sim.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	idm := iamsim.New("", nil)
	for _, r := range []string{"NodeRole", "Admin"} {
		if _, err := idm.CreateRole(r, "/"); err != nil {
			t.Fatal(err)
		}
	}
	iamSrv := httptest.NewServer(idm)
	t.Cleanup(iamSrv.Close)
	creds := credentials.NewStaticCredentialsProvider("a", "b", "")
	hc := &http.Client{Transport: ec2sim.LoopbackTransport(srv.Client().Transport)}
	resolver := nodeclass.New(
		ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, HTTPClient: hc}),
		ssm.New(ssm.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, HTTPClient: hc}),
		func() time.Time { return t0 })
	roles, err := launch.ParseNodeRoles("arn:aws:iam::111122223333:role/NodeRole", "")
	if err != nil {
		t.Fatal(err)
	}
	iamClient := iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(iamSrv.URL), Credentials: creds, RetryMaxAttempts: 1})
	classes := adapters.NodeClasses{Resolver: resolver, KubernetesVersion: "1.33"}.WithProfiles(adapters.NewInstanceProfiles(iamClient, "c1", "us-east-1", roles))
	nc := func(role string) v1.EC2NodeClass {
		return v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-1", Generation: 2}, Spec: v1.EC2NodeClassSpec{
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       role,
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
		}}
	}
	tests := []struct {
		role, wantReason, wantMessage string
	}{
		{role: "NodeRole", wantReason: v1.ConditionTypeReady},
		{role: "Admin", wantReason: v1.ConditionReasonRoleNotAllowed, wantMessage: `spec.role "Admin"`},
		{role: "Missing", wantReason: v1.ConditionReasonInstanceProfileFailed, wantMessage: `spec.role "Missing"`},
	}
	for _, tt := range tests {
		res, err := classes.ResolveNodeClass(context.Background(), nc(tt.role))
		if err != nil {
			t.Fatalf("role %s: ResolveNodeClass() error = %v", tt.role, err)
		}
		conds := res.NodeClass.Status.Conditions
		if len(conds) != 1 || conds[0].Reason != tt.wantReason || !strings.Contains(conds[0].Message, tt.wantMessage) {
			t.Errorf("role %s: conditions = %+v, want reason %s with message naming %s", tt.role, conds, tt.wantReason, tt.wantMessage)
		}
		want := ""
		if tt.wantReason == v1.ConditionTypeReady {
			want = launch.InstanceProfileName("c1", "us-east-1", "uid-1", "NodeRole")
			if p, ok := idm.InstanceProfile(want); !ok || len(p.Roles) != 1 || p.Roles[0] != "NodeRole" {
				t.Errorf("IAM profile %s = %+v, %v; want it holding NodeRole", want, p, ok)
			}
		}
		if got := res.NodeClass.Status.InstanceProfile; got != want {
			t.Errorf("role %s: status.instanceProfile = %q, want %q", tt.role, got, want)
		}
	}
	if n := len(idm.InstanceProfiles()); n != 1 {
		t.Errorf("IAM holds %d profiles, want 1: refused roles get none", n)
	}
}
