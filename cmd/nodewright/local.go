package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// defaultStackDir is where `nodewright local` keeps its state unless --dir
// says otherwise: .cache/local-stack at the repository root (ignored by git).
func defaultStackDir() string {
	if root, err := stack.FindRepoRoot(); err == nil {
		return filepath.Join(root, ".cache", "local-stack")
	}
	return filepath.Join(os.TempDir(), "nodewright-local-stack")
}

// defaultDirHint explains, when dir is the default state dir and this
// process runs outside the repository, that a stack started inside it
// keeps its state elsewhere; otherwise it returns "".
func defaultDirHint(dir string, explicit bool) string {
	if explicit {
		return ""
	}
	if _, err := stack.FindRepoRoot(); err == nil {
		return ""
	}
	return fmt.Sprintf("\n(outside the nodewright repository the default state dir is %s; a stack started inside the repository keeps its state in <repository>/.cache/local-stack: run the command there or pass --dir <repository>/.cache/local-stack)", dir)
}

// dirFlagSet reports whether fs's --dir was given on the command line.
func dirFlagSet(fs *pflag.FlagSet) bool { return fs.Changed("dir") }

// addDirFlag declares --dir, the state directory every local subcommand
// takes, with directory completion.
func addDirFlag(cmd *cobra.Command, dir *string, usage string) {
	cmd.Flags().StringVar(dir, "dir", defaultStackDir(), usage)
	_ = cmd.MarkFlagDirname("dir")
}

// invokedAs is how the user ran this CLI, for the commands it prints
// (selfCommand of os.Args[0]).
var invokedAs = selfCommand(os.Args[0])

// selfCommand returns the command that runs this CLI again, given its
// os.Args[0]: "go run ./cmd/nodewright" for a binary go run built (it
// lives under Go's go-build temporary directory; the form works from the
// repository root, as the README runs it), else arg0 as typed
// ("nodewright" when found on PATH, "./bin/nodewright" ...).
func selfCommand(arg0 string) string {
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") {
		return "go run ./cmd/nodewright"
	}
	if arg0 == "" {
		return "nodewright"
	}
	return arg0
}

const localUsage = `usage: nodewright local <subcommand> [flags]
  up [--detach] [--dir D] [--region R] [--zones Z,...] [--boot-delay 5s]
                         start the local stack; without --detach it runs until Ctrl-C
  down [--dir D]         stop everything the stack started and remove its state
  status [--dir D]       print the stack's meter: its requests to the AWS stand-ins by service and API,
                         in the units AWS bills (rewritten every 5 s while the stack runs)
  interrupt NODE         issue a Spot interruption warning for NODE's instance (Spot instances only)
  rebalance NODE         issue a rebalance recommendation for NODE's instance (Spot instances only)
  impair NODE [--check instance|system]
                         fail a status check of NODE's instance, dated two minutes back so the
                         next instance-status poll drains the node forcefully
  ice TYPE ZONE CAPACITY [--clear]
                         mark an offering out of capacity (InsufficientInstanceCapacity); --clear
                         lifts it. CAPACITY is on-demand or spot, ZONE one of the stack's zones
NODE is a Node name, an instance ID or a providerID. Every subcommand takes --dir D (default:
.cache/local-stack of the repository the command runs in).`

// runLocal runs `nodewright local args...` and returns its exit code.
func runLocal(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, append([]string{"local"}, args...), stdin, stdout, stderr)
}

// localExit is the exit code of local subcommand sub that returned err: 2
// for errUsage (already printed), 1 with the error on stderr, else 0.
func localExit(sub string, err error, stderr io.Writer) int {
	switch {
	case errors.Is(err, errUsage):
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "nodewright local %s: %v\n", sub, err)
		return exitFailed
	}
	return exitOK
}

