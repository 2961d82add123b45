package v1_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

var (
	wireNow       = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	restartAlways = corev1.ContainerRestartPolicyAlways
)

func readWire(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "wire", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fullPod is a pod as the API server returns it, with fields the wire
// summary keeps and fields it drops.
func fullPod() *corev1.Pod {
	grace := int64(30)
	prio := int32(1000)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "shop", UID: "uid-web-0",
			ResourceVersion: "123",
			Labels:          map[string]string{"app": "web"},
			Annotations: map[string]string{
				"karpenter.sh/do-not-disrupt":                "true",
				"controller.kubernetes.io/pod-deletion-cost": "-5",
				"kubectl.kubernetes.io/restartedAt":          "2025-12-01T00:00:00Z",
			},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "uid-sts"}},
			CreationTimestamp: wireNow,
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
		},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/arch": "arm64"},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey:   "kubernetes.io/hostname",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				}},
			}},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
			}},
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "registry.example/web:1.2.3",
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
				},
				Ports: []corev1.ContainerPort{
					{Name: "http", ContainerPort: 8080},
					{Name: "metrics", ContainerPort: 9100, HostPort: 9100, Protocol: corev1.ProtocolTCP},
				},
			}},
			InitContainers: []corev1.Container{{
				Name:          "proxy",
				RestartPolicy: &restartAlways,
				Resources:     corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}},
			Overhead:                      corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			Priority:                      &prio,
			PriorityClassName:             "high",
			TerminationGracePeriodSeconds: &grace,
			ServiceAccountName:            "web",
			Volumes:                       []corev1.Volume{{Name: "data"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			}},
		},
	}
}

