package report_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodewright/nodewright/forwarder/internal/report"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

var (
	epoch     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
)

func pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), CreationTimestamp: metav1.NewTime(epoch)},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "default"}, CreationTimestamp: metav1.NewTime(epoch)},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("58")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(epoch)}},
		},
	}
}

func TestID(t *testing.T) {
	got := report.ID("pb", epoch, []byte("uid-a\n"))
	if !strings.HasPrefix(got, "pb-1767225600000-") || !idPattern.MatchString(got) || len(got) != len("pb-1767225600000-")+16 {
		t.Errorf("ID() = %q", got)
	}
	if report.ID("pb", epoch, []byte("uid-b\n")) == got {
		t.Error("ID() ignores the content")
	}
	if report.ID("pb", epoch.Add(time.Millisecond), []byte("uid-a\n")) == got {
		t.Error("ID() ignores the time")
	}
}

func TestChunk(t *testing.T) {
	item := strings.Repeat("x", 98) // 100 bytes encoded, 101 with its comma
	items := make([]string, 10)
	for i := range items {
		items[i] = item
	}
	tests := []struct {
		name               string
		maxItems, maxBytes int
		want               []int
	}{
		{name: "should keep everything in one chunk when it fits", maxItems: 100, maxBytes: 1 << 20, want: []int{10}},
		{name: "should split by item count", maxItems: 4, maxBytes: 1 << 20, want: []int{4, 4, 2}},
		{name: "should split by encoded size", maxItems: 100, maxBytes: 4096 + 303, want: []int{3, 3, 3, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := report.Chunk(items, tt.maxItems, tt.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, c := range chunks {
				got = append(got, len(c))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunk sizes mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("should refuse an item larger than a message", func(t *testing.T) {
		if _, err := report.Chunk(items, 100, 4096+50); !errors.Is(err, v1.ErrMessageTooLarge) {
			t.Errorf("Chunk() error = %v, want ErrMessageTooLarge", err)
		}
	})
}

// roundTrip encodes msg and decodes it with the contract's decoder, so the
// test checks what the intake API would accept.
func roundTrip[T any](t *testing.T, msg any, decode func([]byte) (*T, []v1.FieldError, error)) *T {
	t.Helper()
	data, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > v1.MaxMessageBytes {
		t.Fatalf("message of %d bytes exceeds MaxMessageBytes", len(data))
	}
	got, warnings, err := decode(data)
	if err != nil {
		t.Fatalf("the intake would reject the message: %v", err)
	}
	if len(warnings) > 0 {
		t.Errorf("decode warnings: %v", warnings)
	}
	return got
}

func TestPodBatches(t *testing.T) {
	t.Run("should build one valid batch for a small window", func(t *testing.T) {
		batches, err := report.PodBatches("prod", epoch, []*corev1.Pod{pod("shop", "a", ""), pod("shop", "b", "")}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(batches) != 1 {
			t.Fatalf("batches = %d, want 1", len(batches))
		}
		got := roundTrip(t, batches[0], v1.DecodePodBatch)
		if len(got.Pods) != 2 || got.ID != report.ID("pb", epoch, []byte("uid-shop-a\nuid-shop-b\n")) {
			t.Errorf("batch = %s with %d pods", got.ID, len(got.Pods))
		}
	})
	t.Run("should split a window larger than MaxPodsPerBatch into valid batches", func(t *testing.T) {
		var pods []*corev1.Pod
		for i := range v1.MaxPodsPerBatch + 10 {
			pods = append(pods, pod("load", fmt.Sprintf("p-%05d", i), ""))
		}
		batches, err := report.PodBatches("prod", epoch, pods, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		ids := map[string]bool{}
		for _, b := range batches {
			got := roundTrip(t, b, v1.DecodePodBatch)
			sizes = append(sizes, len(got.Pods))
			ids[got.ID] = true
		}
		if diff := cmp.Diff([]int{v1.MaxPodsPerBatch, 10}, sizes); diff != "" {
			t.Errorf("batch sizes mismatch (-want +got):\n%s", diff)
		}
		if len(ids) != 2 {
			t.Errorf("batch IDs %v are not distinct", ids)
		}
	})
	t.Run("should build nothing for no pods", func(t *testing.T) {
		if got, err := report.PodBatches("prod", epoch, nil, nil, nil); err != nil || got != nil {
			t.Errorf("PodBatches(nil) = %v, %v", got, err)
		}
	})
}

// volumes is a report.VolumeSource over maps.
type volumes struct {
	claims  map[string]*corev1.PersistentVolumeClaim
	pvs     map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
}

func (v volumes) Claim(ns, name string) (*corev1.PersistentVolumeClaim, bool) {
	c, ok := v.claims[ns+"/"+name]
	return c, ok
}
func (v volumes) PersistentVolume(name string) (*corev1.PersistentVolume, bool) {
	pv, ok := v.pvs[name]
	return pv, ok
}
func (v volumes) StorageClass(name string) (*storagev1.StorageClass, bool) {
	sc, ok := v.classes[name]
	return sc, ok
}

// TestPodBatchesCarryTheVolumesTheirPodsName is issue 19 item 5: each
// batch carries the pods' claim volumes and the claims, bound volumes and
// classes they name, trimmed, and nothing the pods do not name.
func TestPodBatchesCarryTheVolumesTheirPodsName(t *testing.T) {
	gp3, wffc := "gp3", storagev1.VolumeBindingWaitForFirstConsumer
	withVolume := func(p *corev1.Pod, vol corev1.Volume) *corev1.Pod {
		p.Spec.Volumes = append(p.Spec.Volumes, vol, corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}})
		return p
	}
	claimVol := func(claim string) corev1.Volume {
		return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	}
	src := volumes{
		claims: map[string]*corev1.PersistentVolumeClaim{
			"shop/data-db-0": {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-db-0", Labels: map[string]string{"app": "db"},
				Annotations: map[string]string{v1.AnnotationBindCompleted: "yes", "other": "x"}}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}},
			"shop/data-db-1": {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-db-1"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gp3}},
			"shop/unused":    {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "unused"}},
		},
		pvs: map[string]*corev1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}}}}}}}}}},
		classes: map[string]*storagev1.StorageClass{"gp3": {ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc,
			Parameters: map[string]string{"type": "gp3"}}},
	}
	pods := []*corev1.Pod{
		withVolume(pod("shop", "db-0", ""), claimVol("data-db-0")),
		withVolume(pod("shop", "db-1", ""), claimVol("data-db-1")),
		withVolume(pod("shop", "db-2", ""), claimVol("data-db-2")),
		pod("shop", "web-0", ""),
	}
	batches, err := report.PodBatches("prod", epoch, pods, nil, src)
	if err != nil || len(batches) != 1 {
		t.Fatalf("PodBatches() = %d batches, %v; want one", len(batches), err)
	}
	got := roundTrip(t, batches[0], v1.DecodePodBatch)
	var claims []string
	for _, c := range got.Volumes.Claims {
		claims = append(claims, fmt.Sprintf("%s/%s volume=%q annotations=%v labels=%v", c.Namespace, c.Name, c.Spec.VolumeName, c.Annotations, c.Labels))
	}
	want := []string{`shop/data-db-0 volume="pv-1" annotations=map[pv.kubernetes.io/bind-completed:yes] labels=map[]`, `shop/data-db-1 volume="" annotations=map[] labels=map[]`}
	if diff := cmp.Diff(want, claims); diff != "" {
		t.Errorf("claims mismatch (-want +got):\n%s", diff)
	}
	if n := len(got.Volumes.PersistentVolumes); n != 1 || got.Volumes.PersistentVolumes[0].Spec.NodeAffinity == nil || got.Volumes.PersistentVolumes[0].Spec.Capacity != nil {
		t.Errorf("persistent volumes = %+v, want pv-1 with its node affinity only", got.Volumes.PersistentVolumes)
	}
	if n := len(got.Volumes.StorageClasses); n != 1 || got.Volumes.StorageClasses[0].VolumeBindingMode == nil || got.Volumes.StorageClasses[0].Parameters != nil {
		t.Errorf("storage classes = %+v, want gp3 with its binding mode and no parameters", got.Volumes.StorageClasses)
	}
	if vols := got.Pods[0].Spec.Volumes; len(vols) != 1 || vols[0].PersistentVolumeClaim.ClaimName != "data-db-0" {
		t.Errorf("pod db-0 volumes = %+v, want its claim volume only", vols)
	}
	if got.Pods[3].Spec.Volumes != nil {
		t.Errorf("pod web-0 volumes = %+v, want none", got.Pods[3].Spec.Volumes)
	}
}

