package ddbstore_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

// nodeClaim returns an unlaunched NodeClaim of NodePool "default" with
// deterministic fields, changed by opts.
func nodeClaim(name string, opts ...func(*v1.NodeClaim)) v1.NodeClaim {
	c := v1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: v1.KindNodeClaim},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			UID:               types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0),
			Labels:            map[string]string{v1.LabelNodePool: "default", v1.LabelEC2NodeClass: "default"},
			Finalizers:        []string{"karpenter.sh/termination"},
		},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{
				Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"},
			}},
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("1500m"),
				corev1.ResourceMemory: resource.MustParse("3Gi"),
				corev1.ResourcePods:   resource.MustParse("3"),
			}},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
		},
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func inPool(pool string) func(*v1.NodeClaim) {
	return func(c *v1.NodeClaim) { c.Labels[v1.LabelNodePool] = pool }
}

func launchedAs(providerID string) func(*v1.NodeClaim) {
	return func(c *v1.NodeClaim) { c.Status.ProviderID = providerID }
}

func withVersion(rv string) func(*v1.NodeClaim) {
	return func(c *v1.NodeClaim) { c.ResourceVersion = rv }
}

func mustPut(t *testing.T, s *ddbstore.Store, c v1.NodeClaim) v1.NodeClaim {
	t.Helper()
	got, err := s.PutNodeClaim(context.Background(), c)
	if err != nil {
		t.Fatalf("PutNodeClaim(%s) error = %v", c.Name, err)
	}
	return got
}

func names(claims []v1.NodeClaim) []string {
	out := []string{}
	for _, c := range claims {
		out = append(out, c.Name)
	}
	return out
}

