package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
)

// fakeSim records control-API requests and lists two instances.
type fakeSim struct {
	mu       sync.Mutex
	requests []string // "METHOD PATH BODY"
}

func (f *fakeSim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(body)))
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/_sim/instances":
		_ = json.NewEncoder(w).Encode([]ec2sim.Instance{
			{ID: "i-0aaa", PrivateDNSName: "ip-10-0-0-4.ap-northeast-1.compute.internal", Zone: "ap-northeast-1a", CapacityType: "spot", InstanceType: "m5.large"},
			{ID: "i-0bbb", PrivateDNSName: "ip-10-0-0-5.ap-northeast-1.compute.internal", Zone: "ap-northeast-1c", CapacityType: "on-demand", InstanceType: "c6a.xlarge"},
			{ID: "i-0ccc", PrivateDNSName: "ip-10-0-0-6.ap-northeast-1.compute.internal", Zone: "ap-northeast-1d", CapacityType: "spot", InstanceType: "m5.large"},
		})
	case strings.HasPrefix(r.URL.Path, "/_sim/instances/i-0ccc/interrupt"):
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":"instance i-0ccc: shutting-down"}`)
	case strings.HasPrefix(r.URL.Path, "/_sim/instances/i-0ccc/status"):
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "upstream gone\n")
	case strings.HasSuffix(r.URL.Path, "/interrupt"):
		_ = json.NewEncoder(w).Encode(ec2sim.SpotInterruption{})
	case strings.HasSuffix(r.URL.Path, "/status"):
		_ = json.NewEncoder(w).Encode(ec2sim.InstanceHealth{InstanceID: "i-0aaa", InstanceStatus: ec2sim.SummaryImpaired, SystemStatus: ec2sim.SummaryOK})
	case strings.HasSuffix(r.URL.Path, "/rebalance"):
		if strings.Contains(r.URL.Path, "i-0bbb") {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":"instance i-0bbb: on-demand, not spot"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(ec2sim.RebalanceRecommendation{InstanceID: "i-0aaa"})
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// stackDir writes the stack.json of a stack whose simulator is sim.
func stackDir(t *testing.T, sim http.Handler) string {
	t.Helper()
	return stackDirWired(t, sim, stack.Wired{Provisioning: true, GarbageCollection: true})
}

// stackDirWired writes the stack.json of a stack whose simulator is sim
// and that runs the features of wired.
func stackDirWired(t *testing.T, sim http.Handler, wired stack.Wired) string {
	t.Helper()
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	data, err := json.Marshal(stack.Info{Dir: dir, SimURL: srv.URL, Features: wired, Region: "ap-northeast-1",
		Zones: []string{"ap-northeast-1a", "ap-northeast-1c", "ap-northeast-1d"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stack.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLocalInjectionsDriveTheSimulatorControlAPI(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{
			name: "should interrupt the instance of a node named by its node name",
			args: []string{"interrupt", "ip-10-0-0-4.ap-northeast-1.compute.internal"},
			want: []string{"GET /_sim/instances", "POST /_sim/instances/i-0aaa/interrupt"},
		},
		{
			name: "should interrupt the instance of a node named by its providerID",
			args: []string{"interrupt", "aws:///ap-northeast-1a/i-0aaa"},
			want: []string{"GET /_sim/instances", "POST /_sim/instances/i-0aaa/interrupt"},
		},
		{
			name: "should recommend a rebalance for the instance of a node",
			args: []string{"rebalance", "ip-10-0-0-4.ap-northeast-1.compute.internal"},
			want: []string{"GET /_sim/instances", "POST /_sim/instances/i-0aaa/rebalance"},
		},
		{
			name: "should mark an offering out of capacity",
			args: []string{"ice", "m5.large", "ap-northeast-1a", "spot"},
			want: []string{`POST /_sim/unavailable {"capacityType":"spot","code":"InsufficientInstanceCapacity","instanceType":"m5.large","zone":"ap-northeast-1a"}`},
		},
		{
			name: "should lift an insufficient-capacity mark with --clear",
			args: []string{"ice", "--clear", "m5.large", "ap-northeast-1a", "spot"},
			want: []string{`DELETE /_sim/unavailable {"capacityType":"spot","code":"InsufficientInstanceCapacity","instanceType":"m5.large","zone":"ap-northeast-1a"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := &fakeSim{}
			dir := stackDir(t, sim)
			args := append([]string{tt.args[0], "--dir", dir}, tt.args[1:]...)
			var stdout, stderr bytes.Buffer
			if code := runLocal(context.Background(), args, nil, &stdout, &stderr); code != 0 {
				t.Fatalf("runLocal(%q) = %d, want 0; stderr:\n%s", args, code, stderr.String())
			}
			if diff := cmp.Diff(tt.want, sim.requests); diff != "" {
				t.Errorf("simulator requests mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLocalImpairFailsACheckDatedTwoMinutesBack(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantPath  string
		wantCheck string
	}{
		{name: "should impair the instance check by default", args: []string{"ip-10-0-0-4.ap-northeast-1.compute.internal"},
			wantPath: "/_sim/instances/i-0aaa/status", wantCheck: "instance"},
		{name: "should impair the system check named after the node", args: []string{"aws:///ap-northeast-1a/i-0aaa", "--check", "system"},
			wantPath: "/_sim/instances/i-0aaa/status", wantCheck: "system"},
		{name: "should impair the check named before the node", args: []string{"--check=system", "i-0bbb"},
			wantPath: "/_sim/instances/i-0bbb/status", wantCheck: "system"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := &fakeSim{}
			dir := stackDir(t, sim)
			args := append([]string{"impair", "--dir", dir}, tt.args...)
			var stdout, stderr bytes.Buffer
			before := time.Now()
			if code := runLocal(context.Background(), args, nil, &stdout, &stderr); code != 0 {
				t.Fatalf("runLocal(%q) = %d, want 0; stderr:\n%s", args, code, stderr.String())
			}
			after := time.Now()
			if len(sim.requests) != 2 || sim.requests[0] != "GET /_sim/instances" {
				t.Fatalf("simulator requests = %q, want the instance list and one status change", sim.requests)
			}
			method, rest, _ := strings.Cut(sim.requests[1], " ")
			path, body, _ := strings.Cut(rest, " ")
			if method != http.MethodPost || path != tt.wantPath {
				t.Errorf("status request = %s %s, want POST %s", method, path, tt.wantPath)
			}
			var got struct {
				Check    string    `json:"check"`
				Impaired bool      `json:"impaired"`
				Since    time.Time `json:"since"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("status body %q: %v", body, err)
			}
			if got.Check != tt.wantCheck || !got.Impaired {
				t.Errorf("status body = %+v, want check %q impaired", got, tt.wantCheck)
			}
			// Two minutes before the call, to the second.
			if lo, hi := before.Add(-2*time.Minute-time.Second), after.Add(-2*time.Minute); got.Since.Before(lo) || got.Since.After(hi) {
				t.Errorf("since = %s, want two minutes before the call (%s to %s)", got.Since, lo, hi)
			}
		})
	}
}

func TestLocalImpairSendsTheSimulatorsBody(t *testing.T) {
	sim := &fakeSim{}
	dir := stackDir(t, sim)
	info, err := stack.ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 30, 500, time.UTC)
	var stdout bytes.Buffer
	if err := localImpair(context.Background(), simClient{base: info.SimURL}, info, "i-0aaa", "system", now, &stdout); err != nil {
		t.Fatalf("localImpair() error = %v", err)
	}
	want := []string{"GET /_sim/instances", `POST /_sim/instances/i-0aaa/status {"check":"system","impaired":true,"since":"2026-03-01T11:58:30Z"}`}
	if diff := cmp.Diff(want, sim.requests); diff != "" {
		t.Errorf("simulator requests mismatch (-want +got):\n%s", diff)
	}
}

func TestLocalInjectionsSayWhatHandlesThem(t *testing.T) {
	wired := stack.Wired{Provisioning: true, GarbageCollection: true, Consolidation: true, Drift: true, Interrupts: true}
	unwired := stack.Wired{Provisioning: true, GarbageCollection: true}
	tests := []struct {
		name  string
		args  []string
		wired stack.Wired
		want  string
	}{
		{name: "should say the node is drained when interruption is wired", args: []string{"interrupt", "i-0aaa"}, wired: wired, want: "drains the node"},
		{name: "should say nothing drains the node when interruption is not wired", args: []string{"interrupt", "i-0aaa"}, wired: unwired, want: "nothing drains the node"},
		{name: "should say a rebalance only records an event when interruption is wired", args: []string{"rebalance", "i-0aaa"}, wired: wired, want: "records a SpotRebalanceRecommendation event on the Node and, as Karpenter does, nothing else: no taint, no drain"},
		{name: "should say nothing reads a rebalance when interruption is not wired", args: []string{"rebalance", "i-0aaa"}, wired: unwired, want: "nothing reads the recommendation"},
		{name: "should say an impaired node is drained forcefully when interruption is wired", args: []string{"impair", "i-0aaa"}, wired: wired, want: "drains the node forcefully"},
		{name: "should say nothing polls the status when interruption is not wired", args: []string{"impair", "i-0aaa"}, wired: unwired, want: "nothing polls the instance status"},
		{name: "should say the impairment is dated so the next poll acts", args: []string{"impair", "i-0aaa"}, wired: wired, want: "2m0s ago, the time Karpenter waits before it acts, so the next instance-status poll acts on it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := stackDirWired(t, &fakeSim{}, tt.wired)
			args := append([]string{tt.args[0], "--dir", dir}, tt.args[1:]...)
			var stdout, stderr bytes.Buffer
			if code := runLocal(context.Background(), args, nil, &stdout, &stderr); code != 0 {
				t.Fatalf("runLocal(%q) = %d, want 0; stderr:\n%s", args, code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.want)
			}
		})
	}
}

func TestLocalRejectsBadInvocations(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		withStack bool
		wantCode  int
		wantErr   string
	}{
		{name: "should print usage without a subcommand", args: nil, wantCode: 2, wantErr: "usage: nodewright local"},
		{name: "should reject an unknown subcommand", args: []string{"sideways"}, wantCode: 2, wantErr: `unknown subcommand "sideways"`},
		{name: "should reject interrupt without a node", args: []string{"interrupt"}, withStack: true, wantCode: 2, wantErr: "usage: nodewright local interrupt NODE"},
		{name: "should reject ice without a capacity type", args: []string{"ice", "m5.large", "ap-northeast-1a"}, withStack: true, wantCode: 2, wantErr: "usage: nodewright local ice"},
		{name: "should name a node no instance backs", args: []string{"interrupt", "ip-10-9-9-9"}, withStack: true, wantCode: 1, wantErr: `node "ip-10-9-9-9": no simulator instance`},
		{name: "should explain that a rebalance of an on-demand node goes nowhere", args: []string{"rebalance", "i-0bbb"}, withStack: true, wantCode: 1,
			wantErr: "node i-0bbb (instance i-0bbb, on-demand c6a.xlarge): Spot interruption warnings and rebalance recommendations only go to Spot instances; apply deploy/demo/spot/ for a Spot NodePool"},
		{name: "should explain that an interruption of an on-demand node goes nowhere", args: []string{"interrupt", "ip-10-0-0-5.ap-northeast-1.compute.internal"}, withStack: true, wantCode: 1,
			wantErr: "node ip-10-0-0-5.ap-northeast-1.compute.internal (instance i-0bbb, on-demand c6a.xlarge): Spot interruption warnings"},
		{name: "should print the message of the simulator's JSON error body", args: []string{"interrupt", "i-0ccc"}, withStack: true, wantCode: 1,
			wantErr: "nodewright local interrupt: the simulator refused: instance i-0ccc: shutting-down\n"},
		{name: "should name the call and status of a simulator error that is not JSON", args: []string{"impair", "i-0ccc"}, withStack: true, wantCode: 1,
			wantErr: "simulator POST /_sim/instances/i-0ccc/status: 502 Bad Gateway: upstream gone\n"},
		{name: "should name the missing stack", args: []string{"interrupt", "i-0aaa"}, wantCode: 1, wantErr: "no running stack in"},
		{name: "should reject impair without a node", args: []string{"impair", "--check", "system"}, withStack: true, wantCode: 2, wantErr: "usage: nodewright local impair NODE"},
		{name: "should reject impair of an unknown check", args: []string{"impair", "i-0aaa", "--check", "ebs"}, withStack: true, wantCode: 2, wantErr: `--check "ebs": want instance or system`},
		{name: "should reject impair of two nodes", args: []string{"impair", "i-0aaa", "i-0bbb"}, withStack: true, wantCode: 2, wantErr: "usage: nodewright local impair NODE"},
		{name: "should reject up with stray arguments", args: []string{"up", "now"}, wantCode: 2, wantErr: `unexpected arguments ["now"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if len(args) > 0 && args[0] != "up" {
				dir := t.TempDir()
				if tt.withStack {
					dir = stackDir(t, &fakeSim{})
				}
				args = append([]string{args[0], "--dir", dir}, args[1:]...)
			}
			var stdout, stderr bytes.Buffer
			code := runLocal(context.Background(), args, nil, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("runLocal(%q) = %d, want %d; stderr:\n%s", args, code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantErr)
			}
		})
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "should reject zero replicas", args: []string{"--replicas", "0"}},
		{name: "should reject stray arguments", args: []string{"now"}},
		{name: "should reject an unknown flag", args: []string{"--fast"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runDemo(context.Background(), tt.args, nil, &stdout, &stderr); code != 2 {
				t.Errorf("runDemo(%q) = %d, want 2", tt.args, code)
			}
		})
	}
}

func TestDescribeWired(t *testing.T) {
	tests := []struct {
		name string
		in   stack.Wired
		want string
	}{
		{"everything wired", stack.Wired{Provisioning: true, GarbageCollection: true, Consolidation: true, Drift: true, Interrupts: true},
			"provisioning, garbage collection, consolidation, drift and expiry, interruption handling"},
		{"no Step Functions engine", stack.Wired{Provisioning: true, GarbageCollection: true},
			"provisioning, garbage collection (disruption and interruption handling are off: --disruption=false, or run make sfn-deps)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describeWired(tt.in); got != tt.want {
				t.Errorf("describeWired() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLocalDownSaysWhatItFound(t *testing.T) {
	writeInfo := func(t *testing.T, dir string, info stack.Info) {
		t.Helper()
		data, err := json.Marshal(info)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stack.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// setup prepares dir (which does not exist yet) and returns a
		// check that runs after local down.
		setup       func(t *testing.T, dir string)
		want        string
		wantDirGone bool
	}{
		{name: "should say there was nothing to stop in a missing dir", setup: func(*testing.T, string) {},
			want: "no local stack in DIR; nothing to stop\n", wantDirGone: true},
		{name: "should say there was nothing to stop in a dir that holds no stack and leave it", setup: func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "mine"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, want: "no local stack in DIR; nothing to stop\n"},
		{name: "should say a recorded stack was not running and remove its state", setup: func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeInfo(t, dir, stack.Info{Dir: dir, ServePID: 0, PIDs: map[string]int{"forwarder": 0}})
		}, want: "local stack in DIR was not running (none of its recorded processes was alive); removed its state\n", wantDirGone: true},
		{name: "should remove what a failed start left without claiming a stop", setup: func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, want: "no running local stack in DIR; removed what a start that failed left there\n", wantDirGone: true},
		{name: "should stop a running stack's serving process and say so", setup: func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
				t.Fatal(err)
			}
			// A stand-in serving process whose command line names dir, as
			// `local serve --dir DIR` does; SIGTERM ends it.
			cmd := exec.Command("sh", "-c", "while :; do sleep 0.1; done", dir)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-done
			})
			writeInfo(t, dir, stack.Info{Dir: dir, ServePID: cmd.Process.Pid})
			// Until the child has exec'd, its command line is the test
			// binary's: wait for it to name dir.
			for deadline := time.Now().Add(10 * time.Second); !stack.Running(dir) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if !stack.Running(dir) {
				t.Fatal("stand-in stack is not seen as running")
			}
		}, want: "local stack in DIR stopped and removed\n", wantDirGone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "local-stack")
			tt.setup(t, dir)
			var stdout, stderr bytes.Buffer
			if code := runLocal(context.Background(), []string{"down", "--dir", dir}, nil, &stdout, &stderr); code != 0 {
				t.Fatalf("local down = %d, want 0; stderr:\n%s", code, stderr.String())
			}
			if diff := cmp.Diff(strings.ReplaceAll(tt.want, "DIR", dir), stdout.String()); diff != "" {
				t.Errorf("local down output mismatch (-want +got):\n%s", diff)
			}
			_, err := os.Stat(dir)
			if gone := errors.Is(err, os.ErrNotExist); gone != tt.wantDirGone {
				t.Errorf("state dir gone = %t, want %t", gone, tt.wantDirGone)
			}
			// A second down finds nothing.
			if tt.wantDirGone {
				stdout.Reset()
				if code := runLocal(context.Background(), []string{"down", "--dir", dir}, nil, &stdout, &stderr); code != 0 {
					t.Fatalf("second local down = %d, want 0", code)
				}
				if want := "no local stack in " + dir + "; nothing to stop\n"; stdout.String() != want {
					t.Errorf("second local down = %q, want %q", stdout.String(), want)
				}
			}
		})
	}
}

func TestLocalOutsideTheRepositoryHintsAtTheDefaultDir(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("TMPDIR", t.TempDir()) // the default dir outside the repository is under it
	def := filepath.Join(os.TempDir(), "nodewright-local-stack")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
		wantNot  string
	}{
		{name: "should hint at --dir when down finds no stack in the default dir", args: []string{"down"},
			want: "no local stack in " + def + "; nothing to stop\n(outside the nodewright repository the default state dir is " + def +
				"; a stack started inside the repository keeps its state in <repository>/.cache/local-stack"},
		{name: "should not hint when --dir is given", args: []string{"down", "--dir", filepath.Join(def, "x")},
			want: "nothing to stop\n", wantNot: "outside the nodewright repository"},
		{name: "should hint at --dir when an injection finds no stack", args: []string{"interrupt", "i-0aaa"}, wantCode: 1,
			want: "pass --dir <repository>/.cache/local-stack)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := runLocal(context.Background(), tt.args, nil, &out, &out); code != tt.wantCode {
				t.Errorf("runLocal(%q) = %d, want %d; output:\n%s", tt.args, code, tt.wantCode, out.String())
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output = %q, want it to contain %q", out.String(), tt.want)
			}
			if tt.wantNot != "" && strings.Contains(out.String(), tt.wantNot) {
				t.Errorf("output = %q, want it not to contain %q", out.String(), tt.wantNot)
			}
		})
	}
}

func TestLocalIceChecksItsArguments(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "should reject a capacity type other than on-demand or spot", args: []string{"m5.large", "ap-northeast-1a", "reserved"},
			wantErr: `nodewright local ice: CAPACITY "reserved": want on-demand or spot`},
		{name: "should reject a zone the stack does not run", args: []string{"m5.large", "ap-northeast-1b", "spot"},
			wantErr: `nodewright local ice: ZONE "ap-northeast-1b": not a zone of this stack; its zones are ap-northeast-1a, ap-northeast-1c, ap-northeast-1d`},
		{name: "should reject a zone given in the type's place", args: []string{"ap-northeast-1a", "m5.large", "spot"},
			wantErr: `ZONE "m5.large": not a zone of this stack`},
		{name: "should list the family's sizes for an unknown size", args: []string{"m5.huge", "ap-northeast-1a", "spot"},
			wantErr: `nodewright local ice: TYPE "m5.huge": not an instance type of the catalog; the m5 family has m5.12xlarge, m5.16xlarge`},
		{name: "should name an unknown family", args: []string{"zz9.large", "ap-northeast-1a", "on-demand"},
			wantErr: `nodewright local ice: TYPE "zz9.large": not an instance type of the catalog (family "zz9" unknown`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := &fakeSim{}
			args := append([]string{"ice", "--dir", stackDir(t, sim)}, tt.args...)
			var stdout, stderr bytes.Buffer
			if code := runLocal(context.Background(), args, nil, &stdout, &stderr); code != 2 {
				t.Errorf("runLocal(%q) = %d, want 2", args, code)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantErr)
			}
			if len(sim.requests) != 0 {
				t.Errorf("simulator requests = %q, want none", sim.requests)
			}
		})
	}
}

func TestLocalUpValidatesRegionAndZonesBeforeStarting(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "should reject a name that is no AWS region", args: []string{"--region", "mars-1"},
			wantErr: `nodewright local up: --region "mars-1": not an AWS region name such as us-east-1; choose one of ap-northeast-1, ap-northeast-2,`},
		{name: "should reject a region the catalog has no zones for", args: []string{"--region", "mx-central-1"},
			wantErr: `--region "mx-central-1": a region the local stack cannot simulate (shared/catalog has no zones for it); choose one of`},
		{name: "should reject a zone letter the region does not have", args: []string{"--zones", "ap-northeast-1a,ap-northeast-1z"},
			wantErr: `nodewright local up: --zones: "ap-northeast-1z" is not a zone of region ap-northeast-1; its zones are ap-northeast-1a, ap-northeast-1c, ap-northeast-1d`},
		{name: "should reject a zone of another region", args: []string{"--region", "us-west-2", "--zones", "us-east-1a"},
			wantErr: `--zones: "us-east-1a" is not a zone of region us-west-2; its zones are us-west-2a, us-west-2b, us-west-2c, us-west-2d`},
		{name: "should reject a zone listed twice", args: []string{"--zones", "ap-northeast-1a,ap-northeast-1a"},
			wantErr: `--zones: "ap-northeast-1a" is listed twice`},
		{name: "should reject a bad region with --detach too", args: []string{"--detach", "--region", "mars-1"},
			wantErr: `--region "mars-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "local-stack")
			args := append([]string{"up", "--dir", dir}, tt.args...)
			var stdout, stderr bytes.Buffer
			if code := runLocal(context.Background(), args, nil, &stdout, &stderr); code != 2 {
				t.Errorf("runLocal(%q) = %d, want 2", args, code)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantErr)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state dir %s exists after a rejected start (stat: %v)", dir, err)
			}
		})
	}
}

