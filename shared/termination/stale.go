package termination

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// StaleRelease is what ReleaseStale did about one NodeClaim whose claim
// lapsed.
type StaleRelease struct {
	NodeClaim string `json:"nodeClaim"`
	// Holder is the execution whose claim lapsed.
	Holder string `json:"holder"`
	// Outcome is "given back" (untainted, claim and deletion mark
	// cleared) or "deleted" (its instance was already terminating).
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// ReleaseStale cleans up after executions that stopped without finishing
// or rolling back (aborted by an operator, or failed in their rollback):
// Karpenter's disruption loop likewise first removes stale
// karpenter.sh/disrupted taints from nodes no command owns
// (karpenter-spec.md section 6.1). A NodeClaim whose claim lapsed (every
// live execution renews its claims at every readiness check and drain
// round, so a lapsed claim means its execution is gone) is given back as a
// rollback would: its Node loses the disrupted taint and the execution's
// marks, the NodeClaim its claim and deletion mark. One whose instance was
// already terminating is deleted with its Node instead. Budget leases need
// nothing: they lapse on their own. It tries every NodeClaim and returns
// the errors joined.
func (s *Service) ReleaseStale(ctx context.Context, now time.Time) ([]StaleRelease, error) {
	claims, err := s.p.Claims.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("release stale claims: %w", err)
	}
	var out []StaleRelease
	var errs []error
	for i := range claims {
		c := &claims[i]
		cl := ClaimOf(c)
		if cl.Holder == "" || cl.Live(now) {
			continue
		}
		r := StaleRelease{NodeClaim: c.Name, Holder: cl.Holder}
		st := workflow.DisruptionState{DisruptionInput: workflow.DisruptionInput{
			ID: cl.Holder, Method: cl.Method,
			Candidates: []workflow.Candidate{{NodeClaim: c.Name, Node: c.Status.NodeName, ProviderID: c.Status.ProviderID}},
		}}
		if conditionTrue(c, v1.ConditionTypeInstanceTerminating) {
			r.Outcome = "deleted"
			_, err = s.Delete(ctx, st, now)
		} else {
			r.Outcome = "given back"
			_, err = s.giveBack(ctx, st, st.Candidates[0])
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			r.Error = err.Error()
			errs = append(errs, fmt.Errorf("release stale claim on %s: %w", c.Name, err))
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}
