package kwoknode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// Kwok's node annotation (local/controlplane.ManagedNodeAnnotation): kwok
// plays the kubelet of Nodes that carry it.
const (
	kwokAnnotation = "kwok.x-k8s.io/node"
	kwokValue      = "fake"
)

// Instances is what the bridge reads from the simulator (*ec2sim.Server).
type Instances interface {
	Instances() []ec2sim.Instance
}

// Options configure a Bridge.
type Options struct {
	// Sim lists the simulator's instances (required).
	Sim Instances
	// Kube creates and deletes Nodes (required).
	Kube kubernetes.Interface
	// Region is the simulator's region, for the region label and the
	// catalog (required).
	Region string
	// Interval is how often Run syncs; zero means 200ms.
	Interval time.Duration
	// Log receives one line per Node created or deleted; nil discards.
	Log *slog.Logger
}

// Bridge keeps one Node per running simulator instance. Safe for
// concurrent use.
type Bridge struct {
	opts Options

	mu sync.Mutex
	// created maps instance ID to Node name for every Node this bridge
	// created; a Node deleted by someone else (e.g. termination) is not
	// created again for the same instance.
	created map[string]string
	types   map[string]*catalog.InstanceType
}

// New returns a Bridge. It resolves the catalog once (an AL2023 node
// class) for capacities and overheads; errors name the missing option or
// the catalog failure.
func New(opts Options) (*Bridge, error) {
	if opts.Sim == nil || opts.Kube == nil || opts.Region == "" {
		return nil, errors.New("kwoknode options: Sim, Kube and Region are required")
	}
	if opts.Interval <= 0 {
		opts.Interval = 200 * time.Millisecond
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	nc := &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "kwoknode"}}
	nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "al2023@latest"}}
	its, _, err := catalog.Resolve(nc, catalog.Options{Region: opts.Region})
	if err != nil {
		return nil, fmt.Errorf("instance-type catalog: %w", err)
	}
	b := &Bridge{opts: opts, created: map[string]string{}, types: make(map[string]*catalog.InstanceType, len(its))}
	for _, it := range its {
		b.types[it.Name] = it
	}
	return b, nil
}

// Run syncs every Options.Interval until ctx ends; a failed sync is logged
// and retried on the next tick. It returns ctx's error.
func (b *Bridge) Run(ctx context.Context) error {
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		if err := b.Sync(ctx); err != nil && ctx.Err() == nil {
			b.opts.Log.Warn("node bridge sync failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sync creates a Node for every running instance that has none yet and
// deletes the Nodes of terminated (or vanished) instances. Errors of
// individual instances are joined.
func (b *Bridge) Sync(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	seen := map[string]bool{}
	for _, in := range b.opts.Sim.Instances() {
		seen[in.ID] = true
		switch in.State {
		case "running":
			if _, done := b.created[in.ID]; done {
				continue
			}
			node, err := b.NodeFor(in)
			if err != nil {
				errs = append(errs, fmt.Errorf("instance %s: %w", in.ID, err))
				continue
			}
			_, err = b.opts.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("create node of %s: %w", in.ID, err))
				continue
			}
			b.created[in.ID] = node.Name
			b.opts.Log.Info("node registered", "node", node.Name, "instance", in.ID, "type", in.InstanceType, "zone", in.Zone, "capacityType", in.CapacityType)
		case "shutting-down", "terminated":
			if err := b.deleteNode(ctx, in.ID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for id := range b.created {
		if !seen[id] {
			if err := b.deleteNode(ctx, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteNode deletes the Node created for instance id, if any; a Node
// already gone is not an error. The instance stays recorded so that its
// Node is not created again.
func (b *Bridge) deleteNode(ctx context.Context, id string) error {
	name, ok := b.created[id]
	if !ok || name == "" {
		return nil
	}
	err := b.opts.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	b.created[id] = ""
	b.opts.Log.Info("node removed", "node", name, "instance", id)
	return nil
}

// NodeFor returns the Node a kubelet on in would register: see the
// package doc. Errors: user data that does not parse, an instance type
// the catalog does not know.
func (b *Bridge) NodeFor(in ec2sim.Instance) (*corev1.Node, error) {
	launch, err := ParseUserData(in.UserData)
	if err != nil {
		return nil, fmt.Errorf("user data: %w", err)
	}
	it, ok := b.types[in.InstanceType]
	if !ok {
		return nil, fmt.Errorf("instance type %q: not in the catalog", in.InstanceType)
	}
	name := in.PrivateDNSName
	if name == "" {
		name = in.ID
	}
	arch, ok := amifamily.KubeArch(in.Architecture)
	if !ok {
		arch = "amd64"
	}
	osName := "linux"
	if in.Platform == "windows" {
		osName = "windows"
	}
	labels := map[string]string{}
	// Every catalog label of the type (instance-category, -family, -cpu,
	// ...) as Karpenter's registration syncs them from the NodeClaim.
	maps.Copy(labels, it.Labels)
	maps.Copy(labels, launch.Labels)
	maps.Copy(labels, map[string]string{
		corev1.LabelHostname:           name,
		corev1.LabelOSStable:           osName,
		corev1.LabelArchStable:         arch,
		corev1.LabelInstanceTypeStable: in.InstanceType,
		corev1.LabelTopologyZone:       in.Zone,
		corev1.LabelTopologyRegion:     b.opts.Region,
		"topology.k8s.aws/zone-id":     in.ZoneID,
		v1.LabelCapacityType:           in.CapacityType,
	})
	capacity := it.Capacity.DeepCopy()
	allocatable := it.Allocatable()
	if launch.MaxPods > 0 {
		pods := resource.MustParse(strconv.Itoa(int(launch.MaxPods)))
		capacity[corev1.ResourcePods] = pods
		allocatable[corev1.ResourcePods] = pods.DeepCopy()
	}
	taints := append([]corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}, launch.Taints...)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{kwokAnnotation: kwokValue},
		},
		Spec: corev1.NodeSpec{
			ProviderID: ProviderID(in),
			Taints:     taints,
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			NodeInfo:    corev1.NodeSystemInfo{Architecture: arch, OperatingSystem: osName, KubeletVersion: "v1.34.0-kwok"},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: in.PrivateIP},
				{Type: corev1.NodeInternalDNS, Address: in.PrivateDNSName},
				{Type: corev1.NodeHostName, Address: name},
			},
			// Ready=False until kwok's node stage reports it Ready; without
			// a Ready condition the node lifecycle controller would lift
			// the not-ready taint before anyone runs the node.
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionFalse,
				Reason: "KubeletNotReady", Message: "registered, not yet running",
			}},
		},
	}, nil
}

// ProviderID is the Node's spec.providerID for an instance:
// aws:///<zone>/<instance-id>, as the AWS cloud provider writes it.
func ProviderID(in ec2sim.Instance) string {
	return v1.ProviderID(in.Zone, in.ID)
}
