package workflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/workflow"
)

// errorEquals returns every name listed in an ErrorEquals anywhere in an ASL
// document (nested Map and Parallel states included), in document order.
func errorEquals(data []byte) ([]string, error) {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if list, ok := v["ErrorEquals"].([]any); ok {
				for _, n := range list {
					out = append(out, fmt.Sprint(n))
				}
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return out, nil
}

func unknown(names []string) []string {
	var bad []string
	for _, n := range names {
		if !workflow.Known(n) {
			bad = append(bad, n)
		}
	}
	return bad
}

// TestStateMachinesUseOnlyWorkflowNames is STYLE rule 7's check: every
// ErrorEquals in statemachines/*.asl.json names a workflow constant or a
// States.* error.
func TestStateMachinesUseOnlyWorkflowNames(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "statemachines", "*.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			names, err := errorEquals(data)
			if err != nil {
				t.Fatalf("parse %s: %v", f, err)
			}
			if bad := unknown(names); len(bad) > 0 {
				t.Errorf("%s: ErrorEquals names outside package workflow: %v", f, bad)
			}
		})
	}
}

func TestErrorEqualsCheckFindsUnknownNames(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "bad.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	names, err := errorEquals(data)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"States.Timeout", "Throttled", "wrapError"}, names); diff != "" {
		t.Errorf("errorEquals() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"wrapError"}, unknown(names)); diff != "" {
		t.Errorf("unknown() mismatch (-want +got):\n%s", diff)
	}
}

func TestKnown(t *testing.T) {
	tests := []struct {
		name string
		give string
		want bool
	}{
		{name: "a workflow constant is known", give: workflow.ErrInsufficientCapacity, want: true},
		{name: "a States name is known", give: "States.ALL", want: true},
		{name: "a Go type name is not", give: "wrapError", want: false},
		{name: "the empty name is not", give: "", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := workflow.Known(tt.give); got != tt.want {
				t.Errorf("Known(%q) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

func TestNamesAreSortedAndDistinct(t *testing.T) {
	names := workflow.Names()
	if !slices.IsSorted(names) {
		t.Errorf("Names() = %v, not sorted", names)
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("Names() = %v, has duplicates", names)
	}
}

func TestNameOf(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name     string
		give     error
		wantName string
		wantOK   bool
	}{
		{name: "a wrapped workflow error keeps its name", give: fmt.Errorf("step: %w", workflow.NewError(workflow.ErrThrottled, base)), wantName: workflow.ErrThrottled, wantOK: true},
		{name: "a plain error has none", give: base},
		{name: "nil has none", give: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := workflow.NameOf(tt.give)
			if got != tt.wantName || ok != tt.wantOK {
				t.Errorf("NameOf() = %q, %v, want %q, %v", got, ok, tt.wantName, tt.wantOK)
			}
		})
	}
}

func TestErrorMessageAndUnwrap(t *testing.T) {
	base := errors.New("boom")
	e := workflow.NewError(workflow.ErrConflict, base)
	if e.Error() != "boom" || !errors.Is(e, base) {
		t.Errorf("Error() = %q, Is(base) = %v; want %q, true", e.Error(), errors.Is(e, base), "boom")
	}
	if got := workflow.NewError(workflow.ErrConflict, nil).Error(); got != workflow.ErrConflict {
		t.Errorf("Error() without cause = %q, want %q", got, workflow.ErrConflict)
	}
}
