package adapters

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

// The adapters below fit the AWS and Kubernetes packages to the ports
// shared/termination declares. They translate types and errors only.

// TerminationClaims is termination's NodeClaim store over ddbstore.
type TerminationClaims struct {
	Store *ddbstore.Store
	// Metrics, when set, counts each deleted NodeClaim terminated.
	Metrics *decisionmetrics.Recorder
}

// ListNodeClaims lists every NodeClaim.
func (c TerminationClaims) ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error) {
	return c.Store.ListNodeClaims(ctx)
}

// GetNodeClaim reads one NodeClaim.
func (c TerminationClaims) GetNodeClaim(ctx context.Context, name string) (v1.NodeClaim, error) {
	return c.Store.GetNodeClaim(ctx, name)
}

// UpdateNodeClaim replaces a NodeClaim at its ResourceVersion.
func (c TerminationClaims) UpdateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error) {
	return c.Store.UpdateNodeClaim(ctx, claim)
}

// DeleteNodeClaim deletes a NodeClaim at resourceVersion.
func (c TerminationClaims) DeleteNodeClaim(ctx context.Context, name, resourceVersion string) error {
	return DeleteCounted(ctx, c.Store, c.Metrics, name, resourceVersion)
}

// Budgets is termination's budget store over ddbstore's budget leases.
type Budgets struct{ Store *ddbstore.Store }

// AcquireBudget leases nodes of nodePool's budget to holder.
func (b Budgets) AcquireBudget(ctx context.Context, nodePool, holder string, nodes, limit int, now time.Time, ttl time.Duration) error {
	return b.Store.AcquireBudget(ctx, ddbstore.BudgetRequest{NodePool: nodePool, Execution: holder, Nodes: nodes, Limit: limit}, now, ttl)
}

// RenewBudget extends holder's unexpired lease.
func (b Budgets) RenewBudget(ctx context.Context, nodePool, holder string, now time.Time, ttl time.Duration) error {
	return b.Store.RenewBudget(ctx, nodePool, holder, now, ttl)
}

// ReleaseBudget ends holder's lease.
func (b Budgets) ReleaseBudget(ctx context.Context, nodePool, holder string, now time.Time) error {
	return b.Store.ReleaseBudget(ctx, nodePool, holder, now)
}

// BudgetHolders returns the pool's unexpired leases.
func (b Budgets) BudgetHolders(ctx context.Context, nodePool string, now time.Time) (map[string]int, error) {
	leases, err := b.Store.ListBudgetLeases(ctx, nodePool, now)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(leases))
	for _, l := range leases {
		out[l.Execution] = l.Nodes
	}
	return out, nil
}

// Commands reads replacements the disruption Lambda stored as payloads.
type Commands struct {
	Store *ddbstore.Store
	Now   func() time.Time
}

// Replacements returns the NodeClaims stored under ref.
func (c Commands) Replacements(ctx context.Context, ref string) ([]v1.NodeClaim, error) {
	data, err := c.Store.GetPayload(ctx, ref, c.Now())
	if err != nil {
		return nil, err
	}
	return termination.DecodeReplacements(data)
}

// KubeAPI is the Kubernetes API as termination uses it.
type KubeAPI interface {
	ListNodes(ctx context.Context) ([]corev1.Node, error)
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	UpdateNode(ctx context.Context, name string, mutate func(*corev1.Node) error) error
	DeleteNode(ctx context.Context, name string) error
	ListPodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error)
	Evict(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) (kube.Eviction, error)
	DeletePod(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) error
	ListVolumeAttachments(ctx context.Context, node string) ([]storagev1.VolumeAttachment, error)
	BoundVolume(ctx context.Context, namespace, name string) (string, error)
}

var _ KubeAPI = (*kube.Client)(nil)

// Kube is termination's node, pod, drain-rule and volume ports over
// shared/kube.
type Kube struct{ Client KubeAPI }

// ListNodes lists every Node.
func (k Kube) ListNodes(ctx context.Context) ([]corev1.Node, error) {
	return k.Client.ListNodes(ctx)
}

// GetNode reads one Node.
func (k Kube) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return k.Client.GetNode(ctx, name)
}

// UpdateNode mutates one Node.
func (k Kube) UpdateNode(ctx context.Context, name string, mutate func(*corev1.Node) error) error {
	return k.Client.UpdateNode(ctx, name, mutate)
}

// DeleteNode deletes one Node.
func (k Kube) DeleteNode(ctx context.Context, name string) error {
	return k.Client.DeleteNode(ctx, name)
}

// ListPodsOnNode lists a Node's pods.
func (k Kube) ListPodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	return k.Client.ListPodsOnNode(ctx, node)
}

