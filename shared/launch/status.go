package launch

// Status is a NodeClaim's launch outcome: the one set of statuses the
// provisioning round reports per NodeClaim and the disruption task reads
// for each replacement it launches (shared/termination). The values are
// stored and cross the workflow as JSON strings.
type Status string

// Launch statuses.
const (
	// Launched: an instance was launched (or found again through the
	// ClientToken) and the NodeClaim now records it.
	Launched Status = "Launched"
	// AlreadyLaunched: an earlier attempt launched it; nothing was done.
	AlreadyLaunched Status = "AlreadyLaunched"
	// InsufficientCapacity: the offerings were marked unavailable and the
	// NodeClaim deleted; its pods are retried in the next round.
	InsufficientCapacity Status = "InsufficientCapacity"
	// NodeClassNotReady: the claim's EC2NodeClass is missing or not ready;
	// the NodeClaim was deleted (karpenter-spec section 4 step 1).
	NodeClassNotReady Status = "NodeClassNotReady"
	// Abandoned: the planned NodeClaim is gone from the store (deleted
	// after its launch timeout, or by someone else) and is not recreated.
	Abandoned Status = "Abandoned"
	// LaunchFailed: the launch failed for another reason; the NodeClaim
	// stays with Launched=Unknown and the reason, to be retried.
	LaunchFailed Status = "LaunchFailed"
)