// newLocalCommand is `nodewright local` and its subcommands. Without a
// subcommand it prints its usage on stderr (exit 2); `local help` prints it
// on stdout (exit 0).
func newLocalCommand(c cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "local <subcommand> [flags]",
		Short:                 "run the whole system locally: local up|down|interrupt|rebalance|impair|ice",
		Long:                  localUsage,
		DisableFlagsInUseLine: true,
		// Its subcommands have the flags; anything else is an unknown
		// subcommand.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				fmt.Fprintln(c.stderr, localUsage)
				*c.code = exitUsage
			case args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help":
				fmt.Fprintln(c.stdout, localUsage)
			default:
				fmt.Fprintf(c.stderr, "nodewright local: unknown subcommand %q\n%s\n", args[0], localUsage)
				*c.code = exitUsage
			}
			return nil
		},
	}
	cmd.SetHelpFunc(func(h *cobra.Command, args []string) {
		if h != cmd { // a subcommand's help is cobra's
			h.Root().HelpFunc()(h, args)
			return
		}
		fmt.Fprintln(c.stdout, localUsage)
	})
	up := func(name, short string, hidden bool, runUp func(context.Context, upFlags) error) *cobra.Command {
		var f upFlags
		sub := &cobra.Command{
			Use:    name,
			Short:  short,
			Hidden: hidden,
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, err := f.config("nodewright local "+name, args, c.stderr)
				if err == nil {
					err = runUp(cmd.Context(), cfg)
				}
				*c.code = localExit(name, err, c.stderr)
				return nil
			},
		}
		f.register(sub)
		return sub
	}
	cmd.AddCommand(
		up("up", "start the local stack; without --detach it runs until Ctrl-C", false,
			func(ctx context.Context, f upFlags) error { return localUp(ctx, f, c.stdout) }),
		up("serve", "run a stack until SIGTERM (what up --detach starts)", true,
			func(ctx context.Context, f upFlags) error { return localServe(ctx, f, c.stderr) }),
		newLocalDownCommand(c), newLocalStatusCommand(c))
	for _, sub := range []string{"interrupt", "rebalance", "impair", "ice"} {
		cmd.AddCommand(newLocalInjectCommand(c, sub))
	}
	return cmd
}

// upFlags are the flags of `local up` and `local serve`.
type upFlags struct {
	dir, region string
	zones       stringList
	bootDelay   time.Duration
	detach      bool
	disruption  bool
}

// register declares the flags of `local up` and `local serve` on cmd.
func (f *upFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	addDirFlag(cmd, &f.dir, "state directory")
	fs.StringVar(&f.region, "region", stack.DefaultRegion, "region of the EC2 simulator")
	_ = cmd.RegisterFlagCompletionFunc("region", completeRegions)
	fs.Var(&f.zones, "zones", "availability zones (comma-separated; default: the simulator's zones of the region)")
	fs.DurationVar(&f.bootDelay, "boot-delay", stack.DefaultBootDelay, "simulated instance boot time before its Node registers")
	fs.BoolVar(&f.detach, "detach", false, "start in the background and return")
	fs.BoolVar(&f.disruption, "disruption", true, "wire consolidation, drift, expiry and interruption handling (the local Step Functions engine from make sfn-deps; without it the stack runs provisioning only and says so); --disruption=false for provisioning only")
}

// parseUpFlags parses the flags of `local up` (name is the command path
// for messages).
func parseUpFlags(name string, args []string, stderr io.Writer) (upFlags, error) {
	var f upFlags
	cmd := &cobra.Command{Use: "up"}
	f.register(cmd)
	if err := cmd.Flags().Parse(goFlagArgs(cmd.Flags(), args)); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return upFlags{}, errUsage
	}
	return f.config(name, cmd.Flags().Args(), stderr)
}

// config checks the parsed flags and positional args; a problem is printed
// to stderr after name and returned as errUsage.
func (f upFlags) config(name string, args []string, stderr io.Writer) (upFlags, error) {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", name, args)
		return upFlags{}, errUsage
	}
	if f.bootDelay < 0 {
		fmt.Fprintf(stderr, "%s: --boot-delay %s: want a duration of 0 or more\n", name, f.bootDelay)
		return upFlags{}, errUsage
	}
	if f.bootDelay == 0 {
		f.bootDelay = -1 // zero means "no delay" on the command line
	}
	if err := checkRegion(name, f.region, f.zones, stderr); err != nil {
		return upFlags{}, err
	}
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return upFlags{}, fmt.Errorf("state dir: %w", err)
	}
	f.dir = dir
	return f, nil
}

