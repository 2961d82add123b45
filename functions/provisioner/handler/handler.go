// Package handler is the provisioner Lambda: the consumer of the
// provisioning SQS FIFO queue (event source mapping with a small batch size
// and ReportBatchItemFailures). Each message is one of the intake API's:
//
//   - PodBatch: provisioning.Provision with the real adapters (DynamoDB
//     store, EC2NodeClass resolution through EC2 and SSM, CreateFleet), which
//     stores the batch's PodBatchResult for the intake API's GET route;
//   - NodeRegistrations: for each Node, provisioning.Registrar against the
//     live Node read from the Kubernetes API, then the Node patch applied
//     through a conflict-retrying update, then provisioning.Tagger adds the
//     instance's post-registration tags (a tagging failure is logged and
//     left to the garbage-collection Lambda's retry, never failing the
//     registration).
//
// One solve at a time per cluster comes from the queue: every message of a
// cluster shares one message group, and SQS hands out a group's next
// message only once the previous one is deleted or its visibility timeout
// expired (shared/provisioning, "Single writer"). The queue's visibility
// timeout must therefore exceed this function's timeout (AWS advises six
// times); no DynamoDB lease is taken.
//
// The event source mapping should use a small batch size (1 to 10: a batch
// of 4,000 pods is one message and solves in well under a second, while a
// large SQS batch only delays the records after it), ReportBatchItemFailures,
// and a redrive policy to a dead-letter queue after a few receives (a batch
// that keeps failing blocks its cluster's group until it leaves the queue;
// garbage collection then removes its NodeClaims at their launch timeout,
// and the forwarder's next batch carries the pods again).
//
// Acknowledgement follows the effect (STYLE rule 9): a record is reported
// failed, and redelivered by SQS, when its effect is not complete —
// provisioning.ErrLaunchIncomplete, a store or API failure, a registration
// that could not be written. Since the queue is FIFO, the records after a
// failed one are reported failed too, unprocessed, so they are redelivered
// after it and in order. A message that can never succeed (a body that does
// not decode, an unknown kind, an expired claim check, another cluster's
// batch) is logged as poison, counted and acknowledged; a batch rejected as
// invalid gets a Failed PodBatchResult so the forwarder learns of it.
package handler

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/internal/adapters"
	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/iamprofile"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/aws/queue"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// Config is the provisioner Lambda's configuration.
type Config struct {
	// Cluster is the EKS cluster name.
	Cluster string
	// Table is the DynamoDB table (ddbstore).
	Table string
	// Region is the AWS region (Lambda's AWS_REGION): it prices and zones
	// the instance types.
	Region string
	// KubernetesVersion is the cluster's minor version ("1.33"), for AMI
	// aliases.
	KubernetesVersion string
	// Endpoint is the cluster's API server URL and CAData its CA bundle
	// (base64 PEM, as EKS's certificateAuthority.data): the Kubernetes
	// client and the nodes' user data use them.
	Endpoint string
	CAData   string
	// ServiceCIDR is the cluster's service CIDR (AL2023 user data needs
	// it) and DNS the kube-dns ClusterIP ("" lets the AMI decide).
	ServiceCIDR string
	DNS         string
	// LaunchParallelism bounds concurrent CreateFleet calls (16).
	LaunchParallelism int
	// IsolatedVPC is the deployment's isolatedVPC option (ISOLATED_VPC):
	// the EC2DataLive condition then reads embedded on-demand prices as
	// expected (provisioning.EC2DataCondition).
	IsolatedVPC bool
	// NodeRoles are the node roles an EC2NodeClass's spec.role may name
	// (NODE_ROLE_ARNS, NODE_ROLE_PATH_PREFIX; launch.ParseNodeRoles).
	NodeRoles launch.NodeRoles
	LogLevel  slog.Level
}

// LoadConfig reads the configuration: CLUSTER_NAME, TABLE_NAME,
// AWS_REGION, KUBERNETES_VERSION, CLUSTER_ENDPOINT and CLUSTER_CA_DATA
// (required); SERVICE_CIDR, CLUSTER_DNS, LAUNCH_PARALLELISM, ISOLATED_VPC
// (true or false, default false) and LOG_LEVEL. It reports every problem at once.
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
		LaunchParallelism: e.Int("LAUNCH_PARALLELISM", provisioning.DefaultLaunchParallelism, 1, 256),
		IsolatedVPC:       e.Bool("ISOLATED_VPC", false),
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

