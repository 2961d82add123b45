package handler

import "testing"

func TestBlockedEventReason(t *testing.T) {
	// The reasons are shared/disruption's sentences for Blocked.Reason.
	tests := []struct {
		name, why, want string
	}{
		{name: "should block a node annotated do-not-disrupt", why: `the Node is annotated karpenter.sh/do-not-disrupt: "true"`, want: ReasonDisruptionBlocked},
		{name: "should block a node with a do-not-disrupt pod", why: `pod shop/db-0 has karpenter.sh/do-not-disrupt: "true"`, want: ReasonDisruptionBlocked},
		{name: "should block a node whose pod a PDB protects", why: "pod shop/db-0 is protected by PodDisruptionBudget shop/db (0 disruptions allowed)", want: ReasonDisruptionBlocked},
		{name: "should block a nominated node", why: "nominated: pending pod shop/web-3 is expected to land on it", want: ReasonDisruptionBlocked},
		{name: "should block an uninitialized node", why: "not initialized: the NodeClaim's Initialized condition is not True", want: ReasonDisruptionBlocked},
		{name: "should block a node of an unknown NodePool", why: `NodePool "gone" not found`, want: ReasonDisruptionBlocked},
		{name: "should block a drifted node whose pods cannot move", why: "drifted (AMIDrift), but pod shop/web-1 fits no node", want: ReasonDisruptionBlocked},
		{name: "should call a node without a cheaper replacement unconsolidatable", why: "can't replace with a cheaper node: every option's worst-case launch price is at least 0.0960/h", want: ReasonUnconsolidatable},
		{name: "should call a node of a pool without consolidation unconsolidatable", why: "consolidation is disabled: NodePool general has consolidateAfter: Never", want: ReasonUnconsolidatable},
		{name: "should call a spot node short of cheaper types unconsolidatable", why: "SpotToSpotConsolidation needs 15 cheaper instance types than the candidate, found 3", want: ReasonUnconsolidatable},
		{name: "should record nothing for a spent budget", why: "drifted (AMIDrift), but the Drifted budget of NodePool general is spent: 1 allowed, 1 of 3 nodes already disrupting", want: ""},
		{name: "should record nothing while consolidateAfter runs", why: "not consolidatable yet: consolidateAfter 30s runs from the last pod event or initialization at 2030-01-02T03:00:00Z until 2030-01-02T03:00:30Z", want: ""},
		{name: "should record nothing for another method acting", why: "not evaluated: the Drifted method acted in this evaluation (one method per evaluation)", want: ""},
		{name: "should record nothing for a drifted node waiting its turn", why: "drifted (AMIDrift): waiting, drift starts one command per evaluation", want: ""},
		{name: "should record nothing for a node in flight", why: "already a candidate of in-flight command drift-default-a-1234abcd", want: ""},
		{name: "should record nothing for a node with nothing to gain", why: "no disruption: not drifted or expired, and consolidation found nothing to gain", want: ""},
		{name: "should record nothing for an unregistered NodeClaim", why: "not registered: no Node has joined for this NodeClaim yet", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := blockedEventReason(tt.why); got != tt.want {
				t.Errorf("blockedEventReason(%q) = %q, want %q", tt.why, got, tt.want)
			}
		})
	}
}