func unstructuredFrom(t *testing.T, yamlJSON string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(yamlJSON)); err != nil {
		t.Fatal(err)
	}
	return u
}

const nodePoolJSON = `{
  "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
  "metadata": {"name": "default", "uid": "np-uid", "generation": 3, "resourceVersion": "99",
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "team": "infra"},
    "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
  "spec": {
    "template": {"spec": {
      "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
      "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
    "futureField": true
  },
  "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
}`

const nodeClassJSON = `{
  "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
  "metadata": {"name": "default"},
  "spec": {"role": "KarpenterNodeRole-prod", "amiSelectorTerms": [{"alias": "al2023@latest"}],
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}]},
  "status": {"amis": [{"id": "ami-0123", "name": "al2023"}]}
}`

func TestConfig(t *testing.T) {
	nps := []*unstructured.Unstructured{unstructuredFrom(t, nodePoolJSON)}
	ncs := []*unstructured.Unstructured{unstructuredFrom(t, nodeClassJSON)}
	cfg, hash, warnings, err := report.Config("prod", epoch, nps, ncs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"NodePool default: spec.futureField: unknown field (not in Karpenter v1.14.1); ignored"}, warnings); diff != "" {
		t.Errorf("warnings mismatch (-want +got):\n%s", diff)
	}
	got := roundTrip(t, cfg, v1.DecodeClusterConfig)
	np := got.NodePools[0]
	if np.ManagedFields != nil || np.Annotations["team"] != "infra" || len(np.Annotations) != 1 || len(np.Status.Conditions) != 0 || np.Generation != 3 {
		t.Errorf("NodePool metadata/status not cleaned: %+v %+v", np.ObjectMeta, np.Status)
	}
	if got.EC2NodeClasses[0].Spec.Role != "KarpenterNodeRole-prod" || len(got.EC2NodeClasses[0].Status.AMIs) != 0 {
		t.Errorf("EC2NodeClass = %+v", got.EC2NodeClasses[0])
	}
	if nps[0].GetAnnotations()[`kubectl.kubernetes.io/last-applied-configuration`] == "" {
		t.Error("Config() modified the informer's object")
	}

	t.Run("should hash content, not time", func(t *testing.T) {
		later, hash2, _, err := report.Config("prod", epoch.Add(time.Minute), nps, ncs)
		if err != nil {
			t.Fatal(err)
		}
		if hash2 != hash || later.ID == cfg.ID {
			t.Errorf("hash %s -> %s, ID %s -> %s; want same hash, new ID", hash, hash2, cfg.ID, later.ID)
		}
	})
	t.Run("should send an empty config as empty lists", func(t *testing.T) {
		empty, _, _, err := report.Config("prod", epoch, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(empty)
		if !strings.Contains(string(data), `"nodePools":[]`) || !strings.Contains(string(data), `"ec2NodeClasses":[]`) {
			t.Errorf("empty config = %s", data)
		}
	})
	t.Run("should fail rather than drop an object that does not decode", func(t *testing.T) {
		bad := unstructuredFrom(t, `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"broken"},"spec":{"weight":"heavy"}}`)
		_, _, _, err := report.Config("prod", epoch, append(nps, bad), ncs)
		if err == nil || !strings.Contains(err.Error(), "NodePool broken") || !strings.Contains(err.Error(), "spec.weight") {
			t.Errorf("Config() error = %v, want one naming NodePool broken and spec.weight", err)
		}
	})
}