// EC2API is the EC2 client as the provisioner uses it (*ec2.Client).
type EC2API interface {
	fleet.EC2API
	fleet.TagAPI
	nodeclass.EC2API
	nodeclass.DryRunAPI
}

// Clients are the API clients New wires the handler with.
type Clients struct {
	DynamoDB ddbstore.API
	EC2      EC2API
	SSM      nodeclass.SSMAPI
	// Nodes reads and updates Nodes (*kube.Client).
	Nodes NodeAPI
	// Metrics receives the decision metrics as CloudWatch EMF lines (the
	// Lambda's stdout); nil stores them without logging them.
	Metrics io.Writer
	// IAM makes spec.role's instance profiles (*iam.Client); nil: none are
	// made and a class's profile is the one named like its role.
	IAM iamprofile.API
}

// New wires the handler from cfg and clients the way the Lambda runs it:
// the store, the node-class resolver, CreateFleet, and
// provisioning.Provisioner and Registrar over the adapters. now is the
// clock (time.Now in main).
func New(cfg Config, c Clients, log *slog.Logger, now func() time.Time) (*Handler, error) {
	store, err := ddbstore.New(c.DynamoDB, cfg.Table, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	resolver := nodeclass.New(c.EC2, c.SSM, now)
	rec := decisionmetrics.New(store, c.Metrics, log, cfg.Cluster, now)
	prov, err := adapters.NewProvisioner(store, resolver, fleet.New(c.EC2), adapters.ProvisionerConfig{
		KubernetesVersion: cfg.KubernetesVersion,
		Cluster:           nodeclass.Cluster{Name: cfg.Cluster, Endpoint: cfg.Endpoint, CABundle: cfg.CAData, ServiceCIDR: cfg.ServiceCIDR, DNS: cfg.DNS},
		Options: provisioning.ProvisionerOptions{
			Cluster: cfg.Cluster, Region: cfg.Region, SpotPriceRatio: provisioning.FallbackSpotPriceRatio, LaunchParallelism: cfg.LaunchParallelism, IsolatedVPC: cfg.IsolatedVPC,
		},
		OnResolved: RecordNodeClassStatus(store, log, now),
		Metrics:    rec, Controller: "provisioner",
		Profiles: adapters.NewInstanceProfiles(c.IAM, cfg.Cluster, cfg.Region, cfg.NodeRoles),
		// The provisioner holds the launch permissions: it checks them by
		// dry runs and stores the verdicts the decider reports.
		Auth: &provisioning.AuthChecker{
			DryRuns:  nodeclass.AuthDryRuns{API: c.EC2, Templates: resolver, Cluster: nodeclass.Cluster{Name: cfg.Cluster, Endpoint: cfg.Endpoint, CABundle: cfg.CAData, ServiceCIDR: cfg.ServiceCIDR, DNS: cfg.DNS}},
			Verdicts: adapters.AuthVerdicts{Store: store, Now: now},
		},
	}, now)
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	reg, err := provisioning.NewRegistrar(adapters.Claims{Store: store, Metrics: rec})
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	tagger, err := provisioning.NewTagger(cfg.Cluster, adapters.Claims{Store: store}, adapters.InstanceTags{Tagger: fleet.NewTagger(c.EC2)})
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	return NewWithDeps(Deps{
		Provisioner: prov, Registrar: reg, Tagger: tagger, Nodes: c.Nodes, Payloads: store,
		Results: adapters.Batches{Store: store, Now: now}, Events: store, Log: log, Now: now, Metrics: rec,
	})
}

// nodeClassStatusStore records resolved EC2NodeClass status
// (*ddbstore.Store).
type nodeClassStatusStore interface {
	PutNodeClassStatus(ctx context.Context, rec v1.NodeClassStatus) (bool, error)
}

// RecordNodeClassStatus returns the hook that stores each EC2NodeClass a
// provisioning round resolved, for GET v1.RouteNodeClasses and the status
// the forwarder writes on the class (as Karpenter's node-class controller
// keeps it: aws: pkg/controllers/nodeclass). The store writes only a
// changed resolution. Best effort: a failed write is logged and never
// fails the round.
func RecordNodeClassStatus(store nodeClassStatusStore, log *slog.Logger, now func() time.Time) func(context.Context, v1.EC2NodeClass) {
	return func(ctx context.Context, nc v1.EC2NodeClass) {
		rec := v1.NodeClassStatus{Name: nc.Name, Generation: nc.Generation, UID: nc.UID, ChangedAt: metav1.NewTime(now()), Status: nc.Status}
		if _, err := store.PutNodeClassStatus(ctx, rec); err != nil {
			log.WarnContext(ctx, "EC2NodeClass status not recorded", "nodeclass", nc.Name, "error", err)
		}
	}
}

// provisioner runs one provisioning round (*provisioning.Provisioner).
type provisioner interface {
	Provision(ctx context.Context, batch *v1.PodBatch, now time.Time) (provisioning.Result, error)
}

// registrar registers one Node (*provisioning.Registrar).
type registrar interface {
	Register(ctx context.Context, node *corev1.Node, now time.Time) (provisioning.Registration, error)
}

// tagger adds the post-registration instance tags (*provisioning.Tagger).
type tagger interface {
	Tag(ctx context.Context, claim v1.NodeClaim) (provisioning.TagResult, error)
}

// NodeAPI reads and updates Nodes (*kube.Client): GetNode returns an error
// matching kube.ErrNotFound for a missing Node; UpdateNode re-reads and
// re-applies mutate on conflicts.
type NodeAPI interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	UpdateNode(ctx context.Context, name string, mutate func(*corev1.Node) error) error
}

