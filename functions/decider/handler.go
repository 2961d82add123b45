// Package decider is the disruption Lambda's logic (functions/disruption
// wires it), invoked by EventBridge
// Scheduler every minute: Karpenter's disruption controller loop
// (karpenter-spec.md section 6.1) as a function. Each run reads the
// cluster's current snapshot (Nodes, pods, PodDisruptionBudgets,
// DaemonSets), its NodeClaims and its NodePools and EC2NodeClasses from
// DynamoDB, resolves the node classes (subnets, security groups, AMIs) and
// their instance types, runs shared/disruption.Evaluate, and starts one
// execution of statemachines/disruption.asl.json per command. It decides;
// it never drains.
//
// A Node a user deleted (kubectl delete node: deletionTimestamp set while
// the karpenter.sh/termination finalizer holds it) whose NodeClaim no live
// execution holds gets a termination execution of its own, "delete-
// <nodeclaim>-<hash>" with method Deleted (disruption.Deleted): Karpenter's
// termination controller taints, drains and terminates such a Node
// (karpenter-spec.md section 5.2), with no budget and no replacement
// launched first. Evaluate already leaves a Node being deleted out of
// every method ("already being deleted").
//
// Commands whose candidates are held by live executions are not started
// again: the claims on the NodeClaims are passed to Evaluate as commands in
// flight (termination.InFlight), so their nodes count against the budgets
// and are not candidates. Executions are named by termination.Prepare
// (ExecutionName), so two runs that race over the same state start one
// execution: Step Functions refuses the second name
// (ExecutionAlreadyExists), which counts as success. Whatever races
// anyway, the budget leases and claims of the execution itself resolve.
//
// After each evaluation the Drifted condition of every NodeClaim whose
// drift was checked is brought to the verdict (recordDriftConditions):
// True with the drift reason, removed once no longer drifted, written only
// when it changes and best effort, so `kubectl get nodeclaims -o wide`
// shows DRIFTED while drifted nodes wait for their budget.
//
// A run without a current snapshot or configuration does nothing. A run
// that fails to start some executions reports a workflow error after
// trying all of them; the next minute's run decides afresh.
//
// An evaluation whose consolidation simulated and found nothing leaves its
// outcome (disruption.Result.Consolidated) in the payload
// ConsolidatedKey; the next runs pass it back as Input.Consolidated, so
// while nothing consolidation reads has changed (pods replaced by
// identical ones count as unchanged) consolidation does not simulate again
// for disruption.ConsolidationRevalidate, as Karpenter's consolidation
// skips while its cluster state is consolidated. Reading or writing it is
// best effort: without it, consolidation simulates as it would anyway.
package decider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/internal/adapters"
	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/iamprofile"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// CommandTTL is how long the replacements of a started command stay
// stored for the execution to read.
const CommandTTL = 24 * time.Hour

// ConsolidatedKey is the payload key of the last consolidation outcome
// that found nothing to do (JSON of a *disruption.Consolidated; "null"
// once a run dropped it), kept for ConsolidatedTTL: past
// disruption.ConsolidationRevalidate, after which it no longer stands.
const (
	ConsolidatedKey = "disruption-state/consolidated"
	ConsolidatedTTL = 2 * disruption.ConsolidationRevalidate
)

