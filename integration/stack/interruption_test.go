package stack_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/interruption"
)

// spotNodePool is a Karpenter v1 NodePool of Spot capacity only, on the
// guide's EC2NodeClass, whose budget forbids voluntary disruption:
// anything that drains its nodes is the interruption handler.
const spotNodePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: spot
spec:
  template:
    spec:
      requirements:
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ['c', 'm', 'r']
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ['5']
        - key: karpenter.sh/capacity-type
          operator: In
          values: ['spot']
        - key: kubernetes.io/arch
          operator: In
          values: ['amd64']
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: production
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1h
    budgets:
      - nodes: '0'
`

// startSpotStack starts a stack with disruption and interruption wired,
// the guide's EC2NodeClass and the Spot NodePool, and runs a one-pod
// Deployment on it. It returns the stack and the pod's Node, or skips
// when the local Step Functions engine is not installed.
func startSpotStack(t *testing.T) (*stack.Stack, corev1.Node) {
	t.Helper()
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Interrupts {
		t.Skip("interruption is not wired: the local Step Functions engine is missing (make sfn-deps)")
	}
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(t.Context(), []byte(spotNodePool)); err != nil {
		t.Fatalf("Apply(spot NodePool) error = %v", err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(t.Context(), deployment("web", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	eventually(t, s, 2*time.Minute, "the pod running on a Spot node", func(ctx context.Context, st stack.Status) bool {
		pods := runningPods(t, s, "web")
		if len(pods) != 1 || st.PendingPods != 0 {
			return false
		}
		n, err := s.Kube.CoreV1().Nodes().Get(ctx, pods[0].Spec.NodeName, metav1.GetOptions{})
		if err != nil || n.Labels[v1.LabelCapacityType] != v1.CapacityTypeSpot {
			return false
		}
		node = *n
		return true
	})
	return s, node
}

// runningPods returns the Running pods of app that are not being deleted.
func runningPods(t testing.TB, s *stack.Stack, app string) []corev1.Pod {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func TestSpotInterruptionMovesPodsBeforeReclaimAndAvoidsTheOffering(t *testing.T) {
	s, node := startSpotStack(t)
	ctx := t.Context()
	launchesBefore := len(s.Sim.CallsTo("CreateFleet"))

	warning, err := s.InterruptNode(ctx, node.Name)
	if err != nil {
		t.Fatalf("InterruptNode(%s) error = %v", node.Name, err)
	}
	interrupted := ec2sim.Offering{InstanceType: warning.InstanceType, Zone: warning.Zone, CapacityType: "spot"}
	t.Logf("Spot interruption warning for %s (%s %s), reclaim at %s", node.Name, warning.InstanceType, warning.Zone, warning.ReclaimTime.Format(time.RFC3339))

	// (a) The pod runs on another node before EC2 reclaims the instance.
	var movedAt time.Time
	eventually(t, s, 3*time.Minute, "the pod running on a new node", func(context.Context, stack.Status) bool {
		pods := runningPods(t, s, "web")
		if len(pods) != 1 || pods[0].Spec.NodeName == node.Name {
			return false
		}
		movedAt = time.Now()
		return true
	})
	if !movedAt.Before(warning.ReclaimTime) {
		t.Errorf("the pod ran on a new node at %s, not before the reclaim at %s", movedAt.Format(time.RFC3339), warning.ReclaimTime.Format(time.RFC3339))
	}
	t.Logf("pod running on a new node %s after the warning (reclaim after %s)", movedAt.Sub(warning.WarningTime).Round(100*time.Millisecond), ec2sim.SpotReclaimDelay)

	// The interruption execution ran: the handler started it and the local
	// Step Functions finished it.
	var exec execution
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if exec = interruptionExecution(t, s); exec.Status != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if exec.Status != "SUCCEEDED" {
		t.Errorf("interruption execution %q: status %q, want SUCCEEDED", exec.Name, exec.Status)
	}
	if !handlerLogged(t, s, "interruption handled", `"kind":"spot_interrupted"`) {
		t.Error(`functions.log has no "interruption handled" line of kind spot_interrupted`)
	}

	// (b) The replacement's launch leaves the interrupted offering out.
	calls := s.Sim.CallsTo("CreateFleet")
	if len(calls) <= launchesBefore {
		t.Fatalf("CreateFleet calls = %d, want a launch after the interruption", len(calls))
	}
	zones := subnetZones(s)
	for _, c := range calls[launchesBefore:] {
		pools := fleetPools(c, zones)
		if len(pools) == 0 {
			t.Errorf("CreateFleet at %s: no overrides read from %v", c.Time, c.Params)
		}
		if slices.Contains(pools, interrupted) {
			t.Errorf("CreateFleet at %s offers the interrupted offering %+v again", c.Time, interrupted)
		}
	}
	if in, ok := s.Sim.Instance(warning.InstanceID); ok && in.State != ec2sim.StateShuttingDown && in.State != ec2sim.StateTerminated && time.Now().After(warning.ReclaimTime) {
		t.Errorf("interrupted instance %s: %s after the reclaim time", in.ID, in.State)
	}
}

func TestRebalanceRecommendationOnlyRecordsAnEvent(t *testing.T) {
	s, node := startSpotStack(t)
	ctx := t.Context()
	// The forwarder mirrors NodeClaims into the cluster periodically.
	var claimsBefore []string
	eventually(t, s, time.Minute, "the node's NodeClaim mirrored", func(context.Context, stack.Status) bool {
		claimsBefore = nodeClaimNames(t, s)
		return len(claimsBefore) == 1
	})
	pod := runningPods(t, s, "web")[0]

	if _, err := s.RecommendRebalance(ctx, node.Name); err != nil {
		t.Fatalf("RecommendRebalance(%s) error = %v", node.Name, err)
	}
	// The handler records an event for the node's NodeClaim...
	var recorded bool
	deadline := time.Now().Add(30 * time.Second)
	for !recorded && time.Now().Before(deadline) {
		records, err := s.EventRecords(ctx)
		if err != nil {
			t.Fatalf("EventRecords() error = %v", err)
		}
		for _, r := range records {
			if r.Reason == interruption.ReasonSpotRebalanceRecommendation && r.Node == node.Name {
				recorded = true
			}
		}
		time.Sleep(time.Second)
	}
	if !recorded {
		t.Errorf("no %s event record for node %s", interruption.ReasonSpotRebalanceRecommendation, node.Name)
	}
	// ...which the forwarder relays (every 10 s) as a Kubernetes Event on
	// the Node, and, for 30 seconds, nothing else happens.
	nodeEvent := false
	until := time.Now().Add(30 * time.Second)
	for time.Now().Before(until) {
		nodeEvent = nodeEvent || hasNodeEvent(t, s, node, interruption.ReasonSpotRebalanceRecommendation)
		n, err := s.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", node.Name, err)
		}
		if n.Spec.Unschedulable || n.DeletionTimestamp != nil || slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == v1.TaintKeyDisrupted }) {
			t.Fatalf("node %s was cordoned, tainted or deleted after a rebalance recommendation: %+v", node.Name, n.Spec)
		}
		if got := nodeClaimNames(t, s); !slices.Equal(got, claimsBefore) {
			t.Fatalf("NodeClaims = %v, want %v unchanged", got, claimsBefore)
		}
		if pods := runningPods(t, s, "web"); len(pods) != 1 || pods[0].UID != pod.UID {
			t.Fatalf("the pod moved or stopped after a rebalance recommendation: %d running", len(pods))
		}
		time.Sleep(2 * time.Second)
	}
	if exec := interruptionExecution(t, s); exec.Name != "" {
		t.Errorf("interruption execution %q started for a rebalance recommendation", exec.Name)
	}
	if !nodeEvent {
		t.Errorf("no Kubernetes Event %s on Node %s within 30 s of the recommendation", interruption.ReasonSpotRebalanceRecommendation, node.Name)
	}
}

// hasNodeEvent reports whether a Kubernetes Event of reason is recorded on
// node (selected as `kubectl describe node` does: involvedObject kind, name
// and uid).
func hasNodeEvent(t testing.TB, s *stack.Stack, node corev1.Node, reason string) bool {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node.Name, "involvedObject.uid": string(node.UID)}.AsSelector()
	evs, err := s.Kube.CoreV1().Events("").List(t.Context(), metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Reason == reason })
}

func TestImpairedInstanceIsDrainedForcefullyAndItsPodRunsElsewhere(t *testing.T) {
	s, node := startSpotStack(t)
	ctx := t.Context()
	// A budget that refuses every eviction: only a forceful drain (a
	// termination deadline of now) deletes the pod, as the Spot NodePool
	// sets no terminationGracePeriod.
	refuseEvictions(t, s, "web")
	impairedAt := time.Now()
	health, err := s.ImpairInstance(ctx, node.Name, ec2sim.CheckSystem)
	if err != nil {
		t.Fatalf("ImpairInstance(%s) error = %v", node.Name, err)
	}
	if health.SystemStatus != ec2sim.SummaryImpaired || health.SystemImpairedSince == nil || impairedAt.Sub(*health.SystemImpairedSince) < stack.ImpairedLead-time.Second {
		t.Fatalf("ImpairInstance(%s) = %+v, want the system check impaired since %s ago", node.Name, health, stack.ImpairedLead)
	}

	// The next poll (every 10 s) starts a forceful interruption execution;
	// the pod runs on another node despite its budget.
	eventually(t, s, 2*time.Minute, "the pod running on a new node", func(context.Context, stack.Status) bool {
		pods := runningPods(t, s, "web")
		return len(pods) == 1 && pods[0].Spec.NodeName != node.Name
	})
	t.Logf("pod running on a new node %s after the impairment", time.Since(impairedAt).Round(100*time.Millisecond))
	if !handlerLogged(t, s, "instance status handled", `"kind":"system_status"`, `"forceful":true`, `"execution":"interrupt-`) {
		t.Error(`functions.log has no "instance status handled" line of kind system_status, forceful, with an interruption execution`)
	}
	var exec stack.Execution
	deadline := time.Now().Add(2 * time.Minute)
	for exec.Status == "" || exec.Status == "RUNNING" {
		if time.Now().After(deadline) {
			t.Fatalf("no finished interruption execution 2 minutes after the drain (last %+v)", exec)
		}
		for _, e := range s.Executions() {
			if strings.HasPrefix(e.Name, "interrupt-") {
				exec = e
			}
		}
		time.Sleep(time.Second)
	}
	if exec.Status != "SUCCEEDED" {
		t.Errorf("interruption execution %q: status %q (%s: %s), want SUCCEEDED", exec.Name, exec.Status, exec.Error, exec.Cause)
	}
	// The impaired instance is terminated and its Node removed.
	eventually(t, s, 2*time.Minute, "the impaired node removed", func(ctx context.Context, _ stack.Status) bool {
		_, err := s.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// nodeClaimNames lists the cluster's NodeClaims that are not being
// deleted, sorted.
func nodeClaimNames(t testing.TB, s *stack.Stack) []string {
	t.Helper()
	list, err := s.Dynamic.Resource(stack.NodeClaimResource).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		if c.GetDeletionTimestamp() == nil {
			out = append(out, c.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// execution is an interruption execution as functions.log reports it.
type execution struct{ Name, Status string }

// interruptionExecution returns the first interruption execution the
// local Step Functions finished (execution names start with "interrupt-"),
// or, when none finished, the name of one the handler started.
func interruptionExecution(t testing.TB, s *stack.Stack) execution {
	t.Helper()
	var started string
	for _, line := range logLines(t, s) {
		var rec struct {
			Msg       string `json:"msg"`
			Execution string `json:"execution"`
			Status    string `json:"status"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Execution, "interrupt-") {
			continue
		}
		if rec.Msg == "execution finished" {
			return execution{Name: rec.Execution, Status: rec.Status}
		}
		started = rec.Execution
	}
	if started == "" && handlerLogged(t, s, "interruption handled", `"action":"CordonAndDrain"`) {
		started = "(started)"
	}
	return execution{Name: started}
}

// handlerLogged reports whether functions.log has a line with msg and
// every one of parts.
func handlerLogged(t testing.TB, s *stack.Stack, msg string, parts ...string) bool {
	t.Helper()
	for _, line := range logLines(t, s) {
		if !strings.Contains(line, `"msg":"`+msg+`"`) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func logLines(t testing.TB, s *stack.Stack) []string {
	t.Helper()
	data, err := os.ReadFile(s.LogPath("functions"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

// subnetZones maps the simulator's subnet IDs to their zones.
func subnetZones(s *stack.Stack) map[string]string {
	out := map[string]string{}
	for _, sn := range s.Sim.Network().Subnets {
		out[sn.ID] = sn.Zone
	}
	return out
}

// fleetPools reads the (instance type, zone, capacity type) pools a
// CreateFleet call offered from its Query parameters
// (LaunchTemplateConfigs.N.Overrides.M.InstanceType with SubnetId or
// AvailabilityZone; TargetCapacitySpecification.DefaultTargetCapacityType).
func fleetPools(c ec2sim.Call, subnetZones map[string]string) []ec2sim.Offering {
	capacityType := c.Params.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	var out []ec2sim.Offering
	for key := range c.Params {
		prefix, ok := strings.CutSuffix(key, ".InstanceType")
		if !ok || !strings.Contains(prefix, ".Overrides.") {
			continue
		}
		zone := c.Params.Get(prefix + ".AvailabilityZone")
		if sn := c.Params.Get(prefix + ".SubnetId"); sn != "" {
			zone = subnetZones[sn]
		}
		out = append(out, ec2sim.Offering{InstanceType: c.Params.Get(key), Zone: zone, CapacityType: capacityType})
	}
	return out
}
