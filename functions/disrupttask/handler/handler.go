// Package handler is the disruption task Lambda: every task state of
// statemachines/disruption.asl.json and statemachines/interruption.asl.json
// invokes this one function with a workflow.TaskInput, and Handle runs the
// use case of shared/termination that its Step names. One function instead
// of one per step keeps a single cold-start asset and a single IAM role for
// what is one workflow; the step, its input and its output are all visible
// in the execution's history.
//
// Errors reach Step Functions as workflow error names (lambdakit): the
// termination outcomes (BudgetExhausted, NoLongerEligible,
// ReplacementFailed, InvalidInput, LaunchIncomplete) keep their name,
// version conflicts become Conflict, API throttling Throttled, timeouts
// Timeout, anything else Internal; the state machines retry or catch by
// those names. Every step is idempotent, so a redelivered invocation is
// harmless.
//
// A step that succeeds also records Karpenter's events about what it did
// (DisruptionTerminating on the candidates, Evicted on each evicted pod,
// and so on; see stepEvents) as event records the forwarder writes on the
// cluster's objects. Their IDs are derived from the execution, the step
// and the object, so a retried step records each once; a failed write is
// logged and never fails the step.
package handler

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nodewright/nodewright/functions/internal/adapters"
	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/iamprofile"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// Config is the disruption task Lambda's configuration.
type Config struct {
	Cluster string
	Table   string
	// Region is the AWS region (AWS_REGION): it prices and zones the
	// replacements' instance types.
	Region string
	// KubernetesVersion is the cluster's minor version, for AMI aliases.
	KubernetesVersion string
	// Endpoint and CAData (base64 PEM) reach the cluster's API server;
	// replacements' user data carries them too.
	Endpoint string
	CAData   string
	// ServiceCIDR and DNS go into the replacements' user data.
	ServiceCIDR string
	DNS         string
	// NodeRoles are the node roles an EC2NodeClass's spec.role may name
	// (NODE_ROLE_ARNS, NODE_ROLE_PATH_PREFIX; launch.ParseNodeRoles).
	NodeRoles launch.NodeRoles
	LogLevel  slog.Level
}

// LoadConfig reads CLUSTER_NAME, TABLE_NAME, AWS_REGION,
// KUBERNETES_VERSION, CLUSTER_ENDPOINT and CLUSTER_CA_DATA (required),
// SERVICE_CIDR, CLUSTER_DNS and LOG_LEVEL, reporting
// every problem at once.
func LoadConfig(getenv func(string) string) (Config, error) {
	e := lambdakit.NewEnv(getenv)
	c := Config{
		Cluster:           e.String("CLUSTER_NAME"),
		Table:             e.String("TABLE_NAME"),
		Region:            e.String("AWS_REGION"),
		KubernetesVersion: e.String("KUBERNETES_VERSION"),
		Endpoint:          e.String("CLUSTER_ENDPOINT"),
		CAData:            e.String("CLUSTER_CA_DATA"),
		ServiceCIDR:       e.StringOr("SERVICE_CIDR", ""),
		DNS:               e.StringOr("CLUSTER_DNS", ""),
		LogLevel:          e.Level("LOG_LEVEL"),
	}
	err := e.Err()
	roles, rerr := launch.ParseNodeRoles(getenv("NODE_ROLE_ARNS"), getenv("NODE_ROLE_PATH_PREFIX"))
	c.NodeRoles, err = roles, errors.Join(err, rerr)
	if c.CAData != "" {
		if _, derr := base64.StdEncoding.DecodeString(c.CAData); derr != nil {
			err = errors.Join(err, fmt.Errorf("CLUSTER_CA_DATA: not base64: %w", derr))
		}
	}
	return c, err
}

// EC2API is the EC2 client as the task uses it (*ec2.Client): launching
// replacements and terminating instances.
type EC2API interface {
	fleet.EC2API
	nodeclass.EC2API
}

// Clients are the API clients New wires the handler with.
type Clients struct {
	DynamoDB ddbstore.API
	EC2      EC2API
	SSM      nodeclass.SSMAPI
	SFN      sfnstarter.API
	// Kube is the cluster's API (*kube.Client).
	Kube adapters.KubeAPI
	// Metrics receives the decision metrics as CloudWatch EMF lines (the
	// Lambda's stdout); nil stores them without logging them.
	Metrics io.Writer
	// IAM makes spec.role's instance profiles (*iam.Client); nil: none are
	// made and a class's profile is the one named like its role.
	IAM iamprofile.API
}

