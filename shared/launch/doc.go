// Package launch is the launch model: it alone decides which offerings
// (instance type, zone, capacity type) a NodeClaim may launch as, in which
// order, and why every other instance type was left out.
//
// Where is the rule that picks the instance type? Here, in two files:
//   - filters.go: the named filter pipeline (compatible, fits, offering,
//     exotic, spot-price, truncate) and the keys every instance type
//     defines (TypeKeys);
//   - plan.go: the capacity-type choice (reserved, then spot, then
//     on-demand), the order of the launch offerings and the Expected one.
//
// The types a launch takes and returns, one definition for every package
// that handles them: subnet.go (Subnet, and SubnetPerZone, the subnet each
// zone's launches use, which decides Request.Zones), template.go (a launch
// template and the types it serves; the cluster's listed templates),
// instance.go (the launched instance),
// capacity.go (InsufficientCapacityError and its UnavailableOffering) and
// status.go (a NodeClaim's launch Status).
//
// The pipeline follows Karpenter's AWS provider (aws:
// pkg/providers/instance/filter/filter.go, instance.go getCapacityType,
// pkg/cloudprovider maxInstanceTypes; karpenter-spec §4 steps 2-5): each
// filter has a name, and Plan.Rejected lists, per filter, the instance
// types it removed. One difference is deliberate: truncation to
// MaxInstanceTypes keeps minValues satisfiable (Karpenter truncates and
// fails); see docs/compatibility.md.
//
// Its users: the solver (shared/scheduling) narrows each new NodeClaim's
// candidates and predicts its expected offering with Narrow and ChooseInto
// (Choose in a reused buffer);
// disruption (shared/disruption) plans each replacement NodeClaim with New,
// the call the fleet adapter makes; the fleet adapter (shared/aws/fleet)
// renders New's Plan into CreateFleetInput; all see the same answer for
// the same claim. The
// package is pure: no I/O, no clock, no SDK.
package launch
