package disruption

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// Input is a complete snapshot for one disruption evaluation. Evaluate reads
// nothing else: no clock, no network, no globals.
type Input struct {
	// Now is the instant of the evaluation: budget schedules, expiry,
	// consolidateAfter and do-not-disrupt durations are measured against it.
	Now time.Time
	// NodePools are the pools the NodeClaims belong to. Evaluate applies
	// Karpenter's CRD defaults to its own copies (SetDefaults).
	NodePools []v1.NodePool
	// NodeClasses are the EC2NodeClasses the pools and NodeClaims refer to,
	// with their resolved status (subnets, security groups, AMIs).
	NodeClasses []v1.EC2NodeClass
	// NodeClaims are every NodeClaim of the cluster, launched or not.
	NodeClaims []v1.NodeClaim
	// Nodes are every Node of the cluster; a Node belongs to the NodeClaim
	// whose status.nodeName or status.providerID names it. Nodes without a
	// NodeClaim are capacity the simulations may use, never candidates.
	Nodes []corev1.Node
	// Pods are bound pods (spec.nodeName), pods nominated to a node
	// (status.nominatedNodeName) and pending pods.
	Pods []corev1.Pod
	// PodDisruptionBudgets limit evictions; allowed disruptions are
	// computed from each PDB's spec and the readiness of the pods it
	// selects, not read from its status.
	PodDisruptionBudgets []policyv1.PodDisruptionBudget
	// DaemonSets add per-node overhead to replacement NodeClaims.
	DaemonSets []appsv1.DaemonSet
	// Volumes are the claims, PersistentVolumes and StorageClasses the
	// pods' volumes name: a pod that moves keeps its volumes, so the
	// simulations place it only in its bound volume's zone
	// (scheduling.Volumes, karpenter-spec section 3). A pod naming a claim
	// that is not here cannot be rescheduled, which blocks its node.
	Volumes scheduling.Volumes
	// VolumeLimits maps a Node's name to its CSINode's attach limits
	// (scheduling.ExistingNode.VolumeLimits): a pod is not moved to a node
	// whose limit its claims would pass. A node absent has no limit.
	VolumeLimits map[string]map[string]int
	// InstanceTypes maps an EC2NodeClass name to its resolved instance
	// types (catalog.Resolve), used for candidate prices, replacements and
	// instance-type drift.
	InstanceTypes map[string][]*catalog.InstanceType
	// Instances are EC2 facts per instance, for the drift checks a
	// NodeClaim cannot answer (subnet, security groups). Optional: a
	// NodeClaim without an entry is not checked for subnet or security
	// group drift, and its AMI is status.imageID.
	Instances []Instance
	// NominatedUntil maps a Node or NodeClaim name to the end of its
	// nomination window (the provisioner placed pending pods on it); such a
	// node is not a candidate until then. A pending pod whose
	// status.nominatedNodeName names a node nominates it too.
	NominatedUntil map[string]time.Time
	// InFlight are commands already being carried out: their candidates
	// count as disrupting against their pool's budgets and are not
	// candidates again.
	InFlight []Command
	// HeldReplacements maps the NodeClaim of a replacement launched by a
	// command still in flight to that command's ID: the replacement
	// belongs to its command until the command ends (its pods are still
	// moving there), so it is no candidate of any other command. Computed
	// by shared/termination.HeldReplacements.
	HeldReplacements map[string]string
	// FeatureGates are Karpenter's feature gates that change decisions.
	FeatureGates FeatureGates
	// Consolidated is the Result.Consolidated of an earlier evaluation,
	// nil when none is kept. When consolidation's inputs are unchanged
	// since it (same fingerprint) and it is younger than
	// ConsolidationRevalidate, multi- and single-node consolidation do not
	// simulate again: their outcome, no command and its reasons, stands.
	Consolidated *Consolidated
	// Options tune the evaluation; the zero value means Karpenter's
	// defaults.
	Options Options
}

// FeatureGates are the Karpenter feature gates Evaluate honours
// (karpenter-spec §10.3); each defaults to false.
type FeatureGates struct {
	// SpotToSpotConsolidation lets consolidation replace spot nodes with
	// cheaper spot nodes.
	SpotToSpotConsolidation bool
}

