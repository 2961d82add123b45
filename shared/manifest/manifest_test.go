package manifest_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/manifest"
)

// summary is the part of an Object the tests compare.
type summary struct {
	Source, APIVersion, Kind, Namespace, Name string
	Typed                                     string
	Warnings                                  []string
}

func summarize(objs []manifest.Object) []summary {
	var out []summary
	for _, o := range objs {
		s := summary{Source: o.Source, APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
		if o.Typed != nil {
			s.Typed = fmt.Sprintf("%T", o.Typed)
		}
		for _, w := range o.Warnings {
			s.Warnings = append(s.Warnings, w.Error())
		}
		out = append(out, s)
	}
	return out
}

const nodePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

func TestRead(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []summary
	}{
		{
			name: "should return one object per document in order",
			give: nodePool + "---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec: {}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\n",
			want: []summary{
				{Source: "f#1", APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "default", Typed: "*v1.NodePool"},
				{Source: "f#2", APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass", Name: "default", Typed: "*v1.EC2NodeClass"},
				{Source: "f#3", APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: "web", Typed: "*v1.Pod"},
			},
		},
		{
			name: "should skip empty and comment-only documents but keep counting them",
			give: "---\n# only a comment\n---\n\n---\n" + nodePool + "...\n",
			want: []summary{{Source: "f#3", APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "default", Typed: "*v1.NodePool"}},
		},
		{
			name: "should read a stream of JSON objects",
			give: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"}} {"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"b"}}`,
			want: []summary{
				{Source: "f#1", APIVersion: "apps/v1", Kind: "Deployment", Name: "a", Typed: "*v1.Deployment"},
				{Source: "f#2", APIVersion: "apps/v1", Kind: "DaemonSet", Name: "b", Typed: "*v1.DaemonSet"},
			},
		},
		{
			name: "should decode every workload kind the solver reads",
			give: "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: ss}\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: pdb}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n---\napiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: nc}\n",
			want: []summary{
				{Source: "f#1", APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Typed: "*v1.ReplicaSet"},
				{Source: "f#2", APIVersion: "apps/v1", Kind: "StatefulSet", Name: "ss", Typed: "*v1.StatefulSet"},
				{Source: "f#3", APIVersion: "batch/v1", Kind: "Job", Name: "j", Typed: "*v1.Job"},
				{Source: "f#4", APIVersion: "policy/v1", Kind: "PodDisruptionBudget", Name: "pdb", Typed: "*v1.PodDisruptionBudget"},
				{Source: "f#5", APIVersion: "v1", Kind: "Node", Name: "node-1", Typed: "*v1.Node"},
				{Source: "f#6", APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "nc", Typed: "*v1.NodeClaim"},
			},
		},
		{
			name: "should flatten a v1 List",
			give: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n",
			want: []summary{
				{Source: "f#1.items[0]", APIVersion: "v1", Kind: "Pod", Name: "a", Typed: "*v1.Pod"},
				{Source: "f#1.items[1]", APIVersion: "v1", Kind: "ConfigMap", Name: "b"},
			},
		},
		{
			name: "should give items of a typed list the list's kind",
			give: "apiVersion: karpenter.sh/v1\nkind: NodePoolList\nitems:\n- metadata: {name: a}\n",
			want: []summary{{Source: "f#1.items[0]", APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "a", Typed: "*v1.NodePool"}},
		},
		{
			name: "should leave other kinds untyped",
			give: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
			want: []summary{
				{Source: "f#1", APIVersion: "v1", Kind: "ConfigMap", Name: "c"},
				{Source: "f#2", APIVersion: "example.com/v1", Kind: "Widget", Name: "w"},
			},
		},
		{
			name: "should report unknown NodePool fields as warnings with their path",
			give: strings.Replace(nodePool, "      requirements:", "      kubeletz: {}\n      requirements:", 1),
			want: []summary{{
				Source: "f#1", APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "default", Typed: "*v1.NodePool",
				Warnings: []string{"spec.template.spec.kubeletz: unknown field (not in Karpenter v1.14.1); ignored"},
			}},
		},
		{
			name: "should report HEAD-only kubelet keys as warnings",
			give: "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: k}\nspec:\n  kubelet: {maxPods: 110, registryPullQPS: 10}\n",
			want: []summary{{
				Source: "f#1", APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass", Name: "k", Typed: "*v1.EC2NodeClass",
				Warnings: []string{"spec.kubelet.registryPullQPS: not part of Karpenter v1.14.1's kubelet schema (accepted by newer Karpenter); kept but not used by nodewright"},
			}},
		},
		{
			name: "should skip a Karpenter kind of an older API version with a warning",
			give: "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\n",
			want: []summary{{
				Source: "f#1", APIVersion: "karpenter.sh/v1beta1", Kind: "NodePool", Name: "old",
				Warnings: []string{"apiVersion: karpenter.sh/v1beta1 NodePool is not supported (only karpenter.sh/v1 and karpenter.k8s.aws/v1); object skipped"},
			}},
		},
		{
			name: "should match field names case-sensitively like the API server",
			give: "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: c}\nspec:\n  Weight: 5\n",
			want: []summary{{
				Source: "f#1", APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "c", Typed: "*v1.NodePool",
				Warnings: []string{"spec.Weight: unknown field (not in Karpenter v1.14.1); ignored"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := manifest.Read(strings.NewReader(tt.give), "f")
			if err != nil {
				t.Fatalf("Read() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("Read() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name       string
		give       string
		wantErrs   []string
		wantSource []string // sources of the objects still returned
	}{
		{
			name:       "should name the document and the file line of invalid YAML and keep the others",
			give:       nodePool + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n",
			wantErrs:   []string{"f#2: not valid YAML: yaml: line 14: did not find expected ',' or ']'"},
			wantSource: []string{"f#1"},
		},
		{
			name:     "should name the field of a NodePool value of the wrong type",
			give:     nodePool + "  weight: heavy\n",
			wantErrs: []string{`f#1: NodePool "default": spec.weight: expected an integer, got string`},
		},
		{
			name:     "should name the indexed field of a bad minValues",
			give:     strings.Replace(nodePool, "values: [amd64]}", "values: [amd64], minValues: two}", 1),
			wantErrs: []string{`f#1: NodePool "default": spec.template.spec.requirements[0].minValues: expected an integer, got string`},
		},
		{
			name:     "should name the field of a bad limits quantity",
			give:     nodePool + "  limits: {cpu: lots}\n",
			wantErrs: []string{`f#1: NodePool "default": spec.limits[cpu]: expected a quantity such as "500m", "4" or "16Gi"`},
		},
		{
			name:     "should name the field of a Deployment value of the wrong type",
			give:     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: many}\n",
			wantErrs: []string{`f#1: Deployment "d": spec.replicas: expected an integer, got string`},
		},
		{
			name:     "should report every bad document",
			give:     "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: 1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {nodeName: [x]}\n",
			wantErrs: []string{`f#1: Pod "a": spec.containers: expected a list, got number 1`, `f#2: Pod "b": spec.nodeName: expected a string, got array`},
		},
		{
			name:     "should reject a duplicated YAML key with its path and line, as kubectl does",
			give:     nodePool + "  limits: {cpu: \"10\"}\n  limits: {cpu: \"1000\"}\n",
			wantErrs: []string{`f#1: NodePool "default": spec.limits: key "limits" already set in map (line 11)`},
		},
		{
			name:     "should reject a duplicated JSON key",
			give:     `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "name": "b"}}`,
			wantErrs: []string{`f#1: Pod "b": metadata.name: key "name" already set in map (line 1)`},
		},
		{
			name:     "should reject two documents concatenated without a separator",
			give:     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n" + nodePool,
			wantErrs: []string{`f#1: NodePool "default": apiVersion: key "apiVersion" already set in map (line 4)`, `f#1: NodePool "default": kind: key "kind" already set in map (line 5)`, `f#1: NodePool "default": metadata: key "metadata" already set in map (line 6)`},
		},
		{
			name:     "should report every value of the wrong type of one object, not only the first",
			give:     nodePool + "  weight: heavy\n  limits: {cpu: lots}\n",
			wantErrs: []string{`f#1: NodePool "default": spec.limits[cpu]: expected a quantity such as "500m", "4" or "16Gi"`, `f#1: NodePool "default": spec.weight: expected an integer, got string`},
		},
		{
			name:     "should reject a misspelt kind of a Karpenter API group",
			give:     strings.Replace(nodePool, "kind: NodePool", "kind: Nodepool", 1),
			wantErrs: []string{`f#1: Nodepool "default": kind: "Nodepool" is not a kind of karpenter.sh (want NodePool, NodeClaim or EC2NodeClass; kinds are case-sensitive)`},
		},
		{
			name:     "should reject a kind without an apiVersion",
			give:     strings.Replace(nodePool, "apiVersion: karpenter.sh/v1\n", "", 1),
			wantErrs: []string{`f#1: NodePool "default": apiVersion: required`},
		},
		{
			name:     "should reject an object without a kind",
			give:     "apiVersion: v1\nmetadata: {name: x}\n",
			wantErrs: []string{`f#1: kind: required`},
		},
		{
			name:     "should reject a kind that is not a string",
			give:     "apiVersion: karpenter.sh/v1\nkind: [NodePool]\nmetadata: {name: x}\n",
			wantErrs: []string{`f#1: kind: expected a string, got a list`},
		},
		{
			name:     "should reject documents that are not objects",
			give:     "hello\n---\n[1, 2, 3]\n",
			wantErrs: []string{`f#1: expected an object with apiVersion and kind, got a string`, `f#2: expected an object with apiVersion and kind, got a list`},
		},
		{
			name:     "should name the item of a List that does not decode",
			give:     "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: x}, spec: {weight: [1]}}\n",
			wantErrs: []string{`f#1.items[0]: NodePool "x": spec.weight: expected an integer, got array`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := manifest.Read(strings.NewReader(tt.give), "f")
			if err == nil {
				t.Fatalf("Read() error = nil, want %q", tt.wantErrs)
			}
			var msgs []string
			for _, e := range unjoin(err) {
				var de *manifest.DocumentError
				if !errors.As(e, &de) {
					t.Errorf("error %v is not a *DocumentError", e)
				}
				msgs = append(msgs, e.Error())
			}
			if diff := cmp.Diff(tt.wantErrs, msgs); diff != "" {
				t.Errorf("Read() errors mismatch (-want +got):\n%s", diff)
			}
			var sources []string
			for _, o := range got {
				sources = append(sources, o.Source)
			}
			if diff := cmp.Diff(tt.wantSource, sources); diff != "" {
				t.Errorf("Read() objects mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

func TestReadPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name string) string { return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\n" }
	write("b.yaml", pod("b"))
	write("a/z.yml", pod("z"))
	write("a/c.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"c"}}`)
	write("notes.txt", pod("ignored-extension"))
	write(".hidden/x.yaml", pod("ignored-hidden-dir"))
	write(".x.yaml", pod("ignored-hidden-file"))
	write("single.txt", pod("explicit-file"))

	got, err := manifest.ReadPaths([]string{dir, filepath.Join(dir, "single.txt"), "-"}, strings.NewReader(pod("from-stdin")))
	if err != nil {
		t.Fatalf("ReadPaths() error = %v", err)
	}
	var names, sources []string
	for _, o := range got {
		names = append(names, o.Name)
		sources = append(sources, strings.TrimPrefix(o.Source, dir+string(filepath.Separator)))
	}
	if diff := cmp.Diff([]string{"c", "z", "b", "explicit-file", "from-stdin"}, names); diff != "" {
		t.Errorf("ReadPaths() names mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a/c.json#1", "a/z.yml#1", "b.yaml#1", "single.txt#1", "stdin#1"}, sources); diff != "" {
		t.Errorf("ReadPaths() sources mismatch (-want +got):\n%s", diff)
	}
}

func TestReadPathsErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{name: "should fail on a missing path", paths: []string{filepath.Join(dir, "missing.yaml")}, want: "manifest path: stat " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"},
		{name: "should fail on stdin without input", paths: []string{"-"}, want: "read stdin: no input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.ReadPaths(tt.paths, nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("ReadPaths() error = %v, want %q", err, tt.want)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(nodePool))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{kind: Pod}, 3]\n"))
	f.Add([]byte(`{"kind":"NodePoolList","apiVersion":"karpenter.sh/v1","items":[{"spec":{"weight":"x"}}]}`))
	f.Add([]byte("---\n--- \n...\n&a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := manifest.Read(strings.NewReader(string(data)), "fuzz")
		for _, o := range objs {
			if !strings.HasPrefix(o.Source, "fuzz#") {
				t.Errorf("source %q lacks the stream name", o.Source)
			}
		}
		_ = err
	})
}

func TestReadPartial(t *testing.T) {
	_, err := manifest.Read(strings.NewReader(nodePool+"  weight: heavy\n  limits: {cpu: lots, memory: 1Gi}\n"), "f")
	var de *manifest.DocumentError
	if !errors.As(err, &de) || de.Partial == nil {
		t.Fatalf("Read() error = %v, want a *DocumentError with Partial", err)
	}
	np, ok := de.Partial.Typed.(*v1.NodePool)
	if !ok {
		t.Fatalf("Partial.Typed = %T, want *v1.NodePool", de.Partial.Typed)
	}
	got := map[string]string{}
	for k, q := range np.Spec.Limits {
		got[string(k)] = q.String()
	}
	if diff := cmp.Diff(map[string]string{"memory": "1Gi"}, got); diff != "" {
		t.Errorf("Partial limits mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("default", de.Partial.Name); diff != "" {
		t.Errorf("Partial name mismatch (-want +got):\n%s", diff)
	}
}
