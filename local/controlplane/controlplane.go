package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Component names: the binaries' file names in Options.BinDir, the names in
// the pid file and the log files' base names.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kwok              = "kwok"
)

// KwokStagesFile is the file in Options.BinDir holding kwok's Stage
// configuration, written by `make controlplane`.
const KwokStagesFile = "kwok-stages.yaml"

// kwok manages (acts as the kubelet of) exactly the Nodes that carry this
// annotation with this value: a Node created without it stays NotReady.
// The key is the one kwok's own documentation and Karpenter's kwok provider
// use.
const (
	ManagedNodeAnnotation = "kwok.x-k8s.io/node"
	ManagedNodeValue      = "fake"
)

// ErrNotBuilt is returned (wrapped, with the missing files named) when
// Options.BinDir lacks a binary; `make controlplane` builds them.
var ErrNotBuilt = errors.New("control-plane binaries not built (run `make controlplane`)")

// Ports are the TCP ports the components listen on, all on 127.0.0.1. A
// zero field is replaced by a free port.
type Ports struct {
	EtcdClient, EtcdPeer int
	APIServer            int // HTTPS
	ControllerManager    int // HTTPS, /healthz
	Scheduler            int // HTTPS, /healthz
	Kwok                 int // HTTP, /healthz
}

// Options configure Start.
type Options struct {
	// Dir is the state directory (required; made absolute). See the
	// package doc for its layout and for how a leftover Dir is handled.
	Dir string
	// BinDir holds the binaries and KwokStagesFile (required; made
	// absolute), normally .cache/bin at the repository root.
	BinDir string
	// Ports fixes listening ports; zero fields are picked free.
	Ports Ports
	// Detach lets the processes outlive the caller (`nodewright local up
	// --detach`); stop them later with StopDir. Without it, on Linux, the
	// kernel kills each process if the caller dies.
	Detach bool
	// ReadyTimeout bounds the wait for each component to become ready;
	// zero means one minute.
	ReadyTimeout time.Duration
}

// Timing is when one readiness milestone was reached, counted from the
// call to Start.
type Timing struct {
	Component string
	Ready     time.Duration
}

// Cluster is a running control plane. Its methods are safe for concurrent
// use.
type Cluster struct {
	// Dir is the absolute state directory.
	Dir string
	// Kubeconfig is the path of the admin kubeconfig (user in group
	// system:masters, bearer token, CA data embedded).
	Kubeconfig string
	// Server is the API server URL, https://127.0.0.1:<port>.
	Server string
	// Ports are the ports in use.
	Ports Ports
	// Timings lists readiness milestones in the order reached: each
	// component, then "default-serviceaccount" (the controller manager
	// has created the default ServiceAccount, so Pods can be created).
	Timings []Timing

	caPEM []byte
	token string
	procs []*process // start order

	stopOnce sync.Once
	stopErr  error
}

