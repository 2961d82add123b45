package mirror_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func claim(name string, opts ...func(*v1.NodeClaim)) v1.NodeClaim {
	c := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			UID:             "api-uid-" + "x",
			ResourceVersion: "7",
			Labels:          map[string]string{v1.LabelNodePool: "default"},
			Finalizers:      []string{v1.TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "default", UID: "np-uid"}},
		},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: "In", Values: []string{"m7g.large"}}},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
		},
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func launched(providerID string) func(*v1.NodeClaim) {
	return func(c *v1.NodeClaim) {
		c.Status.ProviderID = providerID
		c.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
			LastTransitionTime: metav1.Unix(1767225600, 0)}}
	}
}

// object is the mirror of c as it sits in the cluster.
func object(t *testing.T, c v1.NodeClaim, mirrored bool) *unstructured.Unstructured {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, UID: "cluster-uid-" + "y", Labels: c.Labels, Annotations: c.Annotations},
		Spec:       c.Spec,
		Status:     c.Status,
	})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("karpenter.sh/v1")
	u.SetKind("NodeClaim")
	labels := u.GetLabels()
	if mirrored {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[mirror.LabelMirror] = "true"
	}
	u.SetLabels(labels)
	return u
}

func newClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{mirror.GVR: "NodeClaimList"}, objs...)
}

// state is a NodeClaim in the cluster reduced to what the tests check.
type state struct {
	Labels     map[string]string
	ProviderID string
	Finalizers []string
	Owners     int
	Types      []string // requirement values of the instance-type key
}

func cluster(t *testing.T, client *dynamicfake.FakeDynamicClient) map[string]state {
	t.Helper()
	list, err := client.Resource(mirror.GVR).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state{}
	for _, u := range list.Items {
		var c v1.NodeClaim
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
			t.Fatal(err)
		}
		s := state{Labels: c.Labels, ProviderID: c.Status.ProviderID, Finalizers: c.Finalizers, Owners: len(c.OwnerReferences)}
		for _, r := range c.Spec.Requirements {
			if r.Key == v1.LabelInstanceType {
				s.Types = r.Values
			}
		}
		out[c.Name] = s
	}
	return out
}

// verbs lists the write actions the client saw, as "verb[/subresource] name".
func verbs(client *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		v := a.GetVerb()
		if a.GetSubresource() != "" {
			v += "/" + a.GetSubresource()
		}
		name := ""
		switch act := a.(type) {
		case interface{ GetName() string }:
			name = act.GetName()
		case interface{ GetObject() runtime.Object }:
			name = act.GetObject().(*unstructured.Unstructured).GetName()
		}
		out = append(out, v+" "+name)
	}
	return out
}

func mirrorLabels(nodePool string) map[string]string {
	return map[string]string{v1.LabelNodePool: nodePool, mirror.LabelMirror: "true"}
}

