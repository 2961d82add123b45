package ddbstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func classStatus(name string, gen int64, subnet string) v1.NodeClassStatus {
	return v1.NodeClassStatus{
		Name: name, Generation: gen, UID: types.UID("uid-" + name), ChangedAt: metav1.NewTime(t0),
		Status: v1.EC2NodeClassStatus{
			Subnets:    []v1.Subnet{{ID: subnet, Zone: "us-west-2a"}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}},
		},
	}
}

func TestNodeClassStatus(t *testing.T) {
	ctx := context.Background()
	later := func(r v1.NodeClassStatus) v1.NodeClassStatus {
		r.ChangedAt = metav1.NewTime(t0.Add(time.Minute))
		return r
	}
	tests := []struct {
		name        string
		puts        []v1.NodeClassStatus
		wantChanged []bool
		// wantPuts counts the PutItem calls: none for a resolution
		// stored already.
		wantPuts int
		want     []v1.NodeClassStatus
	}{
		{
			name:        "should list what was put, sorted by name",
			puts:        []v1.NodeClassStatus{classStatus("b", 1, "subnet-1"), classStatus("a", 1, "subnet-1")},
			wantChanged: []bool{true, true},
			wantPuts:    2,
			want:        []v1.NodeClassStatus{classStatus("a", 1, "subnet-1"), classStatus("b", 1, "subnet-1")},
		},
		{
			name:        "should not write the same resolution again, whatever its ChangedAt",
			puts:        []v1.NodeClassStatus{classStatus("a", 1, "subnet-1"), later(classStatus("a", 1, "subnet-1")), later(classStatus("a", 1, "subnet-1"))},
			wantChanged: []bool{true, false, false},
			wantPuts:    1,
			want:        []v1.NodeClassStatus{classStatus("a", 1, "subnet-1")},
		},
		{
			name:        "should replace a resolution whose status or generation changed",
			puts:        []v1.NodeClassStatus{classStatus("a", 1, "subnet-1"), later(classStatus("a", 1, "subnet-2")), later(classStatus("a", 2, "subnet-2"))},
			wantChanged: []bool{true, true, true},
			wantPuts:    3,
			want:        []v1.NodeClassStatus{later(classStatus("a", 2, "subnet-2"))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			api := &countingAPI{API: e.client}
			s := e.storeWith(t, api, testCluster)
			var changed []bool
			for _, p := range tt.puts {
				c, err := s.PutNodeClassStatus(ctx, p)
				if err != nil {
					t.Fatalf("PutNodeClassStatus(%s) error = %v", p.Name, err)
				}
				changed = append(changed, c)
			}
			if diff := cmp.Diff(tt.wantChanged, changed); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
			if api.puts != tt.wantPuts {
				t.Errorf("PutItem calls = %d, want %d", api.puts, tt.wantPuts)
			}
			got, err := s.ListNodeClassStatuses(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListNodeClassStatuses (-want +got):\n%s", diff)
			}
			if other, err := e.store(t, "other-cluster").ListNodeClassStatuses(ctx); err != nil || len(other) != 0 {
				t.Errorf("another cluster's ListNodeClassStatuses() = %v, %v; want nothing", other, err)
			}
		})
	}
	t.Run("should reject a name with the key separator", func(t *testing.T) {
		e := newEnv(t)
		s := e.store(t, testCluster)
		if _, err := s.PutNodeClassStatus(ctx, classStatus("a#b", 1, "subnet-1")); !errors.Is(err, ddbstore.ErrInvalid) {
			t.Errorf("PutNodeClassStatus(a#b) error = %v; want ErrInvalid", err)
		}
	})
}