// Options tune an evaluation.
type Options struct {
	// ClusterCABundle is the cluster's CA bundle (Karpenter's
	// CLUSTER_CA_BUNDLE). Karpenter v1.12 and later hash it into the
	// EC2NodeClass static-drift hash; see EC2NodeClassHash for how it
	// selects the hash version compared. Empty: not hashed.
	ClusterCABundle string
	// Scheduling configures the solver used by the drift and consolidation
	// simulations. MaxInstanceTypes 0 means 600, the length Karpenter gives
	// a NodeClaim's instance-type requirement.
	Scheduling scheduling.Options
	// MultiNodeCandidates caps the candidates multi-node consolidation
	// considers at once; 0 means Karpenter's 100.
	MultiNodeCandidates int
}

// Instance is what EC2 DescribeInstances reports about one instance.
type Instance struct {
	// ProviderID is "aws:///<zone>/<instance-id>", as on the NodeClaim.
	ProviderID string `json:"providerID"`
	// ImageID is the AMI the instance runs.
	ImageID string `json:"imageID,omitempty"`
	// SubnetID is the instance's subnet.
	SubnetID string `json:"subnetID,omitempty"`
	// SecurityGroupIDs are the security groups of its primary interface.
	SecurityGroupIDs []string `json:"securityGroupIDs,omitempty"`
	// CapacityReservationID is the capacity reservation EC2 says the
	// instance runs in (DescribeInstances CapacityReservationId); "" when
	// it runs in none. An instance whose reservation expired or was
	// cancelled keeps running without one.
	CapacityReservationID string `json:"capacityReservationID,omitempty"`
}

// Method names a disruption method; the values are Karpenter's disruption
// reasons (karpenter-spec §6.1), also used by budgets' reasons.
type Method string

// Disruption methods, in the order Evaluate tries the budgeted ones
// (Expired is forceful and outside that order).
const (
	MethodEmpty         Method = "Empty"
	MethodDrifted       Method = "Drifted"
	MethodUnderutilized Method = "Underutilized"
	MethodExpired       Method = "Expired"
	// MethodCapacityBlockExpiring disrupts the NodeClaims of a capacity
	// block once it is expiring (v1.CapacityReservation.StateAt). Karpenter
	// deletes them from its capacityreservation.expiration controller, with
	// no disruption reason of its own (aws:
	// pkg/controllers/capacityreservation/expiration); nodewright runs that
	// deletion as a forceful command, like Expired.
	MethodCapacityBlockExpiring Method = "CapacityBlockExpiring"
)

// Forceful reports whether m is forceful (Expired, CapacityBlockExpiring):
// no budget, no replacement launched first, do-not-disrupt and
// PodDisruptionBudgets only honoured by the drain until the
// terminationGracePeriod, and no re-validation (karpenter-spec §5.3).
func (m Method) Forceful() bool {
	return m == MethodExpired || m == MethodCapacityBlockExpiring
}

// Decision says what a command does with its candidates.
type Decision string

// Decisions.
const (
	// DecisionDelete removes the candidates without replacement.
	DecisionDelete Decision = "delete"
	// DecisionReplace launches the replacements first, then removes the
	// candidates once every replacement is initialized.
	DecisionReplace Decision = "replace"
)

