package v1_test

import (
	"time"

	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func ptr[T any](v T) *T { return &v }

func req(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// nodePool returns a valid, defaulted NodePool "default" changed by mut.
func nodePool(mut ...func(*v1.NodePool)) *v1.NodePool {
	np := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot")},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
		}}},
	}
	np.SetDefaults()
	for _, m := range mut {
		m(np)
	}
	return np
}

// nodeClass returns a valid, defaulted EC2NodeClass "default" changed by mut.
func nodeClass(mut ...func(*v1.EC2NodeClass)) *v1.EC2NodeClass {
	nc := &v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}},
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}},
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpenterNodeRole",
		},
	}
	nc.SetDefaults()
	for _, m := range mut {
		m(nc)
	}
	return nc
}

func requirements(np *v1.NodePool) *[]v1.NodeSelectorRequirementWithMinValues {
	return &np.Spec.Template.Spec.Requirements
}

// lines returns the field errors of a Validate result as "path: message".
func lines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *v1.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	var out []string
	for _, f := range ve.Fields {
		out = append(out, f.Error())
	}
	return out
}

func TestNodePoolValidate(t *testing.T) {
	tests := []struct {
		name string
		give *v1.NodePool
	}{
		{name: "should accept a minimal defaulted NodePool", give: nodePool()},
		{name: "should accept every operator with valid values", give: nodePool(func(np *v1.NodePool) {
			*requirements(np) = append(*requirements(np),
				req("team", corev1.NodeSelectorOpNotIn, "a"),
				req("team2", corev1.NodeSelectorOpExists),
				req("team3", corev1.NodeSelectorOpDoesNotExist),
				req(v1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "0"),
				req(v1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "64"),
				req(v1.LabelInstanceMemory, v1.NodeSelectorOpGte, "2048"),
				req(v1.LabelInstanceMemory, v1.NodeSelectorOpLte, "65536"))
		})},
		{name: "should accept minValues equal to the number of In values", give: nodePool(func(np *v1.NodePool) {
			r := req(v1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5", "c5", "r5")
			r.MinValues = ptr(3)
			*requirements(np) = append(*requirements(np), r)
		})},
		{name: "should accept minValues 50 with operator Exists", give: nodePool(func(np *v1.NodePool) {
			r := req(v1.LabelInstanceType, corev1.NodeSelectorOpExists)
			r.MinValues = ptr(50)
			*requirements(np) = append(*requirements(np), r)
		})},
		{name: "should accept capacity-type In when one value is known", give: nodePool(func(np *v1.NodePool) {
			*requirements(np) = []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "cheap", "reserved")}
		})},
		{name: "should accept normalized beta labels in requirements", give: nodePool(func(np *v1.NodePool) {
			*requirements(np) = append(*requirements(np), req("beta.kubernetes.io/arch", corev1.NodeSelectorOpIn, "amd64"))
		})},
		{name: "should accept the newer nitro-sandbox label", give: nodePool(func(np *v1.NodePool) {
			*requirements(np) = append(*requirements(np), req(v1.LabelNitroSandbox, corev1.NodeSelectorOpIn, "true"))
		})},
		{name: "should accept labels in exception and custom domains", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{
				"node.kubernetes.io/role": "x", "kops.k8s.io/group": "y", "example.com/team": "z",
				v1.LabelCapacityType: "spot", v1.LabelInstanceFamily: "m5", "plain": "",
			}
		})},
		{name: "should accept taints with the same key and different effects", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Value: "b", Effect: corev1.TaintEffectNoSchedule}}
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoExecute}}
		})},
		{name: "should accept zones of one region, a Local Zone among them, and NotIn zones of another", give: nodePool(func(np *v1.NodePool) {
			*requirements(np) = append(*requirements(np), req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1-bos-1a"),
				req(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "us-west-2a"))
		})},
		{name: "should accept Never, compound durations and a termination grace period", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillable("Never")
			np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillable("1h30m15s")
			np.Spec.Template.Spec.TerminationGracePeriod = &v1.Duration{Raw: "48h"}
		})},
		{name: "should accept scheduled budgets with cron names, steps, lists and shorthands", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Disruption.Budgets = []v1.Budget{
				{Nodes: "0", Schedule: ptr("0 9 * * MON-FRI"), Duration: &v1.Duration{Raw: "8h"}},
				{Nodes: "100%", Schedule: ptr("*/15 0-6,22 1 jan-mar,dec ?"), Duration: &v1.Duration{Raw: "1h30m"}},
				{Nodes: "5", Schedule: ptr("@daily"), Duration: &v1.Duration{Raw: "10m0s"}, Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted, v1.DisruptionReasonEmpty}},
			}
		})},
		{name: "should accept an explicit empty budget list", give: nodePool(func(np *v1.NodePool) { np.Spec.Disruption.Budgets = []v1.Budget{} })},
		{name: "should accept weights 1 and 100", give: nodePool(func(np *v1.NodePool) { np.Spec.Weight = ptr(int32(100)) })},
		{name: "should accept a static pool with only a nodes limit", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Replicas = ptr(int64(3))
			np.Spec.Limits = v1.Limits{"nodes": resource.MustParse("5")}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.give.Validate(); err != nil {
				t.Errorf("Validate() error:\n%v", err)
			}
		})
	}
}

