package provisioning

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
)

// AdoptedFromKarpenter is v1.AnnotationAdoptedFrom's value on the records
// of Karpenter's NodeClaims.
const AdoptedFromKarpenter = "karpenter"

// AdoptionRefusalReason says why a foreign NodeClaim is not adopted; each
// is also the reason of the Kubernetes Event that reports it.
type AdoptionRefusalReason string

// Adoption refusal reasons.
const (
	// AdoptionKarpenterActive: Karpenter's controller still runs; nothing
	// is adopted until it stops.
	AdoptionKarpenterActive AdoptionRefusalReason = "KarpenterActive"
	// AdoptionNodePoolNotFound: the NodeClaim's karpenter.sh/nodepool
	// names no NodePool of the synced configuration.
	AdoptionNodePoolNotFound AdoptionRefusalReason = "AdoptionNodePoolNotFound"
	// AdoptionNodeClassNotFound: its spec.nodeClassRef names no
	// EC2NodeClass of the synced configuration.
	AdoptionNodeClassNotFound AdoptionRefusalReason = "AdoptionNodeClassNotFound"
	// AdoptionNotRegistered: it has no instance yet, or no Node of its
	// providerID is in the cluster (Karpenter may have been stopped
	// mid-launch); it is looked at again on the next run.
	AdoptionNotRegistered AdoptionRefusalReason = "AdoptionNotRegistered"
	// AdoptionInstanceNotFound: no running instance tagged for the cluster
	// and its NodePool has its providerID's instance ID.
	AdoptionInstanceNotFound AdoptionRefusalReason = "AdoptionInstanceNotFound"
	// AdoptionDeleting: it is being deleted; its deletion is left to
	// whoever started it.
	AdoptionDeleting AdoptionRefusalReason = "AdoptionDeleting"
)

// AdoptionRefusal is a foreign NodeClaim left alone, and why.
type AdoptionRefusal struct {
	NodeClaim string                `json:"nodeClaim"`
	Node      string                `json:"node,omitempty"`
	Reason    AdoptionRefusalReason `json:"reason"`
	Message   string                `json:"message"`
}

// AdoptionInput is everything adoption decides on.
type AdoptionInput struct {
	// Cluster is the EKS cluster name.
	Cluster string
	// Foreign are the karpenter.sh/v1 NodeClaims in the cluster that are
	// not nodewright's mirrors (v1.ClusterSnapshot.ForeignNodeClaims).
	Foreign []v1.NodeClaim
	// KarpenterActive, when not empty, says why Karpenter's controller is
	// believed to run: nothing is adopted.
	KarpenterActive string
	// Stored are the NodeClaims nodewright holds.
	Stored []v1.NodeClaim
	// NodePools and NodeClasses are the synced configuration.
	NodePools   []v1.NodePool
	NodeClasses []v1.EC2NodeClass
	// Nodes are the cluster's Nodes.
	Nodes []corev1.Node
	// Instances are the cluster's instances (listed by its launch tags).
	Instances []launch.Instance
	// Now is when adoption decides: the lastTransitionTime of the adopted
	// records' Adopted condition.
	Now time.Time
}

