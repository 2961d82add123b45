package ddbstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

// snapshotPart returns part of parts of snapshot sid, created at created,
// holding one node and one pod named after the part.
func snapshotPart(sid string, part, parts int, created time.Time) *v1.ClusterSnapshot {
	name := sid + "-" + string(rune('a'+part))
	return &v1.ClusterSnapshot{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindClusterSnapshot},
		ID:         name,
		Cluster:    testCluster,
		CreatedAt:  metav1.NewTime(created),
		SnapshotID: sid,
		Part:       part,
		Parts:      parts,
		Nodes:      []v1.NodeSummary{{Name: "node-" + name, ProviderID: "aws:///us-east-1a/i-" + name}},
		Pods: []v1.PodSummary{{
			Name: "pod-" + name, Namespace: "default", UID: types.UID("uid-" + name), NodeName: "node-" + name,
			Spec: v1.PodSpecSummary{Containers: []v1.ContainerSummary{{Name: "app"}}},
		}},
	}
}

type snapshotView struct {
	ID      string
	Version int64
	Nodes   []string
	Pods    []string
}

func view(s ddbstore.Snapshot) snapshotView {
	v := snapshotView{ID: s.ID, Version: s.Version}
	for _, n := range s.Nodes {
		v.Nodes = append(v.Nodes, n.Name)
	}
	for _, p := range s.Pods {
		v.Pods = append(v.Pods, p.Name)
	}
	return v
}

