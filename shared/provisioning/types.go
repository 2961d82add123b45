package provisioning

import (
	"errors"
	"time"
)

// Timers of the NodeClaim lifecycle (karpenter-spec sections 4 step 9, 5.1
// and 5.4).
const (
	// LaunchTimeout: a NodeClaim not Launched this long after its Launched
	// condition last changed (its creation, when the condition is absent)
	// is deleted (karpenter: nodeclaim/lifecycle/liveness.go launchTTL).
	LaunchTimeout = 5 * time.Minute
	// RegistrationTimeout: a Launched NodeClaim not Registered this long
	// after its Registered condition last changed (its creation, when the
	// condition is absent) is deleted with its instance (registrationTTL).
	RegistrationTimeout = 15 * time.Minute
	// LeakedInstanceGrace: an instance carrying the cluster's launch tags
	// that no NodeClaim names is terminated once it is older than this
	// (aws: pkg/controllers/nodeclaim/garbagecollection).
	LeakedInstanceGrace = 30 * time.Second
)

// The ports return the store errors of shared/apis/v1 (v1.ErrNotFound,
// v1.ErrAlreadyExists, v1.ErrConflict), compared with errors.Is; the
// adapters' own errors match them (see the package doc).

// Errors the use cases return, compared with errors.Is.
var (
	// ErrInvalidInput wraps every rejection of a malformed argument (a nil
	// batch, another cluster's batch, a node without a providerID).
	ErrInvalidInput = errors.New("invalid input")
	// ErrLaunchIncomplete is wrapped by Provision when at least one
	// NodeClaim of the batch failed to launch for a reason other than
	// insufficient capacity, or when the outcome could not be stored. The
	// Result returned with it is complete and may be acted on; the caller
	// should retry the batch (leave its queue message for redelivery).
	ErrLaunchIncomplete = errors.New("launch incomplete")
	// ErrNoNodeClaim is wrapped by Register when no NodeClaim carries the
	// Node's providerID: the Node is not managed by nodewright, or its
	// NodeClaim is gone.
	ErrNoNodeClaim = errors.New("no nodeclaim for node")
)

// codeInsufficientFreeAddressesInSubnet names a full subnet rather than a
// capacity pool: Karpenter marks the subnet, not the offering, unavailable
// (karpenter-spec section 4 step 5), so Provision does not record it as an
// unavailable offering.
const codeInsufficientFreeAddressesInSubnet = "InsufficientFreeAddressesInSubnet"

// EC2 instance states that mean the instance is on its way out or gone.
const (
	stateShuttingDown = "shutting-down"
	stateTerminated   = "terminated"
)