// Config is the disruption Lambda's configuration.
type Config struct {
	Cluster string
	Table   string
	// Region prices and zones the instance types.
	Region string
	// KubernetesVersion is the cluster's minor version, for AMI aliases.
	KubernetesVersion string
	// StateMachineARN is the disruption state machine.
	StateMachineARN string
	// InterruptionStateMachineARN is the interruption state machine
	// (optional): the stale-lease sweep asks Step Functions whether an
	// interruption execution still runs before handing its nodes back;
	// without it, an interruption's lapsed claims are kept.
	InterruptionStateMachineARN string
	// CAData is the cluster CA bundle (base64 PEM, optional): Karpenter
	// hashes it into the EC2NodeClass static-drift hash.
	CAData string
	// Endpoint is the cluster's API server (optional): with it, each run
	// first gives back the nodes of executions that stopped unfinished
	// (termination.Service.ReleaseStale).
	Endpoint string
	// BudgetLease is how long the budget lease and the claims of a started
	// execution last unrenewed (its Settings.LeaseSeconds, whole seconds),
	// and so how long after a lapse the stale-lease sweep looks at its
	// nodes; termination.LeaseDuration by default.
	BudgetLease time.Duration
	// FeatureGates are Karpenter's, from FEATURE_GATES
	// ("SpotToSpotConsolidation=true").
	FeatureGates disruption.FeatureGates
	// IsolatedVPC is the deployment's isolatedVPC option (ISOLATED_VPC),
	// for the EC2DataLive condition (provisioning.EC2DataCondition).
	IsolatedVPC bool
	// NodeRoles are the node roles an EC2NodeClass's spec.role may name
	// (NODE_ROLE_ARNS, NODE_ROLE_PATH_PREFIX; launch.ParseNodeRoles).
	NodeRoles launch.NodeRoles
	LogLevel  slog.Level
}

// LoadConfig reads CLUSTER_NAME, TABLE_NAME, AWS_REGION,
// KUBERNETES_VERSION and STATE_MACHINE_ARN (required),
// INTERRUPTION_STATE_MACHINE_ARN, CLUSTER_CA_DATA,
// CLUSTER_ENDPOINT, BUDGET_LEASE (a Go duration of at
// least a second), FEATURE_GATES, ISOLATED_VPC (true or false, default
// false) and LOG_LEVEL,
// reporting every problem at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	e := lambdakit.NewEnv(getenv)
	c := Config{
		Cluster:                     e.String("CLUSTER_NAME"),
		Table:                       e.String("TABLE_NAME"),
		Region:                      e.String("AWS_REGION"),
		KubernetesVersion:           e.String("KUBERNETES_VERSION"),
		StateMachineARN:             e.String("STATE_MACHINE_ARN"),
		InterruptionStateMachineARN: e.StringOr("INTERRUPTION_STATE_MACHINE_ARN", ""),
		CAData:                      e.StringOr("CLUSTER_CA_DATA", ""),
		Endpoint:                    e.StringOr("CLUSTER_ENDPOINT", ""),
		BudgetLease:                 e.Duration("BUDGET_LEASE", termination.LeaseDuration, time.Second),
		IsolatedVPC:                 e.Bool("ISOLATED_VPC", false),
		LogLevel:                    e.Level("LOG_LEVEL"),
	}
	err := e.Err()
	roles, rerr := launch.ParseNodeRoles(getenv("NODE_ROLE_ARNS"), getenv("NODE_ROLE_PATH_PREFIX"))
	c.NodeRoles, err = roles, errors.Join(err, rerr)
	gates, gerr := ParseFeatureGates(getenv("FEATURE_GATES"))
	if gerr != nil {
		err = errors.Join(err, fmt.Errorf("FEATURE_GATES: %w", gerr))
	}
	c.FeatureGates = gates
	return c, err
}

// knownFeatureGates are Karpenter's feature gates (karpenter-spec.md
// section 10.3); only SpotToSpotConsolidation changes disruption decisions.
var knownFeatureGates = []string{"NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation", "NodeOverlay", "StaticCapacity", "CapacityBuffer"}

// ParseFeatureGates reads "Name=true,Name=false" (Karpenter's
// --feature-gates format); an unknown name or a value other than a boolean
// is an error.
func ParseFeatureGates(s string) (disruption.FeatureGates, error) {
	var g disruption.FeatureGates
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		on, err := strconv.ParseBool(val)
		switch {
		case !ok || err != nil:
			return g, fmt.Errorf("%q: want Name=true or Name=false", kv)
		case !slices.Contains(knownFeatureGates, name):
			return g, fmt.Errorf("%q: unknown feature gate (known: %s)", kv, strings.Join(knownFeatureGates, ", "))
		case name == "SpotToSpotConsolidation":
			g.SpotToSpotConsolidation = on
		}
	}
	return g, nil
}

