package kwoknode

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// fakeInstances is a scripted instance list.
type fakeInstances struct {
	mu  sync.Mutex
	all []ec2sim.Instance
}

func (f *fakeInstances) Instances() []ec2sim.Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ec2sim.Instance(nil), f.all...)
}

func (f *fakeInstances) set(all ...ec2sim.Instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all = all
}

func instance(t *testing.T, id, state string) ec2sim.Instance {
	t.Helper()
	data, err := amifamily.AL2023.UserData(launchOptions())
	if err != nil {
		t.Fatal(err)
	}
	return ec2sim.Instance{
		ID: id, InstanceType: "m5.large", Zone: "us-east-1b", ZoneID: "use1-az2", Architecture: "x86_64", CapacityType: "spot",
		PrivateIP: "10.0.16.4", PrivateDNSName: "ip-10-0-16-4.ec2.internal", State: state, UserData: []byte(data),
	}
}

func nodeNames(t *testing.T, kube *fake.Clientset) []string {
	t.Helper()
	nodes, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	return names
}

func TestBridgeRegistersRunningInstancesAndRemovesTerminatedOnes(t *testing.T) {
	ctx := context.Background()
	sim := &fakeInstances{}
	kube := fake.NewClientset()
	b, err := New(Options{Sim: sim, Kube: kube, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		instances []ec2sim.Instance
		want      []string
	}{
		{name: "should not register a pending instance", instances: []ec2sim.Instance{instance(t, "i-1", "pending")}},
		{name: "should register a running instance", instances: []ec2sim.Instance{instance(t, "i-1", "running")}, want: []string{"ip-10-0-16-4.ec2.internal"}},
		{name: "should delete the node of a terminated instance", instances: []ec2sim.Instance{instance(t, "i-1", "terminated")}},
	}
	for _, step := range steps {
		sim.set(step.instances...)
		if err := b.Sync(ctx); err != nil {
			t.Fatalf("%s: Sync() error = %v", step.name, err)
		}
		if diff := cmp.Diff(step.want, nodeNames(t, kube)); diff != "" {
			t.Errorf("%s: nodes mismatch (-want +got):\n%s", step.name, diff)
		}
	}
}

func TestBridgeDoesNotRecreateANodeDeletedByOthers(t *testing.T) {
	ctx := context.Background()
	sim := &fakeInstances{}
	sim.set(instance(t, "i-1", "running"))
	kube := fake.NewClientset()
	b, err := New(Options{Sim: sim, Kube: kube, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Nodes().Delete(ctx, "ip-10-0-16-4.ec2.internal", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := nodeNames(t, kube); len(got) != 0 {
		t.Errorf("nodes = %v, want none (termination deleted it)", got)
	}
}

func TestNodeForCarriesWhatTheLaunchImplies(t *testing.T) {
	b, err := New(Options{Sim: &fakeInstances{}, Kube: fake.NewClientset(), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.NodeFor(instance(t, "i-1", "running"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Spec.ProviderID, "aws:///us-east-1b/i-1"; got != want {
		t.Errorf("providerID = %q, want %q", got, want)
	}
	wantLabels := map[string]string{
		corev1.LabelHostname: "ip-10-0-16-4.ec2.internal", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
		corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1b", corev1.LabelTopologyRegion: "us-east-1",
		v1.LabelNodePool: "default", v1.LabelCapacityType: "spot", "team": "a", "karpenter.k8s.aws/instance-family": "m5",
	}
	for k, want := range wantLabels {
		if got := n.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	var taints []string
	for _, taint := range n.Spec.Taints {
		taints = append(taints, taint.ToString())
	}
	if diff := cmp.Diff([]string{"node.kubernetes.io/not-ready:NoSchedule", "dedicated=gpu:NoSchedule", "karpenter.sh/unregistered:NoExecute"}, taints); diff != "" {
		t.Errorf("taints mismatch (-want +got):\n%s", diff)
	}
	if got := n.Status.Capacity.Pods().Value(); got != 58 {
		t.Errorf("capacity pods = %d, want the user data's maxPods 58", got)
	}
	if got := n.Status.Capacity.Cpu().Value(); got != 2 {
		t.Errorf("capacity cpu = %d, want m5.large's 2", got)
	}
	if n.Annotations[kwokAnnotation] != kwokValue {
		t.Errorf("annotations = %v, want kwok's %s=%s", n.Annotations, kwokAnnotation, kwokValue)
	}
}

func TestNodeForRejectsWhatNoKubeletCouldRegister(t *testing.T) {
	b, err := New(Options{Sim: &fakeInstances{}, Kube: fake.NewClientset(), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	unknownType := instance(t, "i-1", "running")
	unknownType.InstanceType = "z9.mega"
	badUserData := instance(t, "i-2", "running")
	badUserData.UserData = []byte("--max-pods=lots")
	tests := []struct {
		name string
		in   ec2sim.Instance
	}{
		{name: "should reject an instance type the catalog does not know", in: unknownType},
		{name: "should reject user data that does not parse", in: badUserData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := b.NodeFor(tt.in); err == nil {
				t.Error("NodeFor() error = nil, want one")
			}
		})
	}
}
