package launch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
)

func TestInstanceProfileNameIsStablePerClassAndRole(t *testing.T) {
	a := launch.InstanceProfileName("prod", "us-east-1", "uid-1", "NodeRole")
	if a != launch.InstanceProfileName("prod", "us-east-1", "uid-1", "NodeRole") {
		t.Error("same inputs give different names")
	}
	if !strings.HasPrefix(a, "prod_") || len(a) > 128 {
		t.Errorf("name %q: want prod_<hash>, at most 128 characters", a)
	}
	for _, other := range []string{
		launch.InstanceProfileName("prod", "us-east-1", "uid-1", "OtherRole"),
		launch.InstanceProfileName("prod", "us-east-1", "uid-2", "NodeRole"),
		launch.InstanceProfileName("prod", "us-west-2", "uid-1", "NodeRole"),
	} {
		if other == a {
			t.Errorf("a changed role, class or region kept the name %q", a)
		}
	}
	if got, want := launch.InstanceProfilePath("us-east-1", "prod", "uid-1"), "/nodewright/us-east-1/prod/uid-1/"; got != want {
		t.Errorf("path = %q, want %q", got, want)
	}
}

func TestNodeRolesAllows(t *testing.T) {
	r, err := launch.ParseNodeRoles("arn:aws:iam::111122223333:role/NodeRole, arn:aws:iam::111122223333:role/team/Second", "/nodes/")
	if err != nil {
		t.Fatal(err)
	}
	for arn, want := range map[string]bool{
		"arn:aws:iam::111122223333:role/NodeRole":       true,
		"arn:aws:iam::111122223333:role/team/Second":    true,
		"arn:aws:iam::111122223333:role/nodes/gpu/Any":  true,
		"arn:aws:iam::111122223333:role/Admin":          false,
		"arn:aws:iam::111122223333:role/nodesx/Admin":   false,
		"arn:aws:iam::444455556666:role/NodeRole":       false,
		"arn:aws:iam::111122223333:user/nodes/NotARole": false,
	} {
		if got := r.Allows(arn); got != want {
			t.Errorf("Allows(%s) = %v, want %v", arn, got, want)
		}
	}
	if (launch.NodeRoles{}).Allows("arn:aws:iam::111122223333:role/NodeRole") {
		t.Error("the zero NodeRoles allows a role")
	}
	for _, bad := range [][2]string{{"NodeRole", ""}, {"arn:aws:iam::1:user/x", ""}, {"", "nodes/"}} {
		if _, err := launch.ParseNodeRoles(bad[0], bad[1]); err == nil {
			t.Errorf("ParseNodeRoles(%q, %q) error = nil", bad[0], bad[1])
		}
	}
}

func TestPlanInstanceProfileCleanup(t *testing.T) {
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	class := v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "live"}, Spec: v1.EC2NodeClassSpec{Role: "NodeRole"}}
	owned := map[string]string{v1.TagKeyOwner: "prod"}
	path := func(uid string) string { return launch.InstanceProfilePath("us-east-1", "prod", uid) }
	current := launch.InstanceProfileName("prod", "us-east-1", "live", "NodeRole")
	old := launch.InstanceProfileName("prod", "us-east-1", "live", "OldRole")
	in := launch.ProfileGCInput{
		Now: now, Cluster: "prod", Region: "us-east-1",
		NodeClasses: []v1.EC2NodeClass{class},
		InUse:       []string{"prod_inuse"},
		Profiles: []launch.InstanceProfile{
			{Name: current, Path: path("live"), Created: now.Add(-48 * time.Hour), Roles: []string{"NodeRole"}, Tags: owned},
			{Name: old, Path: path("live"), Created: now.Add(-2 * time.Hour), Roles: []string{"OldRole"}, Tags: owned},
			{Name: "prod_recent_old", Path: path("live"), Created: now.Add(-time.Minute), Tags: owned},
			{Name: "prod_gone", Path: path("deleted"), Created: now.Add(-time.Minute), Roles: []string{"NodeRole"}, Tags: owned},
			{Name: "prod_inuse", Path: path("deleted"), Created: now.Add(-48 * time.Hour), Tags: owned},
			{Name: "prod_untagged", Path: path("deleted"), Created: now.Add(-48 * time.Hour)},
			{Name: "prod_othercluster", Path: path("deleted"), Created: now.Add(-48 * time.Hour), Tags: map[string]string{v1.TagKeyOwner: "staging"}},
			{Name: "prod_elsewhere", Path: "/karpenter/us-east-1/prod/deleted/", Created: now.Add(-48 * time.Hour), Tags: owned},
		},
	}
	want := []launch.ProfileCleanup{
		{Name: "prod_gone", Roles: []string{"NodeRole"}, Reason: "nodeclass-deleted"},
		{Name: old, Roles: []string{"OldRole"}, Reason: "superseded"},
	}
	if old < "prod_gone" {
		want[0], want[1] = want[1], want[0]
	}
	if diff := cmp.Diff(want, launch.PlanInstanceProfileCleanup(in)); diff != "" {
		t.Errorf("plan mismatch (-want +got):\n%s", diff)
	}
}
