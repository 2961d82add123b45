package iamsim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/nodewright/nodewright/local/iamsim"
)

func client(t *testing.T) (*iam.Client, *iamsim.Server) {
	t.Helper()
	sim := iamsim.New("", nil)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c := iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""), RetryMaxAttempts: 1})
	return c, sim
}

func TestInstanceProfileLifecycle(t *testing.T) {
	ctx := context.Background()
	c, sim := client(t)
	if _, err := sim.CreateRole("NodeRole", "/nodes/"); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CreateRole("Other", ""); err != nil {
		t.Fatal(err)
	}
	out, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
		InstanceProfileName: aws.String("c_1"), Path: aws.String("/nodewright/us-east-1/c/uid/"),
		Tags: []iamtypes.Tag{{Key: aws.String("nodewright.dev/owner"), Value: aws.String("c")}},
	})
	if err != nil {
		t.Fatalf("CreateInstanceProfile() error = %v", err)
	}
	if got, want := aws.ToString(out.InstanceProfile.Arn), "arn:aws:iam::111122223333:instance-profile/nodewright/us-east-1/c/uid/c_1"; got != want {
		t.Errorf("Arn = %q, want %q", got, want)
	}
	var ae *iamtypes.EntityAlreadyExistsException
	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("c_1")}); !errors.As(err, &ae) {
		t.Errorf("second CreateInstanceProfile() error = %v, want EntityAlreadyExists", err)
	}
	if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("c_1"), RoleName: aws.String("NodeRole")}); err != nil {
		t.Fatalf("AddRoleToInstanceProfile() error = %v", err)
	}
	var le *iamtypes.LimitExceededException
	if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("c_1"), RoleName: aws.String("Other")}); !errors.As(err, &le) {
		t.Errorf("second AddRoleToInstanceProfile() error = %v, want LimitExceeded (one role per profile)", err)
	}
	var nse *iamtypes.NoSuchEntityException
	if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("c_1"), RoleName: aws.String("Missing")}); !errors.As(err, &nse) {
		t.Errorf("AddRoleToInstanceProfile(missing role) error = %v, want NoSuchEntity", err)
	}
	if _, err := c.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String("c_1"), Tags: []iamtypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
		t.Fatalf("TagInstanceProfile() error = %v", err)
	}
	got, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("c_1")})
	if err != nil {
		t.Fatalf("GetInstanceProfile() error = %v", err)
	}
	if n := len(got.InstanceProfile.Roles); n != 1 || aws.ToString(got.InstanceProfile.Roles[0].Arn) != "arn:aws:iam::111122223333:role/nodes/NodeRole" {
		t.Errorf("Roles = %+v, want NodeRole", got.InstanceProfile.Roles)
	}
	if n := len(got.InstanceProfile.Tags); n != 2 {
		t.Errorf("Tags = %d, want 2", n)
	}
	var dc *iamtypes.DeleteConflictException
	if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("c_1")}); !errors.As(err, &dc) {
		t.Errorf("DeleteInstanceProfile(with role) error = %v, want DeleteConflict", err)
	}
	forRole, err := c.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String("NodeRole")})
	if err != nil || len(forRole.InstanceProfiles) != 1 {
		t.Errorf("ListInstanceProfilesForRole() = %v, %v; want c_1", forRole, err)
	}
	if _, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String("c_1"), RoleName: aws.String("NodeRole")}); err != nil {
		t.Fatalf("RemoveRoleFromInstanceProfile() error = %v", err)
	}
	if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("c_1")}); err != nil {
		t.Fatalf("DeleteInstanceProfile() error = %v", err)
	}
	if _, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("c_1")}); !errors.As(err, &nse) {
		t.Errorf("GetInstanceProfile(deleted) error = %v, want NoSuchEntity", err)
	}
	if _, ok := sim.ProfileARN("c_1"); ok {
		t.Error("ProfileARN(deleted) found it")
	}
	if _, err := c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("Missing")}); !errors.As(err, &nse) {
		t.Errorf("GetRole(missing) error = %v, want NoSuchEntity", err)
	}
	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("x"), Path: aws.String("no-slash")}); err == nil {
		t.Error("CreateInstanceProfile(bad path) error = nil")
	}
}

func TestListInstanceProfilesPages(t *testing.T) {
	ctx := context.Background()
	c, _ := client(t)
	for i := range 5 {
		path := "/nodewright/"
		if i == 4 {
			path = "/other/"
		}
		if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(fmt.Sprintf("p%d", i)), Path: aws.String(path),
			Tags: []iamtypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	pages := 0
	p := iam.NewListInstanceProfilesPaginator(c, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/nodewright/"), MaxItems: aws.Int32(3)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, ip := range out.InstanceProfiles {
			names = append(names, aws.ToString(ip.InstanceProfileName))
			if len(ip.Tags) != 0 {
				t.Errorf("listed profile %s has tags; IAM lists carry none", aws.ToString(ip.InstanceProfileName))
			}
		}
	}
	if fmt.Sprint(names) != "[p0 p1 p2 p3]" || pages != 2 {
		t.Errorf("listed %v in %d pages, want [p0 p1 p2 p3] in 2", names, pages)
	}
}
