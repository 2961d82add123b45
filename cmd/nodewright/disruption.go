package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/cmd/nodewright/internal/workload"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/manifest"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// knownFeatureGates are Karpenter's feature gates (karpenter-spec §10.3);
// only SpotToSpotConsolidation changes disruption decisions, the others are
// accepted so a Helm value can be pasted as is.
var knownFeatureGates = []string{
	"NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation", "NodeOverlay", "StaticCapacity", "CapacityBuffer",
}

// disruptionConfig is the parsed command line of `nodewright disruption`.
type disruptionConfig struct {
	Files          []string
	Now            time.Time
	Region         string
	SpotPriceRatio float64
	Gates          disruption.FeatureGates
	Output         string
	// Live is --live (the region's EC2 data read from AWS) and the SDK
	// options it loads with.
	Live liveConfig
}

// parseFeatureGates reads "Name=bool,Name=bool".
func parseFeatureGates(s string) (disruption.FeatureGates, error) {
	var g disruption.FeatureGates
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			return g, fmt.Errorf("%q: want Name=true or Name=false", kv)
		}
		on, err := strconv.ParseBool(val)
		if err != nil {
			return g, fmt.Errorf("%q: %q is not true or false", kv, val)
		}
		if !slices.Contains(knownFeatureGates, name) {
			return g, fmt.Errorf("%q: unknown feature gate (known: %s)", kv, strings.Join(knownFeatureGates, ", "))
		}
		if name == "SpotToSpotConsolidation" {
			g.SpotToSpotConsolidation = on
		}
	}
	return g, nil
}

// disruptionFlags are the flag values of `nodewright disruption`, before
// checking.
type disruptionFlags struct {
	files      stringList
	now, gates string
	cfg        disruptionConfig
}

const disruptionUse = "disruption -f FILE|DIR|- ... [--now RFC3339] [--feature-gates SpotToSpotConsolidation=true] [--region R] [--live] [--spot-price-ratio F] [-o table|json|yaml]"

const disruptionLong = `Shows the disruption commands (Empty, Drifted, Underutilized, Expired) an evaluation at that instant would start for the NodePools, EC2NodeClasses, NodeClaims, Nodes, Pods, PodDisruptionBudgets and DaemonSets of the manifests, and why every other NodeClaim is left alone.
Subnet and security-group drift need EC2 instance data and are not evaluated from manifests.`

// register declares the flags on cmd.
func (d *disruptionFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	addFileFlag(cmd, &d.files, "manifest `FILE|DIR|-` (repeatable or comma-separated; - reads stdin; directories are read recursively)")
	fs.StringVar(&d.now, "now", "", "evaluation instant, RFC 3339 (default: the current time)")
	fs.StringVar(&d.gates, "feature-gates", "", "Karpenter feature `gates`, e.g. SpotToSpotConsolidation=true")
	fs.StringVar(&d.cfg.Region, "region", "", "AWS `region` whose catalog and prices are used (default: the one region the input names in zone labels or requirements, else "+defaultRegion+")")
	fs.Float64Var(&d.cfg.SpotPriceRatio, "spot-price-ratio", defaultSpotPriceRatio,
		"spot price as a fraction of on-demand: an offline assumption, since the embedded price table has no spot prices; 0 offers no spot capacity "+
			"(with --live it applies only if Spot prices cannot be read; default there: the on-demand price)")
	addLiveFlag(cmd, &d.cfg.Live.Enabled)
	addOutputFlag(cmd, &d.cfg.Output)
	_ = cmd.RegisterFlagCompletionFunc("region", completeRegions)
	_ = cmd.RegisterFlagCompletionFunc("feature-gates", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var gates []string
		for _, g := range knownFeatureGates {
			gates = append(gates, g+"=true", g+"=false")
		}
		return gates, cobra.ShellCompDirectiveNoFileComp
	})
}

// parseDisruptionFlags parses args; now supplies the default for --now.
func parseDisruptionFlags(args []string, stderr io.Writer, now func() time.Time) (disruptionConfig, error) {
	var d disruptionFlags
	cmd := &cobra.Command{Use: "disruption"}
	d.register(cmd)
	if err := cmd.Flags().Parse(goFlagArgs(cmd.Flags(), args)); err != nil {
		fmt.Fprintf(stderr, "nodewright disruption: %v\n", err)
		return disruptionConfig{}, errUsage
	}
	return d.config(cmd.Flags(), cmd.Flags().Args(), stderr, now)
}

