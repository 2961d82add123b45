package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// UsePodGracePeriod is the grace period that, passed to Evict or DeletePod,
// keeps the pod's own spec.terminationGracePeriodSeconds.
const UsePodGracePeriod time.Duration = -1

// EvictionOutcome is how the API server answered an eviction request.
type EvictionOutcome string

// Eviction outcomes (karpenter-spec 5.2; Karpenter's eviction queue reacts
// to the same three answers).
const (
	// Evicted: the server accepted the eviction and the pod is now
	// terminating. The drain waits for it to disappear.
	Evicted EvictionOutcome = "Evicted"
	// EvictionBlocked: HTTP 429, a PodDisruptionBudget does not allow the
	// disruption now. Retry later, with backoff.
	EvictionBlocked EvictionOutcome = "Blocked"
	// PodGone: HTTP 404, or 409 because the pod of that name now has
	// another UID. The pod that was meant is gone; nothing is left to do.
	PodGone EvictionOutcome = "PodGone"
)

// Eviction is the answer to one eviction request.
type Eviction struct {
	Outcome EvictionOutcome
	// Message is the API server's explanation when Outcome is
	// EvictionBlocked (which budget, how many disruptions it allows), for
	// an event or a log line; empty otherwise.
	Message string
}

// Evict asks the API server to evict pod through the policy/v1 Eviction
// subresource, which honours PodDisruptionBudgets. The request carries the
// pod's UID as a precondition, so a new pod that took the same name (a
// StatefulSet replica) is never evicted by mistake. gracePeriod overrides
// the pod's termination grace period, rounded up to whole seconds (0 means
// at once); pass UsePodGracePeriod to keep the pod's own.
//
// The three expected answers come back with a nil error as an Eviction
// (see EvictionOutcome). Anything else (for instance HTTP 500 for a pod
// covered by several budgets, or a network failure) is returned as an error
// with a zero Eviction; the caller retries it later.
func (c *Client) Evict(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) (Eviction, error) {
	if pod == nil {
		return Eviction{}, errors.New("evict pod: nil pod")
	}
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: deleteOptions(pod, gracePeriod),
	}
	err := c.cs.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev)
	switch {
	case err == nil:
		return Eviction{Outcome: Evicted}, nil
	case apierrors.IsTooManyRequests(err):
		return Eviction{Outcome: EvictionBlocked, Message: err.Error()}, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return Eviction{Outcome: PodGone}, nil
	default:
		return Eviction{}, fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
}

// DeletePod deletes pod directly, bypassing PodDisruptionBudgets and the
// do-not-disrupt annotation: Karpenter's forced deletion when a NodeClaim's
// terminationGracePeriod runs out (karpenter-spec 5.2: the caller computes
// gracePeriod as the time left, at least 1 s). gracePeriod is rounded up to
// whole seconds (0 deletes at once without waiting for the kubelet); pass
// UsePodGracePeriod to keep the pod's own. The pod's UID is a precondition.
// It is idempotent: a pod that is gone, or whose name now belongs to a pod
// with another UID, is success.
func (c *Client) DeletePod(ctx context.Context, pod *corev1.Pod, gracePeriod time.Duration) error {
	if pod == nil {
		return errors.New("delete pod: nil pod")
	}
	err := c.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, *deleteOptions(pod, gracePeriod))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func deleteOptions(pod *corev1.Pod, gracePeriod time.Duration) *metav1.DeleteOptions {
	o := &metav1.DeleteOptions{}
	if pod.UID != "" {
		uid := pod.UID
		o.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if gracePeriod >= 0 {
		s := int64((gracePeriod + time.Second - 1) / time.Second)
		o.GracePeriodSeconds = &s
	}
	return o
}

// ListPodsOnNode returns every pod bound to the Node called node, in all
// namespaces, selected on the server with the field selector
// spec.nodeName=<node> and read in pages of ListPageSize. Pods of other
// nodes are never returned. A Node with no pods, or no such Node, yields an
// empty list.
func (c *Client) ListPodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	if node == "" {
		return nil, errors.New("list pods on node: empty node name")
	}
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()}
	pods, err := listAll(ctx, opts, func(ctx context.Context, o metav1.ListOptions) ([]corev1.Pod, string, error) {
		l, err := c.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	kept := pods[:0]
	for _, p := range pods {
		if p.Spec.NodeName == node {
			kept = append(kept, p)
		}
	}
	return kept, nil
}
