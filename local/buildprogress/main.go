// Command buildprogress runs a long build step of the Makefile through
// progress.Run: it says at the start how long a cold build usually takes
// (progress.ColdBuild), prints the elapsed time and the package being built
// (from `go build -v`) at least every 30 s, and exits with the child's
// status. It imports the standard library and internal/progress only, so
// `go run` builds it in seconds even when nothing is cached.
//
//	go run ./local/buildprogress -label controlplane -- ./local/tools/build.sh .cache/bin
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/nodewright/nodewright/internal/progress"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run returns the exit code: the child's, 2 for a usage error, 1 when the
// child could not start.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("buildprogress", flag.ContinueOnError)
	fs.SetOutput(stderr)
	label := fs.String("label", "build", "what is built, at the start of every line")
	interval := fs.Duration("interval", progress.DefaultInterval, "heartbeat period")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: buildprogress [-label NAME] [-interval D] -- COMMAND [ARGS...]")
		return 2
	}
	cmd := exec.CommandContext(ctx, fs.Arg(0), fs.Args()[1:]...)
	cmd.WaitDelay = 10 * time.Second
	err := progress.Run(ctx, cmd, progress.Options{Label: *label, Usually: progress.ColdBuild, Interval: *interval, Out: stdout})
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintln(stderr, err)
		return 1
	}
}
