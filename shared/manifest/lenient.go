package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/nodewright/nodewright/shared/apis/apijson"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// maxDecodeErrors bounds the decode errors collected for one object.
const maxDecodeErrors = 50

// decodeFunc decodes one object from JSON (see v1.DecodeNodePool).
type decodeFunc func([]byte) (any, []v1.FieldError, error)

// decodeAll decodes raw with decode and, when a value does not fit its
// field, removes that value and decodes again, so that every bad field of the
// object is reported, not only the first. It returns the last decoded value
// (the object without its bad values; nil when a problem could not be
// located at a field), its warnings, and the errors in the order found.
func decodeAll(raw []byte, decode decodeFunc) (any, []v1.FieldError, []error) {
	var errs []error
	for len(errs) < maxDecodeErrors {
		typed, warnings, err := decode(raw)
		if err == nil {
			return typed, warnings, errs
		}
		errs = append(errs, err)
		var fe *apijson.FieldError
		if !errors.As(err, &fe) || fe.Path == "" {
			return nil, nil, errs
		}
		pruned, ok := prune(raw, fe.Path)
		if !ok {
			return nil, nil, errs
		}
		raw = pruned
	}
	return nil, nil, errs
}

// prune removes the value at a field path ("spec.limits[cpu]",
// "spec.requirements[0].minValues") from a JSON object: a mapping key is
// deleted, a list item becomes null. It returns false when the path does not
// lead to a value.
func prune(raw []byte, path string) ([]byte, bool) {
	segs, ok := splitPath(path)
	if !ok || len(segs) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var root any
	if dec.Decode(&root) != nil {
		return nil, false
	}
	cur := root
	for i, seg := range segs {
		last := i == len(segs)-1
		switch c := cur.(type) {
		case map[string]any:
			next, found := c[seg]
			if !found {
				return nil, false
			}
			if last {
				delete(c, seg)
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				return nil, false
			}
			if last {
				if c[n] == nil {
					return nil, false
				}
				c[n] = nil
			}
			cur = c[n]
		default:
			return nil, false
		}
	}
	out, err := json.Marshal(root)
	return out, err == nil
}

// splitPath splits a field path into keys and indexes.
func splitPath(path string) ([]string, bool) {
	var segs []string
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil, false
			}
			segs = append(segs, path[1:end])
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			segs = append(segs, path[:end])
			path = path[end:]
		}
	}
	return segs, true
}

// jsonKind names the JSON type of a value for error messages.
func jsonKind(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
