// Command nodewright is the operator CLI: it validates Karpenter manifests,
// plans what the solver would launch, shows the disruption commands an
// evaluation would start, and drives the local stack. Commands are cobra
// commands with their flags on pflag (help on stdout with exit 0, shell
// completion of commands, flags and flag values, version); flags still take
// one dash or two (-dir, --dir) as they did under Go's flag package
// (goFlagArgs).
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
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodewright/nodewright/shared/kube"
)

// Exit codes of the CLI.
const (
	exitOK            = 0
	exitFailed        = 1
	exitUsage         = 2
	exitUnschedulable = 3
)

// cli is what every command writes to and reads from; a command's exit
// code goes to *code.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	code           *int
	// live reads the cluster snapshot of `rollout --from-cluster` as one List
	// manifest (kube.LiveSnapshot; tests give a fake cluster).
	live func(ctx context.Context, kubeconfig, kubeContext string) ([]byte, error)
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit code. With no
// arguments it prints the usage on stderr and returns 2.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	code := exitOK
	root := newRoot(cli{stdin: stdin, stdout: stdout, stderr: stderr, code: &code, live: kube.LiveSnapshot})
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage()
		return exitUsage
	}
	if cmd, _, err := root.Find(args); err == nil {
		args = goFlagArgs(cmd.Flags(), args)
	}
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "nodewright: %v\n", err)
		fmt.Fprintln(stderr, "Run 'nodewright --help' for usage.")
		return exitUsage
	}
	return code
}

// newRoot builds the command tree.
func newRoot(c cli) *cobra.Command {
	root := &cobra.Command{
		Use:   "nodewright",
		Short: "nodewright: Karpenter-compatible node autoscaling for EKS, off the cluster",
		Long: `nodewright validates Karpenter v1 NodePool and EC2NodeClass manifests, shows what its solver
would launch for them (plan) and what disruption would do now (disruption), replaces
protected nodes by hand through the deployed API (replace), and runs the whole system on
this machine (local, demo).

Exit codes: 0 success, 1 the command failed, 2 usage error, 3 plan --fail-unschedulable
left pods unschedulable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	// A bad flag of a command: what is wrong, then the command's usage line
	// and flags, on stderr, exit 2 (as Go's flag package did).
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		fmt.Fprintf(c.stderr, "%s: %v\nusage: %s\n%s", cmd.CommandPath(), err, cmd.UseLine(), cmd.LocalFlags().FlagUsages())
		*c.code = exitUsage
		return nil
	})
	root.SetIn(c.stdin)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.AddCommand(newDemoCommand(c), newDisruptionCommand(c), newLocalCommand(c), newPlanCommand(c),
		newReplaceCommand(c), newRolloutCommand(c), newValidateCommand(c), newVersionCommand(c))
	return root
}

// goFlagArgs rewrites the spellings Go's flag package accepted and pflag
// reads differently, for the flags of fs: -name[=v] becomes --name[=v] for a
// flag with a long name (and -help), --x[=v] becomes -x[=v] for a one-letter
// shorthand without a long flag of that name. Anything after "--" is left
// alone; so is the value of a flag given as the next argument.
func goFlagArgs(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case strings.HasPrefix(a, "--") || !strings.HasPrefix(a, "-") || len(name) < 2:
			if strings.HasPrefix(a, "--") && len(name) == 1 && fs.Lookup(name) == nil && fs.ShorthandLookup(name) != nil {
				a = a[1:]
			}
		case name == "help" || fs.Lookup(name) != nil:
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// addOutputFlag declares -o/--output (table, json or yaml) with its value
// completion.
func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "table", "output `format`: "+outputFormats)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

// addFileFlag declares -f/--filename, the repeatable manifest flag, with
// file completion of YAML and JSON files (and directories).
func addFileFlag(cmd *cobra.Command, files *stringList, usage string) {
	cmd.Flags().VarP(files, "filename", "f", usage)
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
}