// PlanAdoption decides which foreign NodeClaims nodewright records as its
// own: a NodeClaim Karpenter launched and registered (providerID, a Node of
// that providerID in the cluster, a running or pending instance of that ID
// carrying kubernetes.io/cluster/<cluster>=owned,
// eks:eks-cluster-name=<cluster> and karpenter.sh/nodepool=<its pool>), not
// being deleted, whose NodePool and EC2NodeClass are in the synced
// configuration, and that no stored NodeClaim already names (by name
// or providerID). The adopted record is the NodeClaim as Karpenter wrote it:
// name, creation time, labels (capacity type, instance type, zone, ...),
// annotations (the nodepool and ec2nodeclass hashes with their versions,
// which static drift compares), spec and status (providerID, imageID,
// nodeName, capacity, allocatable, conditions), plus v1.AnnotationAdoptedFrom
// and Karpenter's tagging annotations (the instance is already tagged:
// adoption never retags), the condition Adopted True (reason Adopted, at
// in.Now), and its UID (the object stays in the cluster as
// the record's mirror). Finalizers, owner references and resource version
// are not carried: the record is nodewright's. Every other foreign
// NodeClaim is refused with a reason and left alone; with
// in.KarpenterActive set, all are refused. Adopt and refusals are sorted by
// name. It reads nothing but in.
func PlanAdoption(in AdoptionInput) (adopt []v1.NodeClaim, refused []AdoptionRefusal) {
	if len(in.Foreign) == 0 {
		return nil, nil
	}
	storedName := map[string]bool{}
	storedProvider := map[string]bool{}
	for i := range in.Stored {
		storedName[in.Stored[i].Name] = true
		if p := in.Stored[i].Status.ProviderID; p != "" {
			storedProvider[p] = true
		}
	}
	pools := map[string]bool{}
	for i := range in.NodePools {
		pools[in.NodePools[i].Name] = true
	}
	classes := map[string]bool{}
	for i := range in.NodeClasses {
		classes[in.NodeClasses[i].Name] = true
	}
	nodeByProvider := map[string]string{}
	for i := range in.Nodes {
		if p := in.Nodes[i].Spec.ProviderID; p != "" {
			nodeByProvider[p] = in.Nodes[i].Name
		}
	}
	instances := map[string]*launch.Instance{}
	for i := range in.Instances {
		instances[in.Instances[i].ID] = &in.Instances[i]
	}
	for i := range in.Foreign {
		c := &in.Foreign[i]
		if storedName[c.Name] || (c.Status.ProviderID != "" && storedProvider[c.Status.ProviderID]) {
			continue
		}
		pool := c.Labels[v1.LabelNodePool]
		refuse := func(reason AdoptionRefusalReason, format string, args ...any) {
			refused = append(refused, AdoptionRefusal{NodeClaim: c.Name, Node: c.Status.NodeName, Reason: reason, Message: fmt.Sprintf(format, args...)})
		}
		_, id, _ := v1.ParseProviderID(c.Status.ProviderID)
		inst := instances[id]
		switch {
		case in.KarpenterActive != "":
			refuse(AdoptionKarpenterActive, "not adopted: Karpenter's controller is active (%s); stop it, and nodewright adopts this node", in.KarpenterActive)
		case c.DeletionTimestamp != nil:
			refuse(AdoptionDeleting, "not adopted: it is being deleted")
		case !pools[pool]:
			refuse(AdoptionNodePoolNotFound, "not adopted: its NodePool %q does not exist; the node is left alone", pool)
		case c.Spec.NodeClassRef == nil || !classes[c.Spec.NodeClassRef.Name]:
			refuse(AdoptionNodeClassNotFound, "not adopted: its EC2NodeClass %q does not exist; the node is left alone", nodeClassName(c))
		case id == "" || nodeByProvider[c.Status.ProviderID] == "":
			refuse(AdoptionNotRegistered, "not adopted: it has no registered Node (providerID %q)", c.Status.ProviderID)
		case inst == nil || (inst.State != "running" && inst.State != "pending") || !terminableWhenAdopted(inst.Tags, in.Cluster, pool):
			refuse(AdoptionInstanceNotFound, "not adopted: no running instance %s tagged %s%s=%s, %s=%s and %s=%s", id,
				v1.TagKeyClusterPrefix, in.Cluster, tagValueOwned, v1.TagKeyEKSClusterName, in.Cluster, v1.TagKeyNodePool, pool)
		default:
			adopt = append(adopt, adoptedRecord(c, nodeByProvider[c.Status.ProviderID], in.Now))
		}
	}
	sort.Slice(adopt, func(i, j int) bool { return adopt[i].Name < adopt[j].Name })
	sort.Slice(refused, func(i, j int) bool { return refused[i].NodeClaim < refused[j].NodeClaim })
	return adopt, refused
}

