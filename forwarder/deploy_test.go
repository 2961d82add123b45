package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/forwarder/internal/forward"
	"github.com/nodewright/nodewright/forwarder/internal/leader"
)

// kustomization is the part of kustomization.yaml the test reads.
type kustomization struct {
	APIVersion         string   `json:"apiVersion"`
	Kind               string   `json:"kind"`
	Namespace          string   `json:"namespace"`
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name     string   `json:"name"`
		Literals []string `json:"literals"`
	} `json:"configMapGenerator"`
	Labels []map[string]any `json:"labels"`
	Images []map[string]any `json:"images"`
}

// manifests holds every object under deploy/, decoded strictly.
type manifests struct {
	kust           kustomization
	namespace      *corev1.Namespace
	serviceAccount *corev1.ServiceAccount
	clusterRole    *rbacv1.ClusterRole
	clusterBinding *rbacv1.ClusterRoleBinding
	role           *rbacv1.Role
	roleBinding    *rbacv1.RoleBinding
	lease          *coordinationv1.Lease
	deployment     *appsv1.Deployment
	pdb            *policyv1.PodDisruptionBudget
	service        *corev1.Service
}

func readManifests(t *testing.T) manifests {
	t.Helper()
	var m manifests
	data, err := os.ReadFile("deploy/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &m.kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	for _, res := range m.kust.Resources {
		path := filepath.Join("deploy", res)
		if info, err := os.Stat(path); err != nil {
			t.Fatalf("resource %s: %v", res, err)
		} else if info.IsDir() {
			continue // checked by TestCRDsAreReferenced
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			var head metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s document %d: %v", res, i, err)
			}
			var into any
			switch head.Kind {
			case "Namespace":
				m.namespace = &corev1.Namespace{}
				into = m.namespace
			case "ServiceAccount":
				m.serviceAccount = &corev1.ServiceAccount{}
				into = m.serviceAccount
			case "ClusterRole":
				m.clusterRole = &rbacv1.ClusterRole{}
				into = m.clusterRole
			case "ClusterRoleBinding":
				m.clusterBinding = &rbacv1.ClusterRoleBinding{}
				into = m.clusterBinding
			case "Role":
				m.role = &rbacv1.Role{}
				into = m.role
			case "RoleBinding":
				m.roleBinding = &rbacv1.RoleBinding{}
				into = m.roleBinding
			case "Lease":
				m.lease = &coordinationv1.Lease{}
				into = m.lease
			case "Deployment":
				m.deployment = &appsv1.Deployment{}
				into = m.deployment
			case "PodDisruptionBudget":
				m.pdb = &policyv1.PodDisruptionBudget{}
				into = m.pdb
			case "Service":
				m.service = &corev1.Service{}
				into = m.service
			default:
				t.Fatalf("%s document %d: unexpected kind %q", res, i, head.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("%s document %d (%s): %v", res, i, head.Kind, err)
			}
		}
	}
	for name, obj := range map[string]any{
		"Namespace": m.namespace, "ServiceAccount": m.serviceAccount, "ClusterRole": m.clusterRole,
		"ClusterRoleBinding": m.clusterBinding, "Role": m.role, "RoleBinding": m.roleBinding,
		"Lease": m.lease, "Deployment": m.deployment, "PodDisruptionBudget": m.pdb, "Service": m.service,
	} {
		if obj == nil {
			t.Fatalf("no %s in the kustomization", name)
		}
	}
	return m
}

// permission is one (API group, resource, verb) the forwarder's code uses.
type permission struct{ Group, Resource, Verb string }

func permissions(rules []rbacv1.PolicyRule) []permission {
	var out []permission
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, permission{g, res, v})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b permission) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		if c := strings.Compare(a.Resource, b.Resource); c != 0 {
			return c
		}
		return strings.Compare(a.Verb, b.Verb)
	})
	return out
}

