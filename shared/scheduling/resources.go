package scheduling

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// maxResources bounds the distinct resource names one solve can track
// (cpu, memory, pods, ephemeral-storage and extended resources). Vectors are
// fixed-size arrays so that the hot loops neither allocate nor hash.
const maxResources = 16

// Resource indices that every solve has.
const (
	resCPU = iota
	resMemory
	resPods
	resEphemeral
)

// vec is a resource vector: cpu in millicores, everything else in base units
// (bytes for memory and ephemeral-storage, counts otherwise), indexed by a
// resourceIndex.
type vec [maxResources]int64

// resourceIndex maps resource names to vector slots for one solve.
type resourceIndex struct {
	names []corev1.ResourceName
	slot  map[corev1.ResourceName]int
}

func newResourceIndex() *resourceIndex {
	ri := &resourceIndex{slot: map[corev1.ResourceName]int{}}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		ri.add(n)
	}
	return ri
}

// add registers name and returns its slot, or -1 when the vector is full.
func (ri *resourceIndex) add(name corev1.ResourceName) int {
	if s, ok := ri.slot[name]; ok {
		return s
	}
	if len(ri.names) == maxResources {
		return -1
	}
	ri.slot[name] = len(ri.names)
	ri.names = append(ri.names, name)
	return len(ri.names) - 1
}

