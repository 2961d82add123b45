// Package shared_test holds the import-walk test of STYLE.md's import
// rules: one table for the whole repository, read from the source files'
// import clauses (go/parser, ImportsOnly), so a rule broken anywhere fails
// here with the file, the import and the rule.
package shared_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/nodewright/nodewright/"

// goFile is one non-test Go file of the repository.
type goFile struct {
	path    string // slash-separated, relative to the repository root
	dir     string // its package directory, relative
	pkg     string // package clause
	imports []string
	ast     *ast.File
}

// readRepo parses every non-test Go file below the repository root,
// skipping testdata, hidden and ignored build folders and node_modules.
func readRepo(t *testing.T) []goFile {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var files []goFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" ||
				name == "dist" || name == "bin" || name == "cdk.out") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		// Files the build leaves out (generators behind //go:build ignore,
		// other platforms) are not part of any package.
		if ok, err := build.Default.MatchFile(filepath.Dir(p), name); err != nil || !ok {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		gf := goFile{path: filepath.ToSlash(rel), dir: filepath.ToSlash(filepath.Dir(rel)), pkg: f.Name.Name, ast: f}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			gf.imports = append(gf.imports, path)
		}
		files = append(files, gf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("read %d Go files below %s; the walk is broken", len(files), root)
	}
	return files
}

