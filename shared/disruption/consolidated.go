package disruption

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// ConsolidationRevalidate is how long an evaluation whose consolidation
// found nothing stands for later evaluations of the same inputs: after it,
// consolidation simulates again even if nothing it reads changed, so that
// what no input shows (an offering back in stock) gets its chance
// (karpenter: state.Cluster.ConsolidationState resets every 5 minutes, and
// each consolidation method skips while IsConsolidated).
const ConsolidationRevalidate = 5 * time.Minute

// Consolidated is what an evaluation whose multi- and single-node
// consolidation found no command leaves for the next ones
// (Result.Consolidated, Input.Consolidated): the fingerprint of what
// consolidation read, when it was computed, and why each NodeClaim was
// left out. Karpenter keeps the same in memory (the cluster state's
// consolidation timestamp); a Lambda stores it between runs.
type Consolidated struct {
	// Fingerprint is the hex SHA-256 of the consolidation inputs
	// (consolidationFingerprint); "" never matches.
	Fingerprint string `json:"fingerprint"`
	// EvaluatedAt is the instant of the evaluation that simulated.
	EvaluatedAt time.Time `json:"evaluatedAt"`
	// Reasons are that evaluation's Result.Blocked reasons, by NodeClaim.
	Reasons []Blocked `json:"reasons,omitempty"`
}

// standsAt reports whether c answers for an evaluation at now whose
// consolidation inputs hash to fingerprint.
func (c *Consolidated) standsAt(fingerprint string, now time.Time) bool {
	return c != nil && c.Fingerprint != "" && c.Fingerprint == fingerprint &&
		!now.Before(c.EvaluatedAt) && now.Sub(c.EvaluatedAt) < ConsolidationRevalidate
}

// restore gives the nodes still without a reason the reason c recorded
// for them, as the skipped simulations would have.
func (e *evaluation) restore(c *Consolidated) {
	for _, b := range c.Reasons {
		if n := e.byName[b.NodeClaim]; n != nil && n.claim.Name == b.NodeClaim && b.Reason != "" {
			n.note(b.Event, "%s", b.Reason)
		}
	}
}

// consolidationFingerprint hashes everything multi- and single-node
// consolidation read at this point of the evaluation: the candidates in
// their order, the budgets left, and the cluster the simulations place
// pods on. Two evaluations with the same fingerprint simulate the same
// moves, so the second may take the first's "nothing to consolidate".
//
// Left out, because they change no simulation: Now (what it decides,
// consolidateAfter, do-not-disrupt durations, nominations, budget
// schedules, is in the candidates and budgets), each pod's identity
// (v1.PodSummary.WithoutIdentity: a pod replaced by an identical one on
// the same node), a NodeClaim's status.lastPodEventTime (it only moves
// consolidateAfter, in the candidates), resourceVersion and managedFields,
// and the Nodes' condition heartbeats. This is where nodewright does less
// work than Karpenter, which simulates again after any pod event.
func (e *evaluation) consolidationFingerprint() (string, error) {
	h := sha256.New()
	w := func(label string, v any) error {
		h.Write([]byte("\x00" + label + "\x00"))
		if err := json.NewEncoder(h).Encode(v); err != nil {
			return fmt.Errorf("consolidation fingerprint: encode %s: %w", label, err)
		}
		return nil
	}
	cands := e.consolidationCandidates()
	names := make([]string, len(cands))
	for i, n := range cands {
		names[i] = n.claim.Name
	}
	claims := make([]v1.NodeClaim, len(e.in.NodeClaims))
	for i, c := range e.in.NodeClaims {
		c.ResourceVersion, c.ManagedFields = "", nil
		c.Status.LastPodEventTime = metav1.Time{}
		claims[i] = c
	}
	nodes := make([]corev1.Node, len(e.in.Nodes))
	for i, n := range e.in.Nodes {
		n.ResourceVersion, n.ManagedFields = "", nil
		conds := slices.Clone(n.Status.Conditions)
		for j := range conds {
			conds[j].LastHeartbeatTime = metav1.Time{}
		}
		n.Status.Conditions = conds
		nodes[i] = n
	}
	for _, part := range []struct {
		label string
		v     any
	}{
		{"candidates", names}, {"budgets", e.budgetReport},
		{"nodepools", e.poolList}, {"nodeclasses", e.in.NodeClasses}, {"nodeclaims", claims}, {"nodes", nodes},
		{"pdbs", e.in.PodDisruptionBudgets}, {"daemonsets", e.in.DaemonSets}, {"volumes", e.in.Volumes},
		{"volumelimits", e.in.VolumeLimits}, {"instancetypes", e.in.InstanceTypes}, {"instances", e.in.Instances},
		{"nominated", e.in.NominatedUntil}, {"inflight", e.in.InFlight}, {"held", e.in.HeldReplacements},
		{"gates", e.in.FeatureGates}, {"options", e.in.Options},
	} {
		if err := w(part.label, part.v); err != nil {
			return "", err
		}
	}
	if err := podsFingerprint(h, e.in.Pods); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// podsFingerprint writes the pods to h as a set: each pod's summary
// without its identity, the claims its volumes name (v1.ClaimName), whether
// it has resource claims, and the status the evaluation reads (phase,
// nomination, conditions without their times, and the start time of a pod
// with karpenter.sh/do-not-disrupt), digested and sorted.
func podsFingerprint(h hash.Hash, pods []corev1.Pod) error {
	type condition struct {
		Type   corev1.PodConditionType `json:"type"`
		Status corev1.ConditionStatus  `json:"status"`
		Reason string                  `json:"reason,omitempty"`
	}
	type podView struct {
		Pod            v1.PodSummary   `json:"pod"`
		Claims         []string        `json:"claims,omitempty"`
		ResourceClaims bool            `json:"resourceClaims,omitempty"`
		Phase          corev1.PodPhase `json:"phase,omitempty"`
		Nominated      string          `json:"nominated,omitempty"`
		Conditions     []condition     `json:"conditions,omitempty"`
		Started        *metav1.Time    `json:"started,omitempty"`
	}
	sums := make([][sha256.Size]byte, len(pods))
	for i := range pods {
		p := &pods[i]
		view := podView{
			Pod: v1.PodView(p).WithoutIdentity(), ResourceClaims: len(p.Spec.ResourceClaims) > 0,
			Phase: p.Status.Phase, Nominated: p.Status.NominatedNodeName,
		}
		if view.Pod.Name != "" { // do-not-disrupt: its duration runs from the start
			view.Started = p.Status.StartTime
		}
		for j := range p.Spec.Volumes {
			if claim, ok := v1.ClaimName(p, &p.Spec.Volumes[j]); ok {
				view.Claims = append(view.Claims, claim)
			}
		}
		for _, c := range p.Status.Conditions {
			view.Conditions = append(view.Conditions, condition{Type: c.Type, Status: c.Status, Reason: c.Reason})
		}
		data, err := json.Marshal(view)
		if err != nil {
			return fmt.Errorf("consolidation fingerprint: encode pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		sums[i] = sha256.Sum256(data)
	}
	slices.SortFunc(sums, func(a, b [sha256.Size]byte) int { return bytes.Compare(a[:], b[:]) })
	h.Write([]byte("\x00pods\x00"))
	for _, s := range sums {
		h.Write(s[:])
	}
	return nil
}