func TestLocalRegionsAreTheCatalogs(t *testing.T) {
	for _, region := range localRegions {
		if rc, ok := lookupRegion(region); !ok || len(rc.zones) == 0 || len(rc.types) == 0 {
			t.Errorf("lookupRegion(%q) = %d zones, %d types, %t; localRegions names only regions the catalog resolves", region, len(rc.zones), len(rc.types), ok)
		}
	}
	if _, ok := lookupRegion(stack.DefaultRegion); !ok || !slices.Contains(localRegions, stack.DefaultRegion) {
		t.Errorf("the stack's default region %s is not in localRegions or not resolvable", stack.DefaultRegion)
	}
}

func TestFailedStartCleansUpOnlyTheDirItCreated(t *testing.T) {
	startErr := errors.New("control plane: boom")
	tests := []struct {
		name        string
		fresh       bool
		wantDirGone bool
		wantErr     string
	}{
		{name: "should remove a state dir the failed start created", fresh: true, wantDirGone: true, wantErr: "control plane: boom"},
		{name: "should keep a state dir that existed before and say so", fresh: false,
			wantErr: "existed before this start and is kept"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "local-stack")
			if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
				t.Fatal(err)
			}
			err := cleanFailedStart(dir, tt.fresh, startErr)
			if !errors.Is(err, startErr) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("cleanFailedStart() = %v, want %v containing %q", err, startErr, tt.wantErr)
			}
			_, serr := os.Stat(dir)
			if gone := errors.Is(serr, os.ErrNotExist); gone != tt.wantDirGone {
				t.Errorf("state dir gone = %t, want %t", gone, tt.wantDirGone)
			}
		})
	}
}

func TestFreshStateDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "local-stack")
	if fresh, err := freshStateDir(missing); err != nil || !fresh {
		t.Errorf("freshStateDir(missing) = %t, %v; want true, nil", fresh, err)
	}
	existing := stackDir(t, &fakeSim{}) // a stack.json whose processes are gone
	if fresh, err := freshStateDir(existing); err != nil || fresh {
		t.Errorf("freshStateDir(existing) = %t, %v; want false, nil", fresh, err)
	}
}

func TestLocalSubcommandsPrintOnlyTheirOwnFlags(t *testing.T) {
	tests := []struct {
		name    string
		sub     string
		want    []string
		wantNot []string
	}{
		{name: "should show interrupt only --dir", sub: "interrupt", want: []string{"usage: nodewright local interrupt NODE", "-dir"}, wantNot: []string{"-check", "-clear"}},
		{name: "should show rebalance only --dir", sub: "rebalance", want: []string{"usage: nodewright local rebalance NODE", "-dir"}, wantNot: []string{"-check", "-clear"}},
		{name: "should show impair --check", sub: "impair", want: []string{"usage: nodewright local impair NODE", "-check", "-dir"}, wantNot: []string{"-clear"}},
		{name: "should show ice --clear", sub: "ice", want: []string{"usage: nodewright local ice TYPE ZONE CAPACITY", "-clear", "-dir"}, wantNot: []string{"-check"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runLocal(context.Background(), []string{tt.sub, "--bogus"}, nil, &stdout, &stderr); code != 2 {
				t.Errorf("local %s --bogus = %d, want 2", tt.sub, code)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr = %q, want it to contain %q", stderr.String(), w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(stderr.String(), w) {
					t.Errorf("stderr = %q, want it not to contain %q", stderr.String(), w)
				}
			}
		})
	}
}

