package provisioning

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// NeedsTagging reports whether claim's instance is due its
// post-registration tags: the NodeClaim has an instance and a Node
// (status.providerID and status.nodeName), is not being deleted, and does
// not carry karpenter.k8s.aws/tagged=true yet (aws:
// pkg/controllers/nodeclaim/tagging; karpenter-spec section 1.5).
func NeedsTagging(claim *v1.NodeClaim) bool {
	return claim.DeletionTimestamp == nil && claim.Status.ProviderID != "" && claim.Status.NodeName != "" &&
		claim.Annotations[v1.AnnotationInstanceTagged] != "true"
}

// MissingTags returns the registration tags (Name=<node name>,
// karpenter.sh/nodeclaim=<claim>, eks:eks-cluster-name=<cluster>) whose
// keys the instance does not carry yet: an existing tag, a Name from
// spec.tags say, is never overwritten (karpenter-spec section 1.5, 11.3
// item 16). Nil when nothing is missing.
func MissingTags(cluster string, claim *v1.NodeClaim, instanceTags map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range amifamily.RegistrationTags(cluster, claim.Status.NodeName, claim.Name) {
		if _, ok := instanceTags[k]; !ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// instanceTagger reads and adds instance tags (shared/aws/fleet.Tagger in
// production).
type instanceTagger interface {
	// InstanceTags returns the instance's tags, or an error matching
	// v1.ErrNotFound when it is gone.
	InstanceTags(ctx context.Context, id string) (map[string]string, error)
	// AddTags adds tags to the instance (CreateTags), or returns an error
	// matching v1.ErrNotFound when it is gone.
	AddTags(ctx context.Context, id string, tags map[string]string) error
}

// taggingStore is the NodeClaim store as tagging uses it (claimStore's
// methods).
type taggingStore interface {
	ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error)
	GetNodeClaim(ctx context.Context, name string) (v1.NodeClaim, error)
	UpdateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error)
}

// Tagger adds the post-registration tags to the instances of registered
// NodeClaims and records that in the NodeClaim, as Karpenter's tagging
// controller does with its annotations. It holds no state and is safe for
// concurrent use.
type Tagger struct {
	cluster   string
	claims    taggingStore
	instances instanceTagger
}

// NewTagger returns a Tagger for cluster, or an error naming a missing
// argument.
func NewTagger(cluster string, claims taggingStore, instances instanceTagger) (*Tagger, error) {
	switch {
	case cluster == "":
		return nil, fmt.Errorf("tagger: cluster: %w", errMissing)
	case claims == nil:
		return nil, fmt.Errorf("tagger: claims: %w", errMissing)
	case instances == nil:
		return nil, fmt.Errorf("tagger: instances: %w", errMissing)
	}
	return &Tagger{cluster: cluster, claims: claims, instances: instances}, nil
}

// TagResult is what Tag did for one NodeClaim.
type TagResult struct {
	NodeClaim  string `json:"nodeClaim"`
	InstanceID string `json:"instanceID,omitempty"`
	// Added are the tags CreateTags added; empty when the instance had
	// them all.
	Added map[string]string `json:"added,omitempty"`
	// Gone is true when the instance or the NodeClaim no longer exists:
	// nothing to tag (garbage collection handles it).
	Gone bool `json:"gone,omitempty"`
	// Err is the failure, nil when the NodeClaim is tagged and recorded.
	Err error `json:"-"`
}

// Tag tags claim's instance once: when NeedsTagging(claim), it reads the
// instance's tags, adds the MissingTags with one CreateTags call, and then
// sets karpenter.k8s.aws/tagged=true and
// compatibility.karpenter.k8s.aws/cluster-name-tagged=true on the stored
// NodeClaim (version-checked; on a conflict it re-reads and stops if
// another run recorded it, up to three times). Every step may be repeated:
// a failure after CreateTags finds the tags present next time. It returns
// the result, with Err set (and returned) when a call failed; a NodeClaim
// that needs nothing is a zero result with its name.
func (t *Tagger) Tag(ctx context.Context, claim v1.NodeClaim) (TagResult, error) {
	r := TagResult{NodeClaim: claim.Name}
	if !NeedsTagging(&claim) {
		return r, nil
	}
	_, id, err := v1.ParseProviderID(claim.Status.ProviderID)
	if err != nil {
		r.Err = fmt.Errorf("tag nodeclaim %s: %w", claim.Name, err)
		return r, r.Err
	}
	r.InstanceID = id
	tags, err := t.instances.InstanceTags(ctx, id)
	if errors.Is(err, v1.ErrNotFound) {
		r.Gone = true
		return r, nil
	}
	if err != nil {
		r.Err = fmt.Errorf("tag nodeclaim %s: read instance tags: %w", claim.Name, err)
		return r, r.Err
	}
	if missing := MissingTags(t.cluster, &claim, tags); missing != nil {
		err := t.instances.AddTags(ctx, id, missing)
		if errors.Is(err, v1.ErrNotFound) {
			r.Gone = true
			return r, nil
		}
		if err != nil {
			r.Err = fmt.Errorf("tag nodeclaim %s: add tags: %w", claim.Name, err)
			return r, r.Err
		}
		r.Added = missing
	}
	for range 3 {
		marked := claim
		marked.Annotations = maps.Clone(claim.Annotations)
		if marked.Annotations == nil {
			marked.Annotations = map[string]string{}
		}
		marked.Annotations[v1.AnnotationInstanceTagged] = "true"
		marked.Annotations[v1.AnnotationClusterNameTaggedCompatible] = "true"
		_, err := t.claims.UpdateNodeClaim(ctx, marked)
		switch {
		case err == nil:
			return r, nil
		case errors.Is(err, v1.ErrNotFound):
			r.Gone = true
			return r, nil
		case !errors.Is(err, v1.ErrConflict):
			r.Err = fmt.Errorf("tag nodeclaim %s: record tagging: %w", claim.Name, err)
			return r, r.Err
		}
		claim, err = t.claims.GetNodeClaim(ctx, claim.Name)
		if errors.Is(err, v1.ErrNotFound) {
			r.Gone = true
			return r, nil
		}
		if err != nil {
			r.Err = fmt.Errorf("tag nodeclaim %s: re-read: %w", claim.Name, err)
			return r, r.Err
		}
		if !NeedsTagging(&claim) {
			return r, nil
		}
	}
	r.Err = fmt.Errorf("tag nodeclaim %s: record tagging: the NodeClaim kept changing: %w", claim.Name, v1.ErrConflict)
	return r, r.Err
}

// TagAll lists the NodeClaims and runs Tag for each that NeedsTagging, one
// after another: garbage collection's retry of tagging that failed at
// registration. It returns the results in NodeClaim name order and, when
// the list or any Tag failed, an error joining the failures.
func (t *Tagger) TagAll(ctx context.Context) ([]TagResult, error) {
	claims, err := t.claims.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("tag instances: list nodeclaims: %w", err)
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	var out []TagResult
	var errs []error
	for i := range claims {
		if !NeedsTagging(&claims[i]) {
			continue
		}
		r, err := t.Tag(ctx, claims[i])
		out = append(out, r)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("tag instances: %w", errors.Join(errs...))
	}
	return out, nil
}