func TestClusterRoleGrantsExactlyWhatTheCodeUses(t *testing.T) {
	m := readManifests(t)
	// Informers list and watch; the event emitter creates and patches (a
	// repeat is counted by client-go's correlator); the mirror
	// lists, creates, updates, deletes and updates status (see the verbs the
	// mirror and events tests observe) and deletes the Node of a mirror a
	// user deleted; the status writer updates NodePool and EC2NodeClass
	// status.
	want := []permission{
		{"", "events", "create"}, {"", "events", "patch"},
		{"", "nodes", "delete"}, {"", "nodes", "list"}, {"", "nodes", "watch"},
		{"", "persistentvolumeclaims", "list"}, {"", "persistentvolumeclaims", "watch"},
		{"", "persistentvolumes", "list"}, {"", "persistentvolumes", "watch"},
		{"", "pods", "list"}, {"", "pods", "watch"},
		{"apps", "daemonsets", "list"}, {"apps", "daemonsets", "watch"},
		{"coordination.k8s.io", "leases", "list"},
		{"karpenter.k8s.aws", "ec2nodeclasses", "list"}, {"karpenter.k8s.aws", "ec2nodeclasses", "watch"},
		{"karpenter.k8s.aws", "ec2nodeclasses/status", "update"},
		{"karpenter.sh", "nodeclaims", "create"}, {"karpenter.sh", "nodeclaims", "delete"},
		{"karpenter.sh", "nodeclaims", "list"}, {"karpenter.sh", "nodeclaims", "update"}, {"karpenter.sh", "nodeclaims", "watch"},
		{"karpenter.sh", "nodeclaims/status", "update"},
		{"karpenter.sh", "nodepools", "list"}, {"karpenter.sh", "nodepools", "watch"},
		{"karpenter.sh", "nodepools/status", "update"},
		{"policy", "poddisruptionbudgets", "list"}, {"policy", "poddisruptionbudgets", "watch"},
		{"storage.k8s.io", "csinodes", "list"}, {"storage.k8s.io", "csinodes", "watch"},
		{"storage.k8s.io", "storageclasses", "list"}, {"storage.k8s.io", "storageclasses", "watch"},
	}
	if diff := cmp.Diff(want, permissions(m.clusterRole.Rules)); diff != "" {
		t.Errorf("ClusterRole permissions mismatch (-want +got):\n%s", diff)
	}
	for _, r := range m.clusterRole.Rules {
		karpenterLease := slices.Equal(r.ResourceNames, []string{forward.KarpenterLeaseName}) && slices.Equal(r.Resources, []string{"leases"}) &&
			slices.Equal(r.Verbs, []string{"list"})
		if (len(r.ResourceNames) > 0 && !karpenterLease) || len(r.NonResourceURLs) > 0 {
			t.Errorf("unexpected rule %+v", r)
		}
	}
	// The leader election test checks that only get and update are used;
	// the refusal events read the Deployment (events.Refusals).
	wantLease := []rbacv1.PolicyRule{{
		APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		ResourceNames: []string{m.lease.Name}, Verbs: []string{"get", "update"},
	}, {
		APIGroups: []string{"apps"}, Resources: []string{"deployments"},
		ResourceNames: []string{m.deployment.Name}, Verbs: []string{"get"},
	}}
	if diff := cmp.Diff(wantLease, m.role.Rules); diff != "" {
		t.Errorf("Role rules mismatch (-want +got):\n%s", diff)
	}
	for _, b := range []struct {
		kind     string
		roleRef  rbacv1.RoleRef
		subjects []rbacv1.Subject
	}{
		{"ClusterRoleBinding", m.clusterBinding.RoleRef, m.clusterBinding.Subjects},
		{"RoleBinding", m.roleBinding.RoleRef, m.roleBinding.Subjects},
	} {
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: m.serviceAccount.Name, Namespace: m.kust.Namespace}}
		if diff := cmp.Diff(want, b.subjects); diff != "" {
			t.Errorf("%s subjects mismatch (-want +got):\n%s", b.kind, diff)
		}
		if b.roleRef.Name != m.clusterRole.Name {
			t.Errorf("%s refers to %q", b.kind, b.roleRef.Name)
		}
	}
}

