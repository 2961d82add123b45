package disruption

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// MethodDeleted is the method of the commands Deleted returns: forceful
// like Expired (no budget, no re-validation, no replacement launched
// first), its drain honouring PodDisruptionBudgets and do-not-disrupt
// until the terminationGracePeriod (karpenter-spec §5.2, the Node
// termination controller).
const MethodDeleted Method = "Deleted"

// Deleted returns the Deleted commands of the snapshot in, which Evaluate
// leaves to it: a deleted Node is "already being deleted" for every
// budgeted method. It is pure and stateless (the live executions are
// in.InFlight, no clock is read): every poll of the same snapshot returns the same commands with the same IDs,
// so starting them under termination's execution names starts each once.
// In order:
//
//   - one per Node being deleted (deletionTimestamp set; kubectl delete
//     node) that a NodeClaim of in names (status.nodeName, else
//     providerID), when that NodeClaim is not itself being deleted and no
//     command of in.InFlight holds it; sorted by ID. The snapshot does not
//     carry finalizers: a Node that matches a NodeClaim carries
//     karpenter.sh/termination (set at registration, karpenter-spec §5.1),
//     and one without it is gone before a snapshot shows it deleting. The
//     ID hashes the NodeClaim, the Node's UID and its deletion instant;
//   - one per NodeClaim whose NodePool or EC2NodeClass classes (the synced
//     configuration as applied, resolved or not) no longer hold
//     (OwnerDeleted), when the claim has a Node, no command of in.InFlight
//     holds it and no command of taken or of the first kind names it;
//     sorted by NodeClaim. The ID hashes the NodeClaim, its UID and the
//     owner that is gone. A claim without a Node yet is left to a later
//     poll (or to garbage collection's launch and registration timeouts).
//
// IDs are "delete-<nodeclaim>-<8 hex>". in.NodePools are the pools the
// owner rule checks against, as Evaluate's.
func Deleted(in Input, classes []v1.EC2NodeClass, taken []Command) []Command {
	held := map[string]bool{}
	for _, cmds := range [][]Command{in.InFlight, taken} {
		for _, c := range cmds {
			for _, cand := range c.Candidates {
				held[cand.NodeClaim] = true
			}
		}
	}
	inFlight := map[string]bool{}
	for _, c := range in.InFlight {
		for _, cand := range c.Candidates {
			inFlight[cand.NodeClaim] = true
		}
	}
	nodeOf := claimNodes(in.Nodes)
	var out []Command
	for i := range in.NodeClaims {
		c := &in.NodeClaims[i]
		n := nodeOf(c)
		if n == nil || n.DeletionTimestamp == nil || c.DeletionTimestamp != nil || inFlight[c.Name] {
			continue
		}
		at := n.DeletionTimestamp.UTC().Format(time.RFC3339)
		out = append(out, deletedCommand(c, n, string(n.UID)+"\x00"+at,
			fmt.Sprintf("Node %s was deleted at %s; its termination finalizer drains it and terminates its instance (no budget, no replacement first)", n.Name, at)))
	}
	slices.SortFunc(out, func(a, b Command) int { return cmp.Compare(a.ID, b.ID) })
	for _, c := range out {
		held[c.Candidates[0].NodeClaim] = true
	}
	claims := make(map[string]*v1.NodeClaim, len(in.NodeClaims))
	for i := range in.NodeClaims {
		claims[in.NodeClaims[i].Name] = &in.NodeClaims[i]
	}
	for _, d := range OwnerDeleted(in.NodeClaims, in.NodePools, classes) {
		c := claims[d.NodeClaim]
		if c == nil || held[c.Name] {
			continue
		}
		if n := nodeOf(c); n != nil {
			out = append(out, deletedCommand(c, n, string(c.UID)+"\x00"+d.Owner, d.Reason))
		}
	}
	return out
}

// claimNodes returns the lookup of a NodeClaim's Node among nodes: by
// status.nodeName, else by providerID; nil when neither names one.
func claimNodes(nodes []corev1.Node) func(*v1.NodeClaim) *corev1.Node {
	byName := make(map[string]*corev1.Node, len(nodes))
	byProvider := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		byName[n.Name] = n
		if n.Spec.ProviderID != "" {
			byProvider[n.Spec.ProviderID] = n
		}
	}
	return func(c *v1.NodeClaim) *corev1.Node {
		if n := byName[c.Status.NodeName]; n != nil && c.Status.NodeName != "" {
			return n
		}
		if c.Status.ProviderID != "" {
			return byProvider[c.Status.ProviderID]
		}
		return nil
	}
}

// deletedCommand is the Deleted command that drains and deletes claim c on
// Node n: ID "delete-<nodeclaim>-<8 hex>", the hash over the claim's name
// and key (what makes this deletion the same one on every poll), no budget
// and no replacement.
func deletedCommand(c *v1.NodeClaim, n *corev1.Node, key, reason string) Command {
	sum := sha256.Sum256([]byte(c.Name + "\x00" + key))
	pool := c.Labels[v1.LabelNodePool]
	return Command{
		ID: "delete-" + c.Name + "-" + hex.EncodeToString(sum[:4]), Method: MethodDeleted, Decision: DecisionDelete,
		NodePool: pool, Replacements: []Replacement{},
		Candidates: []Candidate{{
			NodeClaim: c.Name, Node: n.Name, NodePool: pool, ProviderID: cmp.Or(c.Status.ProviderID, n.Spec.ProviderID),
			InstanceType: n.Labels[v1.LabelInstanceType], Zone: n.Labels[v1.LabelTopologyZone], CapacityType: n.Labels[v1.LabelCapacityType],
		}},
		Reason: reason,
	}
}
