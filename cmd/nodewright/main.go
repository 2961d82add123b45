// Command nodewright is the operator CLI: it validates Karpenter manifests,
// plans what the solver would launch, shows the disruption commands an
// evaluation would start, and drives the local stack. Commands are cobra
// commands (help on stdout with exit 0, shell completion, version); each
// command keeps its own Go flag set, so flags take one dash or two
// (-dir, --dir) as they always did.
//
// Exit codes: 0 success (and help); 1 the command failed (invalid
// manifests, an unreadable input, a failed stack); 2 a usage error (an
// unknown command or flag, a bad flag value); 3 `plan --fail-unschedulable`
// left pods unschedulable.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"
)

// Exit codes of the CLI.
const (
	exitOK            = 0
	exitFailed        = 1
	exitUsage         = 2
	exitUnschedulable = 3
)

// command is one subcommand. run returns the process exit code; it parses
// its own flags (a Go flag set) and writes its usage to stderr, which is
// stdout when help was asked for.
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

// run executes the command line args and returns the exit code. With no
// arguments it prints the usage on stderr and returns 2.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	code := exitOK
	root := newRoot(stdin, stdout, stderr, &code)
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage()
		return exitUsage
	}
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "nodewright: %v\n", err)
		fmt.Fprintln(stderr, "Run 'nodewright --help' for usage.")
		return exitUsage
	}
	return code
}

// newRoot builds the command tree; a command's exit code goes to *code.
func newRoot(stdin io.Reader, stdout, stderr io.Writer, code *int) *cobra.Command {
	root := &cobra.Command{
		Use:   "nodewright",
		Short: "nodewright: Karpenter-compatible node autoscaling for EKS, off the cluster",
		Long: `nodewright validates Karpenter v1 NodePool and EC2NodeClass manifests, shows what its solver
would launch for them (plan) and what disruption would do now (disruption), and runs the
whole system on this machine (local, demo).

Exit codes: 0 success, 1 the command failed, 2 usage error, 3 plan --fail-unschedulable
left pods unschedulable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		root.AddCommand(flagSetCommand(name, cmds[name], stdin, stdout, stderr, code))
	}
	root.AddCommand(newVersionCommand(stdout, stderr, code))
	return root
}

// flagSetCommand wraps a command that parses its own flags: cobra passes
// every argument through, and help (-h, --help, `nodewright help <cmd>`)
// is the command's own usage, on stdout, with exit 0.
func flagSetCommand(name string, c command, stdin io.Reader, stdout, stderr io.Writer, code *int) *cobra.Command {
	cc := &cobra.Command{
		Use:                name + " [flags]",
		Short:              c.summary,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			errOut := stderr
			if wantsHelp(args) {
				errOut = stdout
			}
			*code = c.run(cmd.Context(), args, stdin, stdout, errOut)
			return nil
		},
	}
	cc.SetHelpFunc(func(*cobra.Command, []string) {
		// -h returns before the command uses its context.
		*code = c.run(context.Background(), []string{"-h"}, stdin, stdout, stdout)
	})
	return cc
}

// wantsHelp reports whether args ask for help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}
