package kube_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/shared/kube"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var (
	nodesResource = schema.GroupResource{Resource: "nodes"}
	podsResource  = schema.GroupResource{Resource: "pods"}
)

// newNode returns a Node with a fixed UID and resourceVersion.
func newNode(name string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withTaints(taints ...corev1.Taint) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = taints }
}

func withLabel(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
	}
}

// newPod returns a running pod on node-a, created an hour before t0, with a
// UID derived from its name.
func newPod(namespace, name string, opts ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         namespace,
			Name:              name,
			UID:               types.UID("uid-" + namespace + "-" + name),
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
		},
		Spec:   corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func onNode(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = name }
}

func ownedBy(apiVersion, kind string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "uid-owner"})
	}
}

func daemonSetPod(p *corev1.Pod) { ownedBy("apps/v1", "DaemonSet")(p) }

func priorityClass(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = name }
}

func tolerating(t corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, t) }
}

func annotated(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

func deleted(at time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ts := metav1.NewTime(at)
		p.DeletionTimestamp = &ts
	}
}

// newClient returns a Client without retry pauses over a fake clientset
// holding objs.
func newClient(objs ...runtime.Object) (*kube.Client, *fake.Clientset) {
	cs := fake.NewClientset(objs...)
	return kube.WithoutBackoff(kube.NewFromClientset(cs)), cs
}

// actions returns the recorded actions with the given verb and resource.
func actions(cs *fake.Clientset, verb, resource string) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range cs.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			out = append(out, a)
		}
	}
	return out
}

// failWith makes every verb on resource fail with err.
func failWith(cs *fake.Clientset, verb, resource string, err error) {
	cs.PrependReactor(verb, resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, err
	})
}

// pager serves a list of n items in pages of the requested limit, with the
// offset as continue token. The calls listed in expireAt (counted from 1)
// answer 410 Gone instead, as a server does when a continue token outlived
// its snapshot.
type pager struct {
	n        int
	expireAt map[int]bool
	calls    int
	opts     []metav1.ListOptions
}

func (p *pager) page(o metav1.ListOptions) (from, to int, next string, err error) {
	p.calls++
	p.opts = append(p.opts, o)
	if p.expireAt[p.calls] {
		return 0, 0, "", apierrors.NewResourceExpired("continue token expired")
	}
	if o.Continue != "" {
		from, err = strconv.Atoi(o.Continue)
		if err != nil {
			return 0, 0, "", fmt.Errorf("bad continue %q", o.Continue)
		}
	}
	to = p.n
	if o.Limit > 0 && int(o.Limit) < p.n-from {
		to = from + int(o.Limit)
		next = strconv.Itoa(to)
	}
	return from, to, next, nil
}

// serveNodes installs p as the nodes list on cs, with nodes named
// node-00000, node-00001, ...
func (p *pager) serveNodes(cs *fake.Clientset) {
	cs.PrependReactor("list", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		from, to, next, err := p.page(a.(clienttesting.ListActionImpl).GetListOptions())
		if err != nil {
			return true, nil, err
		}
		l := &corev1.NodeList{ListMeta: metav1.ListMeta{Continue: next}}
		for i := from; i < to; i++ {
			l.Items = append(l.Items, *newNode(fmt.Sprintf("node-%05d", i)))
		}
		return true, l, nil
	})
}

// nodeNames returns the names of nodes.
func nodeNames(nodes []corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// podNames returns namespace/name of pods.
func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func mustGetNode(t *testing.T, cs *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s from the fake: %v", name, err)
	}
	return n
}
