// Package provisioning holds the use cases of the hot path from a pending pod
// to a running node: Provision (solve one pod batch, persist its NodeClaims,
// launch them), Register (link a joining Node to its NodeClaim and initialize
// it), Tagger (the instance's post-registration tags), CollectGarbage (launch
// and registration timeouts, leaked instances, NodeClaims whose instance is
// gone) and CollectLaunchTemplates (launch templates unused for
// LaunchTemplateUnusedTTL or whose EC2NodeClass is gone). It follows
// Karpenter's behaviour as karpenter-spec.md describes it (sections 1.5,
// 3.1-3.4, 4, 5.1, 5.4 and 11.3 items 3 and 13-19).
//
// The package is pure workflow over the domain packages (apis/v1,
// requirements, catalog, scheduling). It reaches DynamoDB, EC2 and the
// Kubernetes API only through small interfaces declared next to the code that
// uses them; every method takes `now` from its caller and never reads the
// clock. Decisions are also exported as pure functions (Register,
// PlanGarbageCollection) so they can be tested and replayed without ports.
//
// # Single writer
//
// Provisioning is a singleton in Karpenter (one solve at a time per cluster,
// spec section 12). nodewright gets that from the provisioning queue: an SQS
// FIFO queue whose MessageGroupId is the cluster name. SQS hands out the next
// message of a group only after the previous one was deleted or its
// visibility timeout expired, so one Lambda invocation at a time runs
// Provision for a cluster, in batch order. The queue's visibility timeout must
// exceed the provisioner Lambda's timeout (AWS recommends six times), so a
// message is not handed to a second invocation while the first still runs.
//
// Provision does not rely on that for safety, only for quality: if a batch is
// ever delivered twice at once (a visibility timeout that was too short, a
// manual replay), no instance is launched twice. NodeClaims are written
// create-only under names derived from the batch, so both deliveries find the
// same NodeClaim, and the launcher's CreateFleet ClientToken is derived from
// the stored NodeClaim's UID, so EC2 returns the first fleet to the second
// call. What the single writer buys is that two different batches are never
// solved against the same in-flight capacity at once (which could
// over-provision). A deployment that cannot use a FIFO queue can take the
// store's provisioning lease around Provision instead.
//
// # Retries and idempotency
//
// A batch's plan is written through the batch store (as a
// v1.PodBatchResult in state Solved) before any NodeClaim is written. A
// retried Provision for the same batch finds that plan and resumes it
// instead of solving again, so a retry writes exactly the NodeClaim names
// the first attempt planned (ClaimName of the batch ID and index) and never
// a second, different plan. For each planned NodeClaim it then:
//   - skips it when the stored plan already records its instance;
//   - creates it create-only, or, when it exists, reuses the stored one with
//     its UID, so a relaunch carries the same ClientToken;
//   - launches it unless the stored NodeClaim is already Launched.
//
// A NodeClaim deleted after an insufficient-capacity error is removed from
// the stored plan, so a retry does not bring it back. A planned NodeClaim
// that is missing from the store and older than LaunchTimeout is abandoned
// (garbage collection deleted it) rather than recreated.
//
// A launch that fails for any other reason leaves its NodeClaim with
// Launched=Unknown and the reason, and Provision returns an error wrapping
// ErrLaunchIncomplete together with the result: the caller leaves the queue
// message for redelivery, and the retry relaunches the same NodeClaim with
// the same ClientToken. When the message is finally dropped, garbage
// collection deletes the NodeClaim at its launch timeout and the pods, still
// pending, come back in a later batch.
//
// # Store errors
//
// The ports report missing, duplicate and stale items with errors that match
// v1.ErrNotFound, v1.ErrAlreadyExists and v1.ErrConflict under errors.Is. An adapter
// whose own errors differ (shared/aws/ddbstore has its own sentinels and
// *ConflictError) is wrapped at the edge to translate them.
package provisioning