// New wires the handler the way the Lambda runs it: termination.Service
// over the DynamoDB store (NodeClaims, budget leases, stored commands),
// the Kubernetes API, EC2 (TerminateInstances, and CreateFleet through the
// provisioning launch path for replacements) and Step Functions (for
// continuations). now is the clock (time.Now in main).
func New(cfg Config, c Clients, log *slog.Logger, now func() time.Time) (*Handler, error) {
	store, err := ddbstore.New(c.DynamoDB, cfg.Table, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("disrupttask: %w", err)
	}
	resolver := nodeclass.New(c.EC2, c.SSM, now)
	fl := fleet.New(c.EC2)
	rec := decisionmetrics.New(store, c.Metrics, log, cfg.Cluster, now)
	prov, err := adapters.NewProvisioner(store, resolver, fl, adapters.ProvisionerConfig{
		KubernetesVersion: cfg.KubernetesVersion,
		Cluster:           nodeclass.Cluster{Name: cfg.Cluster, Endpoint: cfg.Endpoint, CABundle: cfg.CAData, ServiceCIDR: cfg.ServiceCIDR, DNS: cfg.DNS},
		Options:           provisioning.ProvisionerOptions{Cluster: cfg.Cluster, Region: cfg.Region, SpotPriceRatio: provisioning.FallbackSpotPriceRatio},
		Metrics:           rec, Controller: "disruption",
		Profiles: adapters.NewInstanceProfiles(c.IAM, cfg.Cluster, cfg.Region, cfg.NodeRoles),
		// Replacements honour the provisioner's stored authorization
		// verdicts (read only: no dry runs here): a class whose
		// ValidationSucceeded is False is left out of the launch.
		Auth: &provisioning.AuthChecker{Verdicts: adapters.AuthVerdicts{Store: store, Now: now}},
	}, now)
	if err != nil {
		return nil, fmt.Errorf("disrupttask: %w", err)
	}
	svc, err := termination.New(termination.Ports{
		Claims: adapters.TerminationClaims{Store: store, Metrics: rec}, Budgets: adapters.Budgets{Store: store},
		Nodes: adapters.Kube{Client: c.Kube}, Pods: adapters.Kube{Client: c.Kube}, Rules: adapters.Kube{}, Volumes: adapters.Kube{Client: c.Kube},
		Launcher: adapters.ReplacementLauncher{Provisioner: prov}, Instances: fl,
		Commands: adapters.Commands{Store: store, Now: now}, Executions: adapters.Starter{API: c.SFN},
	})
	if err != nil {
		return nil, fmt.Errorf("disrupttask: %w", err)
	}
	h, err := NewWithService(svc, log, now)
	if err != nil {
		return nil, err
	}
	h.events = store
	h.metrics = rec
	return h, nil
}

// service is the termination use cases (*termination.Service).
type service interface {
	AcquireBudget(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.BudgetOutput, error)
	LaunchReplacements(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.LaunchOutput, error)
	CheckReplacements(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.ReadinessOutput, error)
	Taint(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error)
	Revalidate(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error)
	BeginTermination(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error)
	Drain(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.DrainOutput, error)
	Terminate(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error)
	Delete(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error)
	ReleaseBudget(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.ReleaseOutput, error)
	Rollback(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.RollbackOutput, error)
	ContinueAsNew(ctx context.Context, st workflow.DisruptionState, stateMachine string) (workflow.ContinueOutput, error)
}

var _ service = (*termination.Service)(nil)

// Handler runs one step per invocation. It holds no state between
// invocations.
type Handler struct {
	svc     service
	log     *slog.Logger
	now     func() time.Time
	events  EventRecorder
	metrics *decisionmetrics.Recorder
}

// NewWithService returns a Handler over svc that records no events (see
// WithEvents).
func NewWithService(svc service, log *slog.Logger, now func() time.Time) (*Handler, error) {
	if svc == nil || log == nil || now == nil {
		return nil, errors.New("disrupttask: service, log and now are required")
	}
	return &Handler{svc: svc, log: log, now: now}, nil
}

