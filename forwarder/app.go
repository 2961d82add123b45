package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodewright/nodewright/forwarder/internal/batcher"
	"github.com/nodewright/nodewright/forwarder/internal/events"
	"github.com/nodewright/nodewright/forwarder/internal/forward"
	"github.com/nodewright/nodewright/forwarder/internal/leader"
	"github.com/nodewright/nodewright/forwarder/internal/metrics"
	"github.com/nodewright/nodewright/forwarder/internal/mirror"
	"github.com/nodewright/nodewright/forwarder/internal/status"
	"github.com/nodewright/nodewright/internal/intake"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

var (
	nodePoolsGVR   = schema.GroupVersionResource{Group: v1.Group, Version: "v1", Resource: "nodepools"}
	nodeClassesGVR = schema.GroupVersionResource{Group: v1.AWSGroup, Version: "v1", Resource: "ec2nodeclasses"}
)

// app is the wired forwarder: informers, the leader-only posting loop and
// the HTTP handler for metrics and probes.
type app struct {
	cfg       config
	log       *slog.Logger
	kube      kubernetes.Interface
	factories []interface {
		Start(stopCh <-chan struct{})
		Shutdown()
	}
	synced  []cache.InformerSynced
	handler http.Handler
	lead    func(ctx context.Context) error
}

// activePods selects the pods the forwarder reads: terminal pods neither
// need capacity nor hold any.
const activePods = "status.phase!=Succeeded,status.phase!=Failed"

// newTrim returns the informers' transform. It drops from informer objects
// what the forwarder never reads, to keep the caches small: managedFields
// everywhere, node image lists, and all of a pod but its summary
// (v1.PodSummary) and the status fields the provisionable rule reads; and
// it lets the pods of one workload share what they have in common
// (podParts).
func newTrim() cache.TransformFunc {
	parts := newPodParts()
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *corev1.Pod:
			t := trimPod(o)
			parts.share(t)
			return t, nil
		case *corev1.Node:
			o.ManagedFields = nil
			o.Status.Images = nil
		case metav1.Object:
			o.SetManagedFields(nil)
		}
		return obj, nil
	}
}

// volumeListers is report.VolumeSource over the informer caches.
type volumeListers struct {
	claims  corelisters.PersistentVolumeClaimLister
	pvs     corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
}

func (v volumeListers) Claim(namespace, name string) (*corev1.PersistentVolumeClaim, bool) {
	c, err := v.claims.PersistentVolumeClaims(namespace).Get(name)
	return c, err == nil
}

func (v volumeListers) PersistentVolume(name string) (*corev1.PersistentVolume, bool) {
	pv, err := v.pvs.Get(name)
	return pv, err == nil
}

func (v volumeListers) StorageClass(name string) (*storagev1.StorageClass, bool) {
	sc, err := v.classes.Get(name)
	return sc, err == nil
}

func trimPod(p *corev1.Pod) *corev1.Pod {
	t := v1.SummarizePod(p).Pod()
	t.Spec.Volumes = v1.ClaimVolumes(p) // pod batches (volume topology) and snapshots (attach limits) carry them
	t.ResourceVersion = p.ResourceVersion
	t.Generation = p.Generation
	t.Status.Phase = p.Status.Phase
	t.Status.NominatedNodeName = p.Status.NominatedNodeName
	for _, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodScheduled:
			t.Status.Conditions = append(t.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
		case corev1.PodReady: // karpenter_pods_startup_duration_seconds
			t.Status.Conditions = append(t.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		}
	}
	// Limits for karpenter_nodes_total_{pod,daemon}_limits.
	for i := range t.Spec.Containers {
		for _, c := range p.Spec.Containers {
			if c.Name == t.Spec.Containers[i].Name && len(c.Resources.Limits) > 0 {
				t.Spec.Containers[i].Resources.Limits = c.Resources.Limits.DeepCopy()
			}
		}
	}
	return t
}

