package v1

import "errors"

// The store errors: the one set every NodeClaim, configuration, budget and
// Kubernetes port of shared/provisioning and shared/termination returns,
// and every adapter behind those ports wraps (shared/aws/ddbstore,
// shared/kube, shared/aws/fleet), so a caller branches with errors.Is on
// these whichever adapter answered. They are sentinels: an adapter's own
// error wraps one (fmt.Errorf with %w) or matches it through an Is method.
var (
	// ErrNotFound: the item or object does not exist (or no longer does).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a create-only write found the item present.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: a version-checked write found the item changed since it
	// was read (its resourceVersion differs), or it kept changing under
	// every attempt. Re-read and retry.
	ErrConflict = errors.New("conflict")
	// ErrBudgetExhausted: a disruption budget lease would take a NodePool
	// past its budget's limit.
	ErrBudgetExhausted = errors.New("disruption budget exhausted")
	// ErrLeaseLapsed: a renewal found the holder's budget lease expired or
	// released; a lapsed lease is never taken again by a renewal.
	ErrLeaseLapsed = errors.New("budget lease lapsed")
)
