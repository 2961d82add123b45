package provisioning_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/requirements"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// onDemandM5 allows m5.large and m5.xlarge on-demand.
const onDemandM5 = `
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}`

// claimView is the part of a stored NodeClaim the tests compare.
type claimView struct {
	Name         string
	Launched     metav1.ConditionStatus
	ProviderID   string
	ImageID      string
	Labels       map[string]string
	CPU          string
	Allocatable  map[string]string
	Finalizers   []string
	BatchID      string
	InstanceType []string
}

func viewClaim(c v1.NodeClaim, labelKeys ...string) claimView {
	v := claimView{Name: c.Name, ProviderID: c.Status.ProviderID, ImageID: c.Status.ImageID, Finalizers: c.Finalizers, BatchID: c.Annotations[provisioning.AnnotationBatchID]}
	for _, cond := range c.Status.Conditions {
		if cond.Type == v1.ConditionTypeLaunched {
			v.Launched = cond.Status
		}
	}
	if len(labelKeys) > 0 {
		v.Labels = map[string]string{}
		for _, k := range labelKeys {
			v.Labels[k] = c.Labels[k]
		}
	}
	if q, ok := c.Status.Capacity[corev1.ResourceCPU]; ok {
		v.CPU = q.String()
	}
	if len(c.Status.Allocatable) > 0 {
		v.Allocatable = map[string]string{}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			q := c.Status.Allocatable[r]
			v.Allocatable[string(r)] = q.String()
		}
	}
	if r := requirements.FromNodeSelector(c.Spec.Requirements).Get(v1.LabelInstanceType); r != nil {
		v.InstanceType = r.Values()
	}
	return v
}

func TestProvisionLaunchesThePlannedNodeClaims(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	p := e.provisioner(t)
	batch := podBatch("batch-1", podSummary("a", "1"), podSummary("b", "1"), podSummary("c", "1"))

	res, err := p.Provision(t.Context(), batch, t0)
	if err != nil {
		t.Fatalf("Provision() error = %v", err)
	}
	name := provisioning.ClaimName("default", "batch-1", 0)
	wantNominations := map[types.UID]v1.Nomination{
		"uid-a": {NodeClaim: name}, "uid-b": {NodeClaim: name}, "uid-c": {NodeClaim: name},
	}
	if diff := cmp.Diff(wantNominations, res.Batch.Nominations); diff != "" {
		t.Errorf("Nominations mismatch (-want +got):\n%s", diff)
	}
	if len(e.ec2.instances) != 1 {
		t.Fatalf("instances launched = %d, want 1", len(e.ec2.instances))
	}
	providerID := e.ec2.instances[0].ProviderID()
	wantLaunches := []provisioning.Launch{{NodeClaim: name, Status: launch.Launched, ProviderID: providerID}}
	if diff := cmp.Diff(wantLaunches, res.Launches); diff != "" {
		t.Errorf("Launches mismatch (-want +got):\n%s", diff)
	}
	if len(e.ec2.requests) != 1 {
		t.Fatalf("launch requests = %d, want 1", len(e.ec2.requests))
	}
	if req := e.ec2.requests[0]; req.NodeClaim.UID == "" || len(req.NodeClass.Status.Subnets) != 2 || len(req.Subnets) != 2 || len(req.InstanceTypes) == 0 {
		t.Errorf("launch request: uid %q, %d status subnets, %d subnets, %d instance types; want a uid, 2 resolved subnets with free addresses and the class's types",
			req.NodeClaim.UID, len(req.NodeClass.Status.Subnets), len(req.Subnets), len(req.InstanceTypes))
	}

	stored, err := e.store.GetNodeClaim(t.Context(), name)
	if err != nil {
		t.Fatalf("stored nodeclaim: %v", err)
	}
	// m5.xlarge with AL2023 defaults: karpenter-spec section 3.6 vector
	// (3920m cpu, 14162Mi memory, 58 pods allocatable).
	want := claimView{
		Name: name, Launched: metav1.ConditionTrue, ProviderID: providerID, ImageID: "ami-amd64",
		Labels: map[string]string{
			v1.LabelInstanceType: "m5.xlarge", v1.LabelTopologyZone: "us-east-1a", v1.LabelZoneID: "use1-az1",
			v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelNodePool: "default", v1.LabelEC2NodeClass: "default",
			v1.LabelInstanceTenancy: "default", v1.LabelArch: "amd64", v1.LabelTopologyRegion: testRegion,
		},
		CPU:          "4",
		Allocatable:  map[string]string{"cpu": "3920m", "memory": "14162Mi", "pods": "58"},
		Finalizers:   []string{v1.TerminationFinalizer},
		BatchID:      "batch-1",
		InstanceType: []string{"m5.xlarge"},
	}
	got := viewClaim(stored, v1.LabelInstanceType, v1.LabelTopologyZone, v1.LabelZoneID, v1.LabelCapacityType, v1.LabelNodePool,
		v1.LabelEC2NodeClass, v1.LabelInstanceTenancy, v1.LabelArch, v1.LabelTopologyRegion)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored NodeClaim mismatch (-want +got):\n%s", diff)
	}
	if stored.Annotations[v1.AnnotationInstanceProfileName] != "test-cluster_profile" {
		t.Errorf("annotation %s = %q, want the class's instance profile", v1.AnnotationInstanceProfileName, stored.Annotations[v1.AnnotationInstanceProfileName])
	}

	saved, ok, _ := e.store.BatchResult(t.Context(), "batch-1")
	if !ok {
		t.Fatal("batch result not stored")
	}
	if diff := cmp.Diff(res.Batch, saved); diff != "" {
		t.Errorf("stored batch result differs from the returned one (-returned +stored):\n%s", diff)
	}
	if saved.State != v1.BatchSolved || len(saved.NodeClaims) != 1 || saved.NodeClaims[0].Status.ProviderID == "" {
		t.Errorf("stored batch result: state %s, %d nodeclaims; want Solved with the launched nodeclaim", saved.State, len(saved.NodeClaims))
	}
}

