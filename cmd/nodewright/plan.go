package main

import (
	"context"
	"fmt"
	"io"
)

func runPlan(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nodewright plan: not implemented")
	return 1
}
