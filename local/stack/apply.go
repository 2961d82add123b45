package stack

import (
	"bytes"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Apply creates every object of a multi-document YAML manifest, with
// strict field validation (a field the schema does not know is an error);
// an object that exists already is replaced. Errors name the object.
func (s *Stack) Apply(ctx context.Context, manifest []byte) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(s.Kube.Discovery()))
	for _, doc := range bytes.Split(manifest, []byte("\n---")) {
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return fmt.Errorf("decode manifest: %w", err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("decode manifest: %w", err)
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		res := s.Dynamic.Resource(mapping.Resource)
		var ri = res.Namespace("")
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = res.Namespace(ns)
		}
		_, err = ri.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		if apierrors.IsAlreadyExists(err) {
			var cur *unstructured.Unstructured
			if cur, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
				obj.SetResourceVersion(cur.GetResourceVersion())
				_, err = ri.Update(ctx, obj, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
			}
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}
