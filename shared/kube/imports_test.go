package kube_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces the layout for shared/kube: the standard library,
// client-go and the Kubernetes API modules, and apis/v1; no AWS SDK, no
// Lambda runtime, no logger, no other nodewright package.
func TestImports(t *testing.T) {
	allowed := []string{
		"k8s.io/client-go/",
		"k8s.io/api/",
		"k8s.io/apimachinery/",
		"github.com/nodewright/nodewright/shared/apis/v1",
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
			ok := !strings.Contains(strings.SplitN(path, "/", 2)[0], ".")
			for _, prefix := range allowed {
				ok = ok || strings.HasPrefix(path, prefix)
			}
			if !ok || path == "log" || strings.HasPrefix(path, "log/") {
				t.Errorf("%s imports %q, outside what shared/kube may import", name, path)
			}
		}
	}
}
