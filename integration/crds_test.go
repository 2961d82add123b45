package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodewright/nodewright/integration/harness"
	"github.com/nodewright/nodewright/shared/manifest"
)

const (
	seedsDir   = "../shared/apis/v1/testdata/seeds"
	invalidDir = "../shared/apis/v1/testdata/invalid"
)

// TestCRDsOnTheAPIServer installs nodewright's CRDs on a real
// kube-apiserver and checks what it admits: every seed manifest unchanged,
// and none of the invalid corpus except the rules Karpenter checks at run
// time ("# crd: accepted").
func TestCRDsOnTheAPIServer(t *testing.T) {
	c := harness.StartCluster(t)
	if err := c.ApplyCRDs(t.Context()); err != nil {
		t.Fatalf("apply CRDs: %v", err)
	}

	t.Run("should accept every seed manifest unchanged", func(t *testing.T) {
		folders, err := os.ReadDir(seedsDir)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, f := range folders {
			if !f.IsDir() {
				continue
			}
			// Each folder is one cluster's manifests; names repeat across
			// folders, so each folder's objects are deleted before the next.
			t.Run(f.Name(), func(t *testing.T) {
				objs, err := manifest.ReadPaths([]string{filepath.Join(seedsDir, f.Name())}, nil)
				if err != nil {
					t.Fatalf("read seeds: %v", err)
				}
				var created []*unstructured.Unstructured
				for _, o := range objs {
					want, err := harness.FromYAML(o.Raw)
					if err != nil {
						t.Fatalf("%s: %v", o.Source, err)
					}
					if ns := want.GetNamespace(); ns != "" {
						if err := c.EnsureNamespace(t.Context(), ns); err != nil {
							t.Fatalf("namespace %s: %v", ns, err)
						}
					}
					got, err := c.Create(t.Context(), want.DeepCopy())
					if err != nil {
						t.Errorf("%s (%s %s): rejected: %v", o.Source, o.Kind, o.Name, err)
						continue
					}
					created = append(created, got)
					total++
					if lost := notKept(want.Object, got.Object, ""); len(lost) > 0 {
						t.Errorf("%s (%s %s): stored object lost or changed %v", o.Source, o.Kind, o.Name, lost)
					}
				}
				for _, o := range created {
					if err := c.Delete(t.Context(), o); err != nil {
						t.Fatalf("delete %s %s: %v", o.GetKind(), o.GetName(), err)
					}
				}
				for _, o := range created {
					harness.Eventually(t, 30*time.Second, "delete "+o.GetKind()+" "+o.GetName(), func(ctx context.Context) (bool, error) {
						res, err := c.ResourceFor(o)
						if err != nil {
							return false, err
						}
						_, err = res.Get(ctx, o.GetName(), metav1.GetOptions{})
						return apierrors.IsNotFound(err), err
					})
				}
			})
		}
		// 17 NodePools and EC2NodeClasses, 2 Deployments and a Job.
		if total != 20 {
			t.Errorf("created %d seed objects, want 20", total)
		}
	})

	t.Run("should reject invalid manifests with the schema's message", func(t *testing.T) {
		// A few rules of each kind of check, with the API server's own
		// words: OpenAPI bounds, enums and patterns, then CEL rules.
		tests := []struct {
			file    string
			wantErr string
		}{
			{file: "nodepool-weight-101.yaml", wantErr: "spec.weight: Invalid value: 101: spec.weight in body should be less than or equal to 100"},
			{file: "nodepool-consolidationpolicy-typo.yaml", wantErr: `spec.disruption.consolidationPolicy: Unsupported value: "WhenUnderutilized"`},
			{file: "nodepool-budget-nodes-150-percent.yaml", wantErr: `spec.disruption.budgets[0].nodes: Invalid value: "150%": spec.disruption.budgets[0].nodes in body should match`},
			{file: "nodepool-expireafter-days.yaml", wantErr: `spec.template.spec.expireAfter: Invalid value: "3d"`},
			{file: "ec2nodeclass-subnet-id-pattern.yaml", wantErr: `spec.subnetSelectorTerms[0].id in body should match '^subnet-[0-9a-z]+$'`},
			{file: "ec2nodeclass-metadata-hop-limit-65.yaml", wantErr: "spec.metadataOptions.httpPutResponseHopLimit in body should be less than or equal to 64"},
			{file: "nodepool-label-karpenter-domain.yaml", wantErr: `spec.template.metadata.labels: Invalid value: label domain "karpenter.sh" is restricted`},
			{file: "nodepool-requirement-gt-two-values.yaml", wantErr: "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value"},
			{file: "ec2nodeclass-role-and-instanceprofile.yaml", wantErr: "spec: Invalid value: must specify exactly one of ['role', 'instanceProfile']"},
			{file: "ec2nodeclass-amifamily-missing.yaml", wantErr: "amiFamily must be set if amiSelectorTerms does not contain an alias"},
			{file: "ec2nodeclass-alias-with-other-terms.yaml", wantErr: "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
		}
		for _, tt := range tests {
			t.Run(tt.file, func(t *testing.T) {
				obj := readObject(t, filepath.Join(invalidDir, tt.file))
				_, err := c.Create(t.Context(), obj)
				if !apierrors.IsInvalid(err) {
					t.Fatalf("Create() error = %v, want Invalid", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Create() error = %q, want it to contain %q", err, tt.wantErr)
				}
			})
		}
	})

	t.Run("should reject every invalid manifest the CRDs can check", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(invalidDir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no invalid manifests: %v", err)
		}
		rejected := 0
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := harness.FromYAML(data)
			if err != nil {
				continue // not YAML at all (malformed-yaml.yaml): nothing to send
			}
			runtimeOnly := bytes.Contains(data, []byte("\n# crd: accepted"))
			t.Run(filepath.Base(f), func(t *testing.T) {
				got, err := c.Create(t.Context(), obj)
				switch {
				case runtimeOnly && err != nil:
					t.Errorf("marked as accepted by the CRD, but rejected: %v", err)
				case runtimeOnly:
					if err := c.Delete(t.Context(), got); err != nil {
						t.Fatal(err)
					}
				case err == nil:
					t.Errorf("accepted by the API server")
					_ = c.Delete(t.Context(), got)
				case !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err):
					t.Errorf("Create() error = %v, want Invalid or BadRequest", err)
				default:
					rejected++
				}
			})
		}
		if rejected < 60 {
			t.Errorf("rejected %d manifests, want at least 60", rejected)
		}
	})
}

func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := harness.FromYAML(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj
}

// notKept returns the paths of values of want that got lacks or holds
// differently: the stored object may add defaults, but must keep every
// field it was given, unchanged.
func notKept(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, notKept(w[k], gv, path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, notKept(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s (%v -> %v)", path, want, got)}
		}
		return nil
	}
}
