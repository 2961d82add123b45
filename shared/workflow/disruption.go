package workflow

import "time"

// Error names of the disruption and interruption steps (see Names). Each
// ends an execution through its rollback, never through a retry.
const (
	// ErrBudgetExhausted: the NodePool's disruption budget has no room for
	// the command's candidates now (a conditional DynamoDB write refused
	// the lease), or a candidate is held by another live execution.
	ErrBudgetExhausted = "BudgetExhausted"
	// ErrNoLongerEligible: re-validation found a candidate that may no
	// longer be disrupted (it is gone, a pod arrived, a do-not-disrupt
	// annotation appeared); the command is abandoned.
	ErrNoLongerEligible = "NoLongerEligible"
	// ErrReplacementFailed: a replacement NodeClaim could not launch, was
	// deleted, or did not initialize before the command's deadline.
	ErrReplacementFailed = "ReplacementFailed"
)

// disruptionNames are the error names above; Names includes them.
var disruptionNames = []string{ErrBudgetExhausted, ErrNoLongerEligible, ErrReplacementFailed}

// Disruption methods: Karpenter's disruption reasons (karpenter-spec.md
// section 6.1), plus Interrupted for the interruption state machine and
// Manual for an operator's replacement by hand (nodewright replace).
const (
	MethodEmpty         = "Empty"
	MethodDrifted       = "Drifted"
	MethodExpired       = "Expired"
	MethodUnderutilized = "Underutilized"
	// MethodCapacityBlockExpiring deletes the NodeClaims of an expiring
	// capacity block (disruption.MethodCapacityBlockExpiring).
	MethodCapacityBlockExpiring = "CapacityBlockExpiring"
	MethodInterrupted           = "Interrupted"
	MethodManual                = "Manual"
)

// Steps of statemachines/disruption.asl.json and interruption.asl.json.
// Every task state invokes the same Lambda (functions/disrupttask) with a
// TaskInput whose Step is one of these; the Lambda runs that step's use
// case from shared/termination.
const (
	// StepAcquireBudget claims the candidates for the execution and leases
	// their number from the NodePool's disruption budget.
	StepAcquireBudget = "AcquireBudget"
	// StepLaunchReplacements creates and launches the replacement
	// NodeClaims.
	StepLaunchReplacements = "LaunchReplacements"
	// StepCheckReplacements reports whether every replacement is
	// initialized, and fails once the deadline has passed.
	StepCheckReplacements = "CheckReplacements"
	// StepTaint taints the candidates karpenter.sh/disrupted:NoSchedule.
	StepTaint = "TaintCandidates"
	// StepRevalidate checks that every candidate may still be disrupted.
	StepRevalidate = "Revalidate"
	// StepBeginTermination marks the candidate NodeClaims deleting, with
	// their termination deadline, and excludes the Nodes from load
	// balancers.
	StepBeginTermination = "BeginTermination"
	// StepDrain runs one drain round over every candidate node.
	StepDrain = "Drain"
	// StepTerminate terminates the candidates' instances.
	StepTerminate = "TerminateInstances"
	// StepDelete deletes the candidates' Nodes and NodeClaims.
	StepDelete = "DeleteNodes"
	// StepReleaseBudget ends the execution's budget lease and claims.
	StepReleaseBudget = "ReleaseBudget"
	// StepRollback undoes what a failed execution did.
	StepRollback = "Rollback"
	// StepContinueAsNew starts the execution's continuation, for drains
	// longer than one execution's history allows.
	StepContinueAsNew = "ContinueAsNew"
)

// Steps lists every step, in state machine order.
func Steps() []string {
	return []string{
		StepAcquireBudget, StepLaunchReplacements, StepCheckReplacements, StepTaint, StepRevalidate,
		StepBeginTermination, StepDrain, StepTerminate, StepDelete, StepReleaseBudget, StepRollback,
		StepContinueAsNew,
	}
}

// Resume points of a continued execution (DisruptionInput.ResumeAt).
const (
	// ResumeAtDrain starts the execution at its drain loop: the
	// candidates are already claimed, tainted and being terminated.
	ResumeAtDrain = "Drain"
)

