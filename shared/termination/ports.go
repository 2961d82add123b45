package termination

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
)

// The ports return the store errors of shared/apis/v1 (v1.ErrNotFound,
// v1.ErrConflict, v1.ErrBudgetExhausted, v1.ErrLeaseLapsed), compared with
// errors.Is; the adapters' own errors match them.

// claimStore is the NodeClaim store (DynamoDB). Update and Delete check
// the claim's resourceVersion.
type claimStore interface {
	// ListNodeClaims returns every NodeClaim, strongly consistent.
	ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error)
	// GetNodeClaim returns one NodeClaim, or an error matching
	// v1.ErrNotFound.
	GetNodeClaim(ctx context.Context, name string) (v1.NodeClaim, error)
	// UpdateNodeClaim replaces the NodeClaim if its stored ResourceVersion
	// is claim.ResourceVersion; errors match v1.ErrConflict or v1.ErrNotFound.
	UpdateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error)
	// DeleteNodeClaim deletes it at resourceVersion; errors match
	// v1.ErrConflict or v1.ErrNotFound.
	DeleteNodeClaim(ctx context.Context, name, resourceVersion string) error
}

// budgetStore holds the NodePools' disruption-budget leases
// (shared/aws/ddbstore).
type budgetStore interface {
	// AcquireBudget leases nodes of nodePool's budget to holder until
	// now+ttl, replacing holder's earlier lease; it returns an error
	// matching v1.ErrBudgetExhausted when the unexpired leases of the pool,
	// this one included, would exceed limit.
	AcquireBudget(ctx context.Context, nodePool, holder string, nodes, limit int, now time.Time, ttl time.Duration) error
	// RenewBudget extends holder's unexpired lease of nodePool to now+ttl,
	// keeping its nodes; it returns an error matching v1.ErrLeaseLapsed when
	// holder holds no lease unexpired at now (it lapsed or was released),
	// and never creates one.
	RenewBudget(ctx context.Context, nodePool, holder string, now time.Time, ttl time.Duration) error
	// ReleaseBudget ends holder's lease; nil when it holds none.
	ReleaseBudget(ctx context.Context, nodePool, holder string, now time.Time) error
	// BudgetHolders returns the pool's unexpired leases: holder -> nodes.
	BudgetHolders(ctx context.Context, nodePool string, now time.Time) (map[string]int, error)
}

// nodeAPI reads and writes Nodes (shared/kube).
type nodeAPI interface {
	// ListNodes returns every Node of the cluster.
	ListNodes(ctx context.Context) ([]corev1.Node, error)
	// GetNode returns a Node, or an error matching v1.ErrNotFound.
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	// UpdateNode applies mutate to the current Node and writes it, re-
	// reading on conflicts; an error matching v1.ErrNotFound when it is gone.
	UpdateNode(ctx context.Context, name string, mutate func(*corev1.Node) error) error
	// DeleteNode deletes a Node; a Node already gone is success.
	DeleteNode(ctx context.Context, name string) error
}

// podAPI lists, evicts and deletes pods (shared/kube).
type podAPI interface {
	// ListPodsOnNode returns the pods bound to node.
	ListPodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error)
	// Evict asks the Eviction API to evict pod (honouring
	// PodDisruptionBudgets) with the pod's own grace period when
	// gracePeriod is negative.
	Evict(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) (Eviction, error)
	// DeletePod deletes pod with gracePeriod, bypassing
	// PodDisruptionBudgets; a pod already gone is success.
	DeletePod(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) error
}

// Eviction is the API server's answer to one eviction.
type Eviction struct {
	Outcome EvictionOutcome
	// Message explains a refusal (which budget, how many disruptions it
	// allows).
	Message string
}

// EvictionOutcome is how an eviction ended.
type EvictionOutcome string

// Eviction outcomes (the Eviction API's three expected answers).
const (
	// Evicted: accepted; the pod is terminating.
	Evicted EvictionOutcome = "Evicted"
	// EvictionBlocked: HTTP 429, a PodDisruptionBudget refused it now.
	EvictionBlocked EvictionOutcome = "Blocked"
	// EvictionPodGone: HTTP 404 or a UID mismatch; the pod is gone.
	EvictionPodGone EvictionOutcome = "PodGone"
)

// drainRules are Karpenter's pure drain rules, which live with the
// Kubernetes adapter (shared/kube.DrainOrder and kube.DoNotDisrupt).
type drainRules interface {
	// DrainOrder returns the pods the drain waits for, in eviction tiers.
	DrainOrder(pods []corev1.Pod, now time.Time) [][]corev1.Pod
	// DoNotDisrupt reports an active karpenter.sh/do-not-disrupt.
	DoNotDisrupt(pod *corev1.Pod, now time.Time) bool
	// Drainable reports whether the drain acts on pod (Karpenter's
	// drainability: not tolerating the disrupted taint, not a mirror pod,
	// not stuck terminating); the volume wait ignores the volumes of the
	// pods that are not.
	Drainable(pod *corev1.Pod, now time.Time) bool
}

