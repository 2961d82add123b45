package requirements_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// pod builds a pod named web-0 in namespace default with opts applied.
func pod(opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: "uid-web-0"}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func nodeSelector(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func nodeAffinity(p *corev1.Pod) *corev1.NodeAffinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	return p.Spec.Affinity.NodeAffinity
}

// required adds one required node-selector term (ORed with earlier ones).
func required(exprs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		na := nodeAffinity(p)
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		}
		na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
			na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
}

func preferred(weight int32, exprs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		na := nodeAffinity(p)
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestForPod(t *testing.T) {
	const zone = v1.LabelTopologyZone
	tests := []struct {
		name     string
		pod      *corev1.Pod
		preferOK bool
		want     string
	}{
		{
			name: "a pod without constraints has no requirements",
			pod:  pod(), preferOK: true,
			want: "",
		},
		{
			name: "should turn nodeSelector entries into In requirements",
			pod:  pod(nodeSelector("team", "x", v1.LabelArch, "arm64")), preferOK: true,
			want: "kubernetes.io/arch In [arm64], team In [x]",
		},
		{
			name: "should normalize deprecated nodeSelector keys",
			pod:  pod(nodeSelector("failure-domain.beta.kubernetes.io/zone", "us-east-1a")), preferOK: true,
			want: "topology.kubernetes.io/zone In [us-east-1a]",
		},
		{
			name: "should intersect nodeSelector with required node affinity",
			pod:  pod(nodeSelector(zone, "us-east-1a"), required(expr(zone, in, "us-east-1a", "us-east-1b"), expr(cpu, gt, "4"))), preferOK: true,
			want: "karpenter.k8s.aws/instance-cpu Exists >=5, topology.kubernetes.io/zone In [us-east-1a]",
		},
		{
			name: "should take only the first of ORed required terms",
			pod:  pod(required(expr(zone, in, "us-east-1a")), required(expr(zone, in, "us-east-1b"))), preferOK: true,
			want: "topology.kubernetes.io/zone In [us-east-1a]",
		},
		{
			name: "should treat the heaviest preferred term as required",
			pod: pod(
				preferred(10, expr(zone, in, "us-east-1a")),
				preferred(50, expr(zone, in, "us-east-1b")),
				preferred(20, expr(v1.LabelCapacityType, in, "spot")),
			), preferOK: true,
			want: "topology.kubernetes.io/zone In [us-east-1b]",
		},
		{
			name: "should take the first of equally heavy preferred terms",
			pod:  pod(preferred(5, expr(zone, in, "us-east-1a")), preferred(5, expr(zone, in, "us-east-1b"))), preferOK: true,
			want: "topology.kubernetes.io/zone In [us-east-1a]",
		},
		{
			name: "should intersect the preferred term with required affinity",
			pod:  pod(required(expr(zone, in, "us-east-1a", "us-east-1b")), preferred(1, expr(zone, in, "us-east-1b", "us-east-1c"))), preferOK: true,
			want: "topology.kubernetes.io/zone In [us-east-1b]",
		},
		{
			name: "should ignore preferences under the Ignore policy",
			pod:  pod(required(expr(zone, in, "us-east-1a", "us-east-1b")), preferred(100, expr(zone, in, "us-east-1b"))), preferOK: false,
			want: "topology.kubernetes.io/zone In [us-east-1a us-east-1b]",
		},
		{
			name: "an impossible preference yields an impossible requirement",
			pod:  pod(nodeSelector(zone, "us-east-1a"), preferred(1, expr(zone, in, "us-east-1b"))), preferOK: true,
			want: "topology.kubernetes.io/zone DoesNotExist",
		},
		{
			name: "an empty required node selector adds nothing",
			pod: pod(func(p *corev1.Pod) {
				nodeAffinity(p).RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
			}), preferOK: true,
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := requirements.ForPod(tt.pod, tt.preferOK).String()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ForPod() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForPodLeavesThePodUnchanged(t *testing.T) {
	p := pod(preferred(1, expr("a", in, "x")), preferred(9, expr("b", in, "y")))
	before := p.DeepCopy()
	_ = requirements.ForPod(p, true)
	if diff := cmp.Diff(before, p); diff != "" {
		t.Errorf("ForPod() changed the pod (-before +after):\n%s", diff)
	}
}

func TestValidatePodAccepts(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
	}{
		{name: "a pod without constraints", pod: pod()},
		{name: "well-known and custom labels", pod: pod(nodeSelector(v1.LabelArch, "amd64", "team", "x"), required(expr(cpu, gt, "4"), expr(v1.LabelInstanceGPUCount, dne)))},
		{name: "karpenter.sh/nodepool In", pod: pod(nodeSelector(v1.LabelNodePool, "default"))},
		{name: "karpenter.sh/nodepool NotIn", pod: pod(required(expr(v1.LabelNodePool, notIn, "default")))},
		{name: "labels in domains that merely end like a restricted one", pod: pod(nodeSelector("notkarpenter.sh/x", "y"))},
		{name: "deprecated well-known keys", pod: pod(nodeSelector("beta.kubernetes.io/arch", "amd64"))},
		{name: "a preferred term on kubernetes.io/hostname (only required terms are validated, Karpenter >= v1.5)", pod: pod(preferred(10, expr(v1.LabelHostname, in, "ip-10-0-0-1")))},
		{name: "a preferred term on a restricted karpenter.sh label with an unsupported operator", pod: pod(preferred(10, expr("karpenter.sh/initialized", "Near", "x")))},
		{name: "a preferred term with matchFields", pod: pod(func(p *corev1.Pod) {
			nodeAffinity(p).PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{
				{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: in, Values: []string{"n"}}}}}}
		})},
		{name: "an empty matchFields list", pod: pod(func(p *corev1.Pod) {
			nodeAffinity(p).RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{}}}}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := requirements.ValidatePod(tt.pod); err != nil {
				t.Errorf("ValidatePod() = %v, want nil", err)
			}
		})
	}
}

