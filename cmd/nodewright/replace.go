package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/intake"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// endpointEnv names the deployed API's base URL when --endpoint is not
// given (the stack's ApiEndpoint output).
const endpointEnv = "NODEWRIGHT_ENDPOINT"

const replaceUse = "replace NODE... [--dry-run] [--force-after DURATION] [--endpoint URL] [--region R] [-o table|json|yaml]"

const replaceLong = `Replaces nodes by hand, for the nodes automatic disruption must never touch (do-not-disrupt pods, no terminationGracePeriod): for each node, an audited Step Functions execution named manual-<nodeclaim>-<hash> launches the replacement first, waits until it is Ready, then cordons and drains the node through the Eviction API, do-not-disrupt pods included, honouring PodDisruptionBudgets; --force-after is the only way past them. The execution records the caller's IAM identity. Disruption budgets are reported, not consumed.
Nodes nodewright does not own are refused, all named at once, and nothing starts. Running the same command again starts nothing new: it finds the same executions.
The request is signed (SigV4) with the AWS SDK's default credentials; the caller needs execute-api:Invoke on POST /v1/replacements of the API (--endpoint, else $` + endpointEnv + `).`

// replaceConfig is the parsed command line of `nodewright replace`.
type replaceConfig struct {
	Nodes      []string
	DryRun     bool
	ForceAfter time.Duration
	Endpoint   string
	Region     string
	Output     string
}

// replaceFlags are the flag values before checking.
type replaceFlags struct {
	forceAfter string
	cfg        replaceConfig
}

func (r *replaceFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&r.cfg.DryRun, "dry-run", false, "print what would be done (pods moving, do-not-disrupt pods, blocking PodDisruptionBudgets, budgets) and start nothing")
	fs.StringVar(&r.forceAfter, "force-after", "", "delete the pods PodDisruptionBudgets still protect this `DURATION` after the drain begins, e.g. 30m (default: never)")
	fs.StringVar(&r.cfg.Endpoint, "endpoint", "", "the API's base `URL` with its stage (default: $"+endpointEnv+")")
	fs.StringVar(&r.cfg.Region, "region", "", "the API's AWS `region` (default: read from the endpoint's host, else the AWS SDK's)")
	addOutputFlag(cmd, &r.cfg.Output)
	_ = cmd.RegisterFlagCompletionFunc("region", completeRegions)
}

// config checks the flags and nodes; a problem is printed to stderr after
// "nodewright replace: " and returned as errUsage.
func (r *replaceFlags) config(nodes []string, stderr io.Writer, getenv func(string) string) (replaceConfig, error) {
	cfg := r.cfg
	fail := func(format string, args ...any) (replaceConfig, error) {
		fmt.Fprintf(stderr, "nodewright replace: "+format+"\n", args...)
		return cfg, errUsage
	}
	if len(nodes) == 0 {
		return fail("name at least one node")
	}
	cfg.Nodes = nodes
	if r.forceAfter != "" {
		d, err := time.ParseDuration(r.forceAfter)
		if err != nil || d <= 0 || d%time.Second != 0 {
			return fail("--force-after %q: want a positive whole number of seconds as a Go duration, e.g. 30m", r.forceAfter)
		}
		cfg.ForceAfter = d
	}
	if err := checkOutput(cfg.Output); err != nil {
		return fail("%v", err)
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = getenv(endpointEnv)
	}
	if cfg.Endpoint == "" {
		return fail("--endpoint: required (or set $%s to the stack's ApiEndpoint output)", endpointEnv)
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" {
		return fail("--endpoint %q: not a URL", cfg.Endpoint)
	}
	if cfg.Region == "" {
		cfg.Region = regionOfEndpoint(u.Hostname())
	}
	return cfg, nil
}

// regionOfEndpoint reads the region of an API Gateway host
// (<id>.execute-api.<region>.amazonaws.com); "" for any other host.
func regionOfEndpoint(host string) string {
	parts := strings.Split(host, ".")
	if len(parts) >= 5 && parts[1] == "execute-api" {
		return parts[2]
	}
	return ""
}

