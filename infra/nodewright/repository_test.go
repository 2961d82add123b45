package nodewright

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// These tests tie the construct's tables to the repository they deploy:
// a new Lambda, route or cluster permission fails here until the
// construct knows it.

func TestEveryFunctionHasARow(t *testing.T) {
	mains, err := filepath.Glob(filepath.Join(repoRoot, "functions", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) == 0 {
		t.Fatal("no functions/*/main.go: wrong repository root")
	}
	rows := functionNames()
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		if !slices.Contains(rows, name) {
			t.Errorf("functions/%s/main.go has no row in the functions table (functions.go): it would not be deployed", name)
		}
	}
}

// routeRE matches the route constants of shared/apis/v1/podbatch.go and
// replacement.go.
var routeRE = regexp.MustCompile(`Route[A-Za-z]+\s*=\s*"(/v1/[^"]*)"`)

func TestAPIServesEveryContractRoute(t *testing.T) {
	var contract []string
	for _, file := range []string{"podbatch.go", "replacement.go"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "shared", "apis", "v1", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range routeRE.FindAllStringSubmatch(string(raw), -1) {
			contract = append(contract, m[1])
		}
	}
	if len(contract) == 0 {
		t.Fatal("no Route constants found in podbatch.go")
	}
	var served []string
	for _, r := range apiRoutes {
		if !slices.Contains(served, strings.TrimSuffix(r.path, "/{id}")) {
			served = append(served, strings.TrimSuffix(r.path, "/{id}"))
		}
	}
	slices.Sort(contract)
	slices.Sort(served)
	if diff := cmp.Diff(contract, served); diff != "" {
		t.Errorf("API routes mismatch (-contract +served):\n%s", diff)
	}
}

// k8sObject is the part of a Kubernetes manifest these tests read.
type k8sObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	RoleRef struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"roleRef"`
	Subjects []struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"subjects"`
	Rules []struct {
		APIGroups []string `json:"apiGroups"`
		Resources []string `json:"resources"`
		Verbs     []string `json:"verbs"`
	} `json:"rules"`
}

func readObjects(t *testing.T, path string) []k8sObject {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []k8sObject
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var o k8sObject
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, o)
	}
	return out
}

func TestClusterPermissions(t *testing.T) {
	objects := readObjects(t, filepath.Join("..", "kube", "rbac.yaml"))
	roles := map[string]k8sObject{}
	bound := map[string]string{} // group -> ClusterRole
	for _, o := range objects {
		switch o.Kind {
		case "ClusterRole":
			roles[o.Metadata.Name] = o
		case "ClusterRoleBinding":
			for _, s := range o.Subjects {
				if s.Kind == "Group" {
					bound[s.Name] = o.RoleRef.Name
				}
			}
		default:
			t.Errorf("rbac.yaml: unexpected %s %s", o.Kind, o.Metadata.Name)
		}
	}
	var groups []string
	for _, f := range functions {
		if f.kube == nil {
			continue
		}
		groups = append(groups, f.kube.group)
		t.Run("should bind "+f.kube.group+" to a ClusterRole that neither wildcards nor escalates", func(t *testing.T) {
			role, ok := roles[bound[f.kube.group]]
			if !ok {
				t.Fatalf("group %s (function %s) is bound to no ClusterRole in infra/kube/rbac.yaml", f.kube.group, f.name)
			}
			for _, r := range role.Rules {
				for _, x := range slices.Concat(r.APIGroups, r.Resources, r.Verbs) {
					if x == "*" {
						t.Errorf("ClusterRole %s: wildcard in %+v", role.Metadata.Name, r)
					}
				}
				for _, v := range r.Verbs {
					if v == "escalate" || v == "bind" || v == "impersonate" {
						t.Errorf("ClusterRole %s: verb %s", role.Metadata.Name, v)
					}
				}
			}
		})
	}
	for group := range bound {
		if !slices.Contains(groups, group) {
			t.Errorf("rbac.yaml binds group %s, which no function of the table has", group)
		}
	}
}

// kustomizePatch is one entry of a kustomization's patches.
type kustomizePatch struct {
	Target struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"target"`
	Patch string `json:"patch"`
}

func TestForwarderOverlay(t *testing.T) {
	// The pod identity association and the IRSA trust name the forwarder's
	// ServiceAccount; it must be the one forwarder/deploy creates.
	var kust struct {
		Namespace string           `json:"namespace"`
		Resources []string         `json:"resources"`
		Patches   []kustomizePatch `json:"patches"`
	}
	for _, p := range []string{filepath.Join(repoRoot, "forwarder", "deploy", "kustomization.yaml"), filepath.Join("..", "kube", "kustomization.yaml")} {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		kust.Namespace = ""
		if err := yaml.Unmarshal(raw, &kust); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if kust.Namespace != forwarderNamespace {
			t.Errorf("%s: namespace %q, want %q", p, kust.Namespace, forwarderNamespace)
		}
	}
	if diff := cmp.Diff([]string{"../../forwarder/deploy", "rbac.yaml"}, kust.Resources); diff != "" {
		t.Errorf("infra/kube resources mismatch (-want +got):\n%s", diff)
	}
	sa := readObjects(t, filepath.Join(repoRoot, "forwarder", "deploy", "serviceaccount.yaml"))
	if len(sa) != 1 || sa[0].Metadata.Name != forwarderServiceAccount {
		t.Fatalf("forwarder/deploy/serviceaccount.yaml: %+v, want the ServiceAccount %s", sa, forwarderServiceAccount)
	}
	// With Pod Identity an IRSA annotation would win in the SDK's
	// credential chain: the overlay removes every one forwarder/deploy sets.
	for key := range sa[0].Metadata.Annotations {
		removal := "path: /metadata/annotations/" + strings.ReplaceAll(key, "/", "~1")
		if !slices.ContainsFunc(kust.Patches, func(p kustomizePatch) bool {
			return p.Target.Kind == "ServiceAccount" && p.Target.Name == forwarderServiceAccount && strings.Contains(p.Patch, removal)
		}) {
			t.Errorf("infra/kube does not remove the ServiceAccount annotation %s", key)
		}
	}
}
