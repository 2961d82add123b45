package manifest

import (
	"fmt"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// duplicateKeys returns one error per mapping key that appears twice in the
// same mapping of a YAML or JSON document, naming the key, its field path and
// its line, in document order. The Kubernetes API server and kubectl reject
// such documents ("key already set in map") instead of letting the last
// value win; nodewright does the same. A document the YAML parser cannot
// read yields no error here (the conversion reports it).
func duplicateKeys(text []byte, firstLine int) (errs []dupKey) {
	defer func() {
		if recover() != nil {
			errs = nil // third-party parser failure: the conversion reports it
		}
	}()
	var root yaml3.Node
	if yaml3.Unmarshal(text, &root) != nil {
		return nil
	}
	var walk func(n *yaml3.Node, path string)
	walk = func(n *yaml3.Node, path string) {
		switch n.Kind {
		case yaml3.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml3.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]")
			}
		case yaml3.MappingNode:
			seen := map[string]bool{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Kind != yaml3.ScalarNode || k.Value == "<<" {
					continue
				}
				child := fieldPath(path, k.Value)
				if seen[k.Value] {
					errs = append(errs, dupKey{path: child, err: fmt.Errorf("key %q already set in map (line %d)", k.Value, k.Line+firstLine-1)})
					continue
				}
				seen[k.Value] = true
				walk(v, child)
			}
		}
	}
	walk(&root, "")
	return errs
}

// dupKey is a duplicated key at a field path.
type dupKey struct {
	path string
	err  error
}

// fieldPath appends key to a Kubernetes-style field path: ".key" for plain
// names, "[key]" for keys holding dots or slashes (label and resource keys).
func fieldPath(path, key string) string {
	if strings.ContainsAny(key, "./ ") || key == "" {
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