// Start builds the state directory, starts etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok in that order, and
// returns once each reports ready and the default ServiceAccount exists.
// ctx bounds the start only; the processes run until Stop (or StopDir).
// On error every process started so far is stopped and Dir is kept for its
// logs; the error names the component, and includes its last log lines.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	begin := time.Now()
	if opts.Dir == "" || opts.BinDir == "" {
		return nil, errors.New("controlplane options: Dir and BinDir are required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	binDir, err := filepath.Abs(opts.BinDir)
	if err != nil {
		return nil, fmt.Errorf("bin dir: %w", err)
	}
	if err := CheckBinaries(binDir); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = time.Minute
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	ports, err := fillPorts(opts.Ports)
	if err != nil {
		return nil, err
	}

	keys, err := writePKI(filepath.Join(dir, "pki"), begin)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(keys.CACert)
	if err != nil {
		return nil, fmt.Errorf("read ca: %w", err)
	}
	users := map[string]user{
		"admin":           {Name: "nodewright-admin", Groups: []string{"system:masters"}},
		ControllerManager: {Name: "system:kube-controller-manager"},
		Scheduler:         {Name: "system:kube-scheduler"},
		Kwok:              {Name: "kwok-controller", Groups: []string{"system:masters"}},
	}
	var tokens []user
	for _, k := range []string{"admin", ControllerManager, Scheduler, Kwok} {
		u := users[k]
		if u.Token, err = newToken(); err != nil {
			return nil, err
		}
		users[k] = u
		tokens = append(tokens, u)
	}
	tokenPath := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenPath, tokenFile(tokens), 0o600); err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}

	c := &Cluster{
		Dir:        dir,
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		Server:     loopbackURL("https", ports.APIServer),
		Ports:      ports,
		caPEM:      caPEM,
		token:      users["admin"].Token,
	}
	kubeconfigs := map[string]string{"admin": c.Kubeconfig}
	for _, k := range []string{ControllerManager, Scheduler, Kwok} {
		kubeconfigs[k] = filepath.Join(dir, "kubeconfigs", k+".kubeconfig")
	}
	for k, path := range kubeconfigs {
		if err := writeKubeconfig(path, c.Server, caPEM, users[k]); err != nil {
			return nil, err
		}
	}

	started := false
	defer func() {
		if !started {
			c.stopProcesses()
		}
	}()
	checker, err := newChecker(caPEM, c.token)
	if err != nil {
		return nil, err
	}
	run := func(name string, args []string) (*process, error) {
		p, err := startProcess(dir, name, filepath.Join(binDir, name), args, opts.Detach)
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, p)
		return p, nil
	}
	ready := func(p *process, healthURL string) error {
		if err := waitReady(ctx, p, opts.ReadyTimeout, func(ctx context.Context) error { return checker.get(ctx, healthURL) }); err != nil {
			return err
		}
		c.Timings = append(c.Timings, Timing{Component: p.name, Ready: time.Since(begin)})
		return nil
	}
	etcd, err := run(Etcd, etcdArgs(dir, ports))
	if err != nil {
		return nil, err
	}
	if err := ready(etcd, loopbackURL("http", ports.EtcdClient)+"/health"); err != nil {
		return nil, err
	}
	apiserver, err := run(APIServer, apiServerArgs(dir, ports, keys, tokenPath))
	if err != nil {
		return nil, err
	}
	if err := ready(apiserver, c.Server+"/readyz"); err != nil {
		return nil, err
	}

	kcm, err := run(ControllerManager, controllerManagerArgs(kubeconfigs[ControllerManager], ports, keys))
	if err != nil {
		return nil, err
	}
	sched, err := run(Scheduler, schedulerArgs(kubeconfigs[Scheduler], ports, keys))
	if err != nil {
		return nil, err
	}
	kwok, err := run(Kwok, kwokArgs(kubeconfigs[Kwok], filepath.Join(binDir, KwokStagesFile), ports))
	if err != nil {
		return nil, err
	}
	for _, w := range []struct {
		p   *process
		url string
	}{
		{kcm, loopbackURL("https", ports.ControllerManager) + "/healthz"},
		{sched, loopbackURL("https", ports.Scheduler) + "/healthz"},
		{kwok, loopbackURL("http", ports.Kwok) + "/healthz"},
	} {
		if err := ready(w.p, w.url); err != nil {
			return nil, err
		}
	}
	// The ServiceAccount admission plugin rejects Pods until the
	// controller manager has made the namespace's default ServiceAccount.
	saURL := c.Server + "/api/v1/namespaces/default/serviceaccounts/default"
	if err := waitReady(ctx, kcm, opts.ReadyTimeout, func(ctx context.Context) error { return checker.get(ctx, saURL) }); err != nil {
		return nil, fmt.Errorf("default serviceaccount: %w", err)
	}
	c.Timings = append(c.Timings, Timing{Component: "default-serviceaccount", Ready: time.Since(begin)})
	started = true
	return c, nil
}