// DisruptionInput is the input of statemachines/disruption.asl.json: one
// command of the disruption evaluation (shared/disruption), started by
// functions/disruption under the execution name ID. It carries names and
// a summary, never whole objects: the replacement NodeClaims are stored
// under CommandRef. Every field is always present in the JSON, because the
// state machine's Choice states read them.
type DisruptionInput struct {
	// ID is the execution's name ("consolidate-<nodeclaim>-<hash>", see
	// shared/termination.ExecutionName); a continuation keeps its root's
	// ID. It holds the budget lease and the candidates' claims.
	ID string `json:"id"`
	// Method is one of the Method constants.
	Method string `json:"method"`
	// NodePool is the candidates' NodePool.
	NodePool string `json:"nodePool"`
	// Reason says, for an operator, why the candidates were chosen.
	Reason string `json:"reason"`
	// DecidedAt is when the evaluation decided (RFC 3339): the replacement
	// deadline and the "a pod arrived" check count from it.
	DecidedAt time.Time `json:"decidedAt"`
	// Candidates are the nodes to disrupt.
	Candidates []Candidate `json:"candidates"`
	// Replacements are the NodeClaims to launch before the candidates are
	// drained (none for a deletion).
	Replacements []Replacement `json:"replacements"`
	// ReplacementCount is len(Replacements), for the state machine.
	ReplacementCount int `json:"replacementCount"`
	// SavingsPerHour is the consolidation's expected saving in USD per
	// hour (0 for other methods).
	SavingsPerHour float64 `json:"savingsPerHour"`
	// CommandRef is the key of the stored replacement NodeClaims; empty
	// when there are none.
	CommandRef string `json:"commandRef"`
	// Budget is the NodePool's disruption budget for Method.
	Budget Budget `json:"budget"`
	// Settings are the timers of the execution.
	Settings Settings `json:"settings"`
	// ResumeAt is "" for a new execution, ResumeAtDrain for a
	// continuation.
	ResumeAt string `json:"resumeAt"`
	// Committed is true once the candidates are being terminated: from
	// then on the replacements are in use and a rollback keeps them.
	Committed bool `json:"committed"`
	// Terminated is true once the candidates' instances are terminated:
	// a rollback then leaves the candidates alone.
	Terminated bool `json:"terminated"`
	// Continuation counts the continuations of the root execution; 0 for
	// the root.
	Continuation int `json:"continuation"`
	// Manual is the operator's request, for a Manual execution only
	// (nil otherwise).
	Manual *ManualRequest `json:"manual,omitempty"`
}

// ManualRequest is what an operator asked of a Manual execution, kept in
// its input for the audit trail.
type ManualRequest struct {
	// RequestedBy is the caller's identity as IAM authenticated it: the
	// IAM ARN of API Gateway's request context.
	RequestedBy string `json:"requestedBy"`
	// Nodes are the nodes the request named, as it named them.
	Nodes []string `json:"nodes"`
	// ForceAfterSeconds is how long the drain honours
	// PodDisruptionBudgets before deleting the pods they protect, counted
	// from the start of the termination; 0 never forces.
	ForceAfterSeconds int `json:"forceAfterSeconds"`
}