// volumeAPI reads what the wait for volume detachment needs (shared/kube).
type volumeAPI interface {
	// ListVolumeAttachments returns the storage.k8s.io/v1
	// VolumeAttachments whose spec.nodeName is node.
	ListVolumeAttachments(ctx context.Context, node string) ([]storagev1.VolumeAttachment, error)
	// BoundVolume returns the PersistentVolume the claim namespace/name is
	// bound to, "" while unbound, or an error matching v1.ErrNotFound.
	BoundVolume(ctx context.Context, namespace, name string) (string, error)
}

// replacementLauncher launches planned NodeClaims through the
// provisioning launch path (provisioning.Provisioner.LaunchNodeClaims).
type replacementLauncher interface {
	// LaunchNodeClaims creates (create-only) and launches each planned
	// claim and returns one result per claim, in order. Calls with the same
	// claims are idempotent.
	LaunchNodeClaims(ctx context.Context, planned []v1.NodeClaim, now time.Time) ([]LaunchResult, error)
}

// LaunchResult is what launching one replacement did.
type LaunchResult struct {
	NodeClaim string
	Status    launch.Status
	// ProviderID is set once launched.
	ProviderID string
	// Reason explains a failure.
	Reason string
}

// instanceTerminator terminates EC2 instances (shared/aws/fleet).
type instanceTerminator interface {
	// Terminate terminates the instances; an instance already gone or
	// terminating counts as terminated.
	Terminate(ctx context.Context, ids ...string) error
}

// commandStore holds the replacement NodeClaims of commands, stored by the
// disruption Lambda before it starts an execution (ddbstore payloads).
type commandStore interface {
	// Replacements returns the NodeClaims stored under ref, or an error
	// matching v1.ErrNotFound.
	Replacements(ctx context.Context, ref string) ([]v1.NodeClaim, error)
}

// executionStarter starts Step Functions executions (shared/aws/
// sfnstarter): a name that already exists is success.
type executionStarter interface {
	StartExecution(ctx context.Context, stateMachine, name string, input any) error
}

// executionStatus reads whether a Step Functions execution still runs
// (shared/aws/sfnstarter, states:DescribeExecution).
type executionStatus interface {
	// ExecutionStatus returns the status of the execution called name of
	// the state machine that runs method's commands (the interruption
	// machine for MethodInterrupted, else the disruption machine).
	ExecutionStatus(ctx context.Context, method, name string) (ExecutionStatus, error)
}

// ExecutionStatus is what Step Functions says about one execution.
type ExecutionStatus string

// Execution statuses.
const (
	// ExecutionRunning: the execution runs (Step Functions RUNNING or
	// PENDING_REDRIVE).
	ExecutionRunning ExecutionStatus = "Running"
	// ExecutionEnded: it ended (SUCCEEDED, FAILED, TIMED_OUT, ABORTED).
	ExecutionEnded ExecutionStatus = "Ended"
	// ExecutionMissing: no execution has that name
	// (ExecutionDoesNotExist).
	ExecutionMissing ExecutionStatus = "Missing"
)

// Ports are the adapters a Service works through. Claims, Nodes, Pods,
// Rules and Instances are required; Budgets, Launcher, Commands,
// Executions, Volumes (Drain) and Status (ReleaseStale) are required by
// the steps that use them.
type Ports struct {
	Claims     claimStore
	Budgets    budgetStore
	Nodes      nodeAPI
	Pods       podAPI
	Rules      drainRules
	Volumes    volumeAPI
	Launcher   replacementLauncher
	Instances  instanceTerminator
	Commands   commandStore
	Executions executionStarter
	Status     executionStatus
}

// Service runs the steps. It holds no state between calls and is safe for
// concurrent use.
type Service struct {
	p Ports
}

// New returns a Service, or an error naming a missing required port.
func New(p Ports) (*Service, error) {
	switch {
	case p.Claims == nil:
		return nil, fmt.Errorf("termination ports: Claims: %w", errMissing)
	case p.Nodes == nil:
		return nil, fmt.Errorf("termination ports: Nodes: %w", errMissing)
	case p.Pods == nil:
		return nil, fmt.Errorf("termination ports: Pods: %w", errMissing)
	case p.Rules == nil:
		return nil, fmt.Errorf("termination ports: Rules: %w", errMissing)
	case p.Instances == nil:
		return nil, fmt.Errorf("termination ports: Instances: %w", errMissing)
	}
	return &Service{p: p}, nil
}

var errMissing = errors.New("required")
