package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GetNode returns the Node called name, or an error matching ErrNotFound
// when there is none.
func (c *Client) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get node %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return n, nil
}

// ListNodes returns every Node of the cluster, read in pages of
// ListPageSize from one consistent snapshot (a page sequence whose continue
// token expires is restarted). It fails rather than return a partial list.
func (c *Client) ListNodes(ctx context.Context) ([]corev1.Node, error) {
	nodes, err := listAll(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]corev1.Node, string, error) {
		l, err := c.cs.CoreV1().Nodes().List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return nodes, nil
}

// NodeByProviderID returns the Node whose spec.providerID is providerID
// (aws:///<zone>/<instance-id> on EKS), found by listing Nodes (the API
// server has no field selector on spec.providerID). It returns an error
// matching ErrNotFound when no Node has it, and one matching
// ErrMultipleNodes when several do (Karpenter then reports
// Registered=False MultipleNodesFound, karpenter-spec 5.1).
func (c *Client) NodeByProviderID(ctx context.Context, providerID string) (*corev1.Node, error) {
	if providerID == "" {
		return nil, errors.New("node by providerID: empty providerID")
	}
	nodes, err := c.ListNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("node by providerID %s: %w", providerID, err)
	}
	var found []corev1.Node
	for _, n := range nodes {
		if n.Spec.ProviderID == providerID {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("node by providerID %s: %w", providerID, ErrNotFound)
	case 1:
		return &found[0], nil
	default:
		return nil, fmt.Errorf("node by providerID %s: %d nodes: %w", providerID, len(found), ErrMultipleNodes)
	}
}

// UpdateNode reads the Node called name, applies mutate to a copy and, when
// the copy differs (semantically, as the API compares quantities), writes
// it with an Update carrying the read resourceVersion. When another writer
// got there first (409 Conflict) it reads again and re-applies mutate, for
// UpdateAttempts rounds in all with a jittered pause between them, then
// fails with an error matching ErrConflict.
//
// mutate may be called several times and must decide from the Node it is
// given; an error from it is returned (wrapped) and nothing is written. No
// request is written when mutate changes nothing. It returns an error
// matching ErrNotFound when the Node does not exist or was deleted between
// the read and the write. Only metadata and spec can change this way; status
// is a subresource and an Update ignores it.
func (c *Client) UpdateNode(ctx context.Context, name string, mutate func(*corev1.Node) error) error {
	var lastErr error
	for attempt := range UpdateAttempts {
		if attempt > 0 {
			if err := sleep(ctx, c.backoff(attempt)); err != nil {
				return fmt.Errorf("update node %s: %w", name, err)
			}
		}
		cur, err := c.GetNode(ctx, name)
		if err != nil {
			return fmt.Errorf("update node: %w", err)
		}
		next := cur.DeepCopy()
		if err := mutate(next); err != nil {
			return fmt.Errorf("update node %s: %w", name, err)
		}
		if equality.Semantic.DeepEqual(cur, next) {
			return nil
		}
		_, err = c.cs.CoreV1().Nodes().Update(ctx, next, metav1.UpdateOptions{})
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err):
			lastErr = err
			continue
		case apierrors.IsNotFound(err):
			return fmt.Errorf("update node %s: %w", name, ErrNotFound)
		default:
			return fmt.Errorf("update node %s: %w", name, err)
		}
	}
	return fmt.Errorf("update node %s: %w after %d attempts: %w", name, ErrConflict, UpdateAttempts, lastErr)
}

// DeleteNode deletes the Node called name. It is idempotent: a Node that
// is already gone is success. Deletion is asynchronous when the Node
// carries finalizers (karpenter.sh/termination); the Node then stays, with
// a deletionTimestamp, until they are removed.
func (c *Client) DeleteNode(ctx context.Context, name string) error {
	err := c.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	return nil
}

// Taint adds taint to the Node called name. A taint with the same key and
// effect already on the Node is replaced when its value differs (the API
// allows one taint per key and effect) and left alone otherwise, in which
// case nothing is written. TimeAdded is kept as given. It returns an error
// matching ErrNotFound when the Node does not exist.
//
// Karpenter taints disruption candidates and terminating Nodes with
// karpenter.sh/disrupted:NoSchedule (karpenter-spec 1.5, 5.2); see
// DisruptedTaint.
func (c *Client) Taint(ctx context.Context, node string, taint corev1.Taint) error {
	if taint.Key == "" || taint.Effect == "" {
		return fmt.Errorf("taint node %s: taint needs a key and an effect, got %q", node, taint.ToString())
	}
	err := c.UpdateNode(ctx, node, func(n *corev1.Node) error {
		for i, t := range n.Spec.Taints {
			if t.Key == taint.Key && t.Effect == taint.Effect {
				if t.Value != taint.Value {
					n.Spec.Taints[i].Value = taint.Value
				}
				return nil
			}
		}
		n.Spec.Taints = append(n.Spec.Taints, taint)
		return nil
	})
	if err != nil {
		return fmt.Errorf("taint: %w", err)
	}
	return nil
}

// Untaint removes from the Node called name every taint with taint's key
// and effect, whatever its value; an empty Effect removes the key under
// every effect. Nothing is written when no such taint is there. It returns
// an error matching ErrNotFound when the Node does not exist.
func (c *Client) Untaint(ctx context.Context, node string, taint corev1.Taint) error {
	if taint.Key == "" {
		return fmt.Errorf("untaint node %s: taint needs a key", node)
	}
	err := c.UpdateNode(ctx, node, func(n *corev1.Node) error {
		kept := n.Spec.Taints[:0:0]
		for _, t := range n.Spec.Taints {
			if t.Key == taint.Key && (taint.Effect == "" || t.Effect == taint.Effect) {
				continue
			}
			kept = append(kept, t)
		}
		if len(kept) == len(n.Spec.Taints) {
			return nil
		}
		if len(kept) == 0 {
			kept = nil
		}
		n.Spec.Taints = kept
		return nil
	})
	if err != nil {
		return fmt.Errorf("untaint: %w", err)
	}
	return nil
}

// Cordon marks the Node called name unschedulable (spec.unschedulable),
// as kubectl cordon does; nothing is written when it already is. It
// returns an error matching ErrNotFound when the Node does not exist.
func (c *Client) Cordon(ctx context.Context, node string) error {
	return c.setUnschedulable(ctx, node, true)
}

// Uncordon makes the Node called name schedulable again; nothing is
// written when it already is. It returns an error matching ErrNotFound when
// the Node does not exist.
func (c *Client) Uncordon(ctx context.Context, node string) error {
	return c.setUnschedulable(ctx, node, false)
}

func (c *Client) setUnschedulable(ctx context.Context, node string, v bool) error {
	err := c.UpdateNode(ctx, node, func(n *corev1.Node) error {
		n.Spec.Unschedulable = v
		return nil
	})
	if err != nil {
		if v {
			return fmt.Errorf("cordon: %w", err)
		}
		return fmt.Errorf("uncordon: %w", err)
	}
	return nil
}
