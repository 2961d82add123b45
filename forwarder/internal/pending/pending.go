// Package pending decides which pods need new capacity, with Karpenter's
// provisionable-pod rule (karpenter: pkg/utils/pod/scheduling.go
// IsProvisionable, karpenter-spec section 3.1), and feeds a batcher with
// triggers: on every pod or node event that matters, and again every 10 s
// while any pod stays provisionable or any node is being disrupted.
package pending

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// RetriggerInterval is how often pods that stay provisionable trigger a new
// batch (Karpenter's pod trigger requeues every 10 s).
const RetriggerInterval = 10 * time.Second

// Provisionable reports whether p waits for capacity: the kube-scheduler
// marked it PodScheduled=False with reason Unschedulable, it is not bound,
// not nominated for a node (preemption), not owned by a DaemonSet and not a
// mirror pod.
func Provisionable(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" &&
		p.Status.NominatedNodeName == "" &&
		failedToSchedule(p) &&
		!ownedByDaemonSet(p) &&
		!mirror(p)
}

// Reschedulable reports whether p, bound to a node that is leaving, must be
// placed elsewhere: it is active (neither terminal nor terminating), not
// owned by a DaemonSet and not a mirror pod (karpenter: pkg/utils/pod
// IsReschedulable).
func Reschedulable(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed &&
		p.DeletionTimestamp == nil &&
		!ownedByDaemonSet(p) &&
		!mirror(p)
}

// Leaving reports whether n is being disrupted or deleted: it carries the
// karpenter.sh/disrupted:NoSchedule taint or has a deletion timestamp.
func Leaving(n *corev1.Node) bool {
	return n.DeletionTimestamp != nil || v1.HasDisruptedTaint(n)
}

func failedToSchedule(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && (o.APIVersion == "apps/v1" || o.APIVersion == "extensions/v1beta1" || o.APIVersion == "apps/v1beta2") {
			return true
		}
	}
	return false
}

// mirror reports a static pod's API mirror: it has the mirror annotation or
// is owned by its Node.
func mirror(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "Node" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// PodLister lists pods from an informer cache (client-go's
// corelisters.PodLister satisfies it).
type PodLister interface {
	List(selector labels.Selector) ([]*corev1.Pod, error)
}

// NodeLister lists nodes from an informer cache.
type NodeLister interface {
	List(selector labels.Selector) ([]*corev1.Node, error)
}

// Collect returns what a batch carries now, as Karpenter's provisioner lists
// it at the start of a round: every provisionable pod, then every
// reschedulable pod bound to a leaving node, each group ordered by namespace
// and name. The pods are the lister's cached objects: do not modify them.
func Collect(pods PodLister, nodes NodeLister) ([]*corev1.Pod, error) {
	allNodes, err := nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	leaving := map[string]bool{}
	for _, n := range allNodes {
		if Leaving(n) {
			leaving[n.Name] = true
		}
	}
	allPods, err := pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var provisionable, moving []*corev1.Pod
	for _, p := range allPods {
		switch {
		case Provisionable(p):
			provisionable = append(provisionable, p)
		case p.Spec.NodeName != "" && leaving[p.Spec.NodeName] && Reschedulable(p):
			moving = append(moving, p)
		}
	}
	byName := func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	slices.SortFunc(provisionable, byName)
	slices.SortFunc(moving, byName)
	return append(provisionable, moving...), nil
}

// Clock is the time source of the re-trigger loop.
type Clock interface {
	After(d time.Duration) <-chan time.Time
}

// Trigger turns pod and node events into batcher triggers. Keys are
// "pod/<uid>" and "node/<name>".
type Trigger struct {
	pods  PodLister
	nodes NodeLister
	add   func(keys ...string)
	clock Clock
}

// NewTrigger returns a Trigger that calls add (a batcher's Add) with the keys
// of pods and nodes that need a batch.
func NewTrigger(pods PodLister, nodes NodeLister, add func(keys ...string), clock Clock) *Trigger {
	return &Trigger{pods: pods, nodes: nodes, add: add, clock: clock}
}

// Handlers returns informer event handlers for pods (podHandler) and nodes
// (nodeHandler). Deletions trigger nothing.
func (t *Trigger) Handlers() (podHandler, nodeHandler cache.ResourceEventHandler) {
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && Provisionable(p) {
			t.add("pod/" + string(p.UID))
		}
	}
	onNode := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && Leaving(n) {
			t.add("node/" + n.Name)
		}
	}
	podHandler = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onPod(obj) },
		UpdateFunc: func(_, obj any) { onPod(obj) },
	}
	nodeHandler = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onNode(obj) },
		UpdateFunc: func(_, obj any) { onNode(obj) },
	}
	return podHandler, nodeHandler
}

// Sweep triggers every pod that is provisionable and every node that is
// leaving, from the listers. It returns how many keys it added.
func (t *Trigger) Sweep() (int, error) {
	var keys []string
	pods, err := t.pods.List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods {
		if Provisionable(p) {
			keys = append(keys, "pod/"+string(p.UID))
		}
	}
	nodes, err := t.nodes.List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes {
		if Leaving(n) {
			keys = append(keys, "node/"+n.Name)
		}
	}
	t.add(keys...)
	return len(keys), nil
}

// Run sweeps every RetriggerInterval until ctx is done, then returns nil.
// A listing error ends Run with that error.
func (t *Trigger) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.clock.After(RetriggerInterval):
		}
		if _, err := t.Sweep(); err != nil {
			return err
		}
	}
}