// localRegions are the regions the local stack can simulate, for messages:
// those whose zones shared/catalog's embedded table lists (catalog.Resolve's
// doc names them); the stack's price table and the simulator's instance
// types come from that catalog. lookupRegion decides; a test holds this
// list to it.
var localRegions = []string{
	"ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-southeast-1", "ap-southeast-2", "ca-central-1",
	"cn-north-1", "cn-northwest-1", "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2", "eu-west-3",
	"sa-east-1", "us-east-1", "us-east-2", "us-gov-east-1", "us-gov-west-1", "us-west-2",
}

// regionCatalog is what shared/catalog knows of a region: its zone names
// and instance-type names, both sorted.
type regionCatalog struct{ zones, types []string }

// lookupRegion resolves the embedded catalog for region (an AL2023 node
// class, as the simulator does); ok is false when the catalog knows no
// zones of the region, so no local stack can run there.
func lookupRegion(region string) (rc regionCatalog, ok bool) {
	family := v1.AMIFamilyAL2023
	nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMIFamily: &family}}
	nc.Name = "local"
	its, _, err := catalog.Resolve(nc, catalog.Options{Region: region})
	if err != nil || len(its) == 0 {
		return regionCatalog{}, false
	}
	for _, it := range its {
		rc.types = append(rc.types, it.Name)
	}
	for _, o := range its[0].Offerings { // every type is offered in every zone
		if !slices.Contains(rc.zones, o.Zone) {
			rc.zones = append(rc.zones, o.Zone)
		}
	}
	slices.Sort(rc.types)
	slices.Sort(rc.zones)
	return rc, true
}

// checkRegion rejects, before anything starts, a --region the local stack
// cannot simulate and --zones outside it or listed twice, printing why to
// stderr (errUsage).
func checkRegion(name, region string, zones []string, stderr io.Writer) error {
	rc, ok := lookupRegion(region)
	if !ok {
		what := "not an AWS region name such as us-east-1"
		if regionName.MatchString(region) {
			what = "a region the local stack cannot simulate (shared/catalog has no zones for it)"
		}
		fmt.Fprintf(stderr, "%s: --region %q: %s; choose one of %s\n", name, region, what, strings.Join(localRegions, ", "))
		return errUsage
	}
	for i, z := range zones {
		if !slices.Contains(rc.zones, z) {
			fmt.Fprintf(stderr, "%s: --zones: %q is not a zone of region %s; its zones are %s (set --region for another region)\n",
				name, z, region, strings.Join(rc.zones, ", "))
			return errUsage
		}
		if slices.Contains(zones[:i], z) {
			fmt.Fprintf(stderr, "%s: --zones: %q is listed twice\n", name, z)
			return errUsage
		}
	}
	return nil
}

func (f upFlags) options(detach bool, progress io.Writer) stack.Options {
	return stack.Options{Dir: f.dir, Region: f.region, Zones: f.zones, BootDelay: f.bootDelay, Detach: detach, Disruption: f.disruption, Progress: progress}
}

