package kube_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/kube"
)

var errBoom = errors.New("boom")

func TestGetNode(t *testing.T) {
	c, _ := newClient(newNode("node-a", withLabel("team", "x")), newNode("node-b"))
	got, err := c.GetNode(t.Context(), "node-a")
	if err != nil {
		t.Fatalf("GetNode() error = %v", err)
	}
	if diff := cmp.Diff(map[string]string{"team": "x"}, got.Labels); got.Name != "node-a" || diff != "" {
		t.Errorf("GetNode() = %s with labels diff (-want +got):\n%s", got.Name, diff)
	}
}

func TestGetNodeErrors(t *testing.T) {
	tests := []struct {
		name         string
		apiErr       error
		wantNotFound bool
	}{
		{name: "absent node matches ErrNotFound", wantNotFound: true},
		{name: "other API error does not match ErrNotFound", apiErr: apierrors.NewInternalError(errBoom)},
		{name: "forbidden is an error, not absence", apiErr: apierrors.NewForbidden(nodesResource, "node-a", errBoom)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient()
			if tt.apiErr != nil {
				failWith(cs, "get", "nodes", tt.apiErr)
			}
			got, err := c.GetNode(t.Context(), "node-a")
			if err == nil {
				t.Fatalf("GetNode() = %v, want an error", got)
			}
			if errors.Is(err, kube.ErrNotFound) != tt.wantNotFound {
				t.Errorf("GetNode() error = %v, errors.Is(ErrNotFound) = %t, want %t", err, !tt.wantNotFound, tt.wantNotFound)
			}
		})
	}
}

