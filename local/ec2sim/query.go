package ec2sim

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// qnode is one node of an EC2 Query request decoded into a tree: the form
// key "LaunchTemplateConfigs.1.Overrides.2.InstanceType" becomes the path
// LaunchTemplateConfigs → 1 → Overrides → 2 → InstanceType. The EC2
// protocol flattens every list, so list members are children with numeric
// names starting at 1.
type qnode struct {
	val  string
	set  bool
	kids map[string]*qnode
}

// parseQuery builds the tree of form. Only the first value of a repeated
// key counts (the SDK never repeats one).
func parseQuery(form url.Values) *qnode {
	root := &qnode{}
	for key, vals := range form {
		n := root
		for part := range strings.SplitSeq(key, ".") {
			if n.kids == nil {
				n.kids = map[string]*qnode{}
			}
			k, ok := n.kids[part]
			if !ok {
				k = &qnode{}
				n.kids[part] = k
			}
			n = k
		}
		if len(vals) > 0 {
			n.val, n.set = vals[0], true
		}
	}
	return root
}

// get follows a dotted path; it returns nil when any step is missing. It is
// safe to call on a nil node.
func (n *qnode) get(path string) *qnode {
	for part := range strings.SplitSeq(path, ".") {
		if n == nil || n.kids == nil {
			return nil
		}
		n = n.kids[part]
	}
	return n
}

// str returns the value at path, or "" when absent.
func (n *qnode) str(path string) string {
	if c := n.get(path); c != nil {
		return c.val
	}
	return ""
}

// has reports whether a value is present at path.
func (n *qnode) has(path string) bool {
	c := n.get(path)
	return c != nil && c.set
}

// list returns the members of the flattened list at path, ordered by index.
func (n *qnode) list(path string) []*qnode {
	c := n.get(path)
	if c == nil || len(c.kids) == 0 {
		return nil
	}
	type member struct {
		i int
		n *qnode
	}
	var ms []member
	for k, v := range c.kids {
		i, err := strconv.Atoi(k)
		if err != nil || i < 1 {
			continue
		}
		ms = append(ms, member{i, v})
	}
	slices.SortFunc(ms, func(a, b member) int { return a.i - b.i })
	out := make([]*qnode, len(ms))
	for i, m := range ms {
		out[i] = m.n
	}
	return out
}

// strs returns the string members of the list at path.
func (n *qnode) strs(path string) []string {
	var out []string
	for _, m := range n.list(path) {
		out = append(out, m.val)
	}
	return out
}

// flatten returns every value under n keyed by its path relative to n.
func (n *qnode) flatten() map[string]string {
	out := map[string]string{}
	var walk func(prefix string, c *qnode)
	walk = func(prefix string, c *qnode) {
		if c.set && prefix != "" {
			out[prefix] = c.val
		}
		for k, v := range c.kids {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, v)
		}
	}
	if n != nil {
		walk("", n)
	}
	return out
}

// intParam parses an optional integer parameter; ok is false when absent.
func (n *qnode) intParam(path string) (v int, ok bool, err error) {
	if !n.has(path) {
		return 0, false, nil
	}
	v, err = strconv.Atoi(n.str(path))
	if err != nil {
		return 0, false, invalidParameterValue("Value (%s) for parameter %s is invalid. Expected an integer.", n.str(path), path)
	}
	return v, true, nil
}

// boolParam parses an optional boolean parameter.
func (n *qnode) boolParam(path string) (v bool, ok bool, err error) {
	if !n.has(path) {
		return false, false, nil
	}
	v, err = strconv.ParseBool(n.str(path))
	if err != nil {
		return false, false, invalidParameterValue("Value (%s) for parameter %s is invalid. Expected a boolean.", n.str(path), path)
	}
	return v, true, nil
}

// tagList decodes a flattened Tag list (members with Key and Value).
func tagList(members []*qnode) []tag {
	var out []tag
	for _, m := range members {
		out = append(out, tag{Key: m.str("Key"), Value: m.str("Value")})
	}
	return out
}

// tagSpecs decodes TagSpecification members into resource type → tags.
// Tags given twice for one resource type are merged in order.
func tagSpecs(members []*qnode) map[string][]tag {
	out := map[string][]tag{}
	for _, m := range members {
		rt := m.str("ResourceType")
		out[rt] = append(out[rt], tagList(m.list("Tag"))...)
	}
	return out
}
