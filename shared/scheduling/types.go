package scheduling

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// Input is a complete snapshot for one scheduling round. Solve reads nothing
// else: no clock, no network, no globals.
type Input struct {
	// Now stamps creation times of new NodeClaims; never read from the system clock.
	Now time.Time
	// NodePools are candidate pools; the solver orders them by weight desc,
	// then name desc (Karpenter's OrderByWeight). Pools being deleted, static
	// pools (spec.replicas set) and pools whose nodeClassRef has no entry in
	// InstanceTypes are skipped with a reason.
	NodePools []v1.NodePool
	// NodeClasses are the EC2NodeClasses the pools refer to.
	NodeClasses []v1.EC2NodeClass
	// InstanceTypes maps an EC2NodeClass name to its resolved instance types
	// (allocatable computed for that class, offerings limited to its zones,
	// unavailable offerings marked).
	InstanceTypes map[string][]*catalog.InstanceType
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes is existing capacity: registered nodes and in-flight NodeClaims.
	Nodes []ExistingNode
	// DaemonSets contribute per-node overhead to new NodeClaims of the pools
	// they can run on, and remaining overhead to existing nodes.
	DaemonSets []appsv1.DaemonSet
	// Volumes are the PersistentVolumeClaims, PersistentVolumes and
	// StorageClasses the pods' volumes name; a pod whose claim is bound to
	// a zonal volume, or unbound with a WaitForFirstConsumer class that
	// restricts topology, gets a node those allow (see volumes.go). Optional
	// when no pod uses a claim.
	Volumes Volumes
	// Namespaces are consulted only to evaluate pod (anti-)affinity terms
	// with a non-empty namespaceSelector; a namespace not listed has no
	// labels. Optional.
	Namespaces []corev1.Namespace
	// Options tune policies; the zero value means Karpenter's defaults.
	Options Options
}

// ExistingNode is a registered Node, an in-flight NodeClaim (Node nil), or both.
type ExistingNode struct {
	// Node is nil for an in-flight NodeClaim that has not registered yet.
	Node *corev1.Node
	// NodeClaim is nil for nodes nodewright/Karpenter does not manage.
	NodeClaim *v1.NodeClaim
	// Pods are the pods bound to (or nominated for) this node.
	Pods []*corev1.Pod
	// MarkedForDeletion excludes the node from placement; its reschedulable
	// pods should be passed in Input.Pods by the caller.
	MarkedForDeletion bool
	// VolumeLimits are the node's CSINode attach limits: CSI driver name ->
	// spec.drivers[].allocatable.count, the most volumes of that driver the
	// node can attach (for the EBS CSI driver, per instance type). A pod is
	// not placed on the node when its claims of a driver, with the distinct
	// claims of the node's Pods and of pods placed there before it, would
	// exceed that driver's count (karpenter: ExistingNode.CanAdd,
	// VolumeUsage.ExceedsLimits; karpenter-spec section 3). Claims are
	// resolved to drivers through Input.Volumes. A driver not listed (nil:
	// no CSINode) has no limit. New NodeClaims are never limited, as in
	// Karpenter.
	VolumeLimits map[string]int
}

// Options are the scheduler settings (karpenter-spec §10.3).
type Options struct {
	// PreferencePolicy is "Respect" (default) or "Ignore".
	PreferencePolicy string
	// MinValuesPolicy is "Strict" (default) or "BestEffort".
	MinValuesPolicy string
	// MaxInstanceTypes caps the candidate instance types listed per new
	// NodeClaim (cheapest first); 0 means 60.
	MaxInstanceTypes int
}

// Result is the plan. It is safe to marshal to JSON and is keyed by pod UID
// (namespace/name for a pod without one). Every pod of Input.Pods appears
// exactly once: in Placements, in one NewClaim's Pods, or in Unschedulable.
type Result struct {
	// NewClaims are the NodeClaims to launch, in NodePool order (weight
	// desc, then name desc), then in the order they were opened; their
	// names are "<nodepool>-<n>", skipping names of in-flight NodeClaims.
	NewClaims []NewClaim
	// Placements maps pod UID to the existing node (or in-flight NodeClaim)
	// name it was placed on.
	Placements map[string]string
	// Unschedulable maps pod UID to a precise, actionable reason: which
	// NodePools rejected the pod and why (in NodePool order), or why the
	// provisioner does not act on it at all.
	Unschedulable map[string]string
	// NoCompatibleInstanceTypes names, in NodePool order, the usable
	// NodePools whose requirements filter out every instance type with an
	// available offering, so they could launch nothing for any pod
	// (karpenter: the provisioner's NoCompatibleInstanceTypes event on the
	// NodePool; karpenter-spec.md section 3). Nil when there are none.
	NoCompatibleInstanceTypes []string `json:",omitempty"`
}

// NewClaim is one NodeClaim to launch and the pods it will host.
type NewClaim struct {
	// NodeClaim carries the template labels and annotations, taints,
	// requirements (including node.kubernetes.io/instance-type In [...] and
	// karpenter.sh/capacity-type In [...]), resources.requests (pods +
	// daemonset overhead + "pods" count), nodeClassRef, expireAfter and
	// terminationGracePeriod, as Karpenter would create it.
	NodeClaim v1.NodeClaim
	// NodePool and NodeClass name the owning pool and its EC2NodeClass.
	NodePool  string
	NodeClass string
	// InstanceTypes are the launch candidates, cheapest first; every one fits
	// all of Pods plus the daemonset overhead.
	InstanceTypes []string
	// Zones and CapacityTypes are those of the candidates' available
	// offerings that the claim's requirements allow, sorted.
	Zones         []string
	CapacityTypes []string
	// Expected is the offering CreateFleet would pick: the cheapest available
	// offering of the candidates that the claim's requirements allow.
	Expected ExpectedOffering
	// Pods are the UIDs of the pods placed on this claim, in placement
	// order.
	Pods []string
}

// ExpectedOffering is the offering a launch is expected to get.
type ExpectedOffering struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
}
