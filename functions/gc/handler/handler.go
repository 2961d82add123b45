// Package handler is the garbage-collection Lambda, invoked by EventBridge
// Scheduler every minute. It runs provisioning.Collector over the real
// adapters (karpenter-spec sections 5.1 and 5.4, 11.3 items 17-18):
// NodeClaims not launched within 5 minutes or not registered within 15 are
// deleted with their instance and Node; instances carrying the cluster's
// launch tags that no NodeClaim accounts for are terminated once older than
// 30 seconds; a registered NodeClaim whose instance is gone is deleted with
// its Node.
//
// Each run first adopts the NodeClaims Karpenter launched that the
// forwarder reported (provisioning.Adopter: records them in DynamoDB as
// nodewright's, changing nothing in the cluster or EC2) and records a
// Warning event for each one it refuses (its NodePool or EC2NodeClass
// missing, no registered Node or instance; not when Karpenter still runs,
// which the forwarder reports itself on every NodePool), so that the same
// run's collection counts them as NodeClaims. Garbage collection never
// terminates an instance without nodewright's ownership mark.
//
// Each run then retries post-registration tagging (provisioning.Tagger:
// the instances of registered NodeClaims not yet recorded as tagged) and
// deletes the cluster's launch templates unused for
// provisioning.LaunchTemplateUnusedTTL or whose EC2NodeClass is gone
// (provisioning.TemplateCollector; karpenter-spec section 4 step 6, 5.4).
//
// Each run first refreshes the region's live EC2 data (instance types,
// per-zone offerings, on-demand and Spot prices) in DynamoDB when a part is
// missing or catalog.RefreshInterval (12 h, Karpenter's timers) old
// (provisioning.EC2DataRefresher over shared/aws/ec2data); the other
// Lambdas only read it. A failed refresh is logged and does not fail the
// run: readers keep the previous copy or fall back to the embedded tables,
// and the next minute retries.
//
// Every step is idempotent and a run decides from fresh reads, so an
// overlapping or retried run is harmless. A run that fails part-way
// reports a workflow error (the scheduler may retry; the next minute runs
// regardless).
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/internal/adapters"
	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/ec2data"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/iamprofile"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/workflow"
)

// Config is the garbage-collection Lambda's configuration.
type Config struct {
	Cluster string
	Table   string
	// Region is the region whose live EC2 data the run refreshes
	// (AWS_REGION).
	Region string
	// IsolatedVPC skips the Pricing API (Karpenter's isolatedVPC): the
	// on-demand prices stay the embedded table's.
	IsolatedVPC bool
	// Endpoint and CAData (base64 PEM) reach the cluster's API server.
	Endpoint string
	CAData   string
	// NodeRoles are the node roles an EC2NodeClass's spec.role may name
	// (NODE_ROLE_ARNS, NODE_ROLE_PATH_PREFIX; launch.ParseNodeRoles).
	NodeRoles launch.NodeRoles
	LogLevel  slog.Level
}

// LoadConfig reads CLUSTER_NAME, TABLE_NAME, AWS_REGION, CLUSTER_ENDPOINT
// and CLUSTER_CA_DATA (required), ISOLATED_VPC (true or false, default
// false) and LOG_LEVEL.
func LoadConfig(getenv func(string) string) (Config, error) {
	e := lambdakit.NewEnv(getenv)
	c := Config{
		Cluster:     e.String("CLUSTER_NAME"),
		Table:       e.String("TABLE_NAME"),
		Region:      e.String("AWS_REGION"),
		IsolatedVPC: e.Bool("ISOLATED_VPC", false),
		Endpoint:    e.String("CLUSTER_ENDPOINT"),
		CAData:      e.String("CLUSTER_CA_DATA"),
		LogLevel:    e.Level("LOG_LEVEL"),
	}
	roles, err := launch.ParseNodeRoles(getenv("NODE_ROLE_ARNS"), getenv("NODE_ROLE_PATH_PREFIX"))
	c.NodeRoles = roles
	return c, errors.Join(e.Err(), err)
}

// NodeAPI lists and deletes Nodes (*kube.Client; DeleteNode is idempotent).
type NodeAPI interface {
	ListNodes(ctx context.Context) ([]corev1.Node, error)
	DeleteNode(ctx context.Context, name string) error
}

var _ NodeAPI = (*kube.Client)(nil)

// EC2API is the EC2 client as garbage collection uses it (*ec2.Client).
type EC2API interface {
	fleet.EC2API
	fleet.TagAPI
	nodeclass.TemplateAPI
	ec2data.EC2API
}