// newApp wires the forwarder from its clients. creds signs requests to the
// intake API.
func newApp(cfg config, log *slog.Logger, kube kubernetes.Interface, dyn dynamic.Interface, creds aws.CredentialsProvider) (*app, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	m, err := metrics.New(reg, time.Now)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	client, err := intake.New(intake.Options{Endpoint: cfg.Endpoint, Region: cfg.Region, Credentials: creds, OnRetry: m.OnRetry,
		HTTPClient: refusalReporting(cfg, log, kube)})
	if err != nil {
		return nil, err
	}

	// Informers run on every replica so that a new leader starts with warm
	// caches. They keep only what the forwarder reads (see newTrim), and the pod
	// informer skips terminal pods.
	trim := newTrim()
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trim))
	podFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trim),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = activePods }))
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metav1.NamespaceAll, nil)
	pods, nodes := podFactory.Core().V1().Pods(), factory.Core().V1().Nodes()
	pdbs, dss := factory.Policy().V1().PodDisruptionBudgets(), factory.Apps().V1().DaemonSets()
	claims, pvs, classes := factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().PersistentVolumes(), factory.Storage().V1().StorageClasses()
	csiNodes := factory.Storage().V1().CSINodes()
	nodePools, nodeClasses := dynFactory.ForResource(nodePoolsGVR), dynFactory.ForResource(nodeClassesGVR)
	nodeClaims := dynFactory.ForResource(mirror.GVR)
	a := &app{
		cfg: cfg, log: log, kube: kube, factories: []interface {
			Start(stopCh <-chan struct{})
			Shutdown()
		}{factory, podFactory, dynFactory},
		synced: []cache.InformerSynced{
			pods.Informer().HasSynced, nodes.Informer().HasSynced, pdbs.Informer().HasSynced,
			dss.Informer().HasSynced, nodePools.Informer().HasSynced, nodeClasses.Informer().HasSynced,
			nodeClaims.Informer().HasSynced,
			claims.Informer().HasSynced, pvs.Informer().HasSynced, classes.Informer().HasSynced, csiNodes.Informer().HasSynced,
		},
	}
	karpenter := metrics.NewKarpenter(client.Metrics, metrics.Cluster{
		Nodes: func() ([]*corev1.Node, error) { return nodes.Lister().List(labels.Everything()) },
		Pods:  func() ([]*corev1.Pod, error) { return pods.Lister().List(labels.Everything()) },
		Limits: func() (map[string]corev1.ResourceList, error) {
			return nodePoolLimits(nodePools.Lister())
		},
		NodePools: func() ([]string, error) { return nodePoolNames(nodePools) },
	}, version, commit, 10*time.Second, time.Now)
	if err := reg.Register(karpenter); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	a.handler = metrics.Handler(reg, a.ready)

	// NodePool and EC2NodeClass status, written by the leader after each
	// poll of the API.
	statusWriter, err := status.New(status.Options{Dynamic: dyn, NodePools: nodePools.Lister(), NodeClasses: nodeClasses.Lister(),
		Nodes: nodes.Lister(), Now: time.Now})
	if err != nil {
		return nil, err
	}
	fwd := forward.New(forward.Options{
		Cluster:          cfg.Cluster,
		PodWindow:        batcher.Options{Idle: cfg.BatchIdle, Max: cfg.BatchMax},
		SyncIdleInterval: cfg.SyncIdle,
		Status:           statusWriter,
		Logger:           log,
	}, forward.Sources{
		Pods: pods.Lister(), Nodes: nodes.Lister(), PDBs: pdbs.Lister(), DaemonSets: dss.Lister(),
		NodePools: nodePools.Lister(), NodeClasses: nodeClasses.Lister(),
		PodInformer: pods.Informer(), NodeInformer: nodes.Informer(),
		NodePoolInformer: nodePools.Informer(), NodeClassInformer: nodeClasses.Informer(),
		PDBInformer: pdbs.Informer(), DaemonSetInformer: dss.Informer(),
		Volumes:  volumeListers{claims: claims.Lister(), pvs: pvs.Lister(), classes: classes.Lister()},
		CSINodes: csiNodes.Lister(), CSINodeInformer: csiNodes.Informer(),
		NodeClaims: nodeClaims.Lister(), NodeClaimInformer: nodeClaims.Informer(), Leases: leases{kube},
	}, m.API(client), m.Emitter(events.New(kube.CoreV1(), time.Now, cfg.Identity)), m.Mirror(mirror.New(dyn)),
		m.Relay(events.NewRelay(kube.CoreV1(), clusterObjects{nodes: nodes.Lister(), dyn: dyn, pods: pods.Lister(), nodePools: nodePools.Lister()}, time.Now, cfg.Identity)))
	a.lead = func(ctx context.Context) error {
		log.Info("leading: posting to the API", "identity", cfg.Identity)
		m.SetLeader(true)
		defer m.SetLeader(false)
		return fwd.Run(ctx)
	}
	return a, nil
}

// leases lists Leases by name in every namespace through the
// coordination/v1 client.
type leases struct{ kube kubernetes.Interface }

