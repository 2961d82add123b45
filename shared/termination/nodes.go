package termination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// Taint is StepTaint: it puts karpenter.sh/disrupted:NoSchedule on every
// candidate Node, annotated with the execution's name, so that nothing new
// is scheduled there (karpenter-spec.md sections 1.5 and 6.5). A candidate
// without a Node is skipped. A Node that is gone fails the command with
// workflow.ErrNoLongerEligible, except for the forceful methods, which
// carry on. It is idempotent.
//
// It first renews the execution's claims and leases (a lapsed one fails
// with workflow.ErrNoLongerEligible) and, for the budgeted methods,
// re-validates every candidate against the current pods and annotations
// as Revalidate does, tainting nothing when one is no longer eligible:
// Karpenter validates a command before it taints (karpenter-spec.md
// section 6.4), so a do-not-disrupt pod that landed after the decision
// never sees its node tainted. Revalidate runs again after the taint, for
// what arrived in between.
func (s *Service) Taint(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	out := workflow.NodesOutput{Nodes: []workflow.NodeOutcome{}}
	if err := s.renew(ctx, st, now); err != nil {
		return out, err
	}
	if workflow.IsBudgetedMethod(st.Method) {
		if checked, err := s.Revalidate(ctx, st, now); err != nil {
			return checked, fmt.Errorf("before the taint: %w", err)
		}
	}
	for _, cand := range st.CandidateList() {
		o := workflow.NodeOutcome{NodeClaim: cand.NodeClaim, Node: cand.Node}
		if cand.Node == "" {
			o.Outcome = "no node: nothing to taint"
			out.Nodes = append(out.Nodes, o)
			continue
		}
		var already bool
		err := s.p.Nodes.UpdateNode(ctx, cand.Node, func(n *corev1.Node) error {
			already = v1.HasDisruptedTaint(n) && n.Annotations[AnnotationClaimHolder] == st.ID
			if !v1.HasDisruptedTaint(n) {
				taint := v1.DisruptedTaint()
				taint.TimeAdded = &metav1.Time{Time: now}
				n.Spec.Taints = append(n.Spec.Taints, taint)
			}
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationClaimHolder] = st.ID
			return nil
		})
		switch {
		case errors.Is(err, v1.ErrNotFound) && workflow.IsBudgetedMethod(st.Method):
			return out, workflow.NewError(workflow.ErrNoLongerEligible, fmt.Errorf("taint: node %s is gone", cand.Node))
		case errors.Is(err, v1.ErrNotFound):
			o.Outcome = "node gone"
		case err != nil:
			return out, fmt.Errorf("taint: %w", err)
		case already:
			o.Outcome = "already tainted"
		default:
			o.Outcome = "tainted " + v1.TaintKeyDisrupted + ":NoSchedule"
		}
		out.Nodes = append(out.Nodes, o)
	}
	return out, nil
}

// Revalidate is StepRevalidate: after the candidates are tainted, it
// checks that each may still be disrupted as decided (Karpenter validates
// emptiness and consolidation commands before acting, karpenter-spec.md
// section 6.4; checklist items 25 and 28):
//
//   - its NodeClaim still exists, is not being deleted and is held by this
//     execution; its Node still exists;
//   - neither carries karpenter.sh/do-not-disrupt: "true";
//   - no pod the drain would move arrived after the decision (bound after
//     DecidedAt), and an Empty candidate has no such pod at all;
//   - no pod has an active do-not-disrupt annotation, unless the method is
//     Drifted and the NodeClaim has a terminationGracePeriod.
//
// The forceful methods (Expired, Interrupted) and Manual executions are
// not re-validated. A
// failed check returns workflow.ErrNoLongerEligible naming every reason.
func (s *Service) Revalidate(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	out := workflow.NodesOutput{Nodes: []workflow.NodeOutcome{}}
	var reasons []string
	for _, cand := range st.CandidateList() {
		o := workflow.NodeOutcome{NodeClaim: cand.NodeClaim, Node: cand.Node}
		if st.Method == workflow.MethodManual {
			o.Outcome = "not re-validated: an operator asked for this replacement"
			out.Nodes = append(out.Nodes, o)
			continue
		}
		if !workflow.IsBudgetedMethod(st.Method) {
			o.Outcome = "not re-validated: " + st.Method + " is forceful"
			out.Nodes = append(out.Nodes, o)
			continue
		}
		why, moving, err := s.revalidate(ctx, st, cand, now)
		if err != nil {
			return out, err
		}
		if len(why) > 0 {
			reasons = append(reasons, why...)
			o.Outcome = "no longer eligible: " + strings.Join(why, "; ")
		} else {
			o.Outcome = fmt.Sprintf("eligible; pods to move: %d", moving)
		}
		out.Nodes = append(out.Nodes, o)
	}
	if len(reasons) > 0 {
		return out, workflow.NewError(workflow.ErrNoLongerEligible, errors.New(strings.Join(reasons, "; ")))
	}
	return out, nil
}

