// Package disruption decides which nodes Karpenter's disruption engine
// would disrupt now, and how: Evaluate takes a snapshot (NodePools,
// EC2NodeClasses with their resolved instance types, NodeClaims, Nodes,
// pods, PodDisruptionBudgets, DaemonSets, commands in flight, an instant)
// and returns Commands (Empty, Drifted, Underutilized, Expired,
// CapacityBlockExpiring; delete or
// replace) and, for every other NodeClaim, the reason it was left alone.
// It performs no I/O, reads no clock and keeps no state; the same Input
// always yields the same Result. Carrying a command out (budget leases,
// launching replacements, tainting, draining, terminating, rolling back)
// is the caller's job; Command is JSON-safe and names everything by name.
//
// # Semantics: Karpenter's
//
// The rules follow Karpenter v1.14.1 (karpenter-spec §5.3, §6, §7):
//
//   - Order: Emptiness, Drift, multi-node then single-node consolidation;
//     the first method that yields a command acts alone in the
//     evaluation. Expiration is forceful and unbudgeted and is reported
//     in every evaluation; so is a capacity block's expiry
//     (CapacityBlockExpiring: its NodeClaims leave once the block is
//     expiring, 40 minutes before its end).
//   - Candidates: managed, initialized, not leaving, not nominated, no
//     do-not-disrupt on the Node or NodeClaim; pods with an active
//     do-not-disrupt ("true", or a duration not yet elapsed since the pod
//     started) or that a PodDisruptionBudget protects block graceful
//     methods, and Drift only without terminationGracePeriod.
//   - Budgets: per NodePool and reason, the minimum of the active budgets
//     (count, or percent of the initialized nodes rounded up; cron
//     schedules in UTC with a duration), minus nodes NotReady or leaving.
//   - Drift: the NodePool and EC2NodeClass static hashes, computed exactly
//     as Karpenter computes them (NodePoolHash, EC2NodeClassHash) and
//     compared only under equal hash versions, then requirements,
//     instance type, AMI, security groups, subnet and capacity
//     reservation. Fields outside the NodePool template (weight, limits,
//     disruption) never drift a node.
//   - Consolidation: simulations with package scheduling decide whether
//     the candidates' pods fit on the other nodes plus at most one new
//     NodeClaim; a replacement must be strictly cheaper in its worst case,
//     is forced to spot when it may be spot or on-demand, and spot-to-spot
//     replacement needs the SpotToSpotConsolidation gate (and, for one
//     node, 15 cheaper types, launching with the 15 cheapest).
//     consolidationPolicy Balanced weighs savings against disruption.
//
// # Deliberate differences
//
//   - Emptiness returns one command per NodePool (Karpenter: one command),
//     so each command draws on one pool's budget.
//   - New NodeClaims that only pending pods need in a simulation do not
//     count against a consolidation or drift command: the provisioner
//     launches those.
//   - Allowed disruptions of a PodDisruptionBudget are computed from its
//     spec and the readiness of the pods it selects (the disruption
//     controller's rule, with selected pods standing in for controller
//     scale), not read from its status.
//   - Validate re-checks a command against a later snapshot (Karpenter's
//     15 s validation); waiting is the executor's. Budgets are not
//     re-checked there: the executor holds the budget it acquired.
//   - Not modelled: the consolidation timeouts, nodes still inside their
//     own consolidateAfter accepting only pending pods, placement-group
//     drift, node repair and interruption.
//
// # Cost
//
// Consolidation simulates with the solver, one simulation per
// single-node candidate and per step of multi-node's binary search, as
// Karpenter does. Two things keep that affordable without changing any
// Result: the simulations share the solver's preparation of the pools'
// instance types (scheduling.Prepared), and a simulation is skipped when
// a capacity bound proves it would fail (the pods that fit on no
// remaining node need one cheaper instance type; all of them need the
// remaining free room plus the widest cheaper type) and its reason would
// not be reported: inside multi-node's search, and for single-node
// candidates that already carry a reason. Figures are in BENCHMARKS.md.
package disruption
