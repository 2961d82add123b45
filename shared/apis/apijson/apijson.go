// Package apijson decodes JSON into Kubernetes-style API types the way the
// Kubernetes API server does: field names match case-sensitively, integers
// stay integers, unknown fields are reported by their path instead of being
// silently dropped, and a value of the wrong type is reported with the exact
// path of the field (for example "spec.template.spec.requirements[1].minValues")
// rather than with Go type names.
//
// It wraps sigs.k8s.io/json, the decoder the Kubernetes API machinery uses.
// It never panics on malformed input.
package apijson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	kjson "sigs.k8s.io/json"
)

// FieldError is a decode failure located at one field.
type FieldError struct {
	// Path is the field path in Kubernetes notation ("spec.limits[cpu]",
	// "spec.budgets[0].nodes"); empty for the document itself.
	Path string
	// Err says what is wrong with the value.
	Err error
}

// Error returns "path: problem", or the problem alone at the document root.
func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Stray is a key of the document that did not land in the decoded value.
type Stray struct {
	// Path is the key's field path ("spec.template.spec.foo").
	Path string
	// Duplicate is true for a key that appears twice in one object (the
	// last value wins); false for a key v's type does not define.
	Duplicate bool
}

// Unmarshal decodes data into v (a non-nil pointer). It returns the keys
// that v's type does not define and the duplicated keys, in document order,
// and a *FieldError when a value does not fit its field. Strays are not an
// error: the rest of the document is still decoded.
func Unmarshal(data []byte, v any) (strays []Stray, err error) {
	if !json.Valid(data) {
		var discard any
		syntaxErr := json.Unmarshal(data, &discard)
		return nil, &FieldError{Err: fmt.Errorf("not valid JSON: %w", syntaxErr)}
	}
	strict, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Pointer || rv.IsNil() {
			return nil, fmt.Errorf("decode into %T: target must be a non-nil pointer", v)
		}
		return nil, locate(data, rv.Type().Elem(), "", err)
	}
	for _, se := range strict {
		var fe kjson.FieldError
		st := Stray{Path: se.Error(), Duplicate: strings.HasPrefix(se.Error(), "duplicate field")}
		if errors.As(se, &fe) {
			st.Path = fe.FieldPath()
		}
		strays = append(strays, st)
	}
	return strays, nil
}

// locate walks data alongside t to find the innermost field whose value does
// not decode, so the error can name it. whole is the error of decoding the
// entire value and is returned when no narrower field can be blamed.
//
// A type error carries the byte offset the decoder had reached, so the
// value at fault is found by following that offset down the document and
// only that value is decoded again: the error path costs about what a valid
// document of the same size does. An error without an offset (a custom
// unmarshaler's, such as a malformed quantity) is found by decoding only
// the self-decoding values, in document order. The level-by-level walk,
// which decodes each level's members in turn, is the fallback.
func locate(data []byte, t reflect.Type, path string, whole error) *FieldError {
	if off, ok := errorOffset(whole); ok {
		sub, st, sp := narrow(data, t, path, off)
		if fe := walk(sub, st, sp); fe != nil {
			return fe
		}
	} else if at := firstBadLeaf(data, t, map[reflect.Type]reflect.Value{}); at >= 0 {
		// Just inside the leaf, so narrow descends to it.
		sub, st, sp := narrow(data, t, path, at+1)
		if fe := walk(sub, st, sp); fe != nil {
			return fe
		}
	}
	if fe := walk(data, t, path); fe != nil {
		return fe
	}
	return &FieldError{Path: path, Err: describe(whole, t)}
}

// errorOffset returns the Offset of a decoder type error: sigs.k8s.io/json
// returns its fork of encoding/json's UnmarshalTypeError, an internal type,
// so the field is read by reflection. The offset is just past the value at
// fault for a scalar, just past its opening bracket for an object or list.
func errorOffset(err error) (int, bool) {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct ||
		!strings.HasSuffix(v.Elem().Type().Name(), "UnmarshalTypeError") {
		return 0, false
	}
	f := v.Elem().FieldByName("Offset")
	if !f.IsValid() || f.Kind() != reflect.Int64 {
		return 0, false
	}
	return int(f.Int()), true
}

// narrow follows offset off down data (valid JSON decoded as t at path) to
// the innermost value that contains it and that t's fields name, and returns
// that value, its type and its path. It allocates only the keys it reads.
func narrow(data []byte, t reflect.Type, path string, off int) ([]byte, reflect.Type, string) {
	for {
		var (
			next     []byte
			nextT    reflect.Type
			nextPath string
			nextAt   int
		)
		members(data, t, func(v []byte, vs int, mt reflect.Type, m member) bool {
			if vs < off && off <= vs+len(v) {
				next, nextT, nextPath, nextAt = v, mt, m.path(path), vs
				return true
			}
			return false
		})
		if next == nil {
			return data, t, path
		}
		off -= nextAt
		data, t, path = next, nextT, nextPath
	}
}