// revalidate returns why cand may no longer be disrupted (nothing when it
// may) and how many pods its drain would move.
func (s *Service) revalidate(ctx context.Context, st workflow.DisruptionState, cand workflow.Candidate, now time.Time) ([]string, int, error) {
	c, err := s.p.Claims.GetNodeClaim(ctx, cand.NodeClaim)
	if errors.Is(err, v1.ErrNotFound) {
		return []string{"nodeclaim " + cand.NodeClaim + " is gone"}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("revalidate: %w", err)
	}
	var why []string
	if c.DeletionTimestamp != nil {
		why = append(why, "nodeclaim "+c.Name+" is being deleted")
	}
	if h := ClaimOf(&c).Holder; h != st.ID {
		why = append(why, fmt.Sprintf("nodeclaim %s is held by %q, not this execution", c.Name, h))
	}
	if c.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
		why = append(why, "nodeclaim "+c.Name+" is annotated "+v1.AnnotationDoNotDisrupt)
	}
	if cand.Node == "" {
		return why, 0, nil
	}
	n, err := s.p.Nodes.GetNode(ctx, cand.Node)
	if errors.Is(err, v1.ErrNotFound) {
		return append(why, "node "+cand.Node+" is gone"), 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("revalidate: %w", err)
	}
	if n.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
		why = append(why, "node "+n.Name+" is annotated "+v1.AnnotationDoNotDisrupt)
	}
	pods, err := s.p.Pods.ListPodsOnNode(ctx, cand.Node)
	if err != nil {
		return nil, 0, fmt.Errorf("revalidate: %w", err)
	}
	tgp := c.Spec.TerminationGracePeriod != nil
	moving := 0
	for _, tier := range s.p.Rules.DrainOrder(pods, now) {
		for i := range tier {
			p := &tier[i]
			name := p.Namespace + "/" + p.Name
			reschedulable := !ownedByDaemonSet(p)
			if reschedulable {
				moving++
			}
			switch {
			case reschedulable && st.Method == workflow.MethodEmpty:
				why = append(why, "pod "+name+" arrived on the empty node "+n.Name)
			case reschedulable && scheduledAt(p).After(st.DecidedAt):
				why = append(why, fmt.Sprintf("pod %s arrived on %s at %s, after the decision", name, n.Name, scheduledAt(p).UTC().Format(time.RFC3339)))
			}
			if s.p.Rules.DoNotDisrupt(p, now) && (st.Method != workflow.MethodDrifted || !tgp) {
				why = append(why, "pod "+name+" has an active "+v1.AnnotationDoNotDisrupt)
			}
		}
	}
	return why, moving, nil
}

// scheduledAt is when a pod was bound: its PodScheduled condition's last
// transition, else its creation.
func scheduledAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
}

