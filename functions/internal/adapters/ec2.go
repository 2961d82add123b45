package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/aws/iamprofile"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// Condition reasons for an EC2NodeClass that does not resolve (Karpenter's
// EC2NodeClass condition reasons).
const (
	reasonSubnetsNotFound        = "SubnetsNotFound"
	reasonSecurityGroupsNotFound = "SecurityGroupsNotFound"
	reasonAMINotFound            = "AMINotFound"
)

// NodeClasses is provisioning's node-class resolver: it resolves an
// EC2NodeClass's subnets, security groups and AMIs (aliases through SSM for
// KubernetesVersion) with nodeclass.Resolver and fills its status.
//
// Instance profile: spec.instanceProfile when set. For spec.role, the
// profile Profiles ensures for the class and role (iamprofile.Client.Ensure,
// as Karpenter creates one per class); a role the deployment does not allow,
// or a profile IAM refuses, makes the class Ready=False with
// v1.ConditionReasonRoleNotAllowed or v1.ConditionReasonInstanceProfileFailed
// and a message naming spec.role, so it never launches. Without Profiles
// (unit tests of other steps), the profile named like the role.
type NodeClasses struct {
	Resolver *nodeclass.Resolver
	// Profiles ensures spec.role's instance profile (*iamprofile.Client);
	// every Lambda wires it.
	Profiles profileEnsurer
	// KubernetesVersion is the cluster's minor version, e.g. "1.33".
	KubernetesVersion string
	// OnResolved, when set, is called with each class ResolveNodeClass
	// returns without error (Ready True or False), e.g. to record its
	// status for the forwarder.
	OnResolved func(ctx context.Context, nc v1.EC2NodeClass)
}

// ResolveNodeClass returns nc with its status resolved and Ready=True, or
// Ready=False with Karpenter's reason when nothing matches a selector or
// the AMI alias is unsupported on KubernetesVersion (UnsupportedAlias).
// A spec.placementGroupSelector that matches no available group leaves
// the rest of the status resolved (instance profile included) and makes
// Ready False with v1.ConditionReasonPlacementGroupNotFound and the
// resolver's message, which names spec.placementGroupSelector; such a
// class never launches. Failed AWS calls are errors.
func (n NodeClasses) ResolveNodeClass(ctx context.Context, nc v1.EC2NodeClass) (provisioning.ResolvedNodeClass, error) {
	res, err := n.Resolver.Resolve(ctx, &nc, n.KubernetesVersion)
	var placementErr error
	if errors.Is(err, nodeclass.ErrPlacementGroupNotFound) {
		placementErr, err = err, nil
	}
	if reason := notFoundReason(err); reason != "" {
		nc.Status.Conditions = []metav1.Condition{{
			Type: v1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: reason, Message: err.Error(), ObservedGeneration: nc.Generation,
		}}
		n.resolved(ctx, nc)
		return provisioning.ResolvedNodeClass{NodeClass: nc}, nil
	}
	if err != nil {
		return provisioning.ResolvedNodeClass{}, fmt.Errorf("resolve EC2NodeClass %s: %w", nc.Name, err)
	}
	res.ApplyTo(&nc.Status)
	switch {
	case nc.Spec.InstanceProfile != nil:
		nc.Status.InstanceProfile = *nc.Spec.InstanceProfile
	case n.Profiles == nil:
		nc.Status.InstanceProfile = nc.Spec.Role
	default:
		name, err := n.Profiles.Ensure(ctx, nc)
		if reason := profileReason(err); reason != "" {
			nc.Status.InstanceProfile = ""
			nc.Status.Conditions = []metav1.Condition{{
				Type: v1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: reason, Message: err.Error(), ObservedGeneration: nc.Generation,
			}}
			n.resolved(ctx, nc)
			return provisioning.ResolvedNodeClass{NodeClass: nc}, nil
		}
		if err != nil {
			return provisioning.ResolvedNodeClass{}, fmt.Errorf("resolve EC2NodeClass %s: instance profile: %w", nc.Name, err)
		}
		nc.Status.InstanceProfile = name
	}
	nc.Status.Conditions = []metav1.Condition{{
		Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady, ObservedGeneration: nc.Generation,
	}}
	if placementErr != nil {
		nc.Status.Conditions[0].Status, nc.Status.Conditions[0].Reason, nc.Status.Conditions[0].Message =
			metav1.ConditionFalse, v1.ConditionReasonPlacementGroupNotFound, placementErr.Error()
	}
	n.resolved(ctx, nc)
	return provisioning.ResolvedNodeClass{NodeClass: nc, Subnets: res.Subnets, ReservationCapacity: res.ReservationCapacity}, nil
}