func TestUsageListsEveryLocalSubcommand(t *testing.T) {
	var stderr bytes.Buffer
	run(context.Background(), nil, nil, io.Discard, &stderr)
	if want := "local up|down|interrupt|rebalance|impair|ice"; !strings.Contains(stderr.String(), want) {
		t.Errorf("usage = %q, want it to contain %q", stderr.String(), want)
	}
	stderr.Reset()
	runLocal(context.Background(), nil, nil, io.Discard, &stderr)
	for _, sub := range []string{"up ", "down ", "interrupt NODE", "rebalance NODE", "impair NODE", "ice TYPE ZONE CAPACITY"} {
		if !strings.Contains(stderr.String(), "\n  "+sub) {
			t.Errorf("local usage = %q, want a line for %q", stderr.String(), sub)
		}
	}
}

func TestSelfCommandFollowsTheInvocation(t *testing.T) {
	tests := []struct {
		name, arg0, want string
	}{
		{name: "should print go run for a binary go run built", arg0: "/tmp/go-build3141592/b001/exe/nodewright", want: "go run ./cmd/nodewright"},
		{name: "should print the name found on PATH", arg0: "nodewright", want: "nodewright"},
		{name: "should print a relative path as typed", arg0: "./bin/nodewright", want: "./bin/nodewright"},
		{name: "should fall back to nodewright without an arg0", arg0: "", want: "nodewright"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := selfCommand(tt.arg0); got != tt.want {
				t.Errorf("selfCommand(%q) = %q, want %q", tt.arg0, got, tt.want)
			}
		})
	}
}

