package provision_test

// Post-registration tagging, launch-template cleanup and subnet address
// exhaustion (karpenter-spec sections 1.5, 4 steps 5-6 and 9, 5.4; 11.3
// items 14-16), through the real SDK clients against the EC2 simulator
// and kumo.

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	provisionerhandler "github.com/nodewright/nodewright/functions/provisioner/handler"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// registerNode creates the Node of claim and sends its registration
// through the intake API, then drains the queue.
func (e *env) registerNode(t testing.TB, claim v1.NodeClaim, name, regID string) {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: claim.Status.ProviderID, Taints: []corev1.Taint{{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: claim.Status.Allocatable, Capacity: claim.Status.Capacity,
		},
	}
	if _, err := e.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	regs := v1.NodeRegistrations{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindNodeRegistrations},
		ID:       regID, Cluster: cluster, CreatedAt: metav1.NewTime(e.clock.Now()),
		Nodes: []v1.NodeSummary{v1.SummarizeNode(node)},
	}
	if status := e.api.do(t, http.MethodPost, v1.RouteRegistrations, regs.ID, regs, nil); status != http.StatusAccepted {
		t.Fatalf("POST registrations: status %d", status)
	}
	e.drainOK(t)
}

func TestRegisteredInstanceIsTagged(t *testing.T) {
	e := newEnv(t)
	claim := e.launchOne(t)
	id := instanceID(t, claim.Status.ProviderID)
	if inst, _ := e.sim.Instance(id); inst.Tags["Name"] != "" || inst.Tags[v1.TagKeyNodeClaim] != "" {
		t.Fatalf("instance tags at launch %v, want no Name or nodeclaim tag yet", inst.Tags)
	}

	e.registerNode(t, claim, "ip-10-0-0-11.ec2.internal", "reg-1")

	inst, _ := e.sim.Instance(id)
	got := map[string]string{"Name": inst.Tags["Name"], v1.TagKeyNodeClaim: inst.Tags[v1.TagKeyNodeClaim], v1.TagKeyEKSClusterName: inst.Tags[v1.TagKeyEKSClusterName]}
	want := map[string]string{"Name": "ip-10-0-0-11.ec2.internal", v1.TagKeyNodeClaim: claim.Name, v1.TagKeyEKSClusterName: cluster}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instance tags after registration mismatch (-want +got):\n%s", diff)
	}
	stored := e.claims(t)[0]
	if stored.Annotations[v1.AnnotationInstanceTagged] != "true" {
		t.Errorf("NodeClaim annotations %v, want %s=true", stored.Annotations, v1.AnnotationInstanceTagged)
	}
	if out := e.runGC(); len(out.Tagged) != 0 {
		t.Errorf("gc retried tagging %+v, want nothing left", out.Tagged)
	}
}

func TestGarbageCollectionRetriesTagging(t *testing.T) {
	e := newEnv(t)
	claim := e.launchOne(t)
	id := instanceID(t, claim.Status.ProviderID)
	// Registration recorded without tagging (as when CreateTags failed):
	// the NodeClaim has its Node but no tagged annotation.
	stored := e.claims(t)[0]
	stored.Status.NodeName = "ip-10-0-0-12.ec2.internal"
	if _, err := e.store.UpdateNodeClaim(context.Background(), stored); err != nil {
		t.Fatal(err)
	}

	out := e.runGC()
	// eks:eks-cluster-name is a launch tag already: only the other two are
	// added.
	if len(out.Tagged) != 1 || out.Tagged[0].NodeClaim != claim.Name || out.Tagged[0].Error != "" || len(out.Tagged[0].Added) != 2 {
		t.Fatalf("gc tagged %+v, want %s's Name and nodeclaim tags added", out.Tagged, claim.Name)
	}
	if inst, _ := e.sim.Instance(id); inst.Tags["Name"] != "ip-10-0-0-12.ec2.internal" || inst.Tags[v1.TagKeyNodeClaim] != claim.Name {
		t.Errorf("instance tags %v, want Name and nodeclaim", inst.Tags)
	}
	if out := e.runGC(); len(out.Tagged) != 0 {
		t.Errorf("second gc tagged %+v, want nothing (recorded once)", out.Tagged)
	}
}