func newReplaceCommand(c cli) *cobra.Command {
	var r replaceFlags
	cmd := &cobra.Command{
		Use:                   replaceUse,
		Short:                 "replace nodes by hand: launch first, then drain honouring PodDisruptionBudgets, audited",
		Long:                  replaceLong,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := r.config(args, c.stderr, os.Getenv)
			*c.code = printReport("replace", cfg.Output, err,
				func() (v1.ReplacementResult, error) { return requestReplacement(cmd.Context(), cfg, loadCredentials) },
				writeReplacementTable, c.stdout, c.stderr)
			return nil
		},
	}
	r.register(cmd)
	return cmd
}

// loadCredentials returns the AWS SDK's default credentials, and its
// region when region is "".
func loadCredentials(ctx context.Context, region string) (aws.CredentialsProvider, string, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("aws config: %w", err)
	}
	return aws.NewCredentialsCache(awsCfg.Credentials), awsCfg.Region, nil
}

// requestReplacement posts the request with the intake client (SigV4,
// retries); a refusal or rejection is an error naming each node or field.
func requestReplacement(ctx context.Context, cfg replaceConfig,
	creds func(ctx context.Context, region string) (aws.CredentialsProvider, string, error)) (v1.ReplacementResult, error) {
	provider, region, err := creds(ctx, cfg.Region)
	if err != nil {
		return v1.ReplacementResult{}, err
	}
	if cfg.Region != "" {
		region = cfg.Region
	}
	if region == "" {
		return v1.ReplacementResult{}, errors.New("--region: required (the endpoint's host names none, and the AWS SDK has none configured)")
	}
	client, err := intake.New(intake.Options{Endpoint: cfg.Endpoint, Region: region, Credentials: provider, MaxAttempts: 3})
	if err != nil {
		return v1.ReplacementResult{}, err
	}
	res, err := client.PostReplacement(ctx, &v1.ReplacementRequest{APIVersion: v1.APIVersion, Kind: v1.KindReplacementRequest,
		Nodes: cfg.Nodes, ForceAfterSeconds: int(cfg.ForceAfter / time.Second), DryRun: cfg.DryRun})
	var se *intake.StatusError
	if errors.As(err, &se) {
		var b strings.Builder
		fmt.Fprintf(&b, "the API answered %d: %s", se.StatusCode, se.Response.Message)
		for _, f := range se.Response.Fields {
			fmt.Fprintf(&b, "\n  %s: %s", f.Path, f.Message)
		}
		return res, errors.New(b.String())
	}
	return res, err
}

// writeReplacementTable prints one line per node, then the budgets.
func writeReplacementTable(r v1.ReplacementResult, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNODECLAIM\tNODEPOOL\tEXECUTION\tSTATUS\tLAUNCH FIRST\tPODS MOVING\tDO-NOT-DISRUPT\tPDB-BLOCKED")
	for _, n := range r.Nodes {
		status := "started"
		switch {
		case r.DryRun:
			status = "dry run: not started"
		case n.AlreadyExisted:
			status = "already started"
		case !n.Started:
			status = "not started"
		}
		launch := strings.Join(n.Replacements, ",")
		if launch == "" {
			launch = "(none: the pods fit elsewhere)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", n.Node, n.NodeClaim, n.NodePool, n.Execution, status, launch,
			len(n.Moving), len(n.DoNotDisrupt), len(n.PDBBlocked))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Nodes {
		for _, s := range n.DoNotDisrupt {
			fmt.Fprintf(w, "%s: %s (evicted all the same)\n", n.Node, s)
		}
		for _, s := range n.PDBBlocked {
			fmt.Fprintf(w, "%s: %s (the drain waits for it)\n", n.Node, s)
		}
	}
	for _, b := range r.Budgets {
		allowed := fmt.Sprint(b.Allowed)
		if b.Allowed < 0 {
			allowed = "unlimited"
		}
		fmt.Fprintf(w, "budget %s/%s: %s allowed, %d available (not consumed by a manual replacement)\n", b.NodePool, b.Reason, allowed, b.Available)
	}
	fmt.Fprintf(w, "requested by %s, planned from snapshot %s\n", r.RequestedBy, r.Snapshot)
	return nil
}
