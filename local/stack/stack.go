// Package stack runs the whole of nodewright on one machine, on a real
// Kubernetes control plane, with no AWS account: the local stack behind
// `nodewright local up`, `nodewright demo` and the end-to-end tests in
// integration/stack.
//
//	kube-apiserver (+ etcd, scheduler, controller manager)   local/controlplane, child processes
//	kwok (fake kubelets for Nodes annotated kwok.x-k8s.io/node=fake)
//	nodewright-forwarder                                      the real binary (go build ./forwarder), child process
//	  --SigV4 HTTP--> intake front (API Gateway proxy events; IAM auth NOT checked locally)
//	      -> intake handler -> DynamoDB (kumo, in-process) + provisioning queue (kumo SQS FIFO)
//	      -> queue pump (the SQS event source mapping: long-poll, invoke, delete acknowledged)
//	      -> provisioner handler -> ec2sim (EC2 + SSM over HTTP) + DynamoDB + kube-apiserver
//	gc ticker (EventBridge Scheduler stand-in) -> gc handler
//	node bridge (local/kwoknode): running simulator instances -> kwok-managed Nodes
//	volume provisioner (volumes.go): the stand-in CSI driver VolumeProvisioner (EBS-style zonal PersistentVolumes)
//
// The AWS stand-ins and the Lambda handlers run inside the process that
// calls Up; the control plane and the forwarder are child processes, each
// in its own process group, recorded by PID. Prices are the embedded
// offline on-demand table (shared/catalog), Spot at on-demand × 0.35.
//
// Disruption (functions/disruption on a ticker, statemachines/
// disruption.asl.json on aws-local-stepfunctions, functions/disrupttask
// behind local/lambdaserver) is wired with Options.Disruption (`nodewright
// local up` and `nodewright demo` set it) when the runner is installed
// (see Stack.Wired). Interruption handling and the instance-status poll
// come with it, on the same Step Functions runner:
//
//	ec2sim EventBridge events (state changes, Spot interruption warnings,
//	  rebalance recommendations; Stack.InterruptNode, RecommendRebalance)
//	  -> the interruption rules' detail types -> interruption queue (kumo
//	     SQS standard) -> event source mapping -> interruption handler
//	  -> statemachines/interruption.asl.json -> disrupttask handler
//
// Stack.Wired says which features run.
//
// # State
//
// Everything lives under Options.Dir, which Down removes:
//
//	stack.json     Info: URLs, kubeconfig, PIDs (written once Up has succeeded)
//	cluster/       the control plane's directory (local/controlplane)
//	bin/           the forwarder binary, when Up built it
//	logs/          forwarder.log, functions.log (JSON lines of the handlers)
package stack

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/sivchari/kumo"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	gchandler "github.com/nodewright/nodewright/functions/gc/handler"
	intakehandler "github.com/nodewright/nodewright/functions/intake/handler"
	provisionerhandler "github.com/nodewright/nodewright/functions/provisioner/handler"
	replacehandler "github.com/nodewright/nodewright/functions/replace/handler"
	"github.com/nodewright/nodewright/local/controlplane"
	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/iamsim"
	"github.com/nodewright/nodewright/local/kwoknode"
	"github.com/nodewright/nodewright/local/lambdaserver"
	"github.com/nodewright/nodewright/local/meter"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/ec2data"
	"github.com/nodewright/nodewright/shared/aws/queue"
	"github.com/nodewright/nodewright/shared/kube"
)

// Defaults of Options.
const (
	DefaultClusterName = "my-cluster" // the seed manifests' discovery tag
	// SecondNodeRoleSuffix names the second allowed node role,
	// KarpenterNodeRole-<cluster><suffix> (DefaultNodeRoles).
	SecondNodeRoleSuffix     = "-second"
	DefaultRegion            = "ap-northeast-1"
	DefaultBootDelay         = 5 * time.Second
	DefaultKubernetesVersion = "1.34"
	DefaultGCInterval        = time.Minute
	// Local credentials the forwarder signs with; nothing checks them.
	accessKey = "AKIDLOCALSTACK"
	secretKey = "local-stack-secret"
	stage     = "/local"
)

// LocalSyncIdleInterval is the forwarder's longest poll interval on the
// local stack: 15 s, its poll interval, so no back-off, and an event
// record or a NodeClaim change reaches the cluster within one poll
// whatever came before it; the end-to-end tests wait on that.
const LocalSyncIdleInterval = 15 * time.Second

