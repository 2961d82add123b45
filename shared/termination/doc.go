// Package termination carries out disruption commands and interruptions:
// the use cases behind each task state of statemachines/disruption.asl.json
// and statemachines/interruption.asl.json, one method of Service per step
// (workflow.Step*). Together they follow Karpenter's execution of a
// disruption command and its node termination (karpenter-spec.md sections
// 5.2, 6.5 and 8.2; checklist items 21-23 and 32-33):
//
//  1. AcquireBudget claims the candidate NodeClaims for the execution and,
//     for the budgeted methods, leases their number from each NodePool's
//     disruption budget with a conditional DynamoDB write.
//  2. LaunchReplacements creates and launches the replacement NodeClaims;
//     CheckReplacements reports when all are initialized and fails the
//     command when one is lost or the deadline passes.
//  3. Taint puts karpenter.sh/disrupted:NoSchedule on the candidates;
//     Revalidate abandons the command if a candidate may no longer be
//     disrupted (a pod arrived, do-not-disrupt appeared, it is gone).
//  4. BeginTermination marks the candidate NodeClaims deleting, with
//     karpenter.sh/nodeclaim-termination-timestamp when they have a
//     terminationGracePeriod, and excludes the Nodes from load balancers.
//  5. Drain runs one round of Karpenter's drain on every candidate
//     (PlanDrain): evictions through the Eviction API tier by tier,
//     PodDisruptionBudget refusals retried in the next round,
//     do-not-disrupt pods waited for, pods force-deleted once the
//     termination deadline minus their grace period is reached. Once a
//     node's pods are gone, its rounds wait for its VolumeAttachments to
//     go (those of pods the drain leaves alone excepted) until the
//     termination deadline, Karpenter's AwaitingVolumeDetachment.
//  6. Terminate terminates the instances; Delete deletes the Nodes and
//     NodeClaims; ReleaseBudget ends the leases.
//  7. Rollback undoes a failed command: untaints the candidates, removes
//     the replacements nothing uses yet, releases the leases.
//
// # Claims and budgets
//
// A claim is a set of annotations on a stored NodeClaim naming the
// execution that disrupts it and until when (AnnotationClaimHolder,
// AnnotationClaimUntil), written with the store's version check, so two
// executions can never both hold a candidate. A claim and the budget
// leases lapse unless renewed: every readiness check and drain round
// renews them, so an execution that died lets go within LeaseSeconds.
//
// Leases are per NodePool and execution (shared/aws/ddbstore). The limit a
// lease is checked against is Karpenter's allowed disruptions for the
// method minus the pool's initialized nodes that are disrupting (NotReady,
// deleting or tainted karpenter.sh/disrupted) for reasons no live lease
// accounts for, read live from the cluster: nodes of leased executions are
// counted once, through the leases, and two executions racing for the last
// slot cannot both get it.
//
// # Idempotency
//
// Every step may be delivered more than once (Lambda retries, Step
// Functions Retry): each reads the current state and acts only on what is
// left to do. Names are derived from the execution (ReplacementName,
// ContinuationName), writes are conditional, and deleting what is gone
// succeeds.
//
// # Left out
//
// The minimum drain time of 5 s is not enforced. Karpenter's events
// (AwaitingVolumeDetachment, ...) are not emitted: each step's output in
// the execution's history says the same.
//
// The package imports domain packages only and reaches the cluster, the
// store, EC2 and Step Functions through the interfaces in ports.go; every
// method takes `now` from its caller.
package termination
