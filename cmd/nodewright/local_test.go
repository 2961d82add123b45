package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
