package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// SnapshotKind is one kind of object a cluster snapshot holds: its
// apiVersion and kind (as a manifest spells them) and the resource listed.
type SnapshotKind struct {
	APIVersion, Kind string
	Resource         schema.GroupVersionResource
}

// SnapshotKinds are the kinds Snapshot lists, in order: what `nodewright
// disruption` and `nodewright rollout` read from manifests (NodePools,
// EC2NodeClasses, NodeClaims, Nodes, Pods, PodDisruptionBudgets,
// DaemonSets). The reader needs list on each, cluster-wide.
var SnapshotKinds = []SnapshotKind{
	{v1.Group + "/v1", v1.KindNodePool, schema.GroupVersionResource{Group: v1.Group, Version: "v1", Resource: "nodepools"}},
	{v1.AWSGroup + "/v1", v1.KindEC2NodeClass, schema.GroupVersionResource{Group: v1.AWSGroup, Version: "v1", Resource: "ec2nodeclasses"}},
	{v1.Group + "/v1", v1.KindNodeClaim, schema.GroupVersionResource{Group: v1.Group, Version: "v1", Resource: "nodeclaims"}},
	{"v1", "Node", schema.GroupVersionResource{Version: "v1", Resource: "nodes"}},
	{"v1", "Pod", schema.GroupVersionResource{Version: "v1", Resource: "pods"}},
	{"policy/v1", "PodDisruptionBudget", schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}},
	{"apps/v1", "DaemonSet", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}},
}

// Snapshot lists every object of SnapshotKinds in every namespace through
// dc, paging by ListPageSize, and returns them as one JSON List manifest
// ({"apiVersion":"v1","kind":"List","items":[...]}), each item with its
// apiVersion and kind set, in SnapshotKinds order and the server's order
// within a kind. managedFields are dropped. A kind whose resource the
// server does not serve (a cluster without the Karpenter CRDs) is an error
// naming the resource, as is any failed list.
func Snapshot(ctx context.Context, dc dynamic.Interface) ([]byte, error) {
	items := []json.RawMessage{}
	for _, k := range SnapshotKinds {
		objs, err := listAll(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]unstructured.Unstructured, string, error) {
			l, err := dc.Resource(k.Resource).List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return l.Items, l.GetContinue(), nil
		})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("list %s: the API server does not serve %s (are the Karpenter CRDs installed?): %w", k.Resource.Resource, k.Resource.GroupResource(), err)
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", k.Resource.Resource, err)
		}
		for i := range objs {
			o := &objs[i]
			o.SetAPIVersion(k.APIVersion)
			o.SetKind(k.Kind)
			o.SetManagedFields(nil)
			raw, err := o.MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("list %s: encode %s: %w", k.Resource.Resource, o.GetName(), err)
			}
			items = append(items, raw)
		}
	}
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// LiveSnapshot is Snapshot of the cluster a kubeconfig names (see
// KubeconfigRESTConfig for how path and context choose it).
func LiveSnapshot(ctx context.Context, path, kubeContext string) ([]byte, error) {
	rc, err := KubeconfigRESTConfig(path, kubeContext)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	return Snapshot(ctx, dc)
}

// KubeconfigRESTConfig returns the client configuration of a kubeconfig,
// the way kubectl finds it: path when set, else $KUBECONFIG, else
// ~/.kube/config; kubeContext names the context (empty: the current one).
// The limits are DefaultQPS, DefaultBurst and DefaultRequestTimeout, the
// user agent UserAgent. It fails when no kubeconfig is found or the context
// does not exist.
func KubeconfigRESTConfig(path, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	rc, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("kubeconfig: none found (give --kubeconfig or set KUBECONFIG)")
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst, rc.Timeout, rc.UserAgent = DefaultQPS, DefaultBurst, DefaultRequestTimeout, UserAgent
	return rc, nil
}
