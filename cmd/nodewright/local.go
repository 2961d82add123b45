package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
)

// defaultStackDir is where `nodewright local` keeps its state unless --dir
// says otherwise: .cache/local-stack at the repository root (ignored by git).
func defaultStackDir() string {
	if root, err := stack.FindRepoRoot(); err == nil {
		return filepath.Join(root, ".cache", "local-stack")
	}
	return filepath.Join(os.TempDir(), "nodewright-local-stack")
}

const localUsage = `usage: nodewright local <subcommand> [flags]
  up [--detach] [--dir D] [--region R] [--zones Z,...] [--boot-delay 5s]
                         start the local stack; without --detach it runs until Ctrl-C
  down [--dir D]         stop everything the stack started and remove its state
  interrupt NODE         issue a Spot interruption warning for NODE's instance
  rebalance NODE         issue a rebalance recommendation for NODE's instance
  impair NODE [--check instance|system]
                         fail a status check of NODE's instance, dated two minutes back so the
                         next instance-status poll drains the node forcefully
  ice TYPE ZONE CAPACITY mark an offering out of capacity (InsufficientInstanceCapacity); --clear lifts it
NODE is a Node name, an instance ID or a providerID.`

// runLocal dispatches `nodewright local` subcommands.
func runLocal(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, localUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "up":
		err = localUp(ctx, args[1:], stdout, stderr)
	case "serve":
		err = localServe(ctx, args[1:], stderr)
	case "down":
		err = localDown(args[1:], stdout, stderr)
	case "interrupt", "rebalance", "impair", "ice":
		err = localInject(ctx, args[0], args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "nodewright local: unknown subcommand %q\n%s\n", args[0], localUsage)
		return 2
	}
	switch {
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "nodewright local %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// upFlags are the flags of `local up` and `local serve`.
type upFlags struct {
	dir, region string
	zones       stringList
	bootDelay   time.Duration
	detach      bool
	disruption  bool
}

func parseUpFlags(name string, args []string, stderr io.Writer) (upFlags, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f upFlags
	fs.StringVar(&f.dir, "dir", defaultStackDir(), "state directory")
	fs.StringVar(&f.region, "region", stack.DefaultRegion, "region of the EC2 simulator")
	fs.Var(&f.zones, "zones", "availability zones (comma-separated; default: the simulator's zones of the region)")
	fs.DurationVar(&f.bootDelay, "boot-delay", stack.DefaultBootDelay, "simulated instance boot time before its Node registers")
	fs.BoolVar(&f.detach, "detach", false, "start in the background and return")
	fs.BoolVar(&f.disruption, "disruption", true, "wire consolidation, drift, expiry and interruption handling (the local Step Functions engine from make sfn-deps; without it the stack runs provisioning only and says so); --disruption=false for provisioning only")
	if err := fs.Parse(args); err != nil {
		return upFlags{}, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", name, fs.Args())
		return upFlags{}, errUsage
	}
	if f.bootDelay == 0 {
		f.bootDelay = -1 // zero means "no delay" on the command line
	}
	return f, nil
}

func (f upFlags) options(detach bool, progress io.Writer) stack.Options {
	return stack.Options{Dir: f.dir, Region: f.region, Zones: f.zones, BootDelay: f.bootDelay, Detach: detach, Disruption: f.disruption, Progress: progress}
}

func localUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseUpFlags("nodewright local up", args, stderr)
	if err != nil {
		return err
	}
	if f.detach {
		return localUpDetached(ctx, f, args, stdout)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := stack.Up(ctx, f.options(false, stdout))
	if err != nil {
		return err
	}
	printHowTo(stdout, s.Info, s.PriceSource(), false)
	fmt.Fprintln(stdout, "Press Ctrl-C to stop the stack and remove its state.")
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping the local stack ...")
	return s.Down()
}

// localUpDetached re-runs this binary as `local serve` in a new session,
// waits for its stack.json and prints how to use the stack.
func localUpDetached(ctx context.Context, f upFlags, args []string, stdout io.Writer) error {
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if _, err := stack.ReadInfo(dir); err == nil {
		return fmt.Errorf("state dir %s holds a stack already; run `nodewright local down --dir %s` first", dir, dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own executable: %w", err)
	}
	logPath := filepath.Join(dir, "logs", "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("serve log: %w", err)
	}
	defer logFile.Close()
	serveArgs := []string{"local", "serve", "--dir", dir, "--region", f.region, "--boot-delay", f.bootDelay.String()}
	if len(f.zones) > 0 {
		serveArgs = append(serveArgs, "--zones", f.zones.String())
	}
	serveArgs = append(serveArgs, "--disruption="+strconv.FormatBool(f.disruption))
	cmd := exec.Command(self, serveArgs...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start stack process: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(stdout, "starting the local stack in the background (pid %d, log %s) ...\n", cmd.Process.Pid, logPath)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			data, _ := os.ReadFile(logPath)
			return fmt.Errorf("stack process exited (%v):\n%s", err, data)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		info, err := stack.ReadInfo(dir)
		if err == nil && info.ServePID == cmd.Process.Pid {
			printHowTo(stdout, info, "embedded offline on-demand price table (shared/catalog); Spot = on-demand x 0.35", true)
			return nil
		}
	}
}

// localServe runs a stack until SIGTERM or SIGINT (`local up --detach`
// starts it; `local down` stops it).
func localServe(ctx context.Context, args []string, stderr io.Writer) error {
	f, err := parseUpFlags("nodewright local serve", args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := stack.Up(ctx, f.options(true, stderr))
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "local stack up")
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping the local stack")
	return s.Down()
}

// printHowTo prints the kubeconfig and how to reach the stack.
// describeWired names what a stack runs end to end, and how to get the
// rest when the local Step Functions engine is missing.
func describeWired(w stack.Wired) string {
	parts := []string{"provisioning", "garbage collection"}
	if w.Consolidation {
		parts = append(parts, "consolidation, drift and expiry")
	}
	if w.Interrupts {
		parts = append(parts, "interruption handling")
	}
	out := strings.Join(parts, ", ")
	if !w.Consolidation {
		out += " (disruption and interruption handling are off: --disruption=false, or run make sfn-deps)"
	}
	return out
}

func printHowTo(w io.Writer, info stack.Info, prices string, detached bool) {
	fmt.Fprintf(w, `
Local stack is up (everything on 127.0.0.1; no AWS account is used).
  kubeconfig:     %s
  API server:     %s
  EC2/SSM sim:    %s  (region %s, zones %s; control API under /_sim/)
  intake API:     %s  (IAM authorization is NOT checked locally)
  prices:         %s
  state dir:      %s
  runs:           %s

Use it with kubectl:
  export KUBECONFIG=%s
  kubectl get nodes,nodeclaims
kubectl is not required by nodewright; if it is missing, install it as
https://kubernetes.io/docs/tasks/tools/ describes (any version from 1.35 on).
Try: kubectl apply -f deploy/demo/guide-complete/ && kubectl scale deployment inflate --replicas 5
`, info.Kubeconfig, info.Server, info.SimURL, info.Region, strings.Join(info.Zones, ","), info.IntakeURL, prices, info.Dir,
		describeWired(info.Features), info.Kubeconfig)
	if detached {
		fmt.Fprintf(w, "Stop it with: nodewright local down --dir %s\n", info.Dir)
	}
}

func localDown(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nodewright local down", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", defaultStackDir(), "state directory")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	if err := stack.DownDir(*dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "local stack in %s stopped and removed\n", *dir)
	return nil
}

// localInject drives the simulator's control API of a running stack.
func localInject(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nodewright local "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", defaultStackDir(), "state directory")
	clear := fs.Bool("clear", false, "ice: make the offering available again")
	check := fs.String("check", ec2sim.CheckInstance, "impair: the status check that fails, instance or system")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return errUsage
	}
	if sub == "impair" && *check != ec2sim.CheckInstance && *check != ec2sim.CheckSystem {
		fmt.Fprintf(stderr, "nodewright local impair: --check %q: want %s or %s\n", *check, ec2sim.CheckInstance, ec2sim.CheckSystem)
		return errUsage
	}
	info, err := stack.ReadInfo(*dir)
	if err != nil {
		return fmt.Errorf("no running stack in %s (nodewright local up --detach): %w", *dir, err)
	}
	c := simClient{base: info.SimURL}
	switch sub {
	case "impair":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: nodewright local impair NODE [--check instance|system]")
			return errUsage
		}
		return localImpair(ctx, c, info, pos[0], *check, time.Now(), stdout)
	case "interrupt", "rebalance":
		if len(pos) != 1 {
			fmt.Fprintf(stderr, "usage: nodewright local %s NODE\n", sub)
			return errUsage
		}
		in, err := c.find(ctx, pos[0])
		if err != nil {
			return err
		}
		if sub == "rebalance" {
			var rb ec2sim.RebalanceRecommendation
			if err := c.do(ctx, http.MethodPost, "/_sim/instances/"+in.ID+"/rebalance", nil, &rb); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "Rebalance recommendation issued for %s (%s).\n", in.ID, in.PrivateDNSName)
			if info.Features.Interrupts {
				fmt.Fprintln(stdout, "The interruption handler records a SpotRebalanceRecommendation event for its NodeClaim and, as Karpenter does, nothing else: no taint, no drain.")
			} else {
				fmt.Fprintln(stdout, "Note: interruption handling is not wired in this stack (started with --disruption=false, or before make sfn-deps); nothing reads the recommendation.")
			}
			return nil
		}
		var iv ec2sim.SpotInterruption
		if err := c.do(ctx, http.MethodPost, "/_sim/instances/"+in.ID+"/interrupt", nil, &iv); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Spot interruption warning issued for %s (%s); the instance is reclaimed at %s, two minutes later.\n",
			in.ID, in.PrivateDNSName, iv.ReclaimTime.Format(time.RFC3339))
		if info.Features.Interrupts {
			fmt.Fprintln(stdout, "The interruption handler marks the offering unavailable and drains the node; its pods move to a new node before then.")
		} else {
			fmt.Fprintln(stdout, "Note: interruption handling is not wired in this stack (started with --disruption=false, or before make sfn-deps); nothing drains the node before then.")
		}
	case "ice":
		if len(pos) != 3 {
			fmt.Fprintln(stderr, "usage: nodewright local ice TYPE ZONE CAPACITY   (CAPACITY: on-demand or spot)")
			return errUsage
		}
		body := map[string]string{"instanceType": pos[0], "zone": pos[1], "capacityType": pos[2], "code": "InsufficientInstanceCapacity"}
		method, verb := http.MethodPost, "now fails with InsufficientInstanceCapacity"
		if *clear {
			method, verb = http.MethodDelete, "is available again"
		}
		if err := c.do(ctx, method, "/_sim/unavailable", body, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s in %s %s\n", pos[2], pos[0], pos[1], verb)
	}
	return nil
}

