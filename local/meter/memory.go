package meter

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
)

// InfraFunctions is the file, relative to the repository root, whose
// functions table sets every Lambda's memory (its memoryMiB fields): the
// one place the configured memory lives.
const InfraFunctions = "infra/nodewright/functions.go"

// LambdaMemory reads the configured memory of every Lambda (function name
// -> MiB) from the functions table of infra (InfraFunctions under
// repoRoot), by parsing its Go source: the infra module is CDK and stays
// out of the runtime module, so it cannot be imported. Errors name the
// file and the row that could not be read.
func LambdaMemory(repoRoot string) (map[string]int, error) {
	path := filepath.Join(repoRoot, InfraFunctions)
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("lambda memory: %w", err)
	}
	var table *ast.CompositeLit
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "functions" || len(vs.Values) != 1 {
			return true
		}
		table, _ = vs.Values[0].(*ast.CompositeLit)
		return false
	})
	if table == nil {
		return nil, fmt.Errorf("lambda memory: %s: no `var functions = []functionSpec{...}`", path)
	}
	out := map[string]int{}
	for i, e := range table.Elts {
		row, ok := e.(*ast.CompositeLit)
		if !ok {
			return nil, fmt.Errorf("lambda memory: %s: row %d is not a literal", path, i)
		}
		name, mib := "", 0
		for _, el := range row.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			k, _ := kv.Key.(*ast.Ident)
			lit, _ := kv.Value.(*ast.BasicLit)
			if k == nil || lit == nil {
				continue
			}
			switch k.Name {
			case "name":
				name, _ = strconv.Unquote(lit.Value)
			case "memoryMiB":
				mib, _ = strconv.Atoi(lit.Value)
			}
		}
		if name == "" || mib <= 0 {
			return nil, fmt.Errorf("lambda memory: %s: row %d (%q) has no literal name and memoryMiB", path, i, name)
		}
		out[name] = mib
	}
	if len(out) == 0 {
		return nil, errors.New("lambda memory: " + path + ": empty functions table")
	}
	return out, nil
}
