package adapters

import (
	"context"
	"errors"
	"time"

	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/iamprofile"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/launch"
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
	// OnResolved is called with each EC2NodeClass a round resolved, its
	// launch state included (EC2DataLive), e.g. to record its status (nil:
	// nothing is called).
	OnResolved func(ctx context.Context, nc v1.EC2NodeClass)
	// Metrics counts the NodeClaims created and deleted and measures each
	// launch (karpenter_cloudprovider_*, controller Controller); nil
	// records nothing.
	Metrics *decisionmetrics.Recorder
	// Controller names the caller in karpenter_cloudprovider_* labels
	// ("provisioner", "disruption").
	Controller string
	// Profiles ensures spec.role's instance profiles (NodeClasses.Profiles);
	// nil: the profile named like the role.
	Profiles *iamprofile.Client
	// Auth computes each class's ValidationSucceeded from dry-run
	// authorization checks (provisioning.AuthChecker); nil makes none.
	Auth *provisioning.AuthChecker
}

// NewProvisioner wires provisioning.Provisioner over these adapters the
// one way both of its users (the provisioner Lambda for pending pods, the
// disrupttask Lambda for replacements) run it: NodeClaims, configuration,
// cluster state, offerings, batches, unavailable subnets and the region's
// live EC2 data in store,
// EC2NodeClasses resolved and launch templates ensured by resolver,
// launches through CreateFleet (fl), each request kept in store under its
// ClientToken (FleetRequests) so a retry replays it. now is the clock of the adapters
// that stamp records. Errors are NewProvisioner's (a missing port).
func NewProvisioner(store *ddbstore.Store, resolver *nodeclass.Resolver, fl *fleet.Client, cfg ProvisionerConfig, now func() time.Time) (*provisioning.Provisioner, error) {
	var launcher launcherPort = Launcher{Fleet: fl, Templates: resolver, Cluster: cfg.Cluster, Requests: FleetRequests{Store: store, Now: now}}
	if cfg.Metrics != nil {
		launcher = measuredLauncher{next: launcher, m: cfg.Metrics, controller: cfg.Controller, now: now}
	}
	classes := NodeClasses{Resolver: resolver, KubernetesVersion: cfg.KubernetesVersion}.WithProfiles(cfg.Profiles)
	return provisioning.NewProvisioner(provisioning.ProvisionerPorts{
		Claims:      Claims{Store: store, Metrics: cfg.Metrics},
		Config:      Config{Store: store},
		NodeClass:   classes,
		Cluster:     Cluster{Store: store, Now: now},
		Offerings:   Offerings{Store: store},
		Batches:     Batches{Store: store, Now: now},
		Launcher:    launcher,
		Subnets:     Subnets{Store: store},
		EC2Data:     EC2Data{Store: store, Region: cfg.Options.Region},
		ClassStatus: classStatus(cfg.OnResolved),
		Auth:        cfg.Auth,
	}, cfg.Options)
}

// classStatus is provisioning's ClassStatus port over f (nil: none), so a
// class is recorded after its launch state resolved, EC2DataLive included.
func classStatus(f func(ctx context.Context, nc v1.EC2NodeClass)) classStatusFunc {
	return classStatusFunc(f)
}

// classStatusFunc records a resolved class through a function.
type classStatusFunc func(ctx context.Context, nc v1.EC2NodeClass)

// RecordClassStatus calls f when set.
func (f classStatusFunc) RecordClassStatus(ctx context.Context, nc v1.EC2NodeClass) {
	if f != nil {
		f(ctx, nc)
	}
}

// launcherPort is provisioning's launcher.
type launcherPort interface {
	Launch(ctx context.Context, req provisioning.LaunchRequest) (provisioning.LaunchResult, error)
}

// measuredLauncher measures each launch as Karpenter's cloud-provider
// decorator does (karpenter_cloudprovider_duration_seconds{method="Create"},
// karpenter_cloudprovider_errors_total with the error's kind).
type measuredLauncher struct {
	next       launcherPort
	m          *decisionmetrics.Recorder
	controller string
	now        func() time.Time
}

func (l measuredLauncher) Launch(ctx context.Context, req provisioning.LaunchRequest) (provisioning.LaunchResult, error) {
	start := l.now()
	res, err := l.next.Launch(ctx, req)
	l.m.CloudProviderCall(ctx, l.controller, "Create", l.now().Sub(start), launchErrorName(err))
	return res, err
}

// launchErrorName is the error label of a failed launch: Karpenter's error
// type names where one applies, else "LaunchError"; "" for success.
func launchErrorName(err error) string {
	var ice *launch.InsufficientCapacityError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ice):
		return "InsufficientCapacityError"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "Canceled"
	}
	return "LaunchError"
}
