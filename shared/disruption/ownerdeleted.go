package disruption

import (
	"fmt"
	"slices"
	"strings"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// OwnerDeletion is a NodeClaim to drain and delete because the NodePool or
// EC2NodeClass it belongs to no longer exists.
type OwnerDeletion struct {
	// NodeClaim names the claim.
	NodeClaim string
	// Owner is "NodePool/<name>" or "EC2NodeClass/<name>": what is gone.
	Owner string
	// Reason says so, for the execution and its events.
	Reason string
}

// OwnerDeleted returns, sorted by NodeClaim, the NodeClaims of claims whose
// NodePool (label karpenter.sh/nodepool) is not in pools or is being
// deleted, or else whose EC2NodeClass (spec.nodeClassRef) is not in
// classes or is being deleted. Karpenter deletes every NodeClaim of a
// deleted NodePool (the NodeClaims' ownerReferences cascade,
// karpenter-spec section 1.3), and an EC2NodeClass's termination finalizer
// waits until no NodeClaim refers to the class (karpenter-spec section
// 1.4); nodewright's NodeClaims have no owner in the cluster, so the
// disruption loop deletes them through the same drain as a deleted Node.
// pools and classes are the synced configuration as applied (not only the
// ones that validate or resolve: a class that fails to resolve still
// exists). Claims already being deleted, and claims without the NodePool
// label (whose owner cannot be told), are left alone. claims are
// nodewright's own records (launched or adopted, ownership rule).
func OwnerDeleted(claims []v1.NodeClaim, pools []v1.NodePool, classes []v1.EC2NodeClass) []OwnerDeletion {
	livePool := make(map[string]bool, len(pools))
	for i := range pools {
		livePool[pools[i].Name] = pools[i].DeletionTimestamp == nil
	}
	liveClass := make(map[string]bool, len(classes))
	for i := range classes {
		liveClass[classes[i].Name] = classes[i].DeletionTimestamp == nil
	}
	var out []OwnerDeletion
	for i := range claims {
		c := &claims[i]
		pool := c.Labels[v1.LabelNodePool]
		if c.DeletionTimestamp != nil || pool == "" {
			continue
		}
		if live, ok := livePool[pool]; !live {
			out = append(out, OwnerDeletion{NodeClaim: c.Name, Owner: v1.KindNodePool + "/" + pool,
				Reason: fmt.Sprintf("NodePool %q was %s; its NodeClaims are drained and deleted", pool, goneOrDeleting(ok))})
			continue
		}
		if ref := c.Spec.NodeClassRef; ref != nil && ref.Name != "" {
			if live, ok := liveClass[ref.Name]; !live {
				out = append(out, OwnerDeletion{NodeClaim: c.Name, Owner: v1.KindEC2NodeClass + "/" + ref.Name,
					Reason: fmt.Sprintf("EC2NodeClass %q was %s; its NodeClaims are drained and deleted", ref.Name, goneOrDeleting(ok))})
			}
		}
	}
	slices.SortFunc(out, func(a, b OwnerDeletion) int { return strings.Compare(a.NodeClaim, b.NodeClaim) })
	return out
}

func goneOrDeleting(listed bool) string {
	if listed {
		return "marked for deletion"
	}
	return "deleted"
}
