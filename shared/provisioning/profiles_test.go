package provisioning_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// profileIAM is a fake profile store.
type profileIAM struct {
	profiles  []launch.InstanceProfile
	listErr   error
	deleted   []string
	deleteErr error
}

func (p *profileIAM) List(context.Context) ([]launch.InstanceProfile, error) {
	return p.profiles, p.listErr
}

func (p *profileIAM) Delete(_ context.Context, name string, roles []string) error {
	if p.deleteErr != nil {
		return p.deleteErr
	}
	p.deleted = append(p.deleted, name)
	return nil
}

func TestCollectInstanceProfiles(t *testing.T) {
	class := nodeClass(t)
	class.UID = "live"
	owned := map[string]string{v1.TagKeyOwner: testCluster}
	path := func(uid string) string { return launch.InstanceProfilePath(testRegion, testCluster, uid) }
	current := launch.InstanceProfileName(testCluster, testRegion, "live", class.Spec.Role)
	profiles := []launch.InstanceProfile{
		{Name: current, Path: path("live"), Created: t0.Add(-48 * time.Hour), Tags: owned},
		{Name: "gone", Path: path("deleted"), Created: t0.Add(-time.Hour), Roles: []string{"NodeRole"}, Tags: owned},
		{Name: "in-use", Path: path("deleted"), Created: t0.Add(-time.Hour), Tags: owned},
	}
	tests := []struct {
		name        string
		iam         *profileIAM
		wantDeleted []string
		wantErr     bool
	}{
		{name: "should delete a deleted class's profile no NodeClaim names", iam: &profileIAM{profiles: profiles}, wantDeleted: []string{"gone"}},
		{name: "should delete nothing when the list fails", iam: &profileIAM{listErr: errors.New("Throttling")}, wantErr: true},
		{name: "should report a failed deletion", iam: &profileIAM{profiles: profiles, deleteErr: errors.New("AccessDenied")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(nil, []v1.EC2NodeClass{class})
			claim := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", Annotations: map[string]string{v1.AnnotationInstanceProfileName: "in-use"}}}
			if _, err := e.store.CreateNodeClaim(t.Context(), claim); err != nil {
				t.Fatal(err)
			}
			c, err := provisioning.NewProfileCollector(testCluster, testRegion, tt.iam, e.config, e.store)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.CollectInstanceProfiles(t.Context(), t0)
			if (err != nil) != tt.wantErr {
				t.Fatalf("CollectInstanceProfiles() error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantDeleted, tt.iam.deleted); diff != "" {
				t.Errorf("deleted mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
