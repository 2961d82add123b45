package stack_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/local/controlplane"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Environment of TestForwarderFootprint. The test runs only when
// footprintNodesEnv is set: at 1,000 nodes it takes about 25 minutes on a
// shared 2-core machine, which CI does not spend.
const (
	footprintNodesEnv   = "NODEWRIGHT_FOOTPRINT_NODES"         // cluster size (required)
	footprintPodsEnv    = "NODEWRIGHT_FOOTPRINT_PODS_PER_NODE" // bound pods per node (default 30)
	footprintSteadyEnv  = "NODEWRIGHT_FOOTPRINT_STEADY"        // steady window (default 3m)
	footprintOutEnv     = "NODEWRIGHT_FOOTPRINT_OUT"           // file the JSON result is appended to (optional)
	footprintLimitEnv   = "NODEWRIGHT_FOOTPRINT_GOMEMLIMIT"    // the forwarder's GOMEMLIMIT (optional; without it the forwarder derives it from its manifest's memory request, memlimit.go)
	footprintChurnEvery = 3 * time.Second                      // a churn step: churnPods created, as many deleted
	footprintChurnPods  = 3
	footprintRollout    = 50 // replicas of the Deployment rolled out mid-window
)

// footprintSample is one reading of the forwarder's process.
type footprintSample struct {
	at       time.Time
	cpuTicks int64 // utime+stime, in clock ticks
	rss, hwm int64 // VmRSS, VmHWM, bytes
}

// FootprintResult is what TestForwarderFootprint measured, as written to
// footprintOutEnv (one JSON object a line).
type FootprintResult struct {
	Nodes, Pods int
	// GOMEMLIMIT is the override's value, or MEMORY_REQUEST=<the
	// manifest's request> when the forwarder derived its own.
	GOMEMLIMIT string
	Steady     string
	// CPU in millicores: the mean over the steady window and the largest
	// mean over any 5 s of it.
	CPUMeanMilli, CPUPeakMilli float64
	// Memory in MiB: VmHWM at the end (the peak resident set since start,
	// initial lists included), the mean and largest VmRSS of the steady
	// window, and the Go heap in use at the end (go_memstats_heap_inuse_bytes).
	PeakRSSMiB, SteadyRSSMiB, SteadyMaxRSSMiB, HeapInuseMiB float64
	// Snapshots posted during the steady window.
	Snapshots int
}