func TestRegistrations(t *testing.T) {
	r := report.NewRegistrations()
	n1 := node("n1", "aws:///us-east-1a/i-1")
	n2 := node("n2", "aws:///us-east-1b/i-2")
	bare := node("fargate-ip-1", "")

	changed, removed := r.Pending([]*corev1.Node{n2, n1, bare})
	if diff := cmp.Diff([]string{"n1", "n2"}, names(changed)); diff != "" || removed != nil {
		t.Fatalf("first Pending() changed %v removed %v", names(changed), removed)
	}
	msgs, err := report.RegistrationMessages("prod", epoch, changed, removed)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("RegistrationMessages() = %d messages, %v", len(msgs), err)
	}
	roundTrip(t, msgs[0], v1.DecodeNodeRegistrations)

	t.Run("should report unacknowledged nodes again", func(t *testing.T) {
		if c, _ := r.Pending([]*corev1.Node{n1, n2}); len(c) != 2 {
			t.Errorf("unacknowledged nodes were dropped: %v", names(c))
		}
	})
	r.Acknowledge(changed, removed)
	t.Run("should report nothing once acknowledged, even when heartbeats move", func(t *testing.T) {
		beat := n1.DeepCopy()
		beat.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(epoch.Add(time.Minute))
		if c, rm := r.Pending([]*corev1.Node{beat, n2}); c != nil || rm != nil {
			t.Errorf("Pending() = %v, %v; want nothing", names(c), rm)
		}
	})
	t.Run("should report a node whose taints changed and a node that left", func(t *testing.T) {
		registered := n1.DeepCopy()
		registered.Labels[v1.LabelRegistered] = "true"
		c, rm := r.Pending([]*corev1.Node{registered})
		if diff := cmp.Diff([]string{"n1"}, names(c)); diff != "" {
			t.Errorf("changed mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]v1.RemovedNode{{Name: "n2", ProviderID: "aws:///us-east-1b/i-2"}}, rm); diff != "" {
			t.Errorf("removed mismatch (-want +got):\n%s", diff)
		}
	})
}

