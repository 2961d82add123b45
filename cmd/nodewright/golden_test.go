package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the CLI golden files under testdata/golden")

// TestGolden runs every command's help, version and output formats and
// compares exit code, stdout and stderr with testdata/golden/<name>.txt;
// go test -run TestGolden -update rewrites them.
func TestGolden(t *testing.T) {
	t.Setenv(endpointEnv, "")
	guide := []string{"-f", guideComplete, "--region", "ap-northeast-1", "--now", planNow}
	drift := []string{"-f", "testdata/disruption/drift", "--now", disruptionNow}
	invalid := []string{"-f", "testdata/plan/invalid-nodepool.yaml"}
	pin := []string{"-f", "testdata/disruption/drift", "-f", "testdata/rollout/pin.yaml", "--from", disruptionNow, "--until", "2026-01-01T03:00:00Z"}
	tests := []struct {
		name string
		args []string
	}{
		{"help", []string{"--help"}},
		{"help-command", []string{"help"}},
		{"help-plan-via-help", []string{"help", "plan"}},
		{"no-arguments", nil},
		{"unknown-command", []string{"bogus"}},
		{"validate-help", []string{"validate", "-h"}},
		{"plan-help", []string{"plan", "--help"}},
		{"disruption-help", []string{"disruption", "-h"}},
		{"rollout-help", []string{"rollout", "-h"}},
		{"local-help", []string{"local", "-h"}},
		{"demo-help", []string{"demo", "-h"}},
		{"version-help", []string{"version", "--help"}},
		{"completion-help", []string{"completion", "--help"}},
		{"version", []string{"version"}},
		{"version-json", []string{"version", "-o", "json"}},
		{"version-yaml", []string{"version", "-o", "yaml"}},
		{"version-bad-output", []string{"version", "-o", "xml"}},
		{"validate-table", invalid},
		{"validate-json", append(append([]string{}, invalid...), "-o", "json")},
		{"validate-yaml", append(append([]string{}, invalid...), "-o", "yaml")},
		{"plan-table", guide},
		{"plan-json", append(append([]string{}, guide...), "-o", "json")},
		{"plan-yaml", append(append([]string{}, guide...), "-o", "yaml")},
		{"plan-fail-unschedulable-all-placed", append(append([]string{}, guide...), "--fail-unschedulable")},
		{"plan-fail-unschedulable", append(append([]string{}, guide...), "-f", "testdata/plan/unsatisfiable.yaml", "--fail-unschedulable")},
		{"disruption-table", drift},
		{"disruption-json", append(append([]string{}, drift...), "-o", "json")},
		{"disruption-yaml", append(append([]string{}, drift...), "-o", "yaml")},
		{"rollout-table", pin},
		{"rollout-json", append(append([]string{}, pin...), "-o", "json")},
		{"rollout-yaml", append(append([]string{}, pin...), "-o", "yaml")},
		{"rollout-compare", append(append([]string{}, pin...), "--compare", "testdata/rollout/nightly.yaml")},
		{"replace-help", []string{"replace", "-h"}},
		{"replace-no-nodes", []string{"replace", "--endpoint", "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"}},
		{"replace-bad-force-after", []string{"replace", "node-a", "--force-after", "soon", "--endpoint", "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"}},
		{"replace-no-endpoint", []string{"replace", "node-a"}},
		{"rollout-bad-until", append(append([]string{}, pin...)[:4], "--from", disruptionNow, "--until", "2025-01-01T00:00:00Z")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			switch {
			case strings.HasPrefix(tt.name, "validate-") && tt.name != "validate-help":
				args = append([]string{"validate"}, args...)
			case strings.HasPrefix(tt.name, "plan-") && tt.name != "plan-help":
				args = append([]string{"plan"}, args...)
			case strings.HasPrefix(tt.name, "disruption-") && tt.name != "disruption-help":
				args = append([]string{"disruption"}, args...)
			case strings.HasPrefix(tt.name, "rollout-") && tt.name != "rollout-help":
				args = append([]string{"rollout"}, args...)
			}
			code, stdout, stderr := runCLI(t, "", args...)
			got := fmt.Sprintf("$ nodewright %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout, stderr)
			// The Go version is the toolchain's, not the CLI's.
			got = strings.ReplaceAll(got, runtime.Version(), "GOVERSION")
			path := filepath.Join("testdata", "golden", tt.name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestGolden -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("nodewright %s differs from %s (go test -run TestGolden -update rewrites it):\n--- got\n%s\n--- want\n%s", strings.Join(args, " "), path, got, want)
			}
		})
	}
}

// Every shell cobra generates a completion script for gets one.
func TestCompletionScriptForEveryShell(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, stdout, stderr := runCLI(t, "", "completion", shell)
		if code != 0 || !strings.Contains(stdout, "nodewright") || stderr != "" {
			t.Errorf("completion %s: exit %d, stderr %q, %d bytes of script", shell, code, stderr, len(stdout))
		}
	}
}

