package disruption

import (
	"context"
	"fmt"
	"slices"
)

// Validate re-checks a command against a later snapshot, as Karpenter does
// after its 15-second wait and as the executor must before tainting and
// draining (karpenter-spec §6.4, 11.3 item 25). It returns why cmd must be
// abandoned, or "" when it still holds:
//
//   - Expired and CapacityBlockExpiring commands always hold (both are
//     forceful).
//   - Every candidate must still exist, not be leaving, and pass the
//     candidate rules of Evaluate (initialized, no do-not-disrupt, not
//     nominated, PodDisruptionBudgets), except that Drifted candidates with
//     a terminationGracePeriod may have blocking pods.
//   - Empty: each candidate is still empty and consolidatable (a pod that
//     arrived in the meantime voids the command).
//   - Drifted: each candidate is still drifted.
//   - Underutilized: each candidate is still a consolidation candidate, and
//     a new simulation still needs no new NodeClaim (delete), or exactly one
//     whose instance types include all of the command's (replace).
//
// Budgets are not re-checked: the executor holds the budget it acquired
// for cmd. in.InFlight may list cmd itself; it is ignored there. The error
// is as for Evaluate.
func Validate(ctx context.Context, in Input, cmd Command) (string, error) {
	if cmd.Method.Forceful() {
		return "", nil
	}
	in.InFlight = slices.DeleteFunc(slices.Clone(in.InFlight), func(c Command) bool { return c.ID == cmd.ID })
	e, err := newEvaluation(in)
	if err != nil {
		return "", err
	}
	e.expire()
	e.expireCapacityBlocks()
	e.available, e.budgetReport = e.computeBudgets()
	if err := e.assess(); err != nil {
		return "", err
	}
	var cands []*node
	for _, c := range cmd.Candidates {
		n := e.byName[c.NodeClaim]
		if n == nil || n.claim.Name != c.NodeClaim {
			return fmt.Sprintf("NodeClaim %s no longer exists", c.NodeClaim), nil
		}
		if n.deleting {
			return fmt.Sprintf("NodeClaim %s is already leaving: %s", c.NodeClaim, n.why), nil
		}
		if n.block != "" {
			return fmt.Sprintf("NodeClaim %s is no longer a candidate: %s", c.NodeClaim, n.block), nil
		}
		switch cmd.Method {
		case MethodEmpty:
			if !n.empty {
				return fmt.Sprintf("NodeClaim %s is no longer empty: %d pods to reschedule", c.NodeClaim, len(n.reschedulable)), nil
			}
			if why, _ := e.consolidationBlock(n, false); why != "" {
				return fmt.Sprintf("NodeClaim %s: %s", c.NodeClaim, why), nil
			}
		case MethodDrifted:
			if n.drift == "" {
				return fmt.Sprintf("NodeClaim %s is no longer drifted", c.NodeClaim), nil
			}
			if n.podBlock != "" && n.claim.Spec.TerminationGracePeriod == nil {
				return fmt.Sprintf("NodeClaim %s: %s", c.NodeClaim, n.podBlock), nil
			}
		case MethodUnderutilized:
			if why, _ := e.consolidationBlock(n, true); why != "" {
				return fmt.Sprintf("NodeClaim %s: %s", c.NodeClaim, why), nil
			}
		default:
			return "", fmt.Errorf("validate command %s: unknown method %q", cmd.ID, cmd.Method)
		}
		cands = append(cands, n)
	}
	if cmd.Method != MethodUnderutilized {
		return "", nil
	}
	sim, why, err := e.simulate(ctx, cands)
	if err != nil || why != "" {
		return why, err
	}
	switch {
	case cmd.Decision == DecisionDelete && len(sim.claims) > 0:
		return fmt.Sprintf("the candidates' pods now need %d new NodeClaim(s)", len(sim.claims)), nil
	case cmd.Decision == DecisionReplace && len(sim.claims) != 1:
		return fmt.Sprintf("the candidates' pods now need %d new NodeClaims instead of one", len(sim.claims)), nil
	case cmd.Decision == DecisionReplace && len(cmd.Replacements) == 1:
		for _, t := range cmd.Replacements[0].InstanceTypes {
			if !slices.Contains(sim.claims[0].InstanceTypes, t) {
				return fmt.Sprintf("instance type %s no longer fits the replacement", t), nil
			}
		}
	}
	return "", nil
}