// Options configure Up.
type Options struct {
	// Dir is the state directory (required). Up refuses a Dir that holds
	// a running stack; Down removes it.
	Dir string
	// BinDir holds the control-plane binaries (`make controlplane`:
	// .cache/bin at the repository root). Empty means <RepoRoot>/.cache/bin.
	BinDir string
	// RepoRoot is the repository, for `go build ./forwarder`. Empty means
	// found by walking up from the working directory (FindRepoRoot).
	RepoRoot string
	// ForwarderBin is a prebuilt forwarder binary; empty means build it
	// into Dir/bin.
	ForwarderBin string
	// ClusterName, Region and Zones configure the simulator (zones empty:
	// ec2sim's defaults for the region).
	ClusterName string
	Region      string
	Zones       []string
	// NodeRoles are the IAM roles (names, path "/") the IAM stand-in holds
	// and the Lambdas allow an EC2NodeClass's spec.role to name
	// (NODE_ROLE_ARNS). Empty means DefaultNodeRoles.
	NodeRoles []string
	// SimWorld is the simulator's world (ec2sim.Options.World). Empty means
	// ec2sim.WorldUniform, every type in every zone at the embedded prices,
	// even in ap-northeast-1; ec2sim.WorldRealistic gives zones that lack
	// types and per-zone Spot prices that move.
	SimWorld ec2sim.World
	// KubernetesVersion is the minor version the provisioner asks AMIs
	// for ("1.34").
	KubernetesVersion string
	// BootDelay is how long a launched instance stays pending before its
	// Node registers; negative means 0, zero means DefaultBootDelay.
	BootDelay time.Duration
	// BatchIdle and BatchMax are the forwarder's batching windows (zero:
	// the forwarder's defaults, 1s and 10s).
	BatchIdle, BatchMax time.Duration
	// SyncIdleInterval is the forwarder's --sync-idle-interval, the
	// longest wait between its polls of the API while nothing changes
	// (zero: LocalSyncIdleInterval; negative: the forwarder's own
	// default, production's 60 s, which the cost scenario uses).
	SyncIdleInterval time.Duration
	// GCInterval is how often the gc handler runs (zero: one minute).
	GCInterval time.Duration
	// Clock is the handlers' clock (intake, provisioner, gc, disruption,
	// disrupttask, interruption; nil: time.Now), so that a test can move
	// the whole control plane ahead, past a capacity block's expiry for
	// one, without waiting; give the simulator the same clock (SimClock).
	// Kubernetes and the forwarder keep the wall clock.
	Clock func() time.Time
	// GCClock, when set, is the gc handler's clock instead of Clock, so that a test
	// can run garbage collection minutes ahead (Stack.RunGC) without
	// waiting for them.
	GCClock func() time.Time
	// ProvisionerClock, when set, is the provisioner's clock instead of
	// Clock: a test
	// moves it ahead to outlast a cache the provisioner keeps by its own
	// clock, such as the 30-minute authorization verdict of an
	// EC2NodeClass (provisioning.AuthCheckTTL), without waiting for it.
	ProvisionerClock func() time.Time
	// FeatureGates is the Lambdas' FEATURE_GATES, Karpenter's syntax
	// ("SpotToSpotConsolidation=true"); empty keeps Karpenter's defaults.
	FeatureGates string
	// SimClock is the simulator's clock (ec2sim.Options.Clock; nil: the
	// wall clock). A test that runs gc hours ahead to make the live EC2
	// data due gives the simulator the same clock, so that the
	// refresher's DescribeSpotPriceHistory StartTime is the simulator's
	// now, as it is AWS's now in production.
	SimClock ec2sim.Clock
	// BudgetLease is how long a disruption execution's budget lease and
	// claims last unrenewed, and so when the stale-lease sweep looks at
	// them (the disruption handler's BUDGET_LEASE; zero: the production
	// 15 minutes). A few seconds lets a test outlast a lease.
	BudgetLease time.Duration
	// ApplyLease is how long an intake request holds a message ID while
	// applying it, and so how long a message whose intake invocation
	// died mid-apply is answered 409 (the intake's APPLY_LEASE; zero: the
	// production 30 s). A few seconds keeps a KillLambda("intake") test
	// short.
	ApplyLease time.Duration
	// DisruptionPoll is how often the disruption handler runs (zero:
	// DisruptionPoll, Karpenter's 10 s; production's schedule is one
	// minute, which the cost scenario uses).
	DisruptionPoll time.Duration
	// Disruption wires consolidation, drift and expiry (the disruption
	// handler on a ticker, the disruption state machine on
	// aws-local-stepfunctions, the disrupttask handler behind
	// local/lambdaserver), and with it interruption handling; it needs
	// `make sfn-deps` (see Wired).
	Disruption bool
	// LogLevel is the level of the handlers' loggers (the Lambdas' LOG_LEVEL;
	// nil: debug, so a failed test's functions.log shows every step). The
	// deployed stack's default is info (infra/config.go defaultLogLevel),
	// which the cost scenario sets to meter the log bytes production
	// ingests. The stand-ins (queue pumps, the node bridge) always log at
	// debug; their lines are not billed (meter.Monthly).
	LogLevel slog.Leveler
	// Detach lets the control plane and the forwarder outlive this
	// process (`local up --detach` runs Up in a background process).
	Detach bool
	// Progress receives one human-readable line per step; nil discards.
	Progress io.Writer
}

