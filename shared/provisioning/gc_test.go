package provisioning_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// gcClaim is a NodeClaim created at t0 whose conditions were initialized
// Unknown then, as Provision writes them; launched and registered set those
// conditions True at t0 too.
func gcClaim(name string, launched, registered bool) v1.NodeClaim {
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionUnknown
	}
	c := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", CreationTimestamp: metav1.NewTime(t0)},
		Status: v1.NodeClaimStatus{Conditions: []metav1.Condition{
			{Type: v1.ConditionTypeLaunched, Status: status(launched), Reason: "x", LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1.ConditionTypeRegistered, Status: status(registered), Reason: "x", LastTransitionTime: metav1.NewTime(t0)},
		}},
	}
	if launched {
		c.Status.ProviderID = "aws:///us-east-1a/i-" + name
	}
	if registered {
		c.Status.NodeName = "node-" + name
	}
	return c
}

func gcNode(name, providerID string, ready bool) corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	}
}

// gcInstance is a running instance nodewright launched (the cluster's
// launch tags and its ownership mark), launched at launched.
func gcInstance(id string, launched time.Time) launch.Instance {
	return launch.Instance{
		ID: id, Zone: "us-east-1a", State: "running", LaunchTime: launched,
		Tags: map[string]string{
			v1.TagKeyEKSClusterName: testCluster, v1.TagKeyClusterPrefix + testCluster: "owned",
			v1.TagKeyNodePool: "default", v1.TagKeyEC2NodeClass: "default", v1.TagKeyOwner: testCluster,
		},
	}
}

// karpenterInstance is a running instance Karpenter launched for the
// cluster, with the tags Karpenter's launch and post-registration tagging
// give it (aws: pkg/utils/utils.go GetTags, pkg/controllers/nodeclaim/
// tagging; EC2's aws:ec2launchtemplate:* tags) and no nodewright mark.
func karpenterInstance(id string, launched time.Time) launch.Instance {
	return launch.Instance{
		ID: id, Zone: "us-east-1a", State: "running", LaunchTime: launched,
		Tags: map[string]string{
			v1.TagKeyClusterPrefix + testCluster: "owned",
			v1.TagKeyEKSClusterName:              testCluster,
			v1.TagKeyNodePool:                    "default",
			v1.TagKeyEC2NodeClass:                "default",
			v1.TagKeyNodeClaim:                   "default-x7k2p",
			v1.TagKeyName:                        "ip-10-0-1-17.ec2.internal",
			"aws:ec2launchtemplate:id":           "lt-0a1b2c3d4e5f60718",
			"aws:ec2launchtemplate:version":      "1",
			"aws:ec2:fleet-id":                   "fleet-5b9d2e8a-1c3f-4a6e-9d7b-2f8c1e4a6b3d",
		},
	}
}