func TestPutNodeClaim(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		claim v1.NodeClaim
	}{
		{name: "should store a new nodeclaim at resourceVersion 1", claim: nodeClaim("default-a")},
		{name: "should store a launched nodeclaim", claim: nodeClaim("default-b", launchedAs("aws:///us-east-1a/i-0abc"))},
		{name: "should store a nodeclaim without a nodepool label", claim: nodeClaim("orphan", func(c *v1.NodeClaim) { c.Labels = nil })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			got, err := s.PutNodeClaim(ctx, tt.claim)
			if err != nil {
				t.Fatalf("PutNodeClaim() error = %v", err)
			}
			want := tt.claim
			want.ResourceVersion = "1"
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("PutNodeClaim() mismatch (-want +got):\n%s", diff)
			}
			read, err := s.GetNodeClaim(ctx, tt.claim.Name)
			if err != nil {
				t.Fatalf("GetNodeClaim() error = %v", err)
			}
			if diff := cmp.Diff(want, read); diff != "" {
				t.Errorf("GetNodeClaim() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPutNodeClaimErrors(t *testing.T) {
	ctx := context.Background()
	huge := make([]string, 40000)
	for i := range huge {
		huge[i] = fmt.Sprintf("type-%05d.large", i)
	}
	tests := []struct {
		name     string
		existing []v1.NodeClaim
		claim    v1.NodeClaim
		want     error
	}{
		{
			name:     "should refuse to create a nodeclaim that already exists",
			existing: []v1.NodeClaim{nodeClaim("default-a")},
			claim:    nodeClaim("default-a", inPool("other")),
			want:     ddbstore.ErrAlreadyExists,
		},
		{name: "should refuse a resourceVersion on create", claim: nodeClaim("default-a", withVersion("3")), want: ddbstore.ErrInvalid},
		{name: "should refuse an empty name", claim: nodeClaim(""), want: ddbstore.ErrInvalid},
		{name: "should refuse a name containing the key separator", claim: nodeClaim("a#b"), want: ddbstore.ErrInvalid},
		{name: "should refuse a providerID that is not aws:///zone/instance", claim: nodeClaim("default-a", launchedAs("i-0abc")), want: ddbstore.ErrInvalid},
		{
			name: "should refuse a nodeclaim whose JSON exceeds the item bound",
			claim: nodeClaim("default-a", func(c *v1.NodeClaim) {
				c.Spec.Requirements[0].Values = huge
			}),
			want: ddbstore.ErrItemTooLarge,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			for _, c := range tt.existing {
				mustPut(t, s, c)
			}
			_, err := s.PutNodeClaim(ctx, tt.claim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("PutNodeClaim() error = %v, want %v", err, tt.want)
			}
			got, err := s.ListNodeClaims(ctx)
			if err != nil {
				t.Fatalf("ListNodeClaims() error = %v", err)
			}
			want := []v1.NodeClaim{}
			for _, c := range tt.existing {
				c.ResourceVersion = "1"
				want = append(want, c)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stored nodeclaims changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdateNodeClaim(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)
	created := mustPut(t, s, nodeClaim("default-a"))

	launched := created
	launched.Status.ProviderID = "aws:///us-east-1a/i-0abc"
	launched.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(t0)}}
	got, err := s.UpdateNodeClaim(ctx, launched)
	if err != nil {
		t.Fatalf("UpdateNodeClaim() error = %v", err)
	}
	want := launched
	want.ResourceVersion = "2"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UpdateNodeClaim() mismatch (-want +got):\n%s", diff)
	}
	read, err := s.GetNodeClaim(ctx, "default-a")
	if err != nil {
		t.Fatalf("GetNodeClaim() error = %v", err)
	}
	if diff := cmp.Diff(want, read); diff != "" {
		t.Errorf("GetNodeClaim() after update mismatch (-want +got):\n%s", diff)
	}
	found, err := s.FindByProviderID(ctx, "aws:///us-east-1a/i-0abc")
	if err != nil {
		t.Fatalf("FindByProviderID() after update error = %v", err)
	}
	if diff := cmp.Diff(want, found); diff != "" {
		t.Errorf("FindByProviderID() after update mismatch (-want +got):\n%s", diff)
	}
}

func TestUpdateNodeClaimErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// setup stores what the test needs and returns the claim to update.
		setup func(t *testing.T, s *ddbstore.Store) v1.NodeClaim
		// want is a sentinel error, or nil when wantConflict is set.
		want         error
		wantConflict *ddbstore.ConflictError
	}{
		{
			name: "should return a conflict when the nodeclaim changed since it was read",
			setup: func(t *testing.T, s *ddbstore.Store) v1.NodeClaim {
				v1c := mustPut(t, s, nodeClaim("default-a"))
				v2c := v1c
				v2c.Annotations = map[string]string{"a": "b"}
				if _, err := s.UpdateNodeClaim(ctx, v2c); err != nil {
					t.Fatalf("UpdateNodeClaim() error = %v", err)
				}
				v1c.Annotations = map[string]string{"stale": "write"}
				return v1c
			},
			wantConflict: &ddbstore.ConflictError{Kind: "NodeClaim", Name: "default-a", Version: 1},
		},
		{
			name: "should return a conflict when the name was deleted and created again with another UID",
			setup: func(t *testing.T, s *ddbstore.Store) v1.NodeClaim {
				old := mustPut(t, s, nodeClaim("default-a"))
				if err := s.DeleteNodeClaim(ctx, old); err != nil {
					t.Fatalf("DeleteNodeClaim() error = %v", err)
				}
				mustPut(t, s, nodeClaim("default-a", func(c *v1.NodeClaim) { c.UID = "uid-second" }))
				return old
			},
			wantConflict: &ddbstore.ConflictError{Kind: "NodeClaim", Name: "default-a", Version: 1},
		},
		{
			name: "should return not found when the nodeclaim was deleted",
			setup: func(t *testing.T, s *ddbstore.Store) v1.NodeClaim {
				c := mustPut(t, s, nodeClaim("default-a"))
				if err := s.DeleteNodeClaim(ctx, c); err != nil {
					t.Fatalf("DeleteNodeClaim() error = %v", err)
				}
				return c
			},
			want: ddbstore.ErrNotFound,
		},
		{
			name: "should refuse an empty resourceVersion",
			setup: func(t *testing.T, s *ddbstore.Store) v1.NodeClaim {
				mustPut(t, s, nodeClaim("default-a"))
				return nodeClaim("default-a")
			},
			want: ddbstore.ErrInvalid,
		},
		{
			name: "should refuse a resourceVersion that is not a positive integer",
			setup: func(t *testing.T, s *ddbstore.Store) v1.NodeClaim {
				mustPut(t, s, nodeClaim("default-a"))
				return nodeClaim("default-a", withVersion("0"))
			},
			want: ddbstore.ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			claim := tt.setup(t, s)
			before, _ := s.ListNodeClaims(ctx)
			_, err := s.UpdateNodeClaim(ctx, claim)
			if tt.wantConflict != nil {
				var ce *ddbstore.ConflictError
				if !errors.As(err, &ce) {
					t.Fatalf("UpdateNodeClaim() error = %v, want a *ConflictError", err)
				}
				if diff := cmp.Diff(tt.wantConflict, ce); diff != "" {
					t.Errorf("ConflictError mismatch (-want +got):\n%s", diff)
				}
			} else if !errors.Is(err, tt.want) {
				t.Fatalf("UpdateNodeClaim() error = %v, want %v", err, tt.want)
			}
			after, _ := s.ListNodeClaims(ctx)
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("a failed update changed the store (-before +after):\n%s", diff)
			}
		})
	}
}