// Info is what stack.json records about a running stack.
type Info struct {
	Dir         string         `json:"dir"`
	Kubeconfig  string         `json:"kubeconfig"`
	Server      string         `json:"server"`
	SimURL      string         `json:"simURL"`
	IntakeURL   string         `json:"intakeURL"`
	DynamoDBURL string         `json:"dynamodbURL"`
	Region      string         `json:"region"`
	Zones       []string       `json:"zones"`
	ClusterName string         `json:"clusterName"`
	PIDs        map[string]int `json:"pids"`
	// ServePID is the process running the in-process stand-ins.
	ServePID int `json:"servePID"`
	// Features is what the stack runs end to end (Stack.Wired).
	Features Wired `json:"wired"`
}

// Stack is a running local stack. Its methods are safe for concurrent use.
type Stack struct {
	Info
	// Cluster is the control plane.
	Cluster *controlplane.Cluster
	// Kube and Dynamic are admin clients of the API server.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Sim is the EC2/SSM simulator.
	Sim *ec2sim.Server
	// IAM is the IAM stand-in: its roles and the instance profiles the
	// Lambdas made; the simulator launches only with its profiles.
	IAM *iamsim.Server

	opts    Options
	restCfg *rest.Config
	// observe backs Observe (status.go): counts at 1,000 nodes, read
	// several times a second, must not cost more than the cluster's work.
	observe observeClients
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func()
	fwd     *child
	fwdMu   sync.Mutex
	fwdBin  string
	log     *slog.Logger
	// fnLog is the handlers' logger, at Options.LogLevel (functionLog).
	fnLog    *slog.Logger
	logFile  *os.File
	prices   *pricer
	stopOnce sync.Once
	stopErr  error
	// disruptionWired is set when the disruption state machine runs
	// (startDisruption).
	disruptionWired bool
	// store is the DynamoDB store the handlers share (events.go).
	store *ddbstore.Store
	// fwdMetrics is the running forwarder's metrics address (host:port);
	// guarded by fwdMu.
	fwdMetrics string
	// sfn is the local Step Functions of the disruption executions
	// (startDisruption; Executions).
	sfn *localSFN
	// replace serves POST /v1/replacements once disruption is wired.
	replace *replacehandler.Handler
	// runs records the disruption ticker's invocations (DisruptionRuns).
	runs disruptionRuns
	// interruptionWired is set when the interruption queue and handler
	// run (startInterruption).
	interruptionWired bool
	// enqueued records the interruption queue's events
	// (InterruptionEnqueued; interruption.go).
	enqueued *enqueueLog
	// faults are the faults queued for the provisioner (faults.go).
	faults faults
	// lambdas serves disrupttask (startDisruption; KillLambda).
	lambdas *lambdaserver.Server
	// gc is the garbage-collection handler the ticker runs (RunGC).
	gc *gchandler.Handler
	// meter counts what the stand-ins would bill (Metered; metering.go).
	meter *meter.Meter
}

// disruptionClients are the clients the disruption functions share with
// the others.
type disruptionClients struct {
	ddb  *dynamodb.Client
	ec2  *ec2.Client
	ssm  *ssm.Client
	iam  *iam.Client
	kube *kube.Client
}