func TestProvisionRetries(t *testing.T) {
	tests := []struct {
		name string
		// prepare scripts faults for the first attempt.
		prepare func(e *env)
		// firstErr is whether the first attempt reports ErrLaunchIncomplete.
		firstErr     bool
		wantStatuses []launch.Status // first attempt, second attempt
		wantReplayed bool
		// wantLaunchCalls counts Launch calls over both attempts; every one
		// carries the same NodeClaim UID.
		wantLaunchCalls int
	}{
		{
			name:            "should launch nothing when a completed batch is delivered again",
			prepare:         func(*env) {},
			wantStatuses:    []launch.Status{launch.Launched},
			wantReplayed:    true,
			wantLaunchCalls: 1,
		},
		{
			name:            "should relaunch with the same ClientToken after a lost CreateFleet response",
			prepare:         func(e *env) { e.ec2.lostResponses = 1 },
			firstErr:        true,
			wantStatuses:    []launch.Status{launch.LaunchFailed, launch.Launched},
			wantLaunchCalls: 2,
		},
		{
			name:            "should relaunch with the same ClientToken when recording the instance failed",
			prepare:         func(e *env) { e.store.failUpdates = 1 },
			firstErr:        true,
			wantStatuses:    []launch.Status{launch.LaunchFailed, launch.Launched},
			wantLaunchCalls: 2,
		},
		{
			name:            "should retry a launch that failed before reaching EC2",
			prepare:         func(e *env) { e.ec2.errs = []error{errors.New("RequestLimitExceeded: throttled")} },
			firstErr:        true,
			wantStatuses:    []launch.Status{launch.LaunchFailed, launch.Launched},
			wantLaunchCalls: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
			tt.prepare(e)
			batch := podBatch("batch-1", podSummary("a", "1"), podSummary("b", "1"))
			name := provisioning.ClaimName("default", "batch-1", 0)

			first, err := e.provisioner(t).Provision(t.Context(), batch, t0)
			if got := errors.Is(err, provisioning.ErrLaunchIncomplete); got != tt.firstErr {
				t.Fatalf("first Provision() error = %v, want ErrLaunchIncomplete: %v", err, tt.firstErr)
			}
			if tt.firstErr {
				stored, _ := e.store.GetNodeClaim(t.Context(), name)
				if c := launchedCondition(stored); c.Status != metav1.ConditionUnknown || c.Reason != provisioning.ReasonLaunchFailed && c.Reason != provisioning.ReasonAwaitingReconciliation {
					t.Errorf("after the failed attempt Launched = %s/%s, want Unknown", c.Status, c.Reason)
				}
			}
			// A new Provisioner: nothing carries over but the stores.
			second, err := e.provisioner(t).Provision(t.Context(), batch, t0.Add(30*time.Second))
			if err != nil {
				t.Fatalf("second Provision() error = %v", err)
			}
			var statuses []launch.Status
			for _, r := range []provisioning.Result{first, second} {
				for _, l := range r.Launches {
					statuses = append(statuses, l.Status)
				}
			}
			if diff := cmp.Diff(tt.wantStatuses, statuses); diff != "" {
				t.Errorf("launch statuses mismatch (-want +got):\n%s", diff)
			}
			if second.Replayed != tt.wantReplayed {
				t.Errorf("second Replayed = %v, want %v", second.Replayed, tt.wantReplayed)
			}
			if len(e.ec2.requests) != tt.wantLaunchCalls {
				t.Errorf("Launch calls = %d, want %d", len(e.ec2.requests), tt.wantLaunchCalls)
			}
			uids := map[types.UID]bool{}
			for _, r := range e.ec2.requests {
				uids[r.NodeClaim.UID] = true
			}
			if len(uids) != 1 {
				t.Errorf("Launch calls carried %d NodeClaim UIDs (ClientTokens), want 1", len(uids))
			}
			if len(e.ec2.instances) != 1 {
				t.Errorf("instances launched = %d, want 1", len(e.ec2.instances))
			}
			if diff := cmp.Diff([]string{name}, e.store.creates); diff != "" {
				t.Errorf("NodeClaims created mismatch (-want +got):\n%s", diff)
			}
			stored, _ := e.store.GetNodeClaim(t.Context(), name)
			if stored.Status.ProviderID != e.ec2.instances[0].ProviderID() {
				t.Errorf("stored providerID = %q, want %q", stored.Status.ProviderID, e.ec2.instances[0].ProviderID())
			}
		})
	}
}

func launchedCondition(c v1.NodeClaim) metav1.Condition {
	for _, cond := range c.Status.Conditions {
		if cond.Type == v1.ConditionTypeLaunched {
			return cond
		}
	}
	return metav1.Condition{}
}

