package workload_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/cmd/nodewright/internal/workload"
	"github.com/nodewright/nodewright/shared/manifest"
	"github.com/nodewright/nodewright/shared/scheduling"
)

func ptr[T any](v T) *T { return &v }

func template(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
}

func names(pods []*corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func TestExpand(t *testing.T) {
	tmpl := template("inflate")
	hash := workload.TemplateHash(&tmpl)
	deploy := func(r *int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "inflate"}, Spec: appsv1.DeploymentSpec{Replicas: r, Template: tmpl}}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "data"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(3)), Template: template("db")}}
	job := func(parallelism, completions *int32, succeeded int32, suspend bool) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "report"},
			Spec:       batchv1.JobSpec{Parallelism: parallelism, Completions: completions, Suspend: &suspend, Template: template("report")},
			Status:     batchv1.JobStatus{Succeeded: succeeded},
		}
	}
	jobHash := workload.TemplateHash(&job(nil, nil, 0, false).Spec.Template)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(2)), Template: template("web")}}
	rsHash := workload.TemplateHash(&rs.Spec.Template)
	tests := []struct {
		name string
		pods []*corev1.Pod
		want []string
	}{
		{"should create spec.replicas pods of a Deployment named <name>-<hash>-<i>", workload.DeploymentPods(deploy(ptr(int32(3))), 0),
			[]string{"default/inflate-" + hash + "-0", "default/inflate-" + hash + "-1", "default/inflate-" + hash + "-2"}},
		{"should default a Deployment to one replica", workload.DeploymentPods(deploy(nil), 0), []string{"default/inflate-" + hash + "-0"}},
		{"should create nothing for a Deployment scaled to zero", workload.DeploymentPods(deploy(ptr(int32(0))), 0), []string{}},
		{"should create only the missing replicas", workload.DeploymentPods(deploy(ptr(int32(3))), 2), []string{"default/inflate-" + hash + "-2"}},
		{"should name StatefulSet pods <name>-<ordinal> and skip existing ones", workload.StatefulSetPods(sts, map[string]bool{"db-1": true}),
			[]string{"data/db-0", "data/db-2"}},
		{"should run parallelism pods of a Job", workload.JobPods(job(ptr(int32(4)), ptr(int32(4)), 0, false), 0),
			[]string{"default/report-" + jobHash + "-0", "default/report-" + jobHash + "-1", "default/report-" + jobHash + "-2", "default/report-" + jobHash + "-3"}},
		{"should run no more pods than remaining completions", workload.JobPods(job(ptr(int32(4)), ptr(int32(4)), 3, false), 0),
			[]string{"default/report-" + jobHash + "-0"}},
		{"should run nothing for a suspended Job", workload.JobPods(job(ptr(int32(4)), nil, 0, true), 0), []string{}},
		{"should create the missing replicas of a ReplicaSet", workload.ReplicaSetPods(rs, 1), []string{"default/web-abc-" + rsHash + "-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, names(tt.pods)); diff != "" {
				t.Errorf("pods mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpandedPodsAreDeterministicAndPending(t *testing.T) {
	tmpl := template("inflate")
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "inflate"}, Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(2)), Template: tmpl}}
	a, b := workload.DeploymentPods(d, 0), workload.DeploymentPods(d.DeepCopy(), 0)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two expansions differ (-first +second):\n%s", diff)
	}
	if a[0].UID == a[1].UID || a[0].UID == "" {
		t.Errorf("UIDs %q and %q must be distinct and set", a[0].UID, a[1].UID)
	}
	p := a[0]
	got := []string{p.Labels["app"], p.Labels[workload.LabelPodTemplateHash], p.OwnerReferences[0].Kind, string(p.Status.Phase), p.Spec.NodeName}
	want := []string{"inflate", workload.TemplateHash(&tmpl), "ReplicaSet", "Pending", ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod fields mismatch (-want +got):\n%s", diff)
	}
	sts := workload.StatefulSetPods(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{ServiceName: "db", Template: template("db")}}, nil)
	if sts[0].Spec.Hostname != "db-0" || sts[0].Labels[workload.LabelStatefulSetPod] != "db-0" || sts[0].Spec.Subdomain != "db" {
		t.Errorf("StatefulSet pod identity: hostname %q label %q subdomain %q", sts[0].Spec.Hostname, sts[0].Labels[workload.LabelStatefulSetPod], sts[0].Spec.Subdomain)
	}
	idx := batchv1.IndexedCompletion
	jobs := workload.JobPods(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"},
		Spec: batchv1.JobSpec{Parallelism: ptr(int32(2)), CompletionMode: &idx, Template: template("j")}}, 0)
	if jobs[1].Annotations[workload.AnnotationJobIndex] != "1" || jobs[1].Labels[workload.LabelJobName] != "j" {
		t.Errorf("indexed Job pod: annotations %v labels %v", jobs[1].Annotations, jobs[1].Labels)
	}
}

