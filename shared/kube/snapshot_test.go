package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/shared/kube"
)

// obj is an unstructured object of apiVersion and kind, with a
// managedFields entry as a server writes one.
func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec":     map[string]any{"x": name},
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

// fakeCluster is a dynamic fake serving SnapshotKinds (and Deployments)
// over objs.
func fakeCluster(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	lists := map[schema.GroupVersionResource]string{{Group: "apps", Version: "v1", Resource: "deployments"}: "DeploymentList"}
	for _, k := range kube.SnapshotKinds {
		lists[k.Resource] = k.Kind + "List"
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)
}

type listed struct {
	APIVersion, Kind, Namespace, Name string
	ManagedFields                     bool
	Spec                              string
}

func decodeSnapshot(t *testing.T, raw []byte) []listed {
	t.Helper()
	var list struct {
		APIVersion, Kind string
		Items            []map[string]any
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("Snapshot() is not JSON: %v", err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Fatalf("Snapshot() is %s %s; want a v1 List", list.APIVersion, list.Kind)
	}
	var got []listed
	for _, it := range list.Items {
		u := unstructured.Unstructured{Object: it}
		spec, _, _ := unstructured.NestedString(it, "spec", "x")
		got = append(got, listed{u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName(), u.GetManagedFields() != nil, spec})
	}
	return got
}

// Snapshot lists the seven kinds disruption reads, every namespace, as one
// List manifest in SnapshotKinds order, without managedFields and without
// the kinds it does not read.
func TestSnapshotListsTheKindsDisruptionReads(t *testing.T) {
	dc := fakeCluster(
		obj("apps/v1", "DaemonSet", "kube-system", "aws-node"),
		obj("v1", "Pod", "team-b", "web-1"),
		obj("v1", "Pod", "team-a", "web-0"),
		obj("apps/v1", "Deployment", "team-a", "web"),
		obj("policy/v1", "PodDisruptionBudget", "team-a", "web"),
		obj("v1", "Node", "", "ip-10-0-0-1"),
		obj("karpenter.sh/v1", "NodeClaim", "", "default-abcde"),
		obj("karpenter.k8s.aws/v1", "EC2NodeClass", "", "default"),
		obj("karpenter.sh/v1", "NodePool", "", "default"),
	)
	raw, err := kube.Snapshot(t.Context(), dc)
	if err != nil {
		t.Fatalf("Snapshot() error = %v", err)
	}
	want := []listed{
		{"karpenter.sh/v1", "NodePool", "", "default", false, "default"},
		{"karpenter.k8s.aws/v1", "EC2NodeClass", "", "default", false, "default"},
		{"karpenter.sh/v1", "NodeClaim", "", "default-abcde", false, "default-abcde"},
		{"v1", "Node", "", "ip-10-0-0-1", false, "ip-10-0-0-1"},
		{"v1", "Pod", "team-a", "web-0", false, "web-0"},
		{"v1", "Pod", "team-b", "web-1", false, "web-1"},
		{"policy/v1", "PodDisruptionBudget", "team-a", "web", false, "web"},
		{"apps/v1", "DaemonSet", "kube-system", "aws-node", false, "aws-node"},
	}
	if diff := cmp.Diff(want, decodeSnapshot(t, raw)); diff != "" {
		t.Errorf("Snapshot() items mismatch (-want +got):\n%s", diff)
	}
}

// recording wraps a dynamic client: it records the options of every list
// and, when pods is set, serves the pod list from it in pages with
// continue tokens (the dynamic fake neither passes Limit on nor returns a
// continue token).
type recording struct {
	dynamic.Interface
	lists []string
	opts  []metav1.ListOptions
	pods  *pager
}

func (c *recording) Resource(r schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return recordingResource{c.Interface.Resource(r), r.Resource, c}
}

type recordingResource struct {
	dynamic.NamespaceableResourceInterface
	resource string
	c        *recording
}

func (r recordingResource) List(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.c.lists, r.c.opts = append(r.c.lists, r.resource), append(r.c.opts, o)
	if r.resource != "pods" || r.c.pods == nil {
		return r.NamespaceableResourceInterface.List(ctx, o)
	}
	from, to, next, err := r.c.pods.page(o)
	if err != nil {
		return nil, err
	}
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "PodList"}}
	for i := from; i < to; i++ {
		l.Items = append(l.Items, *obj("v1", "Pod", "default", fmt.Sprintf("pod-%05d", i)))
	}
	l.SetContinue(next)
	return l, nil
}

