package termination

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/workflow"
)

// LaunchReplacements is StepLaunchReplacements: it reads the command's
// replacement NodeClaims (stored under CommandRef) and launches them
// through the provisioning launch path, which creates each create-only and
// reuses a stored one, so a repeated call launches nothing twice
// (karpenter-spec.md section 6.5: replacements first).
//
// Errors: workflow.ErrReplacementFailed when a replacement cannot launch
// now (insufficient capacity, its EC2NodeClass not ready, abandoned): the
// command is rolled back, as Karpenter fails a command whose replacement
// is deleted; workflow.ErrLaunchIncomplete when a launch failed otherwise
// (retry); workflow.ErrInvalidInput when the stored replacements are
// missing or do not match the state; workflow.ErrNoLongerEligible when the
// execution's claims or leases lapsed (it renews them first, before
// launching anything).
func (s *Service) LaunchReplacements(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.LaunchOutput, error) {
	out := workflow.LaunchOutput{Replacements: []workflow.ReplacementStatus{}}
	if len(st.Replacements) == 0 {
		return out, nil
	}
	if err := s.renew(ctx, st, now); err != nil {
		return out, err
	}
	if s.p.Commands == nil || s.p.Launcher == nil {
		return out, errors.New("launch replacements: no command store or launcher")
	}
	planned, err := s.p.Commands.Replacements(ctx, st.CommandRef)
	if errors.Is(err, v1.ErrNotFound) {
		return out, workflow.NewError(workflow.ErrInvalidInput, fmt.Errorf("launch replacements: nothing stored under %q: %w", st.CommandRef, err))
	}
	if err != nil {
		return out, fmt.Errorf("launch replacements: read %s: %w", st.CommandRef, err)
	}
	if err := matchReplacements(st, planned); err != nil {
		return out, workflow.NewError(workflow.ErrInvalidInput, fmt.Errorf("launch replacements: %w", err))
	}
	results, err := s.p.Launcher.LaunchNodeClaims(ctx, planned, now)
	if err != nil {
		return out, fmt.Errorf("launch replacements: %w", err)
	}
	var failed, retry []string
	for _, r := range results {
		rs := workflow.ReplacementStatus{NodeClaim: r.NodeClaim, Status: string(r.Status), ProviderID: r.ProviderID, Detail: r.Reason}
		out.Replacements = append(out.Replacements, rs)
		switch r.Status {
		case launch.Launched, launch.AlreadyLaunched:
		case launch.LaunchFailed:
			retry = append(retry, r.NodeClaim+": "+r.Reason)
		default:
			failed = append(failed, fmt.Sprintf("%s: %s: %s", r.NodeClaim, r.Status, r.Reason))
		}
	}
	if len(failed) > 0 {
		return out, workflow.NewError(workflow.ErrReplacementFailed, fmt.Errorf("replacements cannot launch: %s", strings.Join(failed, "; ")))
	}
	if len(retry) > 0 {
		return out, workflow.NewError(workflow.ErrLaunchIncomplete, fmt.Errorf("replacements to launch again: %s", strings.Join(retry, "; ")))
	}
	return out, nil
}

// matchReplacements checks that the stored claims are the state's
// replacements, in order.
func matchReplacements(st workflow.DisruptionState, planned []v1.NodeClaim) error {
	if len(planned) != len(st.Replacements) {
		return fmt.Errorf("%d replacements stored under %s, the state lists %d", len(planned), st.CommandRef, len(st.Replacements))
	}
	for i := range planned {
		if planned[i].Name != st.Replacements[i].NodeClaim {
			return fmt.Errorf("replacement %d is %q in the store and %q in the state", i, planned[i].Name, st.Replacements[i].NodeClaim)
		}
	}
	return nil
}

// CheckReplacements is StepCheckReplacements: it renews the execution's
// claims and leases and reports whether every replacement NodeClaim is
// Initialized (karpenter-spec.md section 6.5: candidates go only once
// every replacement is initialized).
//
// Errors: workflow.ErrReplacementFailed when a replacement is gone or
// being deleted (its launch or registration failed and it was garbage
// collected) or when DecidedAt + ReplacementTimeoutSeconds has passed
// with a replacement not initialized (checklist item 32: the candidates
// are then untainted and kept).
func (s *Service) CheckReplacements(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.ReadinessOutput, error) {
	timeout := time.Duration(st.Settings.ReplacementTimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = ReplacementTimeout
	}
	out := workflow.ReadinessOutput{Replacements: []workflow.ReplacementStatus{}, Deadline: st.DecidedAt.Add(timeout).UTC()}
	if err := s.renew(ctx, st, now); err != nil {
		return out, err
	}
	ready := true
	var waiting []string
	for _, r := range st.Replacements {
		c, err := s.p.Claims.GetNodeClaim(ctx, r.NodeClaim)
		if errors.Is(err, v1.ErrNotFound) {
			return out, workflow.NewError(workflow.ErrReplacementFailed, fmt.Errorf("replacement %s was deleted: its launch or registration failed", r.NodeClaim))
		}
		if err != nil {
			return out, fmt.Errorf("check replacement %s: %w", r.NodeClaim, err)
		}
		if c.DeletionTimestamp != nil {
			return out, workflow.NewError(workflow.ErrReplacementFailed, fmt.Errorf("replacement %s is being deleted", r.NodeClaim))
		}
		rs := replacementStatus(&c)
		out.Replacements = append(out.Replacements, rs)
		if rs.Status != v1.ConditionTypeInitialized {
			ready = false
			waiting = append(waiting, r.NodeClaim+" ("+rs.Status+")")
		}
	}
	out.Ready = ready
	if !ready && !now.Before(out.Deadline) {
		return out, workflow.NewError(workflow.ErrReplacementFailed, fmt.Errorf("replacements not initialized within %v of the decision: %s", timeout, strings.Join(waiting, ", ")))
	}
	return out, nil
}

// replacementStatus summarizes a replacement's lifecycle: the last of
// Launched, Registered, Initialized that is True ("Created" before any).
func replacementStatus(c *v1.NodeClaim) workflow.ReplacementStatus {
	rs := workflow.ReplacementStatus{
		NodeClaim: c.Name, Status: "Created", ProviderID: c.Status.ProviderID, Node: c.Status.NodeName,
		InstanceType: c.Labels[v1.LabelInstanceType], Zone: c.Labels[v1.LabelTopologyZone], CapacityType: c.Labels[v1.LabelCapacityType],
	}
	for _, t := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
		if !conditionTrue(c, t) {
			break
		}
		rs.Status = t
	}
	return rs
}
