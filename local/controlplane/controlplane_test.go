package controlplane_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/local/controlplane"
)

// binDir returns the repository's .cache/bin, skipping tb under -short or
// when `make controlplane` has not built it.
func binDir(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a control plane: skipped under -short")
	}
	dir, err := filepath.Abs("../../.cache/bin")
	if err != nil {
		tb.Fatal(err)
	}
	if err := controlplane.CheckBinaries(dir); err != nil {
		if errors.Is(err, controlplane.ErrNotBuilt) {
			tb.Skip(err)
		}
		tb.Fatal(err)
	}
	return dir
}

var components = []string{controlplane.Etcd, controlplane.APIServer, controlplane.ControllerManager, controlplane.Scheduler, controlplane.Kwok}

// TestStartStop starts a control plane over the state of one that was
// never stopped (as after a crash), uses it, checks that it listens on
// loopback only, and stops it.
func TestStartStop(t *testing.T) {
	bin := binDir(t)
	dir := filepath.Join(t.TempDir(), "state")

	crashed, err := controlplane.Start(t.Context(), controlplane.Options{Dir: dir, BinDir: bin})
	if err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	c, err := controlplane.Start(t.Context(), controlplane.Options{Dir: dir, BinDir: bin})
	if err != nil {
		t.Fatalf("Start() over a leftover dir: error = %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })

	t.Run("should stop the processes of a leftover state dir", func(t *testing.T) {
		deadline := time.Now().Add(5 * time.Second)
		for len(crashed.Exited()) < len(components) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if got := crashed.Exited(); len(got) != len(components) {
			t.Errorf("exited components of the first cluster = %v, want all of %v", got, components)
		}
	})

	t.Run("should record readiness of every component", func(t *testing.T) {
		var got []string
		for _, tm := range c.Timings {
			got = append(got, tm.Component)
			t.Logf("%s ready after %v", tm.Component, tm.Ready.Round(time.Millisecond))
		}
		want := append(slices.Clone(components), "default-serviceaccount")
		if !slices.Equal(got, want) {
			t.Errorf("Timings components = %v, want %v", got, want)
		}
	})

	t.Run("should serve the API to the admin kubeconfig", func(t *testing.T) {
		kube, err := kubernetes.NewForConfig(c.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		ns, err := kube.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list namespaces: %v", err)
		}
		var names []string
		for _, n := range ns.Items {
			names = append(names, n.Name)
		}
		for _, want := range []string{"default", "kube-system"} {
			if !slices.Contains(names, want) {
				t.Errorf("namespaces %v lack %s", names, want)
			}
		}
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			t.Errorf("kubeconfig: %v", err)
		}
	})

	t.Run("should listen on 127.0.0.1 only", func(t *testing.T) {
		if _, err := os.Stat("/proc/net/tcp"); err != nil {
			t.Skip("needs /proc")
		}
		listening, err := listenAddrs()
		if err != nil {
			t.Fatal(err)
		}
		for name, pid := range c.PIDs() {
			inodes, err := socketInodes(pid)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			n := 0
			for _, ino := range inodes {
				addr, ok := listening[ino]
				if !ok {
					continue
				}
				n++
				if !strings.HasPrefix(addr, "127.0.0.1:") {
					t.Errorf("%s listens on %s", name, addr)
				}
			}
			if n == 0 {
				t.Errorf("%s has no listening socket", name)
			}
		}
	})

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop() error = %v", err)
	}
	t.Run("should stop every process and remove the state dir", func(t *testing.T) {
		if got := c.Exited(); len(got) != len(components) {
			t.Errorf("Exited() = %v, want all of %v", got, components)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state dir still there: %v", err)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("second Stop() error = %v", err)
		}
	})
}

// socketInodes returns the inodes of pid's open sockets.
func socketInodes(pid int) ([]string, error) {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"))
		}
	}
	return out, nil
}

// listenAddrs maps the inode of every listening TCP socket of this network
// namespace to its address, "127.0.0.1:<port>" for IPv4 loopback and the
// raw /proc form ("<hex ip>:<hex port>") for anything else.
func listenAddrs() (map[string]string, error) {
	out := map[string]string{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(file)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr := fields[1]
			if ip, port, ok := strings.Cut(addr, ":"); ok && ip == "0100007F" {
				var p int
				fmt.Sscanf(port, "%X", &p)
				addr = fmt.Sprintf("127.0.0.1:%d", p)
			}
			out[fields[9]] = addr
		}
		file.Close()
	}
	return out, nil
}

// BenchmarkStart measures a cold start of the control plane (fresh state
// dir, binaries built) until every component is ready and the default
// ServiceAccount exists, followed by Stop. apiserver-ms and ready-ms are
// the mean times from Start to the API server's /readyz and to full
// readiness.
func BenchmarkStart(b *testing.B) {
	bin := binDir(b)
	var apiserver, ready time.Duration
	n := 0
	for b.Loop() {
		c, err := controlplane.Start(b.Context(), controlplane.Options{Dir: filepath.Join(b.TempDir(), "state"), BinDir: bin})
		if err != nil {
			b.Fatal(err)
		}
		for _, tm := range c.Timings {
			if tm.Component == controlplane.APIServer {
				apiserver += tm.Ready
			}
		}
		ready += c.Timings[len(c.Timings)-1].Ready
		n++
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(apiserver.Milliseconds())/float64(n), "apiserver-ms")
	b.ReportMetric(float64(ready.Milliseconds())/float64(n), "ready-ms")
}