func TestListNodes(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		expireAt map[int]bool
		// wantContinues are the continue tokens of the requests, in order.
		wantContinues []string
	}{
		{name: "no nodes is one request and an empty list", n: 0, wantContinues: []string{""}},
		{name: "a single page is one request", n: 3, wantContinues: []string{""}},
		{name: "exactly one full page is one request", n: kube.ListPageSize, wantContinues: []string{""}},
		{name: "pages are followed to the end", n: 2*kube.ListPageSize + 7, wantContinues: []string{"", "500", "1000"}},
		{
			name: "an expired continue token restarts from the first page",
			n:    2*kube.ListPageSize + 7, expireAt: map[int]bool{2: true},
			wantContinues: []string{"", "500", "", "500", "1000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient()
			p := &pager{n: tt.n, expireAt: tt.expireAt}
			p.serveNodes(cs)
			got, err := c.ListNodes(t.Context())
			if err != nil {
				t.Fatalf("ListNodes() error = %v", err)
			}
			var want []string
			for i := range tt.n {
				want = append(want, fmt.Sprintf("node-%05d", i))
			}
			if diff := cmp.Diff(want, nodeNames(got)); diff != "" {
				t.Errorf("ListNodes() names mismatch (-want +got):\n%s", diff)
			}
			var continues []string
			for _, o := range p.opts {
				if o.Limit != kube.ListPageSize {
					t.Errorf("list request Limit = %d, want %d", o.Limit, kube.ListPageSize)
				}
				continues = append(continues, o.Continue)
			}
			if diff := cmp.Diff(tt.wantContinues, continues); diff != "" {
				t.Errorf("continue tokens mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListNodesErrors(t *testing.T) {
	tests := []struct {
		name     string
		expireAt map[int]bool
		apiErr   error
	}{
		{name: "API error on a later page fails the whole list", apiErr: apierrors.NewServiceUnavailable("etcd down")},
		{name: "continue token that keeps expiring gives up", expireAt: map[int]bool{2: true, 4: true, 6: true, 8: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient()
			p := &pager{n: 3 * kube.ListPageSize, expireAt: tt.expireAt}
			p.serveNodes(cs)
			if tt.apiErr != nil {
				calls := 0
				cs.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
					calls++
					if calls == 2 {
						return true, nil, tt.apiErr
					}
					return false, nil, nil
				})
			}
			got, err := c.ListNodes(t.Context())
			if err == nil {
				t.Fatalf("ListNodes() = %d nodes, want an error", len(got))
			}
			if got != nil {
				t.Errorf("ListNodes() returned %d nodes with its error, want none", len(got))
			}
		})
	}
}

func TestUpdateNode(t *testing.T) {
	tests := []struct {
		name   string
		node   *corev1.Node
		mutate func(*corev1.Node) error
		// conflicts is how many updates fail with 409 before one succeeds;
		// each conflict also adds label other=<n> as a competing writer would.
		conflicts   int
		wantLabels  map[string]string
		wantUpdates int
		wantMutates int
	}{
		{
			name: "writes the mutated copy",
			node: newNode("node-a"),
			mutate: func(n *corev1.Node) error {
				n.Labels = map[string]string{"karpenter.sh/registered": "true"}
				return nil
			},
			wantLabels: map[string]string{"karpenter.sh/registered": "true"}, wantUpdates: 1, wantMutates: 1,
		},
		{
			name:       "no write when the mutation changes nothing",
			node:       newNode("node-a", withLabel("team", "x")),
			mutate:     func(n *corev1.Node) error { n.Labels["team"] = "x"; return nil },
			wantLabels: map[string]string{"team": "x"}, wantUpdates: 0, wantMutates: 1,
		},
		{
			name: "no write when quantities differ only in notation",
			node: newNode("node-a", func(n *corev1.Node) {
				n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			}),
			mutate: func(n *corev1.Node) error {
				n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("2000m")
				return nil
			},
			wantUpdates: 0, wantMutates: 1,
		},
		{
			name: "retries a conflict on the fresh node and keeps the other writer's change",
			node: newNode("node-a"),
			mutate: func(n *corev1.Node) error {
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				n.Labels["mine"] = "yes"
				return nil
			},
			conflicts:   2,
			wantLabels:  map[string]string{"mine": "yes", "other": "2"},
			wantUpdates: 3, wantMutates: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.node)
			conflicted := 0
			cs.PrependReactor("update", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if conflicted >= tt.conflicts {
					return false, nil, nil
				}
				conflicted++
				obj, err := cs.Tracker().Get(a.GetResource(), "", tt.node.Name)
				if err != nil {
					t.Fatalf("competing read: %v", err)
				}
				other := obj.(*corev1.Node).DeepCopy()
				if other.Labels == nil {
					other.Labels = map[string]string{}
				}
				other.Labels["other"] = fmt.Sprint(conflicted)
				if err := cs.Tracker().Update(a.GetResource(), other, ""); err != nil {
					t.Fatalf("competing update: %v", err)
				}
				return true, nil, apierrors.NewConflict(nodesResource, tt.node.Name, errors.New("object was modified"))
			})
			mutates := 0
			err := c.UpdateNode(t.Context(), tt.node.Name, func(n *corev1.Node) error {
				mutates++
				return tt.mutate(n)
			})
			if err != nil {
				t.Fatalf("UpdateNode() error = %v", err)
			}
			if got := len(actions(cs, "update", "nodes")); got != tt.wantUpdates {
				t.Errorf("UpdateNode() sent %d updates, want %d", got, tt.wantUpdates)
			}
			if mutates != tt.wantMutates {
				t.Errorf("UpdateNode() called mutate %d times, want %d", mutates, tt.wantMutates)
			}
			if diff := cmp.Diff(tt.wantLabels, mustGetNode(t, cs, tt.node.Name).Labels); diff != "" {
				t.Errorf("stored labels mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdateNodeErrors(t *testing.T) {
	setLabel := func(n *corev1.Node) error { n.Labels = map[string]string{"a": "b"}; return nil }
	tests := []struct {
		name        string
		nodes       []runtime.Object
		mutate      func(*corev1.Node) error
		updateErr   func(ctx context.CancelFunc) error
		wantIs      error
		wantUpdates int
	}{
		{name: "absent node matches ErrNotFound and writes nothing", mutate: setLabel, wantIs: kube.ErrNotFound},
		{
			name: "node deleted between read and write matches ErrNotFound", nodes: []runtime.Object{newNode("node-a")}, mutate: setLabel,
			updateErr:   func(context.CancelFunc) error { return apierrors.NewNotFound(nodesResource, "node-a") },
			wantIs:      kube.ErrNotFound,
			wantUpdates: 1,
		},
		{
			name: "mutation error is returned and nothing is written", nodes: []runtime.Object{newNode("node-a")},
			mutate: func(n *corev1.Node) error { n.Labels = map[string]string{"a": "b"}; return errBoom },
			wantIs: errBoom,
		},
		{
			name: "conflict on every attempt gives up with ErrConflict", nodes: []runtime.Object{newNode("node-a")}, mutate: setLabel,
			updateErr:   func(context.CancelFunc) error { return apierrors.NewConflict(nodesResource, "node-a", errBoom) },
			wantIs:      kube.ErrConflict,
			wantUpdates: kube.UpdateAttempts,
		},
		{
			name: "other API error is not retried", nodes: []runtime.Object{newNode("node-a")}, mutate: setLabel,
			updateErr:   func(context.CancelFunc) error { return apierrors.NewForbidden(nodesResource, "node-a", errBoom) },
			wantUpdates: 1,
		},
		{
			name: "cancelled context stops the retries", nodes: []runtime.Object{newNode("node-a")}, mutate: setLabel,
			updateErr: func(cancel context.CancelFunc) error {
				cancel()
				return apierrors.NewConflict(nodesResource, "node-a", errBoom)
			},
			wantIs:      context.Canceled,
			wantUpdates: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.nodes...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.updateErr != nil {
				cs.PrependReactor("update", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.updateErr(cancel)
				})
			}
			err := c.UpdateNode(ctx, "node-a", tt.mutate)
			if err == nil {
				t.Fatal("UpdateNode() error = nil, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("UpdateNode() error = %v, want one matching %v", err, tt.wantIs)
			}
			if tt.wantIs == nil && (errors.Is(err, kube.ErrNotFound) || errors.Is(err, kube.ErrConflict)) {
				t.Errorf("UpdateNode() error = %v, want neither ErrNotFound nor ErrConflict", err)
			}
			if got := len(actions(cs, "update", "nodes")); got != tt.wantUpdates {
				t.Errorf("UpdateNode() sent %d updates, want %d", got, tt.wantUpdates)
			}
			for _, o := range tt.nodes {
				n := o.(*corev1.Node)
				if got := mustGetNode(t, cs, n.Name); got.Labels != nil {
					t.Errorf("stored node %s has labels %v, want none written", n.Name, got.Labels)
				}
			}
		})
	}
}

func TestJitteredBackoffStaysWithinHalfAndOneAndAHalfOfItsBase(t *testing.T) {
	for n := 1; n <= 8; n++ {
		base := min(25*time.Millisecond<<(n-1), 400*time.Millisecond)
		for range 200 {
			d := kube.JitteredBackoff(n)
			if d < base/2 || d >= base*3/2 {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v)", n, d, base/2, base*3/2)
			}
		}
	}
}

func TestDeleteNode(t *testing.T) {
	tests := []struct {
		name  string
		nodes []runtime.Object
	}{
		{name: "deletes an existing node", nodes: []runtime.Object{newNode("node-a"), newNode("node-b")}},
		{name: "absent node is success", nodes: []runtime.Object{newNode("node-b")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.nodes...)
			if err := c.DeleteNode(t.Context(), "node-a"); err != nil {
				t.Fatalf("DeleteNode() error = %v", err)
			}
			left, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"node-b"}, nodeNames(left.Items)); diff != "" {
				t.Errorf("nodes left mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeleteNodeErrors(t *testing.T) {
	c, cs := newClient(newNode("node-a"))
	failWith(cs, "delete", "nodes", apierrors.NewForbidden(nodesResource, "node-a", errBoom))
	err := c.DeleteNode(t.Context(), "node-a")
	if !apierrors.IsForbidden(err) {
		t.Errorf("DeleteNode() error = %v, want the forbidden error", err)
	}
}

func TestTaint(t *testing.T) {
	disrupted := v1.DisruptedTaint()
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name        string
		node        *corev1.Node
		taint       corev1.Taint
		wantTaints  []corev1.Taint
		wantUpdates int
	}{
		{
			name: "should add the disrupted taint to an untainted node", node: newNode("node-a"), taint: disrupted,
			wantTaints: []corev1.Taint{disrupted}, wantUpdates: 1,
		},
		{
			name: "keeps other taints and appends", node: newNode("node-a", withTaints(other)), taint: disrupted,
			wantTaints: []corev1.Taint{other, disrupted}, wantUpdates: 1,
		},
		{
			name: "no write when the taint is already there", node: newNode("node-a", withTaints(other, disrupted)), taint: disrupted,
			wantTaints: []corev1.Taint{other, disrupted}, wantUpdates: 0,
		},
		{
			name: "replaces the value of the same key and effect",
			node: newNode("node-a", withTaints(other)), taint: corev1.Taint{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule},
			wantTaints: []corev1.Taint{{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule}}, wantUpdates: 1,
		},
		{
			name: "same key with another effect is a second taint",
			node: newNode("node-a", withTaints(other)), taint: corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute},
			wantTaints:  []corev1.Taint{other, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}},
			wantUpdates: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.node)
			if err := c.Taint(t.Context(), "node-a", tt.taint); err != nil {
				t.Fatalf("Taint() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantTaints, mustGetNode(t, cs, "node-a").Spec.Taints); diff != "" {
				t.Errorf("taints mismatch (-want +got):\n%s", diff)
			}
			if got := len(actions(cs, "update", "nodes")); got != tt.wantUpdates {
				t.Errorf("Taint() sent %d updates, want %d", got, tt.wantUpdates)
			}
		})
	}
}

