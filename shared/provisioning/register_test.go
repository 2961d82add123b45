package provisioning_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/provisioning"
)

const (
	regProviderID = "aws:///us-east-1a/i-0abc"
	regNodeName   = "ip-10-0-1-2.ec2.internal"
)

var (
	taintUnregistered = corev1.Taint{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}
	taintDedicated    = corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	taintStartup      = corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	taintNotReady     = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
)

// regClaim is a launched, unregistered NodeClaim with a template taint, a
// startup taint, a label and an annotation.
func regClaim(mut ...func(*v1.NodeClaim)) v1.NodeClaim {
	c := launchedClaim("default-abc", regProviderID, "m5.large", "1930m")
	c.Labels["team"] = "payments"
	c.Annotations = map[string]string{"example.com/owner": "payments", v1.AnnotationNodePoolHash: "123"}
	c.Spec.Taints = []corev1.Taint{taintDedicated}
	c.Spec.StartupTaints = []corev1.Taint{taintStartup}
	c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("1")}
	c.ResourceVersion = "3"
	for _, m := range mut {
		m(&c)
	}
	return c
}

// regNode is a Node as the kubelet registers it: the unregistered taint,
// labels from user data, not Ready yet.
func regNode(mut ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: regNodeName, Labels: map[string]string{
			v1.LabelNodePool: "default", "team": "kubelet-value", v1.LabelHostname: regNodeName,
		}},
		Spec: corev1.NodeSpec{ProviderID: regProviderID, Taints: []corev1.Taint{taintUnregistered}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourcePods: resource.MustParse("29")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}},
		},
	}
	for _, m := range mut {
		m(n)
	}
	return n
}

