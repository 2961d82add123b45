package disruption

import (
	"context"
	"fmt"
	"sort"
)

// drift replaces one drifted node per evaluation (karpenter:
// pkg/controllers/disruption/drift.go; karpenter-spec §6.4): candidates are
// taken oldest drift first (the Drifted condition's transition, else now),
// empty ones before the others; the first whose Drifted budget has room and
// whose pods all reschedule in a simulation (onto the other nodes and any
// number of new NodeClaims) becomes the command, with those new NodeClaims
// as replacements. Drift is eventual: pods protected by do-not-disrupt or a
// PodDisruptionBudget block it only when the NodeClaim has no
// terminationGracePeriod.
type drift struct{}

func (drift) reason() Method { return MethodDrifted }

func (drift) compute(ctx context.Context, e *evaluation) ([]Command, error) {
	var cands []*node
	for _, n := range e.nodes {
		if n.deleting || n.block != "" || n.drift == "" {
			continue
		}
		if n.podBlock != "" && n.claim.Spec.TerminationGracePeriod == nil {
			n.note(EventDisruptionBlocked, "drifted (%s) but %s; a terminationGracePeriod on the NodePool would let drift proceed", n.drift, n.podBlock)
			continue
		}
		cands = append(cands, n)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.empty != b.empty {
			return a.empty
		}
		if !a.driftSince.Equal(b.driftSince) {
			return a.driftSince.Before(b.driftSince)
		}
		return a.claim.Name < b.claim.Name
	})
	for _, n := range cands {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if e.available[n.pool.Name][MethodDrifted] <= 0 {
			n.note(noEvent, "drifted (%s), but %s", n.drift, e.describeBudget(n.pool.Name, MethodDrifted))
			continue
		}
		sim, why, err := e.simulate(ctx, []*node{n})
		if err != nil {
			return nil, err
		}
		if why != "" {
			// karpenter: Drift.ComputeCommands records DisruptionBlocked
			// when the candidate's pods do not all reschedule.
			n.note(EventDisruptionBlocked, "drifted (%s), but %s", n.drift, why)
			continue
		}
		c := Command{Method: MethodDrifted, Decision: DecisionDelete, Budgeted: true, SavingsPerHour: n.price}
		blocked := ""
		for _, nc := range sim.claims {
			r, why, err := e.replacement(nc, nil, nil)
			if err != nil {
				return nil, err
			}
			if why != "" {
				blocked = why
				break
			}
			c.Replacements = append(c.Replacements, r)
			c.SavingsPerHour -= r.Expected.PricePerHour
		}
		if blocked != "" {
			n.note(EventDisruptionBlocked, "drifted (%s), but %s", n.drift, blocked)
			continue
		}
		if len(c.Replacements) > 0 {
			c.Decision = DecisionReplace
		}
		c.Reason = fmt.Sprintf("NodeClaim %s drifted (%s): %s; its pods reschedule with %d replacement NodeClaim(s)",
			n.claim.Name, n.drift, n.driftDetail, len(c.Replacements))
		cmd := e.finish(&c, []*node{n})
		cmd.Candidates[0].DriftReason = n.drift
		cmd.ID = commandID(&cmd)
		return []Command{cmd}, nil
	}
	return nil, nil
}