// tagValueOwned is the value of the cluster tag v1.TagKeyClusterPrefix +
// cluster.
const tagValueOwned = "owned"

// terminableWhenAdopted reports whether an instance's tags are those the
// drain-and-replace role needs to terminate it (infra's IAM statement
// TerminateClusterInstances: kubernetes.io/cluster/<cluster>=owned and a
// karpenter.sh/nodepool tag), here that of its NodePool, plus
// eks:eks-cluster-name=<cluster>. Adoption never retags, so a node adopted
// without them would be drained and then refused termination.
func terminableWhenAdopted(tags map[string]string, cluster, pool string) bool {
	return tags[v1.TagKeyClusterPrefix+cluster] == tagValueOwned && tags[v1.TagKeyEKSClusterName] == cluster && tags[v1.TagKeyNodePool] == pool
}

func nodeClassName(c *v1.NodeClaim) string {
	if c.Spec.NodeClassRef == nil {
		return ""
	}
	return c.Spec.NodeClassRef.Name
}

// ReasonAdopted is the reason of the Adopted condition (True) on an adopted
// node's record and, through its mirror, on its Karpenter NodeClaim.
const ReasonAdopted = "Adopted"

// adoptedRecord is the record PlanAdoption stores for c, whose Node is
// node, decided at now: c with condition Adopted True (replacing the False
// one a refusal set before).
func adoptedRecord(c *v1.NodeClaim, node string, now time.Time) v1.NodeClaim {
	out := v1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.Group + "/v1", Kind: v1.KindNodeClaim},
		ObjectMeta: metav1.ObjectMeta{
			Name:              c.Name,
			UID:               c.UID,
			CreationTimestamp: c.CreationTimestamp,
			Labels:            maps.Clone(c.Labels),
			Annotations:       maps.Clone(c.Annotations),
		},
		// Spec and status share their slices and maps with c, which
		// PlanAdoption's callers do not change.
		Spec:   c.Spec,
		Status: c.Status,
	}
	out.Status.Conditions = v1.SetCondition(c.Status.Conditions, v1.ConditionTypeAdopted, metav1.ConditionTrue, ReasonAdopted,
		fmt.Sprintf("adopted from Karpenter: a NodeClaim of NodePool %q; nodewright disrupts it within the NodePool's budgets", c.Labels[v1.LabelNodePool]),
		c.Generation, now)
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[v1.AnnotationAdoptedFrom] = AdoptedFromKarpenter
	out.Annotations[v1.AnnotationInstanceTagged] = "true"
	out.Annotations[v1.AnnotationClusterNameTaggedCompatible] = "true"
	if out.Status.NodeName == "" {
		out.Status.NodeName = node
	}
	return out
}

// Adopted reports whether claim is a record nodewright adopted
// (v1.AnnotationAdoptedFrom) rather than launched.
func Adopted(claim *v1.NodeClaim) bool { return claim.Annotations[v1.AnnotationAdoptedFrom] != "" }

// MaxAdoptionSnapshotAge is the oldest snapshot Adopt adopts from. A
// snapshot may be read for up to its TTL (an hour), but adoption acts on
// what the cluster held when it was taken: a NodeClaim Karpenter has since
// deleted, a Node since drained or a Karpenter since restarted would be
// adopted from the past. The forwarder re-posts a snapshot that carries
// foreign NodeClaims at least every minute (forward's
// ForeignSnapshotMaxAge), so a live forwarder's is always younger.
const MaxAdoptionSnapshotAge = 2 * time.Minute

// AdoptionReport is what the forwarder last reported for adoption: the
// foreign NodeClaims and Nodes of its current snapshot, taken at TakenAt.
type AdoptionReport struct {
	Foreign         []v1.NodeClaim
	KarpenterActive string
	Nodes           []corev1.Node
	TakenAt         time.Time
}

// adoptionSource reads the forwarder's report (the current cluster
// snapshot in production); no snapshot is an empty report.
type adoptionSource interface {
	AdoptionReport(ctx context.Context) (AdoptionReport, error)
}

