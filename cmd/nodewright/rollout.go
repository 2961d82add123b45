package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/manifest"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/rollout"
)

// rolloutConfig is the parsed command line of `nodewright rollout`.
type rolloutConfig struct {
	Files          []string
	Opts           rollout.Options
	Region         string
	SpotPriceRatio float64
	Output         string
	SVG            string
	Compare        string
	// FromCluster reads the snapshot from the cluster of Kubeconfig and Context
	// (empty: kubectl's defaults); Files are then only the change.
	FromCluster         bool
	Kubeconfig, Context string
}

// rolloutFlags are the flag values of `nodewright rollout`, before
// checking.
type rolloutFlags struct {
	files       stringList
	from, until string
	cfg         rolloutConfig
}

const rolloutUse = "rollout {-f CLUSTER | --from-cluster [--kubeconfig PATH] [--context NAME]} -f CHANGE ... [--from RFC3339] [--until RFC3339] [--poll D] [--boot D] [--drain D] [--compare BUDGETS] [--svg FILE] [-o table|json|yaml]"

const rolloutLong = `Forecasts a rollout: applies a proposed change to a cluster snapshot and runs the disruption
engine (the evaluation the disruption Lambda runs every minute) forward on a simulated clock.
The snapshot is what "nodewright disruption" reads (NodePools, EC2NodeClasses, NodeClaims,
Nodes, Pods, PodDisruptionBudgets, DaemonSets); the change is manifests given after it with -f:
an object of the same kind, namespace and name replaces the earlier one (the last -f wins). An
EC2NodeClass given without status keeps the snapshot's status; when its amiSelectorTerms are
one id term (an AMI pin), its status AMIs become that AMI. A new AMI in the region is an
EC2NodeClass with the new status.amis. With --from-cluster the snapshot is read from the cluster instead
(list, cluster-wide, of those seven kinds; the kubeconfig as kubectl finds it, or --kubeconfig
and --context) and every -f is the change.

Every evaluation poll honours budgets and their cron windows (UTC), do-not-disrupt, PDBs and
terminationGracePeriod; a command's replacements are Ready --boot after it starts, and its
candidates are gone --drain later. Prints which node is replaced when and by what, the peak
extra nodes and $/h while replacing, the nodes never replaced and why, and when the rollout
finishes; expiration (expireAfter) is forecast the same way. --compare runs the same forecast
with the NodePools' budgets of another file, side by side; --svg writes a Gantt chart.`

// register declares the flags on cmd.
func (r *rolloutFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	addFileFlag(cmd, &r.files, "manifest `FILE|DIR|-`: the cluster snapshot, then the change (with --from-cluster only the change; repeatable; later objects replace earlier ones of the same kind and name)")
	fs.StringVar(&r.from, "from", "", "first evaluation, RFC 3339 (default: the current time)")
	fs.StringVar(&r.until, "until", "", "last evaluation, RFC 3339 (default: --from + 48h)")
	fs.BoolVar(&r.cfg.FromCluster, "from-cluster", false, "read the cluster snapshot from the cluster's API server instead of the first -f (every -f is then the change)")
	fs.StringVar(&r.cfg.Kubeconfig, "kubeconfig", "", "kubeconfig `PATH` of --from-cluster (default: $KUBECONFIG, else ~/.kube/config)")
	_ = cmd.MarkFlagFilename("kubeconfig")
	fs.StringVar(&r.cfg.Context, "context", "", "kubeconfig context `NAME` of --from-cluster (default: the current context)")
	fs.DurationVar(&r.cfg.Opts.Poll, "poll", rollout.DefaultPoll, "time between evaluations; the default is the disruption Lambda's schedule, rate(1 minute)")
	fs.DurationVar(&r.cfg.Opts.Boot, "boot", rollout.DefaultBoot, "a replacement's launch-to-Ready time; the default is the upper end of the 45-90 s a new EKS node takes to provision and join, as measured in production EKS (devfloor9 engineering playbook, Karpenter-based EKS scaling guide, 2026)")
	fs.DurationVar(&r.cfg.Opts.Drain, "drain", rollout.DefaultDrain, "a candidate's drain-to-deleted time, capped by its terminationGracePeriod; the default is twice Kubernetes' default pod terminationGracePeriodSeconds (30 s), an assumption rather than a measurement: set what your pods take")
	fs.StringVar(&r.cfg.Region, "region", "", "AWS `region` whose catalog and prices are used (default: the one region the input names, else "+defaultRegion+")")
	fs.Float64Var(&r.cfg.SpotPriceRatio, "spot-price-ratio", defaultSpotPriceRatio,
		"spot price as a fraction of on-demand: an offline assumption, since the embedded price table has no spot prices; 0 offers no spot capacity")
	fs.StringVar(&r.cfg.Compare, "compare", "", "NodePool manifest `FILE` whose spec.disruption.budgets replace those of the NodePools of the same name, forecast side by side")
	_ = cmd.MarkFlagFilename("compare", "yaml", "yml", "json")
	fs.StringVar(&r.cfg.SVG, "svg", "", "write a Gantt chart of the replacements, budget windows shaded, to `FILE` (SVG)")
	_ = cmd.MarkFlagFilename("svg", "svg")
	addOutputFlag(cmd, &r.cfg.Output)
	_ = cmd.RegisterFlagCompletionFunc("region", completeRegions)
}

