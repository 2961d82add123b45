package ddbstore_test

import (
	"context"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func nodePool(name string) v1.NodePool {
	return v1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: v1.KindNodePool},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{
				Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"},
			}},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
		}}},
	}
}

func nodeClass(name string) v1.EC2NodeClass {
	return v1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: v1.KindEC2NodeClass},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.EC2NodeClassSpec{
			Role:                "KarpenterNodeRole-test",
			AMISelectorTerms:    []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms: []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		},
	}
}

func TestPutConfig(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)

	first, err := s.PutConfig(ctx, ddbstore.Config{
		NodePools:   []v1.NodePool{nodePool("b"), nodePool("a")},
		NodeClasses: []v1.EC2NodeClass{nodeClass("default")},
	}, 0)
	if err != nil {
		t.Fatalf("PutConfig(first) error = %v", err)
	}
	wantFirst := ddbstore.Config{
		NodePools:   []v1.NodePool{nodePool("a"), nodePool("b")},
		NodeClasses: []v1.EC2NodeClass{nodeClass("default")},
	}
	if diff := cmp.Diff(wantFirst, first.Config); diff != "" {
		t.Errorf("PutConfig(first) config mismatch, want it sorted by name (-want +got):\n%s", diff)
	}
	if first.Version != 1 || len(first.Hash) != 64 {
		t.Errorf("PutConfig(first) version, hash = %d, %q, want 1 and a SHA-256", first.Version, first.Hash)
	}

	tests := []struct {
		name        string
		cfg         ddbstore.Config
		expected    int64
		wantVersion int64
	}{
		{
			name:        "should return the stored snapshot without writing when the content is unchanged",
			cfg:         ddbstore.Config{NodePools: []v1.NodePool{nodePool("a"), nodePool("b")}, NodeClasses: []v1.EC2NodeClass{nodeClass("default")}},
			expected:    1,
			wantVersion: 1,
		},
		{
			name:        "should treat a reordered set as unchanged",
			cfg:         ddbstore.Config{NodePools: []v1.NodePool{nodePool("b"), nodePool("a")}, NodeClasses: []v1.EC2NodeClass{nodeClass("default")}},
			expected:    0,
			wantVersion: 1,
		},
		{
			name:        "should replace the whole set at the next version",
			cfg:         ddbstore.Config{NodePools: []v1.NodePool{nodePool("c")}, NodeClasses: []v1.EC2NodeClass{nodeClass("default"), nodeClass("gpu")}},
			expected:    1,
			wantVersion: 2,
		},
		{
			name:        "should store an empty set",
			cfg:         ddbstore.Config{},
			expected:    2,
			wantVersion: 3,
		},
	}
	// The cases run in order against one store: each builds on the last.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.PutConfig(ctx, tt.cfg, tt.expected)
			if err != nil {
				t.Fatalf("PutConfig() error = %v", err)
			}
			read, err := s.GetConfig(ctx)
			if err != nil {
				t.Fatalf("GetConfig() error = %v", err)
			}
			if diff := cmp.Diff(got, read); diff != "" {
				t.Errorf("GetConfig() differs from what PutConfig() returned (-put +get):\n%s", diff)
			}
			if read.Version != tt.wantVersion {
				t.Errorf("GetConfig().Version = %d, want %d", read.Version, tt.wantVersion)
			}
		})
	}
}

func TestPutConfigErrors(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 600*1024)
	for i := range noise {
		noise[i] = byte(rng.UintN(256))
	}
	incompressible := nodeClass("big")
	incompressible.Spec.UserData = new(base64.StdEncoding.EncodeToString(noise))

	stored := ddbstore.Config{NodePools: []v1.NodePool{nodePool("a")}, NodeClasses: []v1.EC2NodeClass{nodeClass("default")}}
	tests := []struct {
		name         string
		cfg          ddbstore.Config
		expected     int64
		want         error
		wantConflict bool
	}{
		{name: "should refuse to create when a snapshot exists", cfg: ddbstore.Config{NodePools: []v1.NodePool{nodePool("x")}}, expected: 0, wantConflict: true},
		{name: "should refuse a stale version", cfg: ddbstore.Config{NodePools: []v1.NodePool{nodePool("x")}}, expected: 7, wantConflict: true},
		{name: "should refuse two nodepools of one name", cfg: ddbstore.Config{NodePools: []v1.NodePool{nodePool("x"), nodePool("x")}}, expected: 1, want: ddbstore.ErrInvalid},
		{name: "should refuse two nodeclasses of one name", cfg: ddbstore.Config{NodeClasses: []v1.EC2NodeClass{nodeClass("x"), nodeClass("x")}}, expected: 1, want: ddbstore.ErrInvalid},
		{name: "should refuse a nodepool without a name", cfg: ddbstore.Config{NodePools: []v1.NodePool{nodePool("")}}, expected: 1, want: ddbstore.ErrInvalid},
		{name: "should refuse a negative version", cfg: ddbstore.Config{}, expected: -1, want: ddbstore.ErrInvalid},
		{name: "should refuse a snapshot whose compressed form exceeds the item bound", cfg: ddbstore.Config{NodeClasses: []v1.EC2NodeClass{incompressible}}, expected: 1, want: ddbstore.ErrItemTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			before, err := s.PutConfig(ctx, stored, 0)
			if err != nil {
				t.Fatalf("PutConfig(setup) error = %v", err)
			}
			_, err = s.PutConfig(ctx, tt.cfg, tt.expected)
			var ce *ddbstore.ConflictError
			switch {
			case tt.wantConflict && !errors.As(err, &ce):
				t.Fatalf("PutConfig() error = %v, want a *ConflictError", err)
			case !tt.wantConflict && !errors.Is(err, tt.want):
				t.Fatalf("PutConfig() error = %v, want %v", err, tt.want)
			}
			after, err := s.GetConfig(ctx)
			if err != nil {
				t.Fatalf("GetConfig() error = %v", err)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("a refused PutConfig() changed the snapshot (-before +after):\n%s", diff)
			}
		})
	}
}

