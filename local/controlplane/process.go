package controlplane

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	markerFile = ".nodewright-controlplane"
	pidFile    = "pids"
	// stopGrace is how long a process has to exit after SIGTERM before it
	// gets SIGKILL.
	stopGrace = 5 * time.Second
)

// process is one started component.
type process struct {
	name string
	pid  int
	log  string        // path of its log file
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // the exit status; read only after done is closed
}

// startProcess starts bin with args in its own process group, with stdout
// and stderr appended to dir/logs/<name>.log, and records its PID in
// dir/pids before returning.
func startProcess(dir, name, bin string, args []string, detach bool) (*process, error) {
	logPath := filepath.Join(dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr(detach)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := appendPID(dir, name, p.pid); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, SIGKILL after stopGrace, and
// returns once the process has been reaped. Stopping an exited process is a
// no-op apart from killing what is left of its group.
func (p *process) stop() {
	if !p.exited() {
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL) // stragglers in the group; ESRCH when none
}

// appendPID records a started process in dir/pids.
func appendPID(dir, name string, pid int) error {
	f, err := os.OpenFile(filepath.Join(dir, pidFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	if _, err := fmt.Fprintf(f, "%s %d\n", name, pid); err != nil {
		f.Close()
		return fmt.Errorf("pid file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	return nil
}

// recordedPID is one line of a pid file.
type recordedPID struct {
	Name string
	PID  int
}

// readPIDs parses dir/pids; a missing file is an empty list.
func readPIDs(dir string) ([]recordedPID, error) {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	var out []recordedPID
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			continue // a line cut short by a crash
		}
		pid, err := strconv.Atoi(fields[1])
		if err != nil || pid <= 1 {
			continue
		}
		out = append(out, recordedPID{Name: fields[0], PID: pid})
	}
	return out, nil
}

// ownedBy reports whether pid is a live process whose command line mentions
// dir: every component gets at least one flag under its state directory, so
// a PID reused by an unrelated process is never signalled. Without /proc
// (outside Linux) the pid file is trusted.
func ownedBy(pid int, dir string) bool {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 { // gone, or a zombie
		return false
	}
	return bytes.Contains(cmdline, []byte(dir))
}

// killRecorded stops the processes listed in dir/pids that are still
// running and own dir, one at a time in reverse start order (so the API
// server is gone before etcd, which spares it a slow shutdown): SIGTERM to
// the process group, then SIGKILL if it is still there after grace.
func killRecorded(dir string, grace time.Duration) error {
	pids, err := readPIDs(dir)
	if err != nil {
		return err
	}
	waitGone := func(pid int, d time.Duration) bool {
		deadline := time.Now().Add(d)
		for ownedBy(pid, dir) {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
		return true
	}
	var stuck []string
	for i := len(pids) - 1; i >= 0; i-- {
		pid := pids[i].PID
		if !ownedBy(pid, dir) {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		if waitGone(pid, grace) {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		if !waitGone(pid, time.Second) {
			stuck = append(stuck, fmt.Sprintf("%s (%d)", pids[i].Name, pid))
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("still running after SIGKILL: %s", strings.Join(stuck, ", "))
	}
	return nil
}

// prepareDir makes dir an empty state directory with its marker. A
// directory left by an earlier run (it holds the marker) is cleaned first:
// its recorded processes are stopped and its content removed. A non-empty
// directory without the marker is refused, so a mistyped Dir never deletes
// someone's files.
func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("state dir: %w", err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
			return fmt.Errorf("state dir %s is not empty and was not made by this package (no %s)", dir, markerFile)
		}
		if err := killRecorded(dir, stopGrace); err != nil {
			return fmt.Errorf("leftover state dir: %w", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("leftover state dir: %w", err)
		}
	}
	for _, sub := range []string{"logs", "etcd", "pki", "kubeconfigs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), nil, 0o644); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return nil
}

// StopDir stops a control plane from its state directory alone, as
// `nodewright local down` does for one started with Options.Detach by
// another process: it signals the process groups recorded in dir/pids
// (SIGTERM, then SIGKILL after a grace period), skipping PIDs that no
// longer belong to dir, and removes dir. A missing dir is not an error; a
// directory without the package's marker is refused and left untouched.
func StopDir(dir string) error {
	return stopDir(dir, stopGrace)
}

// stopDir is StopDir with the SIGTERM grace period as a parameter.
func stopDir(dir string, grace time.Duration) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
		return fmt.Errorf("state dir %s was not made by this package (no %s)", dir, markerFile)
	}
	if err := killRecorded(dir, grace); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove state dir: %w", err)
	}
	return nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. The listeners
// are held until all are picked, so the ports differ from one another;
// another process may still take one before the component binds it.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns up to the last n lines of the file at path.
func tail(path string, n int) string {
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