func TestTaintErrors(t *testing.T) {
	tests := []struct {
		name         string
		taint        corev1.Taint
		wantNotFound bool
		wantRequests int
	}{
		{name: "absent node matches ErrNotFound", taint: v1.DisruptedTaint(), wantNotFound: true, wantRequests: 1},
		{name: "taint without a key is refused before any request", taint: corev1.Taint{Effect: corev1.TaintEffectNoSchedule}},
		{name: "taint without an effect is refused before any request", taint: corev1.Taint{Key: "k"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient()
			err := c.Taint(t.Context(), "node-a", tt.taint)
			if err == nil {
				t.Fatal("Taint() error = nil, want an error")
			}
			if errors.Is(err, kube.ErrNotFound) != tt.wantNotFound {
				t.Errorf("Taint() error = %v, want ErrNotFound match %t", err, tt.wantNotFound)
			}
			if got := len(cs.Actions()); got != tt.wantRequests {
				t.Errorf("Taint() made %d requests, want %d", got, tt.wantRequests)
			}
		})
	}
}

func TestUntaint(t *testing.T) {
	disrupted := v1.DisruptedTaint()
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	disruptedExecute := corev1.Taint{Key: disrupted.Key, Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name        string
		node        *corev1.Node
		taint       corev1.Taint
		wantTaints  []corev1.Taint
		wantUpdates int
	}{
		{
			name: "should remove the disrupted taint and keep the others", node: newNode("node-a", withTaints(other, disrupted)), taint: disrupted,
			wantTaints: []corev1.Taint{other}, wantUpdates: 1,
		},
		{
			name: "removing the last taint leaves none", node: newNode("node-a", withTaints(disrupted)), taint: disrupted,
			wantUpdates: 1,
		},
		{
			name: "no write when the taint is absent", node: newNode("node-a", withTaints(other)), taint: disrupted,
			wantTaints: []corev1.Taint{other},
		},
		{
			name: "matches whatever the value", node: newNode("node-a", withTaints(other)), taint: corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule},
			wantUpdates: 1,
		},
		{
			name: "keeps the key under another effect", node: newNode("node-a", withTaints(disrupted, disruptedExecute)), taint: disrupted,
			wantTaints: []corev1.Taint{disruptedExecute}, wantUpdates: 1,
		},
		{
			name: "empty effect removes the key under every effect", node: newNode("node-a", withTaints(disrupted, other, disruptedExecute)),
			taint: corev1.Taint{Key: disrupted.Key}, wantTaints: []corev1.Taint{other}, wantUpdates: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.node)
			if err := c.Untaint(t.Context(), "node-a", tt.taint); err != nil {
				t.Fatalf("Untaint() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantTaints, mustGetNode(t, cs, "node-a").Spec.Taints); diff != "" {
				t.Errorf("taints mismatch (-want +got):\n%s", diff)
			}
			if got := len(actions(cs, "update", "nodes")); got != tt.wantUpdates {
				t.Errorf("Untaint() sent %d updates, want %d", got, tt.wantUpdates)
			}
		})
	}
}

