package provisioning

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// LaunchNodeClaims creates and launches NodeClaims planned outside a pod
// batch: the replacements of a disruption command (karpenter-spec section
// 6.5: replacements are launched before the candidates go). It is
// Provision's launch path without the solve: it reads the configuration
// and the unavailable offerings, resolves the claims' EC2NodeClasses, then
// for each planned claim creates it create-only (or reuses the stored one,
// with its UID, so a retry carries the same CreateFleet ClientToken) and
// launches it unless it is already launched, at most LaunchParallelism at a
// time. Insufficient capacity marks the offerings unavailable and deletes
// the NodeClaim, as in Provision.
//
// planned claims need a name, a creation timestamp (a missing claim planned
// LaunchTimeout or more before now is not recreated: Abandoned) and their
// spec. It returns one Launch per claim, in order, and the warnings about
// configuration left out; errors are port failures before any launch.
// Calls with the same claims are idempotent.
func (p *Provisioner) LaunchNodeClaims(ctx context.Context, planned []v1.NodeClaim, now time.Time) ([]Launch, []string, error) {
	st, err := p.loadLaunchState(ctx, now)
	if err != nil {
		return nil, nil, fmt.Errorf("launch nodeclaims: %w", err)
	}
	launchCtx, cancel := p.launchContext(ctx)
	defer cancel()
	outcomes := p.launchAll(launchCtx, planned, st, now)
	launches := make([]Launch, len(outcomes))
	for i, o := range outcomes {
		launches[i] = o.Launch
	}
	return launches, st.warnings, nil
}