func TestSync(t *testing.T) {
	tests := []struct {
		name        string
		cluster     func(t *testing.T) []runtime.Object
		give        []v1.NodeClaim
		wantResult  mirror.Result
		wantVerbs   []string
		wantCluster map[string]state
	}{
		{
			name:       "should create a mirror with status for a new NodeClaim",
			cluster:    func(*testing.T) []runtime.Object { return nil },
			give:       []v1.NodeClaim{claim("default-a", launched("aws:///us-east-1a/i-1"))},
			wantResult: mirror.Result{Created: 1},
			wantVerbs:  []string{"create default-a", "update/status default-a"},
			wantCluster: map[string]state{
				"default-a": {Labels: mirrorLabels("default"), ProviderID: "aws:///us-east-1a/i-1", Types: []string{"m7g.large"}},
			},
		},
		{
			name: "should update labels and status of a changed NodeClaim",
			cluster: func(t *testing.T) []runtime.Object {
				return []runtime.Object{object(t, claim("default-a"), true)}
			},
			give: []v1.NodeClaim{claim("default-a", launched("aws:///us-east-1a/i-1"), func(c *v1.NodeClaim) {
				c.Labels[v1.LabelRegistered] = "true"
			})},
			wantResult: mirror.Result{Updated: 1},
			wantVerbs:  []string{"update default-a", "update/status default-a"},
			wantCluster: map[string]state{
				"default-a": {
					Labels:     map[string]string{v1.LabelNodePool: "default", v1.LabelRegistered: "true", mirror.LabelMirror: "true"},
					ProviderID: "aws:///us-east-1a/i-1", Types: []string{"m7g.large"},
				},
			},
		},
		{
			name: "should delete a mirror whose NodeClaim is gone",
			cluster: func(t *testing.T) []runtime.Object {
				return []runtime.Object{object(t, claim("default-a"), true), object(t, claim("default-b"), true)}
			},
			give:       []v1.NodeClaim{claim("default-a")},
			wantResult: mirror.Result{Deleted: 1},
			wantVerbs:  []string{"delete default-b"},
			wantCluster: map[string]state{
				"default-a": {Labels: mirrorLabels("default"), Types: []string{"m7g.large"}},
			},
		},
		{
			name: "should write nothing when the mirrors are in sync",
			cluster: func(t *testing.T) []runtime.Object {
				return []runtime.Object{object(t, claim("default-a", launched("aws:///us-east-1a/i-1")), true)}
			},
			give: []v1.NodeClaim{claim("default-a", launched("aws:///us-east-1a/i-1"))},
			wantCluster: map[string]state{
				"default-a": {Labels: mirrorLabels("default"), ProviderID: "aws:///us-east-1a/i-1", Types: []string{"m7g.large"}},
			},
		},
		{
			name: "should not count fields the API server defaulted as a change",
			cluster: func(t *testing.T) []runtime.Object {
				u := object(t, claim("default-a"), true)
				if err := unstructured.SetNestedField(u.Object, "720h", "spec", "expireAfter"); err != nil {
					t.Fatal(err)
				}
				return []runtime.Object{u}
			},
			give:        []v1.NodeClaim{claim("default-a")},
			wantCluster: map[string]state{"default-a": {Labels: mirrorLabels("default"), Types: []string{"m7g.large"}}},
		},
		{
			name: "should replace a mirror whose spec changed",
			cluster: func(t *testing.T) []runtime.Object {
				return []runtime.Object{object(t, claim("default-a", func(c *v1.NodeClaim) {
					c.Spec.Requirements[0].Values = []string{"c7g.large"}
				}), true)}
			},
			give:        []v1.NodeClaim{claim("default-a")},
			wantResult:  mirror.Result{Updated: 1},
			wantVerbs:   []string{"delete default-a", "create default-a"},
			wantCluster: map[string]state{"default-a": {Labels: mirrorLabels("default"), Types: []string{"m7g.large"}}},
		},
		{
			name: "should leave NodeClaims without the mirror label alone",
			cluster: func(t *testing.T) []runtime.Object {
				return []runtime.Object{object(t, claim("karpenter-x"), false)}
			},
			give:       []v1.NodeClaim{claim("default-a")},
			wantResult: mirror.Result{Created: 1},
			wantVerbs:  []string{"create default-a"},
			wantCluster: map[string]state{
				"karpenter-x": {Labels: map[string]string{v1.LabelNodePool: "default"}, Types: []string{"m7g.large"}},
				"default-a":   {Labels: mirrorLabels("default"), Types: []string{"m7g.large"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(tt.cluster(t)...)
			got, err := mirror.New(client).Sync(t.Context(), tt.give)
			if err != nil {
				t.Fatalf("Sync() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantResult, got); diff != "" {
				t.Errorf("Sync() result mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantVerbs, verbs(client)); diff != "" {
				t.Errorf("writes mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCluster, cluster(t, client)); diff != "" {
				t.Errorf("cluster mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSyncErrors(t *testing.T) {
	t.Run("should report a name taken by a NodeClaim it does not own and leave it unchanged", func(t *testing.T) {
		client := newClient(object(t, claim("default-a", func(c *v1.NodeClaim) { c.Labels = map[string]string{"owner": "karpenter"} }), false))
		got, err := mirror.New(client).Sync(t.Context(), []v1.NodeClaim{claim("default-a"), claim("default-b")})
		if err == nil || !strings.Contains(err.Error(), "without label nodewright.dev/mirror=true") {
			t.Fatalf("Sync() error = %v, want the name conflict", err)
		}
		if diff := cmp.Diff(mirror.Result{Created: 1}, got); diff != "" {
			t.Errorf("Sync() result mismatch (-want +got):\n%s", diff)
		}
		c := cluster(t, client)
		if diff := cmp.Diff(map[string]string{"owner": "karpenter"}, c["default-a"].Labels); diff != "" {
			t.Errorf("the foreign NodeClaim changed (-want +got):\n%s", diff)
		}
		if _, ok := c["default-b"]; !ok {
			t.Error("the other claim was not mirrored after the conflict")
		}
	})
}

func TestMirrorsCarryNoFinalizersOrOwners(t *testing.T) {
	client := newClient()
	if _, err := mirror.New(client).Sync(t.Context(), []v1.NodeClaim{claim("default-a")}); err != nil {
		t.Fatal(err)
	}
	got := cluster(t, client)["default-a"]
	if len(got.Finalizers) != 0 || got.Owners != 0 {
		t.Errorf("mirror has finalizers %v and %d owners; want none", got.Finalizers, got.Owners)
	}
	if !slices.Contains(verbs(client), "create default-a") {
		t.Errorf("writes = %v", verbs(client))
	}
}

// registered sets the claim's status.nodeName.
func registered(node string) func(*v1.NodeClaim) {
	return func(c *v1.NodeClaim) { c.Status.NodeName = node }
}

func nodeObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Node")
	u.SetName(name)
	return u
}

func TestSyncDeletesTheNodeOfAMirrorAUserDeleted(t *testing.T) {
	tests := []struct {
		name string
		// give is the claim in both Syncs.
		give v1.NodeClaim
		// userDeletes deletes the mirror between the two Syncs.
		userDeletes bool
		wantNodes   []string // Nodes deleted by the second Sync
		wantLeft    []string // Nodes in the cluster after it
	}{
		{name: "should delete the Node of a registered claim whose mirror a user deleted",
			give: claim("default-a", registered("node-a")), userDeletes: true, wantNodes: []string{"node-a"}, wantLeft: nil},
		{name: "should only recreate the mirror of a claim with no Node yet",
			give: claim("default-a"), userDeletes: true, wantLeft: []string{"node-a"}},
		{name: "should only recreate the mirror of a claim already being deleted",
			give: claim("default-a", registered("node-a"), func(c *v1.NodeClaim) { c.DeletionTimestamp = &metav1.Time{} }), userDeletes: true,
			wantLeft: []string{"node-a"}},
		{name: "should delete no Node while the mirror stands",
			give: claim("default-a", registered("node-a")), wantLeft: []string{"node-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{mirror.GVR: "NodeClaimList", mirror.NodeGVR: "NodeList"}, nodeObject("node-a"))
			m := mirror.New(client)
			if _, err := m.Sync(t.Context(), []v1.NodeClaim{tt.give}); err != nil {
				t.Fatalf("first Sync() error = %v", err)
			}
			if tt.userDeletes {
				if err := client.Resource(mirror.GVR).Delete(t.Context(), tt.give.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := m.Sync(t.Context(), []v1.NodeClaim{tt.give})
			if err != nil {
				t.Fatalf("second Sync() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantNodes, got.NodesDeleted); diff != "" {
				t.Errorf("NodesDeleted mismatch (-want +got):\n%s", diff)
			}
			nodes, err := client.Resource(mirror.NodeGVR).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, n := range nodes.Items {
				left = append(left, n.GetName())
			}
			if diff := cmp.Diff(tt.wantLeft, left); diff != "" {
				t.Errorf("Nodes left mismatch (-want +got):\n%s", diff)
			}
			if _, ok := cluster(t, client)[tt.give.Name]; !ok {
				t.Errorf("mirror %s not recreated", tt.give.Name)
			}
		})
	}
}

func TestSyncDeletesNoNodeForItsOwnReplaceOrAFreshStart(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{mirror.GVR: "NodeClaimList", mirror.NodeGVR: "NodeList"}, nodeObject("node-a"))
	c := claim("default-a", registered("node-a"))
	// A fresh Mirror remembers nothing: a missing mirror is created.
	m := mirror.New(client)
	if got, err := m.Sync(t.Context(), []v1.NodeClaim{c}); err != nil || len(got.NodesDeleted) != 0 {
		t.Fatalf("first Sync() = %+v, %v; want a create and no Node deleted", got, err)
	}
	// A spec change makes Sync replace the mirror itself.
	c.Spec.Requirements[0].Values = []string{"c7g.large"}
	for i := range 2 {
		got, err := m.Sync(t.Context(), []v1.NodeClaim{c})
		if err != nil || len(got.NodesDeleted) != 0 {
			t.Fatalf("Sync() %d = %+v, %v; want no Node deleted", i, got, err)
		}
	}
	if _, err := client.Resource(mirror.NodeGVR).Get(t.Context(), "node-a", metav1.GetOptions{}); err != nil {
		t.Errorf("node-a: %v, want it kept", err)
	}
}

func TestSyncTakesOverTheKarpenterNodeClaimOfAnAdoptedNode(t *testing.T) {
	adopted := claim("default-x7k2p", launched("aws:///us-east-1a/i-0a1b2c3d4e5f60718"), func(c *v1.NodeClaim) {
		c.Annotations = map[string]string{v1.AnnotationAdoptedFrom: "karpenter"}
	})
	karpenters := object(t, adopted, false)
	karpenters.SetAnnotations(nil)
	karpenters.SetFinalizers([]string{v1.TerminationFinalizer})
	client := newClient(karpenters)
	m := mirror.New(client)
	if _, err := m.Sync(t.Context(), []v1.NodeClaim{adopted}); err != nil {
		t.Fatalf("Sync() error = %v", err)
	}
	got := cluster(t, client)
	if len(got) != 1 {
		t.Fatalf("cluster holds %d NodeClaims, want the adopted node's one: %v", len(got), got)
	}
	want := state{Labels: mirrorLabels("default"), ProviderID: adopted.Status.ProviderID, Finalizers: []string{v1.TerminationFinalizer}, Types: []string{"m7g.large"}}
	if diff := cmp.Diff(want, got["default-x7k2p"]); diff != "" {
		t.Errorf("adopted NodeClaim mismatch (-want +got):\n%s", diff)
	}

	// The node is terminated and its claim deleted: the NodeClaim goes,
	// its termination finalizer removed first.
	if _, err := m.Sync(t.Context(), nil); err != nil {
		t.Fatalf("Sync() error = %v", err)
	}
	if got := cluster(t, client); len(got) != 0 {
		t.Errorf("cluster holds %v after the claim was deleted, want nothing", got)
	}
	// create (refused: the name is taken), the takeover's update, then the
	// finalizer's removal and the delete.
	if diff := cmp.Diff([]string{"create default-x7k2p", "update default-x7k2p", "update default-x7k2p", "delete default-x7k2p"}, verbs(client)); diff != "" {
		t.Errorf("writes mismatch (-want +got):\n%s", diff)
	}
}

// takenOver returns an adopted claim registered as node-a, a cluster
// holding node-a and Karpenter's NodeClaim of that claim (UID
// karpenter-uid, its finalizer on), and a Mirror whose first Sync took that
// NodeClaim over.
func takenOver(t *testing.T) (v1.NodeClaim, *dynamicfake.FakeDynamicClient, *mirror.Mirror) {
	t.Helper()
	adopted := claim("default-x7k2p", launched("aws:///us-east-1a/i-0a1b2c3d4e5f60718"), registered("node-a"), func(c *v1.NodeClaim) {
		c.Annotations = map[string]string{v1.AnnotationAdoptedFrom: "karpenter"}
	})
	karpenters := object(t, adopted, false)
	karpenters.SetAnnotations(nil)
	karpenters.SetFinalizers([]string{v1.TerminationFinalizer})
	karpenters.SetUID("karpenter-uid")
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{mirror.GVR: "NodeClaimList", mirror.NodeGVR: "NodeList"}, karpenters, nodeObject("node-a"))
	m := mirror.New(client)
	if _, err := m.Sync(t.Context(), []v1.NodeClaim{adopted}); err != nil {
		t.Fatalf("takeover Sync() error = %v", err)
	}
	return adopted, client, m
}

func TestSyncNeverReplacesOrDeletesForATakenOverNodeClaim(t *testing.T) {
	adopted, client, m := takenOver(t)
	api := client.Resource(mirror.GVR)
	check := func(step string, got mirror.Result) {
		t.Helper()
		if len(got.NodesDeleted) != 0 {
			t.Errorf("%s: NodesDeleted = %v, want none", step, got.NodesDeleted)
		}
		u, err := api.Get(t.Context(), adopted.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if u.GetUID() != "karpenter-uid" {
			t.Errorf("%s: UID = %s, want karpenter-uid (the Node's ownerReference names it)", step, u.GetUID())
		}
		if _, err := client.Resource(mirror.NodeGVR).Get(t.Context(), "node-a", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: node-a: %v, want it kept", step, err)
		}
	}

	// The API's record differs in spec from Karpenter's object.
	changed := adopted
	changed.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: "In", Values: []string{"c7g.large"}}}
	for i := range 2 {
		got, err := m.Sync(t.Context(), []v1.NodeClaim{changed})
		if err != nil {
			t.Fatalf("Sync() %d with a spec difference: error = %v", i, err)
		}
		check("spec difference", got)
	}

	// Someone removes the mirror label.
	u, err := api.Get(t.Context(), adopted.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labels := u.GetLabels()
	delete(labels, mirror.LabelMirror)
	u.SetLabels(labels)
	if _, err := api.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		got, err := m.Sync(t.Context(), []v1.NodeClaim{changed})
		if err != nil {
			t.Fatalf("Sync() %d after the label was removed: error = %v", i, err)
		}
		check("label removed", got)
	}
	if got := cluster(t, client)[adopted.Name].Labels[mirror.LabelMirror]; got != "true" {
		t.Errorf("label %s = %q after Sync, want it taken over again", mirror.LabelMirror, got)
	}
	for _, v := range verbs(client) {
		if strings.HasPrefix(v, "delete") {
			t.Errorf("Sync wrote %q, want no delete", v)
		}
	}
}

func TestSyncDeletesTheNodeOfATakenOverNodeClaimAUserDeleted(t *testing.T) {
	adopted, client, m := takenOver(t)
	// kubectl delete nodeclaim: Karpenter's finalizer holds the object.
	api := client.Resource(mirror.GVR)
	u, err := api.Get(t.Context(), adopted.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetDeletionTimestamp(&metav1.Time{Time: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)})
	if _, err := api.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := m.Sync(t.Context(), []v1.NodeClaim{adopted})
	if err != nil {
		t.Fatalf("Sync() error = %v", err)
	}
	if diff := cmp.Diff([]string{"node-a"}, got.NodesDeleted); diff != "" {
		t.Errorf("NodesDeleted mismatch (-want +got):\n%s", diff)
	}
	if _, err := client.Resource(mirror.NodeGVR).Get(t.Context(), "node-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node-a: %v, want it deleted", err)
	}
	if got, err := m.Sync(t.Context(), []v1.NodeClaim{adopted}); err != nil || len(got.NodesDeleted) != 0 {
		t.Errorf("next Sync() = %+v, %v; want the delete request acted on once", got, err)
	}
}

func TestSetConditionWritesKarpentersNodeClaimStatusOnceAsTheForwarder(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	karpenters := object(t, claim("default-x7k2p", launched("aws:///us-east-1a/i-0a1b2c3d4e5f60718")), false)
	client := newClient(karpenters)
	m := mirror.New(client)
	refused := metav1.Condition{Type: v1.ConditionTypeAdopted, Status: metav1.ConditionFalse, Reason: "AdoptionNodePoolNotFound",
		Message: "not adopted: its NodePool \"gone\" does not exist; the node is left alone", LastTransitionTime: metav1.NewTime(at)}
	wrote, err := m.SetCondition(t.Context(), karpenters, refused)
	if err != nil || !wrote {
		t.Fatalf("SetCondition() = %v, %v; want a write", wrote, err)
	}
	got, err := client.Resource(mirror.GVR).Get(t.Context(), "default-x7k2p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var c v1.NodeClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &c); err != nil {
		t.Fatal(err)
	}
	var adopted []metav1.Condition
	for _, cond := range c.Status.Conditions {
		if cond.Type == v1.ConditionTypeAdopted {
			adopted = append(adopted, cond)
		}
	}
	if len(adopted) != 1 || adopted[0].Status != metav1.ConditionFalse || adopted[0].Reason != refused.Reason || adopted[0].Message != refused.Message ||
		!adopted[0].LastTransitionTime.Equal(&refused.LastTransitionTime) || len(c.Status.Conditions) != len(adopted)+1 {
		t.Errorf("conditions %+v, want Launched kept and one Adopted False with the refusal's reason and message", c.Status.Conditions)
	}
	if c.Status.ProviderID == "" || len(c.Labels) != len(karpenters.GetLabels()) {
		t.Errorf("status or labels changed beyond the condition: %+v", c)
	}
	if diff := cmp.Diff([]string{"update/status default-x7k2p", "get default-x7k2p"}, verbs(client)); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
	if wrote, err := m.SetCondition(t.Context(), got, refused); err != nil || wrote {
		t.Errorf("SetCondition() again = %v, %v; want no write for an unchanged condition", wrote, err)
	}
	if wrote, err := m.SetCondition(t.Context(), object(t, claim("default-abc"), true), refused); err != nil || wrote {
		t.Errorf("SetCondition() on a mirror = %v, %v; want no write (Sync owns a mirror's status)", wrote, err)
	}
}
