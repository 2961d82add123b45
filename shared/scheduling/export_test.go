package scheduling

import "context"

// SolveKarpenterStyle exposes the Karpenter-style packing baseline to the
// external tests and benchmarks of this package.
var SolveKarpenterStyle = solveKarpenterStyle

// SolveCostOnly and SolveFirstFitOnly run one of the two strategies Solve
// picks between.
func SolveCostOnly(ctx context.Context, in Input) (Result, error) {
	s, err := solveWith(ctx, &in, stratCost)
	if err != nil {
		return Result{}, err
	}
	return s.result(), nil
}

// SolveFirstFitOnly runs the bounded first-fit strategy alone.
func SolveFirstFitOnly(ctx context.Context, in Input) (Result, error) {
	s, err := solveWith(ctx, &in, stratFirstFit)
	if err != nil {
		return Result{}, err
	}
	return s.result(), nil
}

// PlacementSearches runs the cost-driven strategy and returns how many full
// placement searches its scheduling loop made, and the plan.
func PlacementSearches(ctx context.Context, in Input) (int, Result, error) {
	s, err := solveWith(ctx, &in, stratCost)
	if err != nil {
		return 0, Result{}, err
	}
	return s.searches, s.result(), nil
}

// ClaimTypeScans runs the cost-driven strategy and returns how many times
// its scheduling loop scanned a claim's candidate list for a fitting type.
func ClaimTypeScans(ctx context.Context, in Input) (int, error) {
	s, err := solveWith(ctx, &in, stratCost)
	if err != nil {
		return 0, err
	}
	return s.typeScans, nil
}

// PreparedNodesBuilt runs the cost-driven strategy of p.Solve(in) and
// returns how many existing nodes it built (the others it skipped).
func PreparedNodesBuilt(ctx context.Context, p *Prepared, in Input) (int, error) {
	s, err := p.solveWith(ctx, &in, stratCost, p.sameNodes(&in))
	if err != nil {
		return 0, err
	}
	return len(s.nodes), nil
}
