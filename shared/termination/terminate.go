package termination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// Terminate is StepTerminate: it terminates the candidates' instances
// (EC2 TerminateInstances; an instance already gone counts as terminated)
// and records InstanceTerminating=True on the NodeClaims that remain
// (karpenter-spec.md section 5.2). The instance of a NodeClaim that is
// gone is found from the candidate's providerID, or the interruption's
// instance ID. The state machines run it once Drain reports every node
// drained: pods gone and volumes detached, or the termination deadline
// passed (karpenter-spec section 5.2, checklist item 23). It is
// idempotent.
func (s *Service) Terminate(ctx context.Context, st workflow.DisruptionState, now time.Time) (workflow.NodesOutput, error) {
	out := workflow.NodesOutput{Nodes: []workflow.NodeOutcome{}}
	var ids []string
	for _, cand := range st.CandidateList() {
		o := workflow.NodeOutcome{NodeClaim: cand.NodeClaim, Node: cand.Node}
		providerID := cand.ProviderID
		c, err := s.updateClaim(ctx, cand.NodeClaim, func(c *v1.NodeClaim) (bool, error) {
			if conditionTrue(c, v1.ConditionTypeInstanceTerminating) {
				return false, nil
			}
			c.Status.Conditions = v1.SetCondition(c.Status.Conditions, v1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "", "", c.Generation, now)
			return true, nil
		})
		switch {
		case err == nil:
			if c.Status.ProviderID != "" {
				providerID = c.Status.ProviderID
			}
		case !errors.Is(err, v1.ErrNotFound):
			return out, fmt.Errorf("terminate: %w", err)
		}
		_, id, _ := v1.ParseProviderID(providerID)
		if id == "" && st.Interruption != nil && st.Interruption.NodeClaim == cand.NodeClaim {
			id = st.Interruption.InstanceID
		}
		if id == "" {
			o.Outcome = "no instance: never launched"
		} else {
			ids = append(ids, id)
			o.Outcome = "terminated " + id
		}
		out.Nodes = append(out.Nodes, o)
	}
	if len(ids) > 0 {
		if err := s.p.Instances.Terminate(ctx, ids...); err != nil {
			return out, fmt.Errorf("terminate instances %v: %w", ids, err)
		}
	}
	return out, nil
}

// Delete is StepDelete: for each candidate it removes the
// karpenter.sh/termination finalizer from the Node and deletes it, then
// deletes the NodeClaim from the store, the end of Karpenter's termination
// once the instance is gone (karpenter-spec.md section 5.2). What is
// already gone is success; a NodeClaim that changed meanwhile is re-read
// and deleted.
func (s *Service) Delete(ctx context.Context, st workflow.DisruptionState, _ time.Time) (workflow.NodesOutput, error) {
	out := workflow.NodesOutput{Nodes: []workflow.NodeOutcome{}}
	for _, cand := range st.CandidateList() {
		o := workflow.NodeOutcome{NodeClaim: cand.NodeClaim, Node: cand.Node}
		var did []string
		if cand.Node != "" {
			gone, err := s.deleteNode(ctx, cand.Node)
			if err != nil {
				return out, err
			}
			if gone {
				did = append(did, "node already gone")
			} else {
				did = append(did, "node deleted")
			}
		}
		gone, err := s.deleteClaim(ctx, cand.NodeClaim)
		if err != nil {
			return out, err
		}
		if gone {
			did = append(did, "nodeclaim already gone")
		} else {
			did = append(did, "nodeclaim deleted")
		}
		o.Outcome = strings.Join(did, ", ")
		out.Nodes = append(out.Nodes, o)
	}
	return out, nil
}

// deleteNode removes the termination finalizer and deletes the Node; it
// reports whether the Node was already gone.
func (s *Service) deleteNode(ctx context.Context, name string) (bool, error) {
	err := s.p.Nodes.UpdateNode(ctx, name, func(n *corev1.Node) error {
		n.Finalizers = slices.DeleteFunc(slices.Clone(n.Finalizers), func(f string) bool { return f == v1.TerminationFinalizer })
		if len(n.Finalizers) == 0 {
			n.Finalizers = nil
		}
		return nil
	})
	if errors.Is(err, v1.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete node %s: %w", name, err)
	}
	if err := s.p.Nodes.DeleteNode(ctx, name); err != nil {
		return false, fmt.Errorf("delete node %s: %w", name, err)
	}
	return false, nil
}

// deleteClaim deletes a stored NodeClaim, re-reading on conflicts; it
// reports whether it was already gone.
func (s *Service) deleteClaim(ctx context.Context, name string) (bool, error) {
	var lastErr error
	for range updateAttempts {
		c, err := s.p.Claims.GetNodeClaim(ctx, name)
		if errors.Is(err, v1.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("delete nodeclaim %s: %w", name, err)
		}
		err = s.p.Claims.DeleteNodeClaim(ctx, name, c.ResourceVersion)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, v1.ErrNotFound):
			return true, nil
		case errors.Is(err, v1.ErrConflict):
			lastErr = err
			continue
		default:
			return false, fmt.Errorf("delete nodeclaim %s: %w", name, err)
		}
	}
	return false, fmt.Errorf("delete nodeclaim %s: %d attempts: %w", name, updateAttempts, lastErr)
}
