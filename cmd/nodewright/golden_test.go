package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the CLI golden files under testdata/golden")

// TestGolden runs every command's help, version and output formats and
// compares exit code, stdout and stderr with testdata/golden/<name>.txt;
// go test -run TestGolden -update rewrites them.
func TestGolden(t *testing.T) {
	guide := []string{"-f", guideComplete, "--region", "ap-northeast-1", "--now", planNow}
	drift := []string{"-f", "testdata/disruption/drift", "--now", disruptionNow}
	invalid := []string{"-f", "testdata/plan/invalid-nodepool.yaml"}
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