// Candidate is a node to disrupt.
type Candidate struct {
	// NodeClaim is the candidate's NodeClaim name.
	NodeClaim string `json:"nodeClaim"`
	// Node is its Node's name; empty when it never registered.
	Node string `json:"node"`
	// NodePool is the candidate's NodePool (a multi-node consolidation
	// may span pools).
	NodePool string `json:"nodePool,omitempty"`
	// ProviderID is its instance's provider ID, when launched.
	ProviderID string `json:"providerID,omitempty"`
	// InstanceType, Zone and CapacityType describe its offering, and
	// PricePerHour its price in USD, for the operator.
	InstanceType string  `json:"instanceType,omitempty"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	PricePerHour float64 `json:"pricePerHour,omitempty"`
	// Reason says why this candidate was chosen, when it differs from
	// the command's (a drift reason, for instance).
	Reason string `json:"reason,omitempty"`
}

// Replacement is a NodeClaim the command launches.
type Replacement struct {
	// NodeClaim is the replacement's name (stored under CommandRef).
	NodeClaim string `json:"nodeClaim"`
	// InstanceTypes are its cheapest allowed instance types, at most
	// MaxListedInstanceTypes of them, for the operator; the stored
	// NodeClaim has the full list.
	InstanceTypes []string `json:"instanceTypes"`
	// InstanceTypeCount is how many instance types it allows in all.
	InstanceTypeCount int `json:"instanceTypeCount"`
	// Expected is the offering the evaluation expects it to launch as.
	Expected *ExpectedOffering `json:"expected,omitempty"`
}

// MaxListedInstanceTypes bounds Replacement.InstanceTypes.
const MaxListedInstanceTypes = 20

// ExpectedOffering is the offering a replacement is expected to launch as.
type ExpectedOffering struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// PricePerHour is in USD.
	PricePerHour float64 `json:"pricePerHour"`
}

// Budget is the disruption budget of a command's NodePools for its method.
type Budget struct {
	// Budgeted is false for the forceful methods (Expired, Interrupted),
	// which take no budget.
	Budgeted bool `json:"budgeted"`
	// Pools are the budgets of the candidates' NodePools, one each.
	Pools []PoolBudget `json:"pools"`
}

// PoolBudget is one NodePool's budget for the command's method.
type PoolBudget struct {
	NodePool string `json:"nodePool"`
	// Allowed is Karpenter's allowed disruptions for the method: the
	// minimum over the active budgets (karpenter-spec.md section 6.3),
	// before subtracting the nodes already disrupting; -1 when no budget
	// applies (unlimited).
	Allowed int `json:"allowed"`
}

// Settings are an execution's timers, in seconds. Wait states read them
// through SecondsPath, so a test can set them to 0.
type Settings struct {
	// ValidationDelaySeconds is waited before the candidates are tainted
	// (Karpenter's 15 s validation for emptiness and consolidation).
	ValidationDelaySeconds int `json:"validationDelaySeconds"`
	// PollSeconds is the pause between replacement readiness checks.
	PollSeconds int `json:"pollSeconds"`
	// ReplacementTimeoutSeconds bounds the wait for the replacements,
	// counted from DecidedAt.
	ReplacementTimeoutSeconds int `json:"replacementTimeoutSeconds"`
	// DrainPollSeconds is the pause after a drain round that made
	// progress; a round that made none doubles the pause, up to
	// DrainPollMaxSeconds.
	DrainPollSeconds    int `json:"drainPollSeconds"`
	DrainPollMaxSeconds int `json:"drainPollMaxSeconds"`
	// MaxDrainRounds is the number of drain rounds after which the
	// execution continues as a new one (an execution's history is
	// bounded).
	MaxDrainRounds int `json:"maxDrainRounds"`
	// LeaseSeconds is how long the budget lease and the claims last
	// without renewal; every readiness check and drain round renews them.
	LeaseSeconds int `json:"leaseSeconds"`
}

// DisruptionState is the state of a disruption or interruption execution:
// its input, plus the outputs the steps added (each under its own key).
// Every task receives it whole (TaskInput.State).
type DisruptionState struct {
	DisruptionInput
	// Interruption is the interruption state machine's input, when the
	// execution is an interruption (Method MethodInterrupted).
	Interruption *InterruptionInput `json:"interruption,omitempty"`
	// Drain is the last drain round's output; nil before the first.
	Drain *DrainOutput `json:"drain,omitempty"`
	// Error is the failure a Catch caught, for the rollback.
	Error *TaskError `json:"error,omitempty"`
}

// CandidateList returns the execution's candidates: Candidates, or the
// interrupted NodeClaim of an interruption.
func (s DisruptionState) CandidateList() []Candidate {
	if len(s.Candidates) == 0 && s.Interruption != nil {
		return []Candidate{{NodeClaim: s.Interruption.NodeClaim, Node: s.Interruption.Node}}
	}
	return s.Candidates
}

// TaskError is what a Catch stores at $.error: the error name and its
// cause.
type TaskError struct {
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}

// TaskInput is the payload of every task state of the disruption and
// interruption state machines.
type TaskInput struct {
	// Step is one of the Step constants.
	Step string `json:"step"`
	// State is the execution's state ("$").
	State DisruptionState `json:"state"`
	// StateMachine is the state machine's ARN ($$.StateMachine.Id); only
	// StepContinueAsNew needs it.
	StateMachine string `json:"stateMachine,omitempty"`
}

// BudgetOutput is StepAcquireBudget's output ($.budgetLease).
type BudgetOutput struct {
	// Claimed are the candidate NodeClaims now held by the execution.
	Claimed []string `json:"claimed"`
	// Pools are the leases taken, one per NodePool; none for an
	// unbudgeted method.
	Pools []PoolLease `json:"pools"`
	// Until is when the leases and claims lapse unless renewed.
	Until time.Time `json:"until"`
}

// PoolLease is the lease an execution holds on one NodePool's budget.
type PoolLease struct {
	NodePool string `json:"nodePool"`
	// Leased is the number of nodes leased.
	Leased int `json:"leased"`
	// Allowed is PoolBudget.Allowed.
	Allowed int `json:"allowed"`
	// Limit is what the leases were checked against: Allowed minus the
	// nodes in DisruptingElsewhere.
	Limit int `json:"limit"`
	// DisruptingElsewhere lists the pool's nodes that count against the
	// budget outside nodewright's leases (NotReady, deleting, tainted),
	// each with why.
	DisruptingElsewhere []string `json:"disruptingElsewhere"`
	// Holders are the other executions holding a share of the budget.
	Holders []string `json:"holders"`
}

// LaunchOutput is StepLaunchReplacements' output ($.launch).
type LaunchOutput struct {
	Replacements []ReplacementStatus `json:"replacements"`
}

// ReplacementStatus is one replacement's state.
type ReplacementStatus struct {
	NodeClaim string `json:"nodeClaim"`
	// Status is the launch outcome (Launched, AlreadyLaunched, ...) or
	// the lifecycle state (Launched, Registered, Initialized).
	Status string `json:"status"`
	// ProviderID is the instance's provider ID once launched.
	ProviderID   string `json:"providerID,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	// Node is the replacement's Node once registered.
	Node string `json:"node,omitempty"`
	// Detail explains a status that is not a success.
	Detail string `json:"detail,omitempty"`
}