// config checks the parsed flags and positional args; a problem is printed
// to stderr after "nodewright rollout: " and returned as errUsage.
func (r *rolloutFlags) config(args []string, stderr io.Writer, now func() time.Time) (rolloutConfig, error) {
	cfg := r.cfg
	fail := func(format string, args ...any) (rolloutConfig, error) {
		fmt.Fprintf(stderr, "nodewright rollout: "+format+"\n", args...)
		return cfg, errUsage
	}
	if len(args) > 0 {
		return fail("unexpected argument %q (manifests are given with -f)", args[0])
	}
	if len(r.files) == 0 && !cfg.FromCluster {
		return fail("at least one -f is required (the cluster snapshot, or --from-cluster)")
	}
	if !cfg.FromCluster && (cfg.Kubeconfig != "" || cfg.Context != "") {
		return fail("--kubeconfig and --context need --from-cluster")
	}
	if err := checkOutput(cfg.Output); err != nil {
		return fail("%v", err)
	}
	var err error
	if cfg.Opts.From, err = parseNow(r.from, now); err != nil {
		return fail("%v", strings.Replace(err.Error(), "--now", "--from", 1))
	}
	if r.until != "" {
		if cfg.Opts.Until, err = time.Parse(time.RFC3339, r.until); err != nil {
			return fail("--until %q: want RFC 3339, e.g. 2026-01-01T00:00:00Z", r.until)
		}
		if cfg.Opts.Until.Before(cfg.Opts.From) {
			return fail("--until %s is before --from %s", r.until, cfg.Opts.From.UTC().Format(time.RFC3339))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--poll", cfg.Opts.Poll}, {"--boot", cfg.Opts.Boot}, {"--drain", cfg.Opts.Drain}} {
		if d.v <= 0 {
			return fail("%s %s: want a duration above 0", d.name, d.v)
		}
	}
	if r := cfg.SpotPriceRatio; math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		return fail("--spot-price-ratio %v: want a number >= 0 (0 offers no spot capacity)", r)
	}
	cfg.Files = r.files
	return cfg, nil
}

func newRolloutCommand(c cli) *cobra.Command {
	var r rolloutFlags
	cmd := &cobra.Command{
		Use:                   rolloutUse,
		Short:                 "forecast when a change (AMI pin, NodePool edit, budgets) replaces each node",
		Long:                  rolloutLong,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := r.config(args, c.stderr, time.Now)
			*c.code = printReport("rollout", cfg.Output, err,
				func() (rolloutReport, error) { return forecastRollout(cmd.Context(), cfg, c) },
				rolloutReport.writeTable, c.stdout, c.stderr)
			return nil
		},
	}
	r.register(cmd)
	return cmd
}

// rolloutReport is what `nodewright rollout` prints.
type rolloutReport struct {
	Region      string `json:"region"`
	PriceSource string `json:"priceSource"`
	// Changes says what the change manifests replaced.
	Changes []string `json:"changes"`
	rollout.Timeline
	// Compare is the forecast with the budgets of --compare, when given.
	Compare *comparison `json:"compare,omitempty"`
}

// comparison is the --compare forecast and what differs.
type comparison struct {
	Budgets  string           `json:"budgets"`
	Timeline rollout.Timeline `json:"timeline"`
}