// Evict evicts a pod through the Eviction API.
func (k Kube) Evict(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) (termination.Eviction, error) {
	if gracePeriod < 0 {
		gracePeriod = kube.UsePodGracePeriod
	}
	ev, err := k.Client.Evict(ctx, pod, gracePeriod)
	if err != nil {
		return termination.Eviction{}, err
	}
	outcome, ok := evictionOutcomes[ev.Outcome]
	if !ok {
		return termination.Eviction{}, fmt.Errorf("evict pod %s/%s: unknown outcome %q", pod.Namespace, pod.Name, ev.Outcome)
	}
	return termination.Eviction{Outcome: outcome, Message: ev.Message}, nil
}

var evictionOutcomes = map[kube.EvictionOutcome]termination.EvictionOutcome{
	kube.Evicted: termination.Evicted, kube.EvictionBlocked: termination.EvictionBlocked, kube.PodGone: termination.EvictionPodGone,
}

// DeletePod deletes a pod directly.
func (k Kube) DeletePod(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) error {
	return k.Client.DeletePod(ctx, pod, gracePeriod)
}

// DrainOrder is kube.DrainOrder.
func (Kube) DrainOrder(pods []corev1.Pod, now time.Time) [][]corev1.Pod {
	return kube.DrainOrder(pods, now)
}

// DoNotDisrupt is kube.DoNotDisrupt.
func (Kube) DoNotDisrupt(pod *corev1.Pod, now time.Time) bool { return kube.DoNotDisrupt(pod, now) }

// nodeClaimLauncher is provisioning's launch path
// (*provisioning.Provisioner).
type nodeClaimLauncher interface {
	LaunchNodeClaims(ctx context.Context, planned []v1.NodeClaim, now time.Time) ([]provisioning.Launch, []string, error)
}

// ReplacementLauncher is termination's replacement launcher over provisioning.
type ReplacementLauncher struct{ Provisioner nodeClaimLauncher }

// LaunchNodeClaims launches the planned replacements.
func (l ReplacementLauncher) LaunchNodeClaims(ctx context.Context, planned []v1.NodeClaim, now time.Time) ([]termination.LaunchResult, error) {
	launches, _, err := l.Provisioner.LaunchNodeClaims(ctx, planned, now)
	if err != nil {
		return nil, err
	}
	out := make([]termination.LaunchResult, len(launches))
	for i, la := range launches {
		out[i] = termination.LaunchResult{NodeClaim: la.NodeClaim, Status: la.Status, ProviderID: la.ProviderID, Reason: la.Reason}
	}
	return out, nil
}

// Starter is termination's execution starter over sfnstarter: a name that
// already exists is success.
type Starter struct{ API sfnstarter.API }

// StartExecution starts name on stateMachine with input.
func (s Starter) StartExecution(ctx context.Context, stateMachine, name string, input any) error {
	st, err := sfnstarter.New(s.API, stateMachine)
	if err != nil {
		return err
	}
	_, err = st.Start(ctx, name, input)
	return err
}

// Executions is termination's execution-status port over Step Functions
// DescribeExecution: an interruption's execution runs on Interruption, any
// other method's on Disruption. A method whose machine is not configured
// (Interruption empty) is an error, so nothing is handed back blindly.
type Executions struct {
	API          sfnstarter.DescribeAPI
	Disruption   string
	Interruption string
}

// ExecutionStatus returns the status of execution name of method's machine.
func (x Executions) ExecutionStatus(ctx context.Context, method, name string) (termination.ExecutionStatus, error) {
	machine := x.Disruption
	if method == workflow.MethodInterrupted {
		machine = x.Interruption
	}
	if machine == "" {
		return "", fmt.Errorf("execution %s: no state machine configured for method %s", name, method)
	}
	st, err := sfnstarter.New(nil, machine)
	if err != nil {
		return "", err
	}
	status, err := st.Status(ctx, x.API, name)
	if err != nil {
		return "", err
	}
	switch status {
	case sfnstarter.StatusRunning:
		return termination.ExecutionRunning, nil
	case sfnstarter.StatusMissing:
		return termination.ExecutionMissing, nil
	}
	return termination.ExecutionEnded, nil
}

// ListVolumeAttachments lists the VolumeAttachments of a Node, for the
// wait for volume detachment after its drain.
func (k Kube) ListVolumeAttachments(ctx context.Context, node string) ([]storagev1.VolumeAttachment, error) {
	return k.Client.ListVolumeAttachments(ctx, node)
}

// BoundVolume reads the PersistentVolume a claim is bound to; a claim that
// is gone matches v1.ErrNotFound.
func (k Kube) BoundVolume(ctx context.Context, namespace, name string) (string, error) {
	return k.Client.BoundVolume(ctx, namespace, name)
}

// Drainable is kube.Drainable.
func (Kube) Drainable(pod *corev1.Pod, now time.Time) bool { return kube.Drainable(pod, now) }