// ReadinessOutput is StepCheckReplacements' output ($.readiness).
type ReadinessOutput struct {
	// Ready is true when every replacement is initialized.
	Ready bool `json:"ready"`
	// Replacements are the replacements' states.
	Replacements []ReplacementStatus `json:"replacements"`
	// Deadline is when the wait gives up.
	Deadline time.Time `json:"deadline"`
}

// NodesOutput lists what a step did to each candidate ($.taint,
// $.revalidation, $.termination, $.terminated, $.deleted).
type NodesOutput struct {
	Nodes []NodeOutcome `json:"nodes"`
}

// NodeOutcome is what a step did to one candidate.
type NodeOutcome struct {
	NodeClaim string `json:"nodeClaim"`
	Node      string `json:"node,omitempty"`
	// Outcome is a short verb phrase: "tainted", "already tainted",
	// "eligible", "node gone", "terminated i-0abc", ...
	Outcome string `json:"outcome"`
	// Deadline is the candidate's termination deadline, if it has one
	// (StepBeginTermination).
	Deadline *time.Time `json:"deadline,omitempty"`
}

// DrainOutput is StepDrain's output ($.drain): what one round did to every
// pod it looked at.
type DrainOutput struct {
	// Round counts the drain rounds of this execution, 1 for the first.
	Round int `json:"round"`
	// Drained is true when no candidate has a pod or a volume attachment
	// left to wait for.
	Drained bool `json:"drained"`
	// Stalls counts the consecutive rounds that made no progress.
	Stalls int `json:"stalls"`
	// NextPollSeconds is the pause before the next round.
	NextPollSeconds int `json:"nextPollSeconds"`
	// Nodes are the candidates' drain states.
	Nodes []NodeDrain `json:"nodes"`
	// Truncated is true when some pods were left out of Pods to bound the
	// output's size; the counts are complete.
	Truncated bool `json:"truncated,omitempty"`
}

// NodeDrain is one candidate's drain state after a round.
type NodeDrain struct {
	NodeClaim string `json:"nodeClaim"`
	Node      string `json:"node"`
	// Drained is true when nothing is left to wait for.
	Drained bool `json:"drained"`
	// Tier is the eviction tier being drained (1: non-critical pods, 2:
	// non-critical DaemonSet pods, 3: critical pods, 4: critical
	// DaemonSet pods); 0 when drained.
	Tier int `json:"tier"`
	// Remaining counts the pods the drain still waits for.
	Remaining int `json:"remaining"`
	// Deadline is the termination deadline, when the NodeClaim has a
	// terminationGracePeriod (or the interruption one).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Counts counts this round's pod actions by PodAction.
	Counts map[string]int `json:"counts,omitempty"`
	// Pods are this round's pod actions (possibly truncated).
	Pods []PodAction `json:"pods,omitempty"`
	// Unlisted are the pod actions left out of Pods to bound the
	// execution's state. They are never encoded: the task that ran the
	// round reads them (its event records name every pod it evicted) and
	// the state machine does not keep them.
	Unlisted []PodAction `json:"-"`
	// Volumes is the wait for the Node's volumes to detach, once its pods
	// are gone; nil before.
	Volumes *VolumeDetachment `json:"volumes,omitempty"`
}

