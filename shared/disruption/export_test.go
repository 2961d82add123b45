package disruption

import "context"

// EvaluateCounted is Evaluate, also returning how many simulations it ran;
// exhaustive turns off the shortcut that skips simulations bound to fail.
func EvaluateCounted(ctx context.Context, in Input, exhaustive bool) (Result, int, error) {
	return evaluate(ctx, in, exhaustive)
}