func names(nodes []v1.NodeSummary) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

func TestSnapshot(t *testing.T) {
	maxUnavailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3},
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-node", UID: "ds-uid"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "aws-node"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "aws-node"}}},
		}},
	}
	done := pod("jobs", "done", "n1")
	done.Status.Phase = corev1.PodSucceeded
	pods := []*corev1.Pod{pod("shop", "b", "n1"), pod("shop", "a", "n1"), pod("shop", "pending", ""), done}
	nodes := []*corev1.Node{node("n1", "aws:///us-east-1a/i-1")}

	parts, hash, _, err := report.Snapshot("prod", epoch, nodes, pods, []*policyv1.PodDisruptionBudget{pdb}, []*appsv1.DaemonSet{ds}, nil, report.Storage{})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 {
		t.Fatalf("parts = %d, want 1", len(parts))
	}
	got := roundTrip(t, parts[0], v1.DecodeClusterSnapshot)
	var podNames []string
	for _, p := range got.Pods {
		podNames = append(podNames, p.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, podNames); diff != "" {
		t.Errorf("snapshot pods mismatch (-want +got):\n%s", diff)
	}
	wantDS := v1.DaemonSetSummary{Name: "aws-node", Namespace: "kube-system", UID: "ds-uid", Template: v1.PodSummary{
		Name: "aws-node", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "aws-node"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "aws-node", UID: "ds-uid", Controller: ptr(true)}},
		Spec:            v1.PodSpecSummary{Containers: []v1.ContainerSummary{{Name: "aws-node"}}},
	}}
	if diff := cmp.Diff([]v1.DaemonSetSummary{wantDS}, got.DaemonSets); diff != "" {
		t.Errorf("daemonsets mismatch (-want +got):\n%s", diff)
	}
	if len(got.PodDisruptionBudgets) != 1 || got.PodDisruptionBudgets[0].MaxUnavailable.IntValue() != 1 || got.PodDisruptionBudgets[0].DisruptionsAllowed != 1 {
		t.Errorf("PDBs = %+v", got.PodDisruptionBudgets)
	}
	later, hash2, _, err := report.Snapshot("prod", epoch.Add(time.Minute), nodes, pods, []*policyv1.PodDisruptionBudget{pdb}, []*appsv1.DaemonSet{ds}, nil, report.Storage{})
	if err != nil || hash2 != hash || later[0].SnapshotID == parts[0].SnapshotID {
		t.Errorf("an unchanged cluster: hash %s -> %s, snapshot %s -> %s; want the same hash and a new ID", hash, hash2, parts[0].SnapshotID, later[0].SnapshotID)
	}
}

