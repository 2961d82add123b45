package main

import (
	"context"
	"fmt"
	"io"
)

func runValidate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nodewright validate: not implemented")
	return 1
}