// forecastRollout reads the snapshot and the change, forecasts, and
// writes the SVG when asked.
func forecastRollout(ctx context.Context, cfg rolloutConfig, c cli) (rolloutReport, error) {
	stdin, stderr := c.stdin, c.stderr
	var objs []manifest.Object
	if cfg.FromCluster {
		raw, err := c.live(ctx, cfg.Kubeconfig, cfg.Context)
		if err != nil {
			return rolloutReport{}, fmt.Errorf("--from-cluster: %w", err)
		}
		read, err := manifest.Read(bytes.NewReader(raw), "cluster")
		if objs, err = checkRead(read, err, stderr); err != nil {
			return rolloutReport{}, fmt.Errorf("--from-cluster: %w", err)
		}
	}
	if len(cfg.Files) > 0 {
		change, err := loadManifests(cfg.Files, stdin, stderr)
		if err != nil {
			return rolloutReport{}, err
		}
		objs = append(objs, change...)
	}
	objs, changes := applyChange(objs)
	snap, err := disruptionSnapshot(objs, cfg.Region, provisioning.LaunchOptions{SpotPriceRatio: cfg.SpotPriceRatio}, stderr)
	if err != nil {
		return rolloutReport{}, err
	}
	tl, err := rollout.Forecast(ctx, snap.Input, cfg.Opts)
	if err != nil {
		return rolloutReport{}, fmt.Errorf("forecast: %w", err)
	}
	rep := rolloutReport{Region: snap.Region, PriceSource: snap.PriceSource, Changes: changes, Timeline: tl}
	if cfg.Compare != "" {
		alt, err := withBudgets(snap.NodePools, cfg.Compare, stdin, stderr)
		if err != nil {
			return rolloutReport{}, err
		}
		in := snap.Input
		in.NodePools = alt
		ctl, err := rollout.Forecast(ctx, in, cfg.Opts)
		if err != nil {
			return rolloutReport{}, fmt.Errorf("forecast with --compare budgets: %w", err)
		}
		rep.Compare = &comparison{Budgets: cfg.Compare, Timeline: ctl}
	}
	if cfg.SVG != "" {
		f, err := os.Create(cfg.SVG)
		if err != nil {
			return rolloutReport{}, fmt.Errorf("--svg: %w", err)
		}
		if err := writeGantt(f, tl); err != nil {
			f.Close()
			return rolloutReport{}, fmt.Errorf("--svg %s: %w", cfg.SVG, err)
		}
		if err := f.Close(); err != nil {
			return rolloutReport{}, fmt.Errorf("--svg %s: %w", cfg.SVG, err)
		}
	}
	return rep, nil
}

// applyChange keeps, of objects of the same kind, namespace and name, the
// last one read (the change replaces the snapshot's), at the first one's
// place. A replacing EC2NodeClass without status keeps the replaced one's
// status; when its amiSelectorTerms are one id term, its status AMIs take
// that ID (the AMI pin: the EC2NodeClass controller would resolve the
// term to that AMI). It returns the objects and one line per replacement.
func applyChange(objs []manifest.Object) ([]manifest.Object, []string) {
	key := func(o manifest.Object) string { return o.Kind + "/" + o.Namespace + "/" + o.Name }
	last := map[string]int{}
	for i, o := range objs {
		if o.Kind != "" && o.Name != "" {
			last[key(o)] = i
		}
	}
	changes := []string{}
	out := make([]manifest.Object, 0, len(objs))
	placed := map[string]bool{}
	for i, o := range objs {
		k := key(o)
		j, ok := last[k]
		if !ok || (j == i && !placed[k]) {
			out = append(out, o)
			placed[k] = true
			continue
		}
		if placed[k] {
			continue
		}
		repl := objs[j]
		what := "replaced"
		if old, ok := o.Typed.(*v1.EC2NodeClass); ok {
			if p, ok := repl.Typed.(*v1.EC2NodeClass); ok {
				nc := *p // the fields changed below are replaced, not written
				if len(nc.Status.AMIs) == 0 && len(nc.Status.Subnets) == 0 {
					nc.Status = old.Status
					nc.Status.AMIs = slices.Clone(old.Status.AMIs)
					what = "replaced (status kept)"
					if t := nc.Spec.AMISelectorTerms; len(t) == 1 && t[0].ID != "" {
						for a := range nc.Status.AMIs {
							nc.Status.AMIs[a].ID = t[0].ID
						}
						what = "pinned to " + t[0].ID
					}
				}
				repl.Typed = &nc
			}
		}
		changes = append(changes, fmt.Sprintf("%s %s: %s by %s", o.Kind, o.Name, what, repl.Source))
		out = append(out, repl)
		placed[k] = true
	}
	return out, changes
}

