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
	"slices"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodewright/nodewright/forwarder/internal/batcher"
	"github.com/nodewright/nodewright/forwarder/internal/events"
	"github.com/nodewright/nodewright/forwarder/internal/forward"
	"github.com/nodewright/nodewright/forwarder/internal/intake"
	"github.com/nodewright/nodewright/forwarder/internal/leader"
	"github.com/nodewright/nodewright/forwarder/internal/metrics"
	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

var (
	nodePoolsGVR   = schema.GroupVersionResource{Group: v1.Group, Version: "v1", Resource: "nodepools"}
	nodeClassesGVR = schema.GroupVersionResource{Group: v1.AWSGroup, Version: "v1", Resource: "ec2nodeclasses"}
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		slog.Error("nodewright-forwarder", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := loadConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))

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

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, time.Now)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	client, err := intake.New(intake.Options{
		Endpoint: cfg.Endpoint, Region: cfg.Region, Credentials: awsCfg.Credentials, OnRetry: m.OnRetry,
	})
	if err != nil {
		return err
	}

	// Informers run on every replica so a new leader starts with warm
	// caches. managedFields are dropped to save memory.
	strip := func(obj any) (any, error) {
		if o, ok := obj.(metav1.Object); ok {
			o.SetManagedFields(nil)
		}
		return obj, nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(strip))
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metav1.NamespaceAll, nil)
	pods, nodes := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	pdbs, dss := factory.Policy().V1().PodDisruptionBudgets(), factory.Apps().V1().DaemonSets()
	nodePools, nodeClasses := dynFactory.ForResource(nodePoolsGVR), dynFactory.ForResource(nodeClassesGVR)
	synced := []cache.InformerSynced{
		pods.Informer().HasSynced, nodes.Informer().HasSynced, pdbs.Informer().HasSynced,
		dss.Informer().HasSynced, nodePools.Informer().HasSynced, nodeClasses.Informer().HasSynced,
	}
	ready := func() error {
		for _, s := range synced {
			if !s() {
				return errors.New("informer caches not synced")
			}
		}
		return nil
	}

	fwd := forward.New(forward.Options{
		Cluster:   cfg.Cluster,
		PodWindow: batcher.Options{Idle: cfg.BatchIdle, Max: cfg.BatchMax},
		Logger:    log,
	}, forward.Sources{
		Pods: pods.Lister(), Nodes: nodes.Lister(), PDBs: pdbs.Lister(), DaemonSets: dss.Lister(),
		NodePools: nodePools.Lister(), NodeClasses: nodeClasses.Lister(),
		PodInformer: pods.Informer(), NodeInformer: nodes.Informer(),
		NodePoolInformer: nodePools.Informer(), NodeClassInformer: nodeClasses.Informer(),
	}, m.API(client), m.Emitter(events.New(kube.CoreV1(), time.Now, cfg.Identity)), m.Mirror(mirror.New(dyn)))
	lead := func(ctx context.Context) error {
		log.Info("leading: posting to the API", "identity", cfg.Identity)
		m.SetLeader(true)
		defer m.SetLeader(false)
		return fwd.Run(ctx)
	}

	g, ctx := errgroup.WithContext(ctx)
	for _, addr := range uniq(cfg.MetricsAddr, cfg.HealthAddr) {
		g.Go(func() error { return serve(ctx, addr, metrics.Handler(reg, ready)) })
	}
	g.Go(func() error {
		factory.Start(ctx.Done())
		dynFactory.Start(ctx.Done())
		log.Info("waiting for informer caches (NodePool and EC2NodeClass CRDs must be installed)")
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return ctx.Err()
		}
		log.Info("informer caches synced")
		if !cfg.LeaderElect {
			return lead(ctx)
		}
		lc := cfg.leaderConfig()
		lc.OnNewLeader = func(id string) { log.Info("leader elected", "leader", id) }
		return leader.Run(ctx, kube, lc, lead)
	})
	err = g.Wait()
	factory.Shutdown()
	dynFactory.Shutdown()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
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