// localUp starts the stack of f and runs it until Ctrl-C, or in the
// background with --detach.
func localUp(ctx context.Context, f upFlags, stdout io.Writer) error {
	if f.detach {
		return localUpDetached(ctx, f, stdout)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fresh, err := freshStateDir(f.dir)
	if err != nil {
		return err
	}
	s, err := stack.Up(ctx, f.options(false, stdout))
	if err != nil {
		return cleanFailedStart(f.dir, fresh, err)
	}
	printHowTo(stdout, s.Info, s.PriceSource(), false)
	fmt.Fprintln(stdout, "Press Ctrl-C to stop the stack and remove its state.")
	<-ctx.Done()
	fmt.Fprintln(stdout, "what the requests to the AWS stand-ins would bill (local/meter):")
	_ = s.Metered().WriteTable(stdout)
	fmt.Fprintln(stdout, "stopping the local stack ...")
	return s.Down()
}

// localUpDetached re-runs this binary as `local serve` in a new session,
// waits for its stack.json and prints how to use the stack.
func localUpDetached(ctx context.Context, f upFlags, stdout io.Writer) error {
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	fresh, err := freshStateDir(dir)
	if err != nil {
		return err
	}
	if _, err := stack.ReadInfo(dir); err == nil {
		return fmt.Errorf("state dir %s holds a stack already; run `%s local down --dir %s` first", dir, invokedAs, dir)
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
	serveArgs := []string{"local", "serve", "--dir", dir, "--region", f.region, "--boot-delay", max(f.bootDelay, 0).String()}
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
			//nolint:errorlint // Wait's error is nil on a clean exit (%w would print %!w(<nil>)); the early exit is the failure
			return cleanFailedStart(dir, fresh, fmt.Errorf("stack process exited (%v):\n%s", err, data))
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

// freshStateDir reports whether dir does not exist yet, so that a failed
// start may remove it; it fails when a stack runs there already.
func freshStateDir(dir string) (bool, error) {
	if stack.Running(dir) {
		return false, fmt.Errorf("state dir %s: a stack is already running there (%s local down --dir %s)", dir, invokedAs, dir)
	}
	_, err := os.Stat(dir)
	return errors.Is(err, os.ErrNotExist), nil
}

// cleanFailedStart stops what a failed start left behind and removes the
// state dir it created (fresh); a dir that existed before is kept, named
// in the error. It returns startErr, joined with any cleanup error.
func cleanFailedStart(dir string, fresh bool, startErr error) error {
	if !fresh {
		return fmt.Errorf("%w\n(state dir %s existed before this start and is kept; %s local down --dir %s removes it)", startErr, dir, invokedAs, dir)
	}
	if err := stack.DownDir(dir); err != nil {
		return errors.Join(startErr, fmt.Errorf("remove state dir %s: %w", dir, err))
	}
	return startErr
}

// localServe runs a stack until SIGTERM or SIGINT (`local up --detach`
// starts it; `local down` stops it).
func localServe(ctx context.Context, f upFlags, stderr io.Writer) error {
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
  EC2/SSM sim:    %s  (region %s, zones %s; control API: GET /_sim lists its routes)
  intake API:     %s  (IAM authorization is NOT checked locally)
  prices:         %s
  state dir:      %s
  runs:           %s

Use it with kubectl:
  export KUBECONFIG=%s
  kubectl get nodes,nodeclaims
kubectl is not required by nodewright; if it is missing, install it as
https://kubernetes.io/docs/tasks/tools/ describes (a recent kubectl, 1.30 or later).
Try: kubectl apply -f deploy/demo/guide-complete/ && kubectl scale deployment inflate --replicas 5
`, info.Kubeconfig, info.Server, info.SimURL, info.Region, strings.Join(info.Zones, ","), info.IntakeURL, prices, info.Dir,
		describeWired(info.Features), info.Kubeconfig)
	if detached {
		fmt.Fprintf(w, "Stop it with: %s local down --dir %s\n", invokedAs, info.Dir)
	}
}

// localDown stops the stack whose state is in --dir (stack.DownDir) and
// says what it found: a running stack (stopped and removed), a stack whose
// processes had exited, what a failed start left, or no stack at all
// (nothing to stop, exit 0; outside the repository with a hint where the
// default state dir is).
func newLocalDownCommand(c cli) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "stop everything the stack started and remove its state",
		RunE: func(cmd *cobra.Command, args []string) error {
			err := errUsage
			if len(args) > 0 {
				fmt.Fprintf(c.stderr, "nodewright local down: unexpected arguments %q\n", args)
			} else {
				err = localDown(dir, dirFlagSet(cmd.Flags()), c.stdout)
			}
			*c.code = localExit("down", err, c.stderr)
			return nil
		},
	}
	addDirFlag(cmd, &dir, "state directory")
	return cmd
}

func newLocalStatusCommand(c cli) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "print the stack's meter: requests to the AWS stand-ins by service and API",
		RunE: func(cmd *cobra.Command, args []string) error {
			err := errUsage
			if len(args) > 0 {
				fmt.Fprintf(c.stderr, "nodewright local status: unexpected arguments %q\n", args)
			} else {
				err = localStatus(dir, c.stdout)
			}
			*c.code = localExit("status", err, c.stderr)
			return nil
		},
	}
	addDirFlag(cmd, &dir, "state directory")
	return cmd
}

// localStatus prints the meter of the stack running in dir.
func localStatus(dir string, stdout io.Writer) error {
	if !stack.Running(dir) {
		return fmt.Errorf("no stack runs in %s (%s local up --dir %s)", dir, invokedAs, dir)
	}
	rep, err := stack.ReadMeter(dir)
	if err != nil {
		return fmt.Errorf("%w (a stack writes it %s after it started)", err, stack.MeterInterval)
	}
	return rep.WriteTable(stdout)
}

// localDown stops the stack in dirFlag; explicit says --dir was given.
func localDown(dirFlag string, explicit bool, stdout io.Writer) error {
	dir, err := filepath.Abs(dirFlag)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	_, infoErr := stack.ReadInfo(dir)
	leftovers := false
	for _, sub := range []string{"logs", "cluster"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err == nil {
			leftovers = true
		}
	}
	if infoErr != nil && !leftovers {
		fmt.Fprintf(stdout, "no local stack in %s; nothing to stop%s\n", dir, defaultDirHint(dir, explicit))
		return nil
	}
	running := stack.Running(dir)
	if err := stack.DownDir(dir); err != nil {
		return err
	}
	switch {
	case running:
		fmt.Fprintf(stdout, "local stack in %s stopped and removed\n", dir)
	case infoErr == nil:
		fmt.Fprintf(stdout, "local stack in %s was not running (none of its recorded processes was alive); removed its state\n", dir)
	default:
		fmt.Fprintf(stdout, "no running local stack in %s; removed what a start that failed left there\n", dir)
	}
	return nil
}

// injectUsage is the usage line of each injection subcommand.
var injectUsage = map[string]string{
	"interrupt": "usage: nodewright local interrupt NODE [--dir D]",
	"rebalance": "usage: nodewright local rebalance NODE [--dir D]",
	"impair":    "usage: nodewright local impair NODE [--check instance|system] [--dir D]",
	"ice":       "usage: nodewright local ice TYPE ZONE CAPACITY [--clear] [--dir D]   (CAPACITY: on-demand or spot)",
}

// injectShort is the one-line summary of each injection subcommand.
var injectShort = map[string]string{
	"interrupt": "issue a Spot interruption warning for NODE's instance (Spot instances only)",
	"rebalance": "issue a rebalance recommendation for NODE's instance (Spot instances only)",
	"impair":    "fail a status check of NODE's instance, dated two minutes back",
	"ice":       "mark an offering out of capacity (InsufficientInstanceCapacity); --clear lifts it",
}

// injectFlags are the flags of an injection subcommand: --dir for all,
// --check for impair, --clear for ice.
type injectFlags struct {
	dir   string
	check string
	clear bool
	// dirSet is whether --dir was given.
	dirSet bool
}

func newLocalInjectCommand(c cli, sub string) *cobra.Command {
	var f injectFlags
	use, _ := strings.CutPrefix(injectUsage[sub], "usage: nodewright local ")
	cmd := &cobra.Command{
		Use:                   use,
		Short:                 injectShort[sub],
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.dirSet = dirFlagSet(cmd.Flags())
			*c.code = localExit(sub, localInject(cmd.Context(), sub, f, args, c.stdout, c.stderr), c.stderr)
			return nil
		},
	}
	addDirFlag(cmd, &f.dir, "state directory of the running stack")
	switch sub {
	case "ice":
		cmd.Flags().BoolVar(&f.clear, "clear", false, "make the offering available again")
		cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 2 {
				return []string{"on-demand", "spot"}, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	case "impair":
		cmd.Flags().StringVar(&f.check, "check", ec2sim.CheckInstance, "the status check that fails, instance or system")
		_ = cmd.RegisterFlagCompletionFunc("check", cobra.FixedCompletions([]string{ec2sim.CheckInstance, ec2sim.CheckSystem}, cobra.ShellCompDirectiveNoFileComp))
	}
	return cmd
}

// localInject drives the simulator's control API of a running stack with
// the positional arguments pos of subcommand sub.
func localInject(ctx context.Context, sub string, f injectFlags, pos []string, stdout, stderr io.Writer) error {
	if sub == "impair" && f.check != ec2sim.CheckInstance && f.check != ec2sim.CheckSystem {
		fmt.Fprintf(stderr, "nodewright local impair: --check %q: want %s or %s\n", f.check, ec2sim.CheckInstance, ec2sim.CheckSystem)
		return errUsage
	}
	if want := map[string]int{"ice": 3}[sub]; (want == 0 && len(pos) != 1) || (want != 0 && len(pos) != want) {
		fmt.Fprintln(stderr, injectUsage[sub])
		return errUsage
	}
	dir := &f.dir
	info, err := stack.ReadInfo(*dir)
	if err != nil {
		return fmt.Errorf("no running stack in %s (%s local up --detach starts one): %w%s", *dir, invokedAs, err, defaultDirHint(*dir, f.dirSet))
	}
	c := simClient{base: info.SimURL}
	switch sub {
	case "impair":
		return localImpair(ctx, c, info, pos[0], f.check, time.Now(), stdout)
	case "interrupt", "rebalance":
		return localSpotSignal(ctx, c, info, sub, pos[0], stdout)
	case "ice":
		return localICE(ctx, c, info, pos[0], pos[1], pos[2], f.clear, stderr, stdout)
	}
	return nil
}

// localSpotSignal issues a Spot interruption warning (sub "interrupt") or a
// rebalance recommendation ("rebalance") for node's instance. EC2 sends
// both to Spot instances only; an on-demand node is refused with a message
// that says so and where a Spot NodePool comes from.
func localSpotSignal(ctx context.Context, c simClient, info stack.Info, sub, node string, stdout io.Writer) error {
	in, err := c.find(ctx, node)
	if err != nil {
		return err
	}
	notSpot := func() error {
		return fmt.Errorf("node %s (instance %s, %s): Spot interruption warnings and rebalance recommendations only go to Spot instances; apply deploy/demo/spot/ for a Spot NodePool",
			node, in.ID, strings.TrimSpace(cmp.Or(in.CapacityType, "on-demand")+" "+in.InstanceType))
	}
	if in.CapacityType != "" && in.CapacityType != "spot" {
		return notSpot()
	}
	var simErr *simError
	if sub == "rebalance" {
		var rb ec2sim.RebalanceRecommendation
		if err := c.do(ctx, http.MethodPost, "/_sim/instances/"+in.ID+"/rebalance", nil, &rb); err != nil {
			if errors.As(err, &simErr) && simErr.Status == http.StatusConflict && strings.Contains(simErr.Message, "not spot") {
				return notSpot()
			}
			return err
		}
		fmt.Fprintf(stdout, "Rebalance recommendation issued for %s (%s).\n", in.ID, in.PrivateDNSName)
		if info.Features.Interrupts {
			fmt.Fprintln(stdout, "The interruption handler records a SpotRebalanceRecommendation event on the Node and, as Karpenter does, nothing else: no taint, no drain.")
		} else {
			fmt.Fprintln(stdout, "Note: interruption handling is not wired in this stack (started with --disruption=false, or before make sfn-deps); nothing reads the recommendation.")
		}
		return nil
	}
	var iv ec2sim.SpotInterruption
	if err := c.do(ctx, http.MethodPost, "/_sim/instances/"+in.ID+"/interrupt", nil, &iv); err != nil {
		if errors.As(err, &simErr) && simErr.Status == http.StatusConflict && strings.Contains(simErr.Message, "not spot") {
			return notSpot()
		}
		return err
	}
	fmt.Fprintf(stdout, "Spot interruption warning issued for %s (%s); the instance is reclaimed at %s, two minutes later.\n",
		in.ID, in.PrivateDNSName, iv.ReclaimTime.Format(time.RFC3339))
	if info.Features.Interrupts {
		fmt.Fprintln(stdout, "The interruption handler marks the offering unavailable and drains the node; its pods move to a new node before then.")
	} else {
		fmt.Fprintln(stdout, "Note: interruption handling is not wired in this stack (started with --disruption=false, or before make sfn-deps); nothing drains the node before then.")
	}
	return nil
}

// localICE marks the offering (typ, zone, capacity) out of capacity in the
// simulator (POST /_sim/unavailable, code InsufficientInstanceCapacity),
// or available again with clear (DELETE). CAPACITY must be on-demand or
// spot, ZONE one of the stack's zones (stack.json), TYPE an instance type
// of shared/catalog; otherwise it prints which argument is wrong and the
// allowed values to stderr and returns errUsage.
func localICE(ctx context.Context, c simClient, info stack.Info, typ, zone, capacity string, clear bool, stderr, stdout io.Writer) error {
	bad := func(format string, args ...any) error {
		fmt.Fprintf(stderr, "nodewright local ice: "+format+"\n", args...)
		return errUsage
	}
	if capacity != "on-demand" && capacity != "spot" {
		return bad("CAPACITY %q: want on-demand or spot", capacity)
	}
	if len(info.Zones) > 0 && !slices.Contains(info.Zones, zone) {
		return bad("ZONE %q: not a zone of this stack; its zones are %s", zone, strings.Join(info.Zones, ", "))
	}
	region := cmp.Or(info.Region, stack.DefaultRegion)
	if rc, ok := lookupRegion(region); ok && !slices.Contains(rc.types, typ) {
		family, _, _ := strings.Cut(typ, ".")
		var sizes []string
		for _, t := range rc.types {
			if strings.HasPrefix(t, family+".") {
				sizes = append(sizes, t)
			}
		}
		if len(sizes) > 0 {
			return bad("TYPE %q: not an instance type of the catalog; the %s family has %s", typ, family, strings.Join(sizes, ", "))
		}
		return bad("TYPE %q: not an instance type of the catalog (family %q unknown; names look like m5.large or c6a.xlarge)", typ, family)
	}
	body := map[string]string{"instanceType": typ, "zone": zone, "capacityType": capacity, "code": "InsufficientInstanceCapacity"}
	method, verb := http.MethodPost, "now fails with InsufficientInstanceCapacity"
	if clear {
		method, verb = http.MethodDelete, "is available again"
	}
	if err := c.do(ctx, method, "/_sim/unavailable", body, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s in %s %s\n", capacity, typ, zone, verb)
	return nil
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
		return fmt.Errorf("simulator at %s is not answering (has the stack stopped? %s local down cleans up after it): %w", c.base, invokedAs, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return newSimError(method, path, resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("simulator %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// simError is a refusal of the simulator's control API: its HTTP status
// and the message of its JSON error body ({"error": "..."}, what every
// /_sim/ route answers on failure), or the raw body when it is not that.
type simError struct {
	Method, Path string
	Status       int
	Message      string
	// Raw is true when the body was not a JSON error.
	Raw bool
}

func newSimError(method, path string, status int, body []byte) *simError {
	e := &simError{Method: method, Path: path, Status: status}
	var decoded struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &decoded) == nil && decoded.Error != "" {
		e.Message = decoded.Error
	} else {
		e.Message, e.Raw = strings.TrimSpace(string(body)), true
	}
	return e
}

// Error reads "the simulator refused: MESSAGE" for a JSON error body, else
// names the call and the HTTP status.
func (e *simError) Error() string {
	if !e.Raw {
		return "the simulator refused: " + e.Message
	}
	msg := fmt.Sprintf("simulator %s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
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
