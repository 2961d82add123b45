package decider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/disruption"
)

// driftConditionAttempts bounds the read-modify-write retries of one
// NodeClaim's Drifted condition when a concurrent writer changes it.
const driftConditionAttempts = 3

// nodeClaimWriter reads and replaces stored NodeClaims with optimistic
// versioning (*ddbstore.Store); a Store without it records no Drifted
// condition.
type nodeClaimWriter interface {
	GetNodeClaim(ctx context.Context, name string) (v1.NodeClaim, error)
	UpdateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error)
}

// recordDriftConditions brings the Drifted condition of each NodeClaim in
// drift (disruption.Result.Drift) to its verdict: Status True with the
// drift reason as Reason and the detail as Message when drifted, removed
// when not (Karpenter's NodeClaim disruption controller, karpenter-spec
// section 7; karpenter: pkg/controllers/nodeclaim/disruption/drift.go).
// claims are the NodeClaims the evaluation read; a claim whose condition
// already matches is not written, so repeated polls of the same state
// write nothing. NodeClaims absent from drift keep their condition. It
// returns how many NodeClaims it changed. Best effort: a failed write is
// logged and the run goes on; the next poll tries again.
func (h *Handler) recordDriftConditions(ctx context.Context, claims []v1.NodeClaim, drift []disruption.DriftStatus, now time.Time) int {
	w, ok := h.d.Store.(nodeClaimWriter)
	if !ok {
		return 0
	}
	byName := make(map[string]*v1.NodeClaim, len(claims))
	for i := range claims {
		byName[claims[i].Name] = &claims[i]
	}
	changed := 0
	for _, d := range drift {
		c := byName[d.NodeClaim]
		if c == nil {
			continue
		}
		if _, differs := withDriftCondition(c.Status.Conditions, d, c.Generation, now); !differs {
			continue
		}
		wrote, err := h.writeDriftCondition(ctx, w, d, now)
		if err != nil {
			h.d.Log.WarnContext(ctx, "Drifted condition not recorded", "nodeclaim", d.NodeClaim, "reason", d.Reason, "error", err)
			continue
		}
		if wrote {
			changed++
			h.d.Log.InfoContext(ctx, "Drifted condition recorded", "nodeclaim", d.NodeClaim, "drifted", d.Reason != "", "reason", d.Reason)
		}
	}
	return changed
}

// writeDriftCondition re-reads the NodeClaim and replaces it with its
// Drifted condition set to d, retrying on a version conflict. It reports
// false when the stored claim already matches d or is gone.
func (h *Handler) writeDriftCondition(ctx context.Context, w nodeClaimWriter, d disruption.DriftStatus, now time.Time) (bool, error) {
	var lastErr error
	for range driftConditionAttempts {
		c, err := w.GetNodeClaim(ctx, d.NodeClaim)
		if errors.Is(err, ddbstore.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("get nodeclaim %s: %w", d.NodeClaim, err)
		}
		conds, differs := withDriftCondition(c.Status.Conditions, d, c.Generation, now)
		if !differs {
			return false, nil
		}
		c.Status.Conditions = conds
		_, err = w.UpdateNodeClaim(ctx, c)
		var conflict *ddbstore.ConflictError
		switch {
		case errors.As(err, &conflict):
			lastErr = err
			continue
		case errors.Is(err, ddbstore.ErrNotFound):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("update nodeclaim %s: %w", d.NodeClaim, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("update nodeclaim %s: %d attempts: %w", d.NodeClaim, driftConditionAttempts, lastErr)
}

// withDriftCondition returns conds with the Drifted condition matching d
// (a new slice; conds is not modified) and whether that differs from
// conds. A drifted verdict sets Status True, Reason d.Reason and Message
// d.Detail, keeping LastTransitionTime when it was already True (the
// Drift method orders candidates by it); a clean one removes the
// condition, as Karpenter clears it.
func withDriftCondition(conds []metav1.Condition, d disruption.DriftStatus, generation int64, now time.Time) ([]metav1.Condition, bool) {
	i := slices.IndexFunc(conds, func(c metav1.Condition) bool { return c.Type == v1.ConditionTypeDrifted })
	if d.Reason == "" {
		if i < 0 {
			return conds, false
		}
		return slices.Delete(slices.Clone(conds), i, i+1), true
	}
	want := metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: d.Reason, Message: d.Detail,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	if i < 0 {
		return append(slices.Clone(conds), want), true
	}
	cur := conds[i]
	if cur.Status == metav1.ConditionTrue {
		want.LastTransitionTime = cur.LastTransitionTime
	}
	if cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message && cur.ObservedGeneration == want.ObservedGeneration &&
		cur.LastTransitionTime.Equal(&want.LastTransitionTime) {
		return conds, false
	}
	out := slices.Clone(conds)
	out[i] = want
	return out, true
}