func TestValidatePodRejects(t *testing.T) {
	matchFields := func(p *corev1.Pod) {
		nodeAffinity(p).RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: in, Values: []string{"node-1"}}}}}}
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		want    string
		wantErr error
	}{
		{
			name: "should ignore a pod whose required node affinity uses matchFields",
			pod:  pod(matchFields),
			want: "validate pod default/web-0: node selector term with matchFields is not supported",
		},
		{
			name: "should ignore a pod selecting kubernetes.io/hostname",
			pod:  pod(nodeSelector(v1.LabelHostname, "ip-10-0-0-1")),
			want: "validate pod default/web-0: label kubernetes.io/hostname is restricted; use a well-known label or a custom label outside the karpenter.sh and karpenter.k8s.aws domains",
		},
		{
			name: "should ignore a pod requiring a restricted karpenter.sh label",
			pod:  pod(required(expr("karpenter.sh/initialized", exist))),
			want: "validate pod default/web-0: label karpenter.sh/initialized is restricted; use a well-known label or a custom label outside the karpenter.sh and karpenter.k8s.aws domains",
		},
		{
			name: "should ignore a pod requiring a restricted karpenter.k8s.aws subdomain label",
			pod:  pod(required(expr("x.karpenter.k8s.aws/y", exist))),
			want: "validate pod default/web-0: label x.karpenter.k8s.aws/y is restricted; use a well-known label or a custom label outside the karpenter.sh and karpenter.k8s.aws domains",
		},
		{
			name: "should reject In without values and a non-integer Gt",
			pod:  pod(required(expr("team", in), expr(cpu, gt, "four"))),
			want: "validate pod default/web-0: key team with operator In must have a value defined; key karpenter.k8s.aws/instance-cpu with operator Gt must have a single non-negative integer value",
		},
		{
			name: "should reject a negative Lt and Gt with two values",
			pod:  pod(required(expr(cpu, lt, "-1"), expr(v1.LabelInstanceMemory, gt, "1", "2"))),
			want: "validate pod default/web-0: key karpenter.k8s.aws/instance-cpu with operator Lt must have a single non-negative integer value; key karpenter.k8s.aws/instance-memory with operator Gt must have a single non-negative integer value",
		},
		{
			name: "should reject an unsupported operator",
			pod:  pod(required(expr("team", "Near", "x"))),
			want: "validate pod default/web-0: key team has an unsupported operator Near",
		},
		{
			name: "should check later ORed terms too",
			pod:  pod(required(expr("team", in, "x")), matchFields),
			want: "validate pod default/web-0: node selector term with matchFields is not supported",
		},
		{
			name:    "should silently ignore a pod requiring karpenter.sh/nodepool DoesNotExist",
			pod:     pod(required(expr(v1.LabelNodePool, dne))),
			want:    "validate pod default/web-0: pod requires karpenter.sh/nodepool DoesNotExist",
			wantErr: requirements.ErrNodePoolDoesNotExist,
		},
		{
			name:    "should silently ignore a pod preferring karpenter.sh/nodepool DoesNotExist",
			pod:     pod(preferred(1, expr(v1.LabelNodePool, dne))),
			want:    "validate pod default/web-0: pod requires karpenter.sh/nodepool DoesNotExist",
			wantErr: requirements.ErrNodePoolDoesNotExist,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := requirements.ValidatePod(tt.pod)
			if err == nil {
				t.Fatalf("ValidatePod() = nil, want %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("ValidatePod() error mismatch (-want +got):\n%s", diff)
			}
			if got := errors.Is(err, requirements.ErrNodePoolDoesNotExist); got != (tt.wantErr != nil) {
				t.Errorf("errors.Is(err, ErrNodePoolDoesNotExist) = %t, want %t", got, tt.wantErr != nil)
			}
		})
	}
}

func TestRestrictedKey(t *testing.T) {
	keys := []string{
		v1.LabelHostname, "karpenter.sh/registered", "karpenter.k8s.aws/foo", "a.karpenter.sh/b",
		v1.LabelNodePool, v1.LabelCapacityType, v1.LabelInstanceCPU, v1.LabelTopologyZone,
		"team", "example.com/team", "kubernetes.io/role", "notkarpenter.sh/x",
	}
	want := map[string]bool{
		v1.LabelHostname: true, "karpenter.sh/registered": true, "karpenter.k8s.aws/foo": true, "a.karpenter.sh/b": true,
		v1.LabelNodePool: false, v1.LabelCapacityType: false, v1.LabelInstanceCPU: false, v1.LabelTopologyZone: false,
		"team": false, "example.com/team": false, "kubernetes.io/role": false, "notkarpenter.sh/x": false,
	}
	got := map[string]bool{}
	for _, k := range keys {
		got[k] = requirements.RestrictedKey(k)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RestrictedKey() mismatch (-want +got):\n%s", diff)
	}
}
