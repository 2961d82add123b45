// Package adapters fits nodewright's AWS packages to the ports that
// shared/provisioning declares: the DynamoDB store (shared/aws/ddbstore) as
// its NodeClaim, configuration, cluster-state, offering and batch stores;
// the EC2NodeClass resolver and launch templates (shared/aws/nodeclass) as
// its node-class resolver; CreateFleet (shared/aws/fleet) as its launcher
// and instance provider. It translates types and errors only: ddbstore's
// ErrNotFound, ErrAlreadyExists and *ConflictError become the provisioning
// sentinels under errors.Is, fleet's insufficient-capacity error becomes
// provisioning's, and so on. No decision is made here.
//
// The provisioner and garbage-collection Lambdas wire these; the clock
// (Now) is theirs, since the store takes `now` from its caller.
package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/scheduling"
	"github.com/nodewright/nodewright/shared/termination"
)

// Claims is the NodeClaim store of provisioning (claimStore,
// registrationStore, gcClaimStore) over ddbstore. With Metrics set it
// counts each NodeClaim it creates (karpenter_nodeclaims_created_total;
// not an adopted one, which Karpenter created) and each it deletes
// (karpenter_nodeclaims_terminated_total, read before the delete for its
// labels).
type Claims struct {
	Store   *ddbstore.Store
	Metrics *decisionmetrics.Recorder
}

// ListNodeClaims lists every NodeClaim, strongly consistent.
func (c Claims) ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error) {
	return c.Store.ListNodeClaims(ctx)
}

// GetNodeClaim reads one NodeClaim; ErrNotFound when absent.
func (c Claims) GetNodeClaim(ctx context.Context, name string) (v1.NodeClaim, error) {
	return c.Store.GetNodeClaim(ctx, name)
}

// CreateNodeClaim creates a NodeClaim; ErrAlreadyExists when the name is
// taken.
func (c Claims) CreateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error) {
	created, err := c.Store.PutNodeClaim(ctx, claim)
	if err == nil && created.Annotations[v1.AnnotationAdoptedFrom] == "" {
		reason := created.Annotations[termination.AnnotationReplacementReason]
		if reason == "" {
			reason = "provisioning"
		}
		c.Metrics.NodeClaimCreated(ctx, created, reason)
	}
	return created, err
}

// UpdateNodeClaim replaces a NodeClaim at its ResourceVersion; ErrConflict
// or ErrNotFound otherwise.
func (c Claims) UpdateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error) {
	return c.Store.UpdateNodeClaim(ctx, claim)
}

// DeleteNodeClaim deletes a NodeClaim at resourceVersion; ErrConflict or
// ErrNotFound otherwise.
func (c Claims) DeleteNodeClaim(ctx context.Context, name, resourceVersion string) error {
	return DeleteCounted(ctx, c.Store, c.Metrics, name, resourceVersion)
}

// DeleteCounted deletes NodeClaim name at resourceVersion from store and,
// when m is set and the delete succeeded, counts it terminated with the
// labels of the claim read just before (the one place both the
// provisioning and the disruption Lambdas delete through). Errors are the
// store's.
func DeleteCounted(ctx context.Context, store *ddbstore.Store, m *decisionmetrics.Recorder, name, resourceVersion string) error {
	var before v1.NodeClaim
	if m != nil {
		before, _ = store.GetNodeClaim(ctx, name) // labels only; the delete decides
	}
	err := store.DeleteNodeClaim(ctx, v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: resourceVersion}})
	if err == nil && m != nil && before.Name == name {
		m.NodeClaimTerminated(ctx, before)
	}
	return err
}

// NodeClaimByProviderID finds the NodeClaim of a node; ErrNotFound when
// none carries the providerID.
func (c Claims) NodeClaimByProviderID(ctx context.Context, providerID string) (v1.NodeClaim, error) {
	return c.Store.FindByProviderID(ctx, providerID)
}

// Config is provisioning's configSource over ddbstore.
type Config struct{ Store *ddbstore.Store }

