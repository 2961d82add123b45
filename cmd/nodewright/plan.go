package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodewright/nodewright/cmd/nodewright/internal/workload"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// defaultSpotPriceRatio prices spot offerings at this fraction of on-demand.
// It is an offline assumption, not data: the embedded price table has no
// spot prices. 0.35 is a 65% discount, inside the 50-90% range AWS
// advertises for Spot.
const defaultSpotPriceRatio = 0.35

// planConfig is the parsed command line of `nodewright plan`.
type planConfig struct {
	Files []string
	// Region is --region; empty when the flag was not given, so the input
	// decides (inferRegion), else defaultRegion.
	Region         string
	Zones          []string
	Now            time.Time
	SpotPriceRatio float64
	Output         string
	// FailUnschedulable is --fail-unschedulable: exit 3 when the plan
	// leaves a pod unschedulable.
	FailUnschedulable bool
	// Live is --live (the region's EC2 data read from AWS) and the SDK
	// options it loads with.
	Live liveConfig
}

// regionName is the shape of an AWS region name (us-east-1, us-gov-west-1,
// cn-north-1, ap-southeast-2): AWS's documented naming, area-direction-number
// with an optional partition infix.
var regionName = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$`)

// zoneSuffix is what follows the region in a zone name: a letter
// (us-east-1a), or a Local Zone's "-<location>-<n><letter>"
// (us-east-1-bos-1a), per AWS's zone naming.
var zoneSuffix = regexp.MustCompile(`^([a-z]|-[a-z]+-[0-9]+[a-z])$`)

// errUsage marks a command-line error (exit 2, usage printed).
var errUsage = errors.New("usage")

// stringList is a repeatable, comma-separated flag value (a pflag.Value):
// each element is trimmed, empty ones are dropped.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// Type is the value's name in pflag's help when the usage names none.
func (l *stringList) Type() string { return "strings" }

// planFlags are the flag values of `nodewright plan`, before checking.
type planFlags struct {
	files, zones stringList
	cfg          planConfig
	now          string
}

const planUse = "plan -f FILE|DIR|- ... [--region R] [--live] [--zones a,b] [--now RFC3339] [--spot-price-ratio F] [-o table|json|yaml] [--fail-unschedulable]"

const planLong = "Shows the NodeClaims the solver would launch for the pending pods of the manifests, at what price, and why any pod cannot be placed."

// register declares the flags on cmd.
func (p *planFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	addFileFlag(cmd, &p.files, "manifest `FILE|DIR|-` (repeatable or comma-separated; - reads stdin; directories are read recursively)")
	fs.StringVar(&p.cfg.Region, "region", "", "AWS `region` whose catalog, prices and zones are used (default: the one region the input names in zone labels or requirements, else "+defaultRegion+")")
	fs.Var(&p.zones, "zones", "comma-separated `zones` to offer capacity in (default: each EC2NodeClass's status.subnets zones, else every zone of the region)")
	fs.StringVar(&p.now, "now", "", "planning time, RFC 3339 (default: the current time); stamps the new NodeClaims")
	fs.Float64Var(&p.cfg.SpotPriceRatio, "spot-price-ratio", defaultSpotPriceRatio,
		"spot price as a fraction of on-demand: an offline assumption, since the embedded price table has no spot prices; 0 offers no spot capacity "+
			"(with --live it applies only if Spot prices cannot be read; default there: the on-demand price)")
	addLiveFlag(cmd, &p.cfg.Live.Enabled)
	addOutputFlag(cmd, &p.cfg.Output)
	fs.BoolVar(&p.cfg.FailUnschedulable, "fail-unschedulable", false, "exit 3 when any pod stays unschedulable (after printing the plan), for CI pipelines that gate manifest changes")
	_ = cmd.RegisterFlagCompletionFunc("region", completeRegions)
}

// parsePlanFlags parses args; now supplies the default for --now.
func parsePlanFlags(args []string, stderr io.Writer, now func() time.Time) (planConfig, error) {
	var p planFlags
	cmd := &cobra.Command{Use: "plan"}
	p.register(cmd)
	if err := cmd.Flags().Parse(goFlagArgs(cmd.Flags(), args)); err != nil {
		fmt.Fprintf(stderr, "nodewright plan: %v\n", err)
		return planConfig{}, errUsage
	}
	return p.config(cmd.Flags(), cmd.Flags().Args(), stderr, now)
}

// config checks the parsed flags and positional args; a problem is printed
// to stderr after "nodewright plan: " and returned as errUsage.
func (p *planFlags) config(fs *pflag.FlagSet, args []string, stderr io.Writer, now func() time.Time) (planConfig, error) {
	cfg, files, zones := p.cfg, p.files, p.zones
	if len(args) > 0 {
		fmt.Fprintf(stderr, "nodewright plan: unexpected argument %q (manifests are given with -f)\n", args[0])
		return cfg, errUsage
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "nodewright plan: at least one -f is required")
		return cfg, errUsage
	}
	if err := checkOutput(cfg.Output); err != nil {
		fmt.Fprintf(stderr, "nodewright plan: %v\n", err)
		return cfg, errUsage
	}
	if fs.Changed("region") && cfg.Region == "" {
		fmt.Fprintf(stderr, "nodewright plan: --region \"\": not an AWS region name such as us-east-1\n")
		return cfg, errUsage
	}
	if err := checkLive(cfg.Live.Enabled, cfg.Region); err != nil {
		fmt.Fprintf(stderr, "nodewright plan: %v\n", err)
		return cfg, errUsage
	}
	if cfg.Live.Enabled {
		cfg.SpotPriceRatio = liveSpotPriceRatio(cfg.SpotPriceRatio, fs.Changed("spot-price-ratio"))
	}
	if cfg.Region == "" && len(zones) > 0 {
		cfg.Region, _ = regionOfZone(zones[0])
	}
	if cfg.Region != "" && !regionName.MatchString(cfg.Region) {
		fmt.Fprintf(stderr, "nodewright plan: --region %q: not an AWS region name such as us-east-1\n", cfg.Region)
		return cfg, errUsage
	}
	for _, z := range zones {
		if rest, ok := strings.CutPrefix(z, cfg.Region); cfg.Region == "" || !ok || !zoneSuffix.MatchString(rest) {
			fmt.Fprintf(stderr, "nodewright plan: --zones: %q is not a zone of region %s (zones are the region name plus a letter, e.g. %sa; set --region for another region)\n",
				z, cfg.Region, cfg.Region)
			return cfg, errUsage
		}
	}
	if r := cfg.SpotPriceRatio; math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		fmt.Fprintf(stderr, "nodewright plan: --spot-price-ratio %v: want a number >= 0 (0 offers no spot capacity)\n", r)
		return cfg, errUsage
	}
	cfg.Files, cfg.Zones = files, zones
	var err error
	if cfg.Now, err = parseNow(p.now, now); err != nil {
		fmt.Fprintf(stderr, "nodewright plan: %v\n", err)
		return cfg, errUsage
	}
	return cfg, nil
}

func newPlanCommand(c cli) *cobra.Command {
	var p planFlags
	cmd := &cobra.Command{
		Use:                   planUse,
		Short:                 "show the NodeClaims the solver would launch for a set of manifests",
		Long:                  planLong,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := p.config(cmd.Flags(), args, c.stderr, time.Now)
			*c.code = runPlan(cmd.Context(), cfg, err, c.stdin, c.stdout, c.stderr)
			return nil
		},
	}
	p.register(cmd)
	return cmd
}

// runPlan solves for cfg (or ends with exit 2 on a usage error parseErr,
// already printed) and prints the plan; it returns the exit code.
func runPlan(ctx context.Context, cfg planConfig, parseErr error, stdin io.Reader, stdout, stderr io.Writer) int {
	var unschedulable int
	code := printReport("plan", cfg.Output, parseErr,
		func() (workload.Report, error) {
			r, err := plan(ctx, cfg, stdin, stderr)
			unschedulable = len(r.Unschedulable)
			return r, err
		},
		workload.Report.WriteTable, stdout, stderr)
	if code == exitOK && cfg.FailUnschedulable && unschedulable > 0 {
		fmt.Fprintf(stderr, "nodewright plan: %d pods stay unschedulable (--fail-unschedulable)\n", unschedulable)
		return exitUnschedulable
	}
	return code
}

// plan reads the manifests, checks them, resolves instance types and
// solves. Warnings go to stderr; an error means invalid input or a failed
// solve.
func plan(ctx context.Context, cfg planConfig, stdin io.Reader, stderr io.Writer) (workload.Report, error) {
	objs, err := loadManifests(cfg.Files, stdin, stderr)
	if err != nil {
		return workload.Report{}, err
	}
	if cfg.Region, err = chooseRegion(cfg.Region, objs, stderr); err != nil {
		return workload.Report{}, err
	}
	cluster, err := workload.Build(objs)
	if err != nil {
		return workload.Report{}, fmt.Errorf("invalid input:\n%w", err)
	}
	if err := defaultAndValidate(cluster); err != nil {
		return workload.Report{}, fmt.Errorf("invalid input:\n%w", err)
	}
	in := scheduling.Input{
		Now:           cfg.Now,
		NodePools:     cluster.NodePools,
		NodeClasses:   cluster.NodeClasses,
		InstanceTypes: map[string][]*catalog.InstanceType{},
		Pods:          cluster.Pending,
		Nodes:         cluster.Nodes,
		DaemonSets:    cluster.DaemonSets,
		Volumes:       cluster.Volumes,
	}
	var sources []string
	zones := map[string]workload.ZoneReport{}
	opts := provisioning.LaunchOptions{Region: cfg.Region, Zones: cfg.Zones, SpotPriceRatio: cfg.SpotPriceRatio}
	if cfg.Live.Enabled && len(in.NodeClasses) > 0 {
		if opts.Live, err = fetchLive(ctx, cfg.Live, cfg.Region, cfg.Now, stderr); err != nil {
			return workload.Report{}, err
		}
		opts.Now = cfg.Now
	}
	for i := range in.NodeClasses {
		nc := &in.NodeClasses[i]
		types, src, _, err := provisioning.LaunchTypes(nc, nil, opts)
		if err != nil {
			return workload.Report{}, fmt.Errorf("%s: EC2NodeClass %q: resolve instance types: %w", cluster.Sources[v1.KindEC2NodeClass+"/"+nc.Name], nc.Name, err)
		}
		in.InstanceTypes[nc.Name] = types
		if !slices.Contains(sources, src.Description) {
			sources = append(sources, src.Description)
		}
		zones[nc.Name] = zoneReport(cfg, nc, types)
	}
	res, err := scheduling.Solve(ctx, in)
	if err != nil {
		return workload.Report{}, fmt.Errorf("solve: %w", err)
	}
	report := workload.NewReport(in, res)
	report.Region = cfg.Region
	report.PriceSource = strings.Join(sources, "; ")
	if len(sources) == 0 {
		report.PriceSource = "none (no EC2NodeClass in the manifests)"
	}
	report.Zones = zones
	report.Ignored = append(report.Ignored, cluster.Ignored...)
	return report, nil
}

// defaultAndValidate applies Karpenter's defaults to every NodePool and
// EC2NodeClass and validates them, naming the manifest, object and field of
// each problem.
func defaultAndValidate(c *workload.Cluster) error {
	var errs []error
	prefix := func(kind, name string, err error) error {
		src := c.Sources[kind+"/"+name]
		lines := strings.Split(err.Error(), "\n")
		for i := range lines {
			lines[i] = src + ": " + lines[i]
		}
		return errors.New(strings.Join(lines, "\n"))
	}
	for i := range c.NodeClasses {
		nc := &c.NodeClasses[i]
		nc.SetDefaults()
		if err := nc.Validate(); err != nil {
			errs = append(errs, prefix(v1.KindEC2NodeClass, nc.Name, err))
		}
	}
	for i := range c.NodePools {
		np := &c.NodePools[i]
		np.SetDefaults()
		if err := np.Validate(); err != nil {
			errs = append(errs, prefix(v1.KindNodePool, np.Name, err))
		}
	}
	return errors.Join(errs...)
}

// zoneReport lists the zones offered for nc and where they came from.
func zoneReport(cfg planConfig, nc *v1.EC2NodeClass, types []*catalog.InstanceType) workload.ZoneReport {
	var zones []string
	for _, it := range types {
		for _, o := range it.Offerings {
			if !slices.Contains(zones, o.Zone) {
				zones = append(zones, o.Zone)
			}
		}
	}
	slices.Sort(zones)
	source := "the zone list of region " + cfg.Region + "; --zones overrides it"
	switch {
	case len(cfg.Zones) > 0:
		source = "--zones"
	case slices.ContainsFunc(nc.Status.Subnets, func(s v1.Subnet) bool { return s.Zone != "" }):
		source = "status.subnets of the EC2NodeClass"
	}
	return workload.ZoneReport{Source: source, Zones: zones}
}