func TestPlanGarbageCollection(t *testing.T) {
	withDeletion := func(c v1.NodeClaim) v1.NodeClaim {
		ts := metav1.NewTime(t0)
		c.DeletionTimestamp = &ts
		return c
	}
	registered := gcClaim("reg", true, true)
	tests := []struct {
		name  string
		now   time.Time
		input provisioning.GCInput
		want  []provisioning.Cleanup
	}{
		{
			name:  "should keep a NodeClaim not launched after 4m59s",
			now:   t0.Add(4*time.Minute + 59*time.Second),
			input: provisioning.GCInput{NodeClaims: []v1.NodeClaim{gcClaim("a", false, false)}},
		},
		{
			name:  "should delete a NodeClaim not launched after exactly 5m",
			now:   t0.Add(5 * time.Minute),
			input: provisioning.GCInput{NodeClaims: []v1.NodeClaim{gcClaim("a", false, false)}},
			want:  []provisioning.Cleanup{{Reason: provisioning.CleanupLaunchTimeout, NodeClaim: "a", ResourceVersion: "1"}},
		},
		{
			name:  "should delete a NodeClaim not launched after 5m01s",
			now:   t0.Add(5*time.Minute + time.Second),
			input: provisioning.GCInput{NodeClaims: []v1.NodeClaim{gcClaim("a", false, false)}},
			want:  []provisioning.Cleanup{{Reason: provisioning.CleanupLaunchTimeout, NodeClaim: "a", ResourceVersion: "1"}},
		},
		{
			name: "should time the launch from the creation when the Launched condition is absent",
			now:  t0.Add(5*time.Minute + time.Second),
			input: provisioning.GCInput{NodeClaims: []v1.NodeClaim{func() v1.NodeClaim {
				c := gcClaim("a", false, false)
				c.Status.Conditions = nil
				return c
			}()}},
			want: []provisioning.Cleanup{{Reason: provisioning.CleanupLaunchTimeout, NodeClaim: "a", ResourceVersion: "1"}},
		},
		{
			name: "should keep a launched NodeClaim not registered after 14m59s",
			now:  t0.Add(14*time.Minute + 59*time.Second),
			input: provisioning.GCInput{
				NodeClaims: []v1.NodeClaim{gcClaim("b", true, false)},
				Instances:  []launch.Instance{gcInstance("i-b", t0)},
			},
		},
		{
			name: "should delete a launched NodeClaim not registered after 15m01s, with its instance and Node",
			now:  t0.Add(15*time.Minute + time.Second),
			input: provisioning.GCInput{
				NodeClaims: []v1.NodeClaim{gcClaim("b", true, false)},
				Nodes:      []corev1.Node{gcNode("node-b", "aws:///us-east-1a/i-b", false)},
				Instances:  []launch.Instance{gcInstance("i-b", t0)},
			},
			want: []provisioning.Cleanup{{Reason: provisioning.CleanupRegistrationTimeout, NodeClaim: "b", ResourceVersion: "1", InstanceID: "i-b", Node: "node-b"}},
		},
		{
			name: "should keep an instance without NodeClaim 29s after launch",
			now:  t0.Add(29 * time.Second),
			input: provisioning.GCInput{
				Instances: []launch.Instance{gcInstance("i-leak", t0)},
			},
		},
		{
			name: "should keep an instance without NodeClaim exactly 30s after launch",
			now:  t0.Add(30 * time.Second),
			input: provisioning.GCInput{
				Instances: []launch.Instance{gcInstance("i-leak", t0)},
			},
		},
		{
			name: "should terminate an instance without NodeClaim 31s after launch, and delete its Node",
			now:  t0.Add(31 * time.Second),
			input: provisioning.GCInput{
				Nodes:     []corev1.Node{gcNode("node-leak", "aws:///us-east-1a/i-leak", true)},
				Instances: []launch.Instance{gcInstance("i-leak", t0)},
			},
			want: []provisioning.Cleanup{{Reason: provisioning.CleanupLeakedInstance, InstanceID: "i-leak", Node: "node-leak"}},
		},
		{
			name: "should never terminate an instance without the cluster's tags",
			now:  t0.Add(time.Hour),
			input: provisioning.GCInput{Instances: []launch.Instance{
				func() launch.Instance {
					i := gcInstance("i-other-cluster", t0)
					i.Tags[v1.TagKeyEKSClusterName] = "other"
					return i
				}(),
				func() launch.Instance {
					i := gcInstance("i-no-pool", t0)
					delete(i.Tags, v1.TagKeyNodePool)
					return i
				}(),
			}},
		},
		{
			name: "should never terminate a day-old instance Karpenter launched (no ownership mark), nor delete its Node",
			now:  t0.Add(24 * time.Hour),
			input: provisioning.GCInput{
				Nodes: []corev1.Node{
					gcNode("ip-10-0-1-17.ec2.internal", "aws:///us-east-1a/i-karpenter-ready", true),
					gcNode("ip-10-0-1-18.ec2.internal", "aws:///us-east-1a/i-karpenter-notready", false),
				},
				Instances: []launch.Instance{karpenterInstance("i-karpenter-ready", t0), karpenterInstance("i-karpenter-notready", t0)},
			},
		},
		{
			name: "should never terminate an instance whose ownership mark names another cluster",
			now:  t0.Add(time.Hour),
			input: provisioning.GCInput{Instances: []launch.Instance{func() launch.Instance {
				i := gcInstance("i-other-owner", t0)
				i.Tags[v1.TagKeyOwner] = "other"
				return i
			}()}},
		},
		{
			name: "should terminate a leaked instance of nodewright's next to Karpenter's, and only it",
			now:  t0.Add(time.Hour),
			input: provisioning.GCInput{
				Nodes:     []corev1.Node{gcNode("node-k", "aws:///us-east-1a/i-k", true), gcNode("node-leak", "aws:///us-east-1a/i-leak", true)},
				Instances: []launch.Instance{karpenterInstance("i-k", t0), gcInstance("i-leak", t0)},
			},
			want: []provisioning.Cleanup{{Reason: provisioning.CleanupLeakedInstance, InstanceID: "i-leak", Node: "node-leak"}},
		},
		{
			name: "should leave instances that are shutting down or terminated",
			now:  t0.Add(time.Hour),
			input: provisioning.GCInput{Instances: []launch.Instance{
				func() launch.Instance { i := gcInstance("i-1", t0); i.State = "shutting-down"; return i }(),
				func() launch.Instance { i := gcInstance("i-2", t0); i.State = "terminated"; return i }(),
			}},
		},
		{
			name: "should keep an instance whose nodeclaim tag names a NodeClaim still launching",
			now:  t0.Add(time.Minute),
			input: provisioning.GCInput{
				NodeClaims: []v1.NodeClaim{gcClaim("c", false, false)},
				Instances: []launch.Instance{func() launch.Instance {
					i := gcInstance("i-c", t0)
					i.Tags[v1.TagKeyNodeClaim] = "c"
					return i
				}()},
			},
		},
		{
			name: "should keep an instance a NodeClaim's providerID names",
			now:  t0.Add(time.Hour),
			input: provisioning.GCInput{
				NodeClaims: []v1.NodeClaim{registered},
				Nodes:      []corev1.Node{gcNode("node-reg", registered.Status.ProviderID, true)},
				Instances:  []launch.Instance{gcInstance("i-reg", t0)},
			},
		},
		{
			name: "should delete a registered NodeClaim whose instance is gone and whose Node is not Ready, with the Node",
			now:  t0.Add(time.Hour),
			input: provisioning.GCInput{
				NodeClaims: []v1.NodeClaim{registered},
				Nodes:      []corev1.Node{gcNode("node-reg", registered.Status.ProviderID, false)},
			},
			want: []provisioning.Cleanup{{Reason: provisioning.CleanupInstanceGone, NodeClaim: "reg", ResourceVersion: "1", Node: "node-reg"}},
		},
		{
			name: "should delete a registered NodeClaim whose instance is terminated and whose Node is gone",
			now:  t0.Add(time.Hour),
			input: provisioning.GCInput{
				NodeClaims: []v1.NodeClaim{registered},
				Instances:  []launch.Instance{func() launch.Instance { i := gcInstance("i-reg", t0); i.State = "terminated"; return i }()},
			},
			want: []provisioning.Cleanup{{Reason: provisioning.CleanupInstanceGone, NodeClaim: "reg", ResourceVersion: "1"}},
		},
		{
			name: "should keep a registered NodeClaim whose instance is gone while its Node is Ready",
			now:  t0.Add(time.Hour),
			input: provisioning.GCInput{
				NodeClaims: []v1.NodeClaim{registered},
				Nodes:      []corev1.Node{gcNode("node-reg", registered.Status.ProviderID, true)},
			},
		},
		{
			name:  "should leave NodeClaims being deleted to their deletion",
			now:   t0.Add(time.Hour),
			input: provisioning.GCInput{NodeClaims: []v1.NodeClaim{withDeletion(gcClaim("a", false, false)), withDeletion(gcClaim("b", true, false))}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.input
			in.Now, in.Cluster = tt.now, testCluster
			got := provisioning.PlanGarbageCollection(in)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("PlanGarbageCollection() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// gcEC2 lists and terminates instances.
type gcEC2 struct {
	mu         sync.Mutex
	instances  []launch.Instance
	terminated []string
	listErr    error
}

func (g *gcEC2) ListInstances(context.Context) ([]launch.Instance, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.listErr != nil {
		return nil, g.listErr
	}
	var out []launch.Instance
	for _, i := range g.instances {
		if !slices.Contains(g.terminated, i.ID) {
			out = append(out, i)
		}
	}
	return out, nil
}

func (g *gcEC2) TerminateInstance(_ context.Context, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if slices.Contains(g.terminated, id) {
		return fmt.Errorf("terminate %s: %w", id, v1.ErrNotFound)
	}
	g.terminated = append(g.terminated, id)
	return nil
}

// kube lists and deletes Nodes.
type kube struct {
	mu      sync.Mutex
	nodes   []corev1.Node
	deleted []string
}

func (k *kube) ListNodes(context.Context) ([]corev1.Node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []corev1.Node
	for _, n := range k.nodes {
		if !slices.Contains(k.deleted, n.Name) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (k *kube) DeleteNode(_ context.Context, name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.deleted = append(k.deleted, name)
	return nil
}

func TestCollectGarbage(t *testing.T) {
	s := newStore()
	notLaunched := gcClaim("a", false, false)
	notRegistered := gcClaim("b", true, false)
	s.put(notLaunched)
	s.put(notRegistered)
	ec2 := &gcEC2{instances: []launch.Instance{gcInstance("i-b", t0), gcInstance("i-leak", t0), karpenterInstance("i-karpenter", t0)}}
	k := &kube{nodes: []corev1.Node{gcNode("node-leak", "aws:///us-east-1a/i-leak", true), gcNode("node-karpenter", "aws:///us-east-1a/i-karpenter", true)}}
	c, err := provisioning.NewCollector(testCluster, s, ec2, k)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(16 * time.Minute)
	results, err := c.CollectGarbage(t.Context(), now)
	if err != nil {
		t.Fatalf("CollectGarbage() error = %v", err)
	}
	want := []provisioning.CleanupResult{
		{Cleanup: provisioning.Cleanup{Reason: provisioning.CleanupLaunchTimeout, NodeClaim: "a", ResourceVersion: "1"}},
		{Cleanup: provisioning.Cleanup{Reason: provisioning.CleanupLeakedInstance, InstanceID: "i-leak", Node: "node-leak"}},
		{Cleanup: provisioning.Cleanup{Reason: provisioning.CleanupRegistrationTimeout, NodeClaim: "b", ResourceVersion: "1", InstanceID: "i-b"}},
	}
	if diff := cmp.Diff(want, results); diff != "" {
		t.Errorf("CollectGarbage() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, s.deletes, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("NodeClaims deleted mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"i-b", "i-leak"}, ec2.terminated, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("instances terminated mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"node-leak"}, k.deleted); diff != "" {
		t.Errorf("Nodes deleted mismatch (-want +got):\n%s", diff)
	}

	// A second run finds nothing left to do.
	results, err = c.CollectGarbage(t.Context(), now.Add(time.Minute))
	if err != nil || len(results) != 0 {
		t.Errorf("second CollectGarbage() = %+v, %v; want nothing", results, err)
	}
}

// touchingStore changes a NodeClaim between GC's read and its delete.
type touchingStore struct{ *store }

func (s touchingStore) DeleteNodeClaim(ctx context.Context, name, rv string) error {
	c, _ := s.GetNodeClaim(ctx, name)
	c.Status.NodeName = "late-node"
	if _, err := s.UpdateNodeClaim(ctx, c); err != nil {
		return err
	}
	return s.store.DeleteNodeClaim(ctx, name, rv)
}

func TestCollectGarbageKeepsNodeClaimsThatChanged(t *testing.T) {
	s := newStore()
	s.put(gcClaim("b", true, false))
	ec2 := &gcEC2{instances: []launch.Instance{gcInstance("i-b", t0)}}
	c, _ := provisioning.NewCollector(testCluster, touchingStore{s}, ec2, &kube{})
	results, err := c.CollectGarbage(t.Context(), t0.Add(16*time.Minute))
	if err != nil {
		t.Fatalf("CollectGarbage() error = %v", err)
	}
	if len(results) != 1 || !results[0].Skipped {
		t.Fatalf("results = %+v, want one skipped cleanup", results)
	}
	if len(ec2.terminated) != 0 {
		t.Errorf("terminated %v, want nothing: the NodeClaim changed since it was read", ec2.terminated)
	}
}

func TestCollectGarbageErrors(t *testing.T) {
	s := newStore()
	s.put(gcClaim("a", false, false))
	ec2 := &gcEC2{listErr: errors.New("RequestLimitExceeded")}
	c, _ := provisioning.NewCollector(testCluster, s, ec2, &kube{})
	if _, err := c.CollectGarbage(t.Context(), t0.Add(time.Hour)); err == nil {
		t.Fatal("CollectGarbage() error = nil, want the list failure")
	}
	if len(s.deletes) != 0 {
		t.Errorf("deleted %v after a failed instance list, want nothing", s.deletes)
	}
}