func TestProvisionInsufficientCapacity(t *testing.T) {
	// One type in one zone, spot or on-demand: the only way to launch after
	// a spot capacity error is on-demand (karpenter-spec 11.3 item 13).
	pool := nodePool(t, "default", `
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}`)
	e := newEnv([]v1.NodePool{pool}, []v1.EC2NodeClass{nodeClass(t)})
	spot := catalog.OfferingKey{CapacityType: v1.CapacityTypeSpot, InstanceType: "m5.large", Zone: "us-east-1a"}
	e.ec2.ice[spot] = true
	p := e.provisioner(t)

	res, err := p.Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0)
	if err != nil {
		t.Fatalf("first Provision() error = %v", err)
	}
	first := provisioning.ClaimName("default", "batch-1", 0)
	if got := res.Launches; len(got) != 1 || got[0].Status != launch.InsufficientCapacity {
		t.Fatalf("first round launches = %+v, want one InsufficientCapacity", got)
	}
	wantMarks := []mark{{Offering: spot, Code: "InsufficientInstanceCapacity", Until: t0.Add(3 * time.Minute)}}
	if diff := cmp.Diff(wantMarks, e.offerings.marks); diff != "" {
		t.Errorf("offerings marked unavailable mismatch (-want +got):\n%s", diff)
	}
	if _, err := e.store.GetNodeClaim(t.Context(), first); !errors.Is(err, v1.ErrNotFound) {
		t.Errorf("NodeClaim %s after the capacity error: err = %v, want it deleted", first, err)
	}
	if len(res.Batch.NodeClaims) != 0 || len(res.Batch.Nominations) != 0 {
		t.Errorf("answer keeps %d nodeclaims and %d nominations, want none", len(res.Batch.NodeClaims), len(res.Batch.Nominations))
	}
	if reason := res.Batch.Unschedulable["uid-a"]; !strings.Contains(reason, first) || !strings.Contains(reason, "InsufficientCapacity") {
		t.Errorf("pod a unschedulable reason = %q, want it to name %s and InsufficientCapacity", reason, first)
	}

	// The next round, 10 s later: the pod is still pending.
	res, err = p.Provision(t.Context(), podBatch("batch-2", podSummary("a", "1")), t0.Add(10*time.Second))
	if err != nil {
		t.Fatalf("second Provision() error = %v", err)
	}
	second := provisioning.ClaimName("default", "batch-2", 0)
	if got := res.Launches; len(got) != 1 || got[0].Status != launch.Launched {
		t.Fatalf("second round launches = %+v, want one Launched", got)
	}
	stored, err := e.store.GetNodeClaim(t.Context(), second)
	if err != nil {
		t.Fatalf("second NodeClaim: %v", err)
	}
	if ct := requirements.FromNodeSelector(stored.Spec.Requirements).Get(v1.LabelCapacityType); ct == nil || ct.Has(v1.CapacityTypeSpot) {
		t.Errorf("second NodeClaim capacity-type requirement = %v, want spot excluded", ct)
	}
	if got := stored.Labels[v1.LabelCapacityType]; got != v1.CapacityTypeOnDemand {
		t.Errorf("second NodeClaim launched as %q, want on-demand", got)
	}
	if diff := cmp.Diff(map[types.UID]v1.Nomination{"uid-a": {NodeClaim: second}}, res.Batch.Nominations); diff != "" {
		t.Errorf("second round nominations mismatch (-want +got):\n%s", diff)
	}
}

func TestProvisionUsesExistingCapacity(t *testing.T) {
	inflight := launchedClaim("default-inflight", "aws:///us-east-1a/i-0inflight", "m5.xlarge", "3920m")
	registered := launchedClaim("default-registered", "aws:///us-east-1b/i-0registered", "m5.xlarge", "3920m")
	node := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1.ec2.internal", Labels: map[string]string{
			v1.LabelNodePool: "default", v1.LabelInstanceType: "m5.xlarge", v1.LabelTopologyZone: "us-east-1b",
			v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelRegistered: "true", v1.LabelInitialized: "true",
			v1.LabelArch: "amd64", v1.LabelOS: "linux",
		}},
		Spec: corev1.NodeSpec{ProviderID: registered.Status.ProviderID},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3920m"), corev1.ResourceMemory: resource.MustParse("14162Mi"), corev1.ResourcePods: resource.MustParse("58")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	busy := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: "default", UID: "uid-busy"},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
		}}}},
	}
	tests := []struct {
		name    string
		claims  []v1.NodeClaim
		cluster provisioning.ClusterState
		pods    []v1.PodSummary
		want    map[types.UID]v1.Nomination
	}{
		{
			name:   "should nominate pods that fit an in-flight NodeClaim to it and launch nothing",
			claims: []v1.NodeClaim{inflight},
			pods:   []v1.PodSummary{podSummary("a", "1"), podSummary("b", "1")},
			want:   map[types.UID]v1.Nomination{"uid-a": {NodeClaim: "default-inflight"}, "uid-b": {NodeClaim: "default-inflight"}},
		},
		{
			name:    "should nominate a pod that fits a registered node to the Node",
			claims:  []v1.NodeClaim{registered},
			cluster: provisioning.ClusterState{Nodes: []corev1.Node{node}},
			pods:    []v1.PodSummary{podSummary("a", "500m")},
			want:    map[types.UID]v1.Nomination{"uid-a": {Node: node.Name}},
		},
		{
			name:    "should count pods bound to a registered node against its room",
			claims:  []v1.NodeClaim{registered, inflight},
			cluster: provisioning.ClusterState{Nodes: []corev1.Node{node}, Pods: []corev1.Pod{busy}},
			pods:    []v1.PodSummary{podSummary("a", "1500m")},
			want:    map[types.UID]v1.Nomination{"uid-a": {NodeClaim: "default-inflight"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
			for _, c := range tt.claims {
				e.store.put(c)
			}
			e.cluster.state = tt.cluster
			res, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", tt.pods...), t0)
			if err != nil {
				t.Fatalf("Provision() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, res.Batch.Nominations); diff != "" {
				t.Errorf("Nominations mismatch (-want +got):\n%s", diff)
			}
			if len(res.Batch.NodeClaims) != 0 || len(e.ec2.requests) != 0 || len(e.store.creates) != 0 {
				t.Errorf("created %d nodeclaims and launched %d, want none", len(e.store.creates), len(e.ec2.requests))
			}
		})
	}
}

// launchedClaim is a NodeClaim of pool "default" launched as an on-demand
// m5.xlarge-like node with the given cpu allocatable.
func launchedClaim(name, providerID, instanceType, cpu string) v1.NodeClaim {
	zone := strings.Split(strings.TrimPrefix(providerID, "aws:///"), "/")[0]
	c := v1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: v1.KindNodeClaim},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-2 * time.Minute)),
			Labels: map[string]string{
				v1.LabelNodePool: "default", v1.LabelEC2NodeClass: "default", v1.LabelInstanceType: instanceType,
				v1.LabelTopologyZone: zone, v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelArch: "amd64", v1.LabelOS: "linux",
			}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{instanceType}}},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
		},
		Status: v1.NodeClaimStatus{
			ProviderID:  providerID,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("14162Mi"), corev1.ResourcePods: resource.MustParse("58")},
			Conditions: []metav1.Condition{
				{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))},
				{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionUnknown, Reason: "AwaitingReconciliation", LastTransitionTime: metav1.NewTime(t0.Add(-2 * time.Minute))},
			},
		},
	}
	return c
}

