package decider

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/disruption"
)

// nodeUpdater mutates one Node with a read-modify-write
// (adapters.Kube over *kube.Client); a missing Node is v1.ErrNotFound.
type nodeUpdater interface {
	UpdateNode(ctx context.Context, name string, mutate func(*corev1.Node) error) error
}

// demote applies the reserved -> on-demand demotions of in
// (disruption.Demotions: the reservation is gone from EC2 and from the
// class's resolved status) before the evaluation, as Karpenter's
// capacityreservation.capacitytype controller does every minute: the
// stored NodeClaim first (re-read, relabelled with disruption.DemoteLabels,
// replaced under its version), then its Node when the kube API is wired.
// A NodeClaim whose record it demoted is demoted in in too, so this run's
// evaluation sees it on-demand (no CapacityReservationDrift). Re-running
// over demoted objects writes nothing. Best effort: a failed write is
// logged and returned as a warning; the next run tries again. It returns
// the NodeClaims demoted.
func (h *Handler) demote(ctx context.Context, in *disruption.Input, karpenterActive string) ([]string, []string) {
	ds, err := disruption.Demotions(*in, karpenterActive)
	if err != nil {
		return nil, []string{"reserved NodeClaims not demoted: " + err.Error()}
	}
	w, ok := h.d.Store.(nodeClaimWriter)
	if !ok || len(ds) == 0 {
		return nil, nil
	}
	var done []disruption.Demotion
	var names, warnings []string
	for _, d := range ds {
		if err := h.demoteClaim(ctx, w, d.NodeClaim); err != nil {
			warnings = append(warnings, fmt.Sprintf("nodeclaim %s not demoted to on-demand: %v", d.NodeClaim, err))
			continue
		}
		if d.Node != "" && h.d.Nodes != nil {
			err := h.d.Nodes.UpdateNode(ctx, d.Node, func(n *corev1.Node) error {
				if n.DeletionTimestamp == nil {
					n.Labels, _ = disruption.DemoteLabels(n.Labels)
				}
				return nil
			})
			if err != nil && !errors.Is(err, v1.ErrNotFound) {
				warnings = append(warnings, fmt.Sprintf("node %s not demoted to on-demand: %v", d.Node, err))
			}
		}
		done = append(done, d)
		names = append(names, d.NodeClaim)
		h.d.Log.InfoContext(ctx, "capacity type demoted", "nodeclaim", d.NodeClaim, "node", d.Node, "capacity-reservation-id", d.ReservationID, "reason", d.Reason)
	}
	disruption.ApplyDemotions(in, done)
	for _, w := range warnings {
		h.d.Log.WarnContext(ctx, "demotion failed", "warning", w)
	}
	return names, warnings
}

// demoteClaim re-reads NodeClaim name and replaces it demoted, retrying on
// a version conflict; a claim already demoted or gone is not written.
func (h *Handler) demoteClaim(ctx context.Context, w nodeClaimWriter, name string) error {
	var lastErr error
	for range driftConditionAttempts {
		c, err := w.GetNodeClaim(ctx, name)
		if errors.Is(err, ddbstore.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get nodeclaim %s: %w", name, err)
		}
		if c.DeletionTimestamp != nil {
			return nil
		}
		labels, changed := disruption.DemoteLabels(c.Labels)
		if !changed {
			return nil
		}
		c.Labels = labels
		_, err = w.UpdateNodeClaim(ctx, c)
		var conflict *ddbstore.ConflictError
		switch {
		case errors.As(err, &conflict):
			lastErr = err
			continue
		case errors.Is(err, ddbstore.ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("update nodeclaim %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("update nodeclaim %s: %d attempts: %w", name, driftConditionAttempts, lastErr)
}
