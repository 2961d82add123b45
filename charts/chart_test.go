package charts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/integration/harness"
	"github.com/nodewright/nodewright/shared/apis/crds"
)

const (
	chartDir   = "nodewright"
	valuesFile = "testdata/values.yaml"
	kustomized = "../infra/kube"
	namespace  = "nodewright" // the stack's Pod Identity association and IRSA trust name it
)

func documentedValues(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// render is `helm template nodewright charts/nodewright --namespace
// nodewright --include-crds` with vals, through Helm's Go library.
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return renderChart(ch, vals)
}

func renderChart(ch *chart.Chart, vals map[string]any) ([]*unstructured.Unstructured, error) {
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = "nodewright", namespace
	install.Replace, install.IncludeCRDs = true, true
	rel, err := install.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("release of type %T", rel)
	}
	return decode([]byte(r.Manifest))
}

// decode splits a multi-document YAML stream into objects, dropping empty
// documents.
func decode(stream []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(stream), -1) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("decode %q: %w", doc, err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out, nil
}

// kustomize is `kubectl kustomize infra/kube` (kubectl embeds krusty).
func kustomize(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kustomized)
	if err != nil {
		t.Fatalf("kustomize %s: %v", kustomized, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// generatedSuffix is the content hash kustomize's configMapGenerator
// appends to the ConfigMap's name (and to the references to it).
var generatedSuffix = regexp.MustCompile(`^(nodewright-forwarder-settings)-[a-z0-9]{10}$`)

// normalize removes what may differ between the chart and the kustomize
// base: empty annotations, every labels map (Helm adds its release labels; selectors are kept
// and compared), the pod template's checksum/config annotation (the chart
// rolls pods on a settings change that way, kustomize by renaming the
// ConfigMap), and the generated ConfigMap's name suffix.
func normalize(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopy()
		unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "labels")
		unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations", "checksum/config")
		if len(o.GetAnnotations()) == 0 { // infra/kube's patch leaves the ServiceAccount an empty map
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
		}
		if o.GetKind() == "ConfigMap" {
			o.SetName(generatedSuffix.ReplaceAllString(o.GetName(), "$1"))
		}
		if o.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				for _, ef := range c.(map[string]any)["envFrom"].([]any) {
					ref := ef.(map[string]any)["configMapRef"].(map[string]any)
					ref["name"] = generatedSuffix.ReplaceAllString(ref["name"].(string), "$1")
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
		}
		out[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o.Object
	}
	return out
}

func TestTemplateEqualsKustomize(t *testing.T) {
	objs, err := render(t, documentedValues(t))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	want := normalize(kustomize(t))
	// The chart leaves the Namespace to `helm upgrade --install
	// --create-namespace`, as charts do; kustomize creates it.
	delete(want, "Namespace /"+namespace)
	got := normalize(objs)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("helm template differs from kubectl kustomize %s, modulo labels (-kustomize +helm):\n%s", kustomized, diff)
	}
	// What the comparison would hide if both lacked it.
	for _, key := range []string{"Deployment nodewright/nodewright-forwarder", "Service nodewright/nodewright-forwarder", "Lease nodewright/nodewright-forwarder",
		"PodDisruptionBudget nodewright/nodewright-forwarder", "ClusterRole /nodewright:disrupttask"} {
		if got[key] == nil {
			t.Errorf("no %s rendered", key)
		}
	}
	var crdNames []string
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crdNames = append(crdNames, o.GetName())
		}
	}
	var wantCRDs []string
	for _, c := range crds.All() {
		o, err := harness.FromYAML(c.YAML)
		if err != nil {
			t.Fatal(err)
		}
		wantCRDs = append(wantCRDs, o.GetName())
	}
	slices.Sort(crdNames)
	slices.Sort(wantCRDs)
	if diff := cmp.Diff(wantCRDs, crdNames); diff != "" {
		t.Errorf("the chart's CRDs differ from shared/apis/crds (-want +got):\n%s", diff)
	}
}

