package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodewright/nodewright/forwarder/internal/events"
	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	"github.com/nodewright/nodewright/forwarder/internal/pending"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// intakeStub is the intake API as the contract describes it: it decodes
// every POST with the contract's decoders (rejecting what the Lambda would
// reject), requires a SigV4 Authorization header, and solves every batch by
// nominating its pods onto one NodeClaim.
type intakeStub struct {
	t       *testing.T
	mu      sync.Mutex
	batches []v1.PodBatch
	configs []v1.ClusterConfig
	regs    []v1.NodeRegistrations
	snaps   []v1.ClusterSnapshot
	claims  []v1.NodeClaim
}

func (s *intakeStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKID/") {
		http.Error(w, `{"message":"missing signature"}`, http.StatusForbidden)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	reject := func(err error) {
		s.t.Errorf("the intake API would reject %s: %v", r.URL.Path, err)
		w.WriteHeader(v1.HTTPStatus(err))
		_ = json.NewEncoder(w).Encode(v1.NewErrorResponse(err))
	}
	answer := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/prod"+v1.RoutePodBatches:
		b, _, err := v1.DecodePodBatch(body)
		if err != nil {
			reject(err)
			return
		}
		if r.Header.Get(v1.HeaderIdempotencyKey) != b.ID {
			s.t.Errorf("Idempotency-Key %q differs from the batch ID %q", r.Header.Get(v1.HeaderIdempotencyKey), b.ID)
		}
		s.batches = append(s.batches, *b)
		claim := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{v1.LabelNodePool: "default"}},
			Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
				Requirements: []v1.NodeSelectorRequirementWithMinValues{}}}
		s.claims = []v1.NodeClaim{claim}
		w.WriteHeader(http.StatusAccepted)
		answer(v1.PodBatchResult{BatchID: b.ID, State: v1.BatchQueued})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/prod"+v1.RoutePodBatches+"/"):
		id := strings.TrimPrefix(r.URL.Path, "/prod"+v1.RoutePodBatches+"/")
		for _, b := range s.batches {
			if b.ID != id {
				continue
			}
			res := v1.PodBatchResult{BatchID: id, State: v1.BatchSolved, Nominations: map[types.UID]v1.Nomination{}, NodeClaims: s.claims}
			for _, p := range b.Pods {
				res.Nominations[p.UID] = v1.Nomination{NodeClaim: "default-abc"}
			}
			answer(res)
			return
		}
		http.Error(w, `{"message":"no such batch"}`, http.StatusNotFound)
	case r.Method == http.MethodGet && r.URL.Path == "/prod"+v1.RouteSync:
		answer(v1.Sync{NodeClasses: []v1.NodeClassStatus{}, NodeClaims: s.claims,
			Events: v1.EventList{Items: []v1.EventRecord{{ID: "rec-1", Time: metav1.Now(), Type: "Warning", Reason: "SpotInterrupted",
				Message: "EC2 sent a Spot interruption warning", NodeClaim: "default-abc", Node: "n1"}}}})
	case r.Method == http.MethodPost && r.URL.Path == "/prod"+v1.RouteConfig:
		c, _, err := v1.DecodeClusterConfig(body)
		if err != nil {
			reject(err)
			return
		}
		s.configs = append(s.configs, *c)
		w.WriteHeader(http.StatusAccepted)
		answer(v1.Receipt{ID: c.ID})
	case r.Method == http.MethodPost && r.URL.Path == "/prod"+v1.RouteRegistrations:
		reg, _, err := v1.DecodeNodeRegistrations(body)
		if err != nil {
			reject(err)
			return
		}
		s.regs = append(s.regs, *reg)
		w.WriteHeader(http.StatusAccepted)
		answer(v1.Receipt{ID: reg.ID})
	case r.Method == http.MethodPost && r.URL.Path == "/prod"+v1.RouteSnapshots:
		snap, _, err := v1.DecodeClusterSnapshot(body)
		if err != nil {
			reject(err)
			return
		}
		s.snaps = append(s.snaps, *snap)
		w.WriteHeader(http.StatusAccepted)
		answer(v1.Receipt{ID: snap.ID})
	default:
		http.Error(w, `{"message":"no route"}`, http.StatusNotFound)
	}
}

func unstructuredJSON(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return u
}

// waitFor polls cond until it holds; it fails the test after 20 s. The
// deadline only bounds a hung test: nothing here measures speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("gave up waiting for %s", what)
}

