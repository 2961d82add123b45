// Package scheduling is nodewright's solver. Solve takes a complete
// snapshot (NodePools, EC2NodeClasses with their resolved instance types,
// pending pods, existing nodes and in-flight NodeClaims, DaemonSets) and
// returns a plan: which pods go to existing capacity, which NodeClaims to
// launch (pool, candidate instance types cheapest first, the offering
// CreateFleet is expected to pick) and, for every pod it cannot place, one
// precise reason. It performs no I/O, reads no clock and no globals, and
// the same Input always yields the same Result.
//
// # Semantics: Karpenter's
//
// Which placements are allowed, and which pool wins, follow Karpenter
// v1.14.1 (karpenter-spec §2 and §3; karpenter:
// pkg/controllers/provisioning/scheduling):
//
//   - Pods: requests as Kubernetes computes them (containers, native
//     sidecars, the largest init step, overhead; limits count when requests
//     are absent) plus one "pods". Bound, terminal, terminating, mirror and
//     DaemonSet pods, pods with resource claims and pods Karpenter refuses
//     (matchFields, restricted keys such as kubernetes.io/hostname,
//     karpenter.sh/nodepool DoesNotExist) are not provisioned for and get
//     a reason saying so.
//   - Node selection: nodeSelector, the first required node-affinity term
//     and, with PreferencePolicy Respect, the heaviest preferred term, with
//     the requirement algebra of package requirements (a custom key a pod
//     requires must be defined by the NodePool). Existing nodes match
//     strictly on their labels (an in-flight NodeClaim also by its
//     requirements).
//   - Taints: every NodePool taint must be tolerated (PreferNoSchedule
//     too, until relaxation tolerates it); startupTaints are ignored, and
//     so are the startup and ephemeral taints of uninitialized managed
//     nodes.
//   - Topology: spread constraints on any key (maxSkew, minDomains,
//     nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys; hostname spread
//     takes 0 as the global minimum), required and preferred pod affinity
//     and anti-affinity on any key with namespaces and namespaceSelector,
//     and the required anti-affinity of placed pods (existing and of this
//     round) against the pods it selects. Bound pods are counted. Spread
//     and affinity count a claim's pods once its domain is known;
//     anti-affinity counts every domain the claim may land in.
//   - Host ports: (IP, port, protocol) with unspecified-address wildcards,
//     including the ports of the compatible DaemonSets on new claims (a pod
//     binding one stays pending, its reason naming port and DaemonSet,
//     kubernetes-sigs/karpenter #2083/#2093), on this round's claims, and
//     on existing nodes and in-flight NodeClaims whether or not the daemon
//     pod is bound yet.
//   - DaemonSets: per NodePool only those that tolerate its taints
//     (PreferNoSchedule implicitly) and whose node affinity fits its
//     requirements count, and per instance type only those whose
//     requirements admit it; existing nodes reserve what their compatible
//     DaemonSets still need.
//   - Order: pods in Karpenter's queue order (cpu desc, memory desc,
//     creation time, UID). Existing nodes and in-flight NodeClaims
//     (initialized first, then by name, first fit) come before any new
//     claim, so a pod that fits existing capacity never causes a launch.
//     A new claim comes from the first NodePool that can host the pod, by
//     weight desc then name desc. A pod that fits nowhere has one
//     preference relaxed in Karpenter's order and is retried after the
//     others; the loop stops when a full pass makes no progress.
//   - Limits: a NodePool's limits (any resource, and "nodes") count the
//     capacity of its existing nodes and in-flight NodeClaims.
//   - Claims: requirements are the pool's intersected with every pod's
//     (topology narrowing included), plus node.kubernetes.io/instance-type
//     In [candidates] and karpenter.sh/capacity-type In [...];
//     resources.requests are the pods' requests plus the smallest daemonset
//     overhead among the candidates plus the pod count; labels, taints,
//     startupTaints, annotations, nodeClassRef, expireAfter and
//     terminationGracePeriod come from the template. The candidates are
//     the fitting types (each holds all the claim's pods plus its daemonset
//     overhead) as the launch model narrows them (shared/launch: exotic and
//     spot-price filters, then at most Options.MaxInstanceTypes, 60, what
//     CreateFleet accepts), cheapest first. minValues is enforced (Strict)
//     or lowered and annotated (BestEffort), and kept when truncating.
//   - Expected: the first offering of the launch model's plan
//     (launch.Choose): reserved if available, else spot, else on-demand;
//     the cheapest of that capacity type. The fleet adapter renders the
//     same plan, so CreateFleet is asked for exactly these candidates.
//   - Capacity reservations: a reserved offering is priced at on-demand /
//     catalog.ReservedPriceDivisor, so it is taken first, and a
//     reservation takes at most as many of the round's claims as it has
//     instances left (ReservationCapacity, one count per reservation ID
//     across its instance types and zones; the smallest count when several
//     classes select it). A claim holds the one reservation its cheapest
//     fitting type launches into, and gives it back when a pod makes it
//     grow to another type or its pods move away; once a reservation is
//     full, later claims price their types without it and fall back to the
//     next reservation, then spot, then on-demand, as their NodePool
//     allows. A claim that holds a reservation is written with
//     karpenter.sh/capacity-type In [reserved] and
//     karpenter.k8s.aws/capacity-reservation-id In [its reservation]; one
//     that holds none with capacity-type NotIn [reserved]. A pod that only
//     full reservations could host stays pending with a reason naming them
//     (reservations.go; karpenter: ReservationManager).
//
// Where nodewright deliberately differs, it admits more plans or safer
// ones, never a placement Karpenter's rules forbid:
//
//   - Inverse anti-affinity also covers pods placed in the same round, as
//     kube-scheduler enforces it (Karpenter checks it only against pods
//     already bound), and only required terms block others (preferred
//     terms bind their owner only).
//   - A claim that receives a pod owning anti-affinity on a zone-like key is
//     pinned to one free domain; Karpenter leaves it flexible, which blocks
//     every domain it may land in (so self anti-affinity on zone placed one
//     pod instead of one per zone).
//   - Topology terms of one pod narrow a claim one after another, so a
//     spread constraint picks its domain among those affinity terms allow.
//   - Spread with nodeAffinityPolicy Honor counts only the domains that a
//     NodePool compatible with the pod's node selection, or an existing
//     node that satisfies it, provides (Kubernetes' meaning of Honor;
//     Karpenter v1.14.1 counts every NodePool's domains).
//   - Reservations: a claim holds exactly the reservation it launches
//     into; Karpenter reserves one instance of every reservation a claim
//     could launch into, and its provisioner defers a pod whose claim
//     could use a reservation already spoken for to its next round. Here
//     counts are exact and the round falls back at once.
//   - Limits: while solving, each claim counts its cheapest fitting type;
//     when the plan is written, claims widen their candidate lists in order
//     only as far as the pool's remaining limits allow. The largest
//     candidate of every claim together still fits the limits (the worst
//     case Karpenter's pessimistic subtraction guards against), but pods
//     that Karpenter would leave pending for want of limit headroom fit.
//
// Not modelled: volume topology (PVC, StorageClass and CSI limits; the
// Input has no volumes), NodeOverlays and nomination windows. Static pools (spec.replicas) are skipped.
//
// # Packing: by cost
//
// Karpenter puts each pod on the in-flight claim with the fewest pods that
// can take it and launches each claim's cheapest fitting type; on its own
// benchmark that spreads pods thinly over the claims anti-affinity forces
// and lands at 1.5-1.65x a simple lower bound. Solve instead decides by
// price, which is what users pay:
//
//  1. Pods that fit existing capacity are placed first, in Karpenter's
//     order. The rest are ordered with the pods that need a host of their
//     own (self-selecting hostname anti-affinity) first, so that the
//     claims they force exist before other pods look for room.
//  2. Each pod goes where the plan's price rises least: a claim whose
//     cheapest fitting type still holds it (free), the claim that would
//     grow least, or a new claim when that is cheaper; among free fits the
//     smallest remaining hole wins (best fit, in cpu plus memory at the
//     workload's memory-per-cpu rate). Claims are indexed per pool by free
//     cpu and free memory, so a pod examines a bounded number of claims
//     near its best-fit position whatever the number of claims.
//  3. An improvement pass moves pods between claims while the price
//     drops: it empties claims into others' free room, shrinks claims to
//     cheaper types by moving a few pods out, and merges several small
//     claims into one larger claim when larger types are cheaper per unit
//     or daemonset overhead and fragmentation waste the small ones. Every
//     move is checked like a placement and must also keep every other
//     pod's constraints (no zone-like topology count changes, no pod a
//     hostname affinity term selects leaves its host, no hostname spread
//     above maxSkew, no pod onto a claim of a lighter NodePool than its
//     own); a move set that does not fully succeed is rolled back.
//
// NodePool weight is never traded for price: a pod joins one of this
// round's claims (as Karpenter tries those first) or opens a claim of the
// heaviest NodePool that can host it, and the improvement pass keeps every
// pod on its pool's weight or moves it to a heavier pool.
//
// Solve also packs the same snapshot the way Karpenter does (first fit on
// the claim with the fewest pods, looking at up to 256 claims per pod) and
// returns that plan instead when it places more pods or costs less, so a
// plan never places fewer pods, nor costs more, than Karpenter's packing
// of the same pods under the same rules. Cost decides only among allowed placements: no strategy ever
// breaks a hard constraint to save money.
//
// Work is per class of identical pods where possible (requirements,
// tolerations, topology terms), requirement sets are interned and their
// merges memoized, resources are fixed-size int64 vectors, each claim keeps
// a cursor into its price-sorted candidate list, first fit over existing
// nodes walks a segment tree of their free capacity, and the improvement
// pass skips attempts that nothing since their last failure could have
// changed, so the time per pod stays nearly flat as pods, claims and nodes
// grow. BENCHMARKS.md
// has the measured figures and the command that reproduces them.
package scheduling
