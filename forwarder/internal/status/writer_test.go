package status

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func toUnstructured(t *testing.T, apiVersion, kind string, obj any) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &u.Object); err != nil { // int64 numbers, as informers decode them
		t.Fatal(err)
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u
}

// fakeClasses is what the API resolved, as a poll of it answers.
type fakeClasses struct{ list v1.NodeClassStatusList }

// classSource is the API's resolutions a test's Sync passes (nil: not
// known, so only NodePool status is written).
type classSource interface{ items() []v1.NodeClassStatus }

func (f fakeClasses) items() []v1.NodeClassStatus { return f.list.Items }

// env is a cluster with one NodePool "default" on EC2NodeClass "default",
// one NodeClaim of the pool registered as Node n1.
type env struct {
	dyn     *dynamicfake.FakeDynamicClient
	w       *Writer
	src     classSource
	pools   cache.Indexer
	classes cache.Indexer
}

func newEnv(t *testing.T, classes classSource) *env {
	t.Helper()
	return newEnvWithClass(t, classes, nil)
}

// newEnvWithClass is newEnv with the cluster's valid EC2NodeClass "default"
// changed by mutate (nil: unchanged).
func newEnvWithClass(t *testing.T, classes classSource, mutate func(*v1.EC2NodeClass)) *env {
	t.Helper()
	np := toUnstructured(t, "karpenter.sh/v1", "NodePool", pool("default", "default"))
	nc := v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{
		AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       "KarpenterNodeRole",
		SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
		SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
	}}
	nc.Name, nc.Generation, nc.UID = "default", 2, "uid-1"
	if mutate != nil {
		mutate(&nc)
	}
	ncU := toUnstructured(t, "karpenter.k8s.aws/v1", "EC2NodeClass", nc)
	claimU := toUnstructured(t, "karpenter.sh/v1", "NodeClaim", claim("default-abc", "default", "n1", "2"))
	npCopy, ncCopy := np.DeepCopy(), ncU.DeepCopy() // the fake's tracker keeps what it is given
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		NodePoolsGVR: "NodePoolList", NodeClassesGVR: "EC2NodeClassList", NodeClaimsGVR: "NodeClaimList",
	}, np, ncU, claimU)
	e := &env{dyn: dyn, pools: cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil), classes: cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)}
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	for _, err := range []error{e.pools.Add(npCopy), e.classes.Add(ncCopy), nodes.Add(node("n1", "default", "4", "16Gi"))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	w, err := New(Options{
		Dynamic: dyn, NodePools: cache.NewGenericLister(e.pools, NodePoolsGVR.GroupResource()),
		NodeClasses: cache.NewGenericLister(e.classes, NodeClassesGVR.GroupResource()),
		Nodes:       corelisters.NewNodeLister(nodes), Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.w, e.src = w, classes
	return e
}

// sync is one Sync with the env's resolutions, or SyncPools without them.
func (e *env) sync(ctx context.Context) (SyncResult, error) {
	if e.src == nil {
		return e.w.SyncPools(ctx)
	}
	return e.w.Sync(ctx, e.src.items())
}

// statusUpdates counts the status updates the fake client received.
func (e *env) statusUpdates() int {
	n := 0
	for _, a := range e.dyn.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// refresh copies the cluster's objects into the listers, as informers do.
func (e *env) refresh(t *testing.T) {
	t.Helper()
	for gvr, idx := range map[schema.GroupVersionResource]cache.Indexer{NodePoolsGVR: e.pools, NodeClassesGVR: e.classes} {
		list, err := e.dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if err := idx.Update(&list.Items[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (e *env) get(t *testing.T, gvr schema.GroupVersionResource, name string, into any) {
	t.Helper()
	u, err := e.dyn.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := convert(u.Object, into); err != nil {
		t.Fatal(err)
	}
}

func resolved(uid types.UID, ready metav1.Condition) fakeClasses {
	st := v1.EC2NodeClassStatus{
		Subnets:         []v1.Subnet{{ID: "subnet-a", Zone: "us-west-2a", ZoneID: "usw2-az1"}},
		SecurityGroups:  []v1.SecurityGroup{{ID: "sg-1", Name: "nodes"}},
		AMIs:            []v1.AMI{{ID: "ami-1", Name: "al2023", Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
		InstanceProfile: "KarpenterNodeRole",
		Conditions:      []metav1.Condition{ready},
	}
	return fakeClasses{v1.NodeClassStatusList{Items: []v1.NodeClassStatus{{Name: "default", Generation: 2, UID: uid, Status: st}}}}
}

func TestSyncWritesClassThenPoolStatusOnceUntilSomethingChanges(t *testing.T) {
	e := newEnv(t, resolved("uid-1", metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}))
	res, err := e.sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(SyncResult{NodePools: 1, NodeClasses: 1}, res); diff != "" {
		t.Errorf("first Sync (-want +got):\n%s", diff)
	}
	var nc v1.EC2NodeClass
	e.get(t, NodeClassesGVR, "default", &nc)
	if got := Find(nc.Status.Conditions, "Ready"); got == nil || got.Status != metav1.ConditionTrue || got.ObservedGeneration != 2 {
		t.Errorf("EC2NodeClass Ready = %+v; want True at generation 2", got)
	}
	if len(nc.Status.Subnets) != 1 || len(nc.Status.AMIs) != 1 || len(nc.Status.SecurityGroups) != 1 || nc.Status.InstanceProfile == "" {
		t.Errorf("EC2NodeClass status = %+v; want the resolved subnets, AMIs, security groups and instance profile", nc.Status)
	}
	var np v1.NodePool
	e.get(t, NodePoolsGVR, "default", &np)
	if got := Find(np.Status.Conditions, "Ready"); got == nil || got.Status != metav1.ConditionTrue {
		t.Errorf("NodePool Ready = %+v; want True (its class became Ready in the same pass)", got)
	}
	if diff := cmp.Diff(map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "0", "nodes": "1"}, summary(np.Status.Resources)); diff != "" {
		t.Errorf("NodePool resources (-want +got):\n%s", diff)
	}
	if np.Status.Nodes == nil || *np.Status.Nodes != 1 || np.Status.NodeClassObservedGeneration != 2 {
		t.Errorf("NodePool nodes %v, nodeClassObservedGeneration %d; want 1, 2", np.Status.Nodes, np.Status.NodeClassObservedGeneration)
	}

	e.refresh(t)
	before := e.statusUpdates()
	res, err = e.sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res != (SyncResult{}) || e.statusUpdates() != before {
		t.Errorf("second Sync with nothing changed wrote %+v (%d updates); want nothing", res, e.statusUpdates()-before)
	}
}

func TestSyncMarksClassAndPoolNotReadyWhenNoSubnetMatches(t *testing.T) {
	e := newEnv(t, resolved("uid-1", metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: ReasonSubnetsNotFound, Message: "no subnets found"}))
	if _, err := e.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nc v1.EC2NodeClass
	e.get(t, NodeClassesGVR, "default", &nc)
	want := []brief{
		{"SubnetsReady", "False", "SubnetsNotFound", MessageSubnetsNotFound},
		{"SecurityGroupsReady", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
		{"AMIsReady", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
		{"InstanceProfileReady", "True", "InstanceProfileReady", ""},
		{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		{"PlacementGroupReady", "True", "PlacementGroupReady", ""},
		{"CapacityReservationsReady", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
		{"Ready", "False", "UnhealthyDependents", "SubnetsReady=False, SecurityGroupsReady=Unknown, AMIsReady=Unknown, CapacityReservationsReady=Unknown"},
	}
	if diff := cmp.Diff(want, briefs(nc.Status.Conditions)); diff != "" {
		t.Errorf("EC2NodeClass conditions (-want +got):\n%s", diff)
	}
	var np v1.NodePool
	e.get(t, NodePoolsGVR, "default", &np)
	if got := Find(np.Status.Conditions, v1.ConditionTypeNodeClassReady); got == nil || got.Status != metav1.ConditionFalse {
		t.Errorf("NodePool NodeClassReady = %+v; want False", got)
	}
}

func TestSyncWritesTheInformationalEC2DataLiveConditionWithoutMakingTheClassNotReady(t *testing.T) {
	classes := resolved("uid-1", metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"})
	dataCond := metav1.Condition{Type: v1.ConditionTypeEC2DataLive, Status: metav1.ConditionFalse, Reason: v1.ConditionReasonEC2DataRefreshFailed,
		Message: "instance-types: live, fetched 2026-12-02T10:00:00Z (3h ago); spot-prices: on-demand price", ObservedGeneration: 2}
	classes.list.Items[0].Status.Conditions = append(classes.list.Items[0].Status.Conditions, dataCond)
	e := newEnv(t, classes)
	if _, err := e.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nc v1.EC2NodeClass
	e.get(t, NodeClassesGVR, "default", &nc)
	want := []brief{
		{"SubnetsReady", "True", "SubnetsReady", ""},
		{"SecurityGroupsReady", "True", "SecurityGroupsReady", ""},
		{"AMIsReady", "True", "AMIsReady", ""},
		{"InstanceProfileReady", "True", "InstanceProfileReady", ""},
		{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		{"PlacementGroupReady", "True", "PlacementGroupReady", ""},
		{"CapacityReservationsReady", "True", "CapacityReservationsReady", ""},
		{"Ready", "True", "Ready", ""},
		{"EC2DataLive", "False", "RefreshFailed", dataCond.Message},
	}
	if diff := cmp.Diff(want, briefs(nc.Status.Conditions)); diff != "" {
		t.Errorf("EC2NodeClass conditions (-want +got):\n%s", diff)
	}
	if got := Find(nc.Status.Conditions, v1.ConditionTypeEC2DataLive); got == nil || got.ObservedGeneration != 2 || got.LastTransitionTime.IsZero() {
		t.Errorf("EC2DataLive = %+v; want generation 2 and a lastTransitionTime", got)
	}
	var np v1.NodePool
	e.get(t, NodePoolsGVR, "default", &np)
	if got := Find(np.Status.Conditions, "Ready"); got == nil || got.Status != metav1.ConditionTrue {
		t.Errorf("NodePool Ready = %+v; want True (EC2DataLive is informational)", got)
	}
}

func TestSyncSkipsResolutionOfAnotherObjectWithTheSameName(t *testing.T) {
	e := newEnv(t, resolved("uid-old", metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}))
	res, err := e.sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.NodeClasses != 0 {
		t.Errorf("wrote %d EC2NodeClass statuses from another object's resolution; want 0", res.NodeClasses)
	}
}

func TestSyncPoolsWritesOnlyPools(t *testing.T) {
	e := newEnv(t, nil)
	res, err := e.sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(SyncResult{NodePools: 1}, res); diff != "" {
		t.Errorf("Sync (-want +got):\n%s", diff)
	}
	for _, a := range e.dyn.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && u.GetResource() == NodeClassesGVR {
			t.Errorf("EC2NodeClass updated without a class source: %v", a)
		}
	}
}

func TestSyncMarksAMIsNotReadyAndPoolNotReadyForAnUnsupportedAlias(t *testing.T) {
	msg := "node class default: alias al2@latest on Kubernetes 1.33: AL2 AMIs stop at 1.32: unsupported alias"
	e := newEnv(t, resolved("uid-1", metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: v1.ConditionReasonUnsupportedAlias, Message: msg}))
	if _, err := e.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nc v1.EC2NodeClass
	e.get(t, NodeClassesGVR, "default", &nc)
	want := []brief{
		{"SubnetsReady", "True", "SubnetsReady", ""},
		{"SecurityGroupsReady", "True", "SecurityGroupsReady", ""},
		{"AMIsReady", "False", "UnsupportedAlias", msg},
		{"InstanceProfileReady", "True", "InstanceProfileReady", ""},
		{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		{"PlacementGroupReady", "True", "PlacementGroupReady", ""},
		{"CapacityReservationsReady", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
		{"Ready", "False", "UnhealthyDependents", "AMIsReady=False, CapacityReservationsReady=Unknown"},
	}
	if diff := cmp.Diff(want, briefs(nc.Status.Conditions)); diff != "" {
		t.Errorf("EC2NodeClass conditions (-want +got):\n%s", diff)
	}
	var np v1.NodePool
	e.get(t, NodePoolsGVR, "default", &np)
	if got := Find(np.Status.Conditions, v1.ConditionTypeNodeClassReady); got == nil || got.Status != metav1.ConditionFalse {
		t.Errorf("NodePool NodeClassReady = %+v; want False", got)
	}
	if got := Find(np.Status.Conditions, "Ready"); got == nil || got.Status != metav1.ConditionFalse {
		t.Errorf("NodePool Ready = %+v; want False", got)
	}
}

func TestSyncMarksInstanceProfileNotReadyForARoleNotAllowed(t *testing.T) {
	msg := `spec.role "Admin" (arn:aws:iam::111122223333:role/Admin): role not allowed; the deployment allows roles arn:aws:iam::111122223333:role/NodeRole`
	e := newEnv(t, resolved("uid-1", metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: v1.ConditionReasonRoleNotAllowed, Message: msg}))
	if _, err := e.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nc v1.EC2NodeClass
	e.get(t, NodeClassesGVR, "default", &nc)
	want := []brief{
		{"SubnetsReady", "True", "SubnetsReady", ""},
		{"SecurityGroupsReady", "True", "SecurityGroupsReady", ""},
		{"AMIsReady", "True", "AMIsReady", ""},
		{"InstanceProfileReady", "False", "RoleNotAllowed", msg},
		{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		{"PlacementGroupReady", "True", "PlacementGroupReady", ""},
		{"CapacityReservationsReady", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
		{"Ready", "False", "UnhealthyDependents", "InstanceProfileReady=False, CapacityReservationsReady=Unknown"},
	}
	if diff := cmp.Diff(want, briefs(nc.Status.Conditions)); diff != "" {
		t.Errorf("EC2NodeClass conditions (-want +got):\n%s", diff)
	}
}

func TestSyncMarksPlacementGroupNotReadyForAMissingGroup(t *testing.T) {
	msg := `node class default: no available placement group found for spec.placementGroupSelector (name "training")`
	e := newEnvWithClass(t, resolved("uid-1", metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: v1.ConditionReasonPlacementGroupNotFound, Message: msg}), func(nc *v1.EC2NodeClass) {
		nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: "training"}
	})
	if _, err := e.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nc v1.EC2NodeClass
	e.get(t, NodeClassesGVR, "default", &nc)
	want := []brief{
		{"SubnetsReady", "True", "SubnetsReady", ""},
		{"SecurityGroupsReady", "True", "SecurityGroupsReady", ""},
		{"AMIsReady", "True", "AMIsReady", ""},
		{"InstanceProfileReady", "True", "InstanceProfileReady", ""},
		{"ValidationSucceeded", "True", "ValidationSucceeded", ""},
		{"PlacementGroupReady", "False", "PlacementGroupNotFound", msg},
		{"CapacityReservationsReady", "True", "CapacityReservationsReady", ""},
		{"Ready", "False", "UnhealthyDependents", "PlacementGroupReady=False"},
	}
	if diff := cmp.Diff(want, briefs(nc.Status.Conditions)); diff != "" {
		t.Errorf("EC2NodeClass conditions (-want +got):\n%s", diff)
	}
	var np v1.NodePool
	e.get(t, NodePoolsGVR, "default", &np)
	if got := Find(np.Status.Conditions, v1.ConditionTypeNodeClassReady); got == nil || got.Status != metav1.ConditionFalse {
		t.Errorf("NodePool NodeClassReady = %+v; want False", got)
	}
}

func TestSyncMarksPlacementGroupReadyForAResolvedGroupWithoutWritingIt(t *testing.T) {
	rec := resolved("uid-1", metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"})
	rec.list.Items[0].Status.PlacementGroup = &v1.PlacementGroup{ID: "pg-0a1", Name: "training", Strategy: "cluster"}
	e := newEnvWithClass(t, rec, func(nc *v1.EC2NodeClass) {
		nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: "training"}
	})
	if _, err := e.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nc v1.EC2NodeClass
	e.get(t, NodeClassesGVR, "default", &nc)
	if p := Find(nc.Status.Conditions, v1.ConditionTypePlacementGroupReady); p == nil || p.Status != metav1.ConditionTrue {
		t.Errorf("PlacementGroupReady = %+v; want True", p)
	}
	if r := Find(nc.Status.Conditions, v1.ConditionTypeReady); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v; want True", r)
	}
	if nc.Status.PlacementGroup != nil {
		t.Errorf("status.placementGroup = %+v; want it left off the object, as Karpenter's status has no such field", nc.Status.PlacementGroup)
	}
}

func TestClassConditionsAwaitThePlacementGroupUntilTheAPIResolvesIt(t *testing.T) {
	nc := v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 2}, Spec: v1.EC2NodeClassSpec{PlacementGroupSelector: &v1.PlacementGroupSelector{ID: "pg-0a1"}}}
	p := Find(ClassConditions(nc, nil, nil, time.Unix(0, 0)), v1.ConditionTypePlacementGroupReady)
	if p == nil || p.Status != metav1.ConditionUnknown || p.Reason != ReasonAwaitingReconciliation {
		t.Errorf("PlacementGroupReady without a resolution = %+v; want Unknown %s", p, ReasonAwaitingReconciliation)
	}
}

func TestSyncWritesValidationFailedForAnInvalidClassTheAPINeverResolved(t *testing.T) {
	e := newEnvWithClass(t, fakeClasses{}, func(nc *v1.EC2NodeClass) {
		on := "on"
		nc.Spec.CPUOptions = &v1.CPUOptions{NestedVirtualization: &on}
	})
	res, err := e.sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.NodeClasses != 1 {
		t.Errorf("wrote %d EC2NodeClass statuses; want 1 (the invalid class)", res.NodeClasses)
	}
	var nc v1.EC2NodeClass
	e.get(t, NodeClassesGVR, "default", &nc)
	got := briefs(nc.Status.Conditions)
	msg := Find(nc.Status.Conditions, v1.ConditionTypeValidationSucceeded).Message
	if !strings.Contains(msg, `spec.cpuOptions.nestedVirtualization: "on" is not one of enabled, disabled`) {
		t.Errorf("ValidationSucceeded message %q does not name spec.cpuOptions.nestedVirtualization", msg)
	}
	awaiting := "object is awaiting reconciliation"
	want := []brief{
		{"SubnetsReady", "Unknown", "AwaitingReconciliation", awaiting},
		{"SecurityGroupsReady", "Unknown", "AwaitingReconciliation", awaiting},
		{"AMIsReady", "Unknown", "AwaitingReconciliation", awaiting},
		{"InstanceProfileReady", "Unknown", "AwaitingReconciliation", awaiting},
		{"ValidationSucceeded", "False", ReasonNodeClassValidationFailed, msg},
		{"PlacementGroupReady", "True", "PlacementGroupReady", ""},
		{"CapacityReservationsReady", "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"},
		{"Ready", "False", "UnhealthyDependents", "SubnetsReady=Unknown, SecurityGroupsReady=Unknown, AMIsReady=Unknown, InstanceProfileReady=Unknown, ValidationSucceeded=False, CapacityReservationsReady=Unknown"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EC2NodeClass conditions (-want +got):\n%s", diff)
	}
}
