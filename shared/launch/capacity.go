package launch

import "github.com/nodewright/nodewright/shared/catalog"

// UnavailableOffering is an offering EC2 could not fulfil in one launch,
// for provisioning to mark unavailable for catalog.UnavailableOfferingsTTL
// (karpenter-spec section 4 step 9): the one type of the fleet adapter's
// result and error and of provisioning.
type UnavailableOffering struct {
	catalog.OfferingKey
	// Code is the EC2 error code, e.g. "InsufficientInstanceCapacity".
	Code string
	// SubnetID is the override's subnet, when known; with code
	// InsufficientFreeAddressesInSubnet it is the subnet to mark (a full
	// subnet, not the offering, is unavailable; karpenter-spec section 4
	// step 5).
	SubnetID string
}

// InsufficientCapacityError is the launch error meaning "EC2 has no
// capacity for this NodeClaim now": no offering the claim allows was
// available (it wraps ErrNoCompatibleOffering), or CreateFleet returned no
// instance and only capacity errors (it wraps those). Provisioning marks
// Offerings unavailable for catalog.UnavailableOfferingsTTL and deletes
// the NodeClaim, so its pods are retried in the next round on other
// offerings (karpenter-spec section 4 step 9, 11.3 item 13). Its type name
// is Karpenter's error name for the case.
type InsufficientCapacityError struct {
	// Offerings are the offerings EC2 reported unfulfillable; empty when
	// the launch never reached EC2.
	Offerings []UnavailableOffering
	// Reason says why, for events and the pods' messages.
	Reason string
	// Err is what Unwrap returns: ErrNoCompatibleOffering (wrapped) when
	// the launch never reached EC2, else the EC2 errors (joined); may be
	// nil.
	Err error
}

// Error returns "insufficient capacity: " and the reason.
func (e *InsufficientCapacityError) Error() string {
	return "insufficient capacity: " + e.Reason
}

// Unwrap returns Err.
func (e *InsufficientCapacityError) Unwrap() error { return e.Err }