// config checks the parsed flags and positional args; a problem is printed
// to stderr after "nodewright disruption: " and returned as errUsage.
func (d *disruptionFlags) config(fs *pflag.FlagSet, args []string, stderr io.Writer, now func() time.Time) (disruptionConfig, error) {
	cfg := d.cfg
	fail := func(format string, args ...any) (disruptionConfig, error) {
		fmt.Fprintf(stderr, "nodewright disruption: "+format+"\n", args...)
		return cfg, errUsage
	}
	if len(args) > 0 {
		return fail("unexpected argument %q (manifests are given with -f)", args[0])
	}
	if len(d.files) == 0 {
		return fail("at least one -f is required")
	}
	if err := checkOutput(cfg.Output); err != nil {
		return fail("%v", err)
	}
	g, err := parseFeatureGates(d.gates)
	if err != nil {
		return fail("--feature-gates %v", err)
	}
	if err := checkLive(cfg.Live.Enabled, cfg.Region); err != nil {
		return fail("%v", err)
	}
	if cfg.Live.Enabled {
		cfg.SpotPriceRatio = liveSpotPriceRatio(cfg.SpotPriceRatio, fs.Changed("spot-price-ratio"))
	}
	cfg.Gates, cfg.Files = g, d.files
	if cfg.Now, err = parseNow(d.now, now); err != nil {
		return fail("%v", err)
	}
	return cfg, nil
}

func newDisruptionCommand(c cli) *cobra.Command {
	var d disruptionFlags
	cmd := &cobra.Command{
		Use:                   disruptionUse,
		Short:                 "show the disruption commands an evaluation at an instant would start",
		Long:                  disruptionLong,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := d.config(cmd.Flags(), args, c.stderr, time.Now)
			*c.code = printReport("disruption", cfg.Output, err,
				func() (disruptionReport, error) { return evaluateDisruption(cmd.Context(), cfg, c.stdin, c.stderr) },
				disruptionReport.writeTable, c.stdout, c.stderr)
			return nil
		},
	}
	d.register(cmd)
	return cmd
}

// disruptionReport is what `nodewright disruption` prints: the
// evaluation's Result (commands, blocked, budgets: the JSON shape)
// with the instant, region and price source.
type disruptionReport struct {
	Now         string `json:"now"`
	Region      string `json:"region"`
	PriceSource string `json:"priceSource"`
	disruption.Result
	// Ignored lists objects read but left out of the evaluation.
	Ignored []workload.Note `json:"ignored"`
}

// evaluateDisruption reads the manifests, checks them, resolves instance
// types and evaluates. Warnings go to stderr; an error means invalid input
// or a failed evaluation.
func evaluateDisruption(ctx context.Context, cfg disruptionConfig, stdin io.Reader, stderr io.Writer) (disruptionReport, error) {
	objs, err := loadManifests(cfg.Files, stdin, stderr)
	if err != nil {
		return disruptionReport{}, err
	}
	var live *catalog.LiveData
	if cfg.Live.Enabled {
		if live, err = fetchLive(ctx, cfg.Live, cfg.Region, cfg.Now, stderr); err != nil {
			return disruptionReport{}, err
		}
	}
	snap, err := disruptionSnapshot(objs, cfg.Region, provisioning.LaunchOptions{SpotPriceRatio: cfg.SpotPriceRatio, Live: live, Now: cfg.Now}, stderr)
	if err != nil {
		return disruptionReport{}, err
	}
	in := snap.Input
	in.Now, in.FeatureGates = cfg.Now, cfg.Gates
	res, err := disruption.Evaluate(ctx, in)
	if err != nil {
		return disruptionReport{}, fmt.Errorf("evaluate: %w", err)
	}
	return disruptionReport{
		Now: cfg.Now.UTC().Format(time.RFC3339), Region: snap.Region, PriceSource: snap.PriceSource,
		Result: res, Ignored: snap.Ignored,
	}, nil
}

// loadManifests reads the manifests of files ("-" is stdin), prints the
// non-strict warnings to stderr and fails on strict ones.
func loadManifests(files []string, stdin io.Reader, stderr io.Writer) ([]manifest.Object, error) {
	objs, err := manifest.ReadPaths(files, stdin)
	return checkRead(objs, err, stderr)
}

// checkRead takes what manifest.Read or ReadPaths returned (objs,
// err), prints the non-strict warnings to stderr and fails on strict ones.
func checkRead(objs []manifest.Object, err error, stderr io.Writer) ([]manifest.Object, error) {
	if err != nil {
		return nil, fmt.Errorf("read manifests:\n%w", err)
	}
	for _, o := range objs {
		for _, w := range o.Warnings {
			if !manifest.Strict(w) {
				fmt.Fprintf(stderr, "warning: %s: %s %q: %s\n", o.Source, o.Kind, o.Name, w.Error())
			}
		}
	}
	if err := strictErrors(objs); err != nil {
		return nil, fmt.Errorf("invalid input:\n%w", err)
	}
	return objs, nil
}

// snapshot is a disruption.Input built from manifests, with where its
// region and prices come from and the objects left out.
type snapshot struct {
	disruption.Input
	Region, PriceSource string
	Ignored             []workload.Note
}