// Clients are the API clients New wires the handler with.
type Clients struct {
	DynamoDB ddbstore.API
	EC2      EC2API
	Nodes    NodeAPI
	// Pricing is the Pricing API client for ec2data.PricingRegion
	// (*pricing.Client); nil with IsolatedVPC.
	Pricing ec2data.PricingAPI
	// Metrics receives the decision metrics as CloudWatch EMF lines (the
	// Lambda's stdout); nil stores them without logging them.
	Metrics io.Writer
	// IAM deletes the instance profiles nodewright made for deleted
	// EC2NodeClasses (*iam.Client); nil: none are collected.
	IAM iamprofile.API
}

// collector runs one garbage-collection pass (*provisioning.Collector).
type collector interface {
	CollectGarbage(ctx context.Context, now time.Time) ([]provisioning.CleanupResult, error)
}

// tagger retries post-registration tagging (*provisioning.Tagger).
type tagger interface {
	TagAll(ctx context.Context) ([]provisioning.TagResult, error)
}

// adopter adopts Karpenter's NodeClaims (*provisioning.Adopter).
type adopter interface {
	Adopt(ctx context.Context, now time.Time) (provisioning.AdoptionResult, error)
}

// eventRecorder records the Kubernetes Events the forwarder relays
// (*ddbstore.Store).
type eventRecorder interface {
	PutEvent(ctx context.Context, e ddbstore.Event, now time.Time, ttl time.Duration) error
}

// refresher refreshes the live EC2 data (*provisioning.EC2DataRefresher).
type refresher interface {
	Refresh(ctx context.Context, now time.Time) (provisioning.RefreshResult, error)
}

// profileCollector deletes the instance profiles of deleted classes
// (*provisioning.ProfileCollector).
type profileCollector interface {
	CollectInstanceProfiles(ctx context.Context, now time.Time) ([]provisioning.ProfileCleanupResult, error)
}

// InstanceProfile is one deleted instance profile of Output.
type InstanceProfile struct {
	launch.ProfileCleanup
	Error string `json:"error,omitempty"`
}

// templateCollector deletes unused launch templates
// (*provisioning.TemplateCollector).
type templateCollector interface {
	CollectLaunchTemplates(ctx context.Context, now time.Time) ([]provisioning.TemplateCleanupResult, error)
}

// Handler runs garbage collection. It holds no state between invocations.
type Handler struct {
	adopter   adopter
	events    eventRecorder
	collector collector
	tagger    tagger
	templates templateCollector
	profiles  profileCollector
	refresher refresher
	log       *slog.Logger
	now       func() time.Time
}

