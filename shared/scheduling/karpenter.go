package scheduling

import "context"

// solveKarpenterStyle solves with the same semantics as Solve but packs new
// claims exactly the way Karpenter's scheduler does (karpenter-spec §3.3
// step 2b; karpenter-benchmark.md §5.1): one pass in queue order, each pod
// on the in-flight claim with the fewest pods that can take it, else on a
// new claim of the first NodePool that can host it, and no improvement
// pass; each claim then launches its cheapest fitting type. Tests and
// benchmarks use it as the baseline Solve's plans are compared with.
func solveKarpenterStyle(ctx context.Context, in Input) (Result, error) {
	s, err := solveWith(ctx, &in, stratKarpenter)
	if err != nil {
		return Result{}, err
	}
	return s.result(), nil
}

// placeFirstFit is Karpenter's choice among this round's claims: the one
// with the fewest pods (then the oldest) that can take the pod, else a new
// claim of the first NodePool that can host it. The first-fit strategy of
// Solve bounds the claims it evaluates per pod by searchExamine; the exact
// baseline does not.
func (s *solver) placeFirstFit(pi *podInfo) bool {
	for i, examined := 0, 0; i < len(s.byPods.list); i++ {
		if s.strategy == stratFirstFit && examined == searchExamine {
			break
		}
		examined++
		if cd := s.evalClaim(pi, s.byPods.list[i]); cd.ok {
			s.commit(pi, &cd)
			return true
		}
	}
	for _, p := range s.pools {
		if cd, _ := s.evalNew(pi, p, false); cd.ok {
			s.commit(pi, &cd)
			return true
		}
	}
	return false
}