// withBudgets returns pools with spec.disruption.budgets replaced by those
// of the NodePools of the same name in file; a NodePool of file that names
// no pool is an error.
func withBudgets(pools []v1.NodePool, file string, stdin io.Reader, stderr io.Writer) ([]v1.NodePool, error) {
	objs, err := loadManifests([]string{file}, stdin, stderr)
	if err != nil {
		return nil, fmt.Errorf("--compare: %w", err)
	}
	out := slices.Clone(pools)
	found := 0
	for _, o := range objs {
		np, ok := o.Typed.(*v1.NodePool)
		if !ok {
			continue
		}
		i := slices.IndexFunc(out, func(p v1.NodePool) bool { return p.Name == np.Name })
		if i < 0 {
			return nil, fmt.Errorf("--compare %s: %s: NodePool %q is not in the snapshot", file, o.Source, np.Name)
		}
		alt := *np
		alt.SetDefaults()
		if err := alt.Validate(); err != nil {
			return nil, fmt.Errorf("--compare %s: %s: %w", file, o.Source, err)
		}
		out[i].Spec.Disruption.Budgets = alt.Spec.Disruption.Budgets
		found++
	}
	if found == 0 {
		return nil, fmt.Errorf("--compare %s: no NodePool in the file", file)
	}
	return out, nil
}

func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

// writeTable prints the report for a person.
func (r rolloutReport) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "Rollout forecast %s to %s UTC (region %s; %s)\n", clock(r.From), clock(r.Until), r.Region, r.PriceSource)
	fmt.Fprintf(w, "Evaluations every %s; replacements Ready %s after the start, candidates gone %s later.\n",
		time.Duration(r.PollSeconds*float64(time.Second)), time.Duration(r.BootSeconds*float64(time.Second)), time.Duration(r.DrainSeconds*float64(time.Second)))
	for _, c := range r.Changes {
		fmt.Fprintf(w, "change: %s\n", c)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Steps) == 0 {
		fmt.Fprintln(tw, "No node is replaced.")
	} else {
		fmt.Fprintln(tw, "START\tREADY\tDONE\tMETHOD\tNODEPOOL\tNODECLAIM\tNODE\tTYPE\tREPLACED BY\tEXTRA/H")
		for _, s := range r.Steps {
			done := "never (drain blocked)"
			if !s.Done.IsZero() {
				done = clock(s.Done)
			}
			repl := strings.Join(s.Replacements, "; ")
			if repl == "" {
				repl = "- (" + string(s.Decision) + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4f\n", clock(s.Start), clock(s.Ready), done, s.Method, s.NodePool, s.NodeClaim, dash(s.Node), dash(s.InstanceType), repl, s.ExtraPerHour)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Never) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NEVER REPLACED\tNODE\tNODEPOOL\tDRIFT\tWHY")
		for _, n := range r.Never {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.NodeClaim, dash(n.Node), dash(n.NodePool), dash(n.Drift), n.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	for _, win := range r.Windows {
		fmt.Fprintf(w, "budget window: NodePool %s allows %s disruptions %s to %s\n", win.NodePool, win.Reason, clock(win.Start), clock(win.End))
	}
	fmt.Fprint(w, summary(r.Timeline))
	if r.Compare != nil {
		fmt.Fprintf(w, "\nWith the budgets of %s:\n%s", r.Compare.Budgets, summary(r.Compare.Timeline))
		fmt.Fprintf(w, "\n%-28s %-24s %s\n", "", "as changed", "with "+r.Compare.Budgets)
		fmt.Fprintf(w, "%-28s %-24s %s\n", "finish", finishText(r.Timeline), finishText(r.Compare.Timeline))
		fmt.Fprintf(w, "%-28s %-24d %d\n", "nodes replaced", len(r.Steps), len(r.Compare.Timeline.Steps))
		fmt.Fprintf(w, "%-28s %-24d %d\n", "peak nodes disrupted at once", r.PeakDisrupting, r.Compare.Timeline.PeakDisrupting)
		fmt.Fprintf(w, "%-28s %-24s %.4f\n", "peak extra $/h", fmt.Sprintf("%.4f", r.PeakExtraPerHour), r.Compare.Timeline.PeakExtraPerHour)
	}
	return nil
}

func finishText(tl rollout.Timeline) string {
	if tl.Finish == nil {
		return "not by " + clock(tl.Until)
	}
	return clock(*tl.Finish)
}

// summary is the closing lines of a forecast.
func summary(tl rollout.Timeline) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d node(s) replaced in %d evaluations; peak %d node(s) disrupted at once, %d extra node(s), %.4f extra $/h.\n",
		len(tl.Steps), tl.Evaluations, tl.PeakDisrupting, tl.PeakExtraNodes, tl.PeakExtraPerHour)
	switch {
	case tl.Finished:
		fmt.Fprintf(&b, "The rollout finishes at %s UTC.\n", clock(*tl.Finish))
	case len(tl.Never) > 0:
		fmt.Fprintf(&b, "The rollout does not finish by %s UTC: %d node(s) are never replaced (above).\n", clock(tl.Until), len(tl.Never))
	default:
		fmt.Fprintf(&b, "The rollout is still running at %s UTC; set a later --until.\n", clock(tl.Until))
	}
	return b.String()
}
