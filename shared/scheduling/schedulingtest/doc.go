// Package schedulingtest holds test fixtures and workload generators for the
// solver: small constructors with deterministic names and UIDs (Pod, NodePool,
// EC2NodeClass, Node, NodeClaim, DaemonSet, InstanceType, Input), the
// re-created workload of Karpenter's solver benchmark (FakeInstanceTypes,
// DiverseMix, PreferenceMix) with its cost model and lower bound (LaunchCost,
// LowerBound), a realistic workload on the embedded EC2 catalog (Realistic),
// and CheckResult, which verifies the invariants every plan must keep.
//
// It is imported only by tests and benchmarks, never by production code.
// Nothing here reads the clock: every timestamp is Epoch unless a test sets
// another one.
package schedulingtest
