package decider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/termination"
)

// ErrNoClusterState is Replace's error when there is no current snapshot
// or configuration to plan from.
var ErrNoClusterState = errors.New("no current cluster state")

// ErrNoIdentity is Replace's error for a request without the caller's
// identity: every manual replacement is audited.
var ErrNoIdentity = errors.New("the caller's identity is required")

// ReplaceRequest is an operator's request to replace nodes by hand.
type ReplaceRequest struct {
	disruption.ManualRequest
	// DryRun plans and reports without starting anything.
	DryRun bool
	// RequestedBy is the caller's IAM ARN (API Gateway's request
	// context); required.
	RequestedBy string
}

// ReplaceResult is what Replace planned and, unless DryRun, started.
type ReplaceResult struct {
	Now      time.Time `json:"now"`
	Snapshot string    `json:"snapshot"`
	DryRun   bool      `json:"dryRun"`
	// Plan is disruption.Manual's plan: the commands, the report per node
	// and the budgets, reported, not consumed.
	Plan disruption.ManualPlan `json:"plan"`
	// Started lists the executions, in Plan.Commands' order; none on a
	// dry run.
	Started []Started `json:"started"`
	// Warnings name what was left out of the plan's input.
	Warnings []string `json:"warnings,omitempty"`
}

// Replace plans the manual replacement req asks for over the same input
// an evaluation reads (disruption.Manual) and, unless req.DryRun, starts
// one Manual execution per command (termination.PrepareManual), named by
// the request alone: a retried or redelivered request starts nothing new
// (ExecutionAlreadyExists is success, Started.AlreadyExisted), even once
// its executions have claimed or begun deleting the nodes
// (termination.ManualInFlight; their stored replacements are not written
// again). A node adopted from Karpenter while Karpenter's controller is
// active is refused, as evaluations hold such nodes.
//
// Errors: ErrNoIdentity, ErrNoClusterState, *disruption.RefusedError
// (nothing started), errors wrapping disruption.ErrInvalidManualRequest,
// and store or start failures (a start failure leaves the executions
// before it started; retrying the request completes it).
func (h *Handler) Replace(ctx context.Context, req ReplaceRequest) (ReplaceResult, error) {
	now := h.d.Now()
	out := ReplaceResult{Now: now.UTC(), DryRun: req.DryRun, Started: []Started{}}
	if req.RequestedBy == "" {
		return out, ErrNoIdentity
	}
	snap, err := h.d.Store.CurrentSnapshot(ctx, now)
	if errors.Is(err, ddbstore.ErrNotFound) {
		return out, fmt.Errorf("%w: the forwarder has not posted a snapshot within the snapshot TTL", ErrNoClusterState)
	}
	if err != nil {
		return out, fmt.Errorf("read snapshot: %w", err)
	}
	out.Snapshot = snap.ID
	cfg, err := h.d.Store.GetConfig(ctx)
	if errors.Is(err, ddbstore.ErrNotFound) {
		return out, fmt.Errorf("%w: no NodePools or EC2NodeClasses synced yet", ErrNoClusterState)
	}
	if err != nil {
		return out, fmt.Errorf("read config: %w", err)
	}
	in, warnings, err := h.input(ctx, now, snap, cfg.Config)
	out.Warnings = warnings
	if err != nil {
		return out, err
	}
	var own []string
	in.NodeClaims, own = termination.ManualInFlight(in.NodeClaims, req.ManualRequest, now)
	in.InFlight = termination.InFlight(in.NodeClaims, now)
	in.HeldReplacements = termination.HeldReplacements(in.NodeClaims, in.InFlight)
	plan, err := disruption.Manual(ctx, in, req.ManualRequest)
	if err != nil {
		return out, err
	}
	if _, held := disruption.HoldAdopted(plan.Commands, in.NodeClaims, snap.KarpenterActive); len(held) > 0 {
		refused := &disruption.RefusedError{}
		for _, cmd := range held {
			refused.Refusals = append(refused.Refusals, disruption.Refusal{Node: cmd.Candidates[0].Node,
				Reason: "adopted from Karpenter, whose controller is active (" + snap.KarpenterActive + "): two autoscalers must never act on one node"})
		}
		return out, refused
	}
	out.Plan = plan
	if req.DryRun {
		return out, nil
	}
	for _, cmd := range plan.Commands {
		ex := termination.PrepareManual(cmd, plan.Budgets, req.ManualRequest, req.RequestedBy, now)
		if lease := int(h.cfg.BudgetLease / time.Second); lease > 0 {
			ex.Input.Settings.LeaseSeconds = lease
		}
		s := Started{Execution: ex.Name, Method: ex.Input.Method, NodePool: ex.Input.NodePool, Candidates: []string{}}
		for _, c := range ex.Input.Candidates {
			s.Candidates = append(s.Candidates, c.NodeClaim)
		}
		if len(ex.Replacements) > 0 && !slices.Contains(own, cmd.Candidates[0].NodeClaim) {
			data, err := termination.EncodeReplacements(ex.Replacements)
			if err != nil {
				return out, err
			}
			if err := h.d.Store.PutPayload(ctx, ex.Input.CommandRef, data, now, CommandTTL); err != nil {
				return out, fmt.Errorf("start %s: %w", ex.Name, err)
			}
		}
		exe, err := h.d.Starter.Start(ctx, ex.Name, ex.Input)
		if err != nil {
			return out, fmt.Errorf("start %s: %w", ex.Name, err)
		}
		s.AlreadyExisted = exe.AlreadyExisted
		out.Started = append(out.Started, s)
		h.d.Log.InfoContext(ctx, "manual replacement started", "execution", ex.Name, "arn", exe.ARN, "already-existed", exe.AlreadyExisted,
			"requested-by", req.RequestedBy, "nodepool", ex.Input.NodePool, "candidates", s.Candidates, "replacements", len(ex.Replacements))
	}
	return out, nil
}
