package provisioning

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// claimStore is the NodeClaim store (DynamoDB in production). Every write
// is conditional: Create is create-only, Update and Delete check the
// claim's resourceVersion.
type claimStore interface {
	// ListNodeClaims returns every NodeClaim of the cluster, read with
	// strong consistency, each with its current ResourceVersion.
	ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error)
	// GetNodeClaim returns one NodeClaim, or an error matching v1.ErrNotFound.
	GetNodeClaim(ctx context.Context, name string) (v1.NodeClaim, error)
	// CreateNodeClaim stores a new NodeClaim (ResourceVersion empty) and
	// returns it with its ResourceVersion; an error matching
	// v1.ErrAlreadyExists if the name is taken.
	CreateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error)
	// UpdateNodeClaim replaces the NodeClaim if its stored ResourceVersion
	// is claim.ResourceVersion and returns it with the next one; errors
	// match v1.ErrConflict (changed since read) or v1.ErrNotFound (gone).
	UpdateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error)
	// DeleteNodeClaim deletes the NodeClaim if its ResourceVersion is still
	// resourceVersion; errors match v1.ErrNotFound or v1.ErrConflict.
	DeleteNodeClaim(ctx context.Context, name, resourceVersion string) error
}

// configSource reads the synced cluster configuration: every NodePool and
// EC2NodeClass as the user applied them (neither defaulted nor validated;
// Provision does both and leaves out what is invalid). No configuration
// yet is two empty lists, not an error.
type configSource interface {
	ClusterConfig(ctx context.Context) ([]v1.NodePool, []v1.EC2NodeClass, error)
}

// nodeClassResolver resolves an EC2NodeClass against AWS, as Karpenter's
// nodeclass controller does (karpenter-spec sections 4.1 and 9.1;
// shared/aws/nodeclass in production).
type nodeClassResolver interface {
	ResolveNodeClass(ctx context.Context, nc v1.EC2NodeClass) (ResolvedNodeClass, error)
}

// ResolvedNodeClass is an EC2NodeClass resolved for launching.
type ResolvedNodeClass struct {
	// NodeClass is the class with its status filled: subnets with zones,
	// security groups, AMIs with their requirements, instance profile and
	// conditions. A condition Ready=False marks a class that cannot launch.
	NodeClass v1.EC2NodeClass
	// Subnets are the class's subnets with their free addresses, for the
	// launcher's choice of one subnet per zone (karpenter-spec section 4
	// step 5).
	Subnets []launch.Subnet
	// ReservationCapacity maps each of status.capacityReservations' IDs to
	// its AvailableInstanceCount (catalog.Options.ReservationCapacity).
	ReservationCapacity map[string]int
}

// clusterSource reads what the cluster runs now: Nodes, the pods bound to
// them and the DaemonSets (from the forwarder's snapshot).
type clusterSource interface {
	ClusterState(ctx context.Context) (ClusterState, error)
}

// ClusterState is the part of the cluster the solver needs besides the
// pending pods (karpenter-spec sections 3.2 and 3.7).
type ClusterState struct {
	// Nodes are the cluster's Nodes.
	Nodes []corev1.Node
	// Pods are bound pods (spec.nodeName set) that still use their node.
	Pods []corev1.Pod
	// DaemonSets contribute per-node overhead.
	DaemonSets []appsv1.DaemonSet
	// Volumes are the claims, PersistentVolumes and StorageClasses the
	// bound pods' volumes name, which resolve their CSI drivers.
	Volumes scheduling.Volumes
	// VolumeLimits maps a Node's name to its CSINode's attach limits
	// (scheduling.ExistingNode.VolumeLimits); a node absent has none.
	VolumeLimits map[string]map[string]int
}

// offeringCache is the unavailable-offerings cache (DynamoDB with a TTL
// attribute in production).
type offeringCache interface {
	// UnavailableOfferings returns the offerings still unavailable at now.
	// Entries may leave fields empty (see Offering).
	UnavailableOfferings(ctx context.Context, now time.Time) ([]catalog.OfferingKey, error)
	// MarkUnavailable records that o cannot be launched until now+ttl,
	// replacing any earlier entry for it; code is the EC2 error code.
	MarkUnavailable(ctx context.Context, o catalog.OfferingKey, code string, now time.Time, ttl time.Duration) error
}