func TestProvisionLeavesOutUnusableConfiguration(t *testing.T) {
	tests := []struct {
		name        string
		pools       func(t *testing.T) []v1.NodePool
		resolveErr  error
		wantWarning string
	}{
		{
			name: "should leave out an invalid NodePool and report its pods unschedulable",
			pools: func(t *testing.T) []v1.NodePool {
				np := nodePool(t, "default", onDemandM5)
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}})
				return []v1.NodePool{np}
			},
			wantWarning: "NodePool default left out: invalid",
		},
		{
			name:        "should leave out an EC2NodeClass that does not resolve",
			pools:       func(t *testing.T) []v1.NodePool { return []v1.NodePool{nodePool(t, "default", onDemandM5)} },
			resolveErr:  errors.New("no subnets match subnetSelectorTerms"),
			wantWarning: "EC2NodeClass default left out: resolve: no subnets match",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(tt.pools(t), []v1.EC2NodeClass{nodeClass(t)})
			if tt.resolveErr != nil {
				e.resolver.fail = map[string]error{"default": tt.resolveErr}
			}
			res, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0)
			if err != nil {
				t.Fatalf("Provision() error = %v", err)
			}
			if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, tt.wantWarning) }) {
				t.Errorf("Warnings = %q, want one containing %q", res.Warnings, tt.wantWarning)
			}
			if res.Batch.Unschedulable["uid-a"] == "" || len(e.ec2.requests) != 0 {
				t.Errorf("pod a: unschedulable %q, %d launches; want a reason and no launch", res.Batch.Unschedulable["uid-a"], len(e.ec2.requests))
			}
		})
	}
}

func TestProvisionAbandonsPlannedNodeClaimsGarbageCollected(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	e.ec2.errs = []error{errors.New("InternalError")}
	batch := podBatch("batch-1", podSummary("a", "1"))
	if _, err := e.provisioner(t).Provision(t.Context(), batch, t0); !errors.Is(err, provisioning.ErrLaunchIncomplete) {
		t.Fatalf("first Provision() error = %v, want ErrLaunchIncomplete", err)
	}
	// Garbage collection removed the unlaunched NodeClaim at its timeout.
	name := provisioning.ClaimName("default", "batch-1", 0)
	claim, _ := e.store.GetNodeClaim(t.Context(), name)
	if err := e.store.DeleteNodeClaim(t.Context(), name, claim.ResourceVersion); err != nil {
		t.Fatal(err)
	}

	res, err := e.provisioner(t).Provision(t.Context(), batch, t0.Add(provisioning.LaunchTimeout+time.Second))
	if err != nil {
		t.Fatalf("late retry Provision() error = %v", err)
	}
	if got := res.Launches; len(got) != 1 || got[0].Status != launch.Abandoned {
		t.Errorf("launches = %+v, want one Abandoned", got)
	}
	if len(e.store.creates) != 1 || len(e.ec2.requests) != 1 {
		t.Errorf("creates %d, launch calls %d; want the NodeClaim not recreated or relaunched", len(e.store.creates), len(e.ec2.requests))
	}
	if res.Batch.Unschedulable["uid-a"] == "" {
		t.Error("pod a has no unschedulable reason after its NodeClaim was abandoned")
	}
}

func TestProvisionErrors(t *testing.T) {
	tests := []struct {
		name  string
		batch *v1.PodBatch
		want  error
	}{
		{name: "should reject a nil batch", batch: nil, want: provisioning.ErrInvalidInput},
		{name: "should reject a batch without id", batch: podBatch("", podSummary("a", "1")), want: provisioning.ErrInvalidInput},
		{
			name: "should reject another cluster's batch",
			batch: func() *v1.PodBatch {
				b := podBatch("batch-1", podSummary("a", "1"))
				b.Cluster = "other"
				return b
			}(),
			want: provisioning.ErrInvalidInput,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
			_, err := e.provisioner(t).Provision(t.Context(), tt.batch, t0)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Provision() error = %v, want %v", err, tt.want)
			}
			if len(e.store.creates) != 0 || len(e.ec2.requests) != 0 || len(e.store.batches) != 0 {
				t.Errorf("a rejected batch wrote %d nodeclaims, %d batch results and launched %d", len(e.store.creates), len(e.store.batches), len(e.ec2.requests))
			}
		})
	}
}

