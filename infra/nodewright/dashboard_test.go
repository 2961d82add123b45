package nodewright

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// emfList is functions/internal/decisionmetrics/testdata/emf-metrics.json:
// every metric the Lambdas emit and its dimension set, which a test of the
// root module holds to the recorder's EMF lines.
func emfList(t *testing.T) (string, map[string][]string) {
	t.Helper()
	raw, err := os.ReadFile("../../functions/internal/decisionmetrics/testdata/emf-metrics.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Namespace string `json:"namespace"`
		Metrics   []struct {
			Name       string   `json:"name"`
			Dimensions []string `json:"dimensions"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range file.Metrics {
		out[m.Name] = m.Dimensions
	}
	return file.Namespace, out
}

// dashboardWidgets returns the synthesized dashboard's widgets, the
// body's CloudFormation tokens (Refs to the API and functions) replaced by
// a placeholder.
func dashboardWidgets(t *testing.T, c cfnTemplate) []map[string]any {
	t.Helper()
	dashboards := c.ofType("AWS::CloudWatch::Dashboard")
	if len(dashboards) != 1 {
		t.Fatalf("dashboards = %d, want 1", len(dashboards))
	}
	var body strings.Builder
	for _, d := range dashboards {
		switch b := d.Properties["DashboardBody"].(type) {
		case string:
			body.WriteString(b)
		case map[string]any:
			join, _ := b["Fn::Join"].([]any)
			if len(join) != 2 {
				t.Fatalf("DashboardBody = %v, want a string or an Fn::Join", b)
			}
			parts, _ := join[1].([]any)
			for _, p := range parts {
				if s, ok := p.(string); ok {
					body.WriteString(s)
				} else {
					body.WriteString("TOKEN")
				}
			}
		}
	}
	var parsed struct {
		Widgets []map[string]any `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body.String()), &parsed); err != nil {
		t.Fatalf("dashboard body: %v\n%s", err, body.String())
	}
	return parsed.Widgets
}

// searchRE reads a SEARCH expression's schema and its filters.
var (
	searchRE = regexp.MustCompile(`^SEARCH\('\{([^}]*)\} ([^']*)', '[A-Za-z0-9.]+', [0-9]+\)$`)
	filterRE = regexp.MustCompile(`([A-Za-z_]+)="([^"]*)"`)
)

func TestDashboardGraphsWhatTheLambdasEmit(t *testing.T) {
	f := newFixture(t)
	props := baseProps(f)
	props.Dashboard = true
	_, c := mustTemplate(t, props)
	namespace, emitted := emfList(t)
	if namespace != emfNamespace {
		t.Fatalf("the Lambdas emit in namespace %q, the dashboard searches %q", namespace, emfNamespace)
	}
	searches := map[string][]string{} // widget title -> metric names
	for _, w := range dashboardWidgets(t, c) {
		props, _ := w["properties"].(map[string]any)
		title, _ := props["title"].(string)
		metrics, _ := props["metrics"].([]any)
		for _, m := range metrics {
			row, _ := m.([]any)
			if len(row) > 0 && row[0] == emfNamespace {
				t.Errorf("widget %q names %v directly: the EMF series carry per-label dimensions, so only a SEARCH finds them", title, row)
			}
			if len(row) == 0 {
				continue
			}
			opts, _ := row[len(row)-1].(map[string]any)
			expr, _ := opts["expression"].(string)
			if !strings.HasPrefix(expr, "SEARCH(") {
				continue
			}
			sm := searchRE.FindStringSubmatch(expr)
			if sm == nil {
				t.Errorf("widget %q: expression %q is not a SEARCH over one schema", title, expr)
				continue
			}
			schema := strings.Split(sm[1], ",")
			if schema[0] != emfNamespace {
				t.Errorf("widget %q: SEARCH namespace %q, want %q", title, schema[0], emfNamespace)
			}
			filters := map[string]string{}
			for _, fm := range filterRE.FindAllStringSubmatch(sm[2], -1) {
				filters[fm[1]] = fm[2]
			}
			name := filters["MetricName"]
			dims, ok := emitted[name]
			if !ok {
				t.Errorf("widget %q graphs %q, which no Lambda emits", title, name)
				continue
			}
			if !slices.Equal(schema[1:], dims) {
				t.Errorf("widget %q: %s searched with dimensions %v, the Lambdas emit %v", title, name, schema[1:], dims)
			}
			if filters["cluster"] != "prod-east" {
				t.Errorf("widget %q: %s not narrowed to the cluster (cluster=%q)", title, name, filters["cluster"])
			}
			for k := range filters {
				if k != "MetricName" && !slices.Contains(dims, k) {
					t.Errorf("widget %q: %s filtered on %q, which is not one of its dimensions %v", title, name, k, dims)
				}
			}
			searches[title] = append(searches[title], name)
		}
	}
	want := map[string][]string{
		"Provisioning: pending pods":                 {"karpenter_scheduler_queue_depth", "karpenter_scheduler_unschedulable_pods_count"},
		"Provisioning: NodeClaims launched":          {"karpenter_nodeclaims_created_total"},
		"Provisioning: insufficient capacity errors": {"karpenter_cloudprovider_errors_total"},
		"Disruption: commands by method":             {"karpenter_voluntary_disruption_decisions_total", "karpenter_nodeclaims_disrupted_total"},
		"Disruption: blocked nodes by reason":        {"nodewright_disruption_blocked_nodes"},
		"Disruption: budget use":                     {"karpenter_nodepools_allowed_disruptions", "karpenter_nodepools_nodes_consuming_budgets"},
		"Interruption: events by kind":               {"karpenter_interruption_received_messages_total"},
		"Interruption: time to first eviction (s)":   {"nodewright_interruption_first_eviction_seconds", "nodewright_interruption_first_eviction_seconds"},
	}
	for title, names := range want {
		if !slices.Equal(searches[title], names) {
			t.Errorf("widget %q searches %v, want %v", title, searches[title], names)
		}
	}
}