// Result is what an evaluation at Input.Now would start. It is safe to
// marshal to JSON; every reference is a name, never a pointer.
//
// Commands hold at most one budgeted method's commands (Karpenter acts
// with one method per loop, karpenter-spec §6.1): the Empty commands (one
// per NodePool), or one Drifted command, or one Underutilized command
// (multi-node, else single-node). Expired commands (one per expired
// NodeClaim) follow them in every evaluation whatever else acts: expiration
// is forceful, ignores budgets and do-not-disrupt, and Karpenter carries it
// out outside the disruption loop (karpenter-spec §5.3).
type Result struct {
	Commands []Command `json:"commands"`
	// Blocked lists every NodeClaim no command includes, by name, with the
	// first rule that kept it out (not initialized, do-not-disrupt, a
	// PodDisruptionBudget, nominated, budgets, consolidateAfter, no cheaper
	// replacement, another method acting, ...) and the Kubernetes event
	// Karpenter records for it (Blocked.Event).
	Blocked []Blocked `json:"blocked"`
	// Budgets are the disruptions each NodePool allows per reason at Now,
	// before this evaluation's commands consume them.
	Budgets []BudgetStatus `json:"budgets"`
	// Drift is the drift verdict of every NodeClaim whose drift this
	// evaluation checked, sorted by NodeClaim: what Karpenter's NodeClaim
	// disruption controller records as the Drifted condition (True with
	// the reason when drifted, removed when not; karpenter-spec §7,
	// karpenter: pkg/controllers/nodeclaim/disruption/drift.go). A
	// NodeClaim whose drift was not checked (being deleted, not
	// initialized, do-not-disrupt, unknown or static NodePool, nominated)
	// is absent: its recorded condition should be left as it is.
	Drift []DriftStatus `json:"drift,omitempty"`
	// Inconsistencies are the findings of Karpenter's NodeClaim
	// consistency checks at Now (node shape, termination), sorted by
	// NodeClaim: each is a FailedConsistencyCheck event on its NodeClaim.
	Inconsistencies []Inconsistency `json:"inconsistencies,omitempty"`
	// Consolidated is set when multi- and single-node consolidation found
	// no command (they simulated, or Input.Consolidated still stood):
	// keep it and pass it as the next evaluation's Input.Consolidated.
	// Nil when a method acted or consolidation was not reached; a kept one
	// should then be dropped. Not part of the Result's JSON (the CLI's
	// reports): the caller that keeps it encodes it on its own.
	Consolidated *Consolidated `json:"-"`
	// ConsolidationSkipped is true when Input.Consolidated stood, so
	// consolidation did not simulate; Consolidated is then that input.
	ConsolidationSkipped bool `json:"-"`
}

// DriftStatus is one NodeClaim's drift verdict.
type DriftStatus struct {
	NodeClaim string `json:"nodeClaim"`
	// Reason is the drift reason (DriftNodePool, DriftRequirements, ...),
	// "" when the NodeClaim is not drifted.
	Reason string `json:"reason,omitempty"`
	// Detail says in one sentence what changed ("" when not drifted); its
	// wording may change.
	Detail string `json:"detail,omitempty"`
}

// Command is one disruption to carry out, by names only: it is the payload
// the disruption state machine executes.
type Command struct {
	// ID is deterministic for the same decision ("consolidate-<nodeclaim>-
	// <8 hex>", "empty-…", "drift-…", "expire-…", at most 80 characters),
	// usable as a Step Functions execution name.
	ID       string   `json:"id"`
	Method   Method   `json:"method"`
	Decision Decision `json:"decision"`
	// NodePool is the pool of every candidate; "" when a multi-node
	// command spans pools (each Candidate names its own).
	NodePool   string      `json:"nodePool"`
	Candidates []Candidate `json:"candidates"`
	// Replacements are launched before the candidates are drained: none
	// for a delete, exactly one for consolidation, any number for drift.
	Replacements []Replacement `json:"replacements"`
	// SavingsPerHour is the candidates' price minus the replacements'
	// expected price, in the price table's currency per hour (negative
	// when a drift replacement costs more).
	SavingsPerHour float64 `json:"savingsPerHour"`
	// Budgeted is false for Expired commands, which no budget limits.
	Budgeted bool `json:"budgeted"`
	// Reason says in one sentence why the candidates were chosen.
	Reason string `json:"reason"`
}

