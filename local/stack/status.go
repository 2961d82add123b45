package stack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/local/ec2sim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// pricer prices instances from the embedded offline table (shared/catalog),
// Spot at on-demand × ec2sim.DefaultSpotPriceRatio, as the simulator does.
type pricer struct {
	onDemand map[string]float64
	source   string
}

func newPricer(region string) (*pricer, error) {
	nc := &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "prices"}}
	nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "al2023@latest"}}
	its, src, err := catalog.Resolve(nc, catalog.Options{Region: region})
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	p := &pricer{onDemand: map[string]float64{}, source: fmt.Sprintf("%+v", src)}
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.CapacityType == "on-demand" && o.Price > 0 {
				p.onDemand[it.Name] = o.Price
				break
			}
		}
	}
	return p, nil
}

func (p *pricer) price(in ec2sim.Instance) float64 {
	od := p.onDemand[in.InstanceType]
	if in.CapacityType == "spot" {
		return od * ec2sim.DefaultSpotPriceRatio
	}
	return od
}

// Status is one observation of the stack, for progress lines.
type Status struct {
	// Instances are the simulator's pending or running instances.
	Instances int
	// Nodes, ReadyNodes count the cluster's Nodes.
	Nodes, ReadyNodes int
	// NodeClaims counts karpenter.sh/v1 NodeClaims (the forwarder's mirrors).
	NodeClaims int
	// PendingPods are unscheduled pods; RunningPods are in phase Running.
	PendingPods, RunningPods int
	// PricePerHour is the on-demand-table price of the live instances, in
	// USD per hour.
	PricePerHour float64
}

// observeClients read what Observe counts in the cheapest form the API
// server serves: Nodes and Pods as protobuf, NodeClaims as their metadata
// only (Observe counts them). Full JSON lists, read every 200ms by the
// end-to-end tests' polls, cost as much as the work they watch: a CPU
// profile of the 100-node end-to-end run (TestManyNodeClaimsKeepUp) put
// 41% of the test process in decoding them, and the API server, the
// largest consumer of the machine, encoded them.
type observeClients struct {
	kube kubernetes.Interface
	meta metadata.Interface
}

func newObserveClients(cfg *rest.Config) (observeClients, error) {
	pb := rest.CopyConfig(cfg)
	pb.ContentType = runtime.ContentTypeProtobuf
	pb.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(pb)
	if err != nil {
		return observeClients{}, fmt.Errorf("observe client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return observeClients{}, fmt.Errorf("observe metadata client: %w", err)
	}
	return observeClients{kube: kube, meta: meta}, nil
}

// Observe reads Status. Errors name the list that failed.
func (s *Stack) Observe(ctx context.Context) (Status, error) {
	var st Status
	for _, in := range s.Sim.Instances() {
		if in.State == "pending" || in.State == "running" {
			st.Instances++
			st.PricePerHour += s.prices.price(in)
		}
	}
	nodes, err := s.observe.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Status{}, fmt.Errorf("list nodes: %w", err)
	}
	st.Nodes = len(nodes.Items)
	for i := range nodes.Items {
		if v1.NodeReady(&nodes.Items[i]) {
			st.ReadyNodes++
		}
	}
	claims, err := s.observe.meta.Resource(NodeClaimResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Status{}, fmt.Errorf("list nodeclaims: %w", err)
	}
	st.NodeClaims = len(claims.Items)
	pods, err := s.observe.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return Status{}, fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods.Items {
		switch {
		case p.Spec.NodeName == "" && p.DeletionTimestamp == nil:
			st.PendingPods++
		case p.Status.Phase == corev1.PodRunning:
			st.RunningPods++
		}
	}
	return st, nil
}

// PriceSource says where prices come from, for the output.
func (s *Stack) PriceSource() string {
	return "embedded offline on-demand price table (shared/catalog); Spot = on-demand x 0.35; no AWS Pricing API"
}
