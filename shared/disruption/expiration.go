package disruption

import (
	"fmt"
	"time"
)

// expire returns one Expired command per NodeClaim whose expireAfter has
// run out at Now (creation + expireAfter, default 720h; Never does not
// expire), and marks those NodeClaims as leaving, so that they count as
// disrupting against their pool's budgets and are no candidate of any
// other method. Expiration is forceful (karpenter-spec §5.3): no budget,
// no replacement launched first, no do-not-disrupt or PodDisruptionBudget
// check, and registered or not; draining still honours PDBs and
// do-not-disrupt until the terminationGracePeriod. NodeClaims already being
// deleted or in flight are left alone.
func (e *evaluation) expire() []Command {
	var out []Command
	for _, n := range e.nodes {
		if n.deleting {
			continue
		}
		d := expireAfter(n.claim)
		if d == nil {
			continue
		}
		at := n.claim.CreationTimestamp.Add(*d)
		if e.now.Before(at) {
			continue
		}
		n.deleting = true
		c := Command{
			Method: MethodExpired, Decision: DecisionDelete, SavingsPerHour: n.price,
			Reason: fmt.Sprintf("NodeClaim %s expired at %s (expireAfter %s after creation); expiration is forceful: no budget, no replacement first, do-not-disrupt ignored",
				n.claim.Name, at.UTC().Format(time.RFC3339), d),
		}
		out = append(out, e.finish(&c, []*node{n}))
	}
	return out
}
