package disruption_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsAndClock enforces STYLE import rule 1 for package disruption
// and its internal packages: the standard library, the domain packages,
// Kubernetes API types and the two hashing and cron libraries Karpenter
// itself uses; no AWS SDK, aws-lambda-go, client-go, logger or adapter. It
// also fails on any call of time.Now: the evaluation instant is Input.Now.
func TestImportsAndClock(t *testing.T) {
	allowed := []string{
		"github.com/nodewright/nodewright/shared/apis/",
		"github.com/nodewright/nodewright/shared/requirements",
		"github.com/nodewright/nodewright/shared/catalog",
		"github.com/nodewright/nodewright/shared/scheduling",
		"github.com/nodewright/nodewright/shared/disruption/internal/",
		"k8s.io/api/",
		"k8s.io/apimachinery/",
		"github.com/mitchellh/hashstructure/v2",
		"github.com/robfig/cron/v3",
	}
	var files []string
	for _, pattern := range []string{"*.go", "internal/*/*.go"} {
		got, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, got...)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			ok := !strings.Contains(strings.SplitN(path, "/", 2)[0], ".")
			for _, prefix := range allowed {
				ok = ok || strings.HasPrefix(path, prefix)
			}
			if !ok || path == "log" || strings.HasPrefix(path, "log/") {
				t.Errorf("%s imports %q, outside what a domain package may import", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Now" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
					t.Errorf("%s reads the clock (time.Now); use Input.Now", name)
				}
			}
			return true
		})
	}
}
