package harness

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/local/controlplane"
	"github.com/nodewright/nodewright/shared/apis/crds"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyCRDs creates nodewright's CustomResourceDefinitions (crds.All) and
// waits until the API server reports each one Established, so that
// NodePools, NodeClaims and EC2NodeClasses can be created right after.
func (c *Cluster) ApplyCRDs(ctx context.Context) error {
	var names []string
	for _, crd := range crds.All() {
		obj, err := FromYAML(crd.YAML)
		if err != nil {
			return fmt.Errorf("crd %s: %w", crd.File, err)
		}
		if _, err := c.Dynamic.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			return fmt.Errorf("create crd %s: %w", crd.File, err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := c.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return hasCondition(got, "Established"), nil
		})
		if err != nil {
			return fmt.Errorf("crd %s not established: %w", name, err)
		}
	}
	c.Mapper.Reset()
	return nil
}

// hasCondition reports whether obj's status has condition typ with status
// "True".
func hasCondition(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// FromYAML decodes one YAML or JSON object.
func FromYAML(data []byte) (*unstructured.Unstructured, error) {
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("decode yaml: %w", err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	return obj, nil
}

// ResourceFor returns the dynamic client of obj's kind, in obj's namespace
// ("default" when unset) for a namespaced kind.
func (c *Cluster) ResourceFor(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if isNoMatch(err) {
		c.Mapper.Reset()
		mapping, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("resource of %s: %w", gvk, err)
	}
	res := c.Dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() != "namespace" {
		return res, nil
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return res.Namespace(ns), nil
}

// Create creates obj as given, with strict field validation: a field the
// schema does not know is an error rather than silently dropped. It
// returns the object as stored (defaults applied).
func (c *Cluster) Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	res, err := c.ResourceFor(obj)
	if err != nil {
		return nil, err
	}
	return res.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
}

// Delete deletes obj (by kind, namespace and name); a missing object is
// not an error.
func (c *Cluster) Delete(ctx context.Context, obj *unstructured.Unstructured) error {
	res, err := c.ResourceFor(obj)
	if err != nil {
		return err
	}
	err = res.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// EnsureNamespace creates namespace ns unless it exists.
func (c *Cluster) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// KwokNode returns a Node as a kubelet would register it, for kwok to
// manage: annotated controlplane.ManagedNodeAnnotation, labelled with its
// hostname, os and arch (plus labels), born with the
// node.kubernetes.io/not-ready:NoSchedule taint and a Ready=False
// condition (kwok's node stages report it Ready; the node lifecycle
// controller then lifts the taint), and with capacity as both capacity and
// allocatable. The condition matters: the node lifecycle controller removes
// the not-ready taint from a Node that has no Ready condition at all, so
// the scheduler could bind Pods to a Node nobody runs.
func KwokNode(name string, capacity corev1.ResourceList, labels map[string]string) *corev1.Node {
	l := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	maps.Copy(l, labels)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      l,
			Annotations: map[string]string{controlplane.ManagedNodeAnnotation: controlplane.ManagedNodeValue},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity.DeepCopy(),
			Allocatable: capacity.DeepCopy(),
			Conditions: []corev1.NodeCondition{{
				Type:    corev1.NodeReady,
				Status:  corev1.ConditionFalse,
				Reason:  "KubeletNotReady",
				Message: "registered, not yet running",
			}},
		},
	}
}
