package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nodewright/nodewright/forwarder/internal/batcher"
	"github.com/nodewright/nodewright/forwarder/internal/forward"
	"github.com/nodewright/nodewright/forwarder/internal/leader"
)

// config is the forwarder's configuration, read once from flags and
// environment variables (a flag wins over its variable).
type config struct {
	Cluster     string        // --cluster-name, CLUSTER_NAME (required)
	Endpoint    string        // --api-endpoint, API_ENDPOINT (required): the intake API's base URL with its stage
	Region      string        // --region, AWS_REGION; else the SDK's region, else parsed from an execute-api endpoint
	Namespace   string        // --namespace, POD_NAMESPACE: the Lease's namespace
	Identity    string        // --pod-name, POD_NAME: this replica's name (lease holder, event reporter)
	LeaseName   string        // --lease-name, LEASE_NAME (nodewright-forwarder)
	LeaderElect bool          // --leader-elect, false when DISABLE_LEADER_ELECTION=true
	Deployment  string        // --deployment-name, DEPLOYMENT_NAME (nodewright-forwarder): the Deployment refusal Events are written on
	Kubeconfig  string        // --kubeconfig, KUBECONFIG; in-cluster config when empty
	MetricsAddr string        // --metrics-addr (":" + METRICS_PORT, :8080)
	HealthAddr  string        // --health-addr (":" + HEALTH_PROBE_PORT, :8081)
	BatchIdle   time.Duration // --batch-idle-duration, BATCH_IDLE_DURATION (1s)
	BatchMax    time.Duration // --batch-max-duration, BATCH_MAX_DURATION (10s)
	SyncIdle    time.Duration // --sync-idle-interval, SYNC_IDLE_INTERVAL (60s): forward.Options.SyncIdleInterval
	KubeQPS     float64       // --kube-client-qps, KUBE_CLIENT_QPS (200)
	KubeBurst   int           // --kube-client-burst, KUBE_CLIENT_BURST (300)
	LogLevel    slog.Level    // --log-level, LOG_LEVEL (info)
}