func TestUntaintErrors(t *testing.T) {
	tests := []struct {
		name         string
		taint        corev1.Taint
		wantNotFound bool
	}{
		{name: "absent node matches ErrNotFound", taint: v1.DisruptedTaint(), wantNotFound: true},
		{name: "taint without a key is refused", taint: corev1.Taint{Effect: corev1.TaintEffectNoSchedule}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newClient()
			err := c.Untaint(t.Context(), "node-a", tt.taint)
			if err == nil {
				t.Fatal("Untaint() error = nil, want an error")
			}
			if errors.Is(err, kube.ErrNotFound) != tt.wantNotFound {
				t.Errorf("Untaint() error = %v, want ErrNotFound match %t", err, tt.wantNotFound)
			}
		})
	}
}

func TestCordon(t *testing.T) {
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	tests := []struct {
		name            string
		node            *corev1.Node
		cordon          bool
		wantUnscheduled bool
		wantUpdates     int
	}{
		{name: "cordon marks the node unschedulable", node: newNode("node-a"), cordon: true, wantUnscheduled: true, wantUpdates: 1},
		{name: "cordon of a cordoned node writes nothing", node: newNode("node-a", cordoned), cordon: true, wantUnscheduled: true},
		{name: "uncordon makes the node schedulable", node: newNode("node-a", cordoned), wantUpdates: 1},
		{name: "uncordon of a schedulable node writes nothing", node: newNode("node-a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(tt.node)
			var err error
			if tt.cordon {
				err = c.Cordon(t.Context(), "node-a")
			} else {
				err = c.Uncordon(t.Context(), "node-a")
			}
			if err != nil {
				t.Fatalf("error = %v", err)
			}
			if got := mustGetNode(t, cs, "node-a").Spec.Unschedulable; got != tt.wantUnscheduled {
				t.Errorf("spec.unschedulable = %t, want %t", got, tt.wantUnscheduled)
			}
			if got := len(actions(cs, "update", "nodes")); got != tt.wantUpdates {
				t.Errorf("sent %d updates, want %d", got, tt.wantUpdates)
			}
		})
	}
}