// firstBadLeaf returns the offset in data of the first value in document
// order, among those t's fields name, whose type decodes itself (a
// quantity, a time, an int-or-string) and refuses its bytes; -1 when none
// does. It calls only those values' own decoders, one at a time, on one
// reused value per type (scratch), and builds no field path: the caller
// narrows to the offset it returns.
func firstBadLeaf(data []byte, t reflect.Type, scratch map[reflect.Type]reflect.Value) int {
	if isLeaf(t) {
		if hasUnmarshaler(t) && refuses(data, t, scratch) {
			return 0
		}
		return -1
	}
	bad := -1
	members(data, t, func(v []byte, at int, mt reflect.Type, _ member) bool {
		if in := firstBadLeaf(v, mt, scratch); in >= 0 {
			bad = at + in
			return true
		}
		return false
	})
	return bad
}

// refuses reports whether data (valid JSON) does not decode as t, a type
// that decodes itself. Where t's pointer is a json.Unmarshaler (every
// self-decoding type of the API: quantities, times, int-or-strings), its
// UnmarshalJSON is called directly, as the decoder would, on a zeroed value
// from scratch; any other type is decoded by the decoder.
func refuses(data []byte, t reflect.Type, scratch map[reflect.Type]reflect.Value) bool {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if base != t && bytes.Equal(data, []byte("null")) {
		return false // a nil pointer
	}
	if !reflect.PointerTo(base).Implements(unmarshalerType) {
		return kjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(t).Interface()) != nil
	}
	v, ok := scratch[base]
	if !ok {
		v = reflect.New(base)
		scratch[base] = v
	}
	v.Elem().SetZero()
	return v.Interface().(json.Unmarshaler).UnmarshalJSON(data) != nil
}

// member is a value's place in its parent object or list: its key, as the
// raw JSON string, or its index.
type member struct {
	key    []byte
	index  int
	mapKey bool
}

// path returns the member's field path below parent: "parent.key" for a
// struct field, "parent[key]" for a map entry, "parent[i]" for a list item.
func (m member) path(parent string) string {
	if m.key == nil {
		return fmt.Sprintf("%s[%d]", parent, m.index)
	}
	var key string
	if json.Unmarshal(m.key, &key) != nil {
		key = string(m.key)
	}
	if m.mapKey {
		return parent + "[" + key + "]"
	}
	return join(parent, key)
}

// members calls visit with each member of the object or list data (valid
// JSON, decoded as the struct, map, slice or array t) that t's fields name:
// its value, the value's offset in data, its type and its place (member),
// in document order, until visit returns true. It allocates nothing for a
// member whose key has no escape.
func members(data []byte, t reflect.Type, visit func(v []byte, at int, mt reflect.Type, m member) bool) {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	i := skipSpace(data, 0)
	if i >= len(data) {
		return
	}
	switch {
	case data[i] == '{' && (base.Kind() == reflect.Struct || base.Kind() == reflect.Map):
		var fields map[string]reflect.Type
		if base.Kind() == reflect.Struct {
			fields = jsonFields(base)
		}
		for i = skipSpace(data, i+1); i < len(data) && data[i] == '"'; {
			ke := skipValue(data, i)
			vs := skipSpace(data, skipSpace(data, ke)+1) // past ':'
			ve := skipValue(data, vs)
			raw := data[i:ke]
			if base.Kind() == reflect.Map {
				if visit(data[vs:ve], vs, base.Elem(), member{key: raw, mapKey: true}) {
					return
				}
			} else if ft, ok := field(fields, raw); ok && visit(data[vs:ve], vs, ft, member{key: raw}) {
				return
			}
			i = skipSpace(data, ve)
			if i < len(data) && data[i] == ',' {
				i = skipSpace(data, i+1)
			}
		}
	case data[i] == '[' && (base.Kind() == reflect.Slice || base.Kind() == reflect.Array):
		for n, j := 0, skipSpace(data, i+1); j < len(data) && data[j] != ']'; n++ {
			ve := skipValue(data, j)
			if visit(data[j:ve], j, base.Elem(), member{index: n}) {
				return
			}
			j = skipSpace(data, ve)
			if j < len(data) && data[j] == ',' {
				j = skipSpace(data, j+1)
			}
		}
	}
}