// Shell completion covers flag values: -o's formats, impair's --check and
// ice's capacity type, and file completion of YAML/JSON for -f.
func TestCompletionOfFlagValues(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // the completions, then cobra's directive (:4 no file completion, :8 files of these extensions)
	}{
		{"should complete plan -o with the output formats", []string{"plan", "-o", ""}, []string{"table", "json", "yaml", ":4"}},
		{"should complete disruption --output with the output formats", []string{"disruption", "--output", ""}, []string{"table", "json", "yaml", ":4"}},
		{"should complete impair --check with the status checks", []string{"local", "impair", "i-0aaa", "--check", ""}, []string{"instance", "system", ":4"}},
		{"should complete ice's third argument with the capacity types", []string{"local", "ice", "m5.large", "us-east-1a", ""}, []string{"on-demand", "spot", ":4"}},
		{"should complete plan's flags", []string{"plan", "--fail"}, []string{"--fail-unschedulable", ":4"}},
		{"should complete -f with YAML and JSON files", []string{"validate", "-f", ""}, []string{"yaml", "yml", "json", ":8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, _ := runCLI(t, "", append([]string{"__complete"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			var got []string
			for _, l := range lines {
				name, _, _ := strings.Cut(l, "\t")
				got = append(got, name)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("completions %q, want %q", got, tt.want)
			}
		})
	}
}

// Flags take one dash or two, as under Go's flag package: -now, --now,
// -f and --f all parse.
func TestFlagsTakeOneDashOrTwo(t *testing.T) {
	fixed := func() time.Time { return time.Time{} }
	for _, args := range [][]string{
		{"-f", "a.yaml", "-now", "2026-01-01T00:00:00Z", "-o", "json", "-feature-gates=SpotToSpotConsolidation=true"},
		{"--f", "a.yaml", "--now", "2026-01-01T00:00:00Z", "--o", "json", "--feature-gates", "SpotToSpotConsolidation=true"},
		{"--filename=a.yaml", "--now=2026-01-01T00:00:00Z", "--output=json", "--feature-gates=SpotToSpotConsolidation=true"},
	} {
		var stderr strings.Builder
		cfg, err := parseDisruptionFlags(args, &stderr, fixed)
		if err != nil || cfg.Output != "json" || !cfg.Gates.SpotToSpotConsolidation || cfg.Now.IsZero() || len(cfg.Files) != 1 {
			t.Errorf("parseDisruptionFlags(%q) = %+v, %v (%s); want json, the gate, the instant and one file", args, cfg, err, stderr.String())
		}
	}
}

// demoRollout is the forecast of the demo's AMI pin that docs/rollout-demo.svg
// shows: the first node goes at 01:59, the second waits out the demo
// NodePool's 02:00-03:00 zero budget.
var demoRollout = []string{"rollout", "-f", "../../deploy/demo/guide-complete/nodepool.yaml", "-f", "../../deploy/demo/rollout/cluster.yaml",
	"-f", "../../deploy/demo/rollout/pin.yaml", "--from", "2026-01-06T01:59:00Z", "--until", "2026-01-06T04:00:00Z"}

// The rollout picture renders for the demo's cluster, and the one in docs/
// is what the command draws now (go test -run TestRolloutPictureOfTheDemo
// -update redraws it).
func TestRolloutPictureOfTheDemo(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "rollout.svg")
	code, stdout, stderr := runCLI(t, "", append(append([]string{}, demoRollout...), "--svg", svg)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"production-1", "2026-01-06 01:59:00", "2026-01-06 03:00:00", "The rollout finishes at 2026-01-06 03:02:30 UTC."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	got, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg xmlns=\"http://www.w3.org/2000/svg\"", "production-2 Drifted", "fill-opacity=\"0.12\"", "</svg>"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	docs := filepath.Join("..", "..", "docs", "rollout-demo.svg")
	if *update {
		if err := os.WriteFile(docs, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want, err := os.ReadFile(docs); err != nil || string(want) != string(got) {
		t.Errorf("%s differs from what rollout draws now (err %v); go test -run TestRolloutPictureOfTheDemo -update redraws it", docs, err)
	}
}

// The change replaces objects of the same kind and name: a NodePool given
// later wins, and an unknown pool in --compare is an error naming it.
func TestRolloutChangeReplacesAndCompareNamesUnknownPools(t *testing.T) {
	code, _, stderr := runCLI(t, "", "rollout", "-f", "testdata/disruption/drift", "--from", disruptionNow, "--until", "2026-01-01T02:00:00Z",
		"--compare", "testdata/rollout/pin.yaml")
	if code != 1 || !strings.Contains(stderr, "no NodePool in the file") {
		t.Errorf("--compare without a NodePool: exit %d, stderr %q; want 1 naming the problem", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "", "rollout", "-f", "testdata/disruption/drift", "-f", "testdata/rollout/nightly.yaml",
		"--from", disruptionNow, "--until", "2026-01-01T01:30:00Z", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `"NodePool general: replaced by testdata/rollout/nightly.yaml#1"`) {
		t.Errorf("changes do not name the NodePool replaced:\n%s", stdout)
	}
	// nightly.yaml closes the Drifted budget until 02:00: only the
	// forceful expiration acts before then.
	if strings.Contains(stdout, `"method": "Drifted"`) || !strings.Contains(stdout, `"method": "Expired"`) {
		t.Errorf("want only the Expired step before 02:00 under the replaced budgets:\n%s", stdout)
	}
}