func TestDeleteNodeClaim(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)
	c := mustPut(t, s, nodeClaim("default-a", launchedAs("aws:///us-east-1a/i-0abc")))
	keep := mustPut(t, s, nodeClaim("default-b"))
	if err := s.DeleteNodeClaim(ctx, c); err != nil {
		t.Fatalf("DeleteNodeClaim() error = %v", err)
	}
	if _, err := s.GetNodeClaim(ctx, "default-a"); !errors.Is(err, ddbstore.ErrNotFound) {
		t.Errorf("GetNodeClaim() after delete error = %v, want ErrNotFound", err)
	}
	if _, err := s.FindByInstanceID(ctx, "i-0abc"); !errors.Is(err, ddbstore.ErrNotFound) {
		t.Errorf("FindByInstanceID() after delete error = %v, want ErrNotFound", err)
	}
	got, err := s.ListNodeClaims(ctx)
	if err != nil {
		t.Fatalf("ListNodeClaims() error = %v", err)
	}
	if diff := cmp.Diff([]v1.NodeClaim{keep}, got); diff != "" {
		t.Errorf("ListNodeClaims() after delete mismatch (-want +got):\n%s", diff)
	}
}

func TestDeleteNodeClaimErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name         string
		setup        func(t *testing.T, s *ddbstore.Store) v1.NodeClaim
		want         error
		wantConflict bool
		wantStored   []string
	}{
		{
			name: "should return a conflict when the nodeclaim changed since it was read",
			setup: func(t *testing.T, s *ddbstore.Store) v1.NodeClaim {
				c := mustPut(t, s, nodeClaim("default-a"))
				if _, err := s.UpdateNodeClaim(ctx, c); err != nil {
					t.Fatalf("UpdateNodeClaim() error = %v", err)
				}
				return c
			},
			wantConflict: true,
			wantStored:   []string{"default-a"},
		},
		{
			name: "should return not found when the nodeclaim is already gone",
			setup: func(t *testing.T, s *ddbstore.Store) v1.NodeClaim {
				return nodeClaim("default-a", withVersion("1"))
			},
			want:       ddbstore.ErrNotFound,
			wantStored: []string{},
		},
		{
			name: "should refuse an empty resourceVersion",
			setup: func(t *testing.T, s *ddbstore.Store) v1.NodeClaim {
				mustPut(t, s, nodeClaim("default-a"))
				return nodeClaim("default-a")
			},
			want:       ddbstore.ErrInvalid,
			wantStored: []string{"default-a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			claim := tt.setup(t, s)
			err := s.DeleteNodeClaim(ctx, claim)
			var ce *ddbstore.ConflictError
			switch {
			case tt.wantConflict && !errors.As(err, &ce):
				t.Fatalf("DeleteNodeClaim() error = %v, want a *ConflictError", err)
			case !tt.wantConflict && !errors.Is(err, tt.want):
				t.Fatalf("DeleteNodeClaim() error = %v, want %v", err, tt.want)
			}
			got, err := s.ListNodeClaims(ctx)
			if err != nil {
				t.Fatalf("ListNodeClaims() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantStored, names(got)); diff != "" {
				t.Errorf("stored nodeclaims (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListNodeClaims(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	paging := &pagingAPI{API: e.client, limit: 2}
	s := e.storeWith(t, paging, testCluster)
	other := e.store(t, "other-cluster")
	for _, n := range []string{"e", "b", "d", "a", "c"} {
		mustPut(t, s, nodeClaim("default-"+n))
	}
	mustPut(t, other, nodeClaim("default-z"))

	paging.queries = 0
	got, err := s.ListNodeClaims(ctx)
	if err != nil {
		t.Fatalf("ListNodeClaims() error = %v", err)
	}
	want := []string{"default-a", "default-b", "default-c", "default-d", "default-e"}
	if diff := cmp.Diff(want, names(got)); diff != "" {
		t.Errorf("ListNodeClaims() names mismatch (-want +got):\n%s", diff)
	}
	if paging.queries < 3 {
		t.Errorf("ListNodeClaims() made %d queries with a page size of 2, want at least 3 (it must follow LastEvaluatedKey)", paging.queries)
	}
	for _, c := range got {
		if c.ResourceVersion != "1" {
			t.Errorf("ListNodeClaims() %s resourceVersion = %q, want \"1\"", c.Name, c.ResourceVersion)
		}
	}
}

// incompressible is n bytes of base64 that gzip cannot shrink much (about
// 3/4 of n compressed), the same for the same seed.
func incompressible(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return base64.StdEncoding.EncodeToString(b)[:n]
}

// TestListNodeClaimsPage lists more NodeClaims than one DynamoDB page holds:
// 160 claims of about 9 KB (compressed) make 1.4 MB, past the 1 MB a Query answers with
// (kumo does not cut answers at 1 MB; awstest.DynamoDBPages does, as
// DynamoDB does).
func TestListNodeClaimsPage(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	counting := &pagingAPI{API: e.client}
	s := e.storeWith(t, dynamoPages(counting), testCluster)
	var want []string
	for i := range 160 {
		name := fmt.Sprintf("default-%03d", i)
		want = append(want, name)
		mustPut(t, s, nodeClaim(name, func(c *v1.NodeClaim) {
			c.Annotations = map[string]string{"example.com/padding": incompressible(uint64(i), 12000)}
		}))
	}
	mustPut(t, e.store(t, "other-cluster"), nodeClaim("default-000"))

	t.Run("should follow DynamoDB's 1 MB pages up to the limit", func(t *testing.T) {
		counting.queries = 0
		got, more, err := s.ListNodeClaimsPage(ctx, "", 1000)
		if err != nil {
			t.Fatalf("ListNodeClaimsPage() error = %v", err)
		}
		if diff := cmp.Diff(want, names(got)); diff != "" || more {
			t.Errorf("ListNodeClaimsPage() more = %v, names mismatch (-want +got):\n%s", more, diff)
		}
		if counting.queries < 2 {
			t.Errorf("made %d queries for 1.4 MB, want at least 2 (DynamoDB answers at most 1 MB a query)", counting.queries)
		}
	})
	t.Run("should return every NodeClaim exactly once across pages, in name order", func(t *testing.T) {
		var got []string
		var sizes []int
		after := ""
		for range 10 {
			page, more, err := s.ListNodeClaimsPage(ctx, after, 50)
			if err != nil {
				t.Fatalf("ListNodeClaimsPage(%q) error = %v", after, err)
			}
			sizes = append(sizes, len(page))
			got = append(got, names(page)...)
			if !more {
				break
			}
			after = page[len(page)-1].Name
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("paged names mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{50, 50, 50, 10}, sizes); diff != "" {
			t.Errorf("page sizes mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should refuse a limit that is not positive", func(t *testing.T) {
		if _, _, err := s.ListNodeClaimsPage(ctx, "", 0); !errors.Is(err, ddbstore.ErrInvalid) {
			t.Errorf("ListNodeClaimsPage(limit 0) error = %v, want ErrInvalid", err)
		}
	})
}

func TestListNodeClaimsByNodePool(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.storeWith(t, &pagingAPI{API: e.client, limit: 1}, testCluster)
	other := e.store(t, "other-cluster")
	mustPut(t, s, nodeClaim("gpu-b", inPool("gpu")))
	mustPut(t, s, nodeClaim("gpu-a", inPool("gpu")))
	mustPut(t, s, nodeClaim("default-a"))
	mustPut(t, s, nodeClaim("unlabelled", func(c *v1.NodeClaim) { delete(c.Labels, v1.LabelNodePool) }))
	mustPut(t, other, nodeClaim("gpu-c", inPool("gpu")))

	tests := []struct {
		name string
		pool string
		want []string
	}{
		{name: "should list only the nodeclaims of the nodepool in this cluster, by name", pool: "gpu", want: []string{"gpu-a", "gpu-b"}},
		{name: "should list the default nodepool", pool: "default", want: []string{"default-a"}},
		{name: "should list nothing for a nodepool without nodeclaims", pool: "empty", want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListNodeClaimsByNodePool(ctx, tt.pool)
			if err != nil {
				t.Fatalf("ListNodeClaimsByNodePool(%s) error = %v", tt.pool, err)
			}
			if diff := cmp.Diff(tt.want, names(got)); diff != "" {
				t.Errorf("ListNodeClaimsByNodePool(%s) mismatch (-want +got):\n%s", tt.pool, diff)
			}
		})
	}
}

func TestFindNodeClaim(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, testCluster)
	a := mustPut(t, s, nodeClaim("default-a", launchedAs("aws:///us-east-1a/i-0aaa")))
	b := mustPut(t, s, nodeClaim("default-b", launchedAs("aws:///us-east-1b/i-0bbb")))
	mustPut(t, s, nodeClaim("default-c"))
	mustPut(t, e.store(t, "other-cluster"), nodeClaim("default-x", launchedAs("aws:///us-east-1a/i-0xxx")))

	tests := []struct {
		name string
		find func() (v1.NodeClaim, error)
		want v1.NodeClaim
	}{
		{name: "should find a nodeclaim by instance id", find: func() (v1.NodeClaim, error) { return s.FindByInstanceID(ctx, "i-0bbb") }, want: b},
		{name: "should find a nodeclaim by providerID", find: func() (v1.NodeClaim, error) { return s.FindByProviderID(ctx, "aws:///us-east-1a/i-0aaa") }, want: a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.find()
			if err != nil {
				t.Fatalf("find error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("find mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindNodeClaimErrors(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, testCluster)
	mustPut(t, s, nodeClaim("default-a", launchedAs("aws:///us-east-1a/i-0aaa")))
	mustPut(t, s, nodeClaim("dup-1", launchedAs("aws:///us-east-1a/i-0dup")))
	mustPut(t, s, nodeClaim("dup-2", launchedAs("aws:///us-east-1a/i-0dup")))
	mustPut(t, e.store(t, "other-cluster"), nodeClaim("default-x", launchedAs("aws:///us-east-1a/i-0xxx")))

	tests := []struct {
		name    string
		find    func() (v1.NodeClaim, error)
		want    error // nil: any error that is not ErrNotFound
		message string
	}{
		{name: "should not find an unknown instance", find: func() (v1.NodeClaim, error) { return s.FindByInstanceID(ctx, "i-0zzz") }, want: ddbstore.ErrNotFound},
		{name: "should not find another cluster's instance", find: func() (v1.NodeClaim, error) { return s.FindByInstanceID(ctx, "i-0xxx") }, want: ddbstore.ErrNotFound},
		{name: "should not find a providerID whose zone differs", find: func() (v1.NodeClaim, error) { return s.FindByProviderID(ctx, "aws:///us-east-1c/i-0aaa") }, want: ddbstore.ErrNotFound},
		{name: "should refuse a providerID that is not AWS's", find: func() (v1.NodeClaim, error) { return s.FindByProviderID(ctx, "kwok://node-1") }, want: ddbstore.ErrInvalid},
		{name: "should report two nodeclaims claiming one instance", find: func() (v1.NodeClaim, error) { return s.FindByInstanceID(ctx, "i-0dup") }, message: "dup-1, dup-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.find()
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Errorf("find error = %v, want %v", err, tt.want)
				}
				return
			}
			if err == nil || errors.Is(err, ddbstore.ErrNotFound) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("find error = %v, want an error naming %q", err, tt.message)
			}
		})
	}
}

func TestInstanceIDFromProviderID(t *testing.T) {
	tests := []struct {
		providerID string
		want       string
	}{
		{providerID: "aws:///us-east-1a/i-0123456789abcdef0", want: "i-0123456789abcdef0"},
		{providerID: "aws:///eu-west-3c/i-1", want: "i-1"},
	}
	for _, tt := range tests {
		t.Run("should parse "+tt.providerID, func(t *testing.T) {
			got, err := ddbstore.InstanceIDFromProviderID(tt.providerID)
			if err != nil {
				t.Fatalf("InstanceIDFromProviderID() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("InstanceIDFromProviderID() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestInstanceIDFromProviderIDErrors(t *testing.T) {
	for _, pid := range []string{"", "i-0123", "aws://us-east-1a/i-0123", "aws:///i-0123", "aws:///us-east-1a/", "aws:///us-east-1a/vol-1", "aws:///us-east-1a/i-1/x", "gce:///z/i-1"} {
		t.Run(fmt.Sprintf("should refuse %q", pid), func(t *testing.T) {
			if _, err := ddbstore.InstanceIDFromProviderID(pid); !errors.Is(err, ddbstore.ErrInvalid) {
				t.Errorf("InstanceIDFromProviderID(%q) error = %v, want ErrInvalid", pid, err)
			}
		})
	}
}

// A NodeClaim's body is stored compressed (DynamoDB bills a list of the
// claims by their items' sizes), and a claim stored before bodies were
// compressed (its JSON as a string) still reads and updates.
func TestNodeClaimBodyCompressed(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, testCluster)
	claim := nodeClaim("default-a", launchedAs("aws:///us-east-1a/i-0123456789abcdef0"), func(c *v1.NodeClaim) {
		c.Status.Conditions = []metav1.Condition{
			{Type: "Launched", Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(t0)},
			{Type: "Registered", Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.NewTime(t0)},
			{Type: "Initialized", Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(t0)},
		}
	})
	mustPut(t, s, claim)
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: testCluster + "#NODECLAIM"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "default-a"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	body, ok := out.Item["body"].(*ddbtypes.AttributeValueMemberB)
	if !ok {
		t.Fatalf("stored body is %T, want binary (gzip)", out.Item["body"])
	}
	raw, _ := json.Marshal(claim)
	if len(body.Value)*2 > len(raw) {
		t.Errorf("stored body = %d bytes for %d bytes of JSON, want at most half", len(body.Value), len(raw))
	}

	// The earlier form: the JSON as a string, version 3.
	legacy := nodeClaim("default-b")
	legacyJSON, _ := json.Marshal(legacy)
	if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: testCluster + "#NODECLAIM"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "default-b"},
		"kind": &ddbtypes.AttributeValueMemberS{Value: "NodeClaim"}, "version": &ddbtypes.AttributeValueMemberN{Value: "3"},
		"body": &ddbtypes.AttributeValueMemberS{Value: string(legacyJSON)}, "uid": &ddbtypes.AttributeValueMemberS{Value: string(legacy.UID)},
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListNodeClaims(ctx)
	if err != nil {
		t.Fatalf("ListNodeClaims() error = %v", err)
	}
	claim.ResourceVersion, legacy.ResourceVersion = "1", "3"
	if diff := cmp.Diff([]v1.NodeClaim{claim, legacy}, got); diff != "" {
		t.Errorf("ListNodeClaims() mismatch (-want +got):\n%s", diff)
	}
	legacy.Labels["example.com/updated"] = "yes"
	updated, err := s.UpdateNodeClaim(ctx, legacy)
	if err != nil {
		t.Fatalf("UpdateNodeClaim() of a string body error = %v", err)
	}
	if read, err := s.GetNodeClaim(ctx, "default-b"); err != nil || read.Labels["example.com/updated"] != "yes" || read.ResourceVersion != "4" || updated.ResourceVersion != "4" {
		t.Errorf("GetNodeClaim() after update = %v (rv %s), %v; want the label and resourceVersion 4", read.Labels, read.ResourceVersion, err)
	}
}
