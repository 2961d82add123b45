// Package stack_test runs end-to-end scenarios on the local stack
// (local/stack): a real kube-apiserver, scheduler, controller manager and
// kwok, the real forwarder binary, and the intake, provisioner and gc
// handlers against kumo and the EC2 simulator. Each test gets a stack of
// its own. The tests skip under -short and when `make controlplane` has not
// been run.
package stack_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodewright/nodewright/deploy/demo"
	"github.com/nodewright/nodewright/local/controlplane"
	"github.com/nodewright/nodewright/local/stack"
)

// forwarderBinEnv names a prebuilt forwarder binary to run instead of
// building one: `make test` sets it to the linux binary extracted from the
// image `make image` built (dist/image/forwarder-linux-<arch>), so every
// scenario here runs the binary users deploy.
const forwarderBinEnv = "NODEWRIGHT_FORWARDER_BIN"

// forwarder is the forwarder binary, built once per test binary by the
// first test that needs it (or forwarderBinEnv's).
var forwarder struct {
	once sync.Once
	bin  string
	err  error
}

func forwarderBin(t testing.TB, root string) string {
	forwarder.once.Do(func() {
		if bin := os.Getenv(forwarderBinEnv); bin != "" {
			if _, forwarder.err = os.Stat(bin); forwarder.err == nil {
				forwarder.bin = bin
			}
			return
		}
		dir, err := os.MkdirTemp("", "nodewright-e2e-")
		if err != nil {
			forwarder.err = err
			return
		}
		forwarder.bin = filepath.Join(dir, "nodewright-forwarder")
		forwarder.err = stack.BuildForwarder(context.Background(), root, forwarder.bin, os.Stderr)
	})
	if forwarder.err != nil {
		t.Fatal(forwarder.err)
	}
	return forwarder.bin
}

// cli is the nodewright CLI, built once per test binary by the first test
// that runs it (the demo, the rollout forecast).
var cliBuild struct {
	once sync.Once
	bin  string
	err  error
}

func cliBin(t testing.TB, root string) string {
	cliBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "nodewright-e2e-cli-")
		if err != nil {
			cliBuild.err = err
			return
		}
		cliBuild.bin = filepath.Join(dir, "nodewright")
		build := exec.Command("go", "build", "-o", cliBuild.bin, "./cmd/nodewright")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			cliBuild.err = fmt.Errorf("go build ./cmd/nodewright: %w\n%s", err, out)
		}
	})
	if cliBuild.err != nil {
		t.Fatal(cliBuild.err)
	}
	return cliBuild.bin
}

// startStack starts a stack for t with a short boot delay and short
// batching windows, or skips t. It is stopped when t ends; if t failed,
// the logs' last lines are logged first.
func startStack(t testing.TB, mutate ...func(*stack.Options)) *stack.Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test on the local stack: skipped under -short")
	}
	root, err := stack.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(root, ".cache", "bin")
	if err := controlplane.CheckBinaries(binDir); err != nil {
		if errors.Is(err, controlplane.ErrNotBuilt) {
			t.Skipf("end-to-end test on the local stack: %v", err)
		}
		t.Fatal(err)
	}
	opts := stack.Options{
		Dir: filepath.Join(t.TempDir(), "stack"), BinDir: binDir, RepoRoot: root, ForwarderBin: forwarderBin(t, root),
		BootDelay: time.Second, BatchIdle: 200 * time.Millisecond, BatchMax: 2 * time.Second,
	}
	for _, m := range mutate {
		m(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := stack.Up(ctx, opts)
	if err != nil {
		t.Fatalf("stack.Up() error = %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"forwarder", "functions", controlplane.Kwok, controlplane.Scheduler} {
				t.Logf("last lines of %s:\n%s", name, tail(s.LogPath(name), 40))
			}
		}
		if err := s.Down(); err != nil {
			t.Errorf("Down() error = %v", err)
		}
	})
	return s
}

// applyGuide applies the guide-complete EC2NodeClass and NodePool.
func applyGuide(t testing.TB, s *stack.Stack, files ...string) {
	t.Helper()
	if len(files) == 0 {
		files = []string{"ec2nodeclass.yaml", "nodepool.yaml"}
	}
	for _, f := range files {
		data, err := guideFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(t.Context(), data); err != nil {
			t.Fatalf("Apply(%s) error = %v", f, err)
		}
	}
}

// guideFile is the guide's manifest file (deploy/demo/guide-complete).
func guideFile(name string) ([]byte, error) {
	return demo.GuideComplete.ReadFile("guide-complete/" + name)
}

// deployment returns a Deployment of replicas pause pods each requesting
// cpu and mem.
func deployment(name string, replicas int32, cpu, mem string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
					}},
				}}},
			},
		},
	}
}

// eventually polls cond every 200ms until it holds, failing t with what
// and the last status after timeout.
func eventually(t testing.TB, s *stack.Stack, timeout time.Duration, what string, cond func(ctx context.Context, st stack.Status) bool) stack.Status {
	t.Helper()
	return eventuallyEvery(t, s, 200*time.Millisecond, timeout, what, cond)
}

// eventuallyEvery is eventually polling every interval: a large cluster's
// Status is a list of every Node, NodeClaim and Pod, whose cost grows with
// the cluster.
func eventuallyEvery(t testing.TB, s *stack.Stack, interval, timeout time.Duration, what string, cond func(ctx context.Context, st stack.Status) bool) stack.Status {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(timeout)
	var st stack.Status
	var err error
	for {
		st, err = s.Observe(ctx)
		if err == nil && cond(ctx, st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (last status %+v, err %v)", what, timeout, st, err)
		}
		time.Sleep(interval)
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func nodeList(t testing.TB, s *stack.Stack) []corev1.Node {
	t.Helper()
	nodes, err := s.Kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return nodes.Items
}
