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
// (karpenter-spec.md section 6.1). A NodeClaim whose claim lapsed is
// handed back only once its execution, and every continuation of it
// (ContinuationName), has ended or never existed, as Step Functions
// reports through the Status port: a lapsed claim of an execution that
// still runs (a drain slowed past LeaseSeconds) stays, tainted, so its
// node keeps counting against the budget (DisruptingElsewhere) until that
// execution's next renewal fails and it rolls back. Without a Status port,
// or when the status cannot be read, nothing is handed back (an error
// says why). A NodeClaim handed back is given back as a rollback would:
// its Node loses the disrupted taint and the execution's marks, the
// NodeClaim its claim and deletion mark. One whose instance was already
// terminating is deleted with its Node instead. Budget leases need
// nothing: they lapse on their own. It tries every NodeClaim and returns
// the errors joined.
func (s *Service) ReleaseStale(ctx context.Context, now time.Time) ([]StaleRelease, error) {
	claims, err := s.p.Claims.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("release stale claims: %w", err)
	}
	var out []StaleRelease
	var errs []error
	ended := map[string]error{} // holder -> nil when every execution of it ended
	for i := range claims {
		c := &claims[i]
		cl := ClaimOf(c)
		if cl.Holder == "" || cl.Live(now) {
			continue
		}
		r := StaleRelease{NodeClaim: c.Name, Holder: cl.Holder}
		endErr, checked := ended[cl.Holder]
		if !checked {
			endErr = s.executionEnded(ctx, cl.Holder, cl.Method)
			ended[cl.Holder] = endErr
		}
		if endErr != nil {
			if !errors.Is(endErr, errStillRunning) {
				errs = append(errs, fmt.Errorf("release stale claim on %s: %w", c.Name, endErr))
			}
			continue
		}
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
		if err != nil && !errors.Is(err, v1.ErrNotFound) {
			r.Error = err.Error()
			errs = append(errs, fmt.Errorf("release stale claim on %s: %w", c.Name, err))
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// errStillRunning: an execution of the holder still runs.
var errStillRunning = errors.New("its execution still runs")

// maxContinuations bounds the continuations executionEnded follows.
const maxContinuations = 100

// executionEnded returns nil when the execution holder and its
// continuations have all ended (or never existed), errStillRunning when
// one runs, and another error when that cannot be told.
func (s *Service) executionEnded(ctx context.Context, holder, method string) error {
	if s.p.Status == nil {
		return errors.New("no execution status port: cannot tell whether its execution ended")
	}
	name := holder
	for n := 1; n <= maxContinuations; n++ {
		status, err := s.p.Status.ExecutionStatus(ctx, method, name)
		if err != nil {
			return fmt.Errorf("status of execution %s: %w", name, err)
		}
		switch status {
		case ExecutionRunning:
			return fmt.Errorf("execution %s: %w", name, errStillRunning)
		case ExecutionMissing:
			return nil
		}
		name = ContinuationName(holder, n)
	}
	return fmt.Errorf("execution %s has more than %d continuations", holder, maxContinuations)
}