func TestCordonErrors(t *testing.T) {
	c, _ := newClient()
	for name, f := range map[string]func(context.Context, string) error{"Cordon": c.Cordon, "Uncordon": c.Uncordon} {
		if err := f(t.Context(), "node-a"); !errors.Is(err, kube.ErrNotFound) {
			t.Errorf("%s() of an absent node error = %v, want ErrNotFound", name, err)
		}
	}
}

func withProviderID(id string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.ProviderID = id }
}

func TestNodeByProviderID(t *testing.T) {
	c, _ := newClient(
		newNode("node-a", withProviderID("aws:///eu-west-1a/i-0aaa")),
		newNode("node-b", withProviderID("aws:///eu-west-1b/i-0bbb")),
		newNode("node-c"),
	)
	got, err := c.NodeByProviderID(t.Context(), "aws:///eu-west-1b/i-0bbb")
	if err != nil {
		t.Fatalf("NodeByProviderID() error = %v", err)
	}
	if got.Name != "node-b" {
		t.Errorf("NodeByProviderID() = %s, want node-b", got.Name)
	}
}

func TestNodeByProviderIDErrors(t *testing.T) {
	nodes := []runtime.Object{
		newNode("node-a", withProviderID("aws:///eu-west-1a/i-0aaa")),
		newNode("node-a2", withProviderID("aws:///eu-west-1a/i-0aaa")),
		newNode("node-c"),
	}
	tests := []struct {
		name       string
		providerID string
		listErr    error
		wantIs     error
	}{
		{name: "no node with the providerID matches ErrNotFound", providerID: "aws:///eu-west-1a/i-0zzz", wantIs: kube.ErrNotFound},
		{name: "two nodes with the providerID match ErrMultipleNodes", providerID: "aws:///eu-west-1a/i-0aaa", wantIs: kube.ErrMultipleNodes},
		{name: "empty providerID is refused (it would match unregistered nodes)", providerID: ""},
		{name: "list error", providerID: "aws:///eu-west-1a/i-0aaa", listErr: apierrors.NewServiceUnavailable("busy")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := newClient(nodes...)
			if tt.listErr != nil {
				failWith(cs, "list", "nodes", tt.listErr)
			}
			got, err := c.NodeByProviderID(t.Context(), tt.providerID)
			if err == nil {
				t.Fatalf("NodeByProviderID() = %s, want an error", got.Name)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("NodeByProviderID() error = %v, want one matching %v", err, tt.wantIs)
			}
			if tt.wantIs == nil && (errors.Is(err, kube.ErrNotFound) || errors.Is(err, kube.ErrMultipleNodes)) {
				t.Errorf("NodeByProviderID() error = %v, want neither sentinel", err)
			}
		})
	}
}