func TestRegisterSyncsTheNode(t *testing.T) {
	claim := regClaim()
	wantLabels := map[string]string{
		"team": "payments", v1.LabelRegistered: "true", v1.LabelEC2NodeClass: "default",
		v1.LabelInstanceType: "m5.large", v1.LabelTopologyZone: "us-east-1a", v1.LabelCapacityType: v1.CapacityTypeOnDemand,
		v1.LabelArch: "amd64", v1.LabelOS: "linux",
	}
	tests := []struct {
		name         string
		node         *corev1.Node
		want         provisioning.NodePatch
		wantWarnings []string
	}{
		{
			name: "should sync labels, annotations, taints and startup taints, and remove the unregistered taint",
			node: regNode(),
			want: provisioning.NodePatch{
				Node: regNodeName, Labels: wantLabels,
				Annotations:   map[string]string{"example.com/owner": "payments", v1.AnnotationNodePoolHash: "123"},
				AddTaints:     []corev1.Taint{taintDedicated, taintStartup},
				RemoveTaints:  []corev1.Taint{taintUnregistered},
				AddFinalizers: []string{v1.TerminationFinalizer},
			},
		},
		{
			name: "should not sync taints when the Node has karpenter.sh/do-not-sync-taints=true",
			node: regNode(func(n *corev1.Node) { n.Labels[v1.LabelDoNotSyncTaints] = "true" }),
			want: provisioning.NodePatch{
				Node: regNodeName, Labels: wantLabels,
				Annotations:   map[string]string{"example.com/owner": "payments", v1.AnnotationNodePoolHash: "123"},
				RemoveTaints:  []corev1.Taint{taintUnregistered},
				AddFinalizers: []string{v1.TerminationFinalizer},
			},
		},
		{
			name: "should add only what the Node lacks",
			node: regNode(func(n *corev1.Node) {
				n.Labels["team"] = "payments"
				n.Annotations = map[string]string{"example.com/owner": "payments"}
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule})
				n.Finalizers = []string{v1.TerminationFinalizer}
			}),
			want: provisioning.NodePatch{
				Node: regNodeName,
				Labels: map[string]string{
					v1.LabelRegistered: "true", v1.LabelEC2NodeClass: "default", v1.LabelInstanceType: "m5.large",
					v1.LabelTopologyZone: "us-east-1a", v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelArch: "amd64", v1.LabelOS: "linux",
				},
				Annotations:  map[string]string{v1.AnnotationNodePoolHash: "123"},
				AddTaints:    []corev1.Taint{taintStartup},
				RemoveTaints: []corev1.Taint{taintUnregistered},
			},
		},
		{
			name: "should warn UnregisteredTaintMissing when the kubelet did not register the taint",
			node: regNode(func(n *corev1.Node) { n.Spec.Taints = nil; n.Labels[v1.LabelDoNotSyncTaints] = "true" }),
			want: provisioning.NodePatch{
				Node: regNodeName, Labels: wantLabels,
				Annotations:   map[string]string{"example.com/owner": "payments", v1.AnnotationNodePoolHash: "123"},
				AddFinalizers: []string{v1.TerminationFinalizer},
			},
			wantWarnings: []string{"UnregisteredTaintMissing: node " + regNodeName + " registered without taint karpenter.sh/unregistered:NoExecute"},
		},
		{
			name: "should not sync again once the Node is labelled registered",
			node: regNode(func(n *corev1.Node) { n.Labels[v1.LabelRegistered] = "true"; n.Spec.Taints = nil }),
			want: provisioning.NodePatch{Node: regNodeName},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := provisioning.Register(tt.node, []v1.NodeClaim{launchedClaim("other", "aws:///us-east-1b/i-0other", "m5.large", "1930m"), claim}, t0)
			if err != nil {
				t.Fatalf("Register() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got.Patch, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Patch mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarnings, got.Warnings); diff != "" {
				t.Errorf("Warnings mismatch (-want +got):\n%s", diff)
			}
			if !got.Changed || got.NodeClaim.Status.NodeName != regNodeName {
				t.Errorf("Changed = %v, nodeName = %q; want the claim linked to %s", got.Changed, got.NodeClaim.Status.NodeName, regNodeName)
			}
			if c := conditionOf(got.NodeClaim, v1.ConditionTypeRegistered); c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("Registered = %s at %v, want True at %v", c.Status, c.LastTransitionTime, t0)
			}
			// Applying the patch twice equals applying it once.
			once := tt.node.DeepCopy()
			got.Patch.Apply(once)
			twice := once.DeepCopy()
			got.Patch.Apply(twice)
			if diff := cmp.Diff(once, twice); diff != "" {
				t.Errorf("Apply is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

func conditionOf(c v1.NodeClaim, t string) metav1.Condition {
	for _, cond := range c.Status.Conditions {
		if cond.Type == t {
			return cond
		}
	}
	return metav1.Condition{}
}

func TestRegisterInitializationGates(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	// registered is a Node already synced at registration.
	registered := func(mut ...func(*corev1.Node)) *corev1.Node {
		return regNode(append([]func(*corev1.Node){func(n *corev1.Node) {
			n.Labels[v1.LabelRegistered] = "true"
			n.Spec.Taints = nil
			n.Status.Conditions = ready
		}}, mut...)...)
	}
	gpu := corev1.ResourceName("nvidia.com/gpu")
	withGPURequest := func(c *v1.NodeClaim) { c.Spec.Resources.Requests[gpu] = resource.MustParse("1") }
	tests := []struct {
		name        string
		claim       v1.NodeClaim
		node        *corev1.Node
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{
			name: "should initialize a Ready node without startup or ephemeral taints", claim: regClaim(), node: registered(),
			wantStatus: metav1.ConditionTrue, wantReason: v1.ConditionTypeInitialized,
		},
		{
			name: "should not initialize a node that is not Ready", claim: regClaim(),
			node:       registered(func(n *corev1.Node) { n.Status.Conditions = nil }),
			wantStatus: metav1.ConditionUnknown, wantReason: provisioning.ReasonNodeNotReady, wantMessage: "Node status is NotReady",
		},
		{
			name: "should not initialize while a startup taint remains", claim: regClaim(),
			node:       registered(func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{taintStartup} }),
			wantStatus: metav1.ConditionUnknown, wantReason: provisioning.ReasonStartupTaintsExist,
			wantMessage: `StartupTaint "example.com/agent-not-ready:NoSchedule" still exists`,
		},
		{
			name: "should not initialize while a known ephemeral taint remains", claim: regClaim(),
			node:       registered(func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{taintNotReady} }),
			wantStatus: metav1.ConditionUnknown, wantReason: provisioning.ReasonKnownEphemeralTaintsExist,
			wantMessage: `KnownEphemeralTaint "node.kubernetes.io/not-ready:NoSchedule" still exists`,
		},
		{
			name: "should not initialize before a requested extended resource is registered", claim: regClaim(withGPURequest),
			node:       registered(),
			wantStatus: metav1.ConditionUnknown, wantReason: provisioning.ReasonResourceNotRegistered,
			wantMessage: `Resource "nvidia.com/gpu" was requested but not registered`,
		},
		{
			name: "should not initialize while a requested extended resource has zero allocatable", claim: regClaim(withGPURequest),
			node:       registered(func(n *corev1.Node) { n.Status.Allocatable[gpu] = resource.MustParse("0") }),
			wantStatus: metav1.ConditionUnknown, wantReason: provisioning.ReasonResourceNotRegistered,
			wantMessage: `Resource "nvidia.com/gpu" was requested but not registered`,
		},
		{
			name: "should initialize once the extended resource is allocatable", claim: regClaim(withGPURequest),
			node:       registered(func(n *corev1.Node) { n.Status.Allocatable[gpu] = resource.MustParse("1") }),
			wantStatus: metav1.ConditionTrue, wantReason: v1.ConditionTypeInitialized,
		},
		{
			name: "should wait for the startup taints the registration sync itself adds", claim: regClaim(),
			node:       regNode(func(n *corev1.Node) { n.Status.Conditions = ready }),
			wantStatus: metav1.ConditionUnknown, wantReason: provisioning.ReasonStartupTaintsExist,
			wantMessage: `StartupTaint "example.com/agent-not-ready:NoSchedule" still exists`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := provisioning.Register(tt.node, []v1.NodeClaim{tt.claim}, t0)
			if err != nil {
				t.Fatalf("Register() error = %v", err)
			}
			c := conditionOf(got.NodeClaim, v1.ConditionTypeInitialized)
			if c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.Message != tt.wantMessage {
				t.Errorf("Initialized = %s/%s %q, want %s/%s %q", c.Status, c.Reason, c.Message, tt.wantStatus, tt.wantReason, tt.wantMessage)
			}
			wantLabel := ""
			if tt.wantStatus == metav1.ConditionTrue {
				wantLabel = "true"
			}
			if got := got.Patch.Labels[v1.LabelInitialized]; got != wantLabel {
				t.Errorf("patch label %s = %q, want %q", v1.LabelInitialized, got, wantLabel)
			}
			wantReady := metav1.ConditionUnknown
			if tt.wantStatus == metav1.ConditionTrue {
				wantReady = metav1.ConditionTrue
			}
			if r := conditionOf(got.NodeClaim, v1.ConditionTypeReady); r.Status != wantReady {
				t.Errorf("Ready = %s, want %s", r.Status, wantReady)
			}
		})
	}
}

