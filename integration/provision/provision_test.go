package provision_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/local/ec2sim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// Requirements of the NodePools the scenarios use.
const (
	onDemandM5 = `
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}`
	// oneSpotPool leaves a single spot offering, spot/m5.large/us-east-1a,
	// and its on-demand twin: an insufficient-capacity error on the first
	// must end on the second (karpenter-spec 11.3 item 13).
	oneSpotPool = `
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}`
)

func decodeYAML[T any](t testing.TB, doc string, decode func([]byte) (*T, []v1.FieldError, error)) T {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := decode(j)
	if err != nil {
		t.Fatal(err)
	}
	return *obj
}

// postConfig sends the cluster's configuration: NodePool "default" with
// requirements reqs and an AL2023 EC2NodeClass "default" selecting the
// simulator's discovery-tagged subnets and security group.
func (e *env) postConfig(t testing.TB, reqs string) {
	t.Helper()
	pool := decodeYAML(t, fmt.Sprintf(`
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements: %s
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`, reqs), v1.DecodeNodePool)
	class := decodeYAML(t, fmt.Sprintf(`
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-%[1]s
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: %[1]s}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: %[1]s}}]
`, cluster), v1.DecodeEC2NodeClass)
	msg := v1.ClusterConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindClusterConfig},
		ID:       "cfg-1", Cluster: cluster, CreatedAt: metav1.NewTime(e.clock.Now()),
		NodePools: []v1.NodePool{pool}, EC2NodeClasses: []v1.EC2NodeClass{class},
	}
	if status := e.api.do(t, http.MethodPost, v1.RouteConfig, msg.ID, msg, nil); status != http.StatusAccepted {
		t.Fatalf("POST config: status %d", status)
	}
}

// pod is a pending pod requesting cpu and memory.
func pod(name, cpu, memory string) v1.PodSummary {
	return v1.PodSummary{
		Name: name, Namespace: "default", UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(epoch.Add(-time.Minute)),
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web"}},
		Spec: v1.PodSpecSummary{Containers: []v1.ContainerSummary{{
			Name: "app", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		}}},
	}
}

func (e *env) postBatch(t testing.TB, id string, pods ...v1.PodSummary) v1.PodBatchResult {
	t.Helper()
	b := v1.PodBatch{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatch},
		ID:       id, Cluster: cluster, CreatedAt: metav1.NewTime(e.clock.Now()), Pods: pods,
	}
	var res v1.PodBatchResult
	if status := e.api.do(t, http.MethodPost, v1.RoutePodBatches, id, b, &res); status != http.StatusAccepted {
		t.Fatalf("POST pod batch %s: status %d", id, status)
	}
	return res
}

func (e *env) batchResult(t testing.TB, id string) v1.PodBatchResult {
	t.Helper()
	var res v1.PodBatchResult
	if status := e.api.do(t, http.MethodGet, v1.RoutePodBatches+"/"+id, "", nil, &res); status != http.StatusOK {
		t.Fatalf("GET pod batch %s: status %d", id, status)
	}
	return res
}