func TestUnusedLaunchTemplateIsDeleted(t *testing.T) {
	e := newEnv(t)
	e.launchOne(t)
	lts := e.sim.LaunchTemplates()
	if len(lts) == 0 {
		t.Fatal("no launch template after the launch")
	}
	var want []string
	for _, lt := range lts {
		if !strings.HasPrefix(lt.Name, "nodewright/") {
			t.Fatalf("launch template %s, want the nodewright/ prefix", lt.Name)
		}
		want = append(want, lt.ID)
	}
	slices.Sort(want)

	e.clock.Advance(provisioning.LaunchTemplateUnusedTTL - time.Minute)
	if out := e.runGC(); len(out.LaunchTemplates) != 0 {
		t.Fatalf("gc at 9 minutes deleted %+v, want the template kept", out.LaunchTemplates)
	}
	e.clock.Advance(time.Minute)
	out := e.runGC()
	var got []string
	for _, lt := range out.LaunchTemplates {
		if lt.Reason != provisioning.TemplateUnused || lt.Error != "" {
			t.Errorf("deleted %+v, want unused and no error", lt)
		}
		got = append(got, lt.ID)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("gc at 10 minutes deleted (-want +got):\n%s", diff)
	}
	if left := e.sim.LaunchTemplates(); len(left) != 0 {
		t.Errorf("%d launch templates left, want none", len(left))
	}

	// The next launch (a pod the first NodeClaim cannot hold) creates its
	// templates again.
	e.postBatch(t, "b2", pod("web-1", "3", "4Gi"))
	e.drainOK(t)
	launched := 0
	for _, c := range e.claims(t) {
		if c.Status.ProviderID != "" {
			launched++
		}
	}
	if launched != 2 {
		t.Errorf("launched NodeClaims after the next batch = %d, want 2", launched)
	}
	if len(e.sim.LaunchTemplates()) == 0 {
		t.Error("no launch template after the next launch, want them re-created")
	}
}

// vanishingEC2 deletes every launch template a CreateFleet names just
// before the first CreateFleet reaches EC2: the race with garbage
// collection.
type vanishingEC2 struct {
	*ec2.Client
	done    atomic.Bool
	deleted []string
}

func (v *vanishingEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	if v.done.CompareAndSwap(false, true) {
		for _, cfg := range in.LaunchTemplateConfigs {
			name := cfg.LaunchTemplateSpecification.LaunchTemplateName
			if _, err := v.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: name}); err != nil {
				return nil, err
			}
			v.deleted = append(v.deleted, *name)
		}
	}
	return v.Client.CreateFleet(ctx, in, opts...)
}