// batchStore keeps the answer to each pod batch: the plan, and then the
// outcome of its launches, as the forwarder reads it back.
type batchStore interface {
	// BatchResult returns the result stored for batchID and whether there
	// is one.
	BatchResult(ctx context.Context, batchID string) (v1.PodBatchResult, bool, error)
	// PutBatchResult stores r as the result of r.BatchID, replacing any.
	PutBatchResult(ctx context.Context, r v1.PodBatchResult) error
}

// launcher launches the instance of one NodeClaim (shared/aws/fleet with
// the node class's subnets and launch templates in production).
type launcher interface {
	// Launch starts one instance for req.NodeClaim. Calls for the same
	// NodeClaim UID are idempotent: a repeated call returns the instance of
	// the first (CreateFleet ClientToken). It returns an error that
	// matches *InsufficientCapacityError (errors.As) when EC2 has no
	// capacity for the claim now.
	Launch(ctx context.Context, req LaunchRequest) (LaunchResult, error)
}

// LaunchRequest is one NodeClaim to launch.
type LaunchRequest struct {
	// NodeClaim is the stored claim: its UID derives the ClientToken, its
	// requirements and requests select the offerings.
	NodeClaim v1.NodeClaim
	// NodeClass is the claim's EC2NodeClass, resolved (status filled).
	NodeClass v1.EC2NodeClass
	// Subnets are the node class's subnets with their free addresses.
	Subnets []launch.Subnet
	// InstanceTypes are the node class's instance types with their
	// offerings, unavailable offerings marked, as of the launch.
	InstanceTypes []*catalog.InstanceType
}

// LaunchResult is a successful launch.
type LaunchResult struct {
	// Instance is the launched instance; ID, InstanceType, Zone and
	// CapacityType are required, ImageID is expected.
	Instance launch.Instance
	// Unavailable lists offerings CreateFleet reported unfulfillable even
	// though an instance launched; Provision marks them unavailable.
	Unavailable []launch.UnavailableOffering
}

// ProvisionerPorts are the adapters a Provisioner works through. All are
// required but Subnets, EC2Data, ClassStatus and Auth.
type ProvisionerPorts struct {
	Claims    claimStore
	Config    configSource
	NodeClass nodeClassResolver
	Cluster   clusterSource
	Offerings offeringCache
	Batches   batchStore
	Launcher  launcher
	// Subnets is the unavailable-subnets cache; nil leaves subnets that
	// ran out of addresses unrecorded.
	Subnets subnetCache
	// EC2Data reads the region's live EC2 data the refresher stored; nil
	// uses the embedded tables only (as before the first refresh).
	EC2Data EC2DataSource
	// ClassStatus records each EC2NodeClass a round resolved, with its
	// EC2DataLive condition, for the status the forwarder writes; nil
	// records nothing.
	ClassStatus classStatusRecorder
	// Auth checks each class's launch permissions by dry runs
	// (LaunchOptions.Auth); nil makes no check.
	Auth *AuthChecker
}

// classStatusRecorder records a resolved EC2NodeClass (best effort: it
// reports its own failures).
type classStatusRecorder interface {
	RecordClassStatus(ctx context.Context, nc v1.EC2NodeClass)
}

// ProvisionerOptions configure a Provisioner.
type ProvisionerOptions struct {
	// Cluster is the EKS cluster name; Provision rejects other clusters'
	// batches. Required.
	Cluster string
	// Region prices and zones the instance types, e.g. "us-east-1".
	// Required.
	Region string
	// SpotPriceRatio, ReservedENIs and VMMemoryOverheadPercent are passed
	// to catalog.Resolve (see catalog.Options). The Lambdas set
	// SpotPriceRatio to FallbackSpotPriceRatio: it applies only until Spot
	// prices are loaded.
	SpotPriceRatio          float64
	ReservedENIs            int
	VMMemoryOverheadPercent *float64
	// Scheduling are the solver's policies (zero: Karpenter's defaults).
	Scheduling scheduling.Options
	// LaunchParallelism bounds concurrent launches; 0 means 16.
	LaunchParallelism int
	// IsolatedVPC is the deployment's isolatedVPC option (no Pricing API):
	// it decides the EC2DataLive condition's reason when on-demand prices
	// are embedded.
	IsolatedVPC bool
	// PersistReserve is kept back from the context deadline, when there is
	// one, to store the batch's outcome after the launches; 0 means 5 s.
	PersistReserve time.Duration
}

