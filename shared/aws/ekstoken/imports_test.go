package ekstoken_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces that ekstoken imports only the standard library and
// the AWS SDK (aws-sdk-go-v2 and smithy-go): no client-go, no logger, no
// other nodewright package (STYLE import rule 3).
func TestImports(t *testing.T) {
	allowed := []string{"github.com/aws/aws-sdk-go-v2/", "github.com/aws/smithy-go/"}
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
				t.Errorf("%s imports %q, outside what ekstoken may import", name, path)
			}
		}
	}
}