// addAll registers every name of rl in sorted order (deterministic slots).
func (ri *resourceIndex) addAll(rl corev1.ResourceList) error {
	if len(rl) == 0 {
		return nil
	}
	names := make([]string, 0, len(rl))
	for n := range rl {
		if _, ok := ri.slot[n]; !ok {
			names = append(names, string(n))
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if ri.add(corev1.ResourceName(n)) < 0 {
			return fmt.Errorf("resource %s: more than %d distinct resource names", n, maxResources)
		}
	}
	return nil
}

// n is the number of slots in use.
func (ri *resourceIndex) n() int { return len(ri.names) }

// quantity converts q for slot s to the vector unit.
func quantity(s int, q resource.Quantity) int64 {
	if s == resCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// vector converts rl; names without a slot are reported in missing (sorted).
func (ri *resourceIndex) vector(rl corev1.ResourceList) (v vec, missing []corev1.ResourceName) {
	for name, q := range rl {
		s, ok := ri.slot[name]
		if !ok {
			if !q.IsZero() {
				missing = append(missing, name)
			}
			continue
		}
		v[s] = quantity(s, q)
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	return v, missing
}

// list converts v back to a ResourceList, omitting zero entries.
func (ri *resourceIndex) list(v vec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for s, name := range ri.names {
		if v[s] == 0 {
			continue
		}
		out[name] = ri.q(s, v[s])
	}
	return out
}

// q renders one vector entry as a Quantity in the resource's usual format.
func (ri *resourceIndex) q(s int, x int64) resource.Quantity {
	switch s {
	case resCPU:
		return *resource.NewMilliQuantity(x, resource.DecimalSI)
	case resMemory, resEphemeral:
		return *resource.NewQuantity(x, resource.BinarySI)
	default:
		return *resource.NewQuantity(x, resource.DecimalSI)
	}
}

// format renders one entry for humans in plain units, e.g. "1.5Ti" memory,
// "1000" or "1500m" cpu, "110" pods: never a decimal SI suffix such as
// "1k", which reads as a different number than the user wrote.
func (ri *resourceIndex) format(s int, x int64) string {
	if s == resMemory || s == resEphemeral {
		return humanBytes(x)
	}
	if s == resCPU {
		if x%1000 == 0 {
			return strconv.FormatInt(x/1000, 10)
		}
		return strconv.FormatInt(x, 10) + "m"
	}
	return strconv.FormatInt(x, 10)
}

// humanBytes renders bytes with a binary suffix and at most one decimal,
// e.g. 1.5Ti, 6903Mi, 100Mi.
func humanBytes(b int64) string {
	const unit = 1024
	suffixes := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	if b < unit && b > -unit {
		return fmt.Sprintf("%d", b)
	}
	f := float64(b)
	i := 0
	for (f >= unit || f <= -unit) && i < len(suffixes)-1 {
		f /= unit
		i++
	}
	s := fmt.Sprintf("%.1f", f)
	s = strings.TrimSuffix(s, ".0")
	return s + suffixes[i]
}

// leq reports whether a <= b in every slot below n.
func leq(a, b *vec, n int) bool {
	for i := 0; i < n; i++ {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

func (v *vec) add(o *vec, n int) {
	for i := 0; i < n; i++ {
		v[i] += o[i]
	}
}

func (v *vec) sub(o *vec, n int) {
	for i := 0; i < n; i++ {
		v[i] -= o[i]
	}
}

func (v *vec) maxWith(o *vec, n int) {
	for i := 0; i < n; i++ {
		if o[i] > v[i] {
			v[i] = o[i]
		}
	}
}

func (v *vec) minWith(o *vec, n int) {
	for i := 0; i < n; i++ {
		if o[i] < v[i] {
			v[i] = o[i]
		}
	}
}

func (v *vec) floorZero(n int) {
	for i := 0; i < n; i++ {
		if v[i] < 0 {
			v[i] = 0
		}
	}
}

// podRequestVector is a pod's effective requests as Kubernetes computes
// them (k8s.io/component-helpers resource.PodRequests, which Karpenter's
// resources.RequestsForPods follows), as a vector: the sum of its
// containers and restartable init containers (sidecars), or the largest
// init step (an init container plus the sidecars started before it) when
// larger, plus spec.overhead. A container with limits but no request for a
// resource counts its limit, as API-server defaulting does (karpenter:
// resources.MergeResourceLimitsIntoRequests). It does not include the
// "pods" count. missing lists, sorted, requested resources without a slot.
func (ri *resourceIndex) podRequestVector(spec *corev1.PodSpec) (sum vec, missing []corev1.ResourceName) {
	n := ri.n()
	add := func(dst *vec, c *corev1.Container) {
		for name, q := range c.Resources.Requests {
			if slot, ok := ri.slot[name]; ok {
				dst[slot] += quantity(slot, q)
			} else if !q.IsZero() {
				missing = append(missing, name)
			}
		}
		for name, q := range c.Resources.Limits {
			if _, hasReq := c.Resources.Requests[name]; hasReq {
				continue
			}
			if slot, ok := ri.slot[name]; ok {
				dst[slot] += quantity(slot, q)
			} else if !q.IsZero() {
				missing = append(missing, name)
			}
		}
	}
	for i := range spec.Containers {
		add(&sum, &spec.Containers[i])
	}
	var sidecars, initMax vec
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		var step vec
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			var own vec
			add(&own, c)
			sum.add(&own, n)
			sidecars.add(&own, n)
			step = sidecars
		} else {
			add(&step, c)
			step.add(&sidecars, n)
		}
		initMax.maxWith(&step, n)
	}
	sum.maxWith(&initMax, n)
	for name, q := range spec.Overhead {
		if slot, ok := ri.slot[name]; ok {
			sum[slot] += quantity(slot, q)
		} else if !q.IsZero() {
			missing = append(missing, name)
		}
	}
	if len(missing) > 1 {
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	}
	return sum, missing
}

// maxRequest bounds, in vector units, a resource total the solver can hold
// and add without overflowing int64 (2^62: about 4.6e15 cores of cpu in
// millicores, 4Ei of memory); no instance type comes near it.
const maxRequest = float64(1 << 62)

// podOverflow lists, sorted, the resources whose requests, limits standing
// in for requests, or overhead in spec add up (over every container, init
// container and spec.overhead) to more than maxRequest in vector units,
// e.g. cpu "1e19" (1e22 millicores) or memory "1e30". Such a request cannot
// be held in a vector; the pod fits nowhere.
func podOverflow(spec *corev1.PodSpec) []corev1.ResourceName {
	totals := map[corev1.ResourceName]float64{}
	note := func(name corev1.ResourceName, q resource.Quantity) {
		f := q.AsApproximateFloat64()
		if name == corev1.ResourceCPU {
			f *= 1000
		}
		if f < 0 {
			f = -f
		}
		totals[name] += f
	}
	container := func(c *corev1.Container) {
		for name, q := range c.Resources.Requests {
			note(name, q)
		}
		for name, q := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				note(name, q)
			}
		}
	}
	for i := range spec.Containers {
		container(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		container(&spec.InitContainers[i])
	}
	for name, q := range spec.Overhead {
		note(name, q)
	}
	var out []corev1.ResourceName
	for name, f := range totals {
		if f > maxRequest {
			out = append(out, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// podNegative lists, sorted, the resources with a negative request, limit
// or overhead quantity in spec, which the API server's pod validation
// rejects (k8s.io/kubernetes pkg/apis/core/validation: ValidateResourceQuantityValue).
func podNegative(spec *corev1.PodSpec) []corev1.ResourceName {
	seen := map[corev1.ResourceName]bool{}
	note := func(rl corev1.ResourceList) {
		for name, q := range rl {
			if q.Sign() < 0 {
				seen[name] = true
			}
		}
	}
	for i := range spec.Containers {
		note(spec.Containers[i].Resources.Requests)
		note(spec.Containers[i].Resources.Limits)
	}
	for i := range spec.InitContainers {
		note(spec.InitContainers[i].Resources.Requests)
		note(spec.InitContainers[i].Resources.Limits)
	}
	note(spec.Overhead)
	out := make([]corev1.ResourceName, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