// Defaults of ProvisionerOptions.
const (
	DefaultLaunchParallelism = 16
	DefaultPersistReserve    = 5 * time.Second
)

// Provisioner runs provisioning rounds for one cluster. It holds no state
// between calls and is safe for concurrent use (but see the package doc on
// the single writer).
type Provisioner struct {
	ports ProvisionerPorts
	opts  ProvisionerOptions
}

// NewProvisioner returns a Provisioner, or an error naming a missing port or
// option.
func NewProvisioner(ports ProvisionerPorts, opts ProvisionerOptions) (*Provisioner, error) {
	switch {
	case ports.Claims == nil:
		return nil, fmt.Errorf("provisioner ports: Claims: %w", errMissing)
	case ports.Config == nil:
		return nil, fmt.Errorf("provisioner ports: Config: %w", errMissing)
	case ports.NodeClass == nil:
		return nil, fmt.Errorf("provisioner ports: NodeClass: %w", errMissing)
	case ports.Cluster == nil:
		return nil, fmt.Errorf("provisioner ports: Cluster: %w", errMissing)
	case ports.Offerings == nil:
		return nil, fmt.Errorf("provisioner ports: Offerings: %w", errMissing)
	case ports.Batches == nil:
		return nil, fmt.Errorf("provisioner ports: Batches: %w", errMissing)
	case ports.Launcher == nil:
		return nil, fmt.Errorf("provisioner ports: Launcher: %w", errMissing)
	case opts.Cluster == "":
		return nil, fmt.Errorf("provisioner options: Cluster: %w", errMissing)
	case opts.Region == "":
		return nil, fmt.Errorf("provisioner options: Region: %w", errMissing)
	case opts.LaunchParallelism < 0:
		return nil, fmt.Errorf("provisioner options: LaunchParallelism %d: must not be negative", opts.LaunchParallelism)
	case opts.PersistReserve < 0:
		return nil, fmt.Errorf("provisioner options: PersistReserve %v: must not be negative", opts.PersistReserve)
	}
	if opts.LaunchParallelism == 0 {
		opts.LaunchParallelism = DefaultLaunchParallelism
	}
	if opts.PersistReserve == 0 {
		opts.PersistReserve = DefaultPersistReserve
	}
	return &Provisioner{ports: ports, opts: opts}, nil
}

var errMissing = errors.New("required")

// Result is the outcome of one Provision call.
type Result struct {
	// Batch is the answer the forwarder turns into pod events and
	// NodeClaim mirrors, as stored through the batch store: nominations
	// (pod UID -> existing Node or NodeClaim), unschedulable reasons (the
	// solver's, plus the pods of NodeClaims that could not launch), and the
	// batch's NodeClaims that exist, with their current status.
	Batch v1.PodBatchResult
	// Launches lists, in plan order, what this call did with each
	// NodeClaim of the batch.
	Launches []Launch
	// Replayed is true when the batch had been handled completely before:
	// nothing was solved, written or launched.
	Replayed bool
	// Resumed is true when this call continued an earlier attempt's plan
	// instead of solving.
	Resumed bool
	// Warnings name the NodePools and EC2NodeClasses left out of this
	// round and why (invalid, not resolvable, not ready). Their pods are
	// reported unschedulable by the solver.
	Warnings []string
	// DataSource says where the round's instance types, offerings and
	// prices came from and how old the live data is
	// (catalog.PriceSource.Description); empty when no class resolved.
	DataSource string
	// NoCompatibleInstanceTypes names the NodePools whose requirements
	// filtered out every instance type with an available offering in this
	// call's solve (scheduling.Result.NoCompatibleInstanceTypes); empty
	// when the call resumed a stored plan instead of solving.
	NoCompatibleInstanceTypes []string
}

// Launch is what Provision did with one NodeClaim.
type Launch struct {
	NodeClaim string
	Status    launch.Status
	// ProviderID is set for Launched and AlreadyLaunched.
	ProviderID string
	// Reason explains every other status; for Launched it is empty unless
	// recording the offerings CreateFleet reported unfulfillable failed.
	Reason string
}

// done reports whether the status is final for the batch.
func done(s launch.Status) bool { return s != launch.LaunchFailed }

