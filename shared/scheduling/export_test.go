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
