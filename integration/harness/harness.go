// Package harness starts the local stand-ins that the end-to-end tests in
// integration/ run against, and gives tests small helpers on top of them.
// Today that is the Kubernetes control plane of local/controlplane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok); the
// AWS side joins it as it lands.
//
// Every test gets a fresh cluster of its own (StartCluster); nothing is
// shared or reset between tests.
package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/nodewright/nodewright/local/controlplane"
)

// rootModule is the module path whose go.mod marks the repository root.
const rootModule = "github.com/nodewright/nodewright"

// Cluster is a running control plane with clients for its admin user.
type Cluster struct {
	*controlplane.Cluster
	// Kube is a typed client.
	Kube kubernetes.Interface
	// Dynamic is a dynamic client, for custom resources.
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources through discovery; it is reset when a
	// kind is not found, so kinds of CRDs created later resolve too.
	Mapper *restmapper.DeferredDiscoveryRESTMapper
}

// StartCluster starts a control plane for t, or skips t under -short or
// when the binaries are not built (the message names `make controlplane`).
// The cluster is stopped, and its state removed, when t ends; if t failed,
// the last lines of each component's log are logged first.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped under -short")
	}
	binDir, err := BinDir()
	if err != nil {
		t.Fatalf("find control-plane binaries: %v", err)
	}
	if err := controlplane.CheckBinaries(binDir); err != nil {
		if errors.Is(err, controlplane.ErrNotBuilt) {
			t.Skipf("end-to-end test: %v", err)
		}
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: filepath.Join(t.TempDir(), "cluster"), BinDir: binDir})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	c := &Cluster{Cluster: cp}
	t.Cleanup(func() {
		if t.Failed() {
			if c.Kube != nil {
				t.Logf("cluster state:\n%s", c.Describe(context.Background()))
			}
			for _, name := range []string{controlplane.Etcd, controlplane.APIServer, controlplane.ControllerManager, controlplane.Scheduler, controlplane.Kwok} {
				t.Logf("last lines of %s:\n%s", cp.LogPath(name), cp.LogTail(name, 30))
			}
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})

	cfg := cp.RESTConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kube client: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	c.Kube, c.Dynamic = kube, dyn
	c.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return c
}

// BinDir returns the directory `make controlplane` builds into:
// .cache/bin at the repository root, found by walking up from the working
// directory to the go.mod of the root module.
func BinDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working dir: %w", err)
	}
	for {
		if isRootModule(filepath.Join(dir, "go.mod")) {
			return filepath.Join(dir, ".cache", "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", rootModule)
		}
		dir = parent
	}
}

// isRootModule reports whether the go.mod at path declares rootModule.
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

// Eventually polls cond every 100 ms until it returns true, and fails t
// with what, the last error and the elapsed time once timeout has passed.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached after %v (last error: %v)", what, time.Since(start).Round(time.Millisecond), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// isNoMatch reports whether err says a kind is unknown to the mapper.
func isNoMatch(err error) bool {
	return meta.IsNoMatchError(err)
}