// disruptionSnapshot checks objs, chooses the region (region: --region,
// "" for the input's) and resolves every EC2NodeClass's instance types:
// the input `nodewright disruption` evaluates and `nodewright rollout`
// runs forward; opts are the launch options but the region (its
// SpotPriceRatio, and Live and Now with --live). Now and FeatureGates are
// left for the caller.
func disruptionSnapshot(objs []manifest.Object, region string, opts provisioning.LaunchOptions, stderr io.Writer) (snapshot, error) {
	region, err := chooseRegion(region, objs, stderr)
	if err != nil {
		return snapshot{}, err
	}
	cluster, err := workload.Build(objs)
	if err != nil {
		return snapshot{}, fmt.Errorf("invalid input:\n%w", err)
	}
	if err := defaultAndValidate(cluster); err != nil {
		return snapshot{}, fmt.Errorf("invalid input:\n%w", err)
	}
	in := disruptionInput(cluster)
	var sources []string
	for i := range in.NodeClasses {
		nc := &in.NodeClasses[i]
		opts.Region = region
		types, src, _, err := provisioning.LaunchTypes(nc, nil, opts)
		if err != nil {
			return snapshot{}, fmt.Errorf("%s: EC2NodeClass %q: resolve instance types: %w", cluster.Sources[v1.KindEC2NodeClass+"/"+nc.Name], nc.Name, err)
		}
		in.InstanceTypes[nc.Name] = types
		if !slices.Contains(sources, src.Description) {
			sources = append(sources, src.Description)
		}
	}
	s := snapshot{Input: in, Region: region, PriceSource: strings.Join(sources, "; "), Ignored: cluster.Ignored}
	if len(sources) == 0 {
		s.PriceSource = "none (no EC2NodeClass in the manifests)"
	}
	if s.Ignored == nil {
		s.Ignored = []workload.Note{}
	}
	return s, nil
}

// disruptionInput flattens the manifest snapshot: every NodeClaim and Node
// (with its CSINode's attach limits), the storage objects, every pod bound
// or nominated to them, and the pending pods (the copies
// workload makes of the pods of deleting nodes are left out: Evaluate
// reschedules those itself).
func disruptionInput(c *workload.Cluster) disruption.Input {
	in := disruption.Input{
		NodePools: c.NodePools, NodeClasses: c.NodeClasses, DaemonSets: c.DaemonSets,
		PodDisruptionBudgets: c.PodDisruptionBudgets, InstanceTypes: map[string][]*catalog.InstanceType{},
		Volumes: c.Volumes,
	}
	placed := map[string]bool{}
	for _, n := range c.Nodes {
		if n.Node != nil {
			in.Nodes = append(in.Nodes, *n.Node)
			if len(n.VolumeLimits) > 0 {
				if in.VolumeLimits == nil {
					in.VolumeLimits = map[string]map[string]int{}
				}
				in.VolumeLimits[n.Node.Name] = n.VolumeLimits
			}
		}
		if n.NodeClaim != nil {
			in.NodeClaims = append(in.NodeClaims, *n.NodeClaim)
		}
		for _, p := range n.Pods {
			in.Pods = append(in.Pods, *p)
			placed[podID(p)] = true
		}
	}
	for _, p := range c.Pending {
		if !placed[podID(p)] {
			in.Pods = append(in.Pods, *p)
		}
	}
	return in
}

func podID(p *corev1.Pod) string { return string(p.UID) + "\x00" + p.Namespace + "/" + p.Name }

// writeTable prints the report for a person: commands with their
// candidates, replacements and reasons, then the NodeClaims left alone,
// then the budgets.
func (r disruptionReport) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "Disruption evaluation at %s (region %s; %s)\n\n", r.Now, r.Region, r.PriceSource)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Commands) == 0 {
		fmt.Fprintln(tw, "No disruption would start.")
	} else {
		fmt.Fprintln(tw, "COMMAND\tMETHOD\tDECISION\tNODEPOOL\tCANDIDATES\tREPLACEMENT\tSAVINGS/H")
		for _, c := range r.Commands {
			var cands []string
			for _, cand := range c.Candidates {
				s := cand.NodeClaim
				if cand.Node != "" {
					s += " (" + cand.Node + ")"
				}
				cands = append(cands, s)
			}
			repl := "-"
			var parts []string
			for _, rp := range c.Replacements {
				e := rp.Expected
				parts = append(parts, fmt.Sprintf("%s %s %s %.4f/h (%d types)", e.InstanceType, e.CapacityType, e.Zone, e.PricePerHour, len(rp.InstanceTypes)))
			}
			if len(parts) > 0 {
				repl = strings.Join(parts, "; ")
			}
			pool := c.NodePool
			if pool == "" {
				pool = "(several)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.4f\n", c.ID, c.Method, c.Decision, pool, strings.Join(cands, ", "), repl, c.SavingsPerHour)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Commands {
		fmt.Fprintf(w, "  %s: %s\n", c.ID, c.Reason)
	}
	if len(r.Blocked) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LEFT ALONE\tNODE\tNODEPOOL\tREASON")
		for _, b := range r.Blocked {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", b.NodeClaim, dash(b.Node), dash(b.NodePool), b.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Budgets) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODEPOOL\tREASON\tNODES\tALLOWED\tDISRUPTING\tAVAILABLE")
		for _, b := range r.Budgets {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", b.NodePool, b.Reason, b.Nodes, limit(b.Allowed), b.Disrupting, limit(b.Available))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range r.Ignored {
		fmt.Fprintf(w, "ignored: %s: %s\n", n.Object, n.Reason)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func limit(n int) string {
	if n < 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}