// TestSnapshotCarriesCSINodeLimitsAndTheBoundPodsClaims is issue 19 item
// 5: the snapshot carries each CSINode's attach limits, the bound pods'
// claim volumes and the claims and PersistentVolumes (with their CSI
// driver) those name, so the solver can count each node's attached
// volumes against its limits.
func TestSnapshotCarriesCSINodeLimitsAndTheBoundPodsClaims(t *testing.T) {
	count := int32(25)
	csiNodes := []*storagev1.CSINode{
		{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "ebs.csi.aws.com", NodeID: "i-1", Allocatable: &storagev1.VolumeNodeResources{Count: &count}}}}},
	}
	src := volumes{
		claims: map[string]*corev1.PersistentVolumeClaim{"shop/data-db-0": {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-db-0",
			Annotations: map[string]string{v1.AnnotationBindCompleted: "yes"}}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}},
		pvs: map[string]*corev1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}}}}},
	}
	db := pod("shop", "db-0", "n1")
	db.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
	}
	pending := pod("shop", "db-1", "")
	pending.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-1"}}}}
	nodes := []*corev1.Node{node("n1", "aws:///us-east-1a/i-1"), node("n2", "aws:///us-east-1a/i-2")}
	parts, hash, _, err := report.Snapshot("prod", epoch, nodes, []*corev1.Pod{db, pending}, nil, nil, nil, report.Storage{CSINodes: csiNodes, Volumes: src})
	if err != nil || len(parts) != 1 {
		t.Fatalf("Snapshot() = %d parts, %v; want one", len(parts), err)
	}
	got := roundTrip(t, parts[0], v1.DecodeClusterSnapshot)
	if diff := cmp.Diff([]v1.CSINodeSummary{{Name: "n1", Limits: map[string]int{"ebs.csi.aws.com": 25}}, {Name: "n2"}}, got.CSINodes); diff != "" {
		t.Errorf("CSINodes (-want +got):\n%s", diff)
	}
	if vols := got.Pods[0].Spec.Volumes; len(vols) != 1 || vols[0].PersistentVolumeClaim == nil || vols[0].PersistentVolumeClaim.ClaimName != "data-db-0" {
		t.Errorf("pod db-0 volumes = %+v, want its claim volume only", vols)
	}
	if len(got.Volumes.Claims) != 1 || got.Volumes.Claims[0].Name != "data-db-0" {
		t.Errorf("claims = %+v, want data-db-0 only (the pending pod's claim is the pod batch's)", got.Volumes.Claims)
	}
	if pvs := got.Volumes.PersistentVolumes; len(pvs) != 1 || pvs[0].Spec.CSI == nil || pvs[0].Spec.CSI.Driver != "ebs.csi.aws.com" {
		t.Errorf("persistent volumes = %+v, want pv-1 with its CSI driver", pvs)
	}
	count = 24
	_, hash2, _, err := report.Snapshot("prod", epoch, nodes, []*corev1.Pod{db, pending}, nil, nil, nil, report.Storage{CSINodes: csiNodes, Volumes: src})
	if err != nil || hash2 == hash {
		t.Errorf("a changed attach limit should change the snapshot's hash: %s -> %s, %v", hash, hash2, err)
	}
}