// Store is the DynamoDB store as the decider reads and writes it
// (*ddbstore.Store).
type Store interface {
	GetConfig(ctx context.Context) (ddbstore.ConfigSnapshot, error)
	ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error)
	CurrentSnapshot(ctx context.Context, now time.Time) (ddbstore.Snapshot, error)
	ListUnavailable(ctx context.Context, now time.Time) ([]ddbstore.UnavailableOffering, error)
	PutPayload(ctx context.Context, key string, data []byte, now time.Time, ttl time.Duration) error
	GetPayload(ctx context.Context, key string, now time.Time) ([]byte, error)
	PutEventOnce(ctx context.Context, e ddbstore.Event, now time.Time, ttl time.Duration) (bool, error)
	ListEvents(ctx context.Context, now time.Time) ([]ddbstore.Event, error)
}

var _ Store = (*ddbstore.Store)(nil)

// nodeClassStatusWriter records a resolved EC2NodeClass status for the
// forwarder (*ddbstore.Store); a Store without it records nothing.
type nodeClassStatusWriter interface {
	PutNodeClassStatus(ctx context.Context, rec v1.NodeClassStatus) (bool, error)
}

// recordNodeClassStatus stores what nc resolved to, for GET
// v1.RouteNodeClasses and the EC2NodeClass status the forwarder writes
// (Karpenter's node-class controller keeps it on the object: aws:
// pkg/controllers/nodeclass). Best effort: a failed write is logged and
// the evaluation goes on.
func (h *Handler) recordNodeClassStatus(ctx context.Context, nc v1.EC2NodeClass, now time.Time) {
	w, ok := h.d.Store.(nodeClassStatusWriter)
	if !ok {
		return
	}
	rec := v1.NodeClassStatus{Name: nc.Name, Generation: nc.Generation, UID: nc.UID, ChangedAt: metav1.NewTime(now), Status: nc.Status}
	if _, err := w.PutNodeClassStatus(ctx, rec); err != nil {
		h.d.Log.Warn("EC2NodeClass status not recorded", "nodeclass", nc.Name, "error", err)
	}
}

// nodeClassResolver resolves an EC2NodeClass's status (adapters.NodeClasses).
type nodeClassResolver interface {
	ResolveNodeClass(ctx context.Context, nc v1.EC2NodeClass) (provisioning.ResolvedNodeClass, error)
}

// instanceLister lists the cluster's instances (*fleet.Client).
type instanceLister interface {
	List(ctx context.Context, cluster string) ([]launch.Instance, error)
}

// starter starts disruption executions (*sfnstarter.Starter).
type starter interface {
	Start(ctx context.Context, name string, input any) (sfnstarter.Execution, error)
}

// staleReleaser gives back the nodes of executions that stopped
// unfinished (*termination.Service).
type staleReleaser interface {
	ReleaseStale(ctx context.Context, now time.Time) ([]termination.StaleRelease, error)
}

// Deps are the handler's collaborators; all but Stale are required.
type Deps struct {
	Store       Store
	NodeClasses nodeClassResolver
	Instances   instanceLister
	Starter     starter
	// Stale, when set, runs before each evaluation.
	Stale staleReleaser
	// Nodes, when set, relabels the Nodes of demoted NodeClaims (see
	// demote); nil demotes the NodeClaim records only.
	Nodes nodeUpdater
	Log   *slog.Logger
	Now   func() time.Time
	// Metrics records the decisions (disrupted NodeClaims, decisions,
	// eligible nodes); nil records none.
	Metrics *decisionmetrics.Recorder
	// EC2Data reads the region's live EC2 data; nil uses the embedded
	// tables only.
	EC2Data provisioning.EC2DataSource
}

// EC2API is the EC2 client as the decider uses it (*ec2.Client).
type EC2API interface {
	fleet.EC2API
	nodeclass.EC2API
}

