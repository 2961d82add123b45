package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// Subnets is provisioning's unavailable-subnets cache over ddbstore.
type Subnets struct{ Store *ddbstore.Store }

// UnavailableSubnets lists the IDs of the subnets still unavailable at now.
func (s Subnets) UnavailableSubnets(ctx context.Context, now time.Time) ([]string, error) {
	list, err := s.Store.ListUnavailableSubnets(ctx, now)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, u := range list {
		out[i] = u.SubnetID
	}
	return out, nil
}

// MarkSubnetUnavailable records a subnet as unavailable until now+ttl.
func (s Subnets) MarkSubnetUnavailable(ctx context.Context, subnetID, code string, now time.Time, ttl time.Duration) error {
	return s.Store.MarkSubnetUnavailable(ctx, subnetID, code, now, ttl)
}

// InstanceTags is provisioning's instance tagger over fleet.Tagger: an
// instance that is gone matches v1.ErrNotFound.
type InstanceTags struct{ Tagger *fleet.Tagger }

// InstanceTags returns the instance's tags.
func (t InstanceTags) InstanceTags(ctx context.Context, id string) (map[string]string, error) {
	return t.Tagger.InstanceTags(ctx, id)
}

// AddTags adds tags to the instance with CreateTags.
func (t InstanceTags) AddTags(ctx context.Context, id string, tags map[string]string) error {
	return t.Tagger.AddTags(ctx, id, tags)
}

// LaunchTemplates is provisioning's launch-template store over
// nodeclass.Templates for one cluster.
type LaunchTemplates struct {
	Templates *nodeclass.Templates
	Cluster   string
}

// ListLaunchTemplates lists the cluster's launch templates.
func (l LaunchTemplates) ListLaunchTemplates(ctx context.Context) ([]launch.ClusterTemplate, error) {
	return l.Templates.List(ctx, l.Cluster)
}

// DeleteLaunchTemplate deletes one launch template; one already gone is
// not an error.
func (l LaunchTemplates) DeleteLaunchTemplate(ctx context.Context, id string) error {
	return l.Templates.Delete(ctx, id)
}

// Adoption is provisioning's adoption source: the foreign NodeClaims and
// Nodes of the forwarder's current snapshot. Without a current snapshot the
// report is empty (nothing is adopted).
type Adoption struct {
	Store *ddbstore.Store
	Now   func() time.Time
}

// AdoptionReport reads the current snapshot.
func (a Adoption) AdoptionReport(ctx context.Context) (provisioning.AdoptionReport, error) {
	snap, err := a.Store.CurrentSnapshot(ctx, a.Now())
	if errors.Is(err, ddbstore.ErrNotFound) {
		return provisioning.AdoptionReport{}, nil
	}
	if err != nil {
		return provisioning.AdoptionReport{}, fmt.Errorf("read cluster snapshot: %w", err)
	}
	return provisioning.AdoptionReport{
		Foreign: snap.ForeignNodeClaims, KarpenterActive: snap.KarpenterActive, Nodes: ClusterStateOf(snap).Nodes, TakenAt: snap.CreatedAt,
	}, nil
}