// Provision runs one provisioning round for batch at now (karpenter-spec
// sections 3.1-3.4 and 4):
//
//  1. If the batch store holds a plan for batch.ID, it resumes it (and
//     returns it unchanged, Replayed, when every NodeClaim of it has
//     launched). Otherwise it reads the configuration, resolves each
//     referenced EC2NodeClass and its instance types (catalog.Resolve over
//     the class's subnet zones, minus unavailable offerings and types no
//     resolved AMI can boot), reads the NodeClaims, Nodes, bound pods and
//     DaemonSets, runs scheduling.Solve, names the new NodeClaims with
//     ClaimName and stores the plan.
//  2. It creates each planned NodeClaim create-only (finalizer
//     karpenter.sh/termination, conditions Unknown) and launches it, at
//     most LaunchParallelism at a time; every goroutine ends before it
//     returns.
//  3. Launched: the NodeClaim gets its providerID, imageID, instance
//     labels, capacity and allocatable and Launched=True (a
//     version-checked write). Insufficient capacity: the offerings are
//     marked unavailable for UnavailableOfferingsTTL and the NodeClaim is
//     deleted; its pods become unschedulable with the reason, to be retried
//     next round (spec 11.3 item 13). Other errors: Launched=Unknown with
//     the reason.
//  4. It stores the outcome and returns it.
//
// Errors: ErrInvalidInput (nil batch, empty ID, another cluster, and every
// input the solver refuses: scheduling.ErrInvalidInput, say a stored
// snapshot node with negative allocatable) and port or
// solver failures before the plan is stored, with nothing launched; after
// it, an error wrapping ErrLaunchIncomplete together with a complete Result
// when a launch must be retried or the outcome could not be stored.
func (p *Provisioner) Provision(ctx context.Context, batch *v1.PodBatch, now time.Time) (Result, error) {
	if err := p.checkBatch(batch); err != nil {
		return Result{}, err
	}
	stored, found, err := p.ports.Batches.BatchResult(ctx, batch.ID)
	if err != nil {
		return Result{}, fmt.Errorf("provision batch %s: read stored result: %w", batch.ID, err)
	}
	var (
		res Result
		st  *launchState
	)
	if found && stored.State == v1.BatchSolved {
		res = Result{Batch: stored, Resumed: true}
		if planComplete(stored) {
			res.Replayed = true
			return res, nil
		}
		st, err = p.loadLaunchState(ctx, now)
		if err != nil {
			return Result{}, fmt.Errorf("provision batch %s: %w", batch.ID, err)
		}
		res.Warnings, res.DataSource = st.warnings, st.dataSource
	} else {
		st, err = p.loadLaunchState(ctx, now)
		if err != nil {
			return Result{}, fmt.Errorf("provision batch %s: %w", batch.ID, err)
		}
		plan, err := p.solve(ctx, batch, st, now)
		if err != nil {
			return Result{}, fmt.Errorf("provision batch %s: %w", batch.ID, err)
		}
		if err := p.ports.Batches.PutBatchResult(ctx, plan); err != nil {
			return Result{}, fmt.Errorf("provision batch %s: store plan: %w", batch.ID, err)
		}
		res = Result{Batch: plan, Warnings: st.warnings, NoCompatibleInstanceTypes: st.noCompatible, DataSource: st.dataSource}
	}

	launchCtx, cancel := p.launchContext(ctx)
	outcomes := p.launchAll(launchCtx, res.Batch.NodeClaims, st, now)
	cancel()
	applyLaunches(&res.Batch, outcomes)
	for _, o := range outcomes {
		res.Launches = append(res.Launches, o.Launch)
	}

	var incomplete []string
	for _, l := range res.Launches {
		if !done(l.Status) {
			incomplete = append(incomplete, l.NodeClaim+": "+l.Reason)
		}
	}
	if len(outcomes) > 0 {
		if err := p.ports.Batches.PutBatchResult(ctx, res.Batch); err != nil {
			return res, fmt.Errorf("provision batch %s: store outcome: %w: %w", batch.ID, ErrLaunchIncomplete, err)
		}
	}
	if len(incomplete) > 0 {
		return res, fmt.Errorf("provision batch %s: %w: %d of %d nodeclaims: %v", batch.ID, ErrLaunchIncomplete, len(incomplete), len(res.Launches), incomplete)
	}
	return res, nil
}

func (p *Provisioner) checkBatch(batch *v1.PodBatch) error {
	switch {
	case batch == nil:
		return fmt.Errorf("provision: batch: nil: %w", ErrInvalidInput)
	case batch.ID == "":
		return fmt.Errorf("provision: batch id: required: %w", ErrInvalidInput)
	case batch.Cluster != p.opts.Cluster:
		return fmt.Errorf("provision batch %s: cluster %q, this provisioner serves %q: %w", batch.ID, batch.Cluster, p.opts.Cluster, ErrInvalidInput)
	}
	return nil
}

