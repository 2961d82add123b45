package integration_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readReadme returns the repository root and its README.
func readReadme(t *testing.T) (string, []byte) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return root, readme
}

// TestReadmeSetupCommandsRunWhatTheySay checks the README's two set-up
// commands (the demo and the tests) against the Makefile: each is a make
// target whose dry run reaches the command it promises, so a Makefile edit
// cannot silently turn `make demo` into "Nothing to be done".
func TestReadmeSetupCommandsRunWhatTheySay(t *testing.T) {
	root, readme := readReadme(t)
	rows := regexp.MustCompile("(?m)^\\| run the (demo|tests) \\| `make ([a-z-]+)` \\|$").FindAllStringSubmatch(string(readme), -1)
	if len(rows) != 2 {
		t.Fatalf("README set-up table: found %d of the 2 rows `| run the demo|tests | `make <target>` |`", len(rows))
	}
	// What each dry run must reach: the tests include the lint.
	want := map[string][]string{"demo": {"./cmd/nodewright demo"}, "tests": {"test -count=1", "golangci-lint run"}}
	for _, row := range rows {
		what, target := row[1], row[2]
		t.Run(what, func(t *testing.T) {
			cmd := exec.Command("make", "-n", target)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make -n %s: %v\n%s", target, err, out)
			}
			for _, w := range want[what] {
				if !strings.Contains(string(out), w) {
					t.Errorf("make -n %s does not run %q:\n%s", target, w, out)
				}
			}
		})
	}
}

// TestReadmeDeployNamesOnlyWhatExists checks the README's "Deploy to AWS":
// every `make` target it names exists (a dry run succeeds), the stack is
// deployed before the image is pushed and the chart installed, and no image
// is referenced by tag (the only image is the one `make image` builds, pinned
// by digest).
func TestReadmeDeployNamesOnlyWhatExists(t *testing.T) {
	root, readme := readReadme(t)
	text := string(readme)
	start := strings.Index(text, "## Deploy to AWS")
	if start < 0 {
		t.Fatal("README has no Deploy to AWS section")
	}
	section := text[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bmake ([a-z][a-z-]*)`).FindAllStringSubmatch(section, -1) {
		targets[m[1]] = true
	}
	for _, want := range []string{"build", "image", "image-push", "image-login", "cdk-tools"} {
		if !targets[want] {
			t.Errorf("Deploy to AWS does not name make %s", want)
		}
	}
	for target := range targets {
		cmd := exec.Command("make", "-n", target, "IMAGE=example.com/r", "REGISTRY=example.com")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README names make %s, which does not run: %v\n%s", target, err, out)
		}
	}
	order := []string{"cdk deploy -c clusterName", "make image ", "ImagePushCommand", "HelmInstallCommand"}
	last := -1
	for _, step := range order {
		i := strings.Index(section, step)
		if i < last {
			t.Errorf("Deploy to AWS names %q before the step it needs (order: %q)", step, order)
		}
		last = i
	}
	if m := regexp.MustCompile(`(?i)(ghcr\.io|docker\.io|quay\.io)/\S+|\S+:latest\b`).FindString(section); m != "" {
		t.Errorf("Deploy to AWS refers to an image by registry or tag: %q", m)
	}
}