// Clients are the API clients New wires the handler with.
type Clients struct {
	DynamoDB ddbstore.API
	EC2      EC2API
	SSM      nodeclass.SSMAPI
	// SFN starts executions and, for the stale-lease sweep, describes
	// them (*sfn.Client).
	SFN interface {
		sfnstarter.API
		sfnstarter.DescribeAPI
	}
	// Kube is the cluster's API (*kube.Client); nil when Endpoint is not
	// configured.
	Kube adapters.KubeAPI
	// Metrics receives the decision metrics as CloudWatch EMF lines (the
	// Lambda's stdout); nil stores them without logging them.
	Metrics io.Writer
	// IAM makes spec.role's instance profiles (*iam.Client); nil: none are
	// made and a class's profile is the one named like its role.
	IAM iamprofile.API
}

// New wires the handler the way the Lambda runs it.
func New(cfg Config, c Clients, log *slog.Logger, now func() time.Time) (*Handler, error) {
	store, err := ddbstore.New(c.DynamoDB, cfg.Table, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	// A warm evaluation re-reads the NodeClaims only after a write.
	store = store.WithNodeClaimCache()
	st, err := sfnstarter.New(c.SFN, cfg.StateMachineARN)
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	fl := fleet.New(c.EC2)
	d := Deps{
		Store: store,
		NodeClasses: adapters.NodeClasses{Resolver: nodeclass.New(c.EC2, c.SSM, now), KubernetesVersion: cfg.KubernetesVersion}.
			WithProfiles(adapters.NewInstanceProfiles(c.IAM, cfg.Cluster, cfg.Region, cfg.NodeRoles)),
		Instances: fl,
		Starter:   st,
		Log:       log,
		Now:       now,
		Metrics:   decisionmetrics.New(store, c.Metrics, log, cfg.Cluster, now),
		EC2Data:   adapters.EC2Data{Store: store, Region: cfg.Region},
	}
	if c.Kube != nil {
		k := adapters.Kube{Client: c.Kube}
		svc, err := termination.New(termination.Ports{Claims: adapters.TerminationClaims{Store: store}, Nodes: k, Pods: k, Rules: k, Instances: fl,
			Status: adapters.Executions{API: c.SFN, Disruption: cfg.StateMachineARN, Interruption: cfg.InterruptionStateMachineARN}})
		if err != nil {
			return nil, fmt.Errorf("disruption: %w", err)
		}
		d.Stale = svc
		d.Nodes = k
	}
	return NewWithDeps(cfg, d)
}

// Handler runs one evaluation per invocation and keeps nothing between
// invocations: what must happen once (an execution, an event record) is
// made once by Step Functions' execution names and DynamoDB's conditional
// writes.
type Handler struct {
	cfg Config
	d   Deps
}

// NewWithDeps returns a Handler over d.
func NewWithDeps(cfg Config, d Deps) (*Handler, error) {
	if d.Store == nil || d.NodeClasses == nil || d.Instances == nil || d.Starter == nil || d.Log == nil || d.Now == nil {
		return nil, errors.New("disruption: every dependency is required")
	}
	if cfg.Cluster == "" || cfg.Region == "" {
		return nil, errors.New("disruption: cluster and region are required")
	}
	return &Handler{cfg: cfg, d: d}, nil
}

// Output summarizes one run.
type Output struct {
	// Now is the evaluation's instant.
	Now time.Time `json:"now"`
	// Skipped says why nothing was evaluated, if so.
	Skipped string `json:"skipped,omitempty"`
	// Held are the commands not started because they touch an adopted
	// node while Karpenter's controller is active (disruption.HoldAdopted).
	Held []string `json:"held,omitempty"`
	// Snapshot is the cluster snapshot evaluated.
	Snapshot string `json:"snapshot,omitempty"`
	// Started lists the commands, in Evaluate's order.
	Started []Started `json:"started"`
	// Blocked counts the NodeClaims no command includes (Evaluate says
	// why, in the logs).
	Blocked int `json:"blocked"`
	// Released are the nodes of stopped executions given back first.
	Released []termination.StaleRelease `json:"released,omitempty"`
	// Warnings name what was left out of the evaluation.
	Warnings []string `json:"warnings,omitempty"`
	// Events counts the event records written (DisruptionBlocked,
	// Unconsolidatable, ConsolidationCandidate, FailedConsistencyCheck; see
	// decisionEvents).
	Events int `json:"events,omitempty"`
	// DriftConditions counts the NodeClaims whose Drifted condition this
	// run set or cleared (see recordDriftConditions).
	DriftConditions int `json:"driftConditions,omitempty"`
	// Demoted are the NodeClaims this run relabelled from reserved to
	// on-demand, their reservation gone (see demote).
	Demoted []string `json:"demoted,omitempty"`
	// ConsolidationSkipped is true when consolidation did not simulate:
	// the kept outcome (ConsolidatedKey) still stood.
	ConsolidationSkipped bool `json:"consolidationSkipped,omitempty"`
}

// readConsolidated returns the kept consolidation outcome, nil when there
// is none or it cannot be read (logged: consolidation then simulates).
func (h *Handler) readConsolidated(ctx context.Context, now time.Time) *disruption.Consolidated {
	data, err := h.d.Store.GetPayload(ctx, ConsolidatedKey, now)
	if errors.Is(err, ddbstore.ErrNotFound) {
		return nil
	}
	var kept *disruption.Consolidated
	if err == nil {
		err = json.Unmarshal(data, &kept)
	}
	if err != nil {
		h.d.Log.WarnContext(ctx, "kept consolidation outcome not read; consolidation simulates", "error", err)
		return nil
	}
	return kept
}

// keepConsolidated stores res's consolidation outcome for the next runs,
// or drops the one read (was) when consolidation acted or was not reached.
// Nothing is written while the kept one stands. Best effort: a failed
// write is logged, and costs the next run its skip.
func (h *Handler) keepConsolidated(ctx context.Context, was *disruption.Consolidated, res disruption.Result, now time.Time) {
	if res.ConsolidationSkipped || res.Consolidated == nil && was == nil {
		return
	}
	data, err := json.Marshal(res.Consolidated) // "null" drops it
	if err == nil {
		err = h.d.Store.PutPayload(ctx, ConsolidatedKey, data, now, ConsolidatedTTL)
	}
	if err != nil {
		h.d.Log.WarnContext(ctx, "consolidation outcome not kept", "error", err)
	}
}

// Started is one command's execution.
type Started struct {
	Execution  string   `json:"execution"`
	Method     string   `json:"method"`
	NodePool   string   `json:"nodePool"`
	Candidates []string `json:"candidates"`
	// AlreadyExisted is true when an execution of that name existed: an
	// earlier or concurrent run started it.
	AlreadyExisted bool   `json:"alreadyExisted,omitempty"`
	Error          string `json:"error,omitempty"`
}

// Handle runs one evaluation; the scheduler's input is ignored.
func (h *Handler) Handle(ctx context.Context, _ any) (Output, error) {
	now := h.d.Now()
	out := Output{Now: now.UTC(), Started: []Started{}}
	snap, err := h.d.Store.CurrentSnapshot(ctx, now)
	if errors.Is(err, ddbstore.ErrNotFound) {
		out.Skipped = "no current cluster snapshot (the forwarder has not posted one within the snapshot TTL)"
		h.d.Log.InfoContext(ctx, "disruption skipped", "why", out.Skipped)
		return out, nil
	}
	if err != nil {
		return out, lambdakit.AsWorkflowError(fmt.Errorf("read snapshot: %w", err))
	}
	out.Snapshot = snap.ID
	if h.d.Stale != nil {
		released, err := h.d.Stale.ReleaseStale(ctx, now)
		out.Released = released
		for _, r := range released {
			h.d.Log.InfoContext(ctx, "stale disruption released", "nodeclaim", r.NodeClaim, "execution", r.Holder, "outcome", r.Outcome, "error", r.Error)
		}
		if err != nil {
			out.Warnings = append(out.Warnings, "releasing stale claims: "+err.Error())
		}
	}
	cfg, err := h.d.Store.GetConfig(ctx)
	if errors.Is(err, ddbstore.ErrNotFound) {
		out.Skipped = "no NodePools or EC2NodeClasses synced yet"
		return out, nil
	}
	if err != nil {
		return out, lambdakit.AsWorkflowError(fmt.Errorf("read config: %w", err))
	}
	in, warnings, err := h.input(ctx, now, snap, cfg.Config)
	out.Warnings = append(out.Warnings, warnings...)
	if err != nil {
		return out, lambdakit.AsWorkflowError(err)
	}
	demoted, warnings := h.demote(ctx, &in, snap.KarpenterActive)
	out.Demoted = demoted
	out.Warnings = append(out.Warnings, warnings...)
	in.Consolidated = h.readConsolidated(ctx, now)
	res, err := disruption.Evaluate(ctx, in)
	if err != nil {
		return out, lambdakit.AsWorkflowError(fmt.Errorf("evaluate: %w", err))
	}
	out.ConsolidationSkipped = res.ConsolidationSkipped
	h.keepConsolidated(ctx, in.Consolidated, res, now)
	out.Blocked = len(res.Blocked)
	for _, b := range res.Blocked {
		h.d.Log.DebugContext(ctx, "not disrupted", "nodeclaim", b.NodeClaim, "node", b.Node, "nodepool", b.NodePool, "reason", b.Reason)
	}
	out.Events = h.recordDecisionEvents(ctx, decisionEvents(res, now), now)
	out.DriftConditions = h.recordDriftConditions(ctx, in.NodeClaims, res.Drift, now)
	h.recordEligible(ctx, res)
	h.recordBudgets(ctx, res)
	var errs []error
	cmds := append(res.Commands, disruption.Deleted(in, cfg.NodeClasses, res.Commands)...)
	start, held := disruption.HoldAdopted(cmds, in.NodeClaims, snap.KarpenterActive)
	for _, cmd := range held {
		out.Held = append(out.Held, cmd.ID)
		h.d.Log.InfoContext(ctx, "disruption held: Karpenter's controller is active", "command-id", cmd.ID, "reason", snap.KarpenterActive)
	}
	for _, cmd := range start {
		s, err := h.start(ctx, cmd, res.Budgets, now)
		out.Started = append(out.Started, s)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, lambdakit.AsWorkflowError(err)
	}
	return out, nil
}

// start stores a command's replacements and starts its execution.
func (h *Handler) start(ctx context.Context, cmd disruption.Command, budgets []disruption.BudgetStatus, now time.Time) (Started, error) {
	ex := termination.Prepare(cmd, budgets, now)
	if lease := int(h.cfg.BudgetLease / time.Second); lease > 0 {
		ex.Input.Settings.LeaseSeconds = lease
	}
	s := Started{Execution: ex.Name, Method: ex.Input.Method, NodePool: ex.Input.NodePool, Candidates: []string{}}
	for _, c := range ex.Input.Candidates {
		s.Candidates = append(s.Candidates, c.NodeClaim)
	}
	// Handled once: the run returns the joined errors of every start.
	fail := func(err error) (Started, error) {
		s.Error = err.Error()
		return s, fmt.Errorf("start %s: %w", ex.Name, err)
	}
	if len(ex.Replacements) > 0 {
		data, err := termination.EncodeReplacements(ex.Replacements)
		if err != nil {
			return fail(err)
		}
		if err := h.d.Store.PutPayload(ctx, ex.Input.CommandRef, data, now, CommandTTL); err != nil {
			return fail(err)
		}
	}
	exe, err := h.d.Starter.Start(ctx, ex.Name, ex.Input)
	if err != nil {
		return fail(err)
	}
	s.AlreadyExisted = exe.AlreadyExisted
	if !exe.AlreadyExisted {
		h.recordStarted(ctx, cmd, ex.Input.Candidates, len(ex.Replacements) > 0)
	}
	h.d.Log.InfoContext(ctx, "disruption started", "execution", ex.Name, "arn", exe.ARN, "already-existed", exe.AlreadyExisted,
		"method", ex.Input.Method, "nodepool", ex.Input.NodePool, "candidates", s.Candidates, "reason", ex.Input.Reason)
	return s, nil
}

// input builds Evaluate's input from the stores. Node classes that do not
// validate or resolve are left out with a warning (their NodeClaims are
// then reported blocked), as are the instance facts when EC2 cannot list
// them (subnet drift is then not checked).
func (h *Handler) input(ctx context.Context, now time.Time, snap ddbstore.Snapshot, cfg ddbstore.Config) (disruption.Input, []string, error) {
	claims, err := h.d.Store.ListNodeClaims(ctx)
	if err != nil {
		return disruption.Input{}, nil, fmt.Errorf("list nodeclaims: %w", err)
	}
	claims = withLastPodEvents(claims, snap.Nodes)
	unavailable, err := h.d.Store.ListUnavailable(ctx, now)
	if err != nil {
		return disruption.Input{}, nil, fmt.Errorf("list unavailable offerings: %w", err)
	}
	state := adapters.ClusterStateOf(snap)
	inFlight := termination.InFlight(claims, now)
	in := disruption.Input{
		Now: now, NodePools: cfg.NodePools, NodeClaims: claims, Nodes: state.Nodes, Pods: state.Pods, DaemonSets: state.DaemonSets,
		Volumes: state.Volumes, VolumeLimits: state.VolumeLimits,
		PodDisruptionBudgets: pdbs(snap.PodDisruptionBudgets), InstanceTypes: map[string][]*catalog.InstanceType{},
		InFlight: inFlight, HeldReplacements: termination.HeldReplacements(claims, inFlight), FeatureGates: h.cfg.FeatureGates,
		Options: disruption.Options{ClusterCABundle: h.cfg.CAData},
	}
	var warnings []string
	// The same loader as the provisioner's, so replacements are planned
	// over the instance types a launch would consider.
	live, liveWarning := provisioning.ReadLiveData(ctx, h.d.EC2Data, now)
	if liveWarning != "" {
		warnings = append(warnings, liveWarning)
	}
	opts := provisioning.LaunchOptions{Region: h.cfg.Region, SpotPriceRatio: provisioning.FallbackSpotPriceRatio,
		Unavailable: adapters.OfferingsOf(unavailable), Live: live, Now: now, LiveUnreadable: liveWarning, IsolatedVPC: h.cfg.IsolatedVPC}
	dataWarned := false
	for _, nc := range cfg.NodeClasses {
		lc, err := provisioning.ResolveLaunchClass(ctx, h.d.NodeClasses, nc, opts)
		if lc.NodeClass.Name != "" {
			h.recordNodeClassStatus(ctx, lc.NodeClass, now)
		}
		if err != nil {
			warnings = append(warnings, err.Error())
			continue
		}
		in.NodeClasses = append(in.NodeClasses, lc.NodeClass)
		in.InstanceTypes[nc.Name] = lc.InstanceTypes
		if w := provisioning.FallbackWarning(lc.PriceSource); w != "" && !dataWarned {
			warnings, dataWarned = append(warnings, w), true
		}
	}
	instances, err := h.d.Instances.List(ctx, h.cfg.Cluster)
	if err != nil {
		warnings = append(warnings, fmt.Sprintf("instances not listed, subnet drift not checked: %v", err))
	}
	for _, i := range instances {
		in.Instances = append(in.Instances, disruption.Instance{ProviderID: i.ProviderID(), ImageID: i.ImageID, SubnetID: i.SubnetID,
			CapacityReservationID: i.ReservationID})
	}
	for _, w := range warnings {
		h.d.Log.WarnContext(ctx, "left out of the evaluation", "warning", w)
	}
	return in, warnings, nil
}

// pdbs turns the snapshot's summaries into PodDisruptionBudgets.
func pdbs(in []v1.PDBSummary) []policyv1.PodDisruptionBudget {
	out := make([]policyv1.PodDisruptionBudget, 0, len(in))
	for _, p := range in {
		pdb := policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: p.Selector, MinAvailable: p.MinAvailable, MaxUnavailable: p.MaxUnavailable},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: p.DisruptionsAllowed, CurrentHealthy: p.CurrentHealthy,
				DesiredHealthy: p.DesiredHealthy, ExpectedPods: p.ExpectedPods},
		}
		if p.UnhealthyPodEvictionPolicy != "" {
			pol := policyv1.UnhealthyPodEvictionPolicyType(p.UnhealthyPodEvictionPolicy)
			pdb.Spec.UnhealthyPodEvictionPolicy = &pol
		}
		out = append(out, pdb)
	}
	return out
}

