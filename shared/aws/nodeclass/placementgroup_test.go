package nodeclass_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
)

// placementGroups is network with three groups: an available partition
// group, an available cluster group and a pending one.
func placementGroups(t *testing.T) *awstest.EC2 {
	e := network(t)
	e.AddPlacementGroup(ec2types.PlacementGroup{GroupId: aws.String("pg-0a1"), GroupName: aws.String("kafka"), Strategy: ec2types.PlacementStrategyPartition, PartitionCount: aws.Int32(3)})
	e.AddPlacementGroup(ec2types.PlacementGroup{GroupId: aws.String("pg-0b2"), GroupName: aws.String("training"), Strategy: ec2types.PlacementStrategyCluster})
	e.AddPlacementGroup(ec2types.PlacementGroup{GroupId: aws.String("pg-0c3"), GroupName: aws.String("new"), Strategy: ec2types.PlacementStrategySpread,
		SpreadLevel: ec2types.SpreadLevelRack, State: ec2types.PlacementGroupStatePending})
	return e
}

func pgClass(sel v1.PlacementGroupSelector) *v1.EC2NodeClass {
	return &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "pg"}, Spec: v1.EC2NodeClassSpec{PlacementGroupSelector: &sel}}
}

func TestPlacementGroup(t *testing.T) {
	tests := []struct {
		name      string
		give      v1.PlacementGroupSelector
		want      *v1.PlacementGroup
		wantInput *ec2.DescribePlacementGroupsInput
	}{
		{name: "should resolve a group by id with GroupIds and the state filter", give: v1.PlacementGroupSelector{ID: "pg-0a1"},
			want:      &v1.PlacementGroup{ID: "pg-0a1", Name: "kafka", Strategy: "partition", PartitionCount: 3},
			wantInput: &ec2.DescribePlacementGroupsInput{GroupIds: []string{"pg-0a1"}, Filters: []ec2types.Filter{filter("state", "available")}}},
		{name: "should resolve a group by name with the group-name filter", give: v1.PlacementGroupSelector{Name: "training"},
			want:      &v1.PlacementGroup{ID: "pg-0b2", Name: "training", Strategy: "cluster"},
			wantInput: &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{filter("state", "available"), filter("group-name", "training")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := placementGroups(t)
			got, err := nodeclass.New(e, nil, clock).PlacementGroup(t.Context(), pgClass(tt.give))
			if err != nil {
				t.Fatalf("PlacementGroup() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlacementGroup() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]*ec2.DescribePlacementGroupsInput{tt.wantInput}, e.On.DescribePlacementGroups.Inputs(), sdkOpts); diff != "" {
				t.Errorf("DescribePlacementGroups inputs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlacementGroupErrors(t *testing.T) {
	tests := []struct {
		name string
		give v1.PlacementGroupSelector
		want string
	}{
		{name: "should not find an unknown id (EC2 fails it with InvalidPlacementGroup.Unknown)", give: v1.PlacementGroupSelector{ID: "pg-0ff"},
			want: `node class pg: no available placement group found for spec.placementGroupSelector (id "pg-0ff")`},
		{name: "should not find an unknown name", give: v1.PlacementGroupSelector{Name: "missing"},
			want: `node class pg: no available placement group found for spec.placementGroupSelector (name "missing")`},
		{name: "should not find a group that is not available yet", give: v1.PlacementGroupSelector{Name: "new"},
			want: `node class pg: no available placement group found for spec.placementGroupSelector (name "new")`},
		{name: "should not find a pending group by id", give: v1.PlacementGroupSelector{ID: "pg-0c3"},
			want: `node class pg: no available placement group found for spec.placementGroupSelector (id "pg-0c3")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nodeclass.New(placementGroups(t), nil, clock).PlacementGroup(t.Context(), pgClass(tt.give))
			if !errors.Is(err, nodeclass.ErrPlacementGroupNotFound) || err.Error() != tt.want || got != nil {
				t.Fatalf("PlacementGroup() = %+v, %v; want nil, %q (ErrPlacementGroupNotFound)", got, err, tt.want)
			}
		})
	}
	t.Run("should wrap a failed call, not call it not found", func(t *testing.T) {
		e := placementGroups(t)
		e.On.DescribePlacementGroups.Push(nil, awstest.APIError("RequestLimitExceeded", "slow down"))
		_, err := nodeclass.New(e, nil, clock).PlacementGroup(t.Context(), pgClass(v1.PlacementGroupSelector{Name: "training"}))
		if err == nil || errors.Is(err, nodeclass.ErrPlacementGroupNotFound) {
			t.Fatalf("PlacementGroup() error = %v; want the call's failure", err)
		}
	})
}

func TestPlacementGroupWithoutSelectorCallsNothing(t *testing.T) {
	e := placementGroups(t)
	got, err := nodeclass.New(e, nil, clock).PlacementGroup(t.Context(), &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}})
	if got != nil || err != nil || len(e.On.DescribePlacementGroups.Inputs()) != 0 {
		t.Fatalf("PlacementGroup() = %+v, %v after %d calls; want nil, nil and no call", got, err, len(e.On.DescribePlacementGroups.Inputs()))
	}
}

func TestPlacementGroupIsReadAgainOnceAMinuteOld(t *testing.T) {
	e := placementGroups(t)
	at := now
	r := nodeclass.New(e, nil, func() time.Time { return at })
	nc := pgClass(v1.PlacementGroupSelector{Name: "missing"})
	for _, step := range []struct {
		after time.Duration
		calls int
	}{{0, 1}, {59 * time.Second, 1}, {time.Minute, 2}} {
		at = now.Add(step.after)
		if _, err := r.PlacementGroup(t.Context(), nc); !errors.Is(err, nodeclass.ErrPlacementGroupNotFound) {
			t.Fatalf("PlacementGroup() at +%s error = %v; want not found", step.after, err)
		}
		if got := len(e.On.DescribePlacementGroups.Inputs()); got != step.calls {
			t.Errorf("DescribePlacementGroups calls at +%s = %d; want %d", step.after, got, step.calls)
		}
	}
	e.AddPlacementGroup(ec2types.PlacementGroup{GroupId: aws.String("pg-0d4"), GroupName: aws.String("missing"), Strategy: ec2types.PlacementStrategyCluster})
	at = now.Add(2 * time.Minute)
	if got, err := r.PlacementGroup(t.Context(), nc); err != nil || got == nil || got.ID != "pg-0d4" {
		t.Fatalf("PlacementGroup() after the group appeared = %+v, %v; want pg-0d4", got, err)
	}
}