// DefaultNodeRoles are the node roles of a stack for cluster when
// Options.NodeRoles is empty: KarpenterNodeRole-<cluster> (the seed
// manifests' spec.role) and a second one (SecondNodeRoleSuffix).
func DefaultNodeRoles(cluster string) []string {
	return []string{"KarpenterNodeRole-" + cluster, "KarpenterNodeRole-" + cluster + SecondNodeRoleSuffix}
}

// Wired lists which parts of the system the stack runs end to end.
type Wired struct {
	Provisioning, GarbageCollection  bool
	Consolidation, Drift, Interrupts bool
}

// Wired reports the features this stack runs: provisioning and garbage
// collection always; consolidation, drift and expiry, and interruption
// handling (the EventBridge events of the simulator through the
// interruption queue, and the instance-status poll) when
// Options.Disruption is set and the Step Functions runner is installed
// (`make sfn-deps`).
func (s *Stack) Wired() Wired {
	return Wired{Provisioning: true, GarbageCollection: true, Consolidation: s.disruptionWired, Drift: s.disruptionWired,
		Interrupts: s.interruptionWired}
}

// Up starts the stack (see the package doc) and returns once the forwarder
// runs. ctx bounds the start only. On error everything started so far is
// stopped; Dir is kept for its logs. Errors name the component.
func Up(ctx context.Context, opts Options) (_ *Stack, err error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	// The forwarder build reports its progress concurrently with the steps.
	progressOut := io.Discard
	if opts.Progress != nil {
		progressOut = &syncWriter{w: opts.Progress}
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(progressOut, format+"\n", args...)
	}
	if running(opts.Dir) {
		return nil, fmt.Errorf("state dir %s: a stack is already running there (nodewright local down --dir %s)", opts.Dir, opts.Dir)
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	s := &Stack{opts: opts}
	s.Dir, s.Region, s.ClusterName, s.ServePID = opts.Dir, opts.Region, opts.ClusterName, os.Getpid()
	defer func() {
		if err != nil {
			_ = s.stop(false)
		}
	}()
	if s.logFile, err = os.Create(filepath.Join(opts.Dir, "logs", "functions.log")); err != nil {
		return nil, fmt.Errorf("functions log: %w", err)
	}
	memory, err := meter.LambdaMemory(opts.RepoRoot)
	if err != nil {
		return nil, err
	}
	s.meter = meter.New(memory, time.Now())
	logOut := s.meter.LogWriter(&syncWriter{w: s.logFile})
	s.log = slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fnLevel := opts.LogLevel
	if fnLevel == nil {
		fnLevel = slog.LevelDebug
	}
	s.fnLog = slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: fnLevel}))

	// The forwarder build runs while the control plane starts.
	buildErr := make(chan error, 1)
	go func() {
		if opts.ForwarderBin != "" {
			s.fwdBin = opts.ForwarderBin
			buildErr <- nil
			return
		}
		s.fwdBin = filepath.Join(opts.Dir, "bin", "nodewright-forwarder")
		buildErr <- BuildForwarder(ctx, opts.RepoRoot, s.fwdBin, progressOut)
	}()

	progress("starting the control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok) on 127.0.0.1")
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: filepath.Join(opts.Dir, "cluster"), BinDir: opts.BinDir, Detach: opts.Detach})
	if err != nil {
		<-buildErr
		return nil, fmt.Errorf("control plane: %w", err)
	}
	s.Cluster, s.Kubeconfig, s.Server = cp, cp.Kubeconfig, cp.Server
	s.restCfg = cp.RESTConfig()
	s.restCfg.QPS, s.restCfg.Burst = 200, 400
	if s.Kube, err = kubernetes.NewForConfig(s.restCfg); err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	if s.Dynamic, err = dynamic.NewForConfig(s.restCfg); err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	if s.observe, err = newObserveClients(s.restCfg); err != nil {
		return nil, err
	}
	progress("applying the CRDs (NodePool, NodeClaim, EC2NodeClass)")
	if err := applyCRDs(ctx, s.Dynamic); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if err := s.startAWS(ctx, runCtx); err != nil {
		return nil, err
	}
	if err := <-buildErr; err != nil {
		return nil, err
	}
	progress("starting the forwarder (%s) against %s", s.fwdBin, s.IntakeURL)
	if err := s.StartForwarder(); err != nil {
		return nil, err
	}
	s.PIDs = cp.PIDs()
	s.PIDs["forwarder"] = s.ForwarderPID()
	s.Features = s.Wired()
	if err := writeInfo(opts.Dir, s.Info); err != nil {
		return nil, err
	}
	return s, nil
}