func (n NodeClasses) resolved(ctx context.Context, nc v1.EC2NodeClass) {
	if n.OnResolved != nil {
		n.OnResolved(ctx, nc)
	}
}

// profileEnsurer ensures an EC2NodeClass's instance profile for its
// spec.role (*iamprofile.Client).
type profileEnsurer interface {
	Ensure(ctx context.Context, nc v1.EC2NodeClass) (string, error)
}

// profileReason is the Ready=False reason of an Ensure failure the class
// reports rather than retries: a role not allowed, a role or profile IAM
// does not give nodewright, or a permission IAM denies. Throttling and
// other failures are "" (the resolution fails and is retried).
func profileReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, iamprofile.ErrRoleNotAllowed):
		return v1.ConditionReasonRoleNotAllowed
	case errors.Is(err, iamprofile.ErrRoleNotFound), errors.Is(err, iamprofile.ErrNotOwned), awserr.Classify(err) == awserr.Unauthorized:
		return v1.ConditionReasonInstanceProfileFailed
	}
	return ""
}

func notFoundReason(err error) string {
	switch {
	case errors.Is(err, nodeclass.ErrSubnetsNotFound):
		return reasonSubnetsNotFound
	case errors.Is(err, nodeclass.ErrSecurityGroupsNotFound):
		return reasonSecurityGroupsNotFound
	case errors.Is(err, nodeclass.ErrAMIsNotFound):
		return reasonAMINotFound
	case errors.Is(err, amifamily.ErrUnsupportedAlias):
		return v1.ConditionReasonUnsupportedAlias
	}
	return ""
}

// Launcher is provisioning's launcher: one instant CreateFleet per NodeClaim
// (fleet.Client.Launch, ClientToken from the NodeClaim's UID) with the
// launch templates nodeclass.Resolver ensures for the cluster.
type Launcher struct {
	Fleet     *fleet.Client
	Templates *nodeclass.Resolver
	// Cluster holds what user data needs (name, endpoint, CA, service
	// CIDR, DNS).
	Cluster nodeclass.Cluster
	// Requests keeps each CreateFleet request by ClientToken, so a retry
	// sends the first one again (fleet.Request.Requests); nil: none kept.
	Requests fleet.RequestLog
}

// FleetRequestTTL is how long a CreateFleet request stays stored for its
// retries: far longer than a NodeClaim stays unlaunched before garbage
// collection removes it.
const FleetRequestTTL = 24 * time.Hour

// FleetRequests is fleet.RequestLog over ddbstore payloads, keyed
// "fleet-request/<ClientToken>": the first request stored under a token is
// kept (ddbstore.Store.PutPayloadOnce).
type FleetRequests struct {
	Store *ddbstore.Store
	Now   func() time.Time
}

// RecordRequest stores body under token unless one is stored, and returns
// the stored one.
func (r FleetRequests) RecordRequest(ctx context.Context, token string, body []byte) ([]byte, error) {
	return r.Store.PutPayloadOnce(ctx, "fleet-request/"+token, body, r.Now(), FleetRequestTTL)
}

