package iamprofile_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/iamsim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/iamprofile"
	"github.com/nodewright/nodewright/shared/launch"
)

func setup(t *testing.T) (*iam.Client, *iamsim.Server, *iamprofile.Client) {
	t.Helper()
	sim := iamsim.New("", nil)
	for _, r := range [][2]string{{"NodeRole", "/"}, {"Second", "/nodes/"}, {"Admin", "/"}} {
		if _, err := sim.CreateRole(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	api := iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""), RetryMaxAttempts: 1})
	roles, err := launch.ParseNodeRoles("arn:aws:iam::111122223333:role/NodeRole", "/nodes/")
	if err != nil {
		t.Fatal(err)
	}
	return api, sim, iamprofile.New(api, "prod", "us-east-1", roles)
}

func class(role string) v1.EC2NodeClass {
	return v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-1"}, Spec: v1.EC2NodeClassSpec{Role: role, Tags: map[string]string{"team": "a"}}}
}

func TestEnsureCreatesTagsAndFillsTheProfileOnce(t *testing.T) {
	ctx := context.Background()
	_, sim, c := setup(t)
	name, err := c.Ensure(ctx, class("Second"))
	if err != nil {
		t.Fatalf("Ensure() error = %v", err)
	}
	if want := launch.InstanceProfileName("prod", "us-east-1", "uid-1", "Second"); name != want {
		t.Errorf("name = %q, want %q", name, want)
	}
	p, ok := sim.InstanceProfile(name)
	if !ok {
		t.Fatal("profile not created")
	}
	if p.Path != "/nodewright/us-east-1/prod/uid-1/" || len(p.Roles) != 1 || p.Roles[0] != "Second" {
		t.Errorf("profile = %+v, want path /nodewright/us-east-1/prod/uid-1/ and role Second", p)
	}
	tags := map[string]string{}
	for _, tg := range p.Tags {
		tags[tg.Key] = tg.Value
	}
	for k, v := range map[string]string{"team": "a", "nodewright.dev/owner": "prod", "kubernetes.io/cluster/prod": "owned", "eks:eks-cluster-name": "prod", "karpenter.k8s.aws/ec2nodeclass": "default", "topology.kubernetes.io/region": "us-east-1"} {
		if tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, tags[k], v)
		}
	}
	calls := len(sim.Calls())
	if again, err := c.Ensure(ctx, class("Second")); err != nil || again != name {
		t.Fatalf("second Ensure() = %q, %v; want %q", again, err, name)
	}
	for _, call := range sim.Calls()[calls:] {
		if call.Action != "GetRole" && call.Action != "GetInstanceProfile" {
			t.Errorf("second Ensure() called %s; a ready profile needs only reads", call.Action)
		}
	}
	// A role change makes a new profile; the old one stays for the gc.
	other, err := c.Ensure(ctx, class("NodeRole"))
	if err != nil || other == name {
		t.Fatalf("Ensure(new role) = %q, %v; want a new profile", other, err)
	}
	if _, ok := sim.InstanceProfile(name); !ok {
		t.Error("the old profile was deleted by Ensure")
	}
}

func TestEnsureRefuses(t *testing.T) {
	ctx := context.Background()
	api, _, c := setup(t)
	if _, err := c.Ensure(ctx, class("Admin")); !errors.Is(err, iamprofile.ErrRoleNotAllowed) {
		t.Errorf("Ensure(Admin) error = %v, want ErrRoleNotAllowed", err)
	}
	if _, err := c.Ensure(ctx, class("Missing")); !errors.Is(err, iamprofile.ErrRoleNotFound) {
		t.Errorf("Ensure(Missing) error = %v, want ErrRoleNotFound", err)
	}
	// A profile of the name that is not nodewright's is never used.
	name := launch.InstanceProfileName("prod", "us-east-1", "uid-1", "NodeRole")
	if _, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Path: aws.String("/nodewright/us-east-1/prod/uid-1/"),
		Tags: []iamtypes.Tag{{Key: aws.String("owner"), Value: aws.String("someone")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ensure(ctx, class("NodeRole")); !errors.Is(err, iamprofile.ErrNotOwned) {
		t.Errorf("Ensure(foreign profile) error = %v, want ErrNotOwned", err)
	}
}

func TestListAndDelete(t *testing.T) {
	ctx := context.Background()
	api, sim, c := setup(t)
	name, err := c.Ensure(ctx, class("NodeRole"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("unrelated"), Path: aws.String("/")}); err != nil {
		t.Fatal(err)
	}
	got, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != name || got[0].Tags[v1.TagKeyOwner] != "prod" || len(got[0].Roles) != 1 {
		t.Fatalf("List() = %+v, want only %s with its tags and role", got, name)
	}
	if err := c.Delete(ctx, name, got[0].Roles); err != nil {
		t.Fatalf("Delete() error = %v", err)
	}
	if _, ok := sim.InstanceProfile(name); ok {
		t.Error("profile still there after Delete")
	}
	if err := c.Delete(ctx, name, got[0].Roles); err != nil {
		t.Errorf("Delete(gone) error = %v, want nil", err)
	}
}