// PodAction is what a drain round did to one pod.
type PodAction struct {
	// Pod is "<namespace>/<name>".
	Pod string `json:"pod"`
	// Action is one of the PodAction constants.
	Action string `json:"action"`
	// Detail is the API server's message (a PDB refusal) or why.
	Detail string `json:"detail,omitempty"`
	// UID is the pod's UID, for the task's event records; never encoded,
	// to keep the execution's state small.
	UID string `json:"-"`
	// GraceSeconds is the grace period of a PodDeleted deletion, for the
	// task's event records; never encoded.
	GraceSeconds int64 `json:"-"`
	// PodGraceSeconds is the pod's own terminationGracePeriodSeconds (30
	// when unset), for the task's event records; never encoded.
	PodGraceSeconds int64 `json:"-"`
}

// Pod actions of a drain round.
const (
	// PodEvicted: an eviction was accepted; the pod is terminating.
	PodEvicted = "Evicted"
	// PodEvictionBlocked: a PodDisruptionBudget refused the eviction
	// (HTTP 429); retried next round.
	PodEvictionBlocked = "EvictionBlocked"
	// PodEvictionFailed: the eviction failed otherwise; retried next
	// round.
	PodEvictionFailed = "EvictionFailed"
	// PodDeleted: deleted past its termination deadline (bypassing PDBs
	// and do-not-disrupt), with the grace period left.
	PodDeleted = "Deleted"
	// PodWaitingDoNotDisrupt: the pod has an active
	// karpenter.sh/do-not-disrupt annotation; the drain waits for it.
	PodWaitingDoNotDisrupt = "WaitingDoNotDisrupt"
	// PodTerminating: already terminating; the drain waits for it.
	PodTerminating = "Terminating"
	// PodGone: the pod went away before its eviction.
	PodGone = "Gone"
	// PodWaitingTier: in a later tier; evicted once the tiers before it
	// are gone.
	PodWaitingTier = "WaitingForEarlierTier"
)

// RollbackOutput is StepRollback's output ($.rollback).
type RollbackOutput struct {
	// Untainted are the candidates given back to the cluster.
	Untainted []string `json:"untainted"`
	// RemovedReplacements are the replacement NodeClaims deleted (and
	// their instances terminated).
	RemovedReplacements []string `json:"removedReplacements"`
	// KeptReplacements are replacements left running because pods may
	// already use them.
	KeptReplacements []string `json:"keptReplacements"`
	// BudgetReleased is true when the budget lease was released.
	BudgetReleased bool `json:"budgetReleased"`
	// Cause is the failure that caused the rollback.
	Cause string `json:"cause"`
}

// ContinueOutput is StepContinueAsNew's output ($.continuedAs).
type ContinueOutput struct {
	// Execution is the continuation's execution name.
	Execution string `json:"execution"`
}

// ReleaseOutput is StepReleaseBudget's output ($.released).
type ReleaseOutput struct {
	BudgetReleased bool     `json:"budgetReleased"`
	Released       []string `json:"released"`
}

// IsBudgetedMethod reports whether method spends a disruption budget:
// every method but the forceful Expired, CapacityBlockExpiring and
// Interrupted (karpenter-spec.md
// sections 5.3, 6.1 and 8.2) and the operator's Manual.
func IsBudgetedMethod(method string) bool {
	switch method {
	case MethodEmpty, MethodDrifted, MethodUnderutilized:
		return true
	}
	return false
}

// IsForcefulMethod reports whether method is forceful (Expired,
// CapacityBlockExpiring, Interrupted): it takes a node from any other
// method's live execution, and no other method takes a node from it.
func IsForcefulMethod(method string) bool {
	return method == MethodExpired || method == MethodCapacityBlockExpiring || method == MethodInterrupted
}
