package provisioning_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces STYLE import rule 2: provisioning reaches the outside
// world only through the interfaces it declares, so it imports the standard
// library, the domain packages, Kubernetes API types and errgroup, and
// nothing else (no AWS SDK, aws-lambda-go, client-go, logger or adapter).
func TestImports(t *testing.T) {
	allowed := []string{
		"github.com/nodewright/nodewright/shared/apis/",
		"github.com/nodewright/nodewright/shared/requirements",
		"github.com/nodewright/nodewright/shared/catalog",
		"github.com/nodewright/nodewright/shared/scheduling",
		"k8s.io/api/",
		"k8s.io/apimachinery/",
		"golang.org/x/sync/errgroup",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.SplitN(path, "/", 2)[0], ".")
			ok := std
			for _, prefix := range allowed {
				ok = ok || strings.HasPrefix(path, prefix)
			}
			if !ok || path == "log" || strings.HasPrefix(path, "log/") {
				t.Errorf("%s imports %q, outside what a use-case package may import", name, path)
			}
		}
	}
}