// Adopter records Karpenter's NodeClaims as nodewright's. It holds no
// state and is safe for concurrent use.
type Adopter struct {
	cluster   string
	source    adoptionSource
	claims    claimStore
	config    configSource
	instances instanceProvider
}

// NewAdopter returns an Adopter for cluster, or an error naming a missing
// argument.
func NewAdopter(cluster string, source adoptionSource, claims claimStore, config configSource, instances instanceProvider) (*Adopter, error) {
	switch {
	case cluster == "":
		return nil, fmt.Errorf("adopter: cluster: %w", errMissing)
	case source == nil:
		return nil, fmt.Errorf("adopter: source: %w", errMissing)
	case claims == nil:
		return nil, fmt.Errorf("adopter: claims: %w", errMissing)
	case config == nil:
		return nil, fmt.Errorf("adopter: config: %w", errMissing)
	case instances == nil:
		return nil, fmt.Errorf("adopter: instances: %w", errMissing)
	}
	return &Adopter{cluster: cluster, source: source, claims: claims, config: config, instances: instances}, nil
}

// AdoptionResult is what one Adopt did.
type AdoptionResult struct {
	// Adopted are the NodeClaims recorded, by name.
	Adopted []string `json:"adopted,omitempty"`
	// Refused are the foreign NodeClaims left alone.
	Refused []AdoptionRefusal `json:"refused,omitempty"`
	// Skipped, when set, says why nothing was looked at (a stale report).
	Skipped string `json:"skipped,omitempty"`
}

// Adopt reads the forwarder's report, then the instances, NodeClaims and
// configuration, decides with PlanAdoption and creates each adopted record
// (a name taken meanwhile counts as done: the next run sees it stored). A
// report taken more than MaxAdoptionSnapshotAge before now adopts nothing
// (Skipped says so). It changes nothing in the cluster or in EC2. It
// returns what it did and, when a read failed (nothing is adopted then) or
// a create failed, an error.
func (a *Adopter) Adopt(ctx context.Context, now time.Time) (AdoptionResult, error) {
	report, err := a.source.AdoptionReport(ctx)
	if err != nil {
		return AdoptionResult{}, fmt.Errorf("adopt: read report: %w", err)
	}
	if len(report.Foreign) == 0 {
		return AdoptionResult{}, nil
	}
	if age := now.Sub(report.TakenAt); age > MaxAdoptionSnapshotAge {
		return AdoptionResult{Skipped: fmt.Sprintf("the snapshot was taken %s ago, more than %s: nothing adopted from it",
			age.Round(time.Second), MaxAdoptionSnapshotAge)}, nil
	}
	instances, err := a.instances.ListInstances(ctx)
	if err != nil {
		return AdoptionResult{}, fmt.Errorf("adopt: list instances: %w", err)
	}
	stored, err := a.claims.ListNodeClaims(ctx)
	if err != nil {
		return AdoptionResult{}, fmt.Errorf("adopt: list nodeclaims: %w", err)
	}
	pools, classes, err := a.config.ClusterConfig(ctx)
	if err != nil {
		return AdoptionResult{}, fmt.Errorf("adopt: read cluster config: %w", err)
	}
	adopt, refused := PlanAdoption(AdoptionInput{
		Cluster: a.cluster, Foreign: report.Foreign, KarpenterActive: report.KarpenterActive,
		Stored: stored, NodePools: pools, NodeClasses: classes, Nodes: report.Nodes, Instances: instances, Now: now,
	})
	res := AdoptionResult{Refused: refused}
	var errs []error
	for _, c := range adopt {
		if _, err := a.claims.CreateNodeClaim(ctx, c); err != nil && !errors.Is(err, v1.ErrAlreadyExists) {
			errs = append(errs, fmt.Errorf("adopt nodeclaim %s: %w", c.Name, err))
			continue
		}
		res.Adopted = append(res.Adopted, c.Name)
	}
	return res, errors.Join(errs...)
}