// WithEvents makes h record its steps' events through r and returns h.
func (h *Handler) WithEvents(r EventRecorder) *Handler {
	h.events = r
	return h
}

// WithMetrics makes h record its decision metrics through r and returns
// h.
func (h *Handler) WithMetrics(r *decisionmetrics.Recorder) *Handler {
	h.metrics = r
	return h
}

// recordFirstEviction observes
// nodewright_interruption_first_eviction_seconds for an interruption
// execution whose first drain round (out.Round 1 of the first
// continuation) evicted or deleted a pod: the time from the interruption
// event to now. A first round that moved no pod observes nothing.
func (h *Handler) recordFirstEviction(ctx context.Context, st workflow.DisruptionState, out workflow.DrainOutput, now time.Time) {
	in := st.Interruption
	if in == nil || in.EventTime.IsZero() || out.Round != 1 || st.Continuation != 0 {
		return
	}
	for _, n := range out.Nodes {
		if n.Counts[workflow.PodEvicted]+n.Counts[workflow.PodDeleted] > 0 {
			h.metrics.FirstEviction(ctx, in.Reason, now.Sub(in.EventTime))
			return
		}
	}
}

// errUnknownStep is returned for a Step the handler does not know.
var errUnknownStep = errors.New("unknown step")

// rules name the workflow errors of the failures the use cases pass
// through from the ports.
var rules = []lambdakit.Rule{
	lambdakit.Is(v1.ErrConflict, workflow.ErrConflict),
	func(err error) (string, bool) { return workflow.ErrThrottled, awserr.Classify(err) == awserr.Throttled },
}

// Handle runs in.Step on in.State and returns the step's output, which the
// state machine stores under the step's ResultPath. The error is a
// workflow error (see the package doc).
func (h *Handler) Handle(ctx context.Context, in workflow.TaskInput) (any, error) {
	now := h.now()
	st := in.State
	var (
		out any
		err error
	)
	switch in.Step {
	case workflow.StepAcquireBudget:
		out, err = h.svc.AcquireBudget(ctx, st, now)
	case workflow.StepLaunchReplacements:
		out, err = h.svc.LaunchReplacements(ctx, st, now)
	case workflow.StepCheckReplacements:
		out, err = h.svc.CheckReplacements(ctx, st, now)
	case workflow.StepTaint:
		out, err = h.svc.Taint(ctx, st, now)
	case workflow.StepRevalidate:
		out, err = h.svc.Revalidate(ctx, st, now)
	case workflow.StepBeginTermination:
		out, err = h.svc.BeginTermination(ctx, st, now)
	case workflow.StepDrain:
		var drain workflow.DrainOutput
		drain, err = h.svc.Drain(ctx, st, now)
		if err == nil {
			h.recordFirstEviction(ctx, st, drain, now)
		}
		out = drain
	case workflow.StepTerminate:
		out, err = h.svc.Terminate(ctx, st, now)
	case workflow.StepDelete:
		out, err = h.svc.Delete(ctx, st, now)
	case workflow.StepReleaseBudget:
		out, err = h.svc.ReleaseBudget(ctx, st, now)
	case workflow.StepRollback:
		out, err = h.svc.Rollback(ctx, st, now)
	case workflow.StepContinueAsNew:
		out, err = h.svc.ContinueAsNew(ctx, st, in.StateMachine)
	default:
		err = workflow.NewError(workflow.ErrInvalidInput, fmt.Errorf("step %q: %w", in.Step, errUnknownStep))
	}
	if err != nil {
		// Handled once: Step Functions records the error (its name and
		// message) in the execution's history, where Retry and Catch act.
		return nil, lambdakit.AsWorkflowError(fmt.Errorf("step %s of %s (%s): %w", in.Step, st.ID, st.Method, err), rules...)
	}
	h.log.InfoContext(ctx, "step done", "step", in.Step, "execution", st.ID, "method", st.Method, "output", out)
	h.recordEvents(ctx, in.Step, st, stepEvents(in.Step, st, out, now), now)
	return out, nil
}

// Kube is the termination ports over shared/kube the Lambda wires
// (adapters.Kube), named here for the end-to-end tests outside functions/.
type Kube = adapters.Kube