// CheckBinaries returns an error wrapping ErrNotBuilt that names every
// missing file of binDir, or nil when all are there.
func CheckBinaries(binDir string) error {
	var missing []string
	for _, f := range []string{Etcd, APIServer, ControllerManager, Scheduler, Kwok, KwokStagesFile} {
		if _, err := os.Stat(filepath.Join(binDir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s missing from %s", ErrNotBuilt, strings.Join(missing, ", "), binDir)
	}
	return nil
}

// RESTConfig returns a new client-go configuration for the admin user
// (bearer token, the cluster CA), with QPS 200 and burst 400 since the
// server is local.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            c.Server,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), c.caPEM...)},
		QPS:             200,
		Burst:           400,
	}
}

// LogPath returns the path of a component's log file (stdout and stderr).
func (c *Cluster) LogPath(component string) string {
	return filepath.Join(c.Dir, "logs", component+".log")
}

// LogTail returns up to the last n lines of a component's log.
func (c *Cluster) LogTail(component string, n int) string {
	return tail(c.LogPath(component), n)
}

// PIDs returns the process ID of each started component.
func (c *Cluster) PIDs() map[string]int {
	out := make(map[string]int, len(c.procs))
	for _, p := range c.procs {
		out[p.name] = p.pid
	}
	return out
}

// Exited returns the components whose process has exited; a healthy
// cluster returns none.
func (c *Cluster) Exited() []string {
	var out []string
	for _, p := range c.procs {
		if p.exited() {
			out = append(out, p.name)
		}
	}
	return out
}

// Stop stops every process Start started, by process group (SIGTERM, then
// SIGKILL after a grace period; kwok, the scheduler and the controller
// manager first, then the API server, then etcd), and removes Dir.
// It is idempotent: later calls return the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopProcesses()
		if err := os.RemoveAll(c.Dir); err != nil {
			c.stopErr = fmt.Errorf("remove state dir: %w", err)
		}
	})
	return c.stopErr
}

// stopProcesses stops the started processes in reverse dependency order;
// components at the same level stop concurrently.
func (c *Cluster) stopProcesses() {
	levels := [][]string{{Kwok, Scheduler, ControllerManager}, {APIServer}, {Etcd}}
	for _, level := range levels {
		var wg sync.WaitGroup
		for _, p := range c.procs {
			for _, name := range level {
				if p.name == name {
					wg.Go(p.stop)
				}
			}
		}
		wg.Wait()
	}
}

// fillPorts replaces the zero fields of p with free ports.
func fillPorts(p Ports) (Ports, error) {
	fields := []*int{&p.EtcdClient, &p.EtcdPeer, &p.APIServer, &p.ControllerManager, &p.Scheduler, &p.Kwok}
	free, err := freePorts(len(fields))
	if err != nil {
		return Ports{}, err
	}
	for i, f := range fields {
		if *f == 0 {
			*f = free[i]
		}
	}
	return p, nil
}

// writeKubeconfig writes a kubeconfig for u against server.
func writeKubeconfig(path, server string, caPEM []byte, u user) error {
	const name = "nodewright-local"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[u.Name] = &clientcmdapi.AuthInfo{Token: u.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: u.Name}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", filepath.Base(path), err)
	}
	return nil
}

// checker polls HTTP(S) health endpoints, trusting only the cluster CA and
// sending the admin token (etcd's plain HTTP ignores it).
type checker struct {
	client *http.Client
	token  string
}

func newChecker(caPEM []byte, token string) (*checker, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("cluster ca: no certificate in PEM")
	}
	return &checker{
		client: &http.Client{
			Timeout:   2 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		},
		token: token,
	}, nil
}

// get returns nil when url answers 200.
func (h *checker) get(ctx context.Context, target string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", target, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// waitReady polls check every 100 ms until it succeeds, the process exits,
// timeout passes or ctx ends. Errors name the component and carry the last
// 20 lines of its log.
func waitReady(ctx context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			//nolint:errorlint // p.err is nil on a clean exit (%w would print %!w(<nil>)); the early exit is the failure
			return fmt.Errorf("%s exited (%v) before it was ready; %s:\n%s", p.name, p.err, p.log, tail(p.log, 20))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (%w): %w; %s:\n%s", p.name, last, ctx.Err(), p.log, tail(p.log, 20))
		case <-tick.C:
		}
	}
}
