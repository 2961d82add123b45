// Command nodewright-forwarder is nodewright's only in-cluster component. It
// watches Pods, Nodes, NodePools, EC2NodeClasses, DaemonSets and
// PodDisruptionBudgets and, on the replica holding the leader Lease, posts
// what the off-cluster API needs (pending-pod batches, config, node
// registrations, cluster snapshots), signed with the pod's AWS credentials;
// it turns the API's answers into pod Events and NodeClaim mirrors. It makes
// no decisions. Flags and variables: see config.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodewright/nodewright/internal/logfield"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		slog.New(logfield.NewJSONHandler(os.Stderr, slog.LevelError)).Error("nodewright-forwarder", logfield.Error, err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := loadConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "nodewright-forwarder %s (commit %s)\n%v\n", version, commit, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	log := slog.New(logfield.NewJSONHandler(os.Stdout, cfg.LogLevel))
	logfield.Start(log)
	limit, from, err := goMemoryLimit(os.Getenv, os.ReadFile)
	if err != nil {
		return fmt.Errorf("memory limit: %w", err)
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
		log.Info("Go memory limit set from the container's", "bytes", limit, "share", memoryLimitShare, "from", from)
	}

	restCfg, err := kubeConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}

	// Credentials come from the SDK's default chain: EKS Pod Identity
	// (AWS_CONTAINER_CREDENTIALS_FULL_URI) or IRSA (AWS_WEB_IDENTITY_TOKEN_FILE).
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = awsCfg.Region
	}

	a, err := newApp(cfg, log, kube, dyn, awsCfg.Credentials)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, addr := range uniq(cfg.MetricsAddr, cfg.HealthAddr) {
		g.Go(func() error { return serve(ctx, addr, a.handler) })
	}
	g.Go(func() error { return a.run(ctx) })
	return g.Wait()
}

func kubeConfig(cfg config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	rc.QPS, rc.Burst = float32(cfg.KubeQPS), cfg.KubeBurst
	rc.UserAgent = "nodewright-forwarder"
	return rc, nil
}

// serve runs an HTTP server on addr until ctx is done.
func serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	})
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	return nil
}

func uniq(addrs ...string) []string {
	var out []string
	for _, a := range addrs {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
