package provisioning_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

func TestPlanLaunchTemplateCleanup(t *testing.T) {
	ttl := provisioning.LaunchTemplateUnusedTTL
	marked := map[string]string{v1.TagKeyOwner: testCluster}
	old := launch.ClusterTemplate{ID: "lt-old", Name: "nodewright/old", NodeClass: "default", CreateTime: t0.Add(-time.Hour), Tags: marked}
	young := launch.ClusterTemplate{ID: "lt-young", Name: "nodewright/young", NodeClass: "default", CreateTime: t0.Add(-ttl + time.Second), Tags: marked}
	orphan := launch.ClusterTemplate{ID: "lt-gpu", Name: "nodewright/gpu", NodeClass: "gpu", CreateTime: t0.Add(-time.Second), Tags: marked}
	unmarked := func(lt launch.ClusterTemplate, tags map[string]string) launch.ClusterTemplate {
		lt.ID, lt.Name, lt.Tags = lt.ID+"-unmarked", lt.Name+"-unmarked", tags
		return lt
	}
	launchedFrom := func(lt string, ago time.Duration) launch.Instance {
		inst := launch.Instance{ID: "i-1", Tags: map[string]string{"aws:ec2launchtemplate:id": lt}}
		if ago >= 0 {
			inst.LaunchTime = t0.Add(-ago)
		}
		return inst
	}
	claim := func(class, providerID string, deleting bool) v1.NodeClaim {
		c := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Name: class}},
			Status: v1.NodeClaimStatus{ProviderID: providerID}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return c
	}
	tests := []struct {
		name      string
		templates []launch.ClusterTemplate
		classes   []string
		claims    []v1.NodeClaim
		instances []launch.Instance
		want      []string
	}{
		{
			name:      "should delete a template older than the TTL that nothing used",
			templates: []launch.ClusterTemplate{old, young},
			classes:   []string{"default"},
			want:      []string{"unused nodewright/old"},
		},
		{
			name:      "should keep a template an instance launched from within the TTL",
			templates: []launch.ClusterTemplate{old},
			classes:   []string{"default"},
			instances: []launch.Instance{launchedFrom("lt-old", ttl-time.Second)},
		},
		{
			name:      "should delete a template whose last launch is older than the TTL",
			templates: []launch.ClusterTemplate{old},
			classes:   []string{"default"},
			instances: []launch.Instance{launchedFrom("lt-old", ttl)},
			want:      []string{"unused nodewright/old"},
		},
		{
			name:      "should count an instance without a launch time as recent",
			templates: []launch.ClusterTemplate{old},
			classes:   []string{"default"},
			instances: []launch.Instance{launchedFrom("lt-old", -1)},
		},
		{
			name:      "should keep the class's templates while one of its NodeClaims is launching",
			templates: []launch.ClusterTemplate{old},
			classes:   []string{"default"},
			claims:    []v1.NodeClaim{claim("default", "", false)},
		},
		{
			name:      "should not let launched, deleting or other classes' NodeClaims protect a template",
			templates: []launch.ClusterTemplate{old},
			classes:   []string{"default", "gpu"},
			claims:    []v1.NodeClaim{claim("default", "aws:///us-east-1a/i-9", false), claim("default", "", true), claim("gpu", "", false)},
			want:      []string{"unused nodewright/old"},
		},
		{
			name:      "should delete every template of a class gone from the configuration, however young",
			templates: []launch.ClusterTemplate{old, orphan},
			classes:   []string{"default"},
			claims:    []v1.NodeClaim{claim("gpu", "", false)},
			instances: []launch.Instance{launchedFrom("lt-old", time.Minute), launchedFrom("lt-gpu", time.Second)},
			want:      []string{"nodeclass_deleted nodewright/gpu"},
		},
		{
			name: "should never delete a template without nodewright's ownership mark for the cluster, unused or orphaned",
			templates: []launch.ClusterTemplate{
				unmarked(old, nil), unmarked(orphan, map[string]string{v1.TagKeyNodePool: "default"}),
				unmarked(old, map[string]string{v1.TagKeyOwner: "other-cluster"}),
			},
			classes: []string{"default"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := provisioning.PlanLaunchTemplateCleanup(provisioning.TemplateGCInput{
				Now: t0, Cluster: testCluster, Templates: tt.templates, NodeClasses: tt.classes, NodeClaims: tt.claims, Instances: tt.instances,
			})
			var summary []string
			for _, c := range got {
				summary = append(summary, string(c.Reason)+" "+c.Name)
			}
			if diff := cmp.Diff(tt.want, summary); diff != "" {
				t.Errorf("PlanLaunchTemplateCleanup() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// templateEC2 lists and deletes launch templates.
type templateEC2 struct {
	templates []launch.ClusterTemplate
	deleted   []string
	listErr   error
	deleteErr error
}

func (e *templateEC2) ListLaunchTemplates(context.Context) ([]launch.ClusterTemplate, error) {
	if e.listErr != nil {
		return nil, e.listErr
	}
	var out []launch.ClusterTemplate
	for _, lt := range e.templates {
		if !slices.Contains(e.deleted, lt.ID) {
			out = append(out, lt)
		}
	}
	return out, nil
}

func (e *templateEC2) DeleteLaunchTemplate(_ context.Context, id string) error {
	if e.deleteErr != nil {
		return e.deleteErr
	}
	e.deleted = append(e.deleted, id)
	return nil
}

func TestCollectLaunchTemplates(t *testing.T) {
	lts := []launch.ClusterTemplate{
		{ID: "lt-1", Name: "nodewright/a", NodeClass: "default", CreateTime: t0.Add(-time.Hour), Tags: map[string]string{v1.TagKeyOwner: testCluster}},
		{ID: "lt-2", Name: "nodewright/b", NodeClass: "default", CreateTime: t0.Add(-time.Hour), Tags: map[string]string{v1.TagKeyOwner: testCluster}},
		{ID: "lt-3", Name: "nodewright/c", NodeClass: "default", CreateTime: t0, Tags: map[string]string{v1.TagKeyOwner: testCluster}},
	}
	tests := []struct {
		name        string
		ec2         *templateEC2
		instances   *gcEC2
		wantDeleted []string
		wantErr     bool
	}{
		{
			name:        "should delete the unused templates and keep the used and young ones",
			ec2:         &templateEC2{templates: lts},
			instances:   &gcEC2{instances: []launch.Instance{{ID: "i-1", LaunchTime: t0.Add(-time.Minute), Tags: map[string]string{"aws:ec2launchtemplate:id": "lt-2"}}}},
			wantDeleted: []string{"lt-1"},
		},
		{
			name:      "should delete nothing when a list fails",
			ec2:       &templateEC2{templates: lts},
			instances: &gcEC2{listErr: errors.New("throttled")},
			wantErr:   true,
		},
		{
			name:      "should report a failed deletion",
			ec2:       &templateEC2{templates: lts, deleteErr: errors.New("UnauthorizedOperation")},
			instances: &gcEC2{},
			wantErr:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(nil, []v1.EC2NodeClass{nodeClass(t)})
			c, err := provisioning.NewTemplateCollector(testCluster, tt.ec2, e.config, e.store, tt.instances)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.CollectLaunchTemplates(t.Context(), t0)
			if (err != nil) != tt.wantErr {
				t.Fatalf("CollectLaunchTemplates() error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantDeleted, tt.ec2.deleted); diff != "" {
				t.Errorf("deleted mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