func TestNodePoolValidateErrors(t *testing.T) {
	const rp = "spec.template.spec.requirements[1]"
	withReq := func(r v1.NodeSelectorRequirementWithMinValues) *v1.NodePool {
		return nodePool(func(np *v1.NodePool) { *requirements(np) = append(*requirements(np), r) })
	}
	withMin := func(r v1.NodeSelectorRequirementWithMinValues, n int) v1.NodeSelectorRequirementWithMinValues {
		r.MinValues = &n
		return r
	}
	withBudget := func(b v1.Budget) *v1.NodePool {
		return nodePool(func(np *v1.NodePool) { np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "10%"}, b} })
	}
	tests := []struct {
		name string
		give *v1.NodePool
		want []string
	}{
		{name: "should fail for a nodewright.dev annotation in the template", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.ObjectMeta.Annotations = map[string]string{v1.AnnotationAdoptedFrom: "karpenter", "example.com/team": "web"}
		}), want: []string{`spec.template.metadata.annotations[nodewright.dev/adopted-from]: annotations under nodewright.dev/ are nodewright's own and may not be set in a NodePool template`}},
		{name: "should fail for an unknown operator", give: withReq(req("a", "Equals", "b")),
			want: []string{rp + `.operator: "Equals" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte`}},
		{name: "should fail for a missing operator", give: withReq(req("a", "", "b")),
			want: []string{rp + `.operator: required; one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte`}},
		{name: "should fail for a zone requirement spanning two regions", give: withReq(req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1-bos-1a", "us-west-2a")),
			want: []string{rp + `.values[2]: zone "us-west-2a" is in region us-west-2 but zone "us-east-1a" is in us-east-1; a NodePool's zones must be in the cluster's one region`}},
		{name: "should fail for a deprecated-key zone requirement spanning two regions", give: withReq(req("failure-domain.beta.kubernetes.io/zone", corev1.NodeSelectorOpIn, "eu-west-1a", "eu-central-1b")),
			want: []string{rp + `.values[1]: zone "eu-central-1b" is in region eu-central-1 but zone "eu-west-1a" is in eu-west-1; a NodePool's zones must be in the cluster's one region`}},
		{name: "should fail for In without values", give: withReq(req("a", corev1.NodeSelectorOpIn)),
			want: []string{rp + `.values: operator In needs at least one value`}},
		{name: "should fail for Gt with two values", give: withReq(req(v1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "1", "2")),
			want: []string{rp + `.values: operator Gt needs exactly one value, got 2`}},
		{name: "should fail for Lt with a non-integer", give: withReq(req(v1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "1.5")),
			want: []string{rp + `.values[0]: operator Lt needs a non-negative integer, got "1.5"`}},
		{name: "should fail for Gte with a negative integer", give: withReq(req(v1.LabelInstanceCPU, v1.NodeSelectorOpGte, "-1")),
			want: []string{rp + `.values[0]: "-1" is not a valid label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
				rp + `.values[0]: operator Gte needs a non-negative integer, got "-1"`}},
		{name: "should fail for minValues above the number of In values", give: withReq(withMin(req("a", corev1.NodeSelectorOpIn, "x", "y"), 3)),
			want: []string{rp + `.minValues: 3 is more than the 2 values listed; operator In needs at least minValues values`}},
		{name: "should fail for minValues 0", give: withReq(withMin(req("a", corev1.NodeSelectorOpExists), 0)),
			want: []string{rp + `.minValues: 0 is out of range 1..50`}},
		{name: "should fail for minValues 51", give: withReq(withMin(req("a", corev1.NodeSelectorOpExists), 51)),
			want: []string{rp + `.minValues: 51 is out of range 1..50`}},
		{name: "should fail for a kubernetes.io/hostname requirement", give: withReq(req(v1.LabelHostname, corev1.NodeSelectorOpIn, "x")),
			want: []string{rp + `.key: label "kubernetes.io/hostname" is restricted; Karpenter sets it per node`}},
		{name: "should fail for a karpenter.sh/nodepool requirement", give: withReq(req(v1.LabelNodePool, corev1.NodeSelectorOpIn, "x")),
			want: []string{rp + `.key: label "karpenter.sh/nodepool" is restricted; Karpenter sets it`}},
		{name: "should fail for a requirement in the karpenter.sh domain", give: withReq(req("karpenter.sh/custom", corev1.NodeSelectorOpExists)),
			want: []string{rp + `.key: label domain "karpenter.sh" is restricted; use a well-known label or a key in a domain of your own`}},
		{name: "should fail for an unlisted karpenter.k8s.aws key", give: withReq(req("karpenter.k8s.aws/instance-colour", corev1.NodeSelectorOpExists)),
			want: []string{rp + `.key: label domain "karpenter.k8s.aws" is restricted; use a well-known label or a key in a domain of your own`}},
		{name: "should fail for a key in the kubernetes.io domain", give: withReq(req("kubernetes.io/role", corev1.NodeSelectorOpExists)),
			want: []string{rp + `.key: label domain "kubernetes.io" is restricted; use a well-known label or a key in a domain of your own`}},
		{name: "should fail for an invalid key", give: withReq(req("bad key", corev1.NodeSelectorOpExists)),
			want: []string{rp + `.key: "bad key" is not a valid label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}},
		{name: "should fail for capacity-type In with no known value", give: nodePool(func(np *v1.NodePool) {
			*requirements(np) = []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "cheap")}
		}), want: []string{`spec.template.spec.requirements[0].values: none of "cheap" is a capacity type; use at least one of on-demand, spot, reserved`}},
		{name: "should fail for missing requirements", give: nodePool(func(np *v1.NodePool) { *requirements(np) = nil }),
			want: []string{`spec.template.spec.requirements: required`}},
		{name: "should fail for restricted template labels", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{v1.LabelNodePool: "x", "karpenter.sh/team": "y", v1.LabelHostname: "z", "team": "bad value!"}
		}), want: []string{
			`spec.template.metadata.labels[karpenter.sh/nodepool]: label "karpenter.sh/nodepool" is restricted; Karpenter sets it`,
			`spec.template.metadata.labels[karpenter.sh/team]: label domain "karpenter.sh" is restricted; use a well-known label or a key in a domain of your own`,
			`spec.template.metadata.labels[kubernetes.io/hostname]: label "kubernetes.io/hostname" is restricted; Karpenter sets it per node`,
			`spec.template.metadata.labels[team]: "bad value!" is not a valid label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		}},
		{name: "should fail for a duplicate taint across taints and startupTaints", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "a", Value: "v", Effect: corev1.TaintEffectNoSchedule}}
		}), want: []string{`spec.template.spec.startupTaints[0]: duplicates spec.template.spec.taints[0] (same key "a" and effect NoSchedule)`}},
		{name: "should fail for a bad taint effect, key and value", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "", Value: "a b", Effect: "NoScheduleX"}, {Key: "k"}}
		}), want: []string{
			`spec.template.spec.taints[0].key: required`,
			`spec.template.spec.taints[0].value: "a b" is not a valid taint value: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`spec.template.spec.taints[0].effect: "NoScheduleX" is not one of NoSchedule, PreferNoSchedule, NoExecute`,
			`spec.template.spec.taints[1].effect: required; one of NoSchedule, PreferNoSchedule, NoExecute`,
		}},
		{name: "should fail for a nodeClassRef without name, kind and group", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{}
		}), want: []string{
			`spec.template.spec.nodeClassRef.group: required (karpenter.k8s.aws for an EC2NodeClass)`,
			`spec.template.spec.nodeClassRef.kind: required (EC2NodeClass)`,
			`spec.template.spec.nodeClassRef.name: required: the name of the EC2NodeClass`,
		}},
		{name: "should fail for a missing nodeClassRef", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef = nil
		}), want: []string{`spec.template.spec.nodeClassRef: required`}},
		{name: "should fail for a nodeClassRef group with a version", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef.Group = "karpenter.k8s.aws/v1"
		}), want: []string{`spec.template.spec.nodeClassRef.group: "karpenter.k8s.aws/v1" must be an API group without a version, such as "karpenter.k8s.aws"`}},
		{name: "should fail for expireAfter in days", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = v1.NillableDuration{Raw: "3d"}
		}), want: []string{`spec.template.spec.expireAfter: "3d" is not "Never" or a duration of whole hours, minutes and seconds such as "720h" or "1h30m"`}},
		{name: "should fail for a fractional terminationGracePeriod", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &v1.Duration{Raw: "1.5h"}
		}), want: []string{`spec.template.spec.terminationGracePeriod: "1.5h" is not a duration of whole hours, minutes and seconds such as "48h" or "1h30m"`}},
		{name: "should fail for consolidateAfter with a bad unit", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = v1.NillableDuration{Raw: "5x"}
		}), want: []string{`spec.disruption.consolidateAfter: "5x" is not "Never" or a duration of whole hours, minutes and seconds such as "720h" or "1h30m"`}},
		{name: "should fail for a misspelt consolidationPolicy", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Disruption.ConsolidationPolicy = "WhenUnderutilized"
		}), want: []string{`spec.disruption.consolidationPolicy: "WhenUnderutilized" is not one of WhenEmpty, WhenEmptyOrUnderutilized, Balanced`}},
		{name: "should fail for a schedule without duration", give: withBudget(v1.Budget{Nodes: "0", Schedule: ptr("0 9 * * *")}),
			want: []string{`spec.disruption.budgets[1].duration: required when schedule is set`}},
		{name: "should fail for a duration without schedule", give: withBudget(v1.Budget{Nodes: "0", Duration: &v1.Duration{Raw: "1h"}}),
			want: []string{`spec.disruption.budgets[1].schedule: required when duration is set`}},
		{name: "should fail for budget nodes above 100%", give: withBudget(v1.Budget{Nodes: "150%"}),
			want: []string{`spec.disruption.budgets[1].nodes: "150%" is not a node count ("5") or a percentage from 0% to 100% ("10%")`}},
		{name: "should fail for an unknown budget reason", give: withBudget(v1.Budget{Nodes: "1", Reasons: []v1.DisruptionReason{"Empty", "Expired"}}),
			want: []string{`spec.disruption.budgets[1].reasons[1]: "Expired" is not one of Underutilized, Empty, Drifted`}},
		{name: "should fail for a cron schedule with four fields", give: withBudget(v1.Budget{Nodes: "0", Schedule: ptr("0 9 * *"), Duration: &v1.Duration{Raw: "1h"}}),
			want: []string{`spec.disruption.budgets[1].schedule: "0 9 * *" is not a cron schedule ("0 9 * * mon-fri") or an @ shorthand ("@daily")`}},
		{name: "should fail for a cron hour out of range", give: withBudget(v1.Budget{Nodes: "0", Schedule: ptr("0 24 * * *"), Duration: &v1.Duration{Raw: "1h"}}),
			want: []string{`spec.disruption.budgets[1].schedule: "0 24 * * *" is not a valid cron schedule: end of range (24) above maximum (23): 24`}},
		{name: "should fail for an unknown cron weekday name", give: withBudget(v1.Budget{Nodes: "0", Schedule: ptr("0 9 * * mon-fry"), Duration: &v1.Duration{Raw: "1h"}}),
			want: []string{`spec.disruption.budgets[1].schedule: "0 9 * * mon-fry" is not a valid cron schedule: failed to parse int from fry: strconv.Atoi: parsing "fry": invalid syntax`}},
		{name: "should fail for a schedule with a CRON_TZ prefix, which the UTC-only evaluation cannot read", give: withBudget(v1.Budget{Nodes: "3", Schedule: ptr("CRON_TZ=Asia/Tokyo 0 2 * * 0"), Duration: &v1.Duration{Raw: "2h"}}),
			want: []string{`spec.disruption.budgets[1].schedule: "CRON_TZ=Asia/Tokyo 0 2 * * 0" is not a valid cron schedule: time zone prefix "CRON_TZ=Asia/Tokyo" is not supported: budget schedules are evaluated in UTC`}},
		{name: "should fail for a schedule with a TZ prefix, even TZ=UTC", give: withBudget(v1.Budget{Nodes: "3", Schedule: ptr("TZ=UTC 0 2 * * 0"), Duration: &v1.Duration{Raw: "2h"}}),
			want: []string{`spec.disruption.budgets[1].schedule: "TZ=UTC 0 2 * * 0" is not a valid cron schedule: time zone prefix "TZ=UTC" is not supported: budget schedules are evaluated in UTC`}},
		{name: "should fail for an unknown @ shorthand", give: withBudget(v1.Budget{Nodes: "0", Schedule: ptr("@fortnightly"), Duration: &v1.Duration{Raw: "1h"}}),
			want: []string{`spec.disruption.budgets[1].schedule: "@fortnightly" is not a cron schedule ("0 9 * * mon-fri") or an @ shorthand ("@daily")`}},
		{name: "should fail for a budget duration with seconds", give: withBudget(v1.Budget{Nodes: "0", Schedule: ptr("@daily"), Duration: &v1.Duration{Raw: "90s"}}),
			want: []string{`spec.disruption.budgets[1].duration: "90s" is not a duration in whole hours and minutes such as "8h", "30m" or "1h30m"`}},
		{name: "should fail for weight 0", give: nodePool(func(np *v1.NodePool) { np.Spec.Weight = ptr(int32(0)) }),
			want: []string{`spec.weight: 0 is out of range 1..100`}},
		{name: "should fail for weight 101", give: nodePool(func(np *v1.NodePool) { np.Spec.Weight = ptr(int32(101)) }),
			want: []string{`spec.weight: 101 is out of range 1..100`}},
		{name: "should fail for replicas with weight, a cpu limit and a negative count", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Replicas = ptr(int64(-1))
			np.Spec.Weight = ptr(int32(10))
			np.Spec.Limits = v1.Limits{"cpu": resource.MustParse("10"), "nodes": resource.MustParse("3")}
		}), want: []string{
			`spec.replicas: -1 is negative`,
			`spec.weight: cannot be set together with replicas (a static NodePool)`,
			`spec.limits[cpu]: only the "nodes" limit is allowed together with replicas`,
		}},
		{name: "should fail for a missing name", give: nodePool(func(np *v1.NodePool) { np.Name = "" }),
			want: []string{`metadata.name: required`}},
		{name: "should collect every error of the object", give: nodePool(func(np *v1.NodePool) {
			np.Name = "Bad_Name"
			np.Spec.Weight = ptr(int32(0))
			np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "x"}}
		}), want: []string{
			`metadata.name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`spec.disruption.budgets[0].nodes: "x" is not a node count ("5") or a percentage from 0% to 100% ("10%")`,
			`spec.weight: 0 is out of range 1..100`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if err == nil {
				t.Fatalf("Validate() error = nil, want %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, lines(t, err)); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(err.Error(), `NodePool "`+tt.give.Name+`": `) {
				t.Errorf("Error() = %q, want it prefixed with the object", err.Error())
			}
		})
	}
}

func TestNodePoolWarnings(t *testing.T) {
	tests := []struct {
		name string
		give *v1.NodePool
		want []v1.FieldError
	}{
		{name: "should not warn about a plain NodePool", give: nodePool()},
		{name: "should warn about labels newer than v1.14.1 and ignored values", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{v1.LabelNitroSandbox: "true"}
			*requirements(np) = append(*requirements(np), req(v1.LabelNitroSandbox, corev1.NodeSelectorOpIn, "true"), req("a", corev1.NodeSelectorOpExists, "x"))
		}), want: []v1.FieldError{
			{Path: "spec.template.metadata.labels[karpenter.k8s.aws/nitro-sandbox]", Message: "label is newer than Karpenter v1.14.1; accepted"},
			{Path: "spec.template.spec.requirements[1].key", Message: "label is newer than Karpenter v1.14.1; accepted"},
			{Path: "spec.template.spec.requirements[2].values", Message: "ignored with operator Exists"},
		}},
		{name: "should warn about a nodeClassRef that is not an EC2NodeClass and about replicas", give: nodePool(func(np *v1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "x"}
			np.Spec.Replicas = ptr(int64(1))
		}), want: []v1.FieldError{
			{Path: "spec.template.spec.nodeClassRef", Message: "karpenter.azure.com/AKSNodeClass is not an EC2NodeClass (karpenter.k8s.aws); the pool can never become ready"},
			{Path: "spec.replicas", Message: "static NodePools are alpha (Karpenter feature gate StaticCapacity, off by default)"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.give.Warnings()); diff != "" {
				t.Errorf("Warnings() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeClaimValidate(t *testing.T) {
	valid := func(mut ...func(*v1.NodeClaim)) *v1.NodeClaim {
		nc := &v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "default-abcde"},
			Spec: v1.NodeClaimSpec{
				Requirements: []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelNodePool, corev1.NodeSelectorOpIn, "default")},
				NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
			},
		}
		nc.SetDefaults()
		for _, m := range mut {
			m(nc)
		}
		return nc
	}
	t.Run("should accept a NodeClaim with a karpenter.sh/nodepool requirement", func(t *testing.T) {
		if err := valid().Validate(); err != nil {
			t.Errorf("Validate() error:\n%v", err)
		}
	})
	tests := []struct {
		name string
		give *v1.NodeClaim
		want []string
	}{
		{name: "should fail for a hostname requirement, a bad taint and a bad expireAfter", give: valid(func(nc *v1.NodeClaim) {
			nc.Spec.Requirements = append(nc.Spec.Requirements, req(v1.LabelHostname, corev1.NodeSelectorOpIn, "x"))
			nc.Spec.Taints = []corev1.Taint{{Key: "a", Effect: "Sometimes"}}
			nc.Spec.ExpireAfter = v1.NillableDuration{Raw: "1w"}
		}), want: []string{
			`spec.requirements[1].key: label "kubernetes.io/hostname" is restricted; Karpenter sets it per node`,
			`spec.taints[0].effect: "Sometimes" is not one of NoSchedule, PreferNoSchedule, NoExecute`,
			`spec.expireAfter: "1w" is not "Never" or a duration of whole hours, minutes and seconds such as "720h" or "1h30m"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, lines(t, tt.give.Validate())); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaults(t *testing.T) {
	t.Run("should default an empty NodePool as Karpenter's API server does", func(t *testing.T) {
		np := &v1.NodePool{}
		np.SetDefaults()
		want := v1.NodePoolSpec{
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{ExpireAfter: v1.MustParseNillable("720h")}},
			Disruption: v1.Disruption{
				ConsolidateAfter:    v1.MustParseNillable("0s"),
				ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				Budgets:             []v1.Budget{{Nodes: "10%"}},
			},
		}
		if diff := cmp.Diff(want, np.Spec); diff != "" {
			t.Errorf("SetDefaults() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should keep written values, an empty budget list, and fill budget nodes", func(t *testing.T) {
		np := &v1.NodePool{Spec: v1.NodePoolSpec{
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{ExpireAfter: v1.MustParseNillable("Never")}},
			Disruption: v1.Disruption{
				ConsolidateAfter:    v1.MustParseNillable("5m"),
				ConsolidationPolicy: v1.ConsolidationPolicyWhenEmpty,
				Budgets:             []v1.Budget{{Schedule: ptr("@daily"), Duration: &v1.Duration{Raw: "1h"}}},
			},
		}}
		want := np.Spec
		want.Disruption.Budgets = []v1.Budget{{Nodes: "10%", Schedule: ptr("@daily"), Duration: &v1.Duration{Raw: "1h"}}}
		np.SetDefaults()
		if diff := cmp.Diff(want, np.Spec); diff != "" {
			t.Errorf("SetDefaults() mismatch (-want +got):\n%s", diff)
		}
		empty := &v1.NodePool{Spec: v1.NodePoolSpec{Disruption: v1.Disruption{Budgets: []v1.Budget{}}}}
		empty.SetDefaults()
		if got := empty.Spec.Disruption.Budgets; got == nil || len(got) != 0 {
			t.Errorf("SetDefaults() budgets = %v, want an empty list kept", got)
		}
	})
	t.Run("should default NodeClaim expireAfter", func(t *testing.T) {
		nc := &v1.NodeClaim{}
		nc.SetDefaults()
		if diff := cmp.Diff(v1.MustParseNillable("720h"), nc.Spec.ExpireAfter); diff != "" {
			t.Errorf("SetDefaults() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("should default EC2NodeClass metadataOptions whole and per field", func(t *testing.T) {
		full := &v1.MetadataOptions{HTTPEndpoint: ptr("enabled"), HTTPProtocolIPv6: ptr("disabled"), HTTPPutResponseHopLimit: ptr(int64(1)), HTTPTokens: ptr("required")}
		nc := &v1.EC2NodeClass{}
		nc.SetDefaults()
		if diff := cmp.Diff(full, nc.Spec.MetadataOptions); diff != "" {
			t.Errorf("SetDefaults() mismatch (-want +got):\n%s", diff)
		}
		partial := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{MetadataOptions: &v1.MetadataOptions{HTTPPutResponseHopLimit: ptr(int64(2))}}}
		partial.SetDefaults()
		full.HTTPPutResponseHopLimit = ptr(int64(2))
		if diff := cmp.Diff(full, partial.Spec.MetadataOptions); diff != "" {
			t.Errorf("SetDefaults() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestDecodeNodePoolWarnings(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []v1.FieldError
	}{
		{name: "should not warn when disruption is omitted", give: `{"spec":{}}`},
		{name: "should not warn when consolidateAfter is written", give: `{"spec":{"disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":"1m"}}}`},
		{name: "should warn when disruption is written without consolidateAfter", give: `{"spec":{"disruption":{"budgets":[{"nodes":"1"}]}}}`,
			want: []v1.FieldError{{Path: "spec.disruption.consolidateAfter", Message: `not set; Karpenter v1.14.1 requires it when spec.disruption is written, Karpenter HEAD defaults it to "0s" (applied here)`}}},
		{name: "should warn about unknown and duplicate fields", give: `{"spec":{"weight":1,"weight":2,"template":{"spec":{"kubelet":{}}}}}`,
			want: []v1.FieldError{
				{Path: "spec.weight", Message: "duplicate field; the last value is used"},
				{Path: "spec.template.spec.kubelet", Message: "unknown field (not in Karpenter v1.14.1); ignored"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := v1.DecodeNodePool([]byte(tt.give))
			if err != nil {
				t.Fatalf("DecodeNodePool() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecodeNodePool() warnings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{name: "should name the field of a wrong type", give: `{"spec":{"disruption":{"budgets":[{"nodes":"1"},{"reasons":"Empty"}]}}}`,
			want: `spec.disruption.budgets[1].reasons: expected a list, got string`},
		{name: "should name a duration that is not a string", give: `{"spec":{"template":{"spec":{"expireAfter":720}}}}`,
			want: `spec.template.spec.expireAfter: expected a duration such as "30m" or "Never", got number 720`},
		{name: "should reject a document that is not an object", give: `"NodePool"`,
			want: `expected an object, got string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := v1.DecodeNodePool([]byte(tt.give))
			if err == nil || err.Error() != tt.want {
				t.Errorf("DecodeNodePool() error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseBudgetScheduleEvaluatesInUTC(t *testing.T) {
	sched, err := v1.ParseBudgetSchedule("0 9 * * mon-fri")
	if err != nil {
		t.Fatalf("ParseBudgetSchedule() error = %v", err)
	}
	tokyo := time.FixedZone("JST", 9*3600)
	// Friday 2026-01-02 10:00 JST is 01:00 UTC: the next hit is 09:00 UTC.
	got := sched.Next(time.Date(2026, 1, 2, 10, 0, 0, 0, tokyo))
	if want := time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Next() = %s, want %s", got.UTC(), want)
	}
}
