package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var updateDisruptionGolden = flag.Bool("update-disruption-golden", false, "rewrite testdata/disruption/*.golden.json")

const disruptionNow = "2026-01-01T01:00:00Z"

// disruptionJSON runs `nodewright disruption -o json` on a testdata
// directory and returns stdout with the price source blanked, so that the
// goldens do not depend on when the embedded price table was generated.
func disruptionJSON(t *testing.T, dir string, extra ...string) []byte {
	t.Helper()
	args := append([]string{"disruption", "-o", "json", "--now", disruptionNow, "-f", filepath.Join("testdata/disruption", dir)}, extra...)
	code, out, errOut := runCLI(t, "", args...)
	if code != 0 {
		t.Fatalf("disruption exit code %d, stderr:\n%s", code, errOut)
	}
	var generic map[string]any
	if err := json.Unmarshal([]byte(out), &generic); err != nil {
		t.Fatalf("decode disruption JSON: %v\n%s", err, out)
	}
	if !strings.Contains(generic["priceSource"].(string), "us-east-1") {
		t.Errorf("priceSource = %q, want the us-east-1 table", generic["priceSource"])
	}
	generic["priceSource"] = "(blanked by the test)"
	b, err := json.MarshalIndent(generic, "", "  ")
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return append(b, '\n')
}

func TestDisruptionGolden(t *testing.T) {
	for _, dir := range []string{"consolidation", "drift"} {
		t.Run(dir, func(t *testing.T) {
			got := disruptionJSON(t, dir)
			golden := filepath.Join("testdata/disruption", dir+".golden.json")
			if *updateDisruptionGolden {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update-disruption-golden to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("disruption -o json mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// disruptionShape mirrors the issue's JSON shape; decoding with
// DisallowUnknownFields on the parts it names checks that they are there
// and spelled as the issue spells them.
type disruptionShape struct {
	Commands []struct {
		Method     string `json:"method"`
		NodePool   string `json:"nodePool"`
		Candidates []struct {
			NodeClaim string `json:"nodeClaim"`
			Node      string `json:"node"`
		} `json:"candidates"`
		Replacements []struct {
			InstanceTypes []string `json:"instanceTypes"`
			Expected      struct {
				InstanceType string  `json:"instanceType"`
				Zone         string  `json:"zone"`
				CapacityType string  `json:"capacityType"`
				PricePerHour float64 `json:"pricePerHour"`
			} `json:"expected"`
		} `json:"replacements"`
		SavingsPerHour float64 `json:"savingsPerHour"`
	} `json:"commands"`
	Blocked []struct {
		NodeClaim string `json:"nodeClaim"`
		Node      string `json:"node"`
		Reason    string `json:"reason"`
	} `json:"blocked"`
}

func TestDisruptionJSONHasTheIssueShape(t *testing.T) {
	var got disruptionShape
	if err := json.Unmarshal(disruptionJSON(t, "consolidation"), &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got.Commands) != 1 || got.Commands[0].Method != "Underutilized" || got.Commands[0].NodePool != "general" {
		t.Fatalf("commands = %+v, want one Underutilized command of general", got.Commands)
	}
	want := disruptionShape{}.Blocked
	want = append(want, struct {
		NodeClaim string `json:"nodeClaim"`
		Node      string `json:"node"`
		Reason    string `json:"reason"`
	}{"general-nc-1", "node-1", "pod default/api-0 is protected by PodDisruptionBudget default/api-pdb (0 disruptions allowed)"})
	if diff := cmp.Diff(want, got.Blocked); diff != "" {
		t.Errorf("blocked mismatch (-want +got):\n%s", diff)
	}
}

func TestDisruptionTable(t *testing.T) {
	code, out, errOut := runCLI(t, "", "disruption", "--now", disruptionNow, "-f", "testdata/disruption/drift")
	if code != 0 {
		t.Fatalf("disruption exit code %d, stderr:\n%s", code, errOut)
	}
	for _, want := range []string{
		"Disruption evaluation at 2026-01-01T01:00:00Z (region us-east-1;",
		"drift-general-nc-1-",
		"m5.large on-demand us-east-1a 0.0960/h",
		"expire-general-nc-3-",
		"general-nc-2  node-2  general   drifted (AMIDrift): waiting, drift starts one command per evaluation",
		"general   Drifted        3      2        1           1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q:\n%s", want, out)
		}
	}
}

func TestDisruptionSpotToSpotGate(t *testing.T) {
	tests := []struct {
		name  string
		gates string
		want  string
	}{
		{"should not replace spot with spot by default (11.3 item 27)", "", "SpotToSpotConsolidation is disabled, so a spot node is not replaced by a spot node"},
		{"should apply the 15-type rule with the gate on", "SpotToSpotConsolidation=true,NodeRepair=false", "SpotToSpotConsolidation needs 15 cheaper instance types than the candidate, found 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got disruptionShape
			if err := json.Unmarshal(disruptionJSON(t, "spot", "--feature-gates", tt.gates), &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(got.Commands) != 0 || len(got.Blocked) != 1 {
				t.Fatalf("commands = %+v, blocked = %+v, want no command and one blocked NodeClaim", got.Commands, got.Blocked)
			}
			if got.Blocked[0].Reason != tt.want {
				t.Errorf("reason = %q, want %q", got.Blocked[0].Reason, tt.want)
			}
		})
	}
}

func TestDisruptionUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"should require -f", []string{"disruption"}, "at least one -f is required"},
		{"should reject an unknown output format", []string{"disruption", "-f", "x", "-o", "xml"}, `-o "xml": want table, json or yaml`},
		{"should reject a malformed --now", []string{"disruption", "-f", "x", "--now", "yesterday"}, "want RFC 3339"},
		{"should reject an unknown feature gate", []string{"disruption", "-f", "x", "--feature-gates", "Drift=true"}, "unknown feature gate"},
		{"should reject a feature gate without a value", []string{"disruption", "-f", "x", "--feature-gates", "SpotToSpotConsolidation"}, "want Name=true or Name=false"},
		{"should reject positional arguments", []string{"disruption", "-f", "x", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, "", tt.args...)
			if code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestDisruptionInvalidInput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	in := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: bad}\nspec:\n  weight: 500\n  template:\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n"
	code := run(t.Context(), []string{"disruption", "-f", "-", "--now", disruptionNow}, strings.NewReader(in), &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "invalid input") || !strings.Contains(stderr.String(), "spec.weight") {
		t.Errorf("stderr = %q, want an invalid-input error naming spec.weight", stderr.String())
	}
}