// TestProvisionTreatsSolverInvalidInputAsInvalid: a cluster state the solver
// refuses (here one node listed twice, as a snapshot whose parts both list
// it, stored before intake checked parts against each other, merges) fails
// every redelivery the same way, so Provision reports ErrInvalidInput and its
// caller drops the batch at once instead of retrying it at the head of the
// cluster's FIFO group.
func TestProvisionTreatsSolverInvalidInputAsInvalid(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	node := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "twice", Labels: map[string]string{corev1.LabelHostname: "twice"}},
		Status:     corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}},
	}
	e.cluster.state.Nodes = []corev1.Node{node, node}
	_, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0)
	if !errors.Is(err, provisioning.ErrInvalidInput) || !errors.Is(err, scheduling.ErrInvalidInput) {
		t.Fatalf("Provision() error = %v, want provisioning.ErrInvalidInput wrapping the solver's", err)
	}
	if len(e.store.creates) != 0 || len(e.ec2.requests) != 0 {
		t.Errorf("wrote %d nodeclaims and launched %d, want none", len(e.store.creates), len(e.ec2.requests))
	}
}

func TestProvisionStopsWhenThePlanCannotBeStored(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	p, err := provisioning.NewProvisioner(provisioning.ProvisionerPorts{
		Claims: e.store, Config: e.config, NodeClass: e.resolver, Cluster: e.cluster,
		Offerings: e.offerings, Batches: failingBatches{}, Launcher: e.ec2,
	}, provisioning.ProvisionerOptions{Cluster: testCluster, Region: testRegion})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0); err == nil {
		t.Fatal("Provision() error = nil, want the store failure")
	}
	if len(e.store.creates) != 0 || len(e.ec2.requests) != 0 {
		t.Errorf("wrote %d nodeclaims and launched %d before the plan was stored, want none", len(e.store.creates), len(e.ec2.requests))
	}
}

type failingBatches struct{}

func (failingBatches) BatchResult(context.Context, string) (v1.PodBatchResult, bool, error) {
	return v1.PodBatchResult{}, false, nil
}

func (failingBatches) PutBatchResult(context.Context, v1.PodBatchResult) error {
	return errors.New("ProvisionedThroughputExceededException")
}