// TestForwarderEndToEnd wires the forwarder as main does, against a fake
// cluster and an intake stub: a pending pod becomes a signed batch, the
// answer becomes a Nominated event and a NodeClaim mirror, and the config,
// node registration and snapshot reach the API.
func TestForwarderEndToEnd(t *testing.T) {
	stub := &intakeStub{t: t}
	srv := httptest.NewServer(stub)
	defer srv.Close()

	now := metav1.Now()
	kube := fake.NewClientset(
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "nodewright", Name: "nodewright-forwarder"}},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0", UID: "uid-web-0", CreationTimestamp: now},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			}}},
		},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1", CreationTimestamp: now}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}},
	)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		nodePoolsGVR: "NodePoolList", nodeClassesGVR: "EC2NodeClassList", mirror.GVR: "NodeClaimList",
	},
		unstructuredJSON(t, `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"default"},"spec":{"template":{"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}}}}}`),
		unstructuredJSON(t, `{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":"default"},"spec":{"role":"r","amiSelectorTerms":[{"alias":"al2023@latest"}],"subnetSelectorTerms":[{"id":"subnet-1"}],"securityGroupSelectorTerms":[{"id":"sg-1"}]}}`),
	)
	cfg, err := loadConfig([]string{"--batch-idle-duration=50ms", "--batch-max-duration=200ms"}, getenv(map[string]string{
		"CLUSTER_NAME": "prod", "API_ENDPOINT": srv.URL + "/prod", "AWS_REGION": "us-east-1",
		"POD_NAMESPACE": "nodewright", "POD_NAME": "forwarder-0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}, nil
	})
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), kube, dyn, creds)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()

	waitFor(t, "a Nominated event on web-0", func() bool {
		evs, err := kube.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == "Nominated" && e.InvolvedObject.Name == "web-0" && e.Message == "Pod should schedule on: nodeclaim/default-abc" {
				return true
			}
		}
		return false
	})
	waitFor(t, "the NodeClaim mirror", func() bool {
		nc, err := dyn.Resource(mirror.GVR).Get(ctx, "default-abc", metav1.GetOptions{})
		return err == nil && nc.GetLabels()[mirror.LabelMirror] == "true"
	})
	waitFor(t, "the event record's SpotInterrupted event on node n1", func() bool {
		evs, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == "SpotInterrupted" && e.InvolvedObject == (corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-n1"}) {
				return true
			}
		}
		return false
	})
	waitFor(t, "config, registration and snapshot", func() bool {
		stub.mu.Lock()
		defer stub.mu.Unlock()
		return len(stub.configs) > 0 && len(stub.regs) > 0 && len(stub.snaps) > 0
	})
	if err := a.ready(); err != nil {
		t.Errorf("ready() = %v after the loop ran", err)
	}
	stub.mu.Lock()
	if got := stub.batches[0].Pods[0].Name; got != "web-0" {
		t.Errorf("first batch carries %q, want web-0", got)
	}
	if got := stub.configs[0]; len(got.NodePools) != 1 || len(got.EC2NodeClasses) != 1 {
		t.Errorf("config = %d NodePools, %d EC2NodeClasses; want 1 and 1", len(got.NodePools), len(got.EC2NodeClasses))
	}
	if got := stub.regs[0].Nodes; len(got) != 1 || got[0].ProviderID != "aws:///us-east-1a/i-1" {
		t.Errorf("registrations = %+v", got)
	}
	stub.mu.Unlock()

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run() after shutdown = %v, want nil", err)
	}
	lease, err := kube.CoordinationV1().Leases("nodewright").Get(context.Background(), "nodewright-forwarder", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "" {
		t.Errorf("lease holder after shutdown = %v, want released", lease.Spec.HolderIdentity)
	}
}

func TestClusterObjectsUID(t *testing.T) {
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}}); err != nil {
		t.Fatal(err)
	}
	claim := func(name, uid string) *unstructured.Unstructured {
		return unstructuredJSON(t, `{"apiVersion":"karpenter.sh/v1","kind":"NodeClaim","metadata":{"name":"`+name+`","uid":"`+uid+`"}}`)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{mirror.GVR: "NodeClaimList"},
		claim("default-abc", "uid-abc"), claim("default-xyz", "uid-xyz"))
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0", UID: "uid-web-0"}}); err != nil {
		t.Fatal(err)
	}
	pools := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := pools.Add(unstructuredJSON(t, `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"default","uid":"uid-pool"}}`)); err != nil {
		t.Fatal(err)
	}
	objs := clusterObjects{nodes: corelisters.NewNodeLister(nodes), dyn: dyn, pods: corelisters.NewPodLister(pods),
		nodePools: cache.NewGenericLister(pools, nodePoolsGVR.GroupResource())}
	tests := []struct {
		name, kind, object string
		want               types.UID
		wantErr            bool
	}{
		{name: "should find a Node in the cache", kind: events.KindNode, object: "n1", want: "uid-n1"},
		{name: "should answer no UID for a Node the cluster does not have", kind: events.KindNode, object: "n9"},
		{name: "should find the NodeClaim of that name", kind: events.KindNodeClaim, object: "default-xyz", want: "uid-xyz"},
		{name: "should answer no UID for a NodeClaim the cluster does not have", kind: events.KindNodeClaim, object: "default-gone"},
		{name: "should find a Pod in the cache by namespace and name", kind: events.KindPod, object: "shop/web-0", want: "uid-web-0"},
		{name: "should answer no UID for a Pod of another namespace", kind: events.KindPod, object: "default/web-0"},
		{name: "should find the NodePool in the cache", kind: events.KindNodePool, object: "default", want: "uid-pool"},
		{name: "should answer no UID for a NodePool the cluster does not have", kind: events.KindNodePool, object: "gone"},
		{name: "should refuse another kind", kind: "Deployment", object: "web", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := objs.UID(t.Context(), tt.kind, tt.object)
			if (err != nil) != tt.wantErr {
				t.Fatalf("UID(%s, %s) error = %v, want error %v", tt.kind, tt.object, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("UID(%s, %s) = %q, want %q", tt.kind, tt.object, got, tt.want)
			}
		})
	}
}

