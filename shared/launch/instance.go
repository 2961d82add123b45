package launch

import (
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Instance is an EC2 instance nodewright manages, as a launch returns it
// (the fleet adapter's CreateFleet result) and the instance lister reports
// it (DescribeInstances): the one instance type of provisioning, garbage
// collection, adoption and the fleet adapter.
type Instance struct {
	// ID is the instance ID, e.g. "i-0123456789abcdef0".
	ID           string
	InstanceType string
	Zone         string
	// ZoneID is the zone ID when known ("" otherwise).
	ZoneID string
	// SubnetID is the instance's subnet ("" when unknown).
	SubnetID string
	// CapacityType is "spot", "on-demand" or "reserved".
	CapacityType string
	// ReservationID is the capacity reservation of a reserved instance.
	ReservationID string
	// ReservationType is that reservation's type (v1.ReservationTypeDefault
	// or v1.ReservationTypeCapacityBlock) when the launch knows it ("" for
	// a listed instance).
	ReservationType string
	// Tenancy is its Placement.Tenancy ("default" or "dedicated"; "" when
	// unknown).
	Tenancy string
	ImageID string
	// State is the EC2 state name: pending, running, stopping, stopped,
	// shutting-down or terminated; "pending" for a just-launched instance.
	State string
	// LaunchTime is when EC2 launched it; zero when unknown (CreateFleet
	// does not return it).
	LaunchTime time.Time
	// Tags are the instance's tags (listed instances only).
	Tags map[string]string
}

// ProviderID is the instance's Kubernetes provider ID,
// "aws:///<zone>/<instance-id>" (aws: pkg/utils/utils.go).
func (i Instance) ProviderID() string { return v1.ProviderID(i.Zone, i.ID) }
