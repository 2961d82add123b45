package adapters

import (
	"context"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// ProvisionerConfig is what NewProvisioner needs besides the clients.
type ProvisionerConfig struct {
	// KubernetesVersion is the minor version AMIs are resolved for ("1.34").
	KubernetesVersion string
	// Cluster holds what user data needs (name, endpoint, CA, service
	// CIDR, DNS).
	Cluster nodeclass.Cluster
	// Options are the provisioner's options (cluster, region, Spot price
	// ratio, launch parallelism).
	Options provisioning.ProvisionerOptions
	// OnResolved is NodeClasses.OnResolved (nil: nothing is called).
	OnResolved func(ctx context.Context, nc v1.EC2NodeClass)
}

// NewProvisioner wires provisioning.Provisioner over these adapters the
// one way both of its users (the provisioner Lambda for pending pods, the
// disrupttask Lambda for replacements) run it: NodeClaims, configuration,
// cluster state, offerings, batches and unavailable subnets in store,
// EC2NodeClasses resolved and launch templates ensured by resolver,
// launches through CreateFleet (fl), each request kept in store under its
// ClientToken (FleetRequests) so a retry replays it. now is the clock of the adapters
// that stamp records. Errors are NewProvisioner's (a missing port).
func NewProvisioner(store *ddbstore.Store, resolver *nodeclass.Resolver, fl *fleet.Client, cfg ProvisionerConfig, now func() time.Time) (*provisioning.Provisioner, error) {
	return provisioning.NewProvisioner(provisioning.ProvisionerPorts{
		Claims:    Claims{Store: store},
		Config:    Config{Store: store},
		NodeClass: NodeClasses{Resolver: resolver, KubernetesVersion: cfg.KubernetesVersion, OnResolved: cfg.OnResolved},
		Cluster:   Cluster{Store: store, Now: now},
		Offerings: Offerings{Store: store},
		Batches:   Batches{Store: store, Now: now},
		Launcher:  Launcher{Fleet: fl, Templates: resolver, Cluster: cfg.Cluster, Requests: FleetRequests{Store: store, Now: now}},
		Subnets:   Subnets{Store: store},
	}, cfg.Options)
}