const clusterYAML = `
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {topology.kubernetes.io/zone: us-east-1a}}
spec: {providerID: aws:///us-east-1a/i-1}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "58"}}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-abcde}
spec:
  requirements: []
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
status: {providerID: "aws:///us-east-1a/i-1"}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-inflight}
spec:
  requirements: []
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: v1
kind: Node
metadata: {name: node-2, deletionTimestamp: "2026-01-01T00:00:00Z"}
---
apiVersion: v1
kind: Pod
metadata: {name: api-0, namespace: default}
spec: {nodeName: node-1, containers: [{name: c, image: pause}]}
---
apiVersion: v1
kind: Pod
metadata: {name: moving-0, namespace: default}
spec: {nodeName: node-2, containers: [{name: c, image: pause}]}
---
apiVersion: v1
kind: Pod
metadata: {name: nominated-0}
spec: {containers: [{name: c, image: pause}]}
status: {nominatedNodeName: default-inflight}
---
apiVersion: v1
kind: Pod
metadata: {name: pending-0}
spec: {containers: [{name: c, image: pause}]}
---
apiVersion: v1
kind: Pod
metadata: {name: gated-0}
spec: {containers: [{name: c, image: pause}]}
status:
  conditions: [{type: PodScheduled, status: "False", reason: SchedulingGated}]
---
apiVersion: v1
kind: Pod
metadata: {name: marked-0}
spec: {containers: [{name: c, image: pause}]}
status:
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
---
apiVersion: v1
kind: Pod
metadata: {name: done-0}
spec: {containers: [{name: c, image: pause}]}
status: {phase: Succeeded}
---
apiVersion: v1
kind: Pod
metadata:
  name: agent-x
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u1, controller: true}]
spec: {containers: [{name: c, image: pause}]}
---
apiVersion: v1
kind: Pod
metadata: {name: lost-0}
spec: {nodeName: node-9, containers: [{name: c, image: pause}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: pause}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-5d4f
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u2, controller: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: pause}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
`

