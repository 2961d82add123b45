package nodewright

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// render flattens a CloudFormation value to a string: Fn::Join is joined,
// Ref becomes <Name> and Fn::GetAtt <Name.Attr>, as cdk-nag renders them.
func render(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = render(p)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			items, _ := j[1].([]any)
			parts := make([]string, len(items))
			for i, p := range items {
				parts[i] = render(p)
			}
			return strings.Join(parts, render(j[0]))
		}
		if r, ok := x["Ref"].(string); ok {
			return "<" + r + ">"
		}
		if g, ok := x["Fn::GetAtt"].([]any); ok && len(g) == 2 {
			return "<" + render(g[0]) + "." + render(g[1]) + ">"
		}
	}
	return fmt.Sprint(v)
}

// strs returns a string or list value as a list.
func strs(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, len(x))
		for i, p := range x {
			out[i] = render(p)
		}
		return out
	default:
		return []string{render(x)}
	}
}

// policyStatement is one IAM statement of the template, with where it
// came from.
type policyStatement struct {
	owner     string // logical ID of the policy or role
	sid       string
	effect    string
	actions   []string
	resources []string
	// notResources is the statement's NotResource.
	notResources []string
	principals   []string // "AWS:<arn>", "Service:<name>"
	conditions   map[string]map[string]any
}

func (s policyStatement) String() string {
	return fmt.Sprintf("%s/%s %v on %v if %v", s.owner, s.sid, s.actions, s.resources, s.conditions)
}

func parseStatements(owner string, doc any) []policyStatement {
	m, _ := doc.(map[string]any)
	list, _ := m["Statement"].([]any)
	var out []policyStatement
	for _, raw := range list {
		st, _ := raw.(map[string]any)
		ps := policyStatement{owner: owner, effect: render(st["Effect"]), actions: strs(st["Action"]), resources: strs(st["Resource"]),
			notResources: strs(st["NotResource"])}
		switch p := st["Principal"].(type) {
		case string:
			ps.principals = []string{p}
		case map[string]any:
			for kind, v := range p {
				for _, x := range strs(v) {
					ps.principals = append(ps.principals, kind+":"+x)
				}
			}
			slices.Sort(ps.principals)
		}
		if sid, ok := st["Sid"].(string); ok {
			ps.sid = sid
		}
		if c, ok := st["Condition"].(map[string]any); ok {
			ps.conditions = map[string]map[string]any{}
			for op, kv := range c {
				ps.conditions[op], _ = kv.(map[string]any)
			}
		}
		out = append(out, ps)
	}
	return out
}

// identityStatements are the statements of every identity policy in the
// template: AWS::IAM::Policy documents and roles' inline policies.
func (c cfnTemplate) identityStatements() []policyStatement {
	var out []policyStatement
	for _, id := range c.sortedIDs() {
		r := c.Resources[id]
		switch r.Type {
		case "AWS::IAM::Policy":
			out = append(out, parseStatements(id, r.Properties["PolicyDocument"])...)
		case "AWS::IAM::Role":
			policies, _ := r.Properties["Policies"].([]any)
			for _, p := range policies {
				pm, _ := p.(map[string]any)
				out = append(out, parseStatements(id+"/"+render(pm["PolicyName"]), pm["PolicyDocument"])...)
			}
		}
	}
	return out
}

func (c cfnTemplate) sortedIDs() []string {
	ids := make([]string, 0, len(c.Resources))
	for id := range c.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// conditionKeys lists the condition keys of s, across operators.
func (s policyStatement) conditionKeys() []string {
	var keys []string
	for _, kv := range s.conditions {
		for k := range kv {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// ec2ResourceType is the resource type of an EC2 ARN pattern
// ("arn:...:instance/*" -> "instance"), or "" for anything else.
func ec2ResourceType(arn string) string {
	if !strings.Contains(arn, ":ec2:") {
		return ""
	}
	last := arn[strings.LastIndex(arn, ":")+1:]
	typ, _, _ := strings.Cut(last, "/")
	return typ
}
