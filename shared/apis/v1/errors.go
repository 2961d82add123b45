package v1

import (
	"fmt"
	"strings"
)

// FieldError is one finding about one field of an object: a validation
// error, or a warning about a field nodewright tolerates but does not use.
type FieldError struct {
	// Path is the field path in Kubernetes notation, e.g.
	// "spec.disruption.budgets[1].duration" or
	// "spec.template.metadata.labels[karpenter.sh/foo]".
	Path string
	// Message says what is wrong and, where it helps, what would be valid.
	Message string
}

// Error returns "path: message".
func (e FieldError) Error() string { return e.Path + ": " + e.Message }

// ValidationError lists every problem found in one object, in field order.
// Its Error text has one line per problem:
//
//	NodePool "batch-spot": spec.disruption.budgets[1].duration: required when schedule is set
type ValidationError struct {
	Kind   string
	Name   string
	Fields []FieldError
}

// Error returns one line per field problem, each prefixed with the object.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		lines[i] = fmt.Sprintf("%s %q: %s", e.Kind, e.Name, f.Error())
	}
	return strings.Join(lines, "\n")
}

// fieldErrors accumulates findings during validation.
type fieldErrors []FieldError

func (fe *fieldErrors) add(path, format string, args ...any) {
	*fe = append(*fe, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// result returns nil when there are no findings, else a *ValidationError.
func (fe fieldErrors) result(kind, name string) error {
	if len(fe) == 0 {
		return nil
	}
	return &ValidationError{Kind: kind, Name: name, Fields: fe}
}

// path helpers: field, index and key steps in Kubernetes notation.
func child(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func key(path, k string) string { return path + "[" + k + "]" }