// The forwarder's own CPU and memory on a steady cluster of
// NODEWRIGHT_FOOTPRINT_NODES kwok nodes with NODEWRIGHT_FOOTPRINT_PODS_PER_NODE
// pods each, under churn (pods created and deleted every few seconds, one
// Deployment rollout): the real forwarder binary, posting to the local
// intake, sampled from /proc every second. Its peak resident set must fit
// the memory its manifest requests (what Fargate sizes the pod on) and its
// mean CPU the CPU it requests. docs/cost.md, "The forwarder's footprint",
// holds the figures and the command.
func TestForwarderFootprint(t *testing.T) {
	nodes := footprintInt(t, footprintNodesEnv, 0)
	if nodes == 0 {
		t.Skipf("set %s to a node count to measure the forwarder's footprint", footprintNodesEnv)
	}
	perNode := footprintInt(t, footprintPodsEnv, 30)
	steady := 3 * time.Minute
	if v := os.Getenv(footprintSteadyEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 30*time.Second {
			t.Fatalf("%s=%q: want a duration of at least 30s", footprintSteadyEnv, v)
		}
		steady = d
	}
	s := startStack(t)
	// The forwarder runs as its manifest has it: MEMORY_REQUEST (the
	// Downward API's requests.memory there) sets its GOMEMLIMIT, unless
	// the override sets GOMEMLIMIT itself. Only the restarted forwarder
	// gets them: the control plane, started with this process's
	// environment, runs without.
	req := forwarderRequests(t)
	memLimit := os.Getenv(footprintLimitEnv)
	s.KillForwarder()
	if memLimit != "" {
		t.Setenv("GOMEMLIMIT", memLimit)
	} else {
		t.Setenv("MEMORY_REQUEST", strconv.FormatInt(req.Memory().Value(), 10))
		memLimit = "MEMORY_REQUEST=" + req.Memory().String()
	}
	if err := s.StartForwarder(); err != nil {
		t.Fatal(err)
	}
	applyGuide(t, s)
	ctx := t.Context()
	kube := bulkClient(t, s.Kubeconfig)

	start := time.Now()
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("foot-%04d", i)
	}
	parallel(t, nodes, func(i int) error {
		_, err := kube.CoreV1().Nodes().Create(ctx, footprintNode(names[i], i), metav1.CreateOptions{})
		return err
	})
	parallel(t, nodes*perNode, func(i int) error {
		_, err := kube.CoreV1().Pods("default").Create(ctx, boundPod(fmt.Sprintf("bulk-%05d", i), names[i%nodes], fmt.Sprintf("bulk-%d", i%50)), metav1.CreateOptions{})
		return err
	})
	rollout := deployment("rollout", footprintRollout, "10m", "16Mi")
	if _, err := kube.AppsV1().Deployments("default").Create(ctx, rollout, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	total := nodes*perNode + footprintRollout
	waitRunning(t, kube, total, 10*time.Minute)
	t.Logf("%d nodes and %d running pods %s after the start", nodes, total, time.Since(start).Round(time.Second))

	pid := s.ForwarderPID()
	if pid == 0 {
		t.Fatal("forwarder not running")
	}
	// Let the forwarder's caches and first snapshots settle.
	time.Sleep(30 * time.Second)
	posted := func() int {
		n := 0
		for _, a := range s.IntakeAnswers() {
			if strings.HasSuffix(a.Path, v1.RouteSnapshots) && a.Status < 300 {
				n++
			}
		}
		return n
	}
	snapshotsBefore := posted()

	var samples []footprintSample
	var churned atomic.Int64
	churnCtx, stopChurn := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { churn(churnCtx, t, kube, names, &churned) })
	rolled := false
	end := time.Now().Add(steady)
	for tick := time.NewTicker(time.Second); time.Now().Before(end); <-tick.C {
		smp, err := readProc(pid)
		if err != nil {
			stopChurn()
			wg.Wait()
			t.Fatalf("forwarder pid %d: %v (log: %s)", pid, err, tail(s.LogPath("forwarder"), 20))
		}
		samples = append(samples, smp)
		if !rolled && time.Until(end) < 2*steady/3 {
			rolled = true
			patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"footprint/rollout":%q}}}}}`, time.Now().Format(time.RFC3339))
			if _, err := kube.AppsV1().Deployments("default").Patch(ctx, "rollout", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Errorf("rollout: %v", err)
			}
		}
	}
	stopChurn()
	wg.Wait()

	r := FootprintResult{Nodes: nodes, Pods: total, GOMEMLIMIT: memLimit, Steady: steady.String(), Snapshots: posted() - snapshotsBefore}
	summarize(&r, samples)
	if heap, err := scrapeGauge(s.ForwarderMetricsURL(), "go_memstats_heap_inuse_bytes"); err == nil {
		r.HeapInuseMiB = heap / (1 << 20)
	} else {
		t.Logf("go_memstats_heap_inuse_bytes: %v", err)
	}
	t.Logf("nodes=%d pods=%d churned=%d snapshots=%d: CPU mean %.0fm peak(5s) %.0fm; RSS peak %.0f MiB, steady mean %.0f MiB, steady max %.0f MiB; heap in use %.0f MiB",
		r.Nodes, r.Pods, churned.Load(), r.Snapshots, r.CPUMeanMilli, r.CPUPeakMilli, r.PeakRSSMiB, r.SteadyRSSMiB, r.SteadyMaxRSSMiB, r.HeapInuseMiB)
	if out := os.Getenv(footprintOutEnv); out != "" {
		line, _ := json.Marshal(r)
		f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write(append(line, '\n'))
		_ = f.Close()
	}

	if r.Snapshots == 0 {
		t.Errorf("no snapshot posted during the %s steady window: the forwarder did not work under the churn", steady)
	}
	if mem := float64(req.Memory().Value()) / (1 << 20); r.PeakRSSMiB > mem {
		t.Errorf("peak RSS %.0f MiB exceeds the %.0f MiB the forwarder's manifest requests", r.PeakRSSMiB, mem)
	}
	if cpu := float64(req.Cpu().MilliValue()); r.CPUMeanMilli > cpu {
		t.Errorf("mean CPU %.0fm exceeds the %.0fm the forwarder's manifest requests", r.CPUMeanMilli, cpu)
	}
}

func footprintInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// bulkClient is an admin client of the stack's API server fast enough to
// create tens of thousands of objects in minutes.
func bulkClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parallel runs f(0..n-1) on 16 workers and fails t on the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && first.Load() == nil; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		t.Fatal(*err)
	}
}

// footprintNode is a kwok-run Node outside nodewright (no NodePool label,
// as a managed node group's), shaped as an m5.8xlarge.
func footprintNode(name string, i int) *corev1.Node {
	zone := []string{"a", "c", "d"}[i%3]
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				corev1.LabelInstanceTypeStable: "m5.8xlarge", corev1.LabelTopologyZone: stack.DefaultRegion + zone,
				corev1.LabelTopologyRegion: stack.DefaultRegion,
			},
			Annotations: map[string]string{controlplane.ManagedNodeAnnotation: controlplane.ManagedNodeValue},
		},
		Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s%s/i-0f00%013d", stack.DefaultRegion, zone, i)},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("31850m"), corev1.ResourceMemory: resource.MustParse("124Gi"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "v1.34.0-kwok"},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)},
				{Type: corev1.NodeHostName, Address: name},
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}},
		},
	}
}

// boundPod is a pod already bound to node (kwok runs it), requesting a
// little CPU and memory, with app's label.
func boundPod(name, node, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				},
			}},
		},
	}
}

// waitRunning waits until want pods are Running.
func waitRunning(t *testing.T, kube kubernetes.Interface, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{FieldSelector: "status.phase=Running", ResourceVersion: "0"})
		if err == nil && len(list.Items) >= want {
			return
		}
		if time.Now().After(deadline) {
			got := 0
			if list != nil {
				got = len(list.Items)
			}
			t.Fatalf("%d of %d pods Running after %s (err %v)", got, want, timeout, err)
		}
		time.Sleep(10 * time.Second)
	}
}

// churn creates footprintChurnPods bound pods and deletes as many of the
// oldest ones it created every footprintChurnEvery, until ctx is done.
func churn(ctx context.Context, t *testing.T, kube kubernetes.Interface, nodes []string, n *atomic.Int64) {
	var live []string
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(footprintChurnEvery):
		}
		for j := range footprintChurnPods {
			name := fmt.Sprintf("churn-%d-%d", i, j)
			if _, err := kube.CoreV1().Pods("default").Create(ctx, boundPod(name, nodes[rand.IntN(len(nodes))], "churn"), metav1.CreateOptions{}); err == nil {
				live = append(live, name)
				n.Add(1)
			} else if ctx.Err() == nil {
				t.Logf("churn create %s: %v", name, err)
			}
		}
		for len(live) > 10*footprintChurnPods {
			_ = kube.CoreV1().Pods("default").Delete(ctx, live[0], metav1.DeleteOptions{})
			live = slices.Delete(live, 0, 1)
		}
	}
}

// readProc reads pid's CPU time from /proc/<pid>/stat (utime and stime,
// fields 14 and 15) and its VmRSS and VmHWM from /proc/<pid>/status.
func readProc(pid int) (footprintSample, error) {
	smp := footprintSample{at: time.Now()}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return smp, err
	}
	// The command name (field 2) is parenthesized and may hold spaces.
	rest := stat[bytes.LastIndexByte(stat, ')')+2:]
	fields := strings.Fields(string(rest)) // fields[0] is field 3
	if len(fields) < 13 {
		return smp, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	for _, f := range fields[11:13] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return smp, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		smp.cpuTicks += v
	}
	status, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return smp, err
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return smp, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			smp.rss = kb << 10
		} else {
			smp.hwm = kb << 10
		}
	}
	return smp, sc.Err()
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// summarize fills r's CPU and memory figures from samples, oldest first.
func summarize(r *FootprintResult, samples []footprintSample) {
	if len(samples) < 2 {
		return
	}
	milli := func(a, b footprintSample) float64 {
		return float64(b.cpuTicks-a.cpuTicks) / clockTicks / b.at.Sub(a.at).Seconds() * 1000
	}
	first, last := samples[0], samples[len(samples)-1]
	r.CPUMeanMilli = milli(first, last)
	var sum float64
	var maxRSS int64
	for i, smp := range samples {
		sum += float64(smp.rss)
		maxRSS = max(maxRSS, smp.rss)
		for j := i + 1; j < len(samples); j++ {
			if samples[j].at.Sub(smp.at) >= 5*time.Second {
				r.CPUPeakMilli = max(r.CPUPeakMilli, milli(smp, samples[j]))
				break
			}
		}
	}
	r.PeakRSSMiB = float64(last.hwm) / (1 << 20)
	r.SteadyRSSMiB = sum / float64(len(samples)) / (1 << 20)
	r.SteadyMaxRSSMiB = float64(maxRSS) / (1 << 20)
}

// scrapeGauge reads one unlabelled gauge from a Prometheus text endpoint.
func scrapeGauge(url, name string) (float64, error) {
	if url == "" {
		return 0, fmt.Errorf("no metrics URL")
	}
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: not served", name)
}

// forwarderRequests reads the resource requests of the forwarder's
// container from forwarder/deploy/deployment.yaml.
func forwarderRequests(t *testing.T) corev1.ResourceList {
	t.Helper()
	root, err := stack.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "forwarder", "deploy", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatalf("forwarder/deploy/deployment.yaml: %v", err)
	}
	return d.Spec.Template.Spec.Containers[0].Resources.Requests
}
