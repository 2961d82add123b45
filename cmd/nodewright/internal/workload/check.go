package workload

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

// MaxPods caps the pods one plan may hold (explicit pods plus the replicas
// the controllers would create), so that a replica count such as 2^31-1
// fails fast instead of exhausting memory.
const MaxPods = 100_000

// maxMilli is the largest quantity the solver's int64 milli-unit vectors
// hold: (2^63-1)/1000.
const maxMilli = float64(math.MaxInt64) / 1000

// fieldProblem is one invalid field of an object.
type fieldProblem struct {
	path, msg string
}

// GeneratedName is the name plan gives an object written with only
// metadata.generateName: the prefix followed by five characters of
// Kubernetes' safe alphabet derived from the FNV-32a hash of source (the
// manifest document), so that the name is stable across runs and differs
// between documents. The API server appends five random characters instead
// (apimachinery names.SimpleNameGenerator).
func GeneratedName(generateName, source string) string {
	h := fnv.New32a()
	h.Write([]byte(source))
	suffix := utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
	for len(suffix) < 5 {
		suffix += "x"
	}
	return generateName + suffix[:5]
}

// checkPodSpec returns the problems of a pod spec at path that the API
// server would reject and that would otherwise reach the solver: no
// containers, negative or oversized resource quantities, an empty
// topologyKey, and topology spread constraints with maxSkew below 1 or an
// unknown whenUnsatisfiable (kubernetes: pkg/apis/core/validation).
func checkPodSpec(s *corev1.PodSpec, path string) []fieldProblem {
	var out []fieldProblem
	if len(s.Containers) == 0 {
		out = append(out, fieldProblem{path + ".containers", "required: a pod needs at least one container"})
	}
	quantities := func(p string, rl corev1.ResourceList) {
		for _, name := range sortedNames(rl) {
			q := rl[name]
			qp := fmt.Sprintf("%s[%s]", p, name)
			switch {
			case q.Sign() < 0:
				out = append(out, fieldProblem{qp, fmt.Sprintf("%s must not be negative", q.String())})
			case q.AsApproximateFloat64() > maxMilli:
				out = append(out, fieldProblem{qp, q.String() + " is too large (at most 9223372036854775.807: the int64 range of milli-units)"})
			}
		}
	}
	for _, group := range []struct {
		name string
		cs   []corev1.Container
	}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
		for i, c := range group.cs {
			cp := fmt.Sprintf("%s.%s[%d].resources", path, group.name, i)
			quantities(cp+".requests", c.Resources.Requests)
			quantities(cp+".limits", c.Resources.Limits)
		}
	}
	quantities(path+".overhead", s.Overhead)
	if a := s.Affinity; a != nil {
		terms := func(p string, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) {
			for i, t := range required {
				if t.TopologyKey == "" {
					out = append(out, fieldProblem{fmt.Sprintf("%s.requiredDuringSchedulingIgnoredDuringExecution[%d].topologyKey", p, i), "required"})
				}
			}
			for i, t := range preferred {
				if t.PodAffinityTerm.TopologyKey == "" {
					out = append(out, fieldProblem{fmt.Sprintf("%s.preferredDuringSchedulingIgnoredDuringExecution[%d].podAffinityTerm.topologyKey", p, i), "required"})
				}
			}
		}
		if pa := a.PodAffinity; pa != nil {
			terms(path+".affinity.podAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			terms(path+".affinity.podAntiAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	for i, c := range s.TopologySpreadConstraints {
		p := fmt.Sprintf("%s.topologySpreadConstraints[%d]", path, i)
		if c.MaxSkew < 1 {
			out = append(out, fieldProblem{p + ".maxSkew", fmt.Sprintf("%d must be greater than zero", c.MaxSkew)})
		}
		if c.TopologyKey == "" {
			out = append(out, fieldProblem{p + ".topologyKey", "required"})
		}
		if c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			out = append(out, fieldProblem{p + ".whenUnsatisfiable", fmt.Sprintf("%q is not one of DoNotSchedule, ScheduleAnyway", c.WhenUnsatisfiable)})
		}
	}
	return out
}

// checkTemplate returns the problems of a controller's selector and pod
// template: the selector is required (optional for a Job) and must select
// the template's labels, as the API server requires
// (kubernetes: pkg/apis/apps/validation ValidateDeploymentSpec).
func checkTemplate(sel *metav1.LabelSelector, required bool, t *corev1.PodTemplateSpec, replicas *int32) []fieldProblem {
	var out []fieldProblem
	if replicas != nil && *replicas < 0 {
		out = append(out, fieldProblem{"spec.replicas", fmt.Sprintf("%d must not be negative", *replicas)})
	}
	switch {
	case sel == nil && required:
		out = append(out, fieldProblem{"spec.selector", "required"})
	case sel != nil:
		s, err := metav1.LabelSelectorAsSelector(sel)
		switch {
		case err != nil:
			out = append(out, fieldProblem{"spec.selector", err.Error()})
		case s.Empty() && required:
			out = append(out, fieldProblem{"spec.selector", "an empty selector is invalid for a workload controller"})
		case !s.Matches(labels.Set(t.Labels)):
			out = append(out, fieldProblem{"spec.template.metadata.labels", "selector does not match template labels"})
		}
	}
	return append(out, checkPodSpec(&t.Spec, "spec.template.spec")...)
}

// checkObject returns the problems of a Pod or workload controller.
func checkObject(typed any) []fieldProblem {
	switch t := typed.(type) {
	case *corev1.Pod:
		return checkPodSpec(&t.Spec, "spec")
	case *appsv1.Deployment:
		return checkTemplate(t.Spec.Selector, true, &t.Spec.Template, t.Spec.Replicas)
	case *appsv1.ReplicaSet:
		return checkTemplate(t.Spec.Selector, true, &t.Spec.Template, t.Spec.Replicas)
	case *appsv1.StatefulSet:
		return checkTemplate(t.Spec.Selector, true, &t.Spec.Template, t.Spec.Replicas)
	case *batchv1.Job:
		out := checkTemplate(t.Spec.Selector, false, &t.Spec.Template, nil)
		if p := t.Spec.Parallelism; p != nil && *p < 0 {
			out = append(out, fieldProblem{"spec.parallelism", fmt.Sprintf("%d must not be negative", *p)})
		}
		return out
	case *appsv1.DaemonSet:
		return checkTemplate(t.Spec.Selector, true, &t.Spec.Template, nil)
	}
	return nil
}

func sortedNames(rl corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