func TestPrintHowToNamesTheStopCommandAndKubectl(t *testing.T) {
	defer func(old string) { invokedAs = old }(invokedAs)
	invokedAs = "go run ./cmd/nodewright"
	info := stack.Info{Dir: "/r/.cache/local-stack", Kubeconfig: "/r/.cache/local-stack/cluster/kubeconfig", Zones: []string{"ap-northeast-1a"}}
	tests := []struct {
		name     string
		detached bool
		want     []string
		wantNot  []string
	}{
		{name: "should print the stop command the way the CLI was run when detached", detached: true,
			want: []string{"Stop it with: go run ./cmd/nodewright local down --dir /r/.cache/local-stack\n", "(a recent kubectl, 1.30 or later)"}},
		{name: "should not print a stop command in the foreground", detached: false,
			want: []string{"(a recent kubectl, 1.30 or later)"}, wantNot: []string{"Stop it with", "1.35"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			printHowTo(&out, info, "prices", tt.detached)
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output = %q, want it to contain %q", out.String(), w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(out.String(), w) {
					t.Errorf("output = %q, want it not to contain %q", out.String(), w)
				}
			}
		})
	}
}

func TestParseUpFlagsBootDelay(t *testing.T) {
	tests := []struct {
		name     string
		arg      string
		want     time.Duration
		wantFail bool
	}{
		{"should keep a positive delay", "3s", 3 * time.Second, false},
		{"should turn 0 into the stack's no-delay value", "0s", -1, false},
		{"should reject a negative delay", "-5s", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			f, err := parseUpFlags("nodewright local up", []string{"--boot-delay", tt.arg}, &stderr)
			if tt.wantFail {
				if err == nil || !strings.Contains(stderr.String(), "--boot-delay -5s: want a duration of 0 or more") {
					t.Errorf("parseUpFlags(%s) error = %v, stderr %q; want a usage error naming the flag", tt.arg, err, stderr.String())
				}
				return
			}
			if err != nil || f.bootDelay != tt.want {
				t.Errorf("parseUpFlags(%s) = %v, %v; want %v", tt.arg, f.bootDelay, err, tt.want)
			}
		})
	}
}