// voluntaryMethods are the methods karpenter_voluntary_disruption_eligible_nodes
// reports, each set on every evaluation (0 when none).
var voluntaryMethods = []disruption.Method{disruption.MethodDrifted, disruption.MethodEmpty, disruption.MethodExpired, disruption.MethodUnderutilized}

// recordEligible sets karpenter_voluntary_disruption_eligible_nodes{reason}:
// for drift, every NodeClaim this evaluation found drifted (eligible
// whether or not a budget lets it go now); for the other methods, the
// candidates of this evaluation's commands.
func (h *Handler) recordEligible(ctx context.Context, res disruption.Result) {
	if h.d.Metrics == nil {
		return
	}
	n := map[disruption.Method]int{}
	for _, d := range res.Drift {
		if d.Reason != "" {
			n[disruption.MethodDrifted]++
		}
	}
	for _, cmd := range res.Commands {
		if cmd.Method != disruption.MethodDrifted {
			n[cmd.Method] += len(cmd.Candidates)
		}
	}
	for _, m := range voluntaryMethods {
		h.d.Metrics.EligibleNodes(ctx, string(m), n[m])
	}
}

// blockedReasons are the reasons nodewright_disruption_blocked_nodes
// reports, each set on every evaluation (0 when none).
var blockedReasons = []string{ReasonDisruptionBlocked, ReasonUnconsolidatable, decisionmetrics.BlockedWaiting}

