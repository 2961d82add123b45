package termination

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// Rollback is StepRollback: it undoes what a failed execution did, so the
// cluster is as before the command (karpenter-spec.md section 6.5; checklist
// item 32):
//
//   - Before the instances were terminated, each candidate this execution
//     still holds is given back: the disrupted taint, the execution's
//     annotation and the load-balancer exclusion it added leave the Node;
//     the claim, the DisruptionReason condition and a deletion mark with
//     its termination deadline leave the NodeClaim. A candidate another
//     execution took over is left alone. After termination, the
//     candidates' Nodes and NodeClaims are deleted instead (the instances
//     are gone).
//   - Before the command committed (BeginTermination), every replacement
//     is removed: its instance terminated, its Node and NodeClaim deleted.
//     After, the replacements are kept: pods may already run there.
//   - The budget leases are released.
//
// Every part is idempotent and tried even when another fails; the errors
// are returned joined, for a retry.
func (s *Service) Rollback(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.RollbackOutput, error) {
	out := workflow.RollbackOutput{Untainted: []string{}, RemovedReplacements: []string{}, KeptReplacements: []string{}}
	if st.Error != nil {
		out.Cause = st.Error.Error + ": " + st.Error.Cause
	}
	var errs []error
	if st.Terminated {
		if _, err := s.Delete(ctx, st, now); err != nil {
			errs = append(errs, err)
		}
	} else {
		for _, cand := range st.CandidateList() {
			given, err := s.giveBack(ctx, st, cand)
			if err != nil {
				errs = append(errs, err)
			}
			if given {
				out.Untainted = append(out.Untainted, cand.NodeClaim)
			}
		}
	}
	for _, r := range st.Replacements {
		if st.Committed {
			out.KeptReplacements = append(out.KeptReplacements, r.NodeClaim)
			continue
		}
		removed, err := s.removeReplacement(ctx, r.NodeClaim)
		if err != nil {
			errs = append(errs, err)
		}
		if removed {
			out.RemovedReplacements = append(out.RemovedReplacements, r.NodeClaim)
		}
	}
	if err := s.releaseLeases(ctx, st, now); err != nil {
		errs = append(errs, err)
	} else {
		out.BudgetReleased = st.Budget.Budgeted
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("rollback: %w", err)
	}
	return out, nil
}

// giveBack restores one candidate this execution holds and reports whether
// there was anything of the execution's on it.
func (s *Service) giveBack(ctx context.Context, st workflow.DisruptionState, cand workflow.Candidate) (bool, error) {
	given := false
	held := true
	_, err := s.updateClaim(ctx, cand.NodeClaim, func(c *v1.NodeClaim) (bool, error) {
		if ClaimOf(c).Holder != st.ID {
			held = false
			return false, nil
		}
		clearClaim(c, st.ID)
		if c.DeletionTimestamp != nil {
			c.DeletionTimestamp = nil
			delete(c.Annotations, v1.AnnotationNodeClaimTerminationTime)
		}
		given = true
		return true, nil
	})
	if err != nil && !errors.Is(err, v1.ErrNotFound) {
		return given, fmt.Errorf("give back nodeclaim %s: %w", cand.NodeClaim, err)
	}
	if cand.Node == "" {
		return given, nil
	}
	err = s.p.Nodes.UpdateNode(ctx, cand.Node, func(n *corev1.Node) error {
		if n.Annotations[AnnotationClaimHolder] != st.ID {
			return nil
		}
		if !held && !errors.Is(err, v1.ErrNotFound) {
			// The NodeClaim went to another execution, which will
			// re-taint; leave the Node to it.
			return nil
		}
		n.Spec.Taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), v1.IsDisruptedTaint)
		if len(n.Spec.Taints) == 0 {
			n.Spec.Taints = nil
		}
		n.Annotations = maps.Clone(n.Annotations)
		delete(n.Annotations, AnnotationClaimHolder)
		if n.Annotations[AnnotationExcludedFromLB] == "true" {
			delete(n.Annotations, AnnotationExcludedFromLB)
			if n.Labels[v1.LabelExcludeFromLoadBalancers] == LabelValueExcludeFromLB {
				n.Labels = maps.Clone(n.Labels)
				delete(n.Labels, v1.LabelExcludeFromLoadBalancers)
			}
		}
		given = true
		return nil
	})
	if err != nil && !errors.Is(err, v1.ErrNotFound) {
		return given, fmt.Errorf("give back node %s: %w", cand.Node, err)
	}
	return given, nil
}

// removeReplacement terminates a replacement's instance and deletes its
// Node and NodeClaim; it reports whether there was anything to remove.
func (s *Service) removeReplacement(ctx context.Context, name string) (bool, error) {
	c, err := s.p.Claims.GetNodeClaim(ctx, name)
	if errors.Is(err, v1.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove replacement %s: %w", name, err)
	}
	if _, id, _ := v1.ParseProviderID(c.Status.ProviderID); id != "" {
		if err := s.p.Instances.Terminate(ctx, id); err != nil {
			return false, fmt.Errorf("remove replacement %s: terminate %s: %w", name, id, err)
		}
	}
	if c.Status.NodeName != "" {
		if _, err := s.deleteNode(ctx, c.Status.NodeName); err != nil {
			return false, fmt.Errorf("remove replacement %s: %w", name, err)
		}
	}
	if _, err := s.deleteClaim(ctx, name); err != nil {
		return false, fmt.Errorf("remove replacement %s: %w", name, err)
	}
	return true, nil
}

// ContinueAsNew is StepContinueAsNew: it starts the execution's
// continuation, named ContinuationName(ID, Continuation+1), on
// stateMachine with the same command, ResumeAt ResumeAtDrain, Committed
// set and the step outputs dropped. The continuation keeps the root's ID,
// so it holds the same claims and leases. Starting a name that exists is
// success, so the step is idempotent.
func (s *Service) ContinueAsNew(ctx context.Context, st workflow.DisruptionState, stateMachine string) (workflow.ContinueOutput, error) {
	if s.p.Executions == nil {
		return workflow.ContinueOutput{}, errors.New("continue as new: no execution starter")
	}
	if stateMachine == "" {
		return workflow.ContinueOutput{}, workflow.NewError(workflow.ErrInvalidInput, errors.New("continue as new: no state machine"))
	}
	next := workflow.DisruptionState{DisruptionInput: st.DisruptionInput, Interruption: st.Interruption}
	next.ResumeAt = workflow.ResumeAtDrain
	next.Committed = true
	next.Continuation = st.Continuation + 1
	name := ContinuationName(st.ID, next.Continuation)
	if err := s.p.Executions.StartExecution(ctx, stateMachine, name, next); err != nil {
		return workflow.ContinueOutput{}, fmt.Errorf("continue as new %s: %w", name, err)
	}
	return workflow.ContinueOutput{Execution: name}, nil
}