func TestRenderValues(t *testing.T) {
	set := func(path string, v any) map[string]any { return mergeInto(documentedValues(t), path, v) }
	find := func(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
		t.Helper()
		for _, o := range objs {
			if o.GetKind() == kind {
				return o
			}
		}
		t.Fatalf("no %s rendered", kind)
		return nil
	}

	t.Run("should carry the Karpenter-shaped values into the Deployment", func(t *testing.T) {
		vals := set("nodeSelector", map[string]any{"eks.amazonaws.com/compute-type": "fargate"})
		vals = mergeInto(vals, "controller.resources", map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}})
		vals = mergeInto(vals, "serviceAccount.annotations", map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/fwd"})
		vals = mergeInto(vals, "tolerations", []any{map[string]any{"key": "dedicated", "operator": "Exists"}})
		vals = mergeInto(vals, "logLevel", "debug")
		vals = mergeInto(vals, "settings.batchIdleDuration", "2s")
		objs, err := render(t, vals)
		if err != nil {
			t.Fatal(err)
		}
		d := find(t, objs, "Deployment")
		spec := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		if diff := cmp.Diff(map[string]any{"eks.amazonaws.com/compute-type": "fargate"}, spec["nodeSelector"]); diff != "" {
			t.Errorf("nodeSelector (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]any{map[string]any{"key": "dedicated", "operator": "Exists"}}, spec["tolerations"]); diff != "" {
			t.Errorf("tolerations (-want +got):\n%s", diff)
		}
		c := spec["containers"].([]any)[0].(map[string]any)
		// Helm merges given values into the defaults: the default memory limit (2Gi) stays.
		want := map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}, "limits": map[string]any{"memory": "2Gi"}}
		if diff := cmp.Diff(want, c["resources"]); diff != "" {
			t.Errorf("resources (-want +got):\n%s", diff)
		}
		if got := c["image"]; got != "111122223333.dkr.ecr.us-east-1.amazonaws.com/nodewright-forwarder@sha256:"+strings.Repeat("0", 64) {
			t.Errorf("image = %v, want the repository pinned by digest", got)
		}
		cm := find(t, objs, "ConfigMap")
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		if data["LOG_LEVEL"] != "debug" || data["BATCH_IDLE_DURATION"] != "2s" || data["CLUSTER_NAME"] != "my-cluster" {
			t.Errorf("ConfigMap data = %v", data)
		}
		sa := find(t, objs, "ServiceAccount")
		if sa.GetAnnotations()["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/fwd" {
			t.Errorf("ServiceAccount annotations = %v", sa.GetAnnotations())
		}
	})
	t.Run("should roll the pods when a setting changes", func(t *testing.T) {
		a, err := render(t, documentedValues(t))
		if err != nil {
			t.Fatal(err)
		}
		b, err := render(t, set("settings.batchMaxDuration", "20s"))
		if err != nil {
			t.Fatal(err)
		}
		sum := func(objs []*unstructured.Unstructured) string {
			v, _, _ := unstructured.NestedString(find(t, objs, "Deployment").Object, "spec", "template", "metadata", "annotations", "checksum/config")
			return v
		}
		if sum(a) == "" || sum(a) == sum(b) {
			t.Errorf("checksum/config %q -> %q, want a change", sum(a), sum(b))
		}
	})
	t.Run("should render a ServiceMonitor only when enabled", func(t *testing.T) {
		objs, err := render(t, set("serviceMonitor.enabled", true))
		if err != nil {
			t.Fatal(err)
		}
		sm := find(t, objs, "ServiceMonitor")
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		svcSel, _, _ := unstructured.NestedStringMap(find(t, objs, "Service").Object, "spec", "selector")
		if diff := cmp.Diff(svcSel, sel); diff != "" {
			t.Errorf("ServiceMonitor selects other pods than the Service (-service +monitor):\n%s", diff)
		}
		plain, _ := render(t, documentedValues(t))
		for _, o := range plain {
			if o.GetKind() == "ServiceMonitor" {
				t.Error("ServiceMonitor rendered by default")
			}
		}
	})
	t.Run("should leave out the Lambdas' RBAC when asked", func(t *testing.T) {
		objs, err := render(t, set("lambdaRBAC.create", false))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if strings.HasPrefix(o.GetName(), "nodewright:") {
				t.Errorf("%s %s rendered", o.GetKind(), o.GetName())
			}
		}
	})
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"no cluster name", func(v map[string]any) { delete(v["settings"].(map[string]any), "clusterName") }, "settings.clusterName: required"},
		{"no endpoint", func(v map[string]any) { delete(v["settings"].(map[string]any), "apiEndpoint") }, "settings.apiEndpoint: required"},
		{"relative endpoint", func(v map[string]any) { v["settings"].(map[string]any)["apiEndpoint"] = "execute-api/prod" }, "settings.apiEndpoint \"execute-api/prod\": not an absolute URL"},
		{"no repository", func(v map[string]any) { delete(v["image"].(map[string]any), "repository") }, "image.repository: required"},
		{"no digest", func(v map[string]any) { delete(v["image"].(map[string]any), "digest") }, "image.digest: required"},
		{"a tag instead of a digest", func(v map[string]any) { v["image"].(map[string]any)["digest"] = "latest" }, "image.digest \"latest\": want sha256:"},
		{"a repository with a digest", func(v map[string]any) {
			v["image"].(map[string]any)["repository"] = "r@sha256:" + strings.Repeat("a", 64)
		}, "image.repository"},
		{"a feature gate", func(v map[string]any) {
			v["settings"].(map[string]any)["featureGates"] = map[string]any{"spotToSpotConsolidation": true}
		}, "settings.featureGates.spotToSpotConsolidation: nodewright's Lambdas apply feature gates"},
		{"an unknown log level", func(v map[string]any) { v["logLevel"] = "verbose" }, "logLevel \"verbose\""},
		{"an external ServiceAccount without a name", func(v map[string]any) { v["serviceAccount"] = map[string]any{"create": false} }, "serviceAccount.name: required"},
	}
	for _, tt := range tests {
		t.Run("should refuse "+tt.name, func(t *testing.T) {
			vals := documentedValues(t)
			tt.mutate(vals)
			_, err := render(t, vals)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("render error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestLint is `helm lint --strict`, with the documented values and without.
func TestLint(t *testing.T) {
	lint := action.NewLint()
	lint.Strict, lint.Namespace = true, namespace
	res := lint.Run([]string{chartDir}, documentedValues(t))
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint: %s", m)
		}
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
	if res.TotalChartsLinted != 1 {
		t.Errorf("linted %d charts, want 1", res.TotalChartsLinted)
	}
	// Lint tolerates missing required values (it logs them), so the chart's
	// own defaults lint clean too; rendering them fails (TestRenderErrors).
	if unset := lint.Run([]string{chartDir}, nil); len(unset.Errors) > 0 {
		t.Errorf("helm lint --strict without values: %v", unset.Errors)
	}
}

// TestChartCRDsAreLinks keeps one copy of each CRD: the chart's crds/ are
// links to shared/apis/crds, and its Lambda RBAC is a link to
// infra/kube/rbac.yaml.
func TestChartCRDsAreLinks(t *testing.T) {
	links := map[string]string{filepath.Join(chartDir, "files", "lambda-rbac.yaml"): filepath.Join("..", "infra", "kube", "rbac.yaml")}
	for _, c := range crds.All() {
		links[filepath.Join(chartDir, "crds", c.File)] = filepath.Join("..", "shared", "apis", "crds", c.File)
	}
	for link, target := range links {
		fi, err := os.Lstat(link)
		if err != nil {
			t.Errorf("%s: %v", link, err)
			continue
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is a copy; make it a link to %s", link, target)
			continue
		}
		got, err := os.ReadFile(link)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(target)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s does not resolve to %s", link, target)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(chartDir, "crds"))
	if len(entries) != len(crds.All()) {
		t.Errorf("crds/ holds %d files, shared/apis/crds %d", len(entries), len(crds.All()))
	}
}

// TestRenderedObjectsOnAPIServer has the local stack's kube-apiserver
// create every object the chart renders, with strict field validation:
// the CRDs first, then the rest in the release namespace.
func TestRenderedObjectsOnAPIServer(t *testing.T) {
	c := harness.StartCluster(t)
	objs, err := render(t, documentedValues(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(t.Context(), namespace); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return boolInt(b.GetKind() == "CustomResourceDefinition") - boolInt(a.GetKind() == "CustomResourceDefinition")
	})
	for _, o := range objs {
		if _, err := c.Create(t.Context(), o); err != nil {
			t.Errorf("%s %s/%s: refused: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mergeInto sets path in vals to v (creating maps on the way) and returns
// vals.
func mergeInto(vals map[string]any, path string, v any) map[string]any {
	m := vals
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
	return vals
}
