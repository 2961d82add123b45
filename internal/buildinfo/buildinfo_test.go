package buildinfo_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A binary linked with the Makefile's -X flags reports exactly those
// values; one linked without them reports a non-empty fallback.
func TestLinkerFlagsSetVersionAndCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	const pkg = "github.com/nodewright/nodewright/internal/buildinfo"
	out, err := exec.Command("go", "run", "-ldflags", "-X "+pkg+".version=v9.9.9 -X "+pkg+".commit=abc123", "./testdata/printbuild").CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "v9.9.9 abc123" {
		t.Errorf("output = %q, want %q", got, "v9.9.9 abc123")
	}
}