// field looks up the field of the raw JSON key (quotes included) in fields;
// a key without an escape is looked up without allocating.
func field(fields map[string]reflect.Type, raw []byte) (reflect.Type, bool) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		ft, ok := fields[string(raw[1:len(raw)-1])]
		return ft, ok
	}
	var key string
	if json.Unmarshal(raw, &key) != nil {
		return nil, false
	}
	ft, ok := fields[key]
	return ft, ok
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end (exclusive) of the JSON value starting at i in
// valid JSON.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		for j := i + 1; j < len(data); j++ {
			switch data[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(data)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				j = skipValue(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(data)
	}
	j := i
	for j < len(data) && !strings.ContainsRune(",}] \t\n\r", rune(data[j])) {
		j++
	}
	return j
}

func walk(data []byte, t reflect.Type, path string) *FieldError {
	data = bytes.TrimSpace(data)
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(t).Interface()); err == nil {
		return nil
	} else if isLeaf(t) || bytes.Equal(data, []byte("null")) {
		var inner *FieldError
		if errors.As(err, &inner) {
			// A custom unmarshaler located the problem inside its value.
			return &FieldError{Path: joinPath(path, inner.Path), Err: inner.Err}
		}
		return &FieldError{Path: path, Err: describe(err, t)}
	} else {
		base := t
		for base.Kind() == reflect.Pointer {
			base = base.Elem()
		}
		switch base.Kind() {
		case reflect.Struct:
			var obj map[string]json.RawMessage
			if json.Unmarshal(data, &obj) != nil {
				return &FieldError{Path: path, Err: mismatch(data, base)}
			}
			fields := jsonFields(base)
			for _, k := range sortedKeys(obj) {
				ft, ok := fields[k]
				if !ok {
					continue
				}
				if fe := walk(obj[k], ft, join(path, k)); fe != nil {
					return fe
				}
			}
		case reflect.Map:
			var obj map[string]json.RawMessage
			if json.Unmarshal(data, &obj) != nil {
				return &FieldError{Path: path, Err: mismatch(data, base)}
			}
			for _, k := range sortedKeys(obj) {
				if fe := walk(obj[k], base.Elem(), path+"["+k+"]"); fe != nil {
					return fe
				}
			}
		case reflect.Slice, reflect.Array:
			var items []json.RawMessage
			if json.Unmarshal(data, &items) != nil {
				return &FieldError{Path: path, Err: mismatch(data, base)}
			}
			for i, item := range items {
				if fe := walk(item, base.Elem(), fmt.Sprintf("%s[%d]", path, i)); fe != nil {
					return fe
				}
			}
		}
		return &FieldError{Path: path, Err: describe(err, t)}
	}
}

// hasUnmarshaler reports whether t (or what it points to) decodes itself.
func hasUnmarshaler(t reflect.Type) bool {
	for {
		if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
			return true
		}
		if t.Kind() != reflect.Pointer {
			return false
		}
		t = t.Elem()
	}
}

// isLeaf reports whether t decodes itself (a custom unmarshaler) or is a
// scalar, so that no narrower path exists below it.
func isLeaf(t reflect.Type) bool {
	if hasUnmarshaler(t) {
		return true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Array:
		return false
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Uint8
	}
	return true
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// fieldsByType caches jsonFields' maps, one per struct type.
var fieldsByType sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the JSON names of t's fields (following inline embedded
// structs) to their types. The map is shared: callers must not modify it.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsByType.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := buildFields(t)
	fieldsByType.Store(t, m)
	return m
}

func buildFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// joinPath appends a relative field path ("a.b", "[0].c") to path.
func joinPath(path, rel string) string {
	if rel == "" || path == "" || strings.HasPrefix(rel, "[") {
		return path + rel
	}
	return path + "." + rel
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe turns a decoder error into a message about the value, without Go
// type names where the JSON shape explains the problem.
func describe(err error, t reflect.Type) error {
	msg := err.Error()
	if strings.HasPrefix(msg, "quantities must match") || errors.Is(err, resource.ErrFormatWrong) {
		return errors.New(`expected a quantity such as "500m", "4" or "16Gi"`)
	}
	if hasUnmarshaler(t) {
		// The type's own decoder explains its format.
		return errors.New(strings.TrimPrefix(msg, "json: "))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("expected %s, got %s", kindName(t), te.Value)
	}
	if strings.HasPrefix(msg, "json: cannot unmarshal ") {
		// The sigs.k8s.io/json type error carries the same shape as
		// encoding/json's but is a distinct type.
		rest := strings.TrimPrefix(msg, "json: cannot unmarshal ")
		got, _, _ := strings.Cut(rest, " into ")
		return fmt.Errorf("expected %s, got %s", kindName(t), got)
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

func mismatch(data []byte, t reflect.Type) error {
	return fmt.Errorf("expected %s, got %s", kindName(t), jsonKind(data))
}

func jsonKind(data []byte) string {
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number " + string(data)
}

func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}
