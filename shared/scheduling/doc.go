// Package scheduling is nodewright's solver: it places pending pods onto
// existing nodes, in-flight NodeClaims or new NodeClaims, following
// Karpenter's scheduling semantics, and sizes new NodeClaims by cost.
package scheduling

import (
	"context"
	"errors"
)

// Solve places pods onto existing capacity or new NodeClaims. It performs no
// I/O; everything it needs is in Input, and Result is safe to marshal to JSON.
// The error return is for invalid input or cancellation only.
func Solve(ctx context.Context, in Input) (Result, error) {
	return Result{}, errors.New("scheduling: not implemented")
}