// parseInterleaved parses args with fs, flags before, between or after the
// positional arguments (`impair NODE --check system`), and returns the
// positional ones in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// localImpair fails one status check of the instance behind node through
// the simulator's POST /_sim/instances/{id}/status, impaired since
// stack.ImpairedLead before now: Karpenter acts on a check impaired for
// 120 s or more, so the stack's next instance-status poll (every
// stack.InstanceStatusInterval) handles it.
func localImpair(ctx context.Context, c simClient, info stack.Info, node, check string, now time.Time, stdout io.Writer) error {
	in, err := c.find(ctx, node)
	if err != nil {
		return err
	}
	since := now.Add(-stack.ImpairedLead).UTC().Truncate(time.Second)
	body := map[string]any{"check": check, "impaired": true, "since": since}
	if err := c.do(ctx, http.MethodPost, "/_sim/instances/"+in.ID+"/status", body, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "The %s status check of %s (%s) is impaired, dated %s: %s ago, the time Karpenter waits before it acts, so the next instance-status poll acts on it.\n",
		check, in.ID, in.PrivateDNSName, since.Format(time.RFC3339), stack.ImpairedLead)
	if info.Features.Interrupts {
		fmt.Fprintf(stdout, "Within %s the poll starts an interruption execution that drains the node forcefully (no grace period); its pods move to a new node.\n",
			stack.InstanceStatusInterval)
	} else {
		fmt.Fprintln(stdout, "Note: interruption handling is not wired in this stack (started with --disruption=false, or before make sfn-deps); nothing polls the instance status.")
	}
	return nil
}

// simClient calls the simulator's /_sim/ control API.
type simClient struct{ base string }

func (c simClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("simulator %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("simulator %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("simulator %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// find returns the instance named by a Node name (its private DNS name),
// an instance ID or a providerID.
func (c simClient) find(ctx context.Context, name string) (ec2sim.Instance, error) {
	var all []ec2sim.Instance
	if err := c.do(ctx, http.MethodGet, "/_sim/instances", nil, &all); err != nil {
		return ec2sim.Instance{}, err
	}
	id := name[strings.LastIndex(name, "/")+1:]
	for _, in := range all {
		if in.ID == id || in.PrivateDNSName == name {
			return in, nil
		}
	}
	return ec2sim.Instance{}, fmt.Errorf("node %q: no simulator instance has that name, ID or providerID", name)
}