func TestNewProvisionerErrors(t *testing.T) {
	e := newEnv(nil, nil)
	full := provisioning.ProvisionerPorts{
		Claims: e.store, Config: e.config, NodeClass: e.resolver, Cluster: e.cluster,
		Offerings: e.offerings, Batches: e.store, Launcher: e.ec2,
	}
	tests := []struct {
		name  string
		ports func(p provisioning.ProvisionerPorts) provisioning.ProvisionerPorts
		opts  provisioning.ProvisionerOptions
		want  string
	}{
		{name: "should require a launcher", ports: func(p provisioning.ProvisionerPorts) provisioning.ProvisionerPorts { p.Launcher = nil; return p },
			opts: provisioning.ProvisionerOptions{Cluster: testCluster, Region: testRegion}, want: "Launcher: required"},
		{name: "should require the cluster name", ports: func(p provisioning.ProvisionerPorts) provisioning.ProvisionerPorts { return p },
			opts: provisioning.ProvisionerOptions{Region: testRegion}, want: "Cluster: required"},
		{name: "should require the region", ports: func(p provisioning.ProvisionerPorts) provisioning.ProvisionerPorts { return p },
			opts: provisioning.ProvisionerOptions{Cluster: testCluster}, want: "Region: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := provisioning.NewProvisioner(tt.ports(full), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewProvisioner() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestClaimName(t *testing.T) {
	dns := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	seen := map[string]string{}
	for _, batch := range []string{"batch-1", "batch-2", "Batch_1"} {
		for i := range 50 {
			name := provisioning.ClaimName("default", batch, i)
			if again := provisioning.ClaimName("default", batch, i); again != name {
				t.Fatalf("ClaimName(%q, %d) = %q then %q, want the same", batch, i, name, again)
			}
			if !strings.HasPrefix(name, "default-") || len(name) != len("default-")+10 || !dns.MatchString(name) {
				t.Errorf("ClaimName(%q, %d) = %q, want default-<10 [a-z2-7]>", batch, i, name)
			}
			if prev, dup := seen[name]; dup {
				t.Errorf("ClaimName(%q, %d) = %q, same as %s", batch, i, name, prev)
			}
			seen[name] = batch
		}
	}
}

func TestProvisionIsDeterministic(t *testing.T) {
	run := func() []v1.NodeClaim {
		e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
		batch := podBatch("batch-1", podSummary("a", "1"), podSummary("b", "3"), podSummary("c", "2"), podSummary("d", "500m"))
		if _, err := e.provisioner(t).Provision(t.Context(), batch, t0); err != nil {
			t.Fatalf("Provision() error = %v", err)
		}
		claims, _ := e.store.ListNodeClaims(t.Context())
		return claims
	}
	first, second := run(), run()
	if len(first) == 0 {
		t.Fatal("no NodeClaims written")
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("two runs on the same input wrote different NodeClaims (-first +second):\n%s", diff)
	}
}

func TestProvisionMarksOfferingsThatFailedWhileAnotherLaunched(t *testing.T) {
	pool := nodePool(t, "default", `
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}`)
	e := newEnv([]v1.NodePool{pool}, []v1.EC2NodeClass{nodeClass(t)})
	iced := catalog.OfferingKey{CapacityType: v1.CapacityTypeSpot, InstanceType: "m5.large", Zone: "us-east-1a"}
	e.ec2.ice[iced] = true

	res, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0)
	if err != nil {
		t.Fatalf("Provision() error = %v", err)
	}
	if got := res.Launches; len(got) != 1 || got[0].Status != launch.Launched || !strings.HasPrefix(got[0].ProviderID, "aws:///us-east-1b/") {
		t.Fatalf("launches = %+v, want one Launched in us-east-1b", got)
	}
	wantMarks := []mark{{Offering: iced, Code: "InsufficientInstanceCapacity", Until: t0.Add(catalog.UnavailableOfferingsTTL)}}
	if diff := cmp.Diff(wantMarks, e.offerings.marks); diff != "" {
		t.Errorf("offerings marked unavailable mismatch (-want +got):\n%s", diff)
	}
}

func TestProvisionDeletesNodeClaimsOfANodeClassThatIsNoLongerReady(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	e.ec2.errs = []error{errors.New("InternalError")}
	batch := podBatch("batch-1", podSummary("a", "1"))
	if _, err := e.provisioner(t).Provision(t.Context(), batch, t0); !errors.Is(err, provisioning.ErrLaunchIncomplete) {
		t.Fatalf("first Provision() error = %v, want ErrLaunchIncomplete", err)
	}
	e.resolver.fail = map[string]error{"default": errors.New("no security groups match")}

	res, err := e.provisioner(t).Provision(t.Context(), batch, t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("retry Provision() error = %v", err)
	}
	name := provisioning.ClaimName("default", "batch-1", 0)
	if got := res.Launches; len(got) != 1 || got[0].Status != launch.NodeClassNotReady {
		t.Errorf("launches = %+v, want one NodeClassNotReady", got)
	}
	if _, err := e.store.GetNodeClaim(t.Context(), name); !errors.Is(err, v1.ErrNotFound) {
		t.Errorf("NodeClaim %s: err = %v, want it deleted", name, err)
	}
	if len(e.ec2.requests) != 1 {
		t.Errorf("Launch calls = %d, want only the first attempt's", len(e.ec2.requests))
	}
}

func TestProvisionMovesPodsOffLeavingNodes(t *testing.T) {
	tolerateAll := func(p *v1.PodSummary) {
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	tests := []struct {
		name  string
		claim func(*v1.NodeClaim)
		node  func(*corev1.Node)
	}{
		{
			name: "should not place pods on a node tainted karpenter.sh/disrupted, even pods tolerating it",
			node: func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: v1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
			},
		},
		{
			name: "should not place pods on a node whose NodeClaim is being deleted",
			claim: func(c *v1.NodeClaim) {
				ts := metav1.NewTime(t0)
				c.DeletionTimestamp = &ts
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := launchedClaim("default-old", "aws:///us-east-1a/i-0old", "m5.xlarge", "3920m")
			node := corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-9.ec2.internal", Labels: map[string]string{
					v1.LabelNodePool: "default", v1.LabelInstanceType: "m5.xlarge", v1.LabelTopologyZone: "us-east-1a",
					v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelInitialized: "true", v1.LabelArch: "amd64", v1.LabelOS: "linux",
				}},
				Spec: corev1.NodeSpec{ProviderID: claim.Status.ProviderID},
				Status: corev1.NodeStatus{
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3920m"), corev1.ResourceMemory: resource.MustParse("14162Mi"), corev1.ResourcePods: resource.MustParse("58")},
					Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				},
			}
			if tt.claim != nil {
				tt.claim(&claim)
			}
			if tt.node != nil {
				tt.node(&node)
			}
			moving := podSummary("a", "1")
			tolerateAll(&moving)
			moving.NodeName = node.Name
			e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
			e.store.put(claim)
			e.cluster.state = provisioning.ClusterState{Nodes: []corev1.Node{node}, Pods: []corev1.Pod{*moving.Pod()}}

			res, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", moving), t0)
			if err != nil {
				t.Fatalf("Provision() error = %v", err)
			}
			want := map[types.UID]v1.Nomination{"uid-a": {NodeClaim: provisioning.ClaimName("default", "batch-1", 0)}}
			if diff := cmp.Diff(want, res.Batch.Nominations); diff != "" {
				t.Errorf("Nominations mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProvisionConcurrentDeliveriesLaunchEachNodeClaimOnce(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	batch := podBatch("batch-1", podSummary("a", "3"))
	// Both deliveries solve before either stores its plan, and both reach
	// EC2 before either records the instance: the worst interleaving.
	b := &barrierBatches{store: e.store}
	b.arrived.Add(2)
	l := &barrierLauncher{ec2: e.ec2}
	l.arrived.Add(2)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			p, err := provisioning.NewProvisioner(provisioning.ProvisionerPorts{
				Claims: e.store, Config: e.config, NodeClass: e.resolver, Cluster: e.cluster,
				Offerings: e.offerings, Batches: b, Launcher: l,
			}, provisioning.ProvisionerOptions{Cluster: testCluster, Region: testRegion})
			if err == nil {
				_, err = p.Provision(context.Background(), batch, t0.Add(time.Duration(i)*time.Second))
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Provision() error = %v", err)
		}
	}
	claims, _ := e.store.ListNodeClaims(t.Context())
	if len(claims) != 1 || len(e.ec2.requests) != 2 || len(e.ec2.instances) != 1 {
		t.Fatalf("%d NodeClaims, %d launch calls, %d instances; want 1 NodeClaim launched twice with one ClientToken, 1 instance",
			len(claims), len(e.ec2.requests), len(e.ec2.instances))
	}
	if got, want := claims[0].Status.ProviderID, e.ec2.instances[0].ProviderID(); got != want {
		t.Errorf("NodeClaim providerID = %q, want %q", got, want)
	}
}

// barrierBatches holds the first two PutBatchResult calls (the two plans)
// until both have arrived.
type barrierBatches struct {
	store   *store
	arrived sync.WaitGroup
	mu      sync.Mutex
	puts    int
}

func (b *barrierBatches) BatchResult(ctx context.Context, id string) (v1.PodBatchResult, bool, error) {
	return b.store.BatchResult(ctx, id)
}

func (b *barrierBatches) PutBatchResult(ctx context.Context, r v1.PodBatchResult) error {
	b.mu.Lock()
	b.puts++
	first := b.puts <= 2
	b.mu.Unlock()
	if first {
		b.arrived.Done()
		b.arrived.Wait()
	}
	return b.store.PutBatchResult(ctx, r)
}

// barrierLauncher holds the first two Launch calls until both have arrived.
type barrierLauncher struct {
	ec2     *ec2
	arrived sync.WaitGroup
	mu      sync.Mutex
	calls   int
}

func (l *barrierLauncher) Launch(ctx context.Context, req provisioning.LaunchRequest) (provisioning.LaunchResult, error) {
	l.mu.Lock()
	l.calls++
	first := l.calls <= 2
	l.mu.Unlock()
	if first {
		l.arrived.Done()
		l.arrived.Wait()
	}
	return l.ec2.Launch(ctx, req)
}

// TestProvisionCountsTheBatchDaemonSets is issue 19 item 9: the DaemonSets
// a batch carries are as fresh as its pods and replace the snapshot's
// (Karpenter reads DaemonSets at solve time); a batch without them (an
// older forwarder) falls back to the snapshot's.
func TestProvisionCountsTheBatchDaemonSets(t *testing.T) {
	agent := func(cpu string) v1.DaemonSetSummary {
		return v1.DaemonSetSummary{Name: "agent", Namespace: "kube-system", UID: "uid-agent", Template: v1.PodSummary{
			Name: "agent", Namespace: "kube-system",
			Spec: v1.PodSpecSummary{
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []v1.ContainerSummary{{Name: "c", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}},
			},
		}}
	}
	inflight := launchedClaim("default-inflight", "aws:///us-east-1a/i-0inflight", "m5.large", "1900m")
	tests := []struct {
		name       string
		snapshot   []v1.DaemonSetSummary
		batch      []v1.DaemonSetSummary
		wantLaunch bool
	}{
		{name: "should launch for a pod the batch's new DaemonSet leaves no room for on the in-flight NodeClaim", batch: []v1.DaemonSetSummary{agent("500m")}, wantLaunch: true},
		{name: "should use the in-flight NodeClaim when the batch says the snapshot's DaemonSet is gone", snapshot: []v1.DaemonSetSummary{agent("500m")}, batch: []v1.DaemonSetSummary{}},
		{name: "should count the snapshot's DaemonSets for a batch without any", snapshot: []v1.DaemonSetSummary{agent("500m")}, wantLaunch: true},
		{name: "should use the in-flight NodeClaim when no DaemonSet is known"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
			e.store.put(inflight)
			for _, ds := range tt.snapshot {
				e.cluster.state.DaemonSets = append(e.cluster.state.DaemonSets, ds.DaemonSet())
			}
			batch := podBatch("batch-1", podSummary("a", "1600m"))
			batch.DaemonSets = tt.batch
			res, err := e.provisioner(t).Provision(t.Context(), batch, t0)
			if err != nil {
				t.Fatalf("Provision() error = %v", err)
			}
			launched := len(res.Batch.NodeClaims) > 0
			if launched == (res.Batch.Nominations["uid-a"].NodeClaim == "default-inflight") || launched != tt.wantLaunch {
				t.Errorf("launched %d NodeClaims, nominations %v; want a launch: %v", len(res.Batch.NodeClaims), res.Batch.Nominations, tt.wantLaunch)
			}
		})
	}
}

// TestProvisionPlacesPodsInTheirVolumesZone is issue 19 item 5 through the
// provisioner: the batch's claims and classes reach the solver, so a pod
// whose unbound claim's WaitForFirstConsumer class allows one zone gets a
// NodeClaim there.
func TestProvisionPlacesPodsInTheirVolumesZone(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
	pod := podSummary("db-0", "1")
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}
	batch := podBatch("batch-1", pod)
	class, wffc := "zonal", storagev1.VolumeBindingWaitForFirstConsumer
	batch.Volumes = v1.VolumeObjects{
		Claims: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "data-db-0"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}},
		StorageClasses: []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: class}, VolumeBindingMode: &wffc,
			AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: v1.LabelTopologyZone, Values: []string{"us-east-1b"}}}}}}},
	}
	res, err := e.provisioner(t).Provision(t.Context(), batch, t0)
	if err != nil {
		t.Fatalf("Provision() error = %v", err)
	}
	if len(res.Batch.NodeClaims) != 1 {
		t.Fatalf("NodeClaims = %d (unschedulable %v), want 1", len(res.Batch.NodeClaims), res.Batch.Unschedulable)
	}
	if z := requirements.FromNodeSelector(res.Batch.NodeClaims[0].Spec.Requirements).Get(v1.LabelTopologyZone).Values(); !slices.Equal(z, []string{"us-east-1b"}) {
		t.Errorf("NodeClaim zones %v, want [us-east-1b]", z)
	}

	// Without the claim the pod waits, and the reason names it.
	batch = podBatch("batch-2", pod)
	res, err = e.provisioner(t).Provision(t.Context(), batch, t0)
	if err != nil {
		t.Fatalf("Provision() error = %v", err)
	}
	if why := res.Batch.Unschedulable[pod.UID]; !strings.Contains(why, "data-db-0") || len(res.Batch.NodeClaims) != 0 {
		t.Errorf("without the claim: reason %q, %d NodeClaims; want a reason naming data-db-0 and none", why, len(res.Batch.NodeClaims))
	}
}