// Every list asks for pages of ListPageSize and is read to its end; one
// whose continue token expired is read again from the start, not twice
// over.
func TestSnapshotReadsEveryPage(t *testing.T) {
	p := &pager{n: kube.ListPageSize*2 + 7, expireAt: map[int]bool{2: true}}
	dc := &recording{Interface: fakeCluster(), pods: p}
	raw, err := kube.Snapshot(t.Context(), dc)
	if err != nil {
		t.Fatalf("Snapshot() error = %v", err)
	}
	got := decodeSnapshot(t, raw)
	if len(got) != p.n {
		t.Fatalf("Snapshot() has %d items; want the %d pods once each", len(got), p.n)
	}
	for i, g := range got {
		if want := fmt.Sprintf("pod-%05d", i); g.Name != want || g.Kind != "Pod" {
			t.Fatalf("item %d is %s %s; want Pod %s", i, g.Kind, g.Name, want)
		}
	}
	// One pod page, the expiry, then the three pages again.
	want := []string{"nodepools", "ec2nodeclasses", "nodeclaims", "nodes", "pods", "pods", "pods", "pods", "pods", "poddisruptionbudgets", "daemonsets"}
	if diff := cmp.Diff(want, dc.lists); diff != "" {
		t.Errorf("lists mismatch (-want +got):\n%s", diff)
	}
	for i, o := range dc.opts {
		if o.Limit != kube.ListPageSize {
			t.Errorf("list %d (%s) with limit %d; want %d", i, dc.lists[i], o.Limit, kube.ListPageSize)
		}
	}
}

// A cluster without the Karpenter CRDs is an error naming the resource.
func TestSnapshotNamesAResourceTheServerDoesNotServe(t *testing.T) {
	dc := fakeCluster()
	dc.PrependReactor("list", "ec2nodeclasses", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "karpenter.k8s.aws", Resource: "ec2nodeclasses"}, "")
	})
	_, err := kube.Snapshot(t.Context(), dc)
	if err == nil || !strings.Contains(err.Error(), "ec2nodeclasses.karpenter.k8s.aws") || !strings.Contains(err.Error(), "CRDs") {
		t.Errorf("Snapshot() error = %v; want one naming ec2nodeclasses.karpenter.k8s.aws and the CRDs", err)
	}
}

const kubeconfig = `apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: a, context: {cluster: a, user: u}}
- {name: b, context: {cluster: b, user: u}}
`

// The kubeconfig's current context is used unless one is named; an
// unknown context is an error naming it; the client limits are ours.
func TestKubeconfigRESTConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ context, host string }{{"", "https://a.example:6443"}, {"b", "https://b.example:6443"}} {
		rc, err := kube.KubeconfigRESTConfig(path, tt.context)
		if err != nil {
			t.Fatalf("KubeconfigRESTConfig(%q) error = %v", tt.context, err)
		}
		if rc.Host != tt.host || rc.QPS != kube.DefaultQPS || rc.Burst != kube.DefaultBurst || rc.UserAgent != kube.UserAgent {
			t.Errorf("KubeconfigRESTConfig(%q) = host %s QPS %v burst %d agent %q; want %s and the package limits", tt.context, rc.Host, rc.QPS, rc.Burst, rc.UserAgent, tt.host)
		}
	}
	if _, err := kube.KubeconfigRESTConfig(path, "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("KubeconfigRESTConfig(unknown context) error = %v; want one naming it", err)
	}
}
