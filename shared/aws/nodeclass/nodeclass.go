// Package nodeclass resolves an EC2NodeClass against EC2 and SSM: its
// subnets, security groups, AMIs, capacity reservations and placement group (karpenter-spec §4.1 "Discovery query
// shapes", §9.1), and the launch templates a launch needs (§4 step 6, §9.3).
// It declares the narrow EC2API and SSMAPI it calls; *ec2.Client and
// *ssm.Client satisfy them. It keeps nothing between calls except capacity
// reservations and placement groups, read again once a minute old
// (ReservationRefreshInterval, PlacementGroupRefreshInterval); every other
// call asks AWS again.
package nodeclass

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
)

// EC2API is the subset of the EC2 client this package calls.
type EC2API interface {
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(context.Context, *ec2.DescribeSecurityGroupsInput, ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
}

// SSMAPI is the subset of the SSM client this package calls.
type SSMAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

var (
	_ EC2API = (*ec2.Client)(nil)
	_ SSMAPI = (*ssm.Client)(nil)
)

// Resolution failures, matching Karpenter's EC2NodeClass condition reasons
// (SubnetsNotFound, SecurityGroupsNotFound, AMINotFound,
// PlacementGroupNotFound).
var (
	ErrSubnetsNotFound        = errors.New("no subnets found")
	ErrSecurityGroupsNotFound = errors.New("no security groups found")
	ErrAMIsNotFound           = errors.New("no AMIs found")
	ErrPlacementGroupNotFound = errors.New("no available placement group found")
)

// Resolver resolves node classes. It is safe for concurrent use.
type Resolver struct {
	ec2 EC2API
	ssm SSMAPI
	now func() time.Time
	// reservations caches CapacityReservations per selector terms,
	// placementGroups PlacementGroup per selector.
	mu              sync.Mutex
	reservations    map[string]reservationRead
	placementGroups map[string]placementGroupRead
	// launches are this process's launches into capacity reservations by
	// instance ID (ReservationLaunched).
	launches map[string]reservationLaunch
}

// New returns a Resolver. now is the clock that decides whether an AMI's
// deprecation time has passed; nil means time.Now.
func New(ec2API EC2API, ssmAPI SSMAPI, now func() time.Time) *Resolver {
	if now == nil {
		now = time.Now
	}
	return &Resolver{ec2: ec2API, ssm: ssmAPI, now: now}
}

// Resolved is what a node class resolves to: the content of its status.
type Resolved struct {
	// Subnets are sorted by free addresses, most first, then by ID.
	Subnets []launch.Subnet
	// SecurityGroups are sorted by ID.
	SecurityGroups []v1.SecurityGroup
	// AMIs are sorted newest first (see AMIs).
	AMIs []v1.AMI
	// CapacityReservations are the selected active reservations, sorted
	// by ID (see CapacityReservations); ReservationCapacity maps each
	// one's ID to its AvailableInstanceCount.
	CapacityReservations []v1.CapacityReservation
	ReservationCapacity  map[string]int
	// PlacementGroup is spec.placementGroupSelector's group (nil without
	// a selector or when none is available; see PlacementGroup).
	PlacementGroup *v1.PlacementGroup
}

// Resolve resolves the node class's subnets, security groups, AMIs,
// capacity reservations and placement group for a cluster at k8sVersion
// ("1.33"). Errors are those of Subnets, SecurityGroups, AMIs,
// CapacityReservations and PlacementGroup, in that order. The first four
// stop the resolution; ErrPlacementGroupNotFound comes with everything
// else resolved (the Resolved is complete but for PlacementGroup), as
// Karpenter resolves the group in a sub-controller of its own.
func (r *Resolver) Resolve(ctx context.Context, nc *v1.EC2NodeClass, k8sVersion string) (Resolved, error) {
	if nc == nil {
		return Resolved{}, errors.New("resolve node class: nil")
	}
	subnets, err := r.Subnets(ctx, nc)
	if err != nil {
		return Resolved{}, err
	}
	groups, err := r.SecurityGroups(ctx, nc)
	if err != nil {
		return Resolved{}, err
	}
	amis, err := r.AMIs(ctx, nc, k8sVersion)
	if err != nil {
		return Resolved{}, err
	}
	reservations, capacity, err := r.CapacityReservations(ctx, nc)
	if err != nil {
		return Resolved{}, err
	}
	res := Resolved{Subnets: subnets, SecurityGroups: groups, AMIs: amis, CapacityReservations: reservations, ReservationCapacity: capacity}
	res.PlacementGroup, err = r.PlacementGroup(ctx, nc)
	if err != nil && !errors.Is(err, ErrPlacementGroupNotFound) {
		return Resolved{}, err
	}
	return res, err
}

// ApplyTo writes the resolution into status (subnets, security groups,
// AMIs, capacity reservations, placement group), leaving its other fields
// alone.
func (res Resolved) ApplyTo(status *v1.EC2NodeClassStatus) {
	status.Subnets = make([]v1.Subnet, len(res.Subnets))
	for i, s := range res.Subnets {
		status.Subnets[i] = v1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID}
	}
	status.SecurityGroups = append([]v1.SecurityGroup(nil), res.SecurityGroups...)
	status.AMIs = append([]v1.AMI(nil), res.AMIs...)
	status.CapacityReservations = append([]v1.CapacityReservation(nil), res.CapacityReservations...)
	status.PlacementGroup = nil
	if res.PlacementGroup != nil {
		pg := *res.PlacementGroup
		status.PlacementGroup = &pg
	}
}