// payloads reads claim-checked message bodies (*ddbstore.Store).
type payloads interface {
	GetPayload(ctx context.Context, key string, now time.Time) ([]byte, error)
}

// results stores a batch's answer (adapters.Batches).
type results interface {
	PutBatchResult(ctx context.Context, r v1.PodBatchResult) error
}

var _ NodeAPI = (*kube.Client)(nil)

// Deps are the handler's collaborators. All are required but Tagger (nil:
// instances are not tagged at registration; garbage collection still tags
// them).
type Deps struct {
	Provisioner provisioner
	Registrar   registrar
	Tagger      tagger
	Nodes       NodeAPI
	Payloads    payloads
	Results     results
	// Events records the provisioning events (provisioning.Events) for the
	// forwarder to write as Kubernetes Events (*ddbstore.Store).
	Events EventRecorder
	Log    *slog.Logger
	Now    func() time.Time
	// Metrics records the round's decision metrics; nil records none.
	Metrics *decisionmetrics.Recorder
}

// EventRecorder records event records for the forwarder to write as
// Kubernetes Events (*ddbstore.Store).
type EventRecorder interface {
	PutEvent(ctx context.Context, e ddbstore.Event, now time.Time, ttl time.Duration) error
}

var _ EventRecorder = (*ddbstore.Store)(nil)

// Handler consumes the provisioning queue. It holds no state between
// invocations.
type Handler struct{ deps Deps }

// NewWithDeps returns a Handler over deps, or an error naming a missing
// one.
func NewWithDeps(deps Deps) (*Handler, error) {
	if deps.Provisioner == nil || deps.Registrar == nil || deps.Nodes == nil || deps.Payloads == nil ||
		deps.Results == nil || deps.Events == nil || deps.Log == nil || deps.Now == nil {
		return nil, errors.New("provisioner: every dependency is required")
	}
	return &Handler{deps: deps}, nil
}

// outcome is what became of one record.
type outcome int

const (
	done   outcome = iota // effect complete: acknowledge
	retry                 // effect incomplete: report failed, SQS redelivers
	poison                // can never succeed: log, count, acknowledge
)