func TestDeployment(t *testing.T) {
	m := readManifests(t)
	d := m.deployment
	spec := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	for name, sel := range map[string]*metav1.LabelSelector{
		"deployment selector":  d.Spec.Selector,
		"PDB selector":         m.pdb.Spec.Selector,
		"pod anti-affinity":    spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector,
		"zone spread selector": spec.TopologySpreadConstraints[0].LabelSelector,
	} {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || !s.Matches(podLabels) {
			t.Errorf("%s does not select the forwarder's pods (%v)", name, err)
		}
	}
	if got := spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey; got != "kubernetes.io/hostname" {
		t.Errorf("anti-affinity topology key = %q", got)
	}
	if m.pdb.Spec.MinAvailable == nil || m.pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable = %v, want 1", m.pdb.Spec.MinAvailable)
	}
	if spec.ServiceAccountName != m.serviceAccount.Name {
		t.Errorf("serviceAccountName = %q, want %q", spec.ServiceAccountName, m.serviceAccount.Name)
	}
	c := spec.Containers[0]
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext = %+v", sc)
	}

	// The environment the pod gets must satisfy loadConfig, and the probes
	// must hit the paths and port the binary serves.
	env := map[string]string{"POD_NAME": "nodewright-forwarder-0", "POD_NAMESPACE": m.kust.Namespace}
	for _, l := range m.kust.ConfigMapGenerator[0].Literals {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	if m.kust.ConfigMapGenerator[0].Name != c.EnvFrom[0].ConfigMapRef.Name {
		t.Errorf("envFrom names %q, the generator makes %q", c.EnvFrom[0].ConfigMapRef.Name, m.kust.ConfigMapGenerator[0].Name)
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	cfg, err := loadConfig(nil, getenv(env))
	if err != nil {
		t.Fatalf("the Deployment's environment does not configure the forwarder: %v", err)
	}
	if !cfg.LeaderElect || cfg.LeaseName != m.lease.Name || cfg.Namespace != m.kust.Namespace {
		t.Errorf("leader election %v on lease %s/%s; want the manifests' lease %s/%s", cfg.LeaderElect, cfg.Namespace, cfg.LeaseName, m.kust.Namespace, m.lease.Name)
	}
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = ":" + strconv.Itoa(int(p.ContainerPort))
	}
	if ports["metrics"] != cfg.MetricsAddr || ports["health"] != cfg.HealthAddr {
		t.Errorf("container ports %v, forwarder listens on metrics %s and health %s", ports, cfg.MetricsAddr, cfg.HealthAddr)
	}
	if got := c.LivenessProbe.HTTPGet; got.Path != "/healthz" || got.Port.String() != "health" {
		t.Errorf("liveness probe = %+v", got)
	}
	if got := c.ReadinessProbe.HTTPGet; got.Path != "/readyz" || got.Port.String() != "health" {
		t.Errorf("readiness probe = %+v", got)
	}
	if cfg.Deployment != d.Name {
		t.Errorf("refusal events go to Deployment %q, the manifests' is %q", cfg.Deployment, d.Name)
	}
	if m.service.Spec.Ports[0].TargetPort.String() != "metrics" || !labels.SelectorFromSet(m.service.Spec.Selector).Matches(podLabels) {
		t.Errorf("the metrics Service does not reach the pods' metrics port: %+v", m.service.Spec)
	}
	// The image is pinned by digest, never by tag.
	if len(m.kust.Images) != 1 || m.kust.Images[0]["digest"] == nil || m.kust.Images[0]["newTag"] != nil || c.Image != m.kust.Images[0]["name"] {
		t.Errorf("images = %v (container image %q), want the container's image replaced by a repository and digest", m.kust.Images, c.Image)
	}
	if leader.DefaultLeaseDuration.Seconds() != 15 {
		t.Errorf("the Deployment's comment promises a 15 s takeover; the lease lasts %s", leader.DefaultLeaseDuration)
	}
}

func TestCRDsAreReferenced(t *testing.T) {
	m := readManifests(t)
	const dir = "../../shared/apis/crds"
	if !slices.Contains(m.kust.Resources, dir) {
		t.Fatalf("resources %v do not include %s", m.kust.Resources, dir)
	}
	data, err := os.ReadFile(filepath.Join("deploy", dir, "kustomization.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("deploy", dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		want = append(want, filepath.Base(f))
	}
	got := slices.Clone(k.Resources)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the CRD kustomization does not list every CRD (-files +listed):\n%s", diff)
	}
}

// snapshotPeakLiveBytes is the measured live heap of the forwarder building
// the snapshot of 5,000 nodes / 100,000 pods, its input included
// (forwarder/internal/report BenchmarkSnapshot/nodes=5000/pods=100000,
// peak-live-B; shared/disruption/BENCHMARKS.md, "The rest of the path at
// 5,000 nodes": 482 MB; 450 MB on 2026-12-03 once each item is encoded
// once per build).
const snapshotPeakLiveBytes = 450e6

// The pod's memory limit holds 2.5 times the measured live heap: with
// GOGC=100 the Go heap grows to about twice what is live before a
// collection, and the last half of the live heap again covers what is not
// heap (goroutine stacks, the runtime's own, the binary) and the churn of
// the informers between snapshots. At 1Gi (1.07 GB for 1.2 GB needed) the
// forwarder of a 5,000-node cluster would be killed.
func TestMemoryLimitHoldsTheSnapshotOfFiveThousandNodes(t *testing.T) {
	limit := readManifests(t).deployment.Spec.Template.Spec.Containers[0].Resources.Limits.Memory()
	if want := int64(2.5 * snapshotPeakLiveBytes); limit.Value() < want {
		t.Errorf("memory limit %s (%d bytes) is below 2.5 times the measured snapshot live heap (%d bytes)", limit, limit.Value(), want)
	}
}