// launchContext leaves PersistReserve of the caller's deadline for storing
// the outcome.
func (p *Provisioner) launchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-p.opts.PersistReserve))
	}
	return context.WithCancel(ctx)
}

// planComplete reports whether every NodeClaim of a stored plan has
// launched: such a batch is done.
func planComplete(r v1.PodBatchResult) bool {
	for i := range r.NodeClaims {
		if r.NodeClaims[i].Status.ProviderID == "" {
			return false
		}
	}
	return true
}

// solve builds the scheduling input and turns the solver's plan into the
// batch's answer, naming the new NodeClaims.
func (p *Provisioner) solve(ctx context.Context, batch *v1.PodBatch, st *launchState, now time.Time) (v1.PodBatchResult, error) {
	claims, err := p.ports.Claims.ListNodeClaims(ctx)
	if err != nil {
		return v1.PodBatchResult{}, fmt.Errorf("list nodeclaims: %w", err)
	}
	cluster, err := p.ports.Cluster.ClusterState(ctx)
	if err != nil {
		return v1.PodBatchResult{}, fmt.Errorf("read cluster state: %w", err)
	}
	pods := make([]*corev1.Pod, len(batch.Pods))
	inBatch := make(map[types.UID]bool, len(batch.Pods))
	for i := range batch.Pods {
		pod := batch.Pods[i].Pod()
		// A pod of a disrupted node is rescheduled as if pending
		// (karpenter-spec section 3.1); its node is marked for deletion.
		pod.Spec.NodeName = ""
		pods[i] = pod
		inBatch[pod.UID] = true
	}
	existing, isClaim := existingNodes(claims, cluster, inBatch)
	daemonSets := cluster.DaemonSets
	if batch.DaemonSets != nil {
		// The batch's DaemonSets are as fresh as its pods; the snapshot's
		// may be older (karpenter-spec section 3.2: read at solve time).
		daemonSets = make([]appsv1.DaemonSet, len(batch.DaemonSets))
		for i := range batch.DaemonSets {
			daemonSets[i] = batch.DaemonSets[i].DaemonSet()
		}
	}
	in := scheduling.Input{
		Now:           now,
		NodePools:     st.pools,
		NodeClasses:   st.classList(),
		InstanceTypes: st.types,
		Pods:          pods,
		Nodes:         existing,
		DaemonSets:    daemonSets,
		// The batch's storage objects are as fresh as its pods and win
		// over the snapshot's (the bound pods') of the same name.
		Volumes: cluster.Volumes.With(scheduling.Volumes{
			Claims: batch.Volumes.Claims, PersistentVolumes: batch.Volumes.PersistentVolumes, StorageClasses: batch.Volumes.StorageClasses,
		}),
		Options: p.opts.Scheduling,
	}
	plan, err := scheduling.Solve(ctx, in)
	if errors.Is(err, scheduling.ErrInvalidInput) {
		// Input that cannot be solved now cannot be solved on redelivery:
		// the caller treats the batch as poison rather than retrying it.
		return v1.PodBatchResult{}, fmt.Errorf("solve: %w: %w", ErrInvalidInput, err)
	}
	if err != nil {
		return v1.PodBatchResult{}, fmt.Errorf("solve: %w", err)
	}
	out := v1.PodBatchResult{
		TypeMeta:      metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatchResult},
		BatchID:       batch.ID,
		State:         v1.BatchSolved,
		Nominations:   map[types.UID]v1.Nomination{},
		Unschedulable: map[types.UID]string{},
	}
	for uid, name := range plan.Placements {
		if isClaim[name] {
			out.Nominations[types.UID(uid)] = v1.Nomination{NodeClaim: name}
		} else {
			out.Nominations[types.UID(uid)] = v1.Nomination{Node: name}
		}
	}
	for uid, reason := range plan.Unschedulable {
		out.Unschedulable[types.UID(uid)] = reason
	}
	st.noCompatible = plan.NoCompatibleInstanceTypes
	for i, nc := range plan.NewClaims {
		claim := nc.NodeClaim
		claim.Name = ClaimName(nc.NodePool, batch.ID, i)
		claim.Annotations = maps.Clone(claim.Annotations)
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[AnnotationBatchID] = batch.ID
		claim.Annotations[AnnotationBatchIndex] = strconv.Itoa(i)
		out.NodeClaims = append(out.NodeClaims, claim)
		for _, uid := range nc.Pods {
			out.Nominations[types.UID(uid)] = v1.Nomination{NodeClaim: claim.Name}
		}
	}
	return out, nil
}