// New wires the handler the way the Lambda runs it: provisioning.Collector
// over the DynamoDB store, the cluster's tagged EC2 instances and the
// cluster's Nodes. now is the clock (time.Now in main).
func New(cfg Config, c Clients, log *slog.Logger, now func() time.Time) (*Handler, error) {
	store, err := ddbstore.New(c.DynamoDB, cfg.Table, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	// Every step of a run lists the NodeClaims (adoption, collection,
	// tagging, launch templates, instance profiles): through the cache a
	// step reads them again only after a NodeClaim write (an adoption or
	// a collection by an earlier step, or any other Lambda's), so a run
	// with nothing to do lists once, and a warm Lambda not even that.
	store = store.WithNodeClaimCache()
	claims := adapters.Claims{Store: store, Metrics: decisionmetrics.New(store, c.Metrics, log, cfg.Cluster, now)}
	instances := adapters.Instances{Fleet: fleet.New(c.EC2), Cluster: cfg.Cluster}
	col, err := provisioning.NewCollector(cfg.Cluster, claims, instances, c.Nodes)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	tg, err := provisioning.NewTagger(cfg.Cluster, claims, adapters.InstanceTags{Tagger: fleet.NewTagger(c.EC2)})
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	lts, err := provisioning.NewTemplateCollector(cfg.Cluster, adapters.LaunchTemplates{Templates: nodeclass.NewTemplates(c.EC2), Cluster: cfg.Cluster},
		adapters.Config{Store: store}, claims, instances)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	ad, err := provisioning.NewAdopter(cfg.Cluster, adapters.Adoption{Store: store, Now: now}, claims, adapters.Config{Store: store}, instances)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	h, err := NewWithCollector(col, log, now)
	if err != nil {
		return nil, err
	}
	h.tagger, h.templates = tg, lts
	if profiles := adapters.NewInstanceProfiles(c.IAM, cfg.Cluster, cfg.Region, cfg.NodeRoles); profiles != nil {
		if h.profiles, err = provisioning.NewProfileCollector(cfg.Cluster, cfg.Region, profiles, adapters.Config{Store: store}, claims); err != nil {
			return nil, fmt.Errorf("gc: %w", err)
		}
	}
	var pricingAPI ec2data.PricingAPI
	if !cfg.IsolatedVPC {
		pricingAPI = c.Pricing
	}
	provider, err := ec2data.New(c.EC2, pricingAPI, cfg.Region)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	ref, err := provisioning.NewEC2DataRefresher(adapters.EC2Data{Store: store, Region: cfg.Region}, provider, cfg.IsolatedVPC)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	return h.WithAdoption(ad, store).WithRefresher(ref), nil
}

// NewWithCollector returns a Handler over a collector, without tagging and
// launch-template collection (WithHousekeeping adds them).
func NewWithCollector(c collector, log *slog.Logger, now func() time.Time) (*Handler, error) {
	if c == nil || log == nil || now == nil {
		return nil, errors.New("gc: collector, log and now are required")
	}
	return &Handler{collector: c, log: log, now: now}, nil
}

// WithHousekeeping returns h also running t (tagging retry) and lt
// (launch-template collection) each pass; nil leaves one out.
func (h *Handler) WithHousekeeping(t tagger, lt templateCollector) *Handler {
	out := *h
	out.tagger, out.templates = t, lt
	return &out
}

// WithRefresher returns h also refreshing the live EC2 data with r first
// each pass.
func (h *Handler) WithRefresher(r refresher) *Handler {
	out := *h
	out.refresher = r
	return &out
}

// WithAdoption returns h also adopting with a before each collection and
// recording its refusals as events through ev.
func (h *Handler) WithAdoption(a adopter, ev eventRecorder) *Handler {
	out := *h
	out.adopter, out.events = a, ev
	return &out
}

// Output summarizes one run.
type Output struct {
	// Adoption is what adoption did before the collection.
	Adoption provisioning.AdoptionResult `json:"adoption,omitzero"`
	// Cleanups are the executed decisions, in the collector's order.
	Cleanups []Cleanup `json:"cleanups"`
	// Tagged are the NodeClaims whose instance tagging was retried.
	Tagged []Tagged `json:"tagged,omitempty"`
	// InstanceProfiles are the instance profiles deleted (or whose
	// deletion failed).
	InstanceProfiles []InstanceProfile `json:"instanceProfiles,omitempty"`
	// LaunchTemplates are the launch templates deleted (or whose deletion
	// failed).
	LaunchTemplates []LaunchTemplate `json:"launchTemplates,omitempty"`
	// EC2Data is what the live EC2 data refresh did (nil: not wired).
	EC2Data *EC2DataRefresh `json:"ec2Data,omitempty"`
}

// EC2DataRefresh is one refresh of the live EC2 data: the parts due, those
// stored, and the error of the rest.
type EC2DataRefresh struct {
	Due    []catalog.Part `json:"due,omitempty"`
	Stored []catalog.Part `json:"stored,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// Tagged is one tagging retry.
type Tagged struct {
	provisioning.TagResult
	Error string `json:"error,omitempty"`
}

// LaunchTemplate is one launch-template deletion.
type LaunchTemplate struct {
	provisioning.TemplateCleanup
	Error string `json:"error,omitempty"`
}

// Cleanup is one executed decision.
type Cleanup struct {
	provisioning.Cleanup
	Skipped bool   `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Handle runs one pass. The scheduler's input is ignored. It returns the
// executed cleanups and, when a list or a cleanup failed, a workflow error
// (see lambdakit.AsWorkflowError) with everything done so far in Output.
func (h *Handler) Handle(ctx context.Context, _ json.RawMessage) (Output, error) {
	out := Output{Cleanups: []Cleanup{}}
	var errs []error
	if h.refresher != nil {
		out.EC2Data = h.refresh(ctx)
	}
	if h.adopter != nil {
		out.Adoption, errs = h.adopt(ctx)
	}
	results, err := h.collector.CollectGarbage(ctx, h.now())
	for _, r := range results {
		c := Cleanup{Cleanup: r.Cleanup, Skipped: r.Skipped}
		level := slog.LevelInfo
		if r.Err != nil {
			c.Error = r.Err.Error()
			level = slog.LevelError
		}
		out.Cleanups = append(out.Cleanups, c)
		h.log.Log(ctx, level, "garbage collected", "reason", r.Reason, "nodeclaim", r.NodeClaim,
			"instance-id", r.InstanceID, "node", r.Node, "skipped", r.Skipped, "error", c.Error)
	}
	errs = append(errs, err)
	if h.tagger != nil {
		tagged, terr := h.tagger.TagAll(ctx)
		for _, r := range tagged {
			t := Tagged{TagResult: r}
			level := slog.LevelInfo
			if r.Err != nil {
				t.Error, level = r.Err.Error(), slog.LevelError
			}
			out.Tagged = append(out.Tagged, t)
			h.log.Log(ctx, level, "instance tagged", "nodeclaim", r.NodeClaim, "instance-id", r.InstanceID, "added", r.Added, "gone", r.Gone, "error", t.Error)
		}
		errs = append(errs, terr)
	}
	if h.templates != nil {
		deleted, lerr := h.templates.CollectLaunchTemplates(ctx, h.now())
		for _, r := range deleted {
			lt := LaunchTemplate{TemplateCleanup: r.TemplateCleanup}
			level := slog.LevelInfo
			if r.Err != nil {
				lt.Error, level = r.Err.Error(), slog.LevelError
			}
			out.LaunchTemplates = append(out.LaunchTemplates, lt)
			h.log.Log(ctx, level, "launch template deleted", "reason", r.Reason, "name", r.Name, "id", r.ID, "nodeclass", r.NodeClass, "error", lt.Error)
		}
		errs = append(errs, lerr)
	}
	if h.profiles != nil {
		deleted, perr := h.profiles.CollectInstanceProfiles(ctx, h.now())
		for _, r := range deleted {
			p := InstanceProfile{ProfileCleanup: r.ProfileCleanup}
			level := slog.LevelInfo
			if r.Err != nil {
				p.Error, level = r.Err.Error(), slog.LevelError
			}
			out.InstanceProfiles = append(out.InstanceProfiles, p)
			h.log.Log(ctx, level, "instance profile deleted", "reason", r.Reason, "name", r.Name, "roles", r.Roles, "error", p.Error)
		}
		errs = append(errs, perr)
	}
	if err := errors.Join(errs...); err != nil {
		return out, lambdakit.AsWorkflowError(fmt.Errorf("garbage collection incomplete: %w", err), lambdakit.Is(v1.ErrConflict, workflow.ErrConflict))
	}
	h.log.InfoContext(ctx, "garbage collection done", "cleanups", len(out.Cleanups), "tagged", len(out.Tagged), "launch-templates", len(out.LaunchTemplates))
	return out, nil
}

// refresh runs the live EC2 data refresh and logs it: the parts stored at
// info, a failure as a warning naming the parts left on their previous copy
// (or the embedded tables). A failure never fails the run.
func (h *Handler) refresh(ctx context.Context) *EC2DataRefresh {
	res, err := h.refresher.Refresh(ctx, h.now())
	out := &EC2DataRefresh{Due: res.Due, Stored: res.Stored}
	switch {
	case err != nil:
		out.Error = err.Error()
		h.log.WarnContext(ctx, "live EC2 data not refreshed; previous copy or embedded tables in use",
			"due", res.Due, "stored", res.Stored, "error", err)
	case len(res.Due) > 0:
		h.log.InfoContext(ctx, "live EC2 data refreshed", "stored", res.Stored)
	}
	return out
}

// adopt runs adoption and records an event for each refusal but
// AdoptionKarpenterActive (the forwarder reports that on every NodePool,
// and writes nothing on Karpenter's objects while its controller runs),
// carrying the condition Adopted False with the refusal's reason and
// message for the forwarder to set on the Karpenter NodeClaim.
// The event's ID is derived from the NodeClaim and the reason, so a refusal
// repeated every run is one record.
func (h *Handler) adopt(ctx context.Context) (provisioning.AdoptionResult, []error) {
	now := h.now()
	res, err := h.adopter.Adopt(ctx, now)
	errs := []error{err}
	if res.Skipped != "" {
		h.log.InfoContext(ctx, "adoption skipped", "reason", res.Skipped)
	}
	for _, name := range res.Adopted {
		h.log.InfoContext(ctx, "nodeclaim adopted", "nodeclaim", name, "from", provisioning.AdoptedFromKarpenter)
	}
	for _, r := range res.Refused {
		h.log.InfoContext(ctx, "nodeclaim not adopted", "nodeclaim", r.NodeClaim, "reason", r.Reason, "message", r.Message)
		if r.Reason == provisioning.AdoptionKarpenterActive || h.events == nil {
			continue
		}
		e := ddbstore.Event{
			ID: "adoption-" + r.NodeClaim + "-" + string(r.Reason), Time: now, Type: "Warning",
			Reason: string(r.Reason), Message: r.Message, NodeClaim: r.NodeClaim, Node: r.Node,
			Condition: &metav1.Condition{Type: v1.ConditionTypeAdopted, Status: metav1.ConditionFalse,
				Reason: string(r.Reason), Message: r.Message, LastTransitionTime: metav1.NewTime(now)},
		}
		if err := h.events.PutEvent(ctx, e, now, ddbstore.EventTTL); err != nil {
			errs = append(errs, fmt.Errorf("record adoption refusal of %s: %w", r.NodeClaim, err))
		}
	}
	return res, errs
}