// Candidate is a node a command disrupts.
type Candidate struct {
	NodeClaim string `json:"nodeClaim"`
	// Node is "" for a NodeClaim that has no Node (only an expired one can
	// be a candidate without a Node).
	Node       string `json:"node,omitempty"`
	NodePool   string `json:"nodePool"`
	ProviderID string `json:"providerID,omitempty"`
	// InstanceType, Zone and CapacityType are the node's labels.
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	// PricePerHour is the cheapest offering of its instance type matching
	// its zone and capacity type (0 when unknown).
	PricePerHour float64 `json:"pricePerHour"`
	// ReschedulablePods counts the pods the drain will evict and that need
	// a new home (not DaemonSet, mirror or terminal pods).
	ReschedulablePods int `json:"reschedulablePods"`
	// DriftReason is Karpenter's drift reason (NodePoolDrifted,
	// RequirementsDrifted, InstanceTypeNotFound, NodeClassDrift, AMIDrift,
	// SecurityGroupDrift, SubnetDrift, CapacityReservationDrift) for
	// Drifted commands.
	DriftReason string `json:"driftReason,omitempty"`
}

// Replacement is one NodeClaim to launch before the candidates go.
type Replacement struct {
	// InstanceTypes are the launch candidates, cheapest first.
	InstanceTypes []string `json:"instanceTypes"`
	// Expected is the offering the launch is expected to get.
	Expected scheduling.ExpectedOffering `json:"expected"`
	// NodeClaim is the NodeClaim to create: template labels, annotations
	// (with the NodePool and EC2NodeClass hash annotations), taints,
	// requirements narrowed to InstanceTypes and the allowed capacity
	// types, resource requests, nodeClassRef, expireAfter and
	// terminationGracePeriod. Its name is a suggestion; the executor may
	// rename it.
	NodeClaim v1.NodeClaim `json:"nodeClaim"`
}

// Blocked is a NodeClaim no command includes, and why.
type Blocked struct {
	NodeClaim string `json:"nodeClaim"`
	Node      string `json:"node,omitempty"`
	NodePool  string `json:"nodePool,omitempty"`
	// Reason is the first rule that kept the NodeClaim out, as a sentence
	// for people; its wording may change, so decide nothing on it.
	Reason string `json:"reason"`
	// Event is the Kubernetes event reason Karpenter's disruption
	// controller emits for Reason on the Node and NodeClaim:
	// EventDisruptionBlocked, EventUnconsolidatable, or "" when it emits
	// none (nothing to gain, another method acting, already disrupting,
	// consolidateAfter running, a budget spent, not registered).
	Event string `json:"event,omitempty"`
}

// Kubernetes event reasons of Blocked.Event (karpenter:
// pkg/controllers/disruption/events; karpenter-spec §6.2, §6.4).
const (
	// EventDisruptionBlocked is for a node no voluntary method may take
	// now: not initialized, do-not-disrupt on the Node, NodeClaim or an
	// active pod, a PodDisruptionBudget that allows no eviction, nominated,
	// an unknown or static NodePool (karpenter: NewCandidate), or a drift
	// whose pods cannot move (karpenter: Drift.ComputeCommands).
	EventDisruptionBlocked = "DisruptionBlocked"
	// EventUnconsolidatable is for a candidate consolidation cannot act
	// on: consolidation disabled, consolidationPolicy WhenEmpty with pods,
	// no price, no cheaper or valid replacement, spot-to-spot refused
	// (karpenter: consolidation.ShouldDisrupt, computeConsolidation).
	EventUnconsolidatable = "Unconsolidatable"
)

// noEvent is Blocked.Event for a reason Karpenter emits no event for.
const noEvent = ""

// BudgetStatus is one NodePool's disruption budget for one reason at Now
// (karpenter-spec §6.3).
type BudgetStatus struct {
	NodePool string `json:"nodePool"`
	Reason   Method `json:"reason"`
	// Nodes counts the pool's initialized nodes that are not terminating:
	// the base of percentage budgets.
	Nodes int `json:"nodes"`
	// Allowed is the minimum over the active budgets that apply to Reason
	// (-1 when none applies: unlimited).
	Allowed int `json:"allowed"`
	// Disrupting counts nodes already NotReady or being deleted (including
	// in-flight commands' candidates and NodeClaims expiring now).
	Disrupting int `json:"disrupting"`
	// Available is max(Allowed - Disrupting, 0) (-1: unlimited).
	Available int `json:"available"`
}