// Handle processes the records in order and reports the ones to redeliver.
// It returns an error only for a malformed event; every record's own
// failure is in the response.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	var processed, poisoned int
	failed := false
	for _, rec := range ev.Records {
		if failed {
			// FIFO: a later message of the group must not overtake a
			// failed one.
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			continue
		}
		switch h.process(ctx, rec) {
		case done:
			processed++
		case poison:
			poisoned++
		case retry:
			failed = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	h.deps.Log.InfoContext(ctx, "records handled", "records", len(ev.Records), "processed", processed,
		"poison", poisoned, "redeliver", len(resp.BatchItemFailures))
	return resp, nil
}

func (h *Handler) process(ctx context.Context, rec events.SQSMessage) outcome {
	log := h.deps.Log.With("message-id", rec.MessageId, "receive-count", rec.Attributes["ApproximateReceiveCount"])
	attrs := map[string]string{}
	for k, v := range rec.MessageAttributes {
		if v.StringValue != nil {
			attrs[k] = *v.StringValue
		}
	}
	m, err := queue.Decode(rec.Body, attrs, rec.Attributes["MessageGroupId"], rec.Attributes["MessageDeduplicationId"])
	if err != nil {
		log.ErrorContext(ctx, "poison message acknowledged", "reason", err)
		return poison
	}
	if m.PayloadRef != "" {
		m.Body, err = h.deps.Payloads.GetPayload(ctx, m.PayloadRef, h.deps.Now())
		if errors.Is(err, ddbstore.ErrNotFound) {
			log.ErrorContext(ctx, "poison message acknowledged", "reason", err, "kind", m.Kind)
			return poison
		}
		if err != nil {
			log.ErrorContext(ctx, "read claim-checked payload", "error", err)
			return retry
		}
	}
	log = log.With("kind", m.Kind)
	switch m.Kind {
	case v1.KindPodBatch:
		return h.podBatch(ctx, log, m.Body)
	case v1.KindNodeRegistrations:
		return h.registrations(ctx, log, m.Body)
	}
	log.ErrorContext(ctx, "poison message acknowledged", "reason", "unknown kind")
	return poison
}

func (h *Handler) podBatch(ctx context.Context, log *slog.Logger, body []byte) outcome {
	b, _, err := v1.DecodePodBatch(body)
	if err != nil {
		log.ErrorContext(ctx, "poison message acknowledged", "reason", err)
		return poison
	}
	log = log.With("batch", b.ID, "pods", len(b.Pods))
	start := time.Now()
	round := h.deps.Now()
	res, err := h.deps.Provisioner.Provision(ctx, b, round)
	if err == nil && !res.Replayed && !res.Resumed {
		h.deps.Metrics.SchedulingRound(ctx, h.deps.Now().Sub(round))
		h.deps.Metrics.PendingPods(ctx, len(b.Pods), len(res.Batch.Unschedulable))
	}
	h.recordEvents(ctx, log, provisioning.Events(res, round), round)
	counts := map[launch.Status]int{}
	for _, l := range res.Launches {
		counts[l.Status]++
	}
	attrs := []any{"nodeclaims", len(res.Batch.NodeClaims), "nominated", len(res.Batch.Nominations),
		"unschedulable", len(res.Batch.Unschedulable), "launches", counts, "replayed", res.Replayed,
		"resumed", res.Resumed, "warnings", res.Warnings, "ec2Data", res.DataSource, "ms", time.Since(start).Milliseconds()}
	switch {
	case err == nil:
		log.InfoContext(ctx, "batch provisioned", attrs...)
		return done
	case errors.Is(err, provisioning.ErrInvalidInput):
		log.ErrorContext(ctx, "poison message acknowledged", append(attrs, "reason", err)...)
		failed := v1.PodBatchResult{
			TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatchResult},
			BatchID:  b.ID, State: v1.BatchFailed, Message: err.Error(),
		}
		if perr := h.deps.Results.PutBatchResult(ctx, failed); perr != nil {
			log.ErrorContext(ctx, "store failed batch result", "error", perr)
		}
		return poison
	case errors.Is(err, provisioning.ErrLaunchIncomplete):
		log.WarnContext(ctx, "batch incomplete; redelivering", append(attrs, "error", err)...)
		return retry
	}
	log.ErrorContext(ctx, "provision batch; redelivering", append(attrs, "error", err)...)
	return retry
}

// recordEvents writes a provisioning round's event records (also those of
// a round that failed part-way: a NodeClaim deleted for insufficient
// capacity stays deleted on redelivery). A failed write is logged and
// never fails the message: an Event is a report, not an effect.
func (h *Handler) recordEvents(ctx context.Context, log *slog.Logger, recs []v1.EventRecord, now time.Time) {
	for _, r := range recs {
		e := ddbstore.Event{
			ID: r.ID, Time: r.Time.Time, Type: r.Type, Reason: r.Reason, Message: r.Message,
			NodeClaim: r.NodeClaim, Node: r.Node, Pod: r.Pod, PodUID: string(r.PodUID), NodePool: r.NodePool,
		}
		if err := h.deps.Events.PutEvent(ctx, e, now, ddbstore.EventTTL); err != nil {
			log.WarnContext(ctx, "event not recorded", "reason", r.Reason, "nodeclaim", r.NodeClaim, "nodepool", r.NodePool, "error", err)
		}
	}
}