// loadConfig parses args (without the program name) over defaults taken
// from getenv. It returns every problem found, one per line.
func loadConfig(args []string, getenv func(string) string) (config, error) {
	var errs []error
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	envDuration := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not a duration", name, v))
			return def
		}
		return d
	}
	envInt := func(name string, def int) int {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not an integer", name, v))
			return def
		}
		return n
	}
	envFloat := func(name string, def float64) float64 {
		v := getenv(name)
		if v == "" {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not a number", name, v))
			return def
		}
		return f
	}

	var c config
	var level string
	fs := flag.NewFlagSet("nodewright-forwarder", flag.ContinueOnError)
	fs.StringVar(&c.Cluster, "cluster-name", env("CLUSTER_NAME", ""), "EKS cluster name (required)")
	fs.StringVar(&c.Endpoint, "api-endpoint", env("API_ENDPOINT", ""), "intake API base URL including the stage (required)")
	fs.StringVar(&c.Region, "region", env("AWS_REGION", ""), "AWS region of the intake API")
	fs.StringVar(&c.Namespace, "namespace", env("POD_NAMESPACE", ""), "namespace of the leader Lease")
	fs.StringVar(&c.Identity, "pod-name", env("POD_NAME", ""), "this replica's pod name")
	fs.StringVar(&c.LeaseName, "lease-name", env("LEASE_NAME", "nodewright-forwarder"), "name of the leader Lease")
	fs.StringVar(&c.Deployment, "deployment-name", env("DEPLOYMENT_NAME", "nodewright-forwarder"), "the forwarder's Deployment, for Events when the API refuses a request")
	fs.BoolVar(&c.LeaderElect, "leader-elect", getenv("DISABLE_LEADER_ELECTION") != "true", "elect one leader among replicas")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", ":"+env("METRICS_PORT", "8080"), "address serving /metrics")
	fs.StringVar(&c.HealthAddr, "health-addr", ":"+env("HEALTH_PROBE_PORT", "8081"), "address serving /healthz and /readyz")
	fs.DurationVar(&c.BatchIdle, "batch-idle-duration", envDuration("BATCH_IDLE_DURATION", batcher.DefaultIdle), "close a pod batch after this long without new pods")
	fs.DurationVar(&c.BatchMax, "batch-max-duration", envDuration("BATCH_MAX_DURATION", batcher.DefaultMax), "close a pod batch this long after it opened")
	fs.DurationVar(&c.SyncIdle, "sync-idle-interval", envDuration("SYNC_IDLE_INTERVAL", forward.DefaultSyncIdleInterval),
		"longest wait between polls of the API for NodeClaims, event records and EC2NodeClass status while nothing changes (at least 15s)")
	fs.Float64Var(&c.KubeQPS, "kube-client-qps", envFloat("KUBE_CLIENT_QPS", 200), "Kubernetes client QPS")
	fs.IntVar(&c.KubeBurst, "kube-client-burst", envInt("KUBE_CLIENT_BURST", 300), "Kubernetes client burst")
	fs.StringVar(&level, "log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error")
	var usage strings.Builder
	fs.SetOutput(&usage)
	if err := fs.Parse(args); err != nil {
		// usage holds the error and the flag list that flag printed.
		return config{}, fmt.Errorf("flags: %w\n%s", err, usage.String())
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := c.LogLevel.UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Errorf("log level %q: want debug, info, warn or error", level))
	}

	if c.Cluster == "" {
		errs = append(errs, errors.New("cluster name: required (--cluster-name or CLUSTER_NAME)"))
	}
	if c.Endpoint == "" {
		errs = append(errs, errors.New("api endpoint: required (--api-endpoint or API_ENDPOINT)"))
	} else if u, err := url.Parse(c.Endpoint); err != nil || u.Host == "" {
		errs = append(errs, fmt.Errorf("api endpoint %q: not an absolute URL", c.Endpoint))
	} else if c.Region == "" {
		c.Region = regionOf(u.Hostname())
	}
	if c.BatchIdle <= 0 || c.BatchMax <= 0 {
		errs = append(errs, fmt.Errorf("batch durations: must be positive, got idle %s and max %s", c.BatchIdle, c.BatchMax))
	} else if c.BatchMax < c.BatchIdle {
		errs = append(errs, fmt.Errorf("batch durations: max %s is shorter than idle %s", c.BatchMax, c.BatchIdle))
	}
	if c.SyncIdle < forward.DefaultSyncInterval {
		errs = append(errs, fmt.Errorf("sync idle interval: %s is shorter than the %s poll interval", c.SyncIdle, forward.DefaultSyncInterval))
	}
	if c.LeaderElect && (c.Namespace == "" || c.Identity == "") {
		errs = append(errs, errors.New("leader election: needs the namespace and pod name (POD_NAMESPACE and POD_NAME from the downward API)"))
	}
	if c.KubeQPS <= 0 || c.KubeBurst <= 0 {
		errs = append(errs, fmt.Errorf("kube client: qps %v and burst %d must be positive", c.KubeQPS, c.KubeBurst))
	}
	if err := errors.Join(errs...); err != nil {
		return config{}, err
	}
	return c, nil
}

// leaderConfig is the Lease this replica campaigns for.
func (c config) leaderConfig() leader.Config {
	return leader.Config{Namespace: c.Namespace, Name: c.LeaseName, Identity: c.Identity}
}

// regionOf returns the region of an API Gateway host
// (<id>.execute-api.<region>.amazonaws.com), or "" for other hosts.
func regionOf(host string) string {
	parts := strings.Split(host, ".")
	if len(parts) >= 4 && parts[1] == "execute-api" {
		return parts[2]
	}
	return ""
}
