package provisioning_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// tagEC2 holds instance tags and records CreateTags calls.
type tagEC2 struct {
	tags    map[string]map[string]string
	added   []map[string]string
	readErr error
	addErr  error
}

func (e *tagEC2) InstanceTags(_ context.Context, id string) (map[string]string, error) {
	if e.readErr != nil {
		return nil, e.readErr
	}
	tags, ok := e.tags[id]
	if !ok {
		return nil, fmt.Errorf("instance %s: %w", id, v1.ErrNotFound)
	}
	return maps.Clone(tags), nil
}

func (e *tagEC2) AddTags(_ context.Context, id string, tags map[string]string) error {
	if e.addErr != nil {
		return e.addErr
	}
	e.added = append(e.added, tags)
	maps.Copy(e.tags[id], tags)
	return nil
}

// registeredClaim is NodeClaim name on instance id with Node node.
func registeredClaim(name, id, node string) v1.NodeClaim {
	return v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"keep": "me"}},
		Status:     v1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + id, NodeName: node},
	}
}

func TestTaggerTag(t *testing.T) {
	launchTags := func() map[string]string {
		return map[string]string{"kubernetes.io/cluster/test-cluster": "owned", "karpenter.sh/nodepool": "default"}
	}
	tagged := registeredClaim("c1", "i-1", "node-1")
	tagged.Annotations[v1.AnnotationInstanceTagged] = "true"
	deleting := registeredClaim("c1", "i-1", "node-1")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	tests := []struct {
		name         string
		claim        v1.NodeClaim
		instanceTags map[string]string
		ec2          func(*tagEC2)
		store        func(*store)
		wantAdded    []map[string]string
		wantResult   provisioning.TagResult
		wantErr      bool
		wantRecorded bool
	}{
		{
			name:         "should add the three registration tags and record it",
			claim:        registeredClaim("c1", "i-1", "node-1"),
			instanceTags: launchTags(),
			wantAdded:    []map[string]string{{"Name": "node-1", "karpenter.sh/nodeclaim": "c1", "eks:eks-cluster-name": "test-cluster"}},
			wantResult: provisioning.TagResult{NodeClaim: "c1", InstanceID: "i-1",
				Added: map[string]string{"Name": "node-1", "karpenter.sh/nodeclaim": "c1", "eks:eks-cluster-name": "test-cluster"}},
			wantRecorded: true,
		},
		{
			name:         "should add only the missing tags, keeping a Name from spec.tags",
			claim:        registeredClaim("c1", "i-1", "node-1"),
			instanceTags: map[string]string{"Name": "custom", "eks:eks-cluster-name": "test-cluster"},
			wantAdded:    []map[string]string{{"karpenter.sh/nodeclaim": "c1"}},
			wantResult:   provisioning.TagResult{NodeClaim: "c1", InstanceID: "i-1", Added: map[string]string{"karpenter.sh/nodeclaim": "c1"}},
			wantRecorded: true,
		},
		{
			name:         "should call nothing but record it when the instance has every tag",
			claim:        registeredClaim("c1", "i-1", "node-1"),
			instanceTags: map[string]string{"Name": "x", "karpenter.sh/nodeclaim": "c1", "eks:eks-cluster-name": "test-cluster"},
			wantResult:   provisioning.TagResult{NodeClaim: "c1", InstanceID: "i-1"},
			wantRecorded: true,
		},
		{
			name:         "should do nothing for a NodeClaim already tagged",
			claim:        tagged,
			instanceTags: launchTags(),
			wantResult:   provisioning.TagResult{NodeClaim: "c1"},
			wantRecorded: true,
		},
		{
			name:         "should do nothing before the Node registered",
			claim:        registeredClaim("c1", "i-1", ""),
			instanceTags: launchTags(),
			wantResult:   provisioning.TagResult{NodeClaim: "c1"},
		},
		{
			name:         "should do nothing for a NodeClaim being deleted",
			claim:        deleting,
			instanceTags: launchTags(),
			wantResult:   provisioning.TagResult{NodeClaim: "c1"},
		},
		{
			name:       "should report an instance that is gone without error or record",
			claim:      registeredClaim("c1", "i-1", "node-1"),
			wantResult: provisioning.TagResult{NodeClaim: "c1", InstanceID: "i-1", Gone: true},
		},
		{
			name:         "should fail without recording when CreateTags fails, so a later run retries",
			claim:        registeredClaim("c1", "i-1", "node-1"),
			instanceTags: launchTags(),
			ec2:          func(e *tagEC2) { e.addErr = errors.New("UnauthorizedOperation") },
			wantResult:   provisioning.TagResult{NodeClaim: "c1", InstanceID: "i-1"},
			wantErr:      true,
		},
		{
			name:         "should fail when the record cannot be written, the tags staying on the instance",
			claim:        registeredClaim("c1", "i-1", "node-1"),
			instanceTags: launchTags(),
			store:        func(s *store) { s.failUpdates = 1 },
			wantAdded:    []map[string]string{{"Name": "node-1", "karpenter.sh/nodeclaim": "c1", "eks:eks-cluster-name": "test-cluster"}},
			wantResult: provisioning.TagResult{NodeClaim: "c1", InstanceID: "i-1",
				Added: map[string]string{"Name": "node-1", "karpenter.sh/nodeclaim": "c1", "eks:eks-cluster-name": "test-cluster"}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore()
			s.put(tt.claim)
			stored, _ := s.GetNodeClaim(t.Context(), tt.claim.Name)
			ec2 := &tagEC2{tags: map[string]map[string]string{}}
			if tt.instanceTags != nil {
				ec2.tags["i-1"] = tt.instanceTags
			}
			if tt.ec2 != nil {
				tt.ec2(ec2)
			}
			if tt.store != nil {
				tt.store(s)
			}
			tg, err := provisioning.NewTagger(testCluster, s, ec2)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tg.Tag(t.Context(), stored)
			if (err != nil) != tt.wantErr || (got.Err != nil) != tt.wantErr {
				t.Fatalf("Tag() error = %v (result %v), want error %v", err, got.Err, tt.wantErr)
			}
			got.Err = nil
			if diff := cmp.Diff(tt.wantResult, got); diff != "" {
				t.Errorf("Tag() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAdded, ec2.added); diff != "" {
				t.Errorf("CreateTags calls mismatch (-want +got):\n%s", diff)
			}
			after, _ := s.GetNodeClaim(t.Context(), tt.claim.Name)
			recorded := after.Annotations[v1.AnnotationInstanceTagged] == "true"
			if recorded != tt.wantRecorded {
				t.Errorf("stored annotations = %v, want tagged recorded %v", after.Annotations, tt.wantRecorded)
			}
			if tt.wantRecorded && (after.Annotations["keep"] != "me" ||
				(tt.claim.Annotations[v1.AnnotationInstanceTagged] == "" && after.Annotations[v1.AnnotationClusterNameTaggedCompatible] != "true")) {
				t.Errorf("stored annotations = %v, want the others kept and cluster-name-tagged set", after.Annotations)
			}
		})
	}
}

func TestTaggerTagStopsWhenAnotherRunRecordedIt(t *testing.T) {
	s := newStore()
	s.put(registeredClaim("c1", "i-1", "node-1"))
	stale, _ := s.GetNodeClaim(t.Context(), "c1")
	// Another run tagged and recorded it after stale was read.
	other := stale
	other.Annotations = map[string]string{v1.AnnotationInstanceTagged: "true"}
	if _, err := s.UpdateNodeClaim(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	ec2 := &tagEC2{tags: map[string]map[string]string{"i-1": {"Name": "node-1", "karpenter.sh/nodeclaim": "c1", "eks:eks-cluster-name": "test-cluster"}}}
	tg, _ := provisioning.NewTagger(testCluster, s, ec2)
	if _, err := tg.Tag(t.Context(), stale); err != nil {
		t.Fatalf("Tag() error = %v, want the conflict resolved by the re-read", err)
	}
	after, _ := s.GetNodeClaim(t.Context(), "c1")
	if after.ResourceVersion != "2" {
		t.Errorf("resourceVersion = %s, want 2 (no second write)", after.ResourceVersion)
	}
}

func TestTaggerTagAll(t *testing.T) {
	s := newStore()
	s.put(registeredClaim("b", "i-2", "node-2"))
	s.put(registeredClaim("a", "i-1", "node-1"))
	s.put(registeredClaim("launching", "i-3", ""))
	done := registeredClaim("done", "i-4", "node-4")
	done.Annotations[v1.AnnotationInstanceTagged] = "true"
	s.put(done)
	ec2 := &tagEC2{tags: map[string]map[string]string{"i-1": {}, "i-2": {}, "i-3": {}, "i-4": {}}}
	tg, _ := provisioning.NewTagger(testCluster, s, ec2)
	got, err := tg.TagAll(t.Context())
	if err != nil {
		t.Fatalf("TagAll() error = %v", err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.NodeClaim)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
		t.Errorf("tagged NodeClaims mismatch (-want +got):\n%s", diff)
	}
	if len(ec2.added) != 2 {
		t.Errorf("CreateTags calls = %d, want 2", len(ec2.added))
	}
	again, err := tg.TagAll(t.Context())
	if err != nil || len(again) != 0 {
		t.Errorf("second TagAll() = %+v, %v; want nothing left to tag", again, err)
	}
}