// TestSnapshotSplitsManyCSINodesAndClaims: CSINodes and storage objects
// are split into parts like nodes and pods, none lost.
func TestSnapshotSplitsManyCSINodesAndClaims(t *testing.T) {
	count := int32(25)
	src := volumes{claims: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}}
	var csiNodes []*storagev1.CSINode
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 5000 {
		name := fmt.Sprintf("ip-10-0-%d-%d", i/250, i%250)
		nodes = append(nodes, node(name, "aws:///us-east-1a/i-"+name))
		csiNodes = append(csiNodes, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "ebs.csi.aws.com", NodeID: "i-" + name, Allocatable: &storagev1.VolumeNodeResources{Count: &count}}}}})
		claim, pv := "data-"+name, "pv-"+name
		src.claims["db/"+claim] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: claim}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
		src.pvs[pv] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com"}}}}
		p := pod("db", "db-"+name, name)
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		pods = append(pods, p)
	}
	parts, _, _, err := report.Snapshot("prod", epoch, nodes, pods, nil, nil, nil, report.Storage{CSINodes: csiNodes, Volumes: src})
	if err != nil {
		t.Fatal(err)
	}
	var nCSI, nClaims, nPVs int
	for _, p := range parts {
		got := roundTrip(t, p, v1.DecodeClusterSnapshot) // fails on a part beyond v1.MaxMessageBytes or the part bounds
		nCSI += len(got.CSINodes)
		nClaims += len(got.Volumes.Claims)
		nPVs += len(got.Volumes.PersistentVolumes)
	}
	if len(parts) < 2 || nCSI != 5000 || nClaims != 5000 || nPVs != 5000 {
		t.Errorf("%d parts hold %d CSINodes, %d claims and %d volumes; want a split holding 5000 of each", len(parts), nCSI, nClaims, nPVs)
	}
}

func TestSnapshotSplitsALargeCluster(t *testing.T) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 600 {
		name := fmt.Sprintf("ip-10-0-%d-%d", i/250, i%250)
		nodes = append(nodes, node(name, "aws:///us-east-1a/i-"+name))
		for j := range 40 {
			pods = append(pods, pod("load", fmt.Sprintf("p-%d-%d", i, j), name))
		}
	}
	parts, _, _, err := report.Snapshot("prod", epoch, nodes, pods, nil, nil, nil, report.Storage{})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 2 {
		t.Fatalf("parts = %d, want a split", len(parts))
	}
	var nNodes, nPods int
	for i, p := range parts {
		got := roundTrip(t, p, v1.DecodeClusterSnapshot)
		if got.Part != i || got.Parts != len(parts) || got.SnapshotID != parts[0].SnapshotID {
			t.Errorf("part %d: part %d of %d, snapshot %s", i, got.Part, got.Parts, got.SnapshotID)
		}
		nNodes += len(got.Nodes)
		nPods += len(got.Pods)
	}
	if nNodes != 600 || nPods != 24000 {
		t.Errorf("parts hold %d nodes and %d pods, want 600 and 24000", nNodes, nPods)
	}
}