func TestTrimKeepsWhatTheForwarderReads(t *testing.T) {
	grace := int64(30)
	now := metav1.Now()
	base := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "web-0", UID: "uid-web-0", ResourceVersion: "42", CreationTimestamp: now,
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{v1.AnnotationDoNotDisrupt: "true", "checksum/config": "abc"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "web:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}}},
			TerminationGracePeriodSeconds: &grace,
			Volumes:                       []corev1.Volume{{Name: "data"}},
		},
	}
	unschedulable := base.DeepCopy()
	unschedulable.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"},
	}}
	nominated := unschedulable.DeepCopy()
	nominated.Status.NominatedNodeName = "n1"
	running := base.DeepCopy()
	running.Spec.NodeName = "n1"
	running.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}, ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true}}}
	terminating := running.DeepCopy()
	terminating.DeletionTimestamp = &now
	daemon := unschedulable.DeepCopy()
	daemon.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds"}}
	mirrorPod := running.DeepCopy()
	mirrorPod.Annotations[corev1.MirrorPodAnnotationKey] = "hash"

	for name, p := range map[string]*corev1.Pod{
		"unschedulable": unschedulable, "nominated": nominated, "running": running,
		"terminating": terminating, "daemonset": daemon, "mirror": mirrorPod,
	} {
		t.Run(name, func(t *testing.T) {
			obj, err := newTrim()(p.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			got := obj.(*corev1.Pod)
			if pending.Provisionable(got) != pending.Provisionable(p) || pending.Reschedulable(got) != pending.Reschedulable(p) {
				t.Errorf("trimmed pod: provisionable %v reschedulable %v; original %v %v",
					pending.Provisionable(got), pending.Reschedulable(got), pending.Provisionable(p), pending.Reschedulable(p))
			}
			if diff := cmp.Diff(v1.SummarizePod(p), v1.SummarizePod(got)); diff != "" {
				t.Errorf("summary changed by trimming (-original +trimmed):\n%s", diff)
			}
			if got.ResourceVersion != p.ResourceVersion || got.ManagedFields != nil || got.Spec.Volumes != nil || got.Spec.Containers[0].Image != "" {
				t.Errorf("trimmed pod keeps too much or too little: %+v", got)
			}
		})
	}

	t.Run("the Ready transition and container limits the Karpenter metrics read are kept", func(t *testing.T) {
		ready := metav1.NewTime(now.Add(12 * time.Second))
		p := running.DeepCopy()
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		p.Status.Conditions[0].LastTransitionTime = ready
		p.Status.Conditions[0].Message = "all containers ready"
		obj, err := newTrim()(p)
		if err != nil {
			t.Fatal(err)
		}
		got := obj.(*corev1.Pod)
		wantConds := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ready}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		if diff := cmp.Diff(wantConds, got.Status.Conditions); diff != "" {
			t.Errorf("trimmed conditions mismatch (-want +got):\n%s", diff)
		}
		if lim := got.Spec.Containers[0].Resources.Limits.Memory(); lim.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("trimmed memory limit = %v, want 1Gi", lim)
		}
	})

	t.Run("node images and managedFields are dropped", func(t *testing.T) {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
			Status:     corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"busybox"}}}},
		}
		obj, err := newTrim()(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := obj.(*corev1.Node); got.Status.Images != nil || got.ManagedFields != nil {
			t.Errorf("trim(node) = %+v", got)
		}
	})
}

func TestNodePoolNamesErrsUntilTheCacheSynced(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{nodePoolsGVR: "NodePoolList"},
		unstructuredJSON(t, `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"default"}}`))
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	pools := factory.ForResource(nodePoolsGVR)
	if names, err := nodePoolNames(pools); err == nil {
		t.Fatalf("nodePoolNames() before the sync = %v, nil; want an error (an empty cache is not an empty cluster)", names)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer factory.Shutdown() // after cancel: Shutdown waits for the informers to stop
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pools.Informer().HasSynced) {
		t.Fatal("cache did not sync")
	}
	names, err := nodePoolNames(pools)
	if err != nil || !cmp.Equal(names, []string{"default"}) {
		t.Errorf("nodePoolNames() after the sync = %v, %v; want [default], nil", names, err)
	}
}