func TestRegisterKeepsInitializedNodeClaimsInitialized(t *testing.T) {
	node := regNode(func(n *corev1.Node) {
		n.Labels[v1.LabelRegistered] = "true"
		n.Labels[v1.LabelInitialized] = "true"
		n.Spec.Taints = nil
	})
	first, err := provisioning.Register(regNode(func(n *corev1.Node) {
		n.Labels[v1.LabelRegistered] = "true"
		n.Spec.Taints = nil
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}), []v1.NodeClaim{regClaim()}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Later the node goes NotReady: Karpenter never un-initializes.
	got, err := provisioning.Register(node, []v1.NodeClaim{first.NodeClaim}, t0.Add(time.Hour))
	if err != nil {
		t.Fatalf("Register() error = %v", err)
	}
	if got.Changed || !got.Patch.IsEmpty() {
		t.Errorf("Changed = %v, patch = %+v; want nothing to do", got.Changed, got.Patch)
	}
}

func TestRegisterMultipleNodesFound(t *testing.T) {
	claim := regClaim(func(c *v1.NodeClaim) { c.Status.NodeName = "ip-10-0-9-9.ec2.internal" })
	got, err := provisioning.Register(regNode(), []v1.NodeClaim{claim}, t0)
	if err != nil {
		t.Fatalf("Register() error = %v", err)
	}
	if c := conditionOf(got.NodeClaim, v1.ConditionTypeRegistered); c.Status != metav1.ConditionFalse || c.Reason != provisioning.ReasonMultipleNodesFound {
		t.Errorf("Registered = %s/%s, want False/MultipleNodesFound", c.Status, c.Reason)
	}
	if !got.Patch.IsEmpty() {
		t.Errorf("Patch = %+v, want empty", got.Patch)
	}
}

func TestRegisterErrors(t *testing.T) {
	tests := []struct {
		name   string
		node   *corev1.Node
		claims []v1.NodeClaim
		want   error
	}{
		{name: "should reject a nil node", node: nil, want: provisioning.ErrInvalidInput},
		{name: "should reject a node without providerID", node: regNode(func(n *corev1.Node) { n.Spec.ProviderID = "" }), want: provisioning.ErrInvalidInput},
		{name: "should report a node no NodeClaim claims", node: regNode(), claims: []v1.NodeClaim{launchedClaim("x", "aws:///us-east-1a/i-0zzz", "m5.large", "1")}, want: provisioning.ErrNoNodeClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := provisioning.Register(tt.node, tt.claims, t0); !errors.Is(err, tt.want) {
				t.Fatalf("Register() error = %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("should refuse to choose between two NodeClaims with the node's providerID", func(t *testing.T) {
		a, b := regClaim(), regClaim(func(c *v1.NodeClaim) { c.Name = "default-def" })
		if _, err := provisioning.Register(regNode(), []v1.NodeClaim{a, b}, t0); err == nil {
			t.Fatal("Register() error = nil, want an error naming both NodeClaims")
		}
	})
}

func TestRegistrarWritesTheNodeClaimOnce(t *testing.T) {
	s := newStore()
	s.put(regClaim())
	r, err := provisioning.NewRegistrar(s)
	if err != nil {
		t.Fatal(err)
	}
	node := regNode(func(n *corev1.Node) { n.Labels[v1.LabelDoNotSyncTaints] = "true" })
	reg, err := r.Register(t.Context(), node, t0)
	if err != nil {
		t.Fatalf("Register() error = %v", err)
	}
	stored, _ := s.GetNodeClaim(t.Context(), "default-abc")
	if diff := cmp.Diff(stored, reg.NodeClaim); diff != "" {
		t.Errorf("returned NodeClaim differs from the stored one (-stored +returned):\n%s", diff)
	}
	if stored.ResourceVersion != "2" || stored.Status.NodeName != regNodeName {
		t.Errorf("stored version %s, nodeName %q; want version 2 linked to %s", stored.ResourceVersion, stored.Status.NodeName, regNodeName)
	}
	// The kubelet-side view after the patch: registering again changes
	// nothing.
	reg.Patch.Apply(node)
	again, err := r.Register(t.Context(), node, t0.Add(time.Second))
	if err != nil {
		t.Fatalf("second Register() error = %v", err)
	}
	if again.Changed || !again.Patch.IsEmpty() {
		t.Errorf("second Register: Changed %v, patch %+v; want no change", again.Changed, again.Patch)
	}
	if stored, _ := s.GetNodeClaim(t.Context(), "default-abc"); stored.ResourceVersion != "2" {
		t.Errorf("stored version after the second Register = %s, want 2 (no write)", stored.ResourceVersion)
	}
}

// racingStore bumps the claim's version once between the read and the
// write, as a concurrent writer would.
type racingStore struct {
	*store
	raced bool
}

func (r *racingStore) UpdateNodeClaim(ctx context.Context, c v1.NodeClaim) (v1.NodeClaim, error) {
	if !r.raced {
		r.raced = true
		cur, _ := r.GetNodeClaim(ctx, c.Name)
		cur.Annotations = map[string]string{"touched": "yes"}
		if _, err := r.store.UpdateNodeClaim(ctx, cur); err != nil {
			return v1.NodeClaim{}, err
		}
	}
	return r.store.UpdateNodeClaim(ctx, c)
}

func TestRegistrarRetriesOnConflict(t *testing.T) {
	s := &racingStore{store: newStore()}
	s.put(regClaim())
	r, _ := provisioning.NewRegistrar(s)
	reg, err := r.Register(t.Context(), regNode(), t0)
	if err != nil {
		t.Fatalf("Register() error = %v", err)
	}
	stored, _ := s.GetNodeClaim(t.Context(), "default-abc")
	if stored.Annotations["touched"] != "yes" || stored.Status.NodeName != regNodeName {
		t.Errorf("stored claim lost the concurrent write or the registration: annotations %v, nodeName %q", stored.Annotations, stored.Status.NodeName)
	}
	if reg.NodeClaim.ResourceVersion != stored.ResourceVersion {
		t.Errorf("returned version %s, stored %s", reg.NodeClaim.ResourceVersion, stored.ResourceVersion)
	}
}