// functionLog is the logger of the handler of the Lambda name, at
// Options.LogLevel, its lines metered under name (meter.LogWriter).
func (s *Stack) functionLog(name string) *slog.Logger {
	return s.fnLog.With("function", name)
}

// fill applies defaults and checks the options.
func (o *Options) fill() error {
	if o.Dir == "" {
		return errors.New("stack options: Dir is required")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	o.Dir = dir
	if o.RepoRoot == "" {
		if o.RepoRoot, err = FindRepoRoot(); err != nil && (o.BinDir == "" || o.ForwarderBin == "") {
			return err
		}
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RepoRoot, ".cache", "bin")
	}
	o.ClusterName = cmpOr(o.ClusterName, DefaultClusterName)
	o.Region = cmpOr(o.Region, DefaultRegion)
	o.KubernetesVersion = cmpOr(o.KubernetesVersion, DefaultKubernetesVersion)
	switch {
	case o.BootDelay < 0:
		o.BootDelay = 0
	case o.BootDelay == 0:
		o.BootDelay = DefaultBootDelay
	}
	if o.GCInterval <= 0 {
		o.GCInterval = DefaultGCInterval
	}
	return nil
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// nodeRoles are opts.NodeRoles, or DefaultNodeRoles.
func nodeRoles(opts Options) []string {
	if len(opts.NodeRoles) > 0 {
		return opts.NodeRoles
	}
	return DefaultNodeRoles(opts.ClusterName)
}

// startAWS starts kumo, the simulator, the handlers, the intake front, the
// queue pump, the gc ticker and the node bridge. startCtx bounds setup
// calls; runCtx the loops.
func (s *Stack) startAWS(startCtx, runCtx context.Context) error {
	opts := s.opts
	creds := credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")

	sim, err := ec2sim.New(ec2sim.Options{
		Region: opts.Region, Zones: opts.Zones, ClusterName: opts.ClusterName,
		KubernetesVersions: []string{opts.KubernetesVersion}, BootDelay: opts.BootDelay,
		World: cmp.Or(opts.SimWorld, ec2sim.WorldUniform), Clock: opts.SimClock,
	})
	if err != nil {
		return fmt.Errorf("ec2 simulator: %w", err)
	}
	s.Sim = sim
	simURL, err := s.serve(sim)
	if err != nil {
		return fmt.Errorf("ec2 simulator: %w", err)
	}
	s.SimURL = simURL
	for _, sn := range sim.Network().Subnets {
		s.Zones = appendUnique(s.Zones, sn.Zone)
	}
	loop := &http.Client{Transport: ec2sim.LoopbackTransport(http.DefaultTransport.(*http.Transport).Clone())}
	ec2Client := ec2.New(ec2.Options{Region: opts.Region, BaseEndpoint: aws.String(simURL), Credentials: creds, HTTPClient: loop})
	ssmClient := ssm.New(ssm.Options{Region: opts.Region, BaseEndpoint: aws.String(simURL), Credentials: creds, HTTPClient: loop})
	// IAM: the roles the deployment allows, the instance profiles the
	// Lambdas make for them; EC2 launches only with profiles IAM holds.
	s.IAM = iamsim.New(account, nil)
	var roleARNs []string
	for _, name := range nodeRoles(opts) {
		r, err := s.IAM.CreateRole(name, "/")
		if err != nil {
			return fmt.Errorf("iam stand-in: %w", err)
		}
		roleARNs = append(roleARNs, r.ARN)
	}
	iamURL, err := s.serve(s.IAM)
	if err != nil {
		return fmt.Errorf("iam stand-in: %w", err)
	}
	sim.SetInstanceProfileLookup(s.IAM.ProfileARN)
	iamClient := iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(iamURL), Credentials: creds})
	// The Pricing API is served by the simulator too, signed for the
	// Pricing endpoint region as functions/gc/main.go signs it.
	pricingClient := pricing.New(pricing.Options{Region: ec2data.PricingRegion(opts.Region), BaseEndpoint: aws.String(simURL), Credentials: creds, HTTPClient: loop})
	if err := tagPrivateSubnets(startCtx, ec2Client, sim); err != nil {
		return err
	}
	if s.prices, err = newPricer(opts.Region); err != nil {
		return err
	}

	k := kumo.NewServer()
	s.closers = append(s.closers, k.Close)
	s.DynamoDBURL = k.URL
	// Every DynamoDB and SQS call of the handlers and the pumps is metered.
	awsCfg := aws.Config{Region: opts.Region, Credentials: creds,
		HTTPClient: &http.Client{Transport: &meter.Transport{Base: http.DefaultTransport.(*http.Transport).Clone(), Meter: s.meter}}}
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(k.URL) })
	sqsClient := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(k.URL) })
	// kumo keeps its state per process, not per server: names unique to
	// this stack keep two stacks of one process (tests) apart.
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%d", opts.Dir, os.Getpid(), time.Now().UnixNano())))
	suffix := hex.EncodeToString(sum[:6])
	table := "nodewright-" + opts.ClusterName + "-" + suffix
	if err := ddbstore.CreateTable(startCtx, ddb, table, time.Minute); err != nil {
		return fmt.Errorf("dynamodb table: %w", err)
	}
	q, err := sqsClient.CreateQueue(startCtx, &sqs.CreateQueueInput{
		QueueName:  aws.String("nodewright-provisioning-" + suffix + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "360"},
	})
	if err != nil {
		return fmt.Errorf("provisioning queue: %w", err)
	}
	queueURL := aws.ToString(q.QueueUrl)

	env := map[string]string{
		"CLUSTER_NAME": opts.ClusterName, "TABLE_NAME": table, "QUEUE_URL": queueURL, "AWS_REGION": opts.Region,
		"KUBERNETES_VERSION": opts.KubernetesVersion, "CLUSTER_ENDPOINT": s.Server,
		"CLUSTER_CA_DATA": base64.StdEncoding.EncodeToString(s.restCfg.CAData),
		"SERVICE_CIDR":    "10.96.0.0/12", "CLUSTER_DNS": "10.96.0.10",
		// The Price List API is served by the simulator's listener; SDK
		// clients built from the environment (lambdakit.AWSConfig) reach it
		// through this variable, as they would a regional endpoint.
		"AWS_ENDPOINT_URL_PRICING": simURL,
		"NODE_ROLE_ARNS":           strings.Join(roleARNs, ","),
	}
	if opts.FeatureGates != "" {
		env["FEATURE_GATES"] = opts.FeatureGates
	}
	if opts.BudgetLease > 0 {
		env["BUDGET_LEASE"] = opts.BudgetLease.String()
	}
	if opts.ApplyLease > 0 {
		env["APPLY_LEASE"] = opts.ApplyLease.String()
	}
	getenv := func(k string) string { return env[k] }
	store, err := ddbstore.New(ddb, table, opts.ClusterName)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	s.store = store
	sender, err := queue.New(sqsClient, queueURL)
	if err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	icfg, err := intakehandler.LoadConfig(getenv)
	if err != nil {
		return fmt.Errorf("intake config: %w", err)
	}
	intake, err := intakehandler.New(icfg, intakehandler.Deps{Store: killableStore{store.WithNodeClaimCache()}, Queue: killableSender{sender}, Log: s.functionLog("intake"), Now: s.now})
	if err != nil {
		return fmt.Errorf("intake: %w", err)
	}
	nodes, err := kube.New(s.restCfg)
	if err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	pcfg, err := provisionerhandler.LoadConfig(getenv)
	if err != nil {
		return fmt.Errorf("provisioner config: %w", err)
	}
	provClock := opts.ProvisionerClock
	if provClock == nil {
		provClock = s.now
	}
	prov, err := provisionerhandler.New(pcfg, provisionerhandler.Clients{DynamoDB: ddb, EC2: ec2Client, SSM: ssmClient, IAM: iamClient, Nodes: nodes},
		s.functionLog("provisioner"), provClock)
	if err != nil {
		return fmt.Errorf("provisioner: %w", err)
	}
	gcfg, err := gchandler.LoadConfig(getenv)
	if err != nil {
		return fmt.Errorf("gc config: %w", err)
	}
	gcClock := opts.GCClock
	if gcClock == nil {
		gcClock = s.now
	}
	gc, err := gchandler.New(gcfg, gchandler.Clients{DynamoDB: ddb, EC2: ec2Client, Pricing: pricingClient, IAM: iamClient, Nodes: nodes}, s.functionLog("gc"), gcClock)
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	s.gc = gc

	if opts.Disruption {
		if s.disruptionWired, err = s.startDisruption(runCtx, env, disruptionClients{ddb: ddb, ec2: ec2Client, ssm: ssmClient, iam: iamClient, kube: nodes}); err != nil {
			return err
		}
	}
	if s.disruptionWired {
		ic := interruptionClients{ddb: ddb, sqs: sqsClient, suffix: suffix}
		if s.interruptionWired, err = s.startInterruption(startCtx, runCtx, env, ic); err != nil {
			return err
		}
	}

	front, err := s.serve(&apiFront{intake: intake, replace: s.replace, faults: &s.faults, meter: s.meter})
	if err != nil {
		return fmt.Errorf("intake front: %w", err)
	}
	s.IntakeURL = front + stage

	bridge, err := kwoknode.New(kwoknode.Options{Sim: sim, Kube: s.Kube, Region: opts.Region, Log: s.log.With("component", "node-bridge")})
	if err != nil {
		return err
	}
	pump := &queuePump{sqs: sqsClient, url: queueURL, group: opts.ClusterName, handler: prov, log: s.log.With("component", "queue-pump"), faults: &s.faults, meter: s.meter}
	s.goLoop(runCtx, pump.run)
	s.goLoop(runCtx, bridge.Run)
	s.goLoop(runCtx, func(ctx context.Context) error { return runTicker(ctx, opts.GCInterval, gc, s.log, s.meter) })
	s.goLoop(runCtx, s.writeMeter)
	vp := volumeProvisioner{kube: s.Kube, interval: 250 * time.Millisecond, log: s.log.With("component", "volume-provisioner")}
	s.goLoop(runCtx, vp.run)
	return nil
}

