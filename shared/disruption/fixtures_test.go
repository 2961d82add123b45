package disruption_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// now is one hour after every fixture's creation (st.Epoch): past the
// default consolidateAfter 0s, well before the default expireAfter 720h.
var now = st.Epoch.Add(time.Hour)

// Instance types: on-demand in us-east-1a..c; the price doubles with size.
var (
	large   = st.InstanceType("m5.large", "2", "8Gi", "29", 0.096)
	xlarge  = st.InstanceType("m5.xlarge", "4", "16Gi", "58", 0.192)
	xlarge2 = st.InstanceType("m5.2xlarge", "8", "32Gi", "58", 0.384)
)

func onDemandTypes() []*catalog.InstanceType {
	return []*catalog.InstanceType{large, xlarge, xlarge2}
}

// spotTypes returns n "c-<i>.large" types (2 cpu, 4Gi) with on-demand and
// spot offerings in us-east-1a, the spot price rising from 0.010 by 0.001.
func spotTypes(n int) []*catalog.InstanceType {
	out := make([]*catalog.InstanceType, n)
	for i := range out {
		spot := 0.010 + 0.001*float64(i)
		out[i] = st.InstanceType(fmt.Sprintf("c%02d.large", i), "2", "4Gi", "29", 0.1,
			st.TypeOfferings(st.Offering("us-east-1a", v1.CapacityTypeSpot, spot), st.Offering("us-east-1a", v1.CapacityTypeOnDemand, 0.1)))
	}
	return out
}

// cluster builds a disruption.Input.
type cluster struct{ in disruption.Input }

// newCluster has the EC2NodeClass "default" (resolving to types) and the
// given pools (st.NodePool; Evaluate applies the API defaults: 10% budget,
// consolidateAfter 0s, WhenEmptyOrUnderutilized, expireAfter 720h).
func newCluster(types []*catalog.InstanceType, pools ...v1.NodePool) *cluster {
	return &cluster{in: disruption.Input{
		Now:           now,
		NodePools:     pools,
		NodeClasses:   []v1.EC2NodeClass{st.EC2NodeClass(st.DefaultNodeClass)},
		InstanceTypes: map[string][]*catalog.InstanceType{st.DefaultNodeClass: types},
	}}
}

// pool is a NodePool "name" with a 100% budget unless options change it.
func pool(name string, opts ...st.NodePoolOption) v1.NodePool {
	return st.NodePool(name, append([]st.NodePoolOption{budgets(v1.Budget{Nodes: "100%"})}, opts...)...)
}

func budgets(bs ...v1.Budget) st.NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Disruption.Budgets = bs }
}

func consolidateAfter(s string) st.NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillable(s) }
}

func policy(p v1.ConsolidationPolicy) st.NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = p }
}

// managedOption changes a managed node's NodeClaim and Node.
type managedOption func(*v1.NodeClaim, *corev1.Node)

// node adds NodeClaim name and its Node "node-<name>" of it in zone and
// capacity type ct, owned by pool: launched, registered and initialized at
// st.Epoch, Ready, with providerID aws:///<zone>/i-<name>.
func (c *cluster) node(name string, it *catalog.InstanceType, zone, ct, pool string, opts ...managedOption) {
	nodeName := "node-" + name
	claim := st.NodeClaim(name, st.ClaimType(it, zone, ct), st.ClaimPool(pool), st.ClaimNode(nodeName))
	claim.Status.ProviderID = "aws:///" + zone + "/i-" + name
	claim.Status.Conditions = append(claim.Status.Conditions,
		metav1.Condition{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.NewTime(st.Epoch)},
		metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(st.Epoch)})
	n := st.Node(nodeName, st.NodeType(it, zone, ct), st.ManagedBy(pool))
	n.Spec.ProviderID = claim.Status.ProviderID
	for _, o := range opts {
		o(claim, n)
	}
	c.in.NodeClaims = append(c.in.NodeClaims, *claim)
	c.in.Nodes = append(c.in.Nodes, *n)
}

// pods adds running, Ready pods bound to node, each requesting cpu.
func (c *cluster) pods(node, cpu string, names ...string) {
	for _, name := range names {
		c.pod(name, node, st.Requests(cpu, "256Mi"))
	}
}

func (c *cluster) pod(name, node string, opts ...st.PodOption) {
	p := st.Pod(name, append([]st.PodOption{st.BoundTo(node), ready}, opts...)...)
	c.in.Pods = append(c.in.Pods, *p)
}

func ready(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
}

func annotate(key, value string) st.PodOption {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[key] = value
	}
}

func startedAt(t time.Time) st.PodOption {
	return func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: t} }
}

func pdb(name string, selector map[string]string, minAvailable, maxUnavailable *intstr.IntOrString) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: st.DefaultNamespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector}, MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
		},
	}
}

func intOrStr(v intstr.IntOrString) *intstr.IntOrString { return &v }

// claimAnnotations sets NodeClaim annotations.
func claimAnnotations(kv ...string) managedOption {
	return func(nc *v1.NodeClaim, _ *corev1.Node) {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			nc.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func nodeAnnotations(kv ...string) managedOption {
	return func(_ *v1.NodeClaim, n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func createdAt(t time.Time) managedOption {
	return func(nc *v1.NodeClaim, n *corev1.Node) {
		nc.CreationTimestamp = metav1.NewTime(t)
		n.CreationTimestamp = metav1.NewTime(t)
	}
}

func imageID(id string) managedOption {
	return func(nc *v1.NodeClaim, _ *corev1.Node) { nc.Status.ImageID = id }
}

func startupTaint(key string) managedOption {
	return func(nc *v1.NodeClaim, n *corev1.Node) {
		t := corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}
		nc.Spec.StartupTaints = append(nc.Spec.StartupTaints, t)
		n.Spec.Taints = append(n.Spec.Taints, t)
		nc.Status.Conditions = nc.Status.Conditions[:len(nc.Status.Conditions)-1] // not Initialized
		delete(n.Labels, v1.LabelInitialized)
	}
}

func lastPodEvent(t time.Time) managedOption {
	return func(nc *v1.NodeClaim, _ *corev1.Node) { nc.Status.LastPodEventTime = metav1.NewTime(t) }
}

// summary is what most tests compare: per command, its method, decision,
// candidates and replacement types; per blocked NodeClaim, its reason and
// its event.
type summary struct {
	Commands []cmdSummary
	Blocked  map[string]string
	Events   map[string]string
}

type cmdSummary struct {
	Method     disruption.Method
	Decision   disruption.Decision
	Candidates []string
	Types      []string // first replacement's instance types, up to 3
	Capacity   string   // first replacement's expected capacity type
}

func summarize(r disruption.Result) summary {
	s := summary{Blocked: map[string]string{}, Events: map[string]string{}}
	for _, c := range r.Commands {
		cs := cmdSummary{Method: c.Method, Decision: c.Decision}
		for _, cand := range c.Candidates {
			cs.Candidates = append(cs.Candidates, cand.NodeClaim)
		}
		if len(c.Replacements) > 0 {
			types := c.Replacements[0].InstanceTypes
			cs.Types = types[:min(3, len(types))]
			cs.Capacity = c.Replacements[0].Expected.CapacityType
		}
		s.Commands = append(s.Commands, cs)
	}
	for _, b := range r.Blocked {
		s.Blocked[b.NodeClaim] = b.Reason
		s.Events[b.NodeClaim] = b.Event
	}
	return s
}
