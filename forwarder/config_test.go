package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// inCluster is the environment the Deployment sets.
func inCluster() map[string]string {
	return map[string]string{
		"CLUSTER_NAME":  "prod",
		"API_ENDPOINT":  "https://abc123.execute-api.eu-west-1.amazonaws.com/prod",
		"POD_NAMESPACE": "nodewright",
		"POD_NAME":      "nodewright-forwarder-7d9c-x2lqp",
	}
}

func TestLoadConfig(t *testing.T) {
	defaults := config{
		Cluster: "prod", Endpoint: "https://abc123.execute-api.eu-west-1.amazonaws.com/prod", Region: "eu-west-1",
		Namespace: "nodewright", Identity: "nodewright-forwarder-7d9c-x2lqp", LeaseName: "nodewright-forwarder", Deployment: "nodewright-forwarder",
		LeaderElect: true, MetricsAddr: ":8080", HealthAddr: ":8081", BatchIdle: time.Second, BatchMax: 10 * time.Second,
		SyncIdle: time.Minute, KubeQPS: 200, KubeBurst: 300, LogLevel: slog.LevelInfo,
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want func(c *config)
	}{
		{name: "should take Karpenter's defaults and the region from the endpoint", env: inCluster(), want: func(*config) {}},
		{
			name: "should read Karpenter's batch variables",
			env:  with(inCluster(), "BATCH_IDLE_DURATION", "2s", "BATCH_MAX_DURATION", "20s", "METRICS_PORT", "9090", "LOG_LEVEL", "debug"),
			want: func(c *config) {
				c.BatchIdle, c.BatchMax, c.MetricsAddr, c.LogLevel = 2*time.Second, 20*time.Second, ":9090", slog.LevelDebug
			},
		},
		{
			name: "should let a flag win over its variable",
			env:  with(inCluster(), "BATCH_IDLE_DURATION", "2s", "AWS_REGION", "us-east-1"),
			args: []string{"--batch-idle-duration=500ms", "--region=eu-central-1"},
			want: func(c *config) { c.BatchIdle, c.Region = 500*time.Millisecond, "eu-central-1" },
		},
		{
			name: "should read the poll back-off's longest interval",
			env:  with(inCluster(), "SYNC_IDLE_INTERVAL", "15s"),
			want: func(c *config) { c.SyncIdle = 15 * time.Second },
		},
		{
			name: "should leave the region to the SDK for a custom domain",
			env:  with(inCluster(), "API_ENDPOINT", "https://nodewright.example.com/prod"),
			want: func(c *config) { c.Endpoint, c.Region = "https://nodewright.example.com/prod", "" },
		},
		{
			name: "should run without leader election when disabled, needing no pod identity",
			env:  with(map[string]string{"CLUSTER_NAME": "prod", "API_ENDPOINT": "http://127.0.0.1:9000"}, "DISABLE_LEADER_ELECTION", "true"),
			want: func(c *config) {
				c.Endpoint, c.Region, c.Namespace, c.Identity, c.LeaderElect = "http://127.0.0.1:9000", "", "", "", false
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadConfig(tt.args, getenv(tt.env))
			if err != nil {
				t.Fatalf("loadConfig() error = %v", err)
			}
			want := defaults
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("loadConfig() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{name: "should require the cluster and the endpoint", env: map[string]string{"POD_NAMESPACE": "n", "POD_NAME": "p"},
			want: []string{"cluster name: required", "api endpoint: required"}},
		{name: "should reject a relative endpoint", env: with(inCluster(), "API_ENDPOINT", "/prod"), want: []string{`api endpoint "/prod": not an absolute URL`}},
		{name: "should reject a malformed duration", env: with(inCluster(), "BATCH_IDLE_DURATION", "soon"), want: []string{`BATCH_IDLE_DURATION="soon": not a duration`}},
		{name: "should reject a max window shorter than the idle one", env: inCluster(), args: []string{"--batch-idle-duration=5s", "--batch-max-duration=2s"},
			want: []string{"batch durations: max 2s is shorter than idle 5s"}},
		{name: "should reject a poll back-off below the poll interval", env: with(inCluster(), "SYNC_IDLE_INTERVAL", "5s"),
			want: []string{"sync idle interval: 5s is shorter than the 15s poll interval"}},
		{name: "should need the pod's name and namespace for leader election", env: with(inCluster(), "POD_NAME", ""),
			want: []string{"leader election: needs the namespace and pod name"}},
		{name: "should reject an unknown log level", env: with(inCluster(), "LOG_LEVEL", "loud"), want: []string{`log level "loud"`}},
		{name: "should reject an unknown flag", env: inCluster(), args: []string{"--batch-window=1s"}, want: []string{"flags: flag provided but not defined"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(tt.args, getenv(tt.env))
			if err == nil {
				t.Fatal("loadConfig() = nil error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("loadConfig() error %q lacks %q", err, w)
				}
			}
		})
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}