func (e *env) claims(t testing.TB) []v1.NodeClaim {
	t.Helper()
	claims, err := e.store.ListNodeClaims(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

// drainOK drains the queue and fails the test if any record was reported
// failed.
func (e *env) drainOK(t testing.TB) {
	t.Helper()
	for i, r := range e.drain(10) {
		if len(r.BatchItemFailures) > 0 {
			t.Fatalf("invocation %d reported failures %v", i, r.BatchItemFailures)
		}
	}
}

func names(claims []v1.NodeClaim) []string {
	var out []string
	for _, c := range claims {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

func conditionStatus(c v1.NodeClaim, typ string) metav1.ConditionStatus {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ {
			return cond.Status
		}
	}
	return ""
}

func instanceID(t testing.TB, providerID string) string {
	t.Helper()
	_, id, err := v1.ParseProviderID(providerID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// launchOne provisions one pod onto one on-demand m5 NodeClaim and
// returns the NodeClaim.
func (e *env) launchOne(t testing.TB) v1.NodeClaim {
	t.Helper()
	e.postConfig(t, onDemandM5)
	e.postBatch(t, "b1", pod("web-0", "1", "2Gi"))
	e.drainOK(t)
	claims := e.claims(t)
	if len(claims) != 1 || claims[0].Status.ProviderID == "" {
		t.Fatalf("after provisioning: nodeclaims %v, want one launched", names(claims))
	}
	return claims[0]
}

func TestPendingPodsBecomeThePlannedNodeClaimsAndFleets(t *testing.T) {
	e := newEnv(t)
	e.postConfig(t, onDemandM5)
	snap := v1.ClusterSnapshot{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindClusterSnapshot},
		ID:       "snap-1-0", Cluster: cluster, CreatedAt: metav1.NewTime(e.clock.Now()), SnapshotID: "snap-1", Part: 0, Parts: 1,
	}
	if status := e.api.do(t, http.MethodPost, v1.RouteSnapshots, snap.ID, snap, nil); status != http.StatusAccepted {
		t.Fatalf("POST snapshot: status %d", status)
	}
	pods := []v1.PodSummary{pod("web-0", "1", "2Gi"), pod("web-1", "1", "2Gi"), pod("web-2", "1", "2Gi"), pod("big-0", "7", "20Gi")}
	queued := e.postBatch(t, "b1", pods...)
	if queued.State != v1.BatchQueued || queued.Duplicate {
		t.Fatalf("POST answer = %s (duplicate %v), want Queued", queued.State, queued.Duplicate)
	}
	e.drainOK(t)

	res := e.batchResult(t, "b1")
	if res.State != v1.BatchSolved || len(res.Unschedulable) != 0 {
		t.Fatalf("batch b1 = %s, unschedulable %v; want Solved with every pod placed", res.State, res.Unschedulable)
	}
	stored := e.claims(t)
	if len(res.NodeClaims) == 0 {
		t.Fatal("batch b1 planned no NodeClaims")
	}
	if diff := cmp.Diff(names(res.NodeClaims), names(stored)); diff != "" {
		t.Errorf("stored NodeClaims differ from the planned ones (-planned +stored):\n%s", diff)
	}
	for _, p := range pods {
		nom, ok := res.Nominations[p.UID]
		if !ok || !slices.Contains(names(stored), nom.NodeClaim) {
			t.Errorf("pod %s nominated to %+v, want one of the batch's NodeClaims", p.Name, nom)
		}
	}

	// One CreateFleet per NodeClaim, each with the NodeClaim's token, each
	// launching the instance the NodeClaim records.
	fleets := e.sim.Fleets()
	if n := len(e.sim.CallsTo("CreateFleet")); n != len(stored) {
		t.Errorf("CreateFleet called %d times for %d NodeClaims", n, len(stored))
	}
	type launch struct{ Token, Instance string }
	var want, got []launch
	for i := range stored {
		c := &stored[i]
		if conditionStatus(*c, v1.ConditionTypeLaunched) != metav1.ConditionTrue {
			t.Errorf("NodeClaim %s Launched = %s, want True", c.Name, conditionStatus(*c, v1.ConditionTypeLaunched))
		}
		want = append(want, launch{Token: fleet.ClientToken(c), Instance: instanceID(t, c.Status.ProviderID)})
	}
	for _, f := range fleets {
		got = append(got, launch{Token: f.ClientToken, Instance: strings.Join(f.InstanceIDs, ",")})
	}
	sortLaunches := cmpopts.SortSlices(func(a, b launch) bool { return a.Token < b.Token })
	if diff := cmp.Diff(want, got, sortLaunches); diff != "" {
		t.Errorf("fleets mismatch (-want +got):\n%s", diff)
	}

	// The instances carry Karpenter's launch tags, nodewright's ownership
	// mark and AL2023 user data with the unregistered taint
	// (karpenter-spec 1.5, 9.2).
	for _, c := range stored {
		inst, ok := e.sim.Instance(instanceID(t, c.Status.ProviderID))
		if !ok {
			t.Fatalf("instance of %s not found", c.Name)
		}
		wantTags := map[string]string{
			"kubernetes.io/cluster/" + cluster: "owned", "eks:eks-cluster-name": cluster,
			"karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default",
			"nodewright.dev/owner": cluster,
		}
		for k, v := range wantTags {
			if inst.Tags[k] != v {
				t.Errorf("instance %s tag %s = %q, want %q", inst.ID, k, inst.Tags[k], v)
			}
		}
		if inst.CapacityType != "on-demand" || !strings.HasPrefix(inst.InstanceType, "m5.") || c.Labels[v1.LabelInstanceType] != inst.InstanceType {
			t.Errorf("instance %s is %s %s, NodeClaim says %s; want an on-demand m5", inst.ID, inst.CapacityType, inst.InstanceType, c.Labels[v1.LabelInstanceType])
		}
		ud := string(inst.UserData)
		for _, s := range []string{"kind: NodeConfig", "name: " + cluster, "karpenter.sh/unregistered", "karpenter.sh/nodepool=default"} {
			if !strings.Contains(ud, s) {
				t.Errorf("instance %s user data lacks %q:\n%s", inst.ID, s, ud)
			}
		}
	}
}

func TestDuplicateBatchLaunchesNothingTwice(t *testing.T) {
	e := newEnv(t)
	first := e.launchOne(t)
	calls := len(e.sim.CallsTo("CreateFleet"))

	// The forwarder posts the same batch again (a retry after a lost
	// answer): answered as the first, with its result, and not enqueued.
	again := e.postBatch(t, "b1", pod("web-0", "1", "2Gi"))
	if !again.Duplicate || again.State != v1.BatchSolved || len(again.NodeClaims) != 1 {
		t.Errorf("repeat answered %s (duplicate %v, %d NodeClaims), want the stored Solved result", again.State, again.Duplicate, len(again.NodeClaims))
	}
	if r := e.drain(10); len(r) != 0 {
		t.Errorf("the repeat reached the provisioner %d times, want never", len(r))
	}

	// SQS delivers the processed message again (its deletion was lost).
	redelivered := sqsEvent(nil)
	body := fmt.Sprintf(`{"apiVersion":"nodewright.dev/v1","kind":"PodBatch","id":"b1","cluster":%q,"createdAt":%q,"pods":[%s]}`,
		cluster, epoch.Format(time.RFC3339), mustJSON(t, pod("web-0", "1", "2Gi")))
	redelivered.Records = append(redelivered.Records, sqsRecord("m-again", "PodBatch", body))
	if resp := e.invokeProvisioner(redelivered); len(resp.BatchItemFailures) != 0 {
		t.Errorf("redelivery reported failures %v", resp.BatchItemFailures)
	}

	if n := len(e.sim.CallsTo("CreateFleet")); n != calls {
		t.Errorf("CreateFleet calls went from %d to %d, want no new call", calls, n)
	}
	if claims := e.claims(t); len(claims) != 1 || claims[0].Status.ProviderID != first.Status.ProviderID {
		t.Errorf("NodeClaims %v after the repeats, want only %s on %s", names(claims), first.Name, first.Status.ProviderID)
	}
	if n := len(e.sim.Instances()); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
}

func TestRetriedInvocationLaunchesNothingTwice(t *testing.T) {
	e := newEnv(t)
	e.postConfig(t, onDemandM5)
	// EC2 launches, but the answer to the first CreateFleet is lost: the
	// invocation cannot record the instance and reports the record failed.
	e.ec2API.LoseCreateFleet.Store(1)
	e.postBatch(t, "b1", pod("web-0", "1", "2Gi"))
	responses := e.drain(10)

	var failures []int
	for _, r := range responses {
		failures = append(failures, len(r.BatchItemFailures))
	}
	if diff := cmp.Diff([]int{1, 0}, failures); diff != "" {
		t.Errorf("failed records per invocation mismatch (-want +got):\n%s", diff)
	}
	calls := e.sim.CallsTo("CreateFleet")
	fleets := e.sim.Fleets()
	claims := e.claims(t)
	if len(calls) != 2 || len(fleets) != 1 || len(e.sim.Instances()) != 1 {
		t.Fatalf("%d CreateFleet calls, %d fleets, %d instances; want 2 calls answered by 1 fleet of 1 instance", len(calls), len(fleets), len(e.sim.Instances()))
	}
	if len(claims) != 1 || fleets[0].ClientToken != fleet.ClientToken(&claims[0]) || instanceID(t, claims[0].Status.ProviderID) != fleets[0].InstanceIDs[0] {
		t.Errorf("NodeClaims %v with %q; want one NodeClaim recording the one fleet's instance", names(claims), claims[0].Status.ProviderID)
	}
	if res := e.batchResult(t, "b1"); res.State != v1.BatchSolved || len(res.NodeClaims) != 1 || res.NodeClaims[0].Status.ProviderID == "" {
		t.Errorf("batch b1 = %s with %d NodeClaims, want Solved with the launched NodeClaim", res.State, len(res.NodeClaims))
	}
}

func TestInsufficientCapacityEndsOnAnotherOffering(t *testing.T) {
	e := newEnv(t)
	e.postConfig(t, oneSpotPool)
	e.sim.SetUnavailable(ec2sim.Offering{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}, "InsufficientInstanceCapacity")
	web := pod("web-0", "1", "2Gi")

	// Round 1: spot is cheaper, so the NodeClaim goes spot; EC2 has none.
	e.postBatch(t, "b1", web)
	e.drainOK(t)
	r1 := e.batchResult(t, "b1")
	if _, ok := r1.Unschedulable[web.UID]; !ok || len(r1.NodeClaims) != 0 || len(e.claims(t)) != 0 {
		t.Fatalf("round 1: unschedulable %v, %d NodeClaims planned, %d stored; want the pod retried and no NodeClaim", r1.Unschedulable, len(r1.NodeClaims), len(e.claims(t)))
	}
	unavailable, err := e.store.ListUnavailable(context.Background(), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(unavailable) != 1 || unavailable[0].CapacityType != "spot" || unavailable[0].InstanceType != "m5.large" || unavailable[0].Zone != "us-east-1a" ||
		!unavailable[0].Until.Equal(e.clock.Now().Add(catalog.UnavailableOfferingsTTL)) {
		t.Errorf("unavailable offerings = %+v, want spot/m5.large/us-east-1a for 3 minutes", unavailable)
	}
	evs, err := e.store.ListEvents(context.Background(), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	first := provisioning.ClaimName("default", "b1", 0)
	if len(evs) != 1 || evs[0].Reason != "InsufficientCapacityError" || evs[0].Type != "Warning" || evs[0].NodeClaim != first ||
		!strings.HasPrefix(evs[0].Message, "NodeClaim "+first+" event: ") {
		t.Errorf("event records = %+v, want one InsufficientCapacityError Warning on NodeClaim %s", evs, first)
	}

	// Round 2: the forwarder's next batch carries the still-pending pod.
	e.clock.Advance(15 * time.Second)
	e.postBatch(t, "b2", web)
	e.drainOK(t)
	r2 := e.batchResult(t, "b2")
	claims := e.claims(t)
	if len(claims) != 1 || r2.Nominations[web.UID].NodeClaim != claims[0].Name {
		t.Fatalf("round 2: nominations %v, NodeClaims %v; want the pod on the one new NodeClaim", r2.Nominations, names(claims))
	}
	inst, _ := e.sim.Instance(instanceID(t, claims[0].Status.ProviderID))
	if inst.CapacityType != "on-demand" || inst.InstanceType != "m5.large" || inst.Zone != "us-east-1a" || claims[0].Labels[v1.LabelCapacityType] != "on-demand" {
		t.Errorf("round 2 launched %s %s in %s (label %s), want on-demand m5.large in us-east-1a", inst.CapacityType, inst.InstanceType, inst.Zone, claims[0].Labels[v1.LabelCapacityType])
	}
	var fleetErrors [][]string
	for _, f := range e.sim.Fleets() {
		fleetErrors = append(fleetErrors, f.Errors)
	}
	if len(fleetErrors) != 2 || len(fleetErrors[0]) == 0 || !strings.HasPrefix(fleetErrors[0][0], "InsufficientInstanceCapacity") || len(fleetErrors[1]) != 0 {
		t.Errorf("fleet errors %v, want an insufficient-capacity fleet then a clean one", fleetErrors)
	}
}

func TestNodeRegistrationLinksTheNode(t *testing.T) {
	e := newEnv(t)
	claim := e.launchOne(t)
	ctx := context.Background()

	// The instance boots and its kubelet registers the Node with the
	// taint the user data asked for.
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-10.ec2.internal", Labels: map[string]string{"kubernetes.io/os": "linux"}},
		Spec: corev1.NodeSpec{ProviderID: claim.Status.ProviderID, Taints: []corev1.Taint{
			{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute},
		}},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: claim.Status.Allocatable,
			Capacity:    claim.Status.Capacity,
		},
	}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	regs := v1.NodeRegistrations{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindNodeRegistrations},
		ID:       "reg-1", Cluster: cluster, CreatedAt: metav1.NewTime(e.clock.Now()),
		Nodes: []v1.NodeSummary{v1.SummarizeNode(node)},
	}
	if status := e.api.do(t, http.MethodPost, v1.RouteRegistrations, regs.ID, regs, nil); status != http.StatusAccepted {
		t.Fatalf("POST registrations: status %d", status)
	}
	e.drainOK(t)

	got, err := e.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type nodeView struct {
		Registered, Initialized, NodePool string
		Taints                            []corev1.Taint
		Finalizers                        []string
		Owner                             string
	}
	view := nodeView{
		Registered: got.Labels[v1.LabelRegistered], Initialized: got.Labels[v1.LabelInitialized], NodePool: got.Labels[v1.LabelNodePool],
		Taints: got.Spec.Taints, Finalizers: got.Finalizers,
	}
	for _, o := range got.OwnerReferences {
		view.Owner = o.Kind + "/" + o.Name
	}
	// No owner: the cluster's NodeClaims are mirrors with API-server UIDs, so
	// registration does not make the NodeClaim the Node's owner (see
	// docs/compatibility.md).
	want := nodeView{Registered: "true", Initialized: "true", NodePool: "default", Finalizers: []string{v1.TerminationFinalizer}}
	if diff := cmp.Diff(want, view, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("registered Node mismatch (-want +got):\n%s", diff)
	}
	stored := e.claims(t)[0]
	if stored.Status.NodeName != node.Name || conditionStatus(stored, v1.ConditionTypeRegistered) != metav1.ConditionTrue ||
		conditionStatus(stored, v1.ConditionTypeInitialized) != metav1.ConditionTrue {
		t.Errorf("NodeClaim nodeName %q, Registered %s, Initialized %s; want the Node, True, True", stored.Status.NodeName,
			conditionStatus(stored, v1.ConditionTypeRegistered), conditionStatus(stored, v1.ConditionTypeInitialized))
	}
}

func TestUnregisteredNodeClaimIsCleanedUp(t *testing.T) {
	e := newEnv(t)
	claim := e.launchOne(t)
	id := instanceID(t, claim.Status.ProviderID)

	e.clock.Advance(provisioning.RegistrationTimeout - time.Minute)
	if out := e.runGC(); len(out.Cleanups) != 0 {
		t.Fatalf("gc at 14 minutes: %+v, want nothing yet", out.Cleanups)
	}
	e.clock.Advance(2 * time.Minute)
	out := e.runGC()
	want := []provisioning.Cleanup{{Reason: provisioning.CleanupRegistrationTimeout, NodeClaim: claim.Name, ResourceVersion: claim.ResourceVersion, InstanceID: id}}
	var got []provisioning.Cleanup
	for _, c := range out.Cleanups {
		if c.Error != "" || c.Skipped {
			t.Errorf("cleanup %+v did not complete", c)
		}
		got = append(got, c.Cleanup)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gc cleanups mismatch (-want +got):\n%s", diff)
	}
	if claims := e.claims(t); len(claims) != 0 {
		t.Errorf("NodeClaims %v remain, want none", names(claims))
	}
	if inst, _ := e.sim.Instance(id); inst.State != "shutting-down" && inst.State != "terminated" {
		t.Errorf("instance %s is %s, want terminating", id, inst.State)
	}
}

func TestLeakedInstanceIsTerminated(t *testing.T) {
	e := newEnv(t)
	claim := e.launchOne(t)
	id := instanceID(t, claim.Status.ProviderID)
	// The NodeClaim is lost (deleted by hand); its instance keeps the
	// cluster's launch tags.
	if err := e.store.DeleteNodeClaim(context.Background(), claim); err != nil {
		t.Fatal(err)
	}

	e.clock.Advance(20 * time.Second)
	if out := e.runGC(); len(out.Cleanups) != 0 {
		t.Fatalf("gc at 20 s: %+v, want nothing within the 30 s grace", out.Cleanups)
	}
	e.clock.Advance(15 * time.Second)
	out := e.runGC()
	if len(out.Cleanups) != 1 || out.Cleanups[0].Reason != provisioning.CleanupLeakedInstance || out.Cleanups[0].InstanceID != id || out.Cleanups[0].Error != "" {
		t.Fatalf("gc at 35 s: %+v, want instance %s terminated as leaked", out.Cleanups, id)
	}
	if inst, _ := e.sim.Instance(id); inst.State != "shutting-down" && inst.State != "terminated" {
		t.Errorf("instance %s is %s, want terminating", id, inst.State)
	}
}