func (h *Handler) registrations(ctx context.Context, log *slog.Logger, body []byte) outcome {
	r, _, err := v1.DecodeNodeRegistrations(body)
	if err != nil {
		log.ErrorContext(ctx, "poison message acknowledged", "reason", err)
		return poison
	}
	log = log.With("registrations", r.ID)
	// Nodes register independently (each a read and a version-checked
	// write of its own NodeClaim, Node and instance), so up to
	// provisioning.DefaultLaunchParallelism at once: a message carries up
	// to MaxNodesPerMessage Nodes, and one after the other they took a
	// second each on the 1,000-node end-to-end run.
	var failed atomic.Bool
	var g errgroup.Group
	g.SetLimit(provisioning.DefaultLaunchParallelism)
	for _, n := range r.Nodes {
		g.Go(func() error {
			if err := h.register(ctx, log, n.Name); err != nil {
				log.ErrorContext(ctx, "register node; redelivering", "node", n.Name, "error", err)
				failed.Store(true)
			}
			return nil
		})
	}
	_ = g.Wait() // every Go returns nil; failures set failed
	result := done
	if failed.Load() {
		result = retry
	}
	if len(r.Removed) > 0 {
		// A removed Node needs nothing here: garbage collection deletes a
		// registered NodeClaim whose instance and Node are gone.
		log.InfoContext(ctx, "nodes removed", "count", len(r.Removed))
	}
	return result
}

// register runs registration for the live Node named name and applies its
// patch. A Node that is gone or has no NodeClaim is done.
func (h *Handler) register(ctx context.Context, log *slog.Logger, name string) error {
	node, err := h.deps.Nodes.GetNode(ctx, name)
	if errors.Is(err, kube.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node: %w", err)
	}
	reg, err := h.deps.Registrar.Register(ctx, node, h.deps.Now())
	switch {
	case errors.Is(err, provisioning.ErrNoNodeClaim), errors.Is(err, provisioning.ErrInvalidInput):
		log.DebugContext(ctx, "node not managed by nodewright", "node", name, "reason", err)
		return nil
	case err != nil:
		return err
	}
	for _, w := range reg.Warnings {
		log.WarnContext(ctx, "registration warning", "node", name, "nodeclaim", reg.NodeClaim.Name, "warning", w)
	}
	if !reg.Patch.IsEmpty() {
		err := h.deps.Nodes.UpdateNode(ctx, name, func(n *corev1.Node) error {
			reg.Patch.Apply(n)
			return nil
		})
		if errors.Is(err, kube.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("update node: %w", err)
		}
	}
	if reg.FirstRegistration {
		h.deps.Metrics.NodeRegistered(ctx, reg.NodeClaim)
	}
	// A registration message that changed neither the NodeClaim nor the
	// Node (the forwarder reports a Node again on every update of it) is
	// logged at debug: at info, one line per Node update added nothing an
	// operator reads.
	level := slog.LevelDebug
	if reg.Changed || !reg.Patch.IsEmpty() {
		level = slog.LevelInfo
	}
	log.Log(ctx, level, "node registered", "node", name, "nodeclaim", reg.NodeClaim.Name, "changed", reg.Changed, "patched", !reg.Patch.IsEmpty())
	h.tag(ctx, log, reg.NodeClaim)
	return nil
}

// tag adds the post-registration tags to the NodeClaim's instance
// (karpenter-spec section 1.5). A failure never fails the registration:
// it is logged, and the garbage-collection Lambda's sweep retries it.
func (h *Handler) tag(ctx context.Context, log *slog.Logger, claim v1.NodeClaim) {
	if h.deps.Tagger == nil || !provisioning.NeedsTagging(&claim) {
		return
	}
	r, err := h.deps.Tagger.Tag(ctx, claim)
	if err != nil {
		log.WarnContext(ctx, "tag instance after registration; garbage collection retries", "nodeclaim", claim.Name, "error", err)
		return
	}
	log.InfoContext(ctx, "instance tagged", "nodeclaim", claim.Name, "instance-id", r.InstanceID, "added", r.Added, "gone", r.Gone)
}