// recordBudgets sets, from one evaluation's budget report,
// karpenter_nodepools_allowed_disruptions{nodepool, reason} (stored: every
// NodePool, every budgeted reason, as Karpenter sets it for each NodePool
// and reason it evaluates) and, CloudWatch only,
// karpenter_nodepools_nodes_consuming_budgets per NodePool and reason with
// a budget (an unlimited one, Allowed -1, is left out) and
// nodewright_disruption_blocked_nodes by the event reason of each
// NodeClaim left out (decisionmetrics.BlockedWaiting when it has none).
func (h *Handler) recordBudgets(ctx context.Context, res disruption.Result) {
	if h.d.Metrics == nil {
		return
	}
	for _, st := range res.Budgets {
		h.d.Metrics.AllowedDisruptions(ctx, st.NodePool, string(st.Reason), st.Allowed)
		if st.Allowed >= 0 {
			h.d.Metrics.NodesConsumingBudgets(ctx, st.NodePool, string(st.Reason), st.Disrupting)
		}
	}
	n := map[string]int{}
	for _, b := range res.Blocked {
		reason := b.Event
		if reason == "" {
			reason = decisionmetrics.BlockedWaiting
		}
		n[reason]++
	}
	for _, r := range blockedReasons {
		h.d.Metrics.BlockedNodes(ctx, r, n[r])
	}
}

// recordStarted counts an execution Step Functions had not seen:
// for a voluntary method, karpenter_nodeclaims_disrupted_total per
// candidate and one karpenter_voluntary_disruption_decisions_total.
func (h *Handler) recordStarted(ctx context.Context, cmd disruption.Command, candidates []workflow.Candidate, replace bool) {
	if !slices.Contains(voluntaryMethods, cmd.Method) {
		return // a Node being deleted is the user's disruption, not counted (as Karpenter)
	}
	for _, c := range candidates {
		h.d.Metrics.NodeClaimDisrupted(ctx, string(cmd.Method), c.NodePool, c.CapacityType)
	}
	decision := "delete"
	if replace {
		decision = "replace"
	}
	consolidation := ""
	switch {
	case cmd.Method == disruption.MethodEmpty:
		consolidation = "empty"
	case cmd.Method == disruption.MethodUnderutilized && len(candidates) > 1:
		consolidation = "multi"
	case cmd.Method == disruption.MethodUnderutilized:
		consolidation = "single"
	}
	h.d.Metrics.DisruptionDecision(ctx, decision, string(cmd.Method), consolidation)
}