func TestBuild(t *testing.T) {
	objs, err := manifest.Read(strings.NewReader(clusterYAML), "cluster.yaml")
	if err != nil {
		t.Fatalf("manifest.Read() error = %v", err)
	}
	c, err := workload.Build(objs)
	if err != nil {
		t.Fatalf("Build() error = %v", err)
	}
	type nodeSummary struct {
		Node, Claim string
		Pods        []string
		Deleting    bool
	}
	var nodes []nodeSummary
	for _, n := range c.Nodes {
		s := nodeSummary{Pods: names(n.Pods), Deleting: n.MarkedForDeletion}
		if n.Node != nil {
			s.Node = n.Node.Name
		}
		if n.NodeClaim != nil {
			s.Claim = n.NodeClaim.Name
		}
		nodes = append(nodes, s)
	}
	wantNodes := []nodeSummary{
		{Node: "node-1", Claim: "default-abcde", Pods: []string{"default/api-0"}},
		{Node: "node-2", Pods: []string{"default/moving-0"}, Deleting: true},
		{Claim: "default-inflight", Pods: []string{"default/nominated-0"}},
	}
	if diff := cmp.Diff(wantNodes, nodes); diff != "" {
		t.Errorf("nodes mismatch (-want +got):\n%s", diff)
	}
	pending := names(c.Pending)
	if len(pending) != 5 || pending[0] != "default/moving-0" || pending[1] != "default/pending-0" || pending[2] != "default/marked-0" ||
		!strings.HasPrefix(pending[3], "default/web-") || !strings.HasPrefix(pending[4], "default/web-") {
		t.Errorf("pending = %v, want moving-0 (node deleting), pending-0, marked-0 and two web replicas", pending)
	}
	var ignored, ignoredFrom []string
	for _, n := range c.Ignored {
		ignored = append(ignored, n.Object)
		ignoredFrom = append(ignoredFrom, n.Source)
	}
	if diff := cmp.Diff([]string{"cluster.yaml#17", "cluster.yaml#9", "cluster.yaml#11", "cluster.yaml#12", "cluster.yaml#13", "cluster.yaml#15"}, ignoredFrom); diff != "" {
		t.Errorf("ignored sources mismatch (-want +got):\n%s", diff)
	}
	wantIgnored := []string{"ConfigMap settings", "Pod default/gated-0", "Pod default/done-0", "Pod default/agent-x", "Pod default/lost-0", "ReplicaSet default/web-5d4f"}
	if diff := cmp.Diff(wantIgnored, ignored); diff != "" {
		t.Errorf("ignored mismatch (-want +got):\n%s", diff)
	}
	if len(c.PodDisruptionBudgets) != 1 {
		t.Errorf("%d PodDisruptionBudgets, want 1", len(c.PodDisruptionBudgets))
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{"should reject two NodePools with one name", `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec: {template: {spec: {requirements: [], nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec: {template: {spec: {requirements: [], nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}
`, `in.yaml#2: NodePool "default": duplicate of in.yaml#1`},
		{"should reject a cpu request too large for int64 milli-units", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: \"1e19\"}}}]}\n", `in.yaml#1: Pod "p": spec.containers[0].resources.requests[cpu]: 10e18 is too large`},
		{"should reject a cpu request of 2^63-1", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: \"9223372036854775807\"}}}]}\n", `spec.containers[0].resources.requests[cpu]: 9223372036854775807 is too large`},
		{"should reject a memory request of 1e30", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {memory: 1e30}}}]}\n", `spec.containers[0].resources.requests[memory]: 1e+30 is too large`},
		{"should reject a negative request", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: \"-1\"}}}]}\n", `spec.containers[0].resources.requests[cpu]: -1 must not be negative`},
		{"should reject a pod without containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", `in.yaml#1: Pod "p": spec.containers: required`},
		{"should reject an anti-affinity term without a topologyKey", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}], affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: \"\", labelSelector: {}}]}}}\n", `spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: required`},
		{"should reject a topology spread constraint with maxSkew 0 and no topologyKey", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}], topologySpreadConstraints: [{maxSkew: 0, topologyKey: \"\", whenUnsatisfiable: Maybe}]}\n", `spec.topologySpreadConstraints[0].maxSkew: 0 must be greater than zero`},
		{"should reject a Deployment without a spec", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", `in.yaml#1: Deployment "d": spec.selector: required`},
		{"should reject a Deployment whose selector does not match its template labels", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {selector: {matchLabels: {app: zzz}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c}]}}}\n", `spec.template.metadata.labels: selector does not match template labels`},
		{"should reject a Node without a name, naming its document", "apiVersion: v1\nkind: Node\nmetadata: {labels: {a: b}}\n", `in.yaml#1: Node "": metadata.name: required`},
		{"should reject a NodeClaim without a name, naming its document", "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {}\n", `in.yaml#1: NodeClaim "": metadata.name: required`},
		{"should refuse to expand more than 100,000 pods, naming the workload", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 2147483647, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c}]}}}\n", `in.yaml#1: Deployment "d": 2147483647 replicas would bring the plan to 2147483647 pods, over the limit of 100000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := manifest.Read(strings.NewReader(tt.yaml), "in.yaml")
			if err != nil {
				t.Fatalf("manifest.Read() error = %v", err)
			}
			_, err = workload.Build(objs)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Build() error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestBuildGivesGenerateNamePodsDistinctStableNames(t *testing.T) {
	const pod = "apiVersion: v1\nkind: Pod\nmetadata: {generateName: worker-, namespace: default}\nspec: {containers: [{name: c}]}\n"
	objs, err := manifest.Read(strings.NewReader(pod+"---\n"+pod), "doc.yaml")
	if err != nil {
		t.Fatalf("manifest.Read() error = %v", err)
	}
	c, err := workload.Build(objs)
	if err != nil {
		t.Fatalf("Build() error = %v", err)
	}
	want := []string{
		"default/" + workload.GeneratedName("worker-", "doc.yaml#1"),
		"default/" + workload.GeneratedName("worker-", "doc.yaml#2"),
	}
	if diff := cmp.Diff(want, names(c.Pending)); diff != "" {
		t.Errorf("pending mismatch (-want +got):\n%s", diff)
	}
	if want[0] == want[1] || len(want[0]) != len("default/worker-")+5 {
		t.Errorf("generated names %v, want two distinct worker-<5 characters>", want)
	}
}

func TestNewReportRoundsClaimPrices(t *testing.T) {
	tests := []struct {
		name  string
		price float64
		want  float64
	}{
		{"should round float noise of a spot estimate to 6 decimals", 0.13248549999999998, 0.132485},
		{"should keep a price that has 4 decimals", 0.096, 0.096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := workload.NewReport(scheduling.Input{}, scheduling.Result{NewClaims: []scheduling.NewClaim{{
				NodePool: "p", Expected: scheduling.ExpectedOffering{PricePerHour: tt.price},
			}}})
			if diff := cmp.Diff(tt.want, r.NodeClaims[0].Expected.PricePerHour); diff != "" {
				t.Errorf("claim price mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, r.PricePerHour); diff != "" {
				t.Errorf("total price mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