// Launch launches req.NodeClaim. An insufficient-capacity outcome is a
// *launch.InsufficientCapacityError listing the offerings EC2
// refused. An instance launched into a capacity reservation lowers that
// reservation's available count in Templates until its next read
// (nodeclass.Resolver.ReservationLaunched).
func (l Launcher) Launch(ctx context.Context, req provisioning.LaunchRequest) (provisioning.LaunchResult, error) {
	claim, class := req.NodeClaim, req.NodeClass
	templates := fleet.TemplateFunc(func(ctx context.Context, tr fleet.TemplateRequest) ([]launch.Template, error) {
		return l.Templates.EnsureLaunchTemplates(ctx, nodeclass.TemplateRequest{
			Cluster: l.Cluster, NodeClass: &class, NodeClaim: &claim,
			CapacityType: tr.CapacityType, ReservationID: tr.ReservationID, ReservationType: tr.ReservationType,
			ReservationInterruptible: tr.ReservationInterruptible, InstanceTypes: tr.InstanceTypes, Tenancy: tr.Tenancy,
		})
	})
	res, err := l.Fleet.Launch(ctx, fleet.Request{
		ClusterName: l.Cluster.Name, NodeClaim: &claim, NodeClass: &class,
		InstanceTypes: req.InstanceTypes, Subnets: req.Subnets, Templates: templates, Requests: l.Requests,
	})
	var ice *launch.InsufficientCapacityError
	if errors.As(err, &ice) {
		return provisioning.LaunchResult{}, ice
	}
	if err != nil {
		return provisioning.LaunchResult{}, err
	}
	// The next round's reserved offerings count this instance before the
	// next DescribeCapacityReservations read does.
	l.Templates.ReservationLaunched(res.Instance.ReservationID, res.Instance.ID)
	return provisioning.LaunchResult{Instance: res.Instance, Unavailable: res.Unavailable}, nil
}

// Instances is provisioning's instance provider for garbage collection:
// the cluster's tagged instances (fleet.Client.List) and termination.
type Instances struct {
	Fleet   *fleet.Client
	Cluster string
}

// ListInstances lists the cluster's instances in any state but terminated.
func (in Instances) ListInstances(ctx context.Context) ([]launch.Instance, error) {
	return in.Fleet.List(ctx, in.Cluster)
}

// TerminateInstance terminates one instance; an instance already gone is
// not an error (fleet.Client.Terminate is idempotent).
func (in Instances) TerminateInstance(ctx context.Context, id string) error {
	return in.Fleet.Terminate(ctx, id)
}

// NewInstanceProfiles returns the client that ensures and collects the
// cluster's instance profiles over api (iamprofile.New), or nil when api
// is nil (no IAM wired).
func NewInstanceProfiles(api iamprofile.API, cluster, region string, roles launch.NodeRoles) *iamprofile.Client {
	if api == nil {
		return nil
	}
	return iamprofile.New(api, cluster, region, roles)
}

// WithProfiles returns n ensuring instance profiles with p; a nil p leaves
// n without.
func (n NodeClasses) WithProfiles(p *iamprofile.Client) NodeClasses {
	if p != nil {
		n.Profiles = p
	}
	return n
}

// AuthVerdictTTL is how long a class's stored authorization verdict
// outlives its check: far beyond provisioning.AuthCheckTTL, so the last
// verdict stands through a run of inconclusive checks.
const AuthVerdictTTL = 24 * time.Hour

// AuthVerdicts is provisioning.AuthVerdictStore over ddbstore payloads,
// keyed ddbstore.PayloadNodeClassAuth + class UID (JSON provisioning.AuthVerdict).
type AuthVerdicts struct {
	Store *ddbstore.Store
	Now   func() time.Time
}

var _ provisioning.AuthVerdictStore = AuthVerdicts{}

// AuthVerdict returns uid's stored verdict, nil when none is stored.
func (a AuthVerdicts) AuthVerdict(ctx context.Context, uid string) (*provisioning.AuthVerdict, error) {
	data, err := a.Store.GetPayload(ctx, ddbstore.PayloadNodeClassAuth+uid, a.Now())
	if errors.Is(err, ddbstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v provisioning.AuthVerdict
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("auth verdict %s: %w", uid, err)
	}
	return &v, nil
}

// PutAuthVerdict stores uid's verdict for AuthVerdictTTL.
func (a AuthVerdicts) PutAuthVerdict(ctx context.Context, uid string, v provisioning.AuthVerdict) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("auth verdict %s: %w", uid, err)
	}
	return a.Store.PutPayload(ctx, ddbstore.PayloadNodeClassAuth+uid, data, a.Now(), AuthVerdictTTL)
}
