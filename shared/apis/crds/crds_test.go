package crds_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/shared/apis/crds"
	"github.com/nodewright/nodewright/shared/manifest"
)

// decode reads one CRD strictly (unknown fields are errors) and applies the
// API server's defaults for CustomResourceDefinition objects.
func decode(t *testing.T, c crds.CRD) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(c.YAML, &crd); err != nil {
		t.Fatalf("%s: decode: %v", c.File, err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&crd)
	return &crd
}

// TestCRDsPassAPIServerValidation runs the kube-apiserver's own
// CustomResourceDefinition validation: structural schema rules, defaults
// that match their schema, CEL rules that compile within the cost budget,
// subresources, printer columns and names.
func TestCRDsPassAPIServerValidation(t *testing.T) {
	all := crds.All()
	if len(all) != 3 {
		t.Fatalf("All() returned %d CRDs, want 3", len(all))
	}
	for _, c := range all {
		t.Run(c.File, func(t *testing.T) {
			crd := decode(t, c)
			var internal apiextensions.CustomResourceDefinition
			if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, &internal, nil); err != nil {
				t.Fatalf("convert: %v", err)
			}
			for _, e := range validation.ValidateCustomResourceDefinition(t.Context(), &internal) {
				t.Errorf("%v", e)
			}
		})
	}
}

// apiServer applies a CRD's schema to objects the way kube-apiserver does on
// create: defaulting, pruning of unknown fields, OpenAPI validation and the
// CEL rules (transition rules, which need an old object, are skipped).
type apiServer struct {
	structural *structuralschema.Structural
	validator  apivalidation.SchemaValidator
	cel        *cel.Validator
}

func newAPIServer(t *testing.T, c crds.CRD) (kind string, s *apiServer) {
	t.Helper()
	crd := decode(t, c)
	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, &internal, nil); err != nil {
		t.Fatalf("%s: convert: %v", c.File, err)
	}
	// With a single version the conversion hoists the schema to spec.validation.
	schema := internal.Spec.Validation.OpenAPIV3Schema
	structural, err := structuralschema.NewStructural(schema)
	if err != nil {
		t.Fatalf("%s: structural schema: %v", c.File, err)
	}
	validator, _, err := apivalidation.NewSchemaValidator(schema)
	if err != nil {
		t.Fatalf("%s: schema validator: %v", c.File, err)
	}
	return crd.Spec.Names.Kind, &apiServer{
		structural: structural,
		validator:  validator,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
}

// apiServers returns one apiServer per kind.
func apiServers(t *testing.T) map[string]*apiServer {
	t.Helper()
	out := map[string]*apiServer{}
	for _, c := range crds.All() {
		kind, s := newAPIServer(t, c)
		out[kind] = s
	}
	return out
}

// admit returns the paths of fields the schema does not know (which the API
// server would drop) and the validation errors of the JSON object raw.
func (s *apiServer) admit(t *testing.T, raw []byte) (unknown []string, errs field.ErrorList) {
	t.Helper()
	var obj map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil {
		t.Fatalf("decode object: %v", err)
	}
	structuraldefaulting.Default(obj, s.structural)
	unknown = structuralpruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	errs = apivalidation.ValidateCustomResource(nil, obj, s.validator)
	celErrs, _ := s.cel.Validate(t.Context(), nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return unknown, append(errs, celErrs...)
}

// TestSeedsAdmittedByCRDs checks that every field of every seed manifest is
// in the schema (nothing would be pruned) and that the API server would
// accept each seed.
func TestSeedsAdmittedByCRDs(t *testing.T) {
	servers := apiServers(t)
	objs, err := manifest.ReadPaths([]string{"../v1/testdata/seeds"}, nil)
	if err != nil {
		t.Fatalf("read seeds: %v", err)
	}
	admitted := 0
	for _, o := range objs {
		s, ok := servers[o.Kind]
		if !ok {
			continue
		}
		admitted++
		t.Run(o.Source, func(t *testing.T) {
			unknown, errs := s.admit(t, o.Raw)
			if len(unknown) != 0 {
				t.Errorf("fields missing from the schema: %v", unknown)
			}
			for _, e := range errs {
				t.Errorf("rejected: %v", e)
			}
		})
	}
	if admitted != 17 {
		t.Errorf("admitted %d seed objects, want 17", admitted)
	}
}

// TestInvalidManifestsAgainstCRDs cross-checks the CRDs with Go validation:
// every manifest of the invalid corpus that nodewright rejects must be
// rejected by the API server too, except those marked "# crd: accepted"
// (rules Karpenter checks at run time), which it must accept.
func TestInvalidManifestsAgainstCRDs(t *testing.T) {
	servers := apiServers(t)
	files, err := filepath.Glob("../v1/testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid manifests found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := yaml.YAMLToJSON(data)
			if err != nil {
				t.Skipf("not YAML, nothing to admit: %v", err)
			}
			var head struct {
				Kind string `json:"kind"`
			}
			if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &head); err != nil {
				t.Fatal(err)
			}
			s, ok := servers[head.Kind]
			if !ok {
				t.Fatalf("no CRD for kind %q", head.Kind)
			}
			unknown, errs := s.admit(t, raw)
			if len(unknown) != 0 {
				t.Errorf("fields missing from the schema: %v", unknown)
			}
			runtimeOnly := bytes.Contains(data, []byte("\n# crd: accepted"))
			switch {
			case runtimeOnly && len(errs) != 0:
				t.Errorf("marked as accepted by the CRD, but rejected: %v", errs)
			case !runtimeOnly && len(errs) == 0:
				t.Errorf("the CRD accepts a manifest nodewright rejects")
			}
		})
	}
}
