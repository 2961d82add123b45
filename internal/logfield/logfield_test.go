package logfield_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/logfield"
)

// keyShape is the shape of every key: lower-case kebab-case.
var keyShape = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// synonyms are keys that name what a logfield constant already names.
var synonyms = map[string]string{
	"err": logfield.Error, "errmsg": logfield.Error, "msg": logfield.Message, "time": logfield.Timestamp, "ts": logfield.Timestamp,
	"claim": logfield.NodeClaim, "node-claim": logfield.NodeClaim, "nodeclaim-name": logfield.NodeClaim,
	"pool": logfield.NodePool, "node-pool": logfield.NodePool, "nodepool-name": logfield.NodePool,
	"node-name": logfield.Node, "node-class": logfield.NodeClass, "ec2nodeclass": logfield.NodeClass,
	"command": logfield.CommandID, "cmd": logfield.CommandID, "command-name": logfield.CommandID,
	"instance": logfield.InstanceID, "instance-name": logfield.InstanceID,
	"ver": logfield.Version, "revision": logfield.Commit, "fn": logfield.Function,
}

// argsFrom says where a logging method's key-value pairs start.
var argsFrom = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "With": 0,
}

// Every literal key passed to a slog call in the forwarder and the Lambdas
// is kebab-case and is not a synonym of a key this package defines.
func TestForwarderAndLambdasLogOneFieldSet(t *testing.T) {
	var checked int
	for _, dir := range []string{"../../forwarder", "../../functions"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				from, ok := argsFrom[sel.Sel.Name]
				if !ok || len(call.Args) <= from || !isLogMessage(call, from) {
					return true
				}
				for i := from; i < len(call.Args); i += 2 {
					lit, ok := call.Args[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					key, _ := strconv.Unquote(lit.Value)
					checked++
					pos := fset.Position(lit.Pos())
					if !keyShape.MatchString(key) {
						t.Errorf("%s: log key %q is not lower-case kebab-case", pos, key)
					}
					if want, ok := synonyms[key]; ok {
						t.Errorf("%s: log key %q: use %q (logfield)", pos, key, want)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d keys; the walk found too few log calls to be reading the code", checked)
	}
}

// isLogMessage reports whether call looks like a slog call: a With, or a
// method whose message argument is a string literal.
func isLogMessage(call *ast.CallExpr, from int) bool {
	if from == 0 {
		return true
	}
	lit, ok := call.Args[from-1].(*ast.BasicLit)
	return ok && lit.Kind == token.STRING
}

func TestStartLineCarriesVersionCommitAndTheRecordKeys(t *testing.T) {
	var buf bytes.Buffer
	logfield.Start(slog.New(logfield.NewJSONHandler(&buf, slog.LevelInfo)), logfield.Function, "gc")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("first line %q: %v", buf.String(), err)
	}
	for _, k := range []string{logfield.Timestamp, logfield.Level, logfield.Message, logfield.Version, logfield.Commit, logfield.GoVersion, logfield.Function} {
		if v, ok := line[k].(string); !ok || v == "" {
			t.Errorf("first line %s lacks %q", buf.String(), k)
		}
	}
	if line[logfield.Message] != "starting" {
		t.Errorf("message = %v, want starting", line[logfield.Message])
	}
}