func TestGetConfigErrors(t *testing.T) {
	s := newEnv(t).store(t, testCluster)
	if _, err := s.GetConfig(context.Background()); !errors.Is(err, ddbstore.ErrNotFound) {
		t.Errorf("GetConfig() on an empty table error = %v, want ErrNotFound", err)
	}
}

// TestPutConfigKeepsTheNewest: the wire contract keeps the newest config
// (v1.ClusterConfig.CreatedAt, then Generation), so an older config arriving
// late, even with the current version in hand, never replaces a newer one.
func TestPutConfigKeepsTheNewest(t *testing.T) {
	ctx := context.Background()
	withPool := ddbstore.Config{NodePools: []v1.NodePool{nodePool("a"), nodePool("gone")}, CreatedAt: t0, Generation: 1}
	without := ddbstore.Config{NodePools: []v1.NodePool{nodePool("a")}, CreatedAt: t0.Add(time.Second), Generation: 2}
	pools := func(c ddbstore.ConfigSnapshot) []string {
		var out []string
		for _, np := range c.NodePools {
			out = append(out, np.Name)
		}
		return out
	}
	t.Run("should not let an older config bring back a NodePool deleted since", func(t *testing.T) {
		s := newEnv(t).store(t, testCluster)
		if _, err := s.PutConfig(ctx, without, 0); err != nil {
			t.Fatal(err)
		}
		cur, err := s.PutConfig(ctx, withPool, 1)
		if !errors.Is(err, ddbstore.ErrSuperseded) {
			t.Fatalf("PutConfig(older) error = %v, want ErrSuperseded", err)
		}
		got, err := s.GetConfig(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a"}, pools(got)); diff != "" || got.Version != 1 || cur.Version != 1 {
			t.Errorf("stored config version %d pools %v after the older put, want version 1 and [a]", got.Version, pools(got))
		}
		if !got.CreatedAt.Equal(without.CreatedAt) || got.Generation != 2 {
			t.Errorf("stored order = %v/%d, want %v/2", got.CreatedAt, got.Generation, without.CreatedAt)
		}
	})
	t.Run("should order configs of the same millisecond by generation", func(t *testing.T) {
		s := newEnv(t).store(t, testCluster)
		later := withPool
		later.Generation = 5
		if _, err := s.PutConfig(ctx, later, 0); err != nil {
			t.Fatal(err)
		}
		earlier := ddbstore.Config{NodePools: []v1.NodePool{nodePool("a")}, CreatedAt: t0, Generation: 4}
		if _, err := s.PutConfig(ctx, earlier, 1); !errors.Is(err, ddbstore.ErrSuperseded) {
			t.Errorf("PutConfig(generation 4 after 5) error = %v, want ErrSuperseded", err)
		}
		newest := earlier
		newest.Generation = 6
		if got, err := s.PutConfig(ctx, newest, 1); err != nil || got.Version != 2 {
			t.Errorf("PutConfig(generation 6) = version %d, %v; want version 2", got.Version, err)
		}
	})
	t.Run("should refuse an older config in the conditional write even when its writer read before the newer one landed", func(t *testing.T) {
		e := newEnv(t)
		s := e.store(t, testCluster)
		if _, err := s.PutConfig(ctx, ddbstore.Config{NodePools: []v1.NodePool{nodePool("x")}, CreatedAt: t0.Add(-time.Minute)}, 0); err != nil {
			t.Fatal(err)
		}
		// The older writer's read happens, then the newer config lands at
		// version 2, then the older writer's conditional write runs with
		// the version of the newer one (as a retry after a conflict does).
		slow := e.storeWith(t, &readThenRace{API: e.client, race: func() {
			if _, err := s.PutConfig(ctx, without, 1); err != nil {
				t.Errorf("PutConfig(newer) error = %v", err)
			}
		}}, testCluster)
		if _, err := slow.PutConfig(ctx, withPool, 2); !errors.Is(err, ddbstore.ErrSuperseded) {
			t.Fatalf("PutConfig(older, racing) error = %v, want ErrSuperseded", err)
		}
		got, err := s.GetConfig(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a"}, pools(got)); diff != "" {
			t.Errorf("stored pools mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should advance the stored order when a newer config repeats the content", func(t *testing.T) {
		s := newEnv(t).store(t, testCluster)
		if _, err := s.PutConfig(ctx, without, 0); err != nil {
			t.Fatal(err)
		}
		repeat := without
		repeat.CreatedAt = without.CreatedAt.Add(time.Minute)
		if _, err := s.PutConfig(ctx, repeat, 1); err != nil {
			t.Fatal(err)
		}
		// A config between the two is now older than what is stored.
		between := withPool
		between.CreatedAt = without.CreatedAt.Add(30 * time.Second)
		if _, err := s.PutConfig(ctx, between, 2); !errors.Is(err, ddbstore.ErrSuperseded) {
			t.Errorf("PutConfig(between) error = %v, want ErrSuperseded", err)
		}
	})
}

// readThenRace runs race once, after the store's first GetItem (its read of
// the current config) and before its PutItem.
type readThenRace struct {
	ddbstore.API
	race func()
	done bool
}

func (r *readThenRace) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if !r.done {
		r.done = true
		r.race()
	}
	return r.API.PutItem(ctx, in, opts...)
}
