package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/deploy/demo"
	"github.com/nodewright/nodewright/local/stack"
)

// demoConfig is the parsed command line of `nodewright demo`.
type demoConfig struct {
	dir       string
	replicas  int
	bootDelay time.Duration
	timeout   time.Duration
	disrupt   bool
}

// runDemo runs the README's demo on a fresh local stack: it applies the
// guide-complete manifests, scales inflate up and down and prints a
// timeline. It exits 0 on success and 1 with the reason on failure; the
// stack is always stopped and its state removed, Ctrl-C included.
func runDemo(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nodewright demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg demoConfig
	fs.StringVar(&cfg.dir, "dir", "", "state directory (default: a new temporary directory)")
	fs.IntVar(&cfg.replicas, "replicas", 10, "inflate replicas to scale to")
	fs.DurationVar(&cfg.bootDelay, "boot-delay", stack.DefaultBootDelay, "simulated instance boot time")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.BoolVar(&cfg.disrupt, "disruption", true, "wire consolidation (the disruption state machine on aws-local-stepfunctions; needs make sfn-deps) and wait for it; false skips the scale-down step")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || cfg.replicas < 1 {
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	d := &demoRun{out: stdout, start: time.Now()}
	if err := d.run(ctx, cfg); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			err = fmt.Errorf("interrupted: %w", err)
		}
		d.say("FAILED: %v", err)
		fmt.Fprintf(stderr, "nodewright demo: %v\n", err)
		return 1
	}
	d.say("demo finished successfully; nothing is left running")
	return 0
}

type demoRun struct {
	out   io.Writer
	start time.Time
	last  string
}

// say prints one timeline line, prefixed with the elapsed seconds.
func (d *demoRun) say(format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// progressWriter prefixes the stack's own progress lines.
type progressWriter struct{ d *demoRun }

func (p progressWriter) Write(b []byte) (int, error) {
	p.d.say("%s", string(trimNL(b)))
	return len(b), nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func (d *demoRun) run(ctx context.Context, cfg demoConfig) (err error) {
	dir := cfg.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "nodewright-demo-")
		if err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = filepath.Join(tmp, "stack")
	}
	d.say("bringing the local stack up (state in %s)", dir)
	bootDelay := cfg.bootDelay
	if bootDelay == 0 {
		bootDelay = -1
	}
	s, err := stack.Up(ctx, stack.Options{Dir: dir, BootDelay: bootDelay, Disruption: cfg.disrupt, Progress: progressWriter{d}})
	if err != nil {
		return fmt.Errorf("local stack: %w", err)
	}
	defer func() {
		d.say("stopping the local stack (every process it started, by PID) and removing its state")
		if derr := s.Down(); derr != nil {
			err = errors.Join(err, fmt.Errorf("stop the local stack: %w", derr))
		}
	}()
	d.say("stack up: kubeconfig %s, region %s, zones %v", s.Kubeconfig, s.Region, s.Zones)
	d.say("prices: %s", s.PriceSource())
	d.say("intake API %s: IAM authorization is not checked locally", s.IntakeURL)

	for _, f := range []string{"ec2nodeclass.yaml", "nodepool.yaml", "inflate.yaml"} {
		data, err := demo.GuideComplete.ReadFile("guide-complete/" + f)
		if err != nil {
			return err
		}
		if err := s.Apply(ctx, data); err != nil {
			return fmt.Errorf("apply %s: %w", f, err)
		}
		d.say("applied deploy/demo/guide-complete/%s", f)
	}

	d.say("scaling deployment inflate to %d replicas (1 CPU, 1Gi each)", cfg.replicas)
	if err := scale(ctx, s, cfg.replicas); err != nil {
		return err
	}
	st, err := d.watch(ctx, s, "scale-up", 5*time.Minute, func(st stack.Status) bool {
		return st.RunningPods == cfg.replicas && st.PendingPods == 0
	})
	if err != nil {
		return err
	}
	d.say("all %d pods Running on %d nodes (%d NodeClaims), $%.4f/h", st.RunningPods, st.Nodes, st.NodeClaims, st.PricePerHour)

	d.say("scaling deployment inflate to 0 replicas")
	if err := scale(ctx, s, 0); err != nil {
		return err
	}
	if _, err := d.watch(ctx, s, "scale-down", time.Minute, func(st stack.Status) bool {
		return st.RunningPods == 0 && st.PendingPods == 0
	}); err != nil {
		return err
	}
	wired := s.Wired()
	if wired.Consolidation {
		if _, err := d.watch(ctx, s, "consolidation", 5*time.Minute, func(st stack.Status) bool { return st.Nodes == 0 }); err != nil {
			return err
		}
		d.say("consolidation removed every empty node")
	} else {
		if !cfg.disrupt {
			d.say("consolidation skipped (--disruption=false); the %d empty nodes stay ($%.4f/h) until the stack stops", st.Nodes, st.PricePerHour)
		} else {
			return fmt.Errorf("consolidation is not wired: the local Step Functions engine is missing (run make sfn-deps)")
		}
	}
	if !wired.Drift {
		d.say("NOT YET IMPLEMENTED: drift (changing the AMI) is not wired into the local stack yet; skipped")
	}
	if !wired.Interrupts {
		d.say("NOT YET IMPLEMENTED: Spot interruption handling is not wired into the local stack yet; skipped")
	}
	return nil
}

func scale(ctx context.Context, s *stack.Stack, replicas int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := s.Kube.AppsV1().Deployments("default").Patch(ctx, "inflate", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale inflate to %d: %w", replicas, err)
	}
	return nil
}

// watch prints a status line whenever the status changes (and every 10s)
// until done holds; it fails after timeout with the last status.
func (d *demoRun) watch(ctx context.Context, s *stack.Stack, phase string, timeout time.Duration, done func(stack.Status) bool) (stack.Status, error) {
	deadline := time.Now().Add(timeout)
	var st stack.Status
	lastPrint := time.Time{}
	for {
		var err error
		st, err = s.Observe(ctx)
		if err != nil && ctx.Err() != nil {
			return st, fmt.Errorf("%s: %w", phase, ctx.Err())
		}
		if err == nil {
			line := fmt.Sprintf("%-11s nodes %2d (ready %2d) | nodeclaims %2d | pods pending %2d running %2d | $%.4f/h",
				phase, st.Nodes, st.ReadyNodes, st.NodeClaims, st.PendingPods, st.RunningPods, st.PricePerHour)
			if line != d.last || time.Since(lastPrint) > 10*time.Second {
				d.say("%s", line)
				d.last, lastPrint = line, time.Now()
			}
			if done(st) {
				return st, nil
			}
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("%s: not done after %s (last: nodes %d, nodeclaims %d, pending %d, running %d; err %v)",
				phase, timeout, st.Nodes, st.NodeClaims, st.PendingPods, st.RunningPods, err)
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("%s: %w", phase, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
