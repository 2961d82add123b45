package integration_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeSetupCommandsRunWhatTheySay checks the README's two set-up
// commands (the demo and the tests) against the Makefile: each is a make
// target whose dry run reaches the command it promises, so a Makefile edit
// cannot silently turn `make demo` into "Nothing to be done".
func TestReadmeSetupCommandsRunWhatTheySay(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| run the (demo|tests) \\| `make ([a-z-]+)` \\|$").FindAllStringSubmatch(string(readme), -1)
	if len(rows) != 2 {
		t.Fatalf("README set-up table: found %d of the 2 rows `| run the demo|tests | `make <target>` |`", len(rows))
	}
	// What each dry run must reach.
	want := map[string]string{"demo": "./cmd/nodewright demo", "tests": "test -count=1"}
	for _, row := range rows {
		what, target := row[1], row[2]
		t.Run(what, func(t *testing.T) {
			cmd := exec.Command("make", "-n", target)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make -n %s: %v\n%s", target, err, out)
			}
			if !strings.Contains(string(out), want[what]) {
				t.Errorf("make -n %s does not run %q:\n%s", target, want[what], out)
			}
		})
	}
}
