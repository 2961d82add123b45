// Command nodewright is the operator CLI: it validates Karpenter manifests,
// plans what the solver would launch, and (later) drives the local stack.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand. run returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"validate":   {"validate NodePool and EC2NodeClass manifests", runValidate},
		"plan":       {"show the NodeClaims the solver would launch for a set of manifests", runPlan},
		"disruption": {"show the disruption commands an evaluation at an instant would start", runDisruption},
		"local":      {"run the whole system locally: local up|down|interrupt|rebalance|impair|ice", runLocal},
		"demo":       {"bring up the local stack, scale the guide's inflate deployment, show the timeline", runDemo},
	}
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "nodewright: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(ctx, args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: nodewright <command> [flags]")
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
}
