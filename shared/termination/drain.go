package termination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// defaultPodGrace is Kubernetes' default terminationGracePeriodSeconds.
const defaultPodGrace = 30 * time.Second

// DrainStep is what a drain round does to one pod.
type DrainStep struct {
	Pod *corev1.Pod
	// Tier is the pod's eviction tier, 1 to 4.
	Tier int
	// Action is one of workflow's Pod* actions, before the API answers:
	// PodEvicted means "evict", PodDeleted "delete with Grace".
	Action string
	// Grace is the grace period of a deletion.
	Grace time.Duration
	// Detail says why, for the operator.
	Detail string
}

// PlanDrain decides one drain round over a node's pods in Karpenter's
// eviction tiers (as DrainOrder returns them; karpenter-spec.md section 5.2,
// checklist items 21 and 22):
//
//   - With a termination deadline, every pod in any tier whose deletion
//     time (deadline minus its terminationGracePeriodSeconds, 30 s when
//     unset) has come is deleted directly, bypassing PodDisruptionBudgets
//     and do-not-disrupt, with a grace period of the time left to the
//     deadline (at least 1 s); a pod already terminating with a longer
//     grace period is deleted again with the shorter one.
//   - In the first tier, every other pod is evicted through the Eviction
//     API, except pods already terminating (waited for) and pods with an
//     active karpenter.sh/do-not-disrupt, which are waited for unless
//     evictDoNotDisrupt (interruption).
//   - Pods of later tiers wait until the earlier tiers are gone.
//
// It is pure: doNotDisrupt reports an active annotation at now.
func PlanDrain(tiers [][]corev1.Pod, now time.Time, deadline *time.Time, evictDoNotDisrupt bool, doNotDisrupt func(*corev1.Pod, time.Time) bool) []DrainStep {
	var steps []DrainStep
	for ti, tier := range tiers {
		for i := range tier {
			p := &tier[i]
			step := DrainStep{Pod: p, Tier: tierNumber(p)}
			if grace, ok := forcedDeletion(p, now, deadline); ok {
				step.Action, step.Grace = workflow.PodDeleted, grace
				step.Detail = fmt.Sprintf("termination deadline %s reached minus its grace period; deleted with %v left",
					deadline.UTC().Format(time.RFC3339), grace)
				steps = append(steps, step)
				continue
			}
			switch {
			case ti > 0:
				step.Action = workflow.PodWaitingTier
			case p.DeletionTimestamp != nil:
				step.Action = workflow.PodTerminating
			case !evictDoNotDisrupt && doNotDisrupt(p, now):
				step.Action = workflow.PodWaitingDoNotDisrupt
				step.Detail = v1.AnnotationDoNotDisrupt + "=" + p.Annotations[v1.AnnotationDoNotDisrupt]
			default:
				step.Action = workflow.PodEvicted
			}
			steps = append(steps, step)
		}
	}
	return steps
}

// tierNumber is a pod's Karpenter tier: 1 non-critical, 2 non-critical
// DaemonSet, 3 critical, 4 critical DaemonSet.
func tierNumber(p *corev1.Pod) int {
	t := 1
	if ownedByDaemonSet(p) {
		t++
	}
	if p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical" {
		t += 2
	}
	return t
}

// forcedDeletion reports whether p must be deleted now because the
// deadline minus its grace period has come, and with what grace period.
func forcedDeletion(p *corev1.Pod, now time.Time, deadline *time.Time) (time.Duration, bool) {
	if deadline == nil {
		return 0, false
	}
	grace := defaultPodGrace
	if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	if now.Before(deadline.Add(-grace)) {
		return 0, false
	}
	left := max(deadline.Sub(now).Truncate(time.Second), time.Second)
	if p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && time.Duration(*p.DeletionGracePeriodSeconds)*time.Second <= left {
		return 0, false
	}
	return left, true
}

// podGrace is p's terminationGracePeriodSeconds, defaultPodGrace when
// unset.
func podGrace(p *corev1.Pod) time.Duration {
	if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return defaultPodGrace
}

// maxPodsListed bounds the pod actions listed per node in a drain round's
// output, and maxPodsListedTotal those of the whole round; the counts stay
// complete (an execution's state is at most 256 KiB).
const (
	maxPodsListed      = 50
	maxPodsListedTotal = 400
)

