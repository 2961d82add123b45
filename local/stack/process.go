package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nodewright/nodewright/internal/progress"
	"github.com/nodewright/nodewright/local/controlplane"
)

// rootModule is the module whose go.mod marks the repository root.
const rootModule = "github.com/nodewright/nodewright"

// FindRepoRoot walks up from the working directory to the go.mod of the
// nodewright module. It fails outside a checkout.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working dir: %w", err)
	}
	for {
		if isRootModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root: no go.mod of %s above the working directory", rootModule)
		}
		dir = parent
	}
}

func isRootModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == rootModule
		}
	}
	return false
}

// BuildForwarder runs `go build -v -o out ./forwarder` in root, printing
// on w what it builds and the elapsed time at least every 30 s
// (progress.Run); a nil w discards the progress. The error carries the
// build's exit status; its compile errors went to w.
func BuildForwarder(ctx context.Context, root, out string, w io.Writer) error {
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	if w == nil {
		w = io.Discard
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-v", "-o", out, "./forwarder")
	cmd.Dir = root
	if err := progress.Run(ctx, cmd, progress.Options{Label: "build forwarder", Usually: progress.ColdBuild, Out: w}); err != nil {
		return err
	}
	return nil
}

// child is a process started by the stack, in its own process group.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the child's group, then SIGKILL after grace.
func (c *child) stop(grace time.Duration) {
	if c.exited() {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// StartForwarder starts the forwarder binary against the local API server
// and intake front, with leader election off, and waits until its
// /healthz answers. Its output is appended to logs/forwarder.log. Errors:
// the forwarder already runs, it could not start or became unhealthy
// (with its last log lines).
func (s *Stack) StartForwarder() error {
	s.fwdMu.Lock()
	defer s.fwdMu.Unlock()
	if s.fwd != nil && !s.fwd.exited() {
		return errors.New("forwarder: already running")
	}
	ports, err := freePorts(2)
	if err != nil {
		return fmt.Errorf("forwarder ports: %w", err)
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[1])
	args := []string{
		"--kubeconfig", s.Kubeconfig, "--cluster-name", s.opts.ClusterName, "--api-endpoint", s.IntakeURL,
		"--region", s.opts.Region, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--health-addr", health,
	}
	if s.opts.BatchIdle > 0 {
		args = append(args, "--batch-idle-duration", s.opts.BatchIdle.String())
	}
	if s.opts.BatchMax > 0 {
		args = append(args, "--batch-max-duration", s.opts.BatchMax.String())
	}
	switch {
	case s.opts.SyncIdleInterval == 0:
		args = append(args, "--sync-idle-interval", LocalSyncIdleInterval.String())
	case s.opts.SyncIdleInterval > 0:
		args = append(args, "--sync-idle-interval", s.opts.SyncIdleInterval.String())
	}
	logPath := s.LogPath("forwarder")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("forwarder log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(s.fwdBin, args...)
	// Static local credentials: the front does not check the signature.
	cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey, "AWS_REGION="+s.opts.Region,
		"AWS_EC2_METADATA_DISABLED=true", "DISABLE_LEADER_ELECTION=true",
		"POD_NAMESPACE=kube-system", "POD_NAME=nodewright-forwarder-local",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr(s.opts.Detach)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start forwarder: %w", err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	s.fwd = c
	s.fwdMetrics = fmt.Sprintf("127.0.0.1:%d", ports[0])
	if s.PIDs != nil {
		s.PIDs["forwarder"] = cmd.Process.Pid
		_ = writeInfo(s.opts.Dir, s.Info)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c.exited() {
			return fmt.Errorf("forwarder exited at start: %s", tailFile(logPath, 20))
		}
		resp, err := http.Get("http://" + health + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			c.stop(2 * time.Second)
			return fmt.Errorf("forwarder not healthy after 30s: %s", tailFile(logPath, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// KillForwarder kills the forwarder with SIGKILL (a crash: no graceful
// shutdown) and waits for it to exit. No-op when it is not running.
func (s *Stack) KillForwarder() {
	s.fwdMu.Lock()
	defer s.fwdMu.Unlock()
	if s.fwd == nil || s.fwd.exited() {
		return
	}
	_ = syscall.Kill(-s.fwd.cmd.Process.Pid, syscall.SIGKILL)
	<-s.fwd.done
}

// ForwarderMetricsURL returns the running forwarder's /metrics URL
// (http://127.0.0.1:<port>/metrics; the port changes on every
// StartForwarder), "" when it is not running.
func (s *Stack) ForwarderMetricsURL() string {
	s.fwdMu.Lock()
	defer s.fwdMu.Unlock()
	if s.fwd == nil || s.fwd.exited() {
		return ""
	}
	return "http://" + s.fwdMetrics + "/metrics"
}

// ForwarderPID returns the forwarder's process ID, 0 when not running.
func (s *Stack) ForwarderPID() int {
	s.fwdMu.Lock()
	defer s.fwdMu.Unlock()
	if s.fwd == nil || s.fwd.exited() {
		return 0
	}
	return s.fwd.cmd.Process.Pid
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// alive reports whether pid runs and its command line names dir (so a PID
// reused by an unrelated process is never signalled).
func alive(pid int, dir string) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		if _, serr := os.Stat("/proc/self/cmdline"); serr != nil {
			return syscall.Kill(pid, 0) == nil // no /proc: trust the record
		}
		return false
	}
	return bytes.Contains(cmdline, []byte(dir))
}

// running reports whether dir holds a stack with a live process.
func running(dir string) bool {
	info, err := ReadInfo(dir)
	if err != nil {
		return false
	}
	if info.ServePID != os.Getpid() && alive(info.ServePID, dir) {
		return true
	}
	for _, pid := range info.PIDs {
		if alive(pid, dir) {
			return true
		}
	}
	return false
}

// DownDir stops the stack whose state is in dir, started by another
// process (`nodewright local down`): it asks the process serving the
// stack to shut down (SIGTERM, which runs Down there), then signals any
// recorded process still alive (forwarder, control plane), by process ID
// only, and removes dir. A missing dir is not an error.
func DownDir(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	info, infoErr := ReadInfo(dir)
	if infoErr == nil {
		if info.ServePID != os.Getpid() && alive(info.ServePID, dir) {
			_ = syscall.Kill(info.ServePID, syscall.SIGTERM)
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && alive(info.ServePID, dir); {
				time.Sleep(100 * time.Millisecond)
			}
			if alive(info.ServePID, dir) {
				_ = syscall.Kill(info.ServePID, syscall.SIGKILL)
			}
		}
		if pid := info.PIDs["forwarder"]; alive(pid, dir) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cluster")); err == nil {
		if err := controlplane.StopDir(filepath.Join(dir, "cluster")); err != nil {
			return fmt.Errorf("stop control plane: %w", err)
		}
	}
	if infoErr != nil {
		if _, err := os.Stat(filepath.Join(dir, "logs")); err != nil {
			return fmt.Errorf("state dir %s does not look like a local stack: %w", dir, infoErr)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove state dir: %w", err)
	}
	return nil
}