func TestSnapshotSplitsManyForeignNodeClaims(t *testing.T) {
	nodes := []*corev1.Node{node("ip-10-0-0-1", "aws:///us-east-1a/i-0a1b2c3d4e5f60718")}
	// 5000 NodeClaims of about 1.5 KiB each, as Karpenter writes them
	// (labels, hash annotations, requirements, conditions): about 7 MiB,
	// beyond one part's limit.
	var claims []v1.NodeClaim
	for i := range v1.MaxNodesPerMessage {
		claims = append(claims, v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("default-%05d", i), UID: types.UID(fmt.Sprintf("uid-%05d", i)),
				Labels:      map[string]string{v1.LabelNodePool: "default", v1.LabelInstanceType: "m7g.large"},
				Annotations: map[string]string{v1.AnnotationNodePoolHash: strings.Repeat("7", 1400)}},
			Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"}},
		})
	}
	parts, _, _, err := report.Snapshot("prod", epoch, nodes, nil, nil, nil, claims, report.Storage{})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, p := range parts {
		n += len(roundTrip(t, p, v1.DecodeClusterSnapshot).ForeignNodeClaims) // fails on a part beyond v1.MaxMessageBytes
	}
	if n != len(claims) {
		t.Errorf("parts hold %d foreign NodeClaims, want %d", n, len(claims))
	}
}

func ptr[T any](v T) *T { return &v }

func TestDecisionHash(t *testing.T) {
	hashOf := func(t *testing.T, at time.Time, pods ...*corev1.Pod) string {
		t.Helper()
		_, _, h, err := report.Snapshot("c", at, []*corev1.Node{node("n1", "aws:///us-east-1a/i-1"), node("n2", "aws:///us-east-1a/i-2")},
			pods, nil, nil, nil, report.Storage{})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	renamed := func(p *corev1.Pod, name string) *corev1.Pod {
		p = p.DeepCopy()
		p.Name, p.UID, p.CreationTimestamp = name, types.UID("uid-"+name), metav1.NewTime(epoch.Add(time.Hour))
		return p
	}
	base := hashOf(t, epoch, pod("shop", "web-a", "n1"), pod("shop", "db-0", "n2"))
	t.Run("should not change when a pod is replaced by an equal one on the same node, at another time", func(t *testing.T) {
		if got := hashOf(t, epoch.Add(time.Minute), renamed(pod("shop", "web-a", "n1"), "web-z"), pod("shop", "db-0", "n2")); got != base {
			t.Errorf("decision hash changed for a replaced pod")
		}
	})
	changed := map[string][]*corev1.Pod{
		"a pod moved to another node": {pod("shop", "web-a", "n2"), pod("shop", "db-0", "n2")},
		"a pod removed":               {pod("shop", "db-0", "n2")},
		"a pod added":                 {pod("shop", "web-a", "n1"), pod("shop", "web-b", "n1"), pod("shop", "db-0", "n2")},
	}
	relabelled := renamed(pod("shop", "web-a", "n1"), "web-z")
	relabelled.Labels = map[string]string{"app": "other"}
	changed["a replacement with other labels"] = []*corev1.Pod{relabelled, pod("shop", "db-0", "n2")}
	bigger := renamed(pod("shop", "web-a", "n1"), "web-z")
	bigger.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
	changed["a replacement with other requests"] = []*corev1.Pod{bigger, pod("shop", "db-0", "n2")}
	owned := renamed(pod("shop", "web-a", "n1"), "web-z")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-2", UID: "rs-2"}}
	changed["a replacement of another owner (a rollout)"] = []*corev1.Pod{owned, pod("shop", "db-0", "n2")}
	for name, pods := range changed {
		t.Run("should change for "+name, func(t *testing.T) {
			if got := hashOf(t, epoch, pods...); got == base {
				t.Errorf("decision hash unchanged")
			}
		})
	}
	t.Run("should change when a pod with do-not-disrupt is replaced (its duration runs from its start)", func(t *testing.T) {
		p := pod("shop", "web-a", "n1")
		p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "10m"}
		before := hashOf(t, epoch, p, pod("shop", "db-0", "n2"))
		q := renamed(p, "web-z")
		if got := hashOf(t, epoch, q, pod("shop", "db-0", "n2")); got == before {
			t.Errorf("decision hash unchanged")
		}
	})
}