// drainParallelism bounds the nodes drained at once.
const drainParallelism = 8

// Drain is StepDrain: one drain round over every candidate node. It renews
// the execution's claims and leases, then for each node lists its pods,
// plans the round with PlanDrain (deadline from the NodeClaim's
// karpenter.sh/nodeclaim-termination-timestamp, or the interruption's when
// earlier) and carries it out: evictions through the Eviction API, where a
// PodDisruptionBudget's refusal (429) is recorded and retried next round,
// and forced deletions. An interruption and a Manual replacement evict
// do-not-disrupt pods too.
//
// Once a node has no pod left to wait for, the round checks its volumes
// instead (awaitVolumes): the node is drained when no VolumeAttachment of
// a drainable pod's volume is left, or its termination deadline passed.
//
// The output lists what happened to each pod; Drained is true once every
// node is drained, pods and volumes. NextPollSeconds is DrainPollSeconds
// after a round that made progress, and doubles (up to
// DrainPollMaxSeconds) with every round that made none: the backoff of PDB
// retries. API failures on single pods are recorded and retried next
// round; listing failures are errors.
func (s *Service) Drain(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.DrainOutput, error) {
	prev := st.Drain
	out := workflow.DrainOutput{Round: 1}
	if prev != nil {
		out.Round = prev.Round + 1
	}
	if err := s.renew(ctx, st, now); err != nil {
		return out, err
	}
	// An interruption, and an operator's manual replacement, move
	// do-not-disrupt pods too.
	evictDND := st.Method == workflow.MethodInterrupted || st.Method == workflow.MethodManual
	cands := st.CandidateList()
	nodes := make([]workflow.NodeDrain, len(cands))
	progress := make([]bool, len(cands))
	wakes := make([]time.Time, len(cands))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(drainParallelism)
	for i, cand := range cands {
		g.Go(func() error {
			nd, moved, err := s.drainNode(gctx, st, cand, now, evictDND, &wakes[i])
			nodes[i], progress[i] = nd, moved
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return out, err
	}
	out.Drained = true
	anyProgress := false
	for i, nd := range nodes {
		out.Drained = out.Drained && nd.Drained
		if progress[i] || (prev != nil && remainingBefore(prev, nd.NodeClaim) > nd.Remaining) {
			anyProgress = true
		}
	}
	if !anyProgress && !out.Drained {
		out.Stalls = 1
		if prev != nil {
			out.Stalls = prev.Stalls + 1
		}
	}
	out.NextPollSeconds = untilWake(pollSeconds(st.Settings, out.Stalls), wakes, now)
	out.Nodes, out.Truncated = boundPods(nodes)
	return out, nil
}

// drainNode runs one round on one candidate and reports whether it evicted
// or deleted anything; *wake is set to the next forced deletion of a pod it
// leaves (nextForcedDeletion), if any.
func (s *Service) drainNode(ctx context.Context, st workflow.DisruptionState, cand workflow.Candidate, now time.Time, evictDND bool, wake *time.Time) (workflow.NodeDrain, bool, error) {
	nd := workflow.NodeDrain{NodeClaim: cand.NodeClaim, Node: cand.Node, Counts: map[string]int{}}
	if cand.Node == "" {
		nd.Drained = true
		return nd, false, nil
	}
	var deadline *time.Time
	c, err := s.p.Claims.GetNodeClaim(ctx, cand.NodeClaim)
	switch {
	case err == nil:
		deadline = terminationDeadline(&c, st)
	case errors.Is(err, v1.ErrNotFound):
		deadline = terminationDeadline(&v1.NodeClaim{}, st)
	default:
		return nd, false, fmt.Errorf("drain %s: %w", cand.Node, err)
	}
	nd.Deadline = deadline
	pods, err := s.p.Pods.ListPodsOnNode(ctx, cand.Node)
	if err != nil {
		return nd, false, fmt.Errorf("drain %s: %w", cand.Node, err)
	}
	tiers := s.p.Rules.DrainOrder(pods, now)
	if len(tiers) == 0 {
		nd, moved, err := s.awaitVolumes(ctx, st, nd, pods, now)
		if !nd.Drained && deadline != nil {
			// The volume wait ends at the deadline.
			*wake = *deadline
		}
		return nd, moved, err
	}
	for _, t := range tiers {
		nd.Remaining += len(t)
	}
	moved := false
	*wake = nextForcedDeletion(tiers, now, deadline)
	for _, step := range PlanDrain(tiers, now, deadline, evictDND, s.p.Rules.DoNotDisrupt) {
		if nd.Tier == 0 || step.Tier < nd.Tier {
			nd.Tier = step.Tier
		}
		a := workflow.PodAction{Pod: step.Pod.Namespace + "/" + step.Pod.Name, Action: step.Action, Detail: step.Detail,
			UID: string(step.Pod.UID), PodGraceSeconds: int64(podGrace(step.Pod) / time.Second)}
		switch step.Action {
		case workflow.PodDeleted:
			if err := s.p.Pods.DeletePod(ctx, step.Pod, step.Grace); err != nil {
				a.Action, a.Detail = workflow.PodEvictionFailed, "delete: "+err.Error()
			} else {
				a.GraceSeconds = int64(step.Grace / time.Second)
				moved = true
			}
		case workflow.PodEvicted:
			ev, err := s.p.Pods.Evict(ctx, step.Pod, -1)
			switch {
			case err != nil:
				a.Action, a.Detail = workflow.PodEvictionFailed, err.Error()
			case ev.Outcome == EvictionBlocked:
				a.Action, a.Detail = workflow.PodEvictionBlocked, ev.Message
			case ev.Outcome == EvictionPodGone:
				a.Action = workflow.PodGone
				moved = true
			default:
				moved = true
			}
		}
		nd.Counts[a.Action]++
		nd.Pods = append(nd.Pods, a)
	}
	return nd, moved, nil
}

// nextForcedDeletion is the earliest instant after now at which a pod of
// tiers reaches its forced deletion time (deadline minus its grace period,
// as PlanDrain decides); zero without a deadline or such a pod.
func nextForcedDeletion(tiers [][]corev1.Pod, now time.Time, deadline *time.Time) time.Time {
	var next time.Time
	if deadline == nil {
		return next
	}
	for _, tier := range tiers {
		for i := range tier {
			grace := defaultPodGrace
			if s := tier[i].Spec.TerminationGracePeriodSeconds; s != nil {
				grace = time.Duration(*s) * time.Second
			}
			at := deadline.Add(-grace)
			if at.After(now) && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
	}
	return next
}

// untilWake shortens a pause of poll seconds so the next round runs by the
// earliest non-zero wake (rounded up to a whole second, at least 1): a
// PodDisruptionBudget's backoff must not carry the drain past a pod's
// forced deletion time (Karpenter deletes it then, karpenter-spec.md
// section 5.2).
func untilWake(poll int, wakes []time.Time, now time.Time) int {
	for _, w := range wakes {
		if w.IsZero() {
			continue
		}
		left := int((w.Sub(now) + time.Second - 1) / time.Second)
		poll = min(poll, max(left, 1))
	}
	return poll
}

func remainingBefore(prev *workflow.DrainOutput, nodeClaim string) int {
	for _, n := range prev.Nodes {
		if n.NodeClaim == nodeClaim {
			return n.Remaining
		}
	}
	return 0
}

// pollSeconds is the pause after a round: DrainPollSeconds doubled per
// stalled round, capped at DrainPollMaxSeconds.
func pollSeconds(set workflow.Settings, stalls int) int {
	base, limit := set.DrainPollSeconds, set.DrainPollMaxSeconds
	if limit < base {
		limit = base
	}
	d := base
	for range min(stalls, 16) {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return d
}

// boundPods keeps at most maxPodsListed pod actions per node and
// maxPodsListedTotal in all; the rest go to Unlisted.
func boundPods(nodes []workflow.NodeDrain) ([]workflow.NodeDrain, bool) {
	truncated := false
	left := maxPodsListedTotal
	for i := range nodes {
		keep := min(len(nodes[i].Pods), maxPodsListed, left)
		if keep < len(nodes[i].Pods) {
			nodes[i].Unlisted = nodes[i].Pods[keep:]
			nodes[i].Pods = nodes[i].Pods[:keep]
			truncated = true
		}
		left -= keep
		if len(nodes[i].Counts) == 0 {
			nodes[i].Counts = nil
		}
	}
	return nodes, truncated
}
