package disruption

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// assess applies the candidate rules that do not depend on the method
// (karpenter-spec §6.2) and detects drift (§7), for every node not already
// leaving.
func (e *evaluation) assess() error {
	for _, n := range e.nodes {
		if n.deleting {
			continue
		}
		n.block, n.blockEvent = e.generalBlock(n)
		n.podBlock = e.podBlock(n)
		if n.block != "" {
			n.note(n.blockEvent, "%s", n.block)
			continue
		}
		reason, detail, err := e.driftOf(n)
		if err != nil {
			return err
		}
		n.drift, n.driftDetail, n.driftCheck = reason, detail, true
		n.driftSince = e.now
		if c := meta.FindStatusCondition(n.claim.Status.Conditions, v1.ConditionTypeDrifted); c != nil && c.Status == "True" && !c.LastTransitionTime.IsZero() {
			n.driftSince = c.LastTransitionTime.Time
		}
	}
	return nil
}

// generalBlock returns why n can take part in no voluntary disruption, or
// "": not registered or initialized, unknown or static NodePool,
// do-not-disrupt on the Node or NodeClaim, a replacement of a command in
// flight (Input.HeldReplacements), or nominated. event is
// EventDisruptionBlocked (karpenter: NewCandidate's errors), except for a
// NodeClaim without a Node, which has no Node to record it on.
func (e *evaluation) generalBlock(n *node) (why, event string) {
	if why := initializedNote(n); why != "" {
		if n.node == nil {
			return why, noEvent
		}
		return why, EventDisruptionBlocked
	}
	if n.pool == nil {
		return fmt.Sprintf("NodePool %q not found", n.labels[v1.LabelNodePool]), EventDisruptionBlocked
	}
	if n.pool.Spec.Replicas != nil {
		return fmt.Sprintf("NodePool %s is static (spec.replicas); nodewright does not disrupt static pools", n.pool.Name), EventDisruptionBlocked
	}
	if n.node.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
		return fmt.Sprintf("the Node is annotated %s: \"true\"", v1.AnnotationDoNotDisrupt), EventDisruptionBlocked
	}
	if n.claim.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
		return fmt.Sprintf("the NodeClaim is annotated %s: \"true\"", v1.AnnotationDoNotDisrupt), EventDisruptionBlocked
	}
	for _, p := range n.nominated {
		if active(p) {
			return fmt.Sprintf("nominated: pending pod %s is expected to land on it", podName(p)), EventDisruptionBlocked
		}
	}
	if cmd, ok := e.in.HeldReplacements[n.claim.Name]; ok {
		return fmt.Sprintf("replacement launched by command %s, which is still in flight", cmd), EventDisruptionBlocked
	}
	for _, name := range []string{n.claim.Name, n.node.Name} {
		if until, ok := e.in.NominatedUntil[name]; ok && e.now.Before(until) {
			return fmt.Sprintf("nominated until %s: the provisioner placed pending pods on it", until.UTC().Format(time.RFC3339)), EventDisruptionBlocked
		}
	}
	return "", noEvent
}

// podBlock returns why draining n's pods is not allowed now, or "": an
// active pod with an active do-not-disrupt annotation (DaemonSet and mirror
// pods included), or an evictable pod that a PodDisruptionBudget protects.
// It stops graceful methods; Drift proceeds past it when the NodeClaim has
// a terminationGracePeriod. Its event is always EventDisruptionBlocked
// (karpenter: NewCandidate's pod checks).
func (e *evaluation) podBlock(n *node) string {
	for _, p := range n.pods {
		if why := doNotDisrupt(p, e.now); why != "" {
			return why
		}
	}
	return e.pdbBlock(n)
}

// pdbBlock returns why the Eviction API would refuse to evict one of n's
// evictable pods now (a PodDisruptionBudget allows no disruption, or
// several select it), or "".
func (e *evaluation) pdbBlock(n *node) string {
	for _, p := range n.pods {
		if !evictable(p) {
			continue
		}
		if why := blocksEviction(e.pdbs, p); why != "" {
			return why
		}
	}
	return ""
}

// consolidatableAt is when consolidateAfter has elapsed for n: after the
// later of its last pod event and its initialization (karpenter:
// Consolidatable condition; karpenter-spec §5.1). ok is false for Never.
func (e *evaluation) consolidatableAt(n *node) (at, since time.Time, ok bool) {
	after := n.pool.Spec.Disruption.ConsolidateAfter.Duration
	if after == nil {
		return time.Time{}, time.Time{}, false
	}
	since = n.claim.Status.LastPodEventTime.Time
	if c := meta.FindStatusCondition(n.claim.Status.Conditions, v1.ConditionTypeInitialized); c != nil && c.LastTransitionTime.After(since) {
		since = c.LastTransitionTime.Time
	}
	if since.IsZero() {
		since = n.claim.CreationTimestamp.Time
	}
	return since.Add(*after), since, true
}

// consolidationBlock returns why n is not an Emptiness (underutilized
// false) or consolidation (underutilized true) candidate, or "", and its
// Blocked.Event: the candidate rules' own, none while consolidateAfter
// runs (karpenter: the Consolidatable condition, no event), else
// EventUnconsolidatable (karpenter: Emptiness.ShouldDisrupt,
// consolidation.ShouldDisrupt: consolidation disabled, non-empty
// consolidation disabled, no instance type, capacity type or zone).
func (e *evaluation) consolidationBlock(n *node, underutilized bool) (why, event string) {
	if n.deleting || n.block != "" {
		return n.block, n.blockEvent
	}
	if n.podBlock != "" {
		return n.podBlock, EventDisruptionBlocked
	}
	at, since, ok := e.consolidatableAt(n)
	if !ok {
		return fmt.Sprintf("consolidation is disabled: NodePool %s has consolidateAfter: Never", n.pool.Name), EventUnconsolidatable
	}
	if e.now.Before(at) {
		return fmt.Sprintf("not consolidatable yet: consolidateAfter %s runs from the last pod event or initialization at %s until %s",
			n.pool.Spec.Disruption.ConsolidateAfter.Duration, since.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339)), noEvent
	}
	if !underutilized {
		return "", noEvent
	}
	if n.pool.Spec.Disruption.ConsolidationPolicy == v1.ConsolidationPolicyWhenEmpty {
		return fmt.Sprintf("consolidationPolicy of NodePool %s is WhenEmpty and the node has %d pods to reschedule", n.pool.Name, len(n.reschedulable)), EventUnconsolidatable
	}
	for _, k := range []string{v1.LabelTopologyZone, v1.LabelCapacityType} {
		if n.labels[k] == "" {
			return fmt.Sprintf("cannot price the node: label %s is missing", k), EventUnconsolidatable
		}
	}
	if n.it == nil {
		return fmt.Sprintf("cannot price the node: instance type %q is not among EC2NodeClass %s's instance types", n.labels[v1.LabelInstanceType], n.className), EventUnconsolidatable
	}
	if !n.priced {
		return fmt.Sprintf("cannot price the node: no %s offering of %s in %s", n.labels[v1.LabelCapacityType], n.it.Name, n.labels[v1.LabelTopologyZone]), EventUnconsolidatable
	}
	return "", noEvent
}
