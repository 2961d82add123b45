package provisioning

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Condition reasons nodewright writes on NodeClaims. True conditions carry
// their own type as reason, as Karpenter's status library does; the other
// reasons are Karpenter's (karpenter: pkg/controllers/nodeclaim/lifecycle).
const (
	ReasonAwaitingReconciliation    = "AwaitingReconciliation"
	ReasonLaunchFailed              = "LaunchFailed"
	ReasonMultipleNodesFound        = "MultipleNodesFound"
	ReasonNodeNotReady              = "NodeNotReady"
	ReasonStartupTaintsExist        = "StartupTaintsExist"
	ReasonKnownEphemeralTaintsExist = "KnownEphemeralTaintsExist"
	ReasonResourceNotRegistered     = "ResourceNotRegistered"
)

// lifecycleConditions are the conditions a new NodeClaim starts with, all
// Unknown (Karpenter initializes its status conditions at creation).
var lifecycleConditions = []string{
	v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady,
}

// isTrue reports whether the claim's condition t is True.
func isTrue(claim *v1.NodeClaim, t string) bool {
	return meta.IsStatusConditionTrue(claim.Status.Conditions, t)
}

// setClaimCondition sets condition t on claim and recomputes Ready: True
// when Launched, Registered and Initialized are all True, else Unknown.
func setClaimCondition(claim *v1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string, now time.Time) {
	claim.Status.Conditions = v1.SetCondition(claim.Status.Conditions, t, status, reason, message, claim.Generation, now)
	ready := metav1.ConditionTrue
	for _, dep := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
		if !isTrue(claim, dep) {
			ready = metav1.ConditionUnknown
		}
	}
	readyReason := ReasonAwaitingReconciliation
	if ready == metav1.ConditionTrue {
		readyReason = v1.ConditionTypeReady
	}
	claim.Status.Conditions = v1.SetCondition(claim.Status.Conditions, v1.ConditionTypeReady, ready, readyReason, "", claim.Generation, now)
}

// since returns the time condition t of claim last changed, or the claim's
// creation when the condition is absent.
func since(claim *v1.NodeClaim, t string) time.Time {
	if c := meta.FindStatusCondition(claim.Status.Conditions, t); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	return claim.CreationTimestamp.Time
}
