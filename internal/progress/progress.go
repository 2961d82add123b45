// Package progress runs a long build and keeps its console alive: it says
// at the start how long the work usually takes, then, at least every
// Interval until the child exits, prints the elapsed time and the package
// the child is building. The package names come from `go build -v`, which
// prints each import path on stderr as it is built; the wrapper keeps those
// lines off the console (they are thousands for the control plane) and
// passes every other line through, so compile errors still show.
package progress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultInterval is the heartbeat period: the longest a cold build stays
// silent.
const DefaultInterval = 30 * time.Second

// ColdBuild is what a cold build of the local stack usually takes, from
// measurements on 2-core machines shared with other builds: about 19 min
// from nothing cached to the test stage of `make test` when lightly
// loaded, about 80 min when heavily loaded (the control plane,
// k8s.io/kubernetes, is most of it); seconds when the build cache is warm.
const ColdBuild = "a cold build usually takes ~19 min on a lightly loaded 2-core machine, ~80 min on a heavily loaded one; seconds when cached"

// Options say what is built and where the progress lines go.
type Options struct {
	// Label names the work in every line ("controlplane", "forwarder").
	Label string
	// Usually is the start line's estimate, e.g. "a cold build usually
	// takes 19-80 min"; empty prints no estimate.
	Usually string
	// Interval is the heartbeat period; zero means DefaultInterval.
	Interval time.Duration
	// Out receives the start, heartbeat and end lines and the child's
	// stdout and non-package stderr lines.
	Out io.Writer
}

// packagePath is a `go build -v` line: one import path and nothing else
// (github.com/x/y, k8s.io/api/core/v1, net/http, command-line-arguments).
var packagePath = regexp.MustCompile(`^[A-Za-z0-9_.~-]+(/[A-Za-z0-9_.~+-]+)*$`)

// Run starts cmd (its Stdout and Stderr must be unset), prints
// "<label>: building (<usually>)" at once, a heartbeat
// "<label>: still building after <elapsed>, at <package>" every Interval,
// and "<label>: done in <elapsed>" at the end. It returns cmd's error
// (an *exec.ExitError for a non-zero exit), wrapped with the label; a
// cancelled ctx kills the child as exec.CommandContext does.
func Run(ctx context.Context, cmd *exec.Cmd, opt Options) error {
	if cmd.Stdout != nil || cmd.Stderr != nil {
		return errors.New("progress: cmd.Stdout and cmd.Stderr must be unset")
	}
	interval := opt.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	var mu sync.Mutex // guards Out and last
	last := ""
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(opt.Out, format+"\n", args...)
	}
	start := time.Now()
	if opt.Usually != "" {
		say("%s: building (%s)", opt.Label, opt.Usually)
	} else {
		say("%s: building", opt.Label)
	}

	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("%s: %w", opt.Label, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("%s: %w", opt.Label, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start: %w", opt.Label, err)
	}
	var readers sync.WaitGroup
	copyLines := func(r io.Reader, packages bool) {
		defer readers.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			if packages && packagePath.MatchString(strings.TrimSpace(line)) {
				last = strings.TrimSpace(line)
			} else {
				fmt.Fprintln(opt.Out, line)
			}
			mu.Unlock()
		}
	}
	readers.Add(2)
	go copyLines(stdout, false)
	go copyLines(stderr, true)

	done := make(chan error, 1)
	go func() {
		readers.Wait() // the pipes must be drained before Wait closes them
		done <- cmd.Wait()
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	cancelled := ctx.Done()
	for {
		select {
		case err := <-done:
			elapsed := time.Since(start).Round(time.Second)
			if err != nil {
				say("%s: failed after %s", opt.Label, elapsed)
				return fmt.Errorf("%s: %w", opt.Label, err)
			}
			say("%s: done in %s", opt.Label, elapsed)
			return nil
		case <-tick.C:
			mu.Lock()
			at := last
			mu.Unlock()
			elapsed := time.Since(start).Round(time.Second)
			if at == "" {
				say("%s: still building after %s", opt.Label, elapsed)
			} else {
				say("%s: still building after %s, at %s", opt.Label, elapsed, at)
			}
		case <-cancelled:
			// exec.CommandContext kills the child; wait for it to end.
			cancelled = nil
		}
	}
}
