package ec2sim

import (
	"encoding/base64"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// filter is one Filter.N of a Describe request: the resource matches when
// any value matches (values are ORed; filters are ANDed).
type filter struct {
	name   string
	values []string
}

// fieldFunc returns the values a resource has for a filter name.
type fieldFunc func(name string) []string

// parseFilters reads Filter.N.Name / Filter.N.Value.M and rejects names
// outside supported (tag:<key>, tag-key and tag-value are always allowed
// when tags is true), as EC2 does with InvalidParameterValue.
func parseFilters(q *qnode, supported []string, tags bool) ([]filter, error) {
	var out []filter
	for _, m := range q.list("Filter") {
		f := filter{name: m.str("Name"), values: m.strs("Value")}
		if f.name == "" {
			return nil, missingParameter("Filter.Name")
		}
		isTag := strings.HasPrefix(f.name, "tag:") || f.name == "tag-key" || f.name == "tag-value"
		if (!tags || !isTag) && !slices.Contains(supported, f.name) {
			return nil, invalidParameterValue("The filter '%s' is invalid", f.name)
		}
		out = append(out, f)
	}
	return out, nil
}

// matches reports whether a resource passes every filter. tags may be nil.
func matches(filters []filter, tags map[string]string, field fieldFunc) bool {
	for _, f := range filters {
		var have []string
		switch {
		case strings.HasPrefix(f.name, "tag:"):
			if v, ok := tags[strings.TrimPrefix(f.name, "tag:")]; ok {
				have = []string{v}
			}
		case f.name == "tag-key":
			have = slices.Collect(maps.Keys(tags))
		case f.name == "tag-value":
			have = slices.Collect(maps.Values(tags))
		default:
			have = field(f.name)
		}
		if !anyMatch(f.values, have) {
			return false
		}
	}
	return true
}

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if glob(p, v) {
				return true
			}
		}
	}
	return false
}

// glob matches EC2 filter wildcards: * is any run of characters, ? any
// single character, and a backslash escapes the next character.
func glob(pattern, s string) bool {
	p, v := []rune(pattern), []rune(s)
	var match func(i, j int) bool
	match = func(i, j int) bool {
		for i < len(p) {
			switch p[i] {
			case '*':
				for k := j; k <= len(v); k++ {
					if match(i+1, k) {
						return true
					}
				}
				return false
			case '?':
				if j >= len(v) {
					return false
				}
			case '\\':
				if i+1 < len(p) {
					i++
				}
				fallthrough
			default:
				if j >= len(v) || v[j] != p[i] {
					return false
				}
			}
			i++
			j++
		}
		return j == len(v)
	}
	return match(0, 0)
}

// boolStr renders a bool as EC2 filter values do.
func boolStr(b bool) []string { return []string{strconv.FormatBool(b)} }

// page holds one page of a paginated Describe answer.
type page struct {
	start, end int
	next       string
}

// paginate cuts n items into the page MaxResults/NextToken ask for. max
// bounds MaxResults (EC2 rejects values outside [lo, hi]); def is the page
// size when MaxResults is absent (0: everything). Tokens are opaque and
// bound to the action.
func paginate(q *qnode, action string, n, lo, hi, def int) (page, error) {
	size := def
	if v, ok, err := q.intParam("MaxResults"); err != nil {
		return page{}, err
	} else if ok {
		if v < lo || v > hi {
			return page{}, invalidParameterValue("Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", v, lo, hi)
		}
		size = v
	}
	start := 0
	if tok := q.str("NextToken"); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		a, off, found := strings.Cut(string(raw), ":")
		i, convErr := strconv.Atoi(off)
		if err != nil || !found || a != action || convErr != nil || i < 0 || i > n {
			return page{}, errorf("InvalidPaginationToken", "The specified pagination token is not valid or is expired.")
		}
		start = i
	}
	end := n
	if size > 0 && start+size < n {
		end = start + size
	}
	p := page{start: start, end: end}
	if end < n {
		p.next = base64.RawURLEncoding.EncodeToString([]byte(action + ":" + strconv.Itoa(end)))
	}
	return p, nil
}

// tagXML is one tagSet item.
type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

// tagSet renders tags sorted by key (EC2 does not promise an order; a
// fixed one keeps answers deterministic).
func tagSet(tags map[string]string) []tagXML {
	keys := slices.Sorted(maps.Keys(tags))
	out := make([]tagXML, 0, len(keys))
	for _, k := range keys {
		out = append(out, tagXML{Key: k, Value: tags[k]})
	}
	return out
}

// validateTags applies EC2's tag rules: at most 50 tags per resource, keys
// of 1 to 128 characters not starting with "aws:", values of at most 256
// characters.
func validateTags(tags []tag, existing map[string]string) error {
	merged := maps.Clone(existing)
	if merged == nil {
		merged = map[string]string{}
	}
	for _, t := range tags {
		switch {
		case t.Key == "" || len(t.Key) > 128:
			return invalidParameterValue("Tag key must be between 1 and 128 characters: %q", t.Key)
		case strings.HasPrefix(strings.ToLower(t.Key), "aws:"):
			return invalidParameterValue("Tag keys starting with 'aws:' are reserved for internal use")
		case len(t.Value) > 256:
			return invalidParameterValue("Tag value exceeds the maximum length of 256 characters")
		}
		merged[t.Key] = t.Value
	}
	if len(merged) > 50 {
		return errorf("TagLimitExceeded", "The maximum number of Tags for a resource has been reached.")
	}
	return nil
}

// tagMap folds tags into a map (later keys win).
func tagMap(tags []tag) map[string]string {
	out := make(map[string]string, len(tags))
	for _, t := range tags {
		out[t.Key] = t.Value
	}
	return out
}
