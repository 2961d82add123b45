package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
)

// CleanupReason says why garbage collection removes something; the values
// are Karpenter's metric reasons where it has one.
type CleanupReason string

// Cleanup reasons.
const (
	// CleanupLaunchTimeout: the NodeClaim did not launch within
	// LaunchTimeout.
	CleanupLaunchTimeout CleanupReason = "launch_timeout"
	// CleanupRegistrationTimeout: the NodeClaim launched but its Node did
	// not register within RegistrationTimeout.
	CleanupRegistrationTimeout CleanupReason = "registration_timeout"
	// CleanupInstanceGone: a registered NodeClaim's instance no longer
	// exists and its Node is not Ready.
	CleanupInstanceGone CleanupReason = "garbage_collected"
	// CleanupLeakedInstance: an instance carrying nodewright's ownership
	// mark for the cluster that no NodeClaim accounts for.
	CleanupLeakedInstance CleanupReason = "leaked_instance"
)

// Cleanup is one garbage-collection decision: the NodeClaim, instance and
// Node to remove together. Empty fields mean "nothing of that kind".
// Executing it deletes the NodeClaim first, with the ResourceVersion it was
// read at, so that a NodeClaim that changed meanwhile (it launched or
// registered after all) is kept and nothing else is touched; then it
// terminates the instance and deletes the Node. A failure half-way leaves
// the rest to the next run: an instance whose NodeClaim is gone is a leaked
// instance by then.
type Cleanup struct {
	Reason CleanupReason `json:"reason"`
	// NodeClaim and ResourceVersion name the NodeClaim to delete.
	NodeClaim       string `json:"nodeClaim,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// InstanceID is the EC2 instance to terminate.
	InstanceID string `json:"instanceID,omitempty"`
	// Node is the Node to delete.
	Node string `json:"node,omitempty"`
}

// GCInput is everything garbage collection decides on.
type GCInput struct {
	Now time.Time
	// Cluster is the EKS cluster name. An instance no NodeClaim names is
	// terminated only when it carries nodewright's ownership mark
	// (v1.OwnedBy: nodewright.dev/owner=<Cluster>) besides the cluster's
	// launch tags (eks:eks-cluster-name=<Cluster>, karpenter.sh/nodepool,
	// karpenter.k8s.aws/ec2nodeclass); an instance Karpenter launched
	// carries the same launch tags but never the mark.
	Cluster    string
	NodeClaims []v1.NodeClaim
	Nodes      []corev1.Node
	// Instances is the complete list of the cluster's instances in any
	// state; a partial list would make NodeClaims look orphaned.
	Instances []launch.Instance
}

// PlanGarbageCollection decides what to remove (karpenter-spec sections 5.1
// and 5.4, 11.3 items 17-18):
//   - a NodeClaim not Launched LaunchTimeout or more after its Launched
//     condition last changed (its creation when absent);
//   - a Launched NodeClaim not Registered RegistrationTimeout or more after
//     its Registered condition last changed (its creation when absent),
//     with its instance and any Node carrying its providerID;
//   - a Registered NodeClaim whose instance is absent or terminated and
//     whose Node is missing or not Ready (a Ready Node means the kubelet
//     still runs), with the Node;
//   - an instance with the cluster's launch tags and nodewright's
//     ownership mark, not shutting down or terminated, launched more than
//     LeakedInstanceGrace ago, that no NodeClaim's providerID names and
//     whose karpenter.sh/nodeclaim tag (if any) names no NodeClaim still
//     launching, with its Node.
//
// Anything else is not nodewright's and is left alone, whatever tags it
// carries: an instance without the mark (one Karpenter launched, say) and
// its Node are never planned, and Karpenter's own leaked-instance rule
// (cluster tags only) is deliberately not followed, since Karpenter's
// instances carry those tags too.
//
// NodeClaims being deleted are left to their deletion. The result is
// sorted by reason, then NodeClaim, then instance. It reads nothing but in.
func PlanGarbageCollection(in GCInput) []Cleanup {
	nodeByInstance := map[string]*corev1.Node{}
	nodeByName := map[string]*corev1.Node{}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		nodeByName[n.Name] = n
		if _, id, err := v1.ParseProviderID(n.Spec.ProviderID); err == nil {
			nodeByInstance[id] = n
		}
	}
	instances := map[string]*launch.Instance{}
	for i := range in.Instances {
		instances[in.Instances[i].ID] = &in.Instances[i]
	}
	owned := map[string]bool{}
	launching := map[string]bool{}
	var out []Cleanup
	for i := range in.NodeClaims {
		c := &in.NodeClaims[i]
		_, id, _ := v1.ParseProviderID(c.Status.ProviderID)
		if id != "" {
			owned[id] = true
		} else {
			launching[c.Name] = true
		}
		if c.DeletionTimestamp != nil {
			continue
		}
		cleanup := Cleanup{NodeClaim: c.Name, ResourceVersion: c.ResourceVersion, InstanceID: id}
		switch {
		case !isTrue(c, v1.ConditionTypeLaunched):
			if in.Now.Sub(since(c, v1.ConditionTypeLaunched)) < LaunchTimeout {
				continue
			}
			cleanup.Reason = CleanupLaunchTimeout
		case !isTrue(c, v1.ConditionTypeRegistered):
			if in.Now.Sub(since(c, v1.ConditionTypeRegistered)) < RegistrationTimeout {
				continue
			}
			cleanup.Reason = CleanupRegistrationTimeout
		default:
			if inst := instances[id]; id != "" && inst != nil && inst.State != stateTerminated {
				continue
			}
			node := nodeByInstance[id]
			if node == nil {
				node = nodeByName[c.Status.NodeName]
			}
			if node != nil && v1.NodeReady(node) {
				continue
			}
			cleanup.Reason, cleanup.InstanceID = CleanupInstanceGone, ""
			if node != nil {
				cleanup.Node = node.Name
			}
			out = append(out, cleanup)
			continue
		}
		if n := nodeByInstance[id]; id != "" && n != nil {
			cleanup.Node = n.Name
		}
		out = append(out, cleanup)
	}
	for i := range in.Instances {
		inst := &in.Instances[i]
		switch {
		case owned[inst.ID], inst.State == stateShuttingDown, inst.State == stateTerminated:
			continue
		case !carriesClusterTags(inst, in.Cluster), !v1.OwnedBy(inst.Tags, in.Cluster):
			continue
		case launching[inst.Tags[v1.TagKeyNodeClaim]]:
			// Launched for a NodeClaim whose status is being written.
			continue
		case inst.LaunchTime.IsZero() || in.Now.Sub(inst.LaunchTime) <= LeakedInstanceGrace:
			continue
		}
		cleanup := Cleanup{Reason: CleanupLeakedInstance, InstanceID: inst.ID}
		if n := nodeByInstance[inst.ID]; n != nil {
			cleanup.Node = n.Name
		}
		out = append(out, cleanup)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		if a.NodeClaim != b.NodeClaim {
			return a.NodeClaim < b.NodeClaim
		}
		return a.InstanceID < b.InstanceID
	})
	return out
}

// carriesClusterTags reports whether inst has the tags Karpenter lists
// instances by: eks:eks-cluster-name=<cluster> and the karpenter.sh/nodepool
// and karpenter.k8s.aws/ec2nodeclass keys (aws:
// pkg/providers/instance/instance.go List).
func carriesClusterTags(inst *launch.Instance, cluster string) bool {
	if cluster == "" || inst.Tags[v1.TagKeyEKSClusterName] != cluster {
		return false
	}
	_, pool := inst.Tags[v1.TagKeyNodePool]
	_, class := inst.Tags[v1.TagKeyEC2NodeClass]
	return pool && class
}

// gcClaimStore is the NodeClaim store as garbage collection uses it.
type gcClaimStore interface {
	// ListNodeClaims and DeleteNodeClaim are claimStore's.
	ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error)
	DeleteNodeClaim(ctx context.Context, name, resourceVersion string) error
}

// instanceProvider lists and terminates the cluster's EC2 instances
// (shared/aws/fleet in production).
type instanceProvider interface {
	// ListInstances returns every instance tagged for the cluster, in any
	// state but terminated, with its tags and launch time. It fails rather
	// than return a partial list.
	ListInstances(ctx context.Context) ([]launch.Instance, error)
	// TerminateInstance terminates one instance. It returns nil, or an
	// error matching v1.ErrNotFound, when the instance is already gone.
	TerminateInstance(ctx context.Context, id string) error
}

// nodeStore reads and deletes Nodes (shared/kube in production).
type nodeStore interface {
	ListNodes(ctx context.Context) ([]corev1.Node, error)
	// DeleteNode deletes a Node; nil or an error matching v1.ErrNotFound when
	// it is already gone.
	DeleteNode(ctx context.Context, name string) error
}

// Collector runs garbage collection for one cluster. It holds no state and
// is safe for concurrent use.
type Collector struct {
	cluster     string
	claims      gcClaimStore
	instances   instanceProvider
	nodes       nodeStore
	parallelism int
}

// NewCollector returns a Collector for cluster, or an error naming a
// missing argument.
func NewCollector(cluster string, claims gcClaimStore, instances instanceProvider, nodes nodeStore) (*Collector, error) {
	switch {
	case cluster == "":
		return nil, fmt.Errorf("collector: cluster: %w", errMissing)
	case claims == nil:
		return nil, fmt.Errorf("collector: claims: %w", errMissing)
	case instances == nil:
		return nil, fmt.Errorf("collector: instances: %w", errMissing)
	case nodes == nil:
		return nil, fmt.Errorf("collector: nodes: %w", errMissing)
	}
	return &Collector{cluster: cluster, claims: claims, instances: instances, nodes: nodes, parallelism: DefaultLaunchParallelism}, nil
}

// CleanupResult is one executed Cleanup.
type CleanupResult struct {
	Cleanup
	// Skipped is true when the NodeClaim changed since it was read; nothing
	// was done and the next run decides again.
	Skipped bool `json:"skipped,omitempty"`
	// Err is the failure that stopped the cleanup, nil when it completed or
	// was skipped.
	Err error `json:"-"`
}

// CollectGarbage lists the cluster's instances, then its NodeClaims and
// Nodes (instances first, so every listed instance existed before its
// NodeClaim was read), decides with PlanGarbageCollection and executes each
// Cleanup, several at a time, waiting for all before it returns. Every step
// is idempotent: a NodeClaim or Node already gone and an instance already
// terminated count as done. It returns the results and, when a list failed
// (nothing is done then) or a cleanup failed, an error.
func (c *Collector) CollectGarbage(ctx context.Context, now time.Time) ([]CleanupResult, error) {
	instances, err := c.instances.ListInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect garbage: list instances: %w", err)
	}
	claims, err := c.claims.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect garbage: list nodeclaims: %w", err)
	}
	nodes, err := c.nodes.ListNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect garbage: list nodes: %w", err)
	}
	plan := PlanGarbageCollection(GCInput{Now: now, Cluster: c.cluster, NodeClaims: claims, Nodes: nodes, Instances: instances})
	results := make([]CleanupResult, len(plan))
	var g errgroup.Group
	g.SetLimit(c.parallelism)
	for i := range plan {
		g.Go(func() error {
			results[i] = c.execute(ctx, plan[i])
			return nil
		})
	}
	// The goroutines report through results and never return an error.
	_ = g.Wait()
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	if len(errs) > 0 {
		return results, fmt.Errorf("collect garbage: %w", errors.Join(errs...))
	}
	return results, nil
}

func (c *Collector) execute(ctx context.Context, cl Cleanup) CleanupResult {
	r := CleanupResult{Cleanup: cl}
	if cl.NodeClaim != "" {
		err := c.claims.DeleteNodeClaim(ctx, cl.NodeClaim, cl.ResourceVersion)
		switch {
		case errors.Is(err, v1.ErrConflict):
			r.Skipped = true
			return r
		case err != nil && !errors.Is(err, v1.ErrNotFound):
			r.Err = fmt.Errorf("%s: delete nodeclaim %s: %w", cl.Reason, cl.NodeClaim, err)
			return r
		}
	}
	if cl.InstanceID != "" {
		if err := c.instances.TerminateInstance(ctx, cl.InstanceID); err != nil && !errors.Is(err, v1.ErrNotFound) {
			r.Err = fmt.Errorf("%s: terminate instance %s: %w", cl.Reason, cl.InstanceID, err)
			return r
		}
	}
	if cl.Node != "" {
		if err := c.nodes.DeleteNode(ctx, cl.Node); err != nil && !errors.Is(err, v1.ErrNotFound) {
			r.Err = fmt.Errorf("%s: delete node %s: %w", cl.Reason, cl.Node, err)
			return r
		}
	}
	return r
}