func (l leases) Leases(ctx context.Context, name string) ([]coordinationv1.Lease, error) {
	list, err := l.kube.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, fmt.Errorf("list leases %s: %w", name, err)
	}
	// A server (or a fake) that ignores the field selector must not make
	// another Lease, the forwarder's own among them, count as Karpenter's.
	return slices.DeleteFunc(list.Items, func(l coordinationv1.Lease) bool { return l.Name != name }), nil
}

// clusterObjects finds the UIDs of the Nodes, NodeClaims, Pods and
// NodePools that event records are about (events.Objects): Nodes, Pods
// (active ones) and NodePools in the informer caches, NodeClaims by a list
// filtered to the name (the forwarder may list NodeClaims, not get them).
type clusterObjects struct {
	nodes     corelisters.NodeLister
	dyn       dynamic.Interface
	pods      corelisters.PodLister
	nodePools cache.GenericLister
}

func (o clusterObjects) UID(ctx context.Context, kind, name string) (types.UID, error) {
	switch kind {
	case events.KindNode:
		n, err := o.nodes.Get(name)
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("node %s: %w", name, err)
		}
		return n.UID, nil
	case events.KindNodeClaim:
		list, err := o.dyn.Resource(mirror.GVR).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			return "", fmt.Errorf("nodeclaim %s: %w", name, err)
		}
		for _, c := range list.Items {
			if c.GetName() == name {
				return c.GetUID(), nil
			}
		}
		return "", nil
	case events.KindPod:
		ns, podName, _ := strings.Cut(name, "/")
		if o.pods == nil {
			return "", nil
		}
		p, err := o.pods.Pods(ns).Get(podName)
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("pod %s: %w", name, err)
		}
		return p.UID, nil
	case events.KindNodePool:
		if o.nodePools == nil {
			return "", nil
		}
		obj, err := o.nodePools.Get(name)
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("nodepool %s: %w", name, err)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return "", fmt.Errorf("nodepool %s: %w", name, err)
		}
		return m.GetUID(), nil
	}
	return "", fmt.Errorf("kind %q: not a Node, NodeClaim, Pod or NodePool", kind)
}

// ready reports whether every informer cache has synced (/readyz).
func (a *app) ready() error {
	for _, s := range a.synced {
		if !s() {
			return errors.New("informer caches not synced")
		}
	}
	return nil
}

// run starts the informers, waits for their caches, then campaigns for the
// lease (or leads at once without leader election) until ctx is done. It
// returns nil after a shutdown through ctx, and leader.ErrLeadershipLost
// when the lease is lost.
func (a *app) run(ctx context.Context) error {
	for _, f := range a.factories {
		defer f.Shutdown()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // Shutdown waits for the informers, which stop on ctx.
	for _, f := range a.factories {
		f.Start(ctx.Done())
	}
	a.log.Info("waiting for informer caches (the NodePool and EC2NodeClass CRDs must be installed)")
	if !cache.WaitForCacheSync(ctx.Done(), a.synced...) {
		return nil
	}
	a.log.Info("informer caches synced")
	var err error
	if a.cfg.LeaderElect {
		lc := a.cfg.leaderConfig()
		lc.OnNewLeader = func(id string) { a.log.Info("leader elected", "leader", id) }
		err = leader.Run(ctx, a.kube, lc, a.lead)
	} else {
		err = a.lead(ctx)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// nodePoolLimits reads each cached NodePool's spec.limits (resource name ->
// quantity); a NodePool without limits or with one that does not parse is
// left out, as the NodePool validation refuses it.
// nodePoolNames lists the cached NodePools' names. Before the cache's
// first list it errors: the cache is empty then, not the cluster, and the
// metrics collector serves every stored series on an error rather than
// none (a restarted replica's first scrape can precede its sync).
func nodePoolNames(inf informers.GenericInformer) ([]string, error) {
	if !inf.Informer().HasSynced() {
		return nil, errors.New("nodepools: cache not synced")
	}
	objs, err := inf.Lister().List(labels.Everything())
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok {
			names = append(names, m.GetName())
		}
	}
	return names, err
}

func nodePoolLimits(l cache.GenericLister) (map[string]corev1.ResourceList, error) {
	objs, err := l.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.ResourceList{}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		raw, found, _ := unstructured.NestedMap(u.Object, "spec", "limits")
		if !found {
			continue
		}
		list := corev1.ResourceList{}
		for k, v := range raw {
			q, err := resource.ParseQuantity(fmt.Sprint(v))
			if err != nil {
				continue
			}
			list[corev1.ResourceName(k)] = q
		}
		out[u.GetName()] = list
	}
	return out, nil
}
