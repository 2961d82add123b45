package progress_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/progress"
)

// syncBuffer is an io.Writer safe for the wrapper's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// slowBuild is a child that behaves as `go build -v` on a slow machine:
// package paths on stderr, one at a time, a compile message on stderr
// that is not a package, and a line on stdout.
const slowBuild = `echo k8s.io/api/core/v1 >&2; sleep 0.6; echo k8s.io/kubernetes/pkg/kubelet >&2; sleep 0.6; echo "./x.go:1: something odd" >&2; echo ok`

func TestRunPrintsTheEstimateThenElapsedAndPackageWhileASlowChildRuns(t *testing.T) {
	var out syncBuffer
	err := progress.Run(t.Context(), exec.Command("sh", "-c", slowBuild), progress.Options{
		Label: "controlplane", Usually: "a cold build usually takes 19-80 min", Interval: 100 * time.Millisecond, Out: &out,
	})
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got, want := lines[0], "controlplane: building (a cold build usually takes 19-80 min)"; got != want {
		t.Errorf("first line = %q, want %q", got, want)
	}
	var beats []string
	for _, l := range lines {
		if strings.HasPrefix(l, "controlplane: still building after ") {
			beats = append(beats, l)
		}
	}
	// The child runs 1.2 s against a 0.1 s interval: even a loaded machine
	// fires several heartbeats.
	if len(beats) < 2 {
		t.Fatalf("heartbeats = %q, want at least 2 in:\n%s", beats, out.String())
	}
	if !strings.Contains(out.String(), ", at k8s.io/kubernetes/pkg/kubelet") {
		t.Errorf("no heartbeat names the package being built (k8s.io/kubernetes/pkg/kubelet):\n%s", out.String())
	}
	for _, l := range lines {
		if l == "k8s.io/api/core/v1" || l == "k8s.io/kubernetes/pkg/kubelet" {
			t.Errorf("package line %q reached the console", l)
		}
	}
	for _, want := range []string{"./x.go:1: something odd", "ok"} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("child line %q not passed through:\n%s", want, out.String())
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "controlplane: done in ") {
		t.Errorf("last line = %q, want the done line", last)
	}
}

func TestRunReturnsTheChildsFailureAndSaysSo(t *testing.T) {
	var out syncBuffer
	err := progress.Run(t.Context(), exec.Command("sh", "-c", "echo 'x.go:1: undefined: y' >&2; exit 3"), progress.Options{Label: "forwarder", Out: &out})
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Run() error = %v, want the child's exit status 3", err)
	}
	if !strings.Contains(out.String(), "x.go:1: undefined: y\n") || !strings.Contains(out.String(), "forwarder: failed after ") {
		t.Errorf("output lacks the compile error or the failed line:\n%s", out.String())
	}
}

func TestRunStopsTheChildWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	var out syncBuffer
	err := progress.Run(ctx, exec.CommandContext(ctx, "sleep", "30"), progress.Options{Label: "x", Out: &out})
	if err == nil {
		t.Fatal("Run() error = nil, want the killed child's error")
	}
}

func TestRunRefusesACommandWithItsOwnOutput(t *testing.T) {
	cmd := exec.Command("true")
	cmd.Stdout = &bytes.Buffer{}
	if err := progress.Run(t.Context(), cmd, progress.Options{Label: "x", Out: &bytes.Buffer{}}); err == nil {
		t.Fatal("Run() error = nil, want a refusal of a preset Stdout")
	}
}