// BeginTermination is StepBeginTermination, the point of no return: each
// candidate NodeClaim is marked deleting (deletionTimestamp now) and, when
// it has a terminationGracePeriod, annotated
// karpenter.sh/nodeclaim-termination-timestamp = now + that period, the
// drain's deadline (karpenter-spec.md section 5.2; for a Manual execution
// the period is the operator's ForceAfterSeconds instead, and no deadline
// without it, whatever the terminationGracePeriod); each Node gets
// node.kubernetes.io/exclude-from-external-load-balancers=karpenter. A
// NodeClaim already marked keeps its deadline, so a repeated call changes
// nothing. It first renews the execution's claims and leases: a lapsed
// one fails it with workflow.ErrNoLongerEligible, before anything is
// marked.
func (s *Service) BeginTermination(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	out := workflow.NodesOutput{Nodes: []workflow.NodeOutcome{}}
	if err := s.renew(ctx, st, now); err != nil {
		return out, err
	}
	for _, cand := range st.CandidateList() {
		o := workflow.NodeOutcome{NodeClaim: cand.NodeClaim, Node: cand.Node, Outcome: "terminating"}
		c, err := s.updateClaim(ctx, cand.NodeClaim, func(c *v1.NodeClaim) (bool, error) {
			changed := false
			if c.DeletionTimestamp == nil {
				c.DeletionTimestamp = &metav1.Time{Time: now}
				changed = true
			}
			if period, ok := terminationPeriod(c, st); ok && c.Annotations[v1.AnnotationNodeClaimTerminationTime] == "" {
				if c.Annotations == nil {
					c.Annotations = map[string]string{}
				}
				c.Annotations[v1.AnnotationNodeClaimTerminationTime] = now.Add(period).UTC().Format(time.RFC3339)
				changed = true
			}
			return changed, nil
		})
		switch {
		case errors.Is(err, v1.ErrNotFound):
			o.Outcome = "nodeclaim gone"
		case err != nil:
			return out, fmt.Errorf("begin termination: %w", err)
		default:
			o.Deadline = terminationDeadline(&c, st)
		}
		if cand.Node != "" {
			err := s.p.Nodes.UpdateNode(ctx, cand.Node, func(n *corev1.Node) error {
				if _, ok := n.Labels[v1.LabelExcludeFromLoadBalancers]; ok {
					return nil
				}
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				if n.Annotations == nil {
					n.Annotations = map[string]string{}
				}
				n.Labels[v1.LabelExcludeFromLoadBalancers] = LabelValueExcludeFromLB
				n.Annotations[AnnotationExcludedFromLB] = "true"
				return nil
			})
			if err != nil && !errors.Is(err, v1.ErrNotFound) {
				return out, fmt.Errorf("begin termination: %w", err)
			}
		}
		out.Nodes = append(out.Nodes, o)
	}
	return out, nil
}

// terminationPeriod is how long the drain of c may wait before it deletes
// the pods PodDisruptionBudgets protect: c's terminationGracePeriod, except
// for a Manual execution, where only the operator's ForceAfterSeconds
// goes past them. ok is false for no limit.
func terminationPeriod(c *v1.NodeClaim, st workflow.DisruptionState) (time.Duration, bool) {
	if st.Method == workflow.MethodManual {
		if st.Manual == nil || st.Manual.ForceAfterSeconds <= 0 {
			return 0, false
		}
		return time.Duration(st.Manual.ForceAfterSeconds) * time.Second, true
	}
	if tgp := c.Spec.TerminationGracePeriod; tgp != nil {
		return tgp.Duration, true
	}
	return 0, false
}

// terminationDeadline is when the drain of c stops waiting: its
// karpenter.sh/nodeclaim-termination-timestamp, or for an interruption
// the instance's deadline when that is earlier; nil for none.
func terminationDeadline(c *v1.NodeClaim, st workflow.DisruptionState) *time.Time {
	var dl *time.Time
	if t, err := time.Parse(time.RFC3339, c.Annotations[v1.AnnotationNodeClaimTerminationTime]); err == nil {
		t = t.UTC()
		dl = &t
	}
	if in := st.Interruption; in != nil && !in.Deadline.IsZero() && (dl == nil || in.Deadline.Before(*dl)) {
		t := in.Deadline.UTC()
		dl = &t
	}
	return dl
}