func TestLaunchSurvivesItsTemplateVanishing(t *testing.T) {
	e := newEnv(t)
	e.launchOne(t)
	before := e.sim.LaunchTemplates()

	opts := e.ec2.Options()
	api := &vanishingEC2{Client: e.ec2}
	env := map[string]string{
		"CLUSTER_NAME": cluster, "TABLE_NAME": e.table, "AWS_REGION": region, "KUBERNETES_VERSION": "1.33",
		"CLUSTER_ENDPOINT": "https://e2e-cluster.example", "CLUSTER_CA_DATA": caData, "SERVICE_CIDR": "10.100.0.0/16", "CLUSTER_DNS": "10.100.0.10",
	}
	pcfg, err := provisionerhandler.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ssmClient := ssm.New(ssm.Options{Region: region, BaseEndpoint: opts.BaseEndpoint, Credentials: creds, HTTPClient: opts.HTTPClient})
	if e.provisioner, err = provisionerhandler.New(pcfg, provisionerhandler.Clients{DynamoDB: e.ddb, EC2: api, SSM: ssmClient, Nodes: kube.NewFromClientset(e.kube)},
		discardLog(), e.clock.Now); err != nil {
		t.Fatal(err)
	}

	e.postBatch(t, "b2", pod("web-1", "3", "4Gi"))
	e.drainOK(t)
	if !api.done.Load() {
		t.Fatal("no CreateFleet reached the vanishing wrapper")
	}
	launched := 0
	for _, c := range e.claims(t) {
		if c.Status.ProviderID != "" {
			launched++
		}
	}
	if launched != 2 {
		t.Errorf("launched NodeClaims = %d, want 2 (the second after one retry)", launched)
	}
	if len(api.deleted) == 0 {
		t.Fatal("the wrapper deleted no launch template")
	}
	oldID := map[string]string{}
	for _, lt := range before {
		oldID[lt.Name] = lt.ID
	}
	for _, name := range api.deleted {
		lt, ok := e.sim.LaunchTemplate(name)
		if !ok || lt.ID == oldID[name] {
			t.Errorf("launch template %s: present %v, ID %s (was %s); want it re-created under a new ID", name, ok, lt.ID, oldID[name])
		}
	}
}

func TestSubnetOutOfAddressesIsSkipped(t *testing.T) {
	e := newEnv(t)
	var subnetA string
	for _, s := range e.sim.Network().Subnets {
		if !s.Public && s.Zone == "us-east-1a" {
			subnetA = s.ID
		}
	}
	if err := e.sim.SetAvailableIPs(subnetA, 0); err != nil {
		t.Fatal(err)
	}
	e.postConfig(t, onDemandM5+`
      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}`)

	e.postBatch(t, "b1", pod("web-0", "1", "2Gi"))
	e.drainOK(t)
	fleets := e.sim.Fleets()
	if len(fleets) != 1 || len(fleets[0].InstanceIDs) != 0 || !strings.Contains(strings.Join(fleets[0].Errors, "\n"), "InsufficientFreeAddressesInSubnet") {
		t.Fatalf("fleets %+v, want one failing with InsufficientFreeAddressesInSubnet", fleets)
	}
	marks, err := e.store.ListUnavailableSubnets(context.Background(), e.clock.Now())
	if err != nil || len(marks) != 1 || marks[0].SubnetID != subnetA || !marks[0].Until.Equal(e.clock.Now().Add(3*time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("unavailable subnets %+v, %v; want %s for 3 minutes", marks, err, subnetA)
	}
	offerings, _ := e.store.ListUnavailable(context.Background(), e.clock.Now())
	if len(offerings) != 0 {
		t.Errorf("unavailable offerings %+v, want none for a full subnet", offerings)
	}

	// The zone's only subnet is out: the pod waits, no CreateFleet.
	e.clock.Advance(time.Minute)
	if err := e.sim.SetAvailableIPs(subnetA, 100); err != nil {
		t.Fatal(err)
	}
	e.postBatch(t, "b2", pod("web-0", "1", "2Gi"))
	e.drainOK(t)
	if n := len(e.sim.Fleets()); n != 1 {
		t.Errorf("fleets within 3 minutes = %d, want still 1", n)
	}
	if res := e.batchResult(t, "b2"); len(res.Unschedulable) != 1 {
		t.Errorf("batch b2 unschedulable %v, want the pod", res.Unschedulable)
	}

	// After 3 minutes the subnet is used again.
	e.clock.Advance(2 * time.Minute)
	e.postBatch(t, "b3", pod("web-0", "1", "2Gi"))
	e.drainOK(t)
	fleets = e.sim.Fleets()
	if len(fleets) != 2 || len(fleets[1].InstanceIDs) != 1 {
		t.Errorf("fleets %+v, want a second one launching in the subnet", fleets)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