func TestSnapshotParts(t *testing.T) {
	type put struct {
		part *v1.ClusterSnapshot
		want ddbstore.SnapshotPartResult
	}
	tests := []struct {
		name string
		puts []put
		want snapshotView
	}{
		{
			name: "parts arriving out of order make the snapshot current with the last one, merged in part order",
			puts: []put{
				{part: snapshotPart("s1", 1, 2, t0), want: ddbstore.SnapshotPartResult{Received: 1, Parts: 2}},
				{part: snapshotPart("s1", 0, 2, t0), want: ddbstore.SnapshotPartResult{Received: 2, Parts: 2, Current: true}},
			},
			want: snapshotView{ID: "s1", Version: 1, Nodes: []string{"node-s1-a", "node-s1-b"}, Pods: []string{"pod-s1-a", "pod-s1-b"}},
		},
		{
			name: "a part stored twice changes nothing",
			puts: []put{
				{part: snapshotPart("s1", 0, 1, t0), want: ddbstore.SnapshotPartResult{Received: 1, Parts: 1, Current: true}},
				{part: snapshotPart("s1", 0, 1, t0), want: ddbstore.SnapshotPartResult{Received: 1, Parts: 1, Current: true}},
			},
			want: snapshotView{ID: "s1", Version: 1, Nodes: []string{"node-s1-a"}, Pods: []string{"pod-s1-a"}},
		},
		{
			name: "a newer snapshot replaces the current one and an older one does not",
			puts: []put{
				{part: snapshotPart("s1", 0, 1, t0), want: ddbstore.SnapshotPartResult{Received: 1, Parts: 1, Current: true}},
				{part: snapshotPart("s2", 0, 1, t0.Add(time.Minute)), want: ddbstore.SnapshotPartResult{Received: 1, Parts: 1, Current: true}},
				{part: snapshotPart("s0", 0, 1, t0.Add(-time.Minute)), want: ddbstore.SnapshotPartResult{Received: 1, Parts: 1}},
			},
			want: snapshotView{ID: "s2", Version: 2, Nodes: []string{"node-s2-a"}, Pods: []string{"pod-s2-a"}},
		},
		{
			name: "an incomplete newer snapshot leaves the complete one current",
			puts: []put{
				{part: snapshotPart("s1", 0, 1, t0), want: ddbstore.SnapshotPartResult{Received: 1, Parts: 1, Current: true}},
				{part: snapshotPart("s2", 0, 3, t0.Add(time.Minute)), want: ddbstore.SnapshotPartResult{Received: 1, Parts: 3}},
			},
			want: snapshotView{ID: "s1", Version: 1, Nodes: []string{"node-s1-a"}, Pods: []string{"pod-s1-a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			ctx := context.Background()
			for i, p := range tt.puts {
				got, err := s.PutSnapshotPart(ctx, p.part, t0)
				if err != nil {
					t.Fatalf("PutSnapshotPart(#%d) error = %v", i, err)
				}
				if diff := cmp.Diff(p.want, got); diff != "" {
					t.Errorf("PutSnapshotPart(#%d) mismatch (-want +got):\n%s", i, diff)
				}
			}
			got, err := s.CurrentSnapshot(ctx, t0.Add(time.Minute))
			if err != nil {
				t.Fatalf("CurrentSnapshot() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, view(got)); diff != "" {
				t.Errorf("CurrentSnapshot() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOnePartSnapshot checks that a snapshot of one part is stored without
// a marker or a query (its blob and the pointer: one write fewer and two
// reads fewer a post than a part of several), and that its ID reused by a
// multi-part snapshot never mixes the two: the current snapshot is always
// the nodes of one post.
func TestOnePartSnapshot(t *testing.T) {
	ctx := context.Background()
	whole := func() *v1.ClusterSnapshot {
		p := snapshotPart("s1", 0, 1, t0)
		p.Nodes[0].Name, p.Pods[0].Name = "node-whole", "pod-whole"
		return p
	}
	wholeView := snapshotView{ID: "s1", Version: 1, Nodes: []string{"node-whole"}, Pods: []string{"pod-whole"}}
	t.Run("should store a one-part snapshot without a query", func(t *testing.T) {
		e := newEnv(t)
		rec := &consistencyRecorder{API: e.client}
		s := e.storeWith(t, rec, testCluster)
		res, err := s.PutSnapshotPart(ctx, whole(), t0)
		if err != nil || res != (ddbstore.SnapshotPartResult{Received: 1, Parts: 1, Current: true}) {
			t.Fatalf("PutSnapshotPart() = %+v, %v; want 1 of 1 received, current", res, err)
		}
		if len(rec.queries) != 0 {
			t.Errorf("PutSnapshotPart() of one part made %d queries, want none", len(rec.queries))
		}
		got, err := s.CurrentSnapshot(ctx, t0)
		if err != nil {
			t.Fatalf("CurrentSnapshot() error = %v", err)
		}
		if diff := cmp.Diff(wholeView, view(got)); diff != "" {
			t.Errorf("CurrentSnapshot() mismatch (-want +got):\n%s", diff)
		}
	})
	tests := []struct {
		name string
		puts []*v1.ClusterSnapshot
	}{
		{name: "should keep a one-part snapshot current whole when a multi-part one reuses its ID",
			puts: []*v1.ClusterSnapshot{whole(), snapshotPart("s1", 0, 2, t0)}},
		{name: "should make a one-part snapshot current whole beside an incomplete multi-part one of its ID",
			puts: []*v1.ClusterSnapshot{snapshotPart("s1", 0, 2, t0), whole()}},
		{name: "should keep the one-part snapshot when the multi-part one of its ID completes after it",
			puts: []*v1.ClusterSnapshot{snapshotPart("s1", 0, 2, t0), whole(), snapshotPart("s1", 1, 2, t0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			for i, p := range tt.puts {
				if _, err := s.PutSnapshotPart(ctx, p, t0); err != nil {
					t.Fatalf("PutSnapshotPart(#%d) error = %v", i, err)
				}
			}
			got, err := s.CurrentSnapshot(ctx, t0)
			if err != nil {
				t.Fatalf("CurrentSnapshot() error = %v", err)
			}
			if diff := cmp.Diff(wholeView, view(got)); diff != "" {
				t.Errorf("CurrentSnapshot() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("should make a complete multi-part snapshot current over a one-part one of its ID", func(t *testing.T) {
		s := newEnv(t).store(t, testCluster)
		later := func(part int) *v1.ClusterSnapshot { return snapshotPart("s1", part, 2, t0.Add(time.Second)) }
		for i, p := range []*v1.ClusterSnapshot{whole(), later(0), later(1)} {
			if _, err := s.PutSnapshotPart(ctx, p, t0); err != nil {
				t.Fatalf("PutSnapshotPart(#%d) error = %v", i, err)
			}
		}
		got, err := s.CurrentSnapshot(ctx, t0)
		if err != nil {
			t.Fatalf("CurrentSnapshot() error = %v", err)
		}
		want := snapshotView{ID: "s1", Version: 2, Nodes: []string{"node-s1-a", "node-s1-b"}, Pods: []string{"pod-s1-a", "pod-s1-b"}}
		if diff := cmp.Diff(want, view(got)); diff != "" {
			t.Errorf("CurrentSnapshot() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestCurrentSnapshotAbsent(t *testing.T) {
	tests := []struct {
		name  string
		parts []*v1.ClusterSnapshot
		now   time.Time
	}{
		{name: "no snapshot was ever stored", now: t0},
		{name: "the only snapshot is incomplete", parts: []*v1.ClusterSnapshot{snapshotPart("s1", 0, 2, t0)}, now: t0},
		{name: "the current snapshot is older than SnapshotTTL", parts: []*v1.ClusterSnapshot{snapshotPart("s1", 0, 1, t0)}, now: t0.Add(ddbstore.SnapshotTTL)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			ctx := context.Background()
			for _, p := range tt.parts {
				if _, err := s.PutSnapshotPart(ctx, p, t0); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.CurrentSnapshot(ctx, tt.now); !errors.Is(err, ddbstore.ErrNotFound) {
				t.Errorf("CurrentSnapshot() error = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestPutSnapshotPartErrors(t *testing.T) {
	bad := func(mutate func(*v1.ClusterSnapshot)) *v1.ClusterSnapshot {
		p := snapshotPart("s1", 0, 1, t0)
		mutate(p)
		return p
	}
	tests := []struct {
		name string
		give *v1.ClusterSnapshot
	}{
		{name: "nil part", give: nil},
		{name: "snapshot id with the key separator", give: bad(func(p *v1.ClusterSnapshot) { p.SnapshotID = "a#b" })},
		{name: "part beyond parts", give: bad(func(p *v1.ClusterSnapshot) { p.Part = 1 })},
		{name: "no parts", give: bad(func(p *v1.ClusterSnapshot) { p.Parts = 0 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			if _, err := s.PutSnapshotPart(context.Background(), tt.give, t0); !errors.Is(err, ddbstore.ErrInvalid) {
				t.Errorf("PutSnapshotPart() error = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestSnapshotPartsMustAgree: parts of one snapshot that disagree on the
// number of parts, or list the same node, are refused with the field at
// fault and store nothing, so an incomplete or self-contradicting snapshot
// never becomes current.
func TestSnapshotPartsMustAgree(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		first     *v1.ClusterSnapshot
		second    *v1.ClusterSnapshot
		wantField v1.FieldError
	}{
		{
			name:      "should refuse a part that names another number of parts",
			first:     snapshotPart("s1", 0, 3, t0),
			second:    snapshotPart("s1", 1, 2, t0),
			wantField: v1.FieldError{Path: "parts", Message: "2, but part 0 of snapshot s1 says 3"},
		},
		{
			name:  "should refuse a part that lists a node another part lists",
			first: snapshotPart("s1", 0, 2, t0),
			second: func() *v1.ClusterSnapshot {
				p := snapshotPart("s1", 1, 2, t0)
				p.Nodes = append(p.Nodes, v1.NodeSummary{Name: "node-s1-a"})
				return p
			}(),
			wantField: v1.FieldError{Path: "nodes[1].name", Message: `node "node-s1-a" is also in part 0 of snapshot s1`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			if _, err := s.PutSnapshotPart(ctx, tt.first, t0); err != nil {
				t.Fatal(err)
			}
			_, err := s.PutSnapshotPart(ctx, tt.second, t0)
			var invalid *v1.ValidationError
			if !errors.As(err, &invalid) {
				t.Fatalf("PutSnapshotPart() error = %v, want a *v1.ValidationError", err)
			}
			if diff := cmp.Diff([]v1.FieldError{tt.wantField}, invalid.Fields); diff != "" {
				t.Errorf("fields mismatch (-want +got):\n%s", diff)
			}
			if _, err := s.CurrentSnapshot(ctx, t0); !errors.Is(err, ddbstore.ErrNotFound) {
				t.Errorf("CurrentSnapshot() error = %v, want ErrNotFound: no snapshot may become current", err)
			}
			// The refused part stored nothing: the snapshot completes
			// with an agreeing part of the same number.
			good := snapshotPart("s1", 1, tt.first.Parts, t0)
			res, err := s.PutSnapshotPart(ctx, good, t0)
			if err != nil {
				t.Fatalf("PutSnapshotPart(agreeing part) error = %v", err)
			}
			if res.Received != 2 {
				t.Errorf("Received = %d after two agreeing parts, want 2 (the refused part left no marker)", res.Received)
			}
		})
	}
	t.Run("should store a part again without taking its own copy for another part", func(t *testing.T) {
		s := newEnv(t).store(t, testCluster)
		for range 2 {
			if _, err := s.PutSnapshotPart(ctx, snapshotPart("s1", 0, 2, t0), t0); err != nil {
				t.Fatalf("PutSnapshotPart() error = %v", err)
			}
		}
	})
}

func TestCurrentSnapshotMergesEveryPartsCSINodesAndVolumes(t *testing.T) {
	s := newEnv(t).store(t, testCluster)
	ctx := context.Background()
	for i := range 2 {
		p := snapshotPart("s1", i, 2, t0)
		name := p.Nodes[0].Name
		p.CSINodes = []v1.CSINodeSummary{{Name: name, Limits: map[string]int{"ebs.csi.aws.com": 25 + i}}}
		p.Volumes = v1.VolumeObjects{
			Claims:            []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data-" + name}}},
			PersistentVolumes: []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name}}},
		}
		if _, err := s.PutSnapshotPart(ctx, p, t0); err != nil {
			t.Fatalf("PutSnapshotPart(%d) error = %v", i, err)
		}
	}
	got, err := s.CurrentSnapshot(ctx, t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("CurrentSnapshot() error = %v", err)
	}
	want := []v1.CSINodeSummary{{Name: "node-s1-a", Limits: map[string]int{"ebs.csi.aws.com": 25}}, {Name: "node-s1-b", Limits: map[string]int{"ebs.csi.aws.com": 26}}}
	if diff := cmp.Diff(want, got.CSINodes); diff != "" {
		t.Errorf("CSINodes (-want +got):\n%s", diff)
	}
	if len(got.Volumes.Claims) != 2 || len(got.Volumes.PersistentVolumes) != 2 || got.Volumes.Claims[1].Name != "data-node-s1-b" {
		t.Errorf("volumes = %+v, want both parts' claims and volumes in part order", got.Volumes)
	}
}