// goLoop runs f until runCtx ends; Down waits for it.
func (s *Stack) goLoop(ctx context.Context, f func(context.Context) error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = f(ctx)
	}()
}

// serve serves h on a free loopback port and returns its base URL.
func (s *Stack) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.closers = append(s.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String(), nil
}

// Down stops everything Up started (the forwarder, the loops, the servers,
// the control plane, by process ID) and removes Dir. Safe to call twice.
func (s *Stack) Down() error { return s.stop(true) }

func (s *Stack) stop(removeDir bool) error {
	s.stopOnce.Do(func() {
		var errs []error
		s.fwdMu.Lock()
		if s.fwd != nil {
			s.fwd.stop(5 * time.Second)
		}
		s.fwdMu.Unlock()
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
		for i := len(s.closers) - 1; i >= 0; i-- {
			s.closers[i]()
		}
		if s.Cluster != nil {
			if err := s.Cluster.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop control plane: %w", err))
			}
		}
		if s.logFile != nil {
			_ = s.logFile.Close()
		}
		if removeDir && len(errs) == 0 {
			if err := os.RemoveAll(s.opts.Dir); err != nil {
				errs = append(errs, fmt.Errorf("remove state dir: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// now is the handlers' clock: Options.Clock, else the wall clock.
func (s *Stack) now() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock()
	}
	return time.Now()
}

// LogPath returns the path of a stack log: "forwarder" or "functions", or a
// control-plane component's.
func (s *Stack) LogPath(name string) string {
	switch name {
	case "forwarder", "functions":
		return filepath.Join(s.opts.Dir, "logs", name+".log")
	}
	return s.Cluster.LogPath(name)
}

func writeInfo(dir string, info Info) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("stack info: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stack.json"), data, 0o644); err != nil {
		return fmt.Errorf("stack info: %w", err)
	}
	return nil
}

// ReadInfo reads the stack.json of a running stack in dir.
func ReadInfo(dir string) (Info, error) {
	data, err := os.ReadFile(filepath.Join(dir, "stack.json"))
	if err != nil {
		return Info{}, fmt.Errorf("stack info: %w", err)
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return Info{}, fmt.Errorf("stack info %s: %w", dir, err)
	}
	return info, nil
}

func appendUnique(s []string, v string) []string {
	for _, have := range s {
		if have == v {
			return s
		}
	}
	return append(s, v)
}

// syncWriter serializes writes of concurrent handlers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