// existingNodes pairs NodeClaims with their Nodes by providerID and attaches
// bound pods and each Node's CSI attach limits (karpenter-spec section 3.7). Pods of the batch are left off
// their old nodes: they are being placed again. isClaim reports the names
// that are in-flight NodeClaims (no Node yet).
func existingNodes(claims []v1.NodeClaim, cs ClusterState, inBatch map[types.UID]bool) ([]scheduling.ExistingNode, map[string]bool) {
	nodeByProvider := map[string]*corev1.Node{}
	for i := range cs.Nodes {
		if id := cs.Nodes[i].Spec.ProviderID; id != "" {
			nodeByProvider[id] = &cs.Nodes[i]
		}
	}
	paired := map[string]bool{}
	var out []scheduling.ExistingNode
	isClaim := map[string]bool{}
	for i := range claims {
		c := &claims[i]
		en := scheduling.ExistingNode{NodeClaim: c}
		if n := nodeByProvider[c.Status.ProviderID]; c.Status.ProviderID != "" && n != nil {
			en.Node = n
			paired[n.Name] = true
		} else {
			isClaim[c.Name] = true
		}
		out = append(out, en)
	}
	for i := range cs.Nodes {
		if !paired[cs.Nodes[i].Name] {
			out = append(out, scheduling.ExistingNode{Node: &cs.Nodes[i]})
		}
	}
	podsByNode := map[string][]*corev1.Pod{}
	for i := range cs.Pods {
		pod := &cs.Pods[i]
		if pod.Spec.NodeName == "" || inBatch[pod.UID] {
			continue
		}
		podsByNode[pod.Spec.NodeName] = append(podsByNode[pod.Spec.NodeName], pod)
	}
	for i := range out {
		en := &out[i]
		if en.Node != nil {
			en.Pods = podsByNode[en.Node.Name]
			en.VolumeLimits = cs.VolumeLimits[en.Node.Name]
		}
		en.MarkedForDeletion = markedForDeletion(en)
	}
	return out, isClaim
}

// markedForDeletion reports whether existing capacity is leaving: the Node
// or NodeClaim is being deleted, the instance is terminating, or the Node
// carries karpenter.sh/disrupted (karpenter-spec section 3.7).
func markedForDeletion(en *scheduling.ExistingNode) bool {
	if c := en.NodeClaim; c != nil && (c.DeletionTimestamp != nil || isTrue(c, v1.ConditionTypeInstanceTerminating)) {
		return true
	}
	if n := en.Node; n != nil {
		return n.DeletionTimestamp != nil || v1.HasDisruptedTaint(n)
	}
	return false
}

// applyLaunches folds launch outcomes into the batch's answer: NodeClaims
// that exist replace their planned form with the stored one, deleted ones
// leave the plan and their pods become unschedulable with the reason.
func applyLaunches(r *v1.PodBatchResult, outcomes []outcome) {
	byName := make(map[string]*outcome, len(outcomes))
	for i := range outcomes {
		byName[outcomes[i].NodeClaim] = &outcomes[i]
	}
	kept := make([]v1.NodeClaim, 0, len(r.NodeClaims))
	for _, c := range r.NodeClaims {
		o := byName[c.Name]
		switch {
		case o == nil:
			kept = append(kept, c)
		case o.Status == launch.InsufficientCapacity || o.Status == launch.NodeClassNotReady || o.Status == launch.Abandoned:
			for uid, nom := range r.Nominations {
				if nom.NodeClaim != c.Name {
					continue
				}
				delete(r.Nominations, uid)
				if r.Unschedulable == nil {
					r.Unschedulable = map[types.UID]string{}
				}
				r.Unschedulable[uid] = fmt.Sprintf("NodeClaim %s was not launched (%s: %s); the pod is retried in the next provisioning round", c.Name, o.Status, o.Reason)
			}
		case o.claim != nil:
			kept = append(kept, *o.claim)
		default:
			kept = append(kept, c)
		}
	}
	r.NodeClaims = kept
}