func isStd(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

func under(dir string, roots ...string) bool {
	for _, r := range roots {
		if dir == r || strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}

func hasPrefixAny(path string, prefixes ...string) bool {
	for _, p := range prefixes {
		if path == strings.TrimSuffix(p, "/") || strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// The packages STYLE.md calls the domain: snapshot and clock in, decision
// out.
var domain = []string{
	"shared/apis", "shared/requirements", "shared/catalog", "shared/scheduling", "shared/disruption",
	"shared/interruption", "shared/workflow", "shared/amifamily", "shared/manifest", "shared/launch", "shared/rollout",
}

// domainImports are the non-standard imports any domain package may have:
// the domain itself and the Kubernetes API types.
var domainImports = []string{
	module + "shared/apis/", module + "shared/requirements", module + "shared/catalog", module + "shared/scheduling",
	module + "shared/disruption", module + "shared/interruption", module + "shared/workflow", module + "shared/amifamily",
	module + "shared/manifest", module + "shared/launch",
	"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/apiextensions-apiserver/", "sigs.k8s.io/yaml",
}

// impure are the imports STYLE.md's rule 1 keeps out of the domain.
var impure = []string{
	"github.com/aws/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime/", "log/", "github.com/prometheus/",
	"go.uber.org/zap/", "github.com/sirupsen/logrus/", "github.com/go-logr/", "k8s.io/klog/",
	module + "shared/aws/", module + "shared/kube/", module + "shared/provisioning/", module + "shared/termination/",
	module + "functions/", module + "forwarder/", module + "local/", module + "cmd/", module + "integration/",
}

// rule is one import rule: for the files it applies to, every import must
// be allowed.
type rule struct {
	name    string
	applies func(f goFile) bool
	allowed func(f goFile, imp string) bool
}

func rules(mainDirs map[string]bool) []rule {
	return []rule{
		{
			name:    "1: domain packages import no AWS SDK, Lambda runtime, client-go, controller-runtime, logging or metrics library, adapter or edge package",
			applies: func(f goFile) bool { return under(f.dir, domain...) },
			allowed: func(_ goFile, imp string) bool { return !hasPrefixAny(imp, impure...) },
		},
		{
			name:    "1: shared/interruption imports the standard library only",
			applies: func(f goFile) bool { return under(f.dir, "shared/interruption") },
			allowed: func(_ goFile, imp string) bool { return isStd(imp) && imp != "log" && !strings.HasPrefix(imp, "log/") },
		},
		{
			name:    "2: provisioning and termination import the domain packages only (they reach the world through ports they declare)",
			applies: func(f goFile) bool { return under(f.dir, "shared/provisioning", "shared/termination") },
			allowed: func(_ goFile, imp string) bool {
				if imp == "log" || strings.HasPrefix(imp, "log/") {
					return false
				}
				return isStd(imp) || hasPrefixAny(imp, domainImports...) || hasPrefixAny(imp, "golang.org/x/sync/")
			},
		},
		{
			name:    "3: shared/aws packages import each other only through awserr; awstest only from tests and integration/",
			applies: func(f goFile) bool { return true },
			allowed: func(f goFile, imp string) bool {
				if imp == module+"shared/aws/awstest" {
					return under(f.dir, "integration", "shared/aws/awstest")
				}
				if under(f.dir, "shared/aws") && strings.HasPrefix(imp, module+"shared/aws/") {
					own := strings.SplitN(strings.TrimPrefix(f.dir, "shared/aws/"), "/", 2)[0]
					other := strings.SplitN(strings.TrimPrefix(imp, module+"shared/aws/"), "/", 2)[0]
					return other == own || other == "awserr"
				}
				return true
			},
		},
		{
			name:    "3: shared/aws/ekstoken imports the standard library and the AWS SDK only",
			applies: func(f goFile) bool { return under(f.dir, "shared/aws/ekstoken") },
			allowed: func(_ goFile, imp string) bool {
				return isStd(imp) && imp != "log" && !strings.HasPrefix(imp, "log/") ||
					hasPrefixAny(imp, "github.com/aws/aws-sdk-go-v2/", "github.com/aws/smithy-go/")
			},
		},
		{
			name: "4: client-go is imported only by shared/kube and forwarder/ (and the development stand-ins in local/ and integration/)",
			applies: func(f goFile) bool {
				return !under(f.dir, "shared/kube", "forwarder", "local", "integration")
			},
			allowed: func(_ goFile, imp string) bool { return !hasPrefixAny(imp, "k8s.io/client-go/") },
		},
		{
			name:    "4: shared/kube imports the standard library (no logger), client-go, the Kubernetes API types and apis/v1",
			applies: func(f goFile) bool { return under(f.dir, "shared/kube") },
			allowed: func(_ goFile, imp string) bool {
				return isStd(imp) && imp != "log" && !strings.HasPrefix(imp, "log/") ||
					hasPrefixAny(imp, "k8s.io/client-go/", "k8s.io/api/", "k8s.io/apimachinery/", module+"shared/apis/v1")
			},
		},
		{
			name:    "5: nothing imports a main package",
			applies: func(f goFile) bool { return true },
			allowed: func(_ goFile, imp string) bool { return !mainDirs[strings.TrimPrefix(imp, module)] },
		},
		{
			name:    "6: infra/ imports nothing from the runtime module",
			applies: func(f goFile) bool { return under(f.dir, "infra") },
			allowed: func(_ goFile, imp string) bool {
				return !strings.HasPrefix(imp, module) || strings.HasPrefix(imp, module+"infra")
			},
		},
	}
}

// TestImportRules checks STYLE.md's import rules over every non-test Go
// file of the repository.
func TestImportRules(t *testing.T) {
	files := readRepo(t)
	mainDirs := map[string]bool{}
	for _, f := range files {
		if f.pkg == "main" {
			mainDirs[f.dir] = true
		}
	}
	for _, r := range rules(mainDirs) {
		applied := 0
		for _, f := range files {
			if !r.applies(f) {
				continue
			}
			applied++
			for _, imp := range f.imports {
				if !r.allowed(f, imp) {
					t.Errorf("%s imports %q, against rule %s", f.path, imp, r.name)
				}
			}
		}
		if applied == 0 {
			t.Errorf("rule %q applies to no file; its paths are stale", r.name)
		}
	}
}

// TestDomainNeverReadsTheClock checks that the domain packages and the use
// cases take the time as input (DESIGN.md section 2): no time.Now or
// time.Since outside tests.
func TestDomainNeverReadsTheClock(t *testing.T) {
	pure := append(slices.Clone(domain), "shared/provisioning", "shared/termination")
	for _, f := range readRepo(t) {
		if !under(f.dir, pure...) {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
				t.Errorf("%s reads the clock (time.%s); take the instant as input", f.path, sel.Sel.Name)
			}
			return true
		})
	}
}

// TestRulesCatchViolations feeds the rules files that break them, so a rule
// that can never fire is caught.
func TestRulesCatchViolations(t *testing.T) {
	mainDirs := map[string]bool{"functions/gc": true}
	tests := []struct {
		name string
		file goFile
	}{
		{"domain package imports the AWS SDK", goFile{dir: "shared/scheduling", imports: []string{"github.com/aws/aws-sdk-go-v2/aws"}}},
		{"domain package imports a logger", goFile{dir: "shared/catalog", imports: []string{"log/slog"}}},
		{"domain package imports an adapter", goFile{dir: "shared/disruption", imports: []string{module + "shared/kube"}}},
		{"interruption imports apis/v1", goFile{dir: "shared/interruption", imports: []string{module + "shared/apis/v1"}}},
		{"termination imports client-go", goFile{dir: "shared/termination", imports: []string{"k8s.io/client-go/kubernetes"}}},
		{"provisioning imports an adapter", goFile{dir: "shared/provisioning", imports: []string{module + "shared/aws/ddbstore"}}},
		{"an aws package imports another", goFile{dir: "shared/aws/fleet", imports: []string{module + "shared/aws/ddbstore"}}},
		{"a function imports awstest", goFile{dir: "functions/gc/handler", imports: []string{module + "shared/aws/awstest"}}},
		{"a function imports client-go", goFile{dir: "functions/gc/handler", imports: []string{"k8s.io/client-go/rest"}}},
		{"ekstoken imports apis/v1", goFile{dir: "shared/aws/ekstoken", imports: []string{module + "shared/apis/v1"}}},
		{"kube imports the catalog", goFile{dir: "shared/kube", imports: []string{module + "shared/catalog"}}},
		{"something imports a main package", goFile{dir: "local/stack", imports: []string{module + "functions/gc"}}},
		{"infra imports the runtime module", goFile{dir: "infra", imports: []string{module + "shared/apis/v1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			broken := 0
			for _, r := range rules(mainDirs) {
				if !r.applies(tt.file) {
					continue
				}
				for _, imp := range tt.file.imports {
					if !r.allowed(tt.file, imp) {
						broken++
					}
				}
			}
			if broken == 0 {
				t.Errorf("no rule rejects %s importing %v", tt.file.dir, tt.file.imports)
			}
		})
	}
}
