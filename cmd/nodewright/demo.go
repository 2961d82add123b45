package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/deploy/demo"
	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// demoNow is the demo's clock for the budget-window check (a test sets it).
var demoNow = time.Now

// demoConfig is the parsed command line of `nodewright demo`.
type demoConfig struct {
	dir       string
	replicas  int
	bootDelay time.Duration
	timeout   time.Duration
	disrupt   bool
	drift     bool
	interrupt bool
}

// runDemo runs `nodewright demo args...` and returns its exit code.
func runDemo(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, append([]string{"demo"}, args...), stdin, stdout, stderr)
}

func newDemoCommand(c cli) *cobra.Command {
	var cfg demoConfig
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "bring up the local stack, scale the guide's inflate deployment, show the timeline",
		Long: `Runs the README's demo on a fresh local stack: applies the guide-complete manifests, scales
inflate up, drifts every node by pinning the EC2NodeClass to another AMI, interrupts a Spot node
of the demo's Spot NodePool (deploy/demo/spot/), scales inflate down until consolidation removes
the nodes, and prints a timeline. The stack is always stopped and its state removed.

Exit status: 0 on success, 1 with the reason on failure, 2 for a usage error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 0:
				fmt.Fprintf(c.stderr, "nodewright demo: unexpected argument %q\n", args[0])
				*c.code = exitUsage
			case cfg.replicas < 1:
				fmt.Fprintf(c.stderr, "nodewright demo: --replicas %d: want 1 or more\n", cfg.replicas)
				*c.code = exitUsage
			default:
				*c.code = runDemoConfig(cmd.Context(), cfg, c.stdout, c.stderr)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.dir, "dir", "", "state directory (default: a new temporary directory)")
	_ = cmd.MarkFlagDirname("dir")
	fs.IntVar(&cfg.replicas, "replicas", 10, "inflate replicas to scale to")
	fs.DurationVar(&cfg.bootDelay, "boot-delay", stack.DefaultBootDelay, "simulated instance boot time")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.BoolVar(&cfg.disrupt, "disruption", true, "wire drift, consolidation and interruption handling (the disruption state machine on aws-local-stepfunctions; needs make sfn-deps) and wait for them; false skips drift, consolidation and the Spot interruption step")
	fs.BoolVar(&cfg.drift, "drift", true, "pin the EC2NodeClass to another AMI and wait until drift has replaced every node (needs --disruption)")
	fs.BoolVar(&cfg.interrupt, "interrupt", true, "apply a Spot NodePool and workload (deploy/demo/spot/), issue a Spot interruption warning for one of its nodes and wait until its pods run elsewhere (needs --disruption)")
	return cmd
}

// runDemoConfig runs the README's demo on a fresh local stack: it applies
// the guide-complete manifests, scales inflate up, drifts every node by
// pinning the EC2NodeClass to another AMI, interrupts a Spot node of the
// demo's Spot NodePool (deploy/demo/spot/), scales inflate down until
// consolidation removes the nodes, and prints a timeline. It returns 0 on
// success and 1 with the reason on failure; the stack is always stopped and
// its state removed, Ctrl-C included.
func runDemoConfig(ctx context.Context, cfg demoConfig, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	d := &demoRun{out: stdout, start: time.Now()}
	if cfg.disrupt {
		if err := checkBudgetWindow(demoNow(), cfg.timeout); err != nil {
			d.say("FAILED: %v", err)
			fmt.Fprintf(stderr, "nodewright demo: %v\n", err)
			return 1
		}
	}
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
		d.say("what the run's requests to the AWS stand-ins would bill (local/meter):")
		_ = s.Metered().WriteTable(d.out)
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

	wired := s.Wired()
	switch {
	case !cfg.disrupt:
		d.say("drift skipped (--disruption=false)")
	case !cfg.drift:
		d.say("drift skipped (--drift=false)")
	case !wired.Drift:
		return fmt.Errorf("drift is not wired: the local Step Functions engine is missing (run make sfn-deps)")
	default:
		if err := d.drift(ctx, s, cfg.replicas); err != nil {
			return fmt.Errorf("drift: %w", err)
		}
	}

	spot := false
	switch {
	case !cfg.disrupt:
		d.say("Spot interruption skipped (--disruption=false)")
	case !cfg.interrupt:
		d.say("Spot interruption skipped (--interrupt=false)")
	case !wired.Interrupts:
		return fmt.Errorf("interruption handling is not wired: the local Step Functions engine is missing (run make sfn-deps)")
	default:
		spot = true
		if err := d.interruption(ctx, s); err != nil {
			return fmt.Errorf("spot interruption: %w", err)
		}
	}

	d.say("scaling deployment inflate to 0 replicas")
	if err := scale(ctx, s, 0); err != nil {
		return err
	}
	if spot {
		d.say("scaling deployment %s to 0 replicas", spotDeployment)
		if err := scaleDeployment(ctx, s, spotDeployment, 0); err != nil {
			return err
		}
	}
	if _, err := d.watch(ctx, s, "scale-down", time.Minute, func(st stack.Status) bool {
		return st.RunningPods == 0 && st.PendingPods == 0
	}); err != nil {
		return err
	}
	if wired.Consolidation {
		d.say("consolidation: every node is empty now; emptiness removes a node once its NodePool's consolidateAfter has passed since its last pod left (production: 2m, spot: 30s), within the budget (production: 10%%, one node at a time)")
		if _, err := d.watch(ctx, s, "consolidation", 5*time.Minute, func(st stack.Status) bool { return st.Nodes == 0 && st.NodeClaims == 0 }); err != nil {
			return err
		}
		d.say("consolidation removed every empty node and its NodeClaim")
		d.sayExecutions(s, "empty-", "consolidate-")
	} else {
		if !cfg.disrupt {
			d.say("consolidation skipped (--disruption=false); the %d empty nodes stay ($%.4f/h) until the stack stops", st.Nodes, st.PricePerHour)
		} else {
			return fmt.Errorf("consolidation is not wired: the local Step Functions engine is missing (run make sfn-deps)")
		}
	}
	return nil
}

// sayExecutions prints the finished executions whose names start with one
// of prefixes, as the Step Functions console lists them: name, status,
// duration and the number of history events an operator can read.
func (d *demoRun) sayExecutions(s *stack.Stack, prefixes ...string) {
	for _, e := range s.Executions() {
		for _, p := range prefixes {
			if strings.HasPrefix(e.Name, p) && !e.Finished.IsZero() {
				d.say("execution %s %s in %.1fs (%d history events)", e.Name, e.Status, e.Finished.Sub(e.Started).Seconds(), len(e.History))
			}
		}
	}
}

func scale(ctx context.Context, s *stack.Stack, replicas int) error {
	return scaleDeployment(ctx, s, "inflate", replicas)
}

// scaleDeployment sets the replicas of a Deployment in namespace default.
func scaleDeployment(ctx context.Context, s *stack.Stack, name string, replicas int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := s.Kube.AppsV1().Deployments("default").Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale %s to %d: %w", name, replicas, err)
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
			//nolint:errorlint // err is the last observation's outcome and may be nil (%w would print %!w(<nil>)); the timeout is the failure
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

// demoPool and demoClass are the guide-complete NodePool and EC2NodeClass.
const (
	demoPool  = "production"
	demoClass = "production"
)

// ec2NodeClasses is the karpenter.k8s.aws/v1 EC2NodeClass resource.
var ec2NodeClasses = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}

// driftNode is what the drift step knows about one node of the pool
// before the AMI pin.
type driftNode struct {
	name, instance, image, claim string
	tainted, gone                bool
}

// sayDriftExecutions reports each execution of execs once when it is first
// seen and once when it has finished, marking it in seen and done.
func (d *demoRun) sayDriftExecutions(execs []stack.Execution, old map[string]*driftNode, seen, done map[string]bool) {
	for _, e := range execs {
		if !seen[e.Name] {
			seen[e.Name] = true
			d.say("drift: execution %s started: %s", e.Name, describeDriftExecution(e.Name, old))
		}
		if !e.Finished.IsZero() && !done[e.Name] {
			done[e.Name] = true
			if e.Status == "SUCCEEDED" {
				d.say("drift: execution %s %s after %.0fs", e.Name, e.Status, e.Finished.Sub(e.Started).Seconds())
			} else {
				d.say("drift: execution %s %s: %s %s", e.Name, e.Status, e.Error, e.Cause)
			}
		}
	}
}

// driftNodes returns the cluster's nodes before the drift, by instance ID,
// with their image and NodeClaim.
func driftNodes(ctx context.Context, s *stack.Stack) (map[string]*driftNode, error) {
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	claims, err := s.Dynamic.Resource(stack.NodeClaimResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodeclaims: %w", err)
	}
	claimOf := map[string]string{} // provider ID -> NodeClaim
	for _, c := range claims.Items {
		pid, _, _ := unstructured.NestedString(c.Object, "status", "providerID")
		claimOf[pid] = c.GetName()
	}
	old := map[string]*driftNode{} // by instance ID
	for _, n := range nodes.Items {
		id := instanceID(n.Spec.ProviderID)
		in, _ := s.Sim.Instance(id)
		old[id] = &driftNode{name: n.Name, instance: id, image: in.ImageID, claim: claimOf[n.Spec.ProviderID]}
	}
	return old, nil
}

// drift pins the EC2NodeClass to a newly registered AMI (amiSelectorTerms
// - id: <ami>) and follows Karpenter's drift replacement (karpenter-spec
// §6.4, §7) until every node that ran the old image is gone, every node
// runs the new one and all pods run again. It prints one line per event:
// execution started (the node drifted), replacement launched, replacement
// Ready, node tainted and drained, node removed, execution finished. It
// fails when more nodes are disrupted at once than the NodePool's budget
// allows, or after six minutes.
func (d *demoRun) drift(ctx context.Context, s *stack.Stack, replicas int) error {
	old, err := driftNodes(ctx, s)
	if err != nil {
		return err
	}
	img, err := s.Sim.AddImage(ec2sim.Image{
		Name:         fmt.Sprintf("amazon-eks-node-al2023-x86_64-standard-%s-v%s", stack.DefaultKubernetesVersion, time.Now().UTC().Format("20060102")),
		Description:  "a newer EKS-optimized AL2023 image, registered by the demo",
		Architecture: "x86_64", OwnerAlias: "amazon",
	})
	if err != nil {
		return fmt.Errorf("register the new AMI: %w", err)
	}
	patch := fmt.Sprintf(`{"spec":{"amiFamily":"AL2023","amiSelectorTerms":[{"id":%q}]}}`, img.ID)
	if _, err := s.Dynamic.Resource(ec2NodeClasses).Patch(ctx, demoClass, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("pin EC2NodeClass %s to %s: %w", demoClass, img.ID, err)
	}
	allowed, budget := poolBudget(len(old))
	images := map[string]bool{}
	for _, n := range old {
		images[n.image] = true
	}
	d.say("drift: pinned EC2NodeClass %s to %s (amiSelectorTerms: - id: %s); its %d nodes run %s, so every one drifts",
		demoClass, img.ID, img.ID, len(old), strings.Join(slices.Sorted(maps.Keys(images)), ", "))
	d.say("drift: NodePool %s's budget (%s) lets %d of its %d nodes be disrupted at a time; each is replaced before it drains", demoPool, budget, allowed, len(old))

	start := time.Now()
	deadline := start.Add(6 * time.Minute)
	seenExec := map[string]bool{}
	doneExec := map[string]bool{}
	seenInst := map[string]bool{}
	readyNode := map[string]bool{}
	maxDisrupting := 0
	for id := range old {
		seenInst[id] = true
	}
	for {
		d.sayDriftExecutions(s.Executions(), old, seenExec, doneExec)
		for _, in := range s.Sim.Instances() {
			if !seenInst[in.ID] && (in.State == "pending" || in.State == "running") {
				seenInst[in.ID] = true
				d.say("drift: replacement launched: %s (%s %s in %s) on %s", in.ID, in.CapacityType, in.InstanceType, in.Zone, in.ImageID)
			}
		}
		st, serr := s.Observe(ctx)
		nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		disrupting, onNew, present := 0, 0, map[string]bool{}
		if err == nil {
			for _, n := range nodes.Items {
				id := instanceID(n.Spec.ProviderID)
				present[id] = true
				if o, isOld := old[id]; isOld {
					if hasTaintKey(n.Spec.Taints, v1.TaintKeyDisrupted) {
						disrupting++
						if !o.tainted {
							o.tainted = true
							d.say("drift: node %s tainted %s:NoSchedule, draining (its pods move to the replacement)", o.name, v1.TaintKeyDisrupted)
						}
					}
					continue
				}
				if in, ok := s.Sim.Instance(id); ok && in.ImageID == img.ID {
					onNew++
				}
				if v1.NodeReady(&n) && !readyNode[id] {
					readyNode[id] = true
					d.say("drift: replacement node %s Ready (%s)", n.Name, id)
				}
			}
			for id, o := range old {
				if !present[id] && !o.gone {
					o.gone = true
					d.say("drift: node %s removed (instance %s terminated); pods running %d, pending %d", o.name, id, st.RunningPods, st.PendingPods)
				}
			}
		}
		maxDisrupting = max(maxDisrupting, disrupting)
		if maxDisrupting > allowed {
			return fmt.Errorf("%d nodes disrupted at once, the budget allows %d", maxDisrupting, allowed)
		}
		gone := 0
		for _, o := range old {
			if o.gone {
				gone++
			}
		}
		settled := len(doneExec) == len(seenExec)
		if err == nil && serr == nil && gone == len(old) && onNew == len(nodes.Items) && settled &&
			st.RunningPods == replicas && st.PendingPods == 0 {
			d.say("drift replaced every node: %d nodes on %s, all %d pods Running, %.0fs after the pin, at most %d node(s) disrupted at once, $%.4f/h",
				onNew, img.ID, st.RunningPods, time.Since(start).Seconds(), maxDisrupting, st.PricePerHour)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s: %d of %d drifted nodes removed, %d nodes on the new AMI, pods running %d pending %d",
				deadline.Sub(start), gone, len(old), onNew, st.RunningPods, st.PendingPods)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// describeDriftExecution names the node a drift-<nodeclaim>-<hash>
// execution replaces.
func describeDriftExecution(name string, old map[string]*driftNode) string {
	claim, ok := strings.CutPrefix(name, "drift-")
	if !ok {
		return "not a drift execution"
	}
	if i := strings.LastIndex(claim, "-"); i > 0 {
		claim = claim[:i]
	}
	for _, n := range old {
		if n.claim == claim {
			return fmt.Sprintf("node %s (NodeClaim %s, %s) drifted; launching its replacement", n.name, claim, n.image)
		}
	}
	return "NodeClaim " + claim + " drifted; launching its replacement"
}

// instanceID is the instance ID of an aws:///<zone>/<id> provider ID ("" for
// any other form).
func instanceID(providerID string) string {
	_, id, _ := v1.ParseProviderID(providerID)
	return id
}

func hasTaintKey(taints []corev1.Taint, key string) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == key })
}

// guidePool reads the guide-complete NodePool the demo applies.
func guidePool() (v1.NodePool, error) {
	var np v1.NodePool
	data, err := demo.GuideComplete.ReadFile("guide-complete/nodepool.yaml")
	if err != nil {
		return np, fmt.Errorf("guide NodePool: %w", err)
	}
	if err := yaml.Unmarshal(data, &np); err != nil {
		return np, fmt.Errorf("guide NodePool: %w", err)
	}
	return np, nil
}

// poolBudget is how many of n nodes the guide NodePool's always-on budgets
// let be disrupting at once (percentages rounded up, as Karpenter scales
// them: karpenter-spec §6.3), with the budgets in words.
func poolBudget(n int) (int, string) {
	np, err := guidePool()
	if err != nil {
		return 1, "unknown"
	}
	allowed, words := n, []string{}
	for _, b := range np.Spec.Disruption.Budgets {
		if b.Schedule != nil {
			continue
		}
		words = append(words, "nodes: "+b.Nodes)
		v := intstr.Parse(b.Nodes)
		if got, err := intstr.GetScaledValueFromIntOrPercent(&v, n, true); err == nil {
			allowed = min(allowed, got)
		}
	}
	return allowed, strings.Join(words, ", ")
}

// checkBudgetWindow fails when one of the guide NodePool's budgets allows
// no disruption at some point between now and now+within (the guide's
// nodes: "0" daily from 02:00 UTC for an hour): the drift and
// consolidation steps would wait until the window ends. A budget is in
// force from each hit of its schedule (cron, UTC) for its duration, as
// Karpenter's Budget.IsActive reads it.
func checkBudgetWindow(now time.Time, within time.Duration) error {
	np, err := guidePool()
	if err != nil {
		return err
	}
	for _, b := range np.Spec.Disruption.Budgets {
		v := intstr.Parse(b.Nodes)
		if n, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, false); err != nil || n > 0 {
			continue
		}
		if b.Schedule == nil || b.Duration == nil {
			return fmt.Errorf("NodePool %s has a budget of nodes: %q with no schedule: nothing can be disrupted, so drift and consolidation would never act; run with --disruption=false", np.Name, b.Nodes)
		}
		sched, err := v1.ParseBudgetSchedule(*b.Schedule)
		if err != nil {
			return fmt.Errorf("NodePool %s: budget schedule %q: %w", np.Name, *b.Schedule, err)
		}
		dur := b.Duration.Duration
		// The window that may already be open started after now-dur.
		for start := sched.Next(now.Add(-dur)); !start.After(now.Add(within)); start = sched.Next(start) {
			end := start.Add(dur)
			if end.After(now) {
				return fmt.Errorf("NodePool %s's disruption budget (nodes: %q, schedule %q, duration %s) allows no disruption from %s to %s UTC, within this demo's %s: drift and consolidation would wait for it to end; run the demo after %s UTC, or with --disruption=false",
					np.Name, b.Nodes, *b.Schedule, b.Duration.Raw, start.UTC().Format("15:04"), end.UTC().Format("15:04"), within, end.UTC().Format("15:04"))
			}
		}
	}
	return nil
}