// TestProvisionCountsTheNodesCSIAttachLimits is issue 19 item 5 through
// the provisioner: the snapshot's CSINode limits and the claims of the
// node's bound pods reach the solver, so a pod whose claim would pass the
// node's EBS attach limit is not nominated to it.
func TestProvisionCountsTheNodesCSIAttachLimits(t *testing.T) {
	const ebs = "ebs.csi.aws.com"
	inflight := launchedClaim("default-inflight", "aws:///us-east-1a/i-0inflight", "m5.xlarge", "3920m")
	registered := launchedClaim("default-registered", "aws:///us-east-1b/i-0registered", "m5.xlarge", "3920m")
	node := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1.ec2.internal", Labels: map[string]string{
			v1.LabelNodePool: "default", v1.LabelInstanceType: "m5.xlarge", v1.LabelTopologyZone: "us-east-1b",
			v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelRegistered: "true", v1.LabelInitialized: "true",
			v1.LabelArch: "amd64", v1.LabelOS: "linux",
		}},
		Spec: corev1.NodeSpec{ProviderID: registered.Status.ProviderID},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3920m"), corev1.ResourceMemory: resource.MustParse("14162Mi"), corev1.ResourcePods: resource.MustParse("58")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	claimVolume := func(claim string) []corev1.Volume {
		return []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	}
	db := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "default", UID: "uid-db-0"},
		Spec: corev1.PodSpec{NodeName: node.Name, Volumes: claimVolume("data-db-0"), Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}}}},
	}
	gp3, wffc := "gp3", storagev1.VolumeBindingWaitForFirstConsumer
	attached := scheduling.Volumes{
		Claims: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data-db-0",
			Annotations: map[string]string{v1.AnnotationBindCompleted: "yes"}}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-db-0"}}},
		PersistentVolumes: []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-db-0"},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: ebs}}}}},
	}
	for _, tt := range []struct {
		name  string
		limit int
		want  v1.Nomination
	}{
		{name: "should not nominate a pod to a Node whose EBS attach limit its claim would pass", limit: 1, want: v1.Nomination{NodeClaim: "default-inflight"}},
		{name: "should nominate a pod to a Node with room under its EBS attach limit", limit: 2, want: v1.Nomination{Node: node.Name}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
			e.store.put(registered)
			e.store.put(inflight)
			e.cluster.state = provisioning.ClusterState{Nodes: []corev1.Node{node}, Pods: []corev1.Pod{db}, Volumes: attached,
				VolumeLimits: map[string]map[string]int{node.Name: {ebs: tt.limit}}}
			pod := podSummary("db-1", "500m")
			pod.Spec.Volumes = claimVolume("data-db-1")
			batch := podBatch("batch-1", pod)
			batch.Volumes = v1.VolumeObjects{
				Claims:         []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data-db-1"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gp3}}},
				StorageClasses: []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: gp3}, Provisioner: ebs, VolumeBindingMode: &wffc}},
			}
			res, err := e.provisioner(t).Provision(t.Context(), batch, t0)
			if err != nil {
				t.Fatalf("Provision() error = %v", err)
			}
			if diff := cmp.Diff(map[types.UID]v1.Nomination{pod.UID: tt.want}, res.Batch.Nominations); diff != "" {
				t.Errorf("Nominations mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProvisionLabelsTheNodeClaimWithItsPlacementGroup(t *testing.T) {
	for _, pg := range []*v1.PlacementGroup{nil, {ID: "pg-0a1", Name: "training", Strategy: "cluster"}} {
		e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5)}, []v1.EC2NodeClass{nodeClass(t)})
		e.resolver.placementGroup = pg
		if _, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0); err != nil {
			t.Fatalf("Provision() error = %v", err)
		}
		stored, err := e.store.GetNodeClaim(t.Context(), provisioning.ClaimName("default", "batch-1", 0))
		if err != nil {
			t.Fatalf("stored nodeclaim: %v", err)
		}
		got, ok := stored.Labels[v1.LabelPlacementGroupID]
		if pg == nil && ok || pg != nil && got != pg.ID {
			t.Errorf("group %+v: label %s = %q (set %t); want the group's ID, unset without one", pg, v1.LabelPlacementGroupID, got, ok)
		}
	}
}

func TestProvisionLabelsTheNodeClaimWithItsLaunchedTenancy(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"[dedicated]", "dedicated"},
		{"[default, dedicated]", "default"},
	} {
		e := newEnv([]v1.NodePool{nodePool(t, "default", onDemandM5+`
      - {key: karpenter.k8s.aws/instance-tenancy, operator: In, values: `+tc.values+`}`)}, []v1.EC2NodeClass{nodeClass(t)})
		if _, err := e.provisioner(t).Provision(t.Context(), podBatch("batch-1", podSummary("a", "1")), t0); err != nil {
			t.Fatalf("Provision() error = %v", err)
		}
		stored, err := e.store.GetNodeClaim(t.Context(), provisioning.ClaimName("default", "batch-1", 0))
		if err != nil {
			t.Fatalf("stored nodeclaim: %v", err)
		}
		if got := stored.Labels[v1.LabelInstanceTenancy]; got != tc.want {
			t.Errorf("tenancy In %s: label %s = %q, want %q", tc.values, v1.LabelInstanceTenancy, got, tc.want)
		}
	}
}