// ClusterConfig returns the synced NodePools and EC2NodeClasses; none yet
// is two empty lists.
func (c Config) ClusterConfig(ctx context.Context) ([]v1.NodePool, []v1.EC2NodeClass, error) {
	snap, err := c.Store.GetConfig(ctx)
	if errors.Is(err, ddbstore.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return snap.NodePools, snap.NodeClasses, nil
}

// Offerings is provisioning's unavailable-offerings cache over ddbstore.
type Offerings struct{ Store *ddbstore.Store }

// UnavailableOfferings lists the offerings still unavailable at now.
func (o Offerings) UnavailableOfferings(ctx context.Context, now time.Time) ([]catalog.OfferingKey, error) {
	list, err := o.Store.ListUnavailable(ctx, now)
	if err != nil {
		return nil, err
	}
	return OfferingsOf(list), nil
}

// OfferingsOf turns the cache's entries into provisioning's offerings (an
// empty field matches every value).
func OfferingsOf(list []ddbstore.UnavailableOffering) []catalog.OfferingKey {
	out := make([]catalog.OfferingKey, len(list))
	for i, u := range list {
		out[i] = catalog.OfferingKey{CapacityType: u.CapacityType, InstanceType: u.InstanceType, Zone: u.Zone, ReservationID: u.ReservationID}
	}
	return out
}

// MarkUnavailable records an offering as unavailable until now+ttl.
func (o Offerings) MarkUnavailable(ctx context.Context, off catalog.OfferingKey, code string, now time.Time, ttl time.Duration) error {
	key := catalog.OfferingKey{CapacityType: off.CapacityType, InstanceType: off.InstanceType, Zone: off.Zone, ReservationID: off.ReservationID}
	return o.Store.MarkUnavailable(ctx, key, code, now, ttl)
}

// Batches is provisioning's batch store over ddbstore. Now stamps the
// results' deadline (ddbstore.BatchResultTTL).
type Batches struct {
	Store *ddbstore.Store
	Now   func() time.Time
}

// BatchResult returns the stored result of a batch.
func (b Batches) BatchResult(ctx context.Context, batchID string) (v1.PodBatchResult, bool, error) {
	return b.Store.BatchResult(ctx, batchID, b.Now())
}

// PutBatchResult stores a batch's result.
func (b Batches) PutBatchResult(ctx context.Context, r v1.PodBatchResult) error {
	return b.Store.PutBatchResult(ctx, r, b.Now())
}

// Cluster is provisioning's clusterSource: the forwarder's current
// snapshot. Without one (none yet, or the forwarder stopped posting for
// ddbstore.SnapshotTTL) the cluster state is empty: only in-flight and
// registered NodeClaims are known capacity.
type Cluster struct {
	Store *ddbstore.Store
	Now   func() time.Time
}

// ClusterState returns the snapshot's Nodes, bound pods, DaemonSets,
// storage objects and CSI attach limits.
func (c Cluster) ClusterState(ctx context.Context) (provisioning.ClusterState, error) {
	snap, err := c.Store.CurrentSnapshot(ctx, c.Now())
	if errors.Is(err, ddbstore.ErrNotFound) {
		return provisioning.ClusterState{}, nil
	}
	if err != nil {
		return provisioning.ClusterState{}, fmt.Errorf("read cluster snapshot: %w", err)
	}
	return ClusterStateOf(snap), nil
}

// ClusterStateOf converts a stored snapshot into the solver's objects.
func ClusterStateOf(snap ddbstore.Snapshot) provisioning.ClusterState {
	var st provisioning.ClusterState
	for _, n := range snap.Nodes {
		st.Nodes = append(st.Nodes, *n.Node())
	}
	for _, p := range snap.Pods {
		st.Pods = append(st.Pods, *p.Pod())
	}
	for _, ds := range snap.DaemonSets {
		st.DaemonSets = append(st.DaemonSets, ds.DaemonSet())
	}
	st.Volumes = scheduling.Volumes{Claims: snap.Volumes.Claims, PersistentVolumes: snap.Volumes.PersistentVolumes, StorageClasses: snap.Volumes.StorageClasses}
	st.VolumeLimits = v1.VolumeLimits(snap.CSINodes)
	return st
}