func TestSummarizePod(t *testing.T) {
	grace := int64(30)
	prio := int32(1000)
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "shop", UID: "uid-web-0",
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				"karpenter.sh/do-not-disrupt":                "true",
				"controller.kubernetes.io/pod-deletion-cost": "-5",
			},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "uid-sts"}},
			CreationTimestamp: wireNow,
		},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/arch": "arm64"},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey:   "kubernetes.io/hostname",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				}},
			}},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
			}},
			Containers: []corev1.Container{{
				Name:      "web",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
				Ports:     []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100, HostPort: 9100, Protocol: corev1.ProtocolTCP}},
			}},
			InitContainers: []corev1.Container{{
				Name:          "proxy",
				RestartPolicy: &restartAlways,
				Resources:     corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}},
			Overhead:                      corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			Priority:                      &prio,
			PriorityClassName:             "high",
			TerminationGracePeriodSeconds: &grace,
		},
	}

	t.Run("should keep what scheduling reads and drop the rest", func(t *testing.T) {
		got := v1.SummarizePod(fullPod()).Pod()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SummarizePod().Pod() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should survive a JSON round trip unchanged", func(t *testing.T) {
		s := v1.SummarizePod(fullPod())
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back v1.PodSummary
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, back.Pod()); diff != "" {
			t.Errorf("round trip mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should share no memory with the informer's pod", func(t *testing.T) {
		p := fullPod()
		s := v1.SummarizePod(p)
		s.Labels["app"] = "changed"
		s.Spec.NodeSelector["kubernetes.io/arch"] = "amd64"
		s.Spec.Tolerations[0].Key = "changed"
		s.Spec.Affinity.PodAntiAffinity = nil
		*s.Spec.Priority = 1
		s.Spec.Containers[0].Requests[corev1.ResourceCPU] = resource.MustParse("9")
		s.OwnerReferences[0].Name = "changed"
		if diff := cmp.Diff(fullPod(), p); diff != "" {
			t.Errorf("the source pod changed (-want +got):\n%s", diff)
		}
	})
	t.Run("the view is the same summary, sharing the pod's memory", func(t *testing.T) {
		p := fullPod()
		p.DeletionTimestamp = &wireNow
		view := v1.PodView(p)
		if diff := cmp.Diff(v1.SummarizePod(p), view); diff != "" {
			t.Errorf("PodView differs from SummarizePod (-summary +view):\n%s", diff)
		}
		p.Labels["app"] = "changed"
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
		if view.Labels["app"] != "changed" || view.Spec.Containers[0].Requests.Cpu().String() != "9" {
			t.Errorf("PodView copied the pod's maps: labels %v, requests %v", view.Labels, view.Spec.Containers[0].Requests)
		}
	})
	t.Run("the view keeps only the summary's annotations", func(t *testing.T) {
		p := fullPod()
		p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true", "checksum/config": "abc"}
		if got := v1.PodView(p).Annotations; !cmp.Equal(got, map[string]string{v1.AnnotationDoNotDisrupt: "true"}) {
			t.Errorf("PodView annotations = %v, want only %s", got, v1.AnnotationDoNotDisrupt)
		}
		p.Annotations = map[string]string{"checksum/config": "abc"}
		if got := v1.PodView(p).Annotations; got != nil {
			t.Errorf("PodView annotations = %v, want none", got)
		}
	})
}

func TestSummarizeNode(t *testing.T) {
	ready := metav1.NewTime(wireNow.Add(-time.Minute))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "ip-10-0-1-1", UID: "uid-node",
			Labels: map[string]string{"karpenter.sh/nodepool": "default"},
			Annotations: map[string]string{
				"karpenter.sh/do-not-disrupt":                            "true",
				"karpenter.k8s.aws/ec2nodeclass-hash":                    "123",
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
			CreationTimestamp: wireNow,
		},
		Spec: corev1.NodeSpec{
			ProviderID: "aws:///us-east-1a/i-0123",
			Taints:     []corev1.Taint{{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}},
		},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourcePods: resource.MustParse("29")},
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("29")},
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "kubelet is posting ready status", LastHeartbeatTime: wireNow, LastTransitionTime: ready,
			}},
			Images: []corev1.ContainerImage{{Names: []string{"busybox"}}},
		},
	}
	want := v1.NodeSummary{
		Name: "ip-10-0-1-1", UID: "uid-node", ProviderID: "aws:///us-east-1a/i-0123",
		Labels: map[string]string{"karpenter.sh/nodepool": "default"},
		Annotations: map[string]string{
			"karpenter.sh/do-not-disrupt":         "true",
			"karpenter.k8s.aws/ec2nodeclass-hash": "123",
		},
		Taints:            []corev1.Taint{{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}},
		Capacity:          corev1.ResourceList{corev1.ResourcePods: resource.MustParse("29")},
		Allocatable:       corev1.ResourceList{corev1.ResourcePods: resource.MustParse("29")},
		Conditions:        []v1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: ready}},
		CreationTimestamp: wireNow,
	}
	got := v1.SummarizeNode(node)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SummarizeNode() mismatch (-want +got):\n%s", diff)
	}

	t.Run("should not change when only the heartbeat moves", func(t *testing.T) {
		later := node.DeepCopy()
		later.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(wireNow.Add(time.Minute))
		if diff := cmp.Diff(got, v1.SummarizeNode(later)); diff != "" {
			t.Errorf("summary changed with the heartbeat (-before +after):\n%s", diff)
		}
	})
	t.Run("should convert back to a node with the same fields", func(t *testing.T) {
		if diff := cmp.Diff(got, v1.SummarizeNode(got.Node())); diff != "" {
			t.Errorf("Node() round trip mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestDecodeWireSamples(t *testing.T) {
	tests := []struct {
		file   string
		decode func([]byte) (any, []v1.FieldError, error)
		check  func(t *testing.T, got any)
	}{
		{
			file:   "podbatch.json",
			decode: func(d []byte) (any, []v1.FieldError, error) { return v1.DecodePodBatch(d) },
			check: func(t *testing.T, got any) {
				b := got.(*v1.PodBatch)
				if len(b.Pods) != 2 || b.Pods[1].NodeName == "" || b.Pods[0].Spec.InitContainers[0].RestartPolicy == nil {
					t.Errorf("PodBatch decoded as %+v", b)
				}
				q := b.Pods[0].Spec.Containers[0].Requests[corev1.ResourceMemory]
				if q.Cmp(resource.MustParse("1Gi")) != 0 {
					t.Errorf("pods[0] memory request = %s, want 1Gi", q.String())
				}
			},
		},
		{
			file:   "clusterconfig.json",
			decode: func(d []byte) (any, []v1.FieldError, error) { return v1.DecodeClusterConfig(d) },
			check: func(t *testing.T, got any) {
				c := got.(*v1.ClusterConfig)
				if len(c.NodePools) != 1 || c.NodePools[0].Spec.Template.Spec.NodeClassRef.Name != "default" || c.EC2NodeClasses[0].Spec.Role == "" {
					t.Errorf("ClusterConfig decoded as %+v", c)
				}
			},
		},
		{
			file:   "noderegistrations.json",
			decode: func(d []byte) (any, []v1.FieldError, error) { return v1.DecodeNodeRegistrations(d) },
			check: func(t *testing.T, got any) {
				r := got.(*v1.NodeRegistrations)
				if len(r.Nodes) != 1 || r.Nodes[0].ProviderID != "aws:///eu-west-1b/i-0a1b2c3d4e5f60718" || len(r.Removed) != 1 {
					t.Errorf("NodeRegistrations decoded as %+v", r)
				}
			},
		},
		{
			file:   "clustersnapshot.json",
			decode: func(d []byte) (any, []v1.FieldError, error) { return v1.DecodeClusterSnapshot(d) },
			check: func(t *testing.T, got any) {
				s := got.(*v1.ClusterSnapshot)
				if len(s.PodDisruptionBudgets) != 1 || s.PodDisruptionBudgets[0].MaxUnavailable.IntValue() != 1 || len(s.DaemonSets) != 1 {
					t.Errorf("ClusterSnapshot decoded as %+v", s)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file+" should decode and validate without warnings", func(t *testing.T) {
			got, warnings, err := tt.decode(readWire(t, tt.file))
			if err != nil {
				t.Fatalf("decode error = %v", err)
			}
			if len(warnings) != 0 {
				t.Errorf("warnings = %v, want none", warnings)
			}
			tt.check(t, got)
		})
	}

	t.Run("podbatchresult.json should decode into PodBatchResult", func(t *testing.T) {
		var r v1.PodBatchResult
		dec := json.NewDecoder(bytes.NewReader(readWire(t, "podbatchresult.json")))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		want := map[types.UID]v1.Nomination{
			"0b5f6c1e-3d2a-4e8b-9f10-2a3b4c5d6e7f": {NodeClaim: "default-x7k2m"},
			"0b5f6c1e-3d2a-4e8b-9f10-2a3b4c5d6e80": {Node: "ip-10-0-2-33.eu-west-1.compute.internal"},
		}
		if diff := cmp.Diff(want, r.Nominations); diff != "" {
			t.Errorf("nominations mismatch (-want +got):\n%s", diff)
		}
		if r.State != v1.BatchSolved || len(r.Unschedulable) != 1 || len(r.NodeClaims) != 1 || r.NodeClaims[0].Name != "default-x7k2m" {
			t.Errorf("PodBatchResult decoded as %+v", r)
		}
	})
}

func TestDecodePodBatchWarnings(t *testing.T) {
	data := bytes.Replace(readWire(t, "podbatch.json"), []byte(`"cluster": "prod-eu",`), []byte(`"cluster": "prod-eu", "shard": 3,`), 1)
	_, warnings, err := v1.DecodePodBatch(data)
	if err != nil {
		t.Fatalf("DecodePodBatch() error = %v", err)
	}
	want := []v1.FieldError{{Path: "shard", Message: "unknown field (not in Karpenter v1.14.1); ignored"}}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings mismatch (-want +got):\n%s", diff)
	}
}

// podBatchJSON is a minimal valid batch whose pods are given as JSON.
func podBatchJSON(pods string) []byte {
	return []byte(`{"apiVersion":"nodewright.dev/v1","kind":"PodBatch","id":"pb-1","cluster":"prod","createdAt":"2026-01-01T00:00:00Z","pods":` + pods + `}`)
}

const okPod = `{"name":"a","namespace":"ns","uid":"u1","creationTimestamp":"2026-01-01T00:00:00Z","spec":{"containers":[{"name":"c","requests":{"cpu":"1"}}]}}`

func TestDecodePodBatchErrors(t *testing.T) {
	huge := podBatchJSON(`[` + okPod + `]`)
	huge = append(huge[:len(huge)-1], []byte(`,"padding":"`+strings.Repeat("x", 10<<20)+`"}`)...)

	tests := []struct {
		name       string
		give       []byte
		wantStatus int
		wantFields []v1.ErrorField
	}{
		{
			name:       "should reject truncated JSON",
			give:       podBatchJSON(`[` + okPod)[:120],
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "(body)", Message: "not valid JSON: unexpected end of JSON input"}},
		},
		{
			name:       "should reject a body that is not an object",
			give:       []byte(`[1,2,3]`),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "(body)", Message: "expected an object, got array"}},
		},
		{
			name:       "should reject pods of the wrong type with the field path",
			give:       podBatchJSON(`"web-0"`),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "pods", Message: "expected a list, got string"}},
		},
		{
			name:       "should reject a request that is not a quantity with its path",
			give:       podBatchJSON(`[{"name":"a","namespace":"ns","uid":"u1","spec":{"containers":[{"name":"c","requests":{"cpu":"lots"}}]}}]`),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "pods[0].spec.containers[0].requests[cpu]", Message: `expected a quantity such as "500m", "4" or "16Gi"`}},
		},
		{
			name: "should reject a batch's DaemonSets without a name or listed twice, naming the field",
			give: append(podBatchJSON(`[` + okPod + `]`)[:len(podBatchJSON(`[`+okPod+`]`))-1],
				[]byte(`,"daemonSets":[{"name":"agent","namespace":"kube-system","template":{"name":"agent","namespace":"kube-system","spec":{"containers":[{"name":"c"}]}}},`+
					`{"name":"agent","namespace":"kube-system","template":{"name":"agent","namespace":"kube-system","spec":{"containers":[{"name":"c"}]}}},`+
					`{"name":"","namespace":"kube-system","template":{"name":"x","namespace":"kube-system","spec":{"containers":[{"name":"c"}]}}}]}`)...),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "daemonSets[1].name", Message: "duplicate of daemonSets[0]"}, {Path: "daemonSets[2].name", Message: "required"}},
		},
		{
			name: "should reject a batch's storage objects without a name or listed twice, naming the field",
			give: append(podBatchJSON(`[` + okPod + `]`)[:len(podBatchJSON(`[`+okPod+`]`))-1],
				[]byte(`,"volumes":{"claims":[{"metadata":{"name":"data"}},{"metadata":{"namespace":"ns","name":"d"}},{"metadata":{"namespace":"ns","name":"d"}}],`+
					`"storageClasses":[{"metadata":{}}]}}`)...),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{
				{Path: "volumes.claims[0].metadata.namespace", Message: "required"},
				{Path: "volumes.claims[2].metadata", Message: "duplicate of volumes.claims[1]"},
				{Path: "volumes.storageClasses[0].metadata.name", Message: "required"},
			},
		},
		{
			name:       "should reject a 10 MB body before decoding it",
			give:       huge,
			wantStatus: http.StatusRequestEntityTooLarge,
		},
		{
			name:       "should reject an unknown kind",
			give:       bytes.Replace(podBatchJSON(`[`+okPod+`]`), []byte(`"kind":"PodBatch"`), []byte(`"kind":"PodBundle"`), 1),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "kind", Message: `must be "PodBatch" on this route, got "PodBundle"`}},
		},
		{
			name:       "should reject another apiVersion",
			give:       bytes.Replace(podBatchJSON(`[`+okPod+`]`), []byte(`nodewright.dev/v1`), []byte(`nodewright.dev/v2`), 1),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "apiVersion", Message: `must be "nodewright.dev/v1", got "nodewright.dev/v2"`}},
		},
		{
			name:       "should reject pods without UID",
			give:       podBatchJSON(`[` + strings.Replace(okPod, `"uid":"u1",`, ``, 1) + `]`),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "pods[0].uid", Message: "required"}},
		},
		{
			name:       "should reject an empty batch",
			give:       podBatchJSON(`[]`),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "pods", Message: "must list at least one pod"}},
		},
		{
			name:       "should reject two pods with one UID",
			give:       podBatchJSON(`[` + okPod + `,` + strings.Replace(okPod, `"name":"a"`, `"name":"b"`, 1) + `]`),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "pods[1].uid", Message: "duplicate of pods[0].uid"}},
		},
		{
			name: "should list every problem of a pod with its path",
			give: podBatchJSON(`[{"uid":"u1","spec":{"containers":[{"requests":{"cpu":"-1"},"hostPorts":[{"containerPort":1,"hostPort":70000}]}],` +
				`"tolerations":[{"operator":"Matches"}],"topologySpreadConstraints":[{"maxSkew":0,"whenUnsatisfiable":"Sometimes"}]}}]`),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{
				{Path: "pods[0].name", Message: "required"},
				{Path: "pods[0].namespace", Message: "required"},
				{Path: "pods[0].creationTimestamp", Message: "required"},
				{Path: "pods[0].spec.containers[0].name", Message: "required"},
				{Path: "pods[0].spec.containers[0].requests[cpu]", Message: "must not be negative, got -1"},
				{Path: "pods[0].spec.containers[0].hostPorts[0].hostPort", Message: "must be between 1 and 65535, got 70000"},
				{Path: "pods[0].spec.tolerations[0].operator", Message: `must be Equal or Exists, got "Matches"`},
				{Path: "pods[0].spec.topologySpreadConstraints[0].maxSkew", Message: "must be at least 1, got 0"},
				{Path: "pods[0].spec.topologySpreadConstraints[0].topologyKey", Message: "required"},
				{Path: "pods[0].spec.topologySpreadConstraints[0].whenUnsatisfiable", Message: `must be DoNotSchedule or ScheduleAnyway, got "Sometimes"`},
			},
		},
		{
			name:       "should reject a bad envelope",
			give:       []byte(`{"apiVersion":"nodewright.dev/v1","kind":"PodBatch","id":"batch 1/2","cluster":"-prod","pods":[` + okPod + `]}`),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{
				{Path: "id", Message: `must contain only letters, digits, '-' and '_', got "batch 1/2"`},
				{Path: "cluster", Message: `must be an EKS cluster name (a letter or digit, then letters, digits, '-' or '_'), got "-prod"`},
				{Path: "createdAt", Message: "required"},
			},
		},
		{
			name:       "should reject an ID longer than a Step Functions execution name",
			give:       bytes.Replace(podBatchJSON(`[`+okPod+`]`), []byte(`"id":"pb-1"`), []byte(`"id":"`+strings.Repeat("a", 81)+`"`), 1),
			wantStatus: http.StatusBadRequest,
			wantFields: []v1.ErrorField{{Path: "id", Message: "must be at most 80 characters, got 81"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := v1.DecodePodBatch(tt.give)
			if err == nil {
				t.Fatalf("DecodePodBatch() = %+v, want an error", got)
			}
			if got != nil {
				t.Errorf("DecodePodBatch() returned a batch with its error: %+v", got)
			}
			if status := v1.HTTPStatus(err); status != tt.wantStatus {
				t.Errorf("HTTPStatus(%v) = %d, want %d", err, status, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusRequestEntityTooLarge {
				if !errors.Is(err, v1.ErrMessageTooLarge) {
					t.Errorf("error %v does not wrap ErrMessageTooLarge", err)
				}
				return
			}
			if diff := cmp.Diff(tt.wantFields, v1.NewErrorResponse(err).Fields); diff != "" {
				t.Errorf("error fields mismatch (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestValidateOtherMessagesErrors(t *testing.T) {
	envelope := func(kind string) metav1.TypeMeta { return metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: kind} }
	node := func(name, providerID string) v1.NodeSummary {
		return v1.NodeSummary{Name: name, ProviderID: providerID, CreationTimestamp: wireNow}
	}
	tests := []struct {
		name string
		give interface{ Validate() error }
		want []v1.ErrorField
	}{
		{
			name: "config with unnamed and duplicate objects",
			give: &v1.ClusterConfig{
				TypeMeta: envelope(v1.KindClusterConfig), ID: "cfg-1", Cluster: "prod", CreatedAt: wireNow,
				NodePools:      []v1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "a"}}},
				EC2NodeClasses: []v1.EC2NodeClass{{}},
			},
			want: []v1.ErrorField{
				{Path: "nodePools[1].metadata.name", Message: `duplicate name "a" (also nodePools[0])`},
				{Path: "ec2NodeClasses[0].metadata.name", Message: "required"},
			},
		},
		{
			name: "config sent to the wrong kind",
			give: &v1.ClusterConfig{TypeMeta: envelope(v1.KindPodBatch), ID: "cfg-1", Cluster: "prod", CreatedAt: wireNow},
			want: []v1.ErrorField{{Path: "kind", Message: `must be "ClusterConfig", got "PodBatch"`}},
		},
		{
			name: "registration without providerID",
			give: &v1.NodeRegistrations{
				TypeMeta: envelope(v1.KindNodeRegistrations), ID: "nr-1", Cluster: "prod", CreatedAt: wireNow,
				Nodes: []v1.NodeSummary{node("n1", ""), node("n1", "aws:///a/i-1")},
			},
			want: []v1.ErrorField{
				{Path: "nodes[0].providerID", Message: "required"},
				{Path: "nodes[1].name", Message: `duplicate name "n1" (also nodes[0])`},
			},
		},
		{
			name: "empty registration",
			give: &v1.NodeRegistrations{TypeMeta: envelope(v1.KindNodeRegistrations), ID: "nr-1", Cluster: "prod", CreatedAt: wireNow},
			want: []v1.ErrorField{{Path: "nodes", Message: "must list at least one node or removed node"}},
		},
		{
			name: "snapshot part out of range with an unbound pod",
			give: &v1.ClusterSnapshot{
				TypeMeta: envelope(v1.KindClusterSnapshot), ID: "cs-1-2", Cluster: "prod", CreatedAt: wireNow,
				SnapshotID: "cs-1", Part: 2, Parts: 2,
				Pods: []v1.PodSummary{{Name: "a", Namespace: "ns", UID: "u", CreationTimestamp: wireNow,
					Spec: v1.PodSpecSummary{Containers: []v1.ContainerSummary{{Name: "c"}}}}},
				PodDisruptionBudgets: []v1.PDBSummary{{Name: "pdb"}},
			},
			want: []v1.ErrorField{
				{Path: "part", Message: "must be between 0 and parts-1 (1), got 2"},
				{Path: "pods[0].nodeName", Message: "required: a snapshot lists bound pods only"},
				{Path: "podDisruptionBudgets[0].namespace", Message: "required"},
			},
		},
		{
			name: "snapshot node with negative allocatable and a PDB with negative counts",
			give: &v1.ClusterSnapshot{
				TypeMeta: envelope(v1.KindClusterSnapshot), ID: "cs-1-0", Cluster: "prod", CreatedAt: wireNow,
				SnapshotID: "cs-1", Part: 0, Parts: 1,
				Nodes: []v1.NodeSummary{{Name: "n1", CreationTimestamp: wireNow,
					Capacity:    corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Gi")},
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-2"), corev1.ResourcePods: resource.MustParse("110")}}},
				PodDisruptionBudgets: []v1.PDBSummary{{Name: "pdb", Namespace: "ns", DisruptionsAllowed: -1, ExpectedPods: -3}},
			},
			want: []v1.ErrorField{
				{Path: "nodes[0].capacity[memory]", Message: "must not be negative, got -1Gi"},
				{Path: "nodes[0].allocatable[cpu]", Message: "must not be negative, got -2"},
				{Path: "podDisruptionBudgets[0].disruptionsAllowed", Message: "must not be negative, got -1"},
				{Path: "podDisruptionBudgets[0].expectedPods", Message: "must not be negative, got -3"},
			},
		},
		{
			name: "snapshot CSINodes unnamed, listed twice or with a negative attach limit, and an unnamed claim",
			give: &v1.ClusterSnapshot{
				TypeMeta: envelope(v1.KindClusterSnapshot), ID: "cs-1-0", Cluster: "prod", CreatedAt: wireNow,
				SnapshotID: "cs-1", Part: 0, Parts: 1,
				CSINodes: []v1.CSINodeSummary{
					{Name: "n1", Limits: map[string]int{"ebs.csi.aws.com": -1}},
					{Name: "n1"},
					{Limits: map[string]int{"": 3}},
				},
				Volumes: v1.VolumeObjects{Claims: []corev1.PersistentVolumeClaim{{}}},
			},
			want: []v1.ErrorField{
				{Path: "csiNodes[0].limits[ebs.csi.aws.com]", Message: "must not be negative, got -1"},
				{Path: "csiNodes[2].limits", Message: "a driver name is empty"},
				{Path: "csiNodes[1].name", Message: `duplicate name "n1" (also csiNodes[0])`},
				{Path: "csiNodes[2].name", Message: "required"},
				{Path: "volumes.claims[0].metadata.name", Message: "required"},
				{Path: "volumes.claims[0].metadata.namespace", Message: "required"},
			},
		},
		{
			name: "snapshot without parts",
			give: &v1.ClusterSnapshot{TypeMeta: envelope(v1.KindClusterSnapshot), ID: "cs-1-0", Cluster: "prod", CreatedAt: wireNow, SnapshotID: "cs-1"},
			want: []v1.ErrorField{
				{Path: "parts", Message: "must be between 1 and 64, got 0"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			if status := v1.HTTPStatus(err); status != http.StatusBadRequest {
				t.Errorf("HTTPStatus() = %d, want 400", status)
			}
			if diff := cmp.Diff(tt.want, v1.NewErrorResponse(err).Fields); diff != "" {
				t.Errorf("Validate() fields mismatch (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestPodBatchResultJSON(t *testing.T) {
	r := v1.PodBatchResult{
		TypeMeta:      metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatchResult},
		BatchID:       "pb-1",
		State:         v1.BatchSolved,
		Nominations:   map[types.UID]v1.Nomination{"u1": {NodeClaim: "default-abc"}, "u2": {Node: "n1"}},
		Unschedulable: map[types.UID]string{"u3": "no instance type fits"},
	}
	got, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"PodBatchResult","apiVersion":"nodewright.dev/v1","batchID":"pb-1","state":"Solved",` +
		`"nominations":{"u1":{"nodeClaim":"default-abc"},"u2":{"node":"n1"}},"unschedulable":{"u3":"no instance type fits"}}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("json.Marshal() mismatch (-want +got):\n%s", diff)
	}
}

func TestHTTPStatusOfOtherErrors(t *testing.T) {
	if got := v1.HTTPStatus(fmt.Errorf("store batch: %w", errors.New("throttled"))); got != http.StatusInternalServerError {
		t.Errorf("HTTPStatus(store error) = %d, want 500", got)
	}
}

// TestMaxPodsPerBatchFitsMaxMessageBytes checks that the item bound and the
// byte bound agree for typical pods: a full batch of Deployment pods with
// requests, a toleration and a zone spread constraint fits in one body.
func TestMaxPodsPerBatchFitsMaxMessageBytes(t *testing.T) {
	b := v1.PodBatch{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatch},
		ID:       "pb-1767225600000-3f2a9c1d0b7e4a55", Cluster: "prod", CreatedAt: wireNow,
	}
	for i := range v1.MaxPodsPerBatch {
		p := fullPod()
		p.Name = fmt.Sprintf("web-7d4b9c8f6d-%05d", i)
		p.UID = types.UID(fmt.Sprintf("0b5f6c1e-3d2a-4e8b-9f10-%012d", i))
		p.Spec.Affinity = nil
		b.Pods = append(b.Pods, v1.SummarizePod(p))
	}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > v1.MaxMessageBytes {
		t.Errorf("%d typical pods encode to %d bytes, over MaxMessageBytes %d", v1.MaxPodsPerBatch, len(data), v1.MaxMessageBytes)
	}
	if _, _, err := v1.DecodePodBatch(data); err != nil {
		t.Errorf("DecodePodBatch(full batch) error = %v", err)
	}
}

func TestSummarizeCSINodeKeepsEachDriverAttachLimit(t *testing.T) {
	count := func(n int32) *storagev1.VolumeNodeResources { return &storagev1.VolumeNodeResources{Count: &n} }
	n := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-5.ec2.internal", Labels: map[string]string{"x": "y"}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "ebs.csi.aws.com", NodeID: "i-0123", Allocatable: count(25), TopologyKeys: []string{"topology.ebs.csi.aws.com/zone"}},
			{Name: "efs.csi.aws.com", NodeID: "i-0123"},
		}},
	}
	got := v1.SummarizeCSINode(n)
	want := v1.CSINodeSummary{Name: "ip-10-0-1-5.ec2.internal", Limits: map[string]int{"ebs.csi.aws.com": 25}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SummarizeCSINode() (-want +got):\n%s", diff)
	}
	limits := v1.VolumeLimits([]v1.CSINodeSummary{got, {Name: "no-limits"}})
	if diff := cmp.Diff(map[string]map[string]int{"ip-10-0-1-5.ec2.internal": {"ebs.csi.aws.com": 25}}, limits); diff != "" {
		t.Errorf("VolumeLimits() should leave out nodes without limits (-want +got):\n%s", diff)
	}
}

func TestSummarizePersistentVolumeKeepsItsCSIDriver(t *testing.T) {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0abc", FSType: "ext4"}}},
	}
	got := v1.SummarizePersistentVolume(pv)
	if got.Spec.CSI == nil || got.Spec.CSI.Driver != "ebs.csi.aws.com" || got.Spec.CSI.VolumeHandle != "" {
		t.Errorf("SummarizePersistentVolume().Spec.CSI = %+v, want only the driver ebs.csi.aws.com", got.Spec.CSI)
	}
}
