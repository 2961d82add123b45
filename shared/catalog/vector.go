package catalog

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Slots of a Vector. cpu is in millicores, memory and ephemeral-storage in
// bytes, every other resource in whole units.
const (
	VecCPU = iota
	VecMemory
	VecEphemeralStorage
	VecPods
	VecNVIDIAGPU
	VecAMDGPU
	VecHabanaGaudi
	VecAWSNeuron
	VecAWSNeuronCore
	VecAWSPodENI
	VecEFA
	VecPrivateIPv4Address
	// NumVec is the number of slots.
	NumVec
)

// Vector holds amounts of the resources the catalog models in fixed slots
// (VecCPU ... VecPrivateIPv4Address), as int64 base units. It is a value
// type: Add, Sub and Fits neither allocate nor modify their operands. It
// suits the solver's inner loops; resources outside the slots (e.g.
// hugepages or a custom device plugin's) need the ResourceList forms.
type Vector [NumVec]int64

// VectorResourceName returns the resource name of slot i, or "" when i is
// not a slot.
func VectorResourceName(i int) corev1.ResourceName {
	switch i {
	case VecCPU:
		return corev1.ResourceCPU
	case VecMemory:
		return corev1.ResourceMemory
	case VecEphemeralStorage:
		return corev1.ResourceEphemeralStorage
	case VecPods:
		return corev1.ResourcePods
	case VecNVIDIAGPU:
		return ResourceNVIDIAGPU
	case VecAMDGPU:
		return ResourceAMDGPU
	case VecHabanaGaudi:
		return ResourceHabanaGaudi
	case VecAWSNeuron:
		return ResourceAWSNeuron
	case VecAWSNeuronCore:
		return ResourceAWSNeuronCore
	case VecAWSPodENI:
		return ResourceAWSPodENI
	case VecEFA:
		return ResourceEFA
	case VecPrivateIPv4Address:
		return ResourcePrivateIPv4Address
	}
	return ""
}

// VectorIndex returns the slot of name; ok is false when a Vector has no
// slot for it.
func VectorIndex(name corev1.ResourceName) (slot int, ok bool) {
	for i := range NumVec {
		if VectorResourceName(i) == name {
			return i, true
		}
	}
	return 0, false
}

// vectorUnits is q in slot i's unit: millicores for cpu, else Value()
// (rounded up to a whole unit).
func vectorUnits(i int, q resource.Quantity) int64 {
	if i == VecCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// NewVector converts rl. ok is false when rl holds a positive amount of a
// resource that has no slot; those amounts are left out of v.
func NewVector(rl corev1.ResourceList) (v Vector, ok bool) {
	ok = true
	for name, q := range rl {
		i, known := VectorIndex(name)
		if !known {
			if q.Sign() > 0 {
				ok = false
			}
			continue
		}
		v[i] = vectorUnits(i, q)
	}
	return v, ok
}

// ResourceList converts v back, omitting zero slots.
func (v Vector) ResourceList() corev1.ResourceList {
	out := corev1.ResourceList{}
	for i, n := range v {
		if n == 0 {
			continue
		}
		switch i {
		case VecCPU:
			out[corev1.ResourceCPU] = *resource.NewMilliQuantity(n, resource.DecimalSI)
		case VecMemory, VecEphemeralStorage:
			out[VectorResourceName(i)] = *resource.NewQuantity(n, resource.BinarySI)
		default:
			out[VectorResourceName(i)] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return out
}

// Add returns v + o, slot by slot.
func (v Vector) Add(o Vector) Vector {
	for i := range v {
		v[i] += o[i]
	}
	return v
}

// Sub returns v − o, slot by slot (results may be negative).
func (v Vector) Sub(o Vector) Vector {
	for i := range v {
		v[i] -= o[i]
	}
	return v
}

// Fits reports whether every slot of v is at most the same slot of
// capacity, i.e. requests v fit in capacity.
func (v Vector) Fits(capacity Vector) bool {
	for i := range v {
		if v[i] > capacity[i] {
			return false
		}
	}
	return true
}

// AllocatableVector is Allocatable() in Vector form, computed without
// allocating from Capacity and Overhead on every call (nothing is cached, so
// it is always consistent with them). Each quantity is converted to whole
// units before subtracting, so it equals Allocatable() whenever the
// quantities are whole millicores / bytes / units, as Resolve's are.
func (it *InstanceType) AllocatableVector() Vector {
	var v Vector
	for i := range NumVec {
		name := VectorResourceName(i)
		c, ok := it.Capacity[name]
		if !ok {
			continue
		}
		n := vectorUnits(i, c)
		for _, l := range [...]corev1.ResourceList{it.Overhead.KubeReserved, it.Overhead.SystemReserved, it.Overhead.EvictionThreshold} {
			if q, ok := l[name]; ok {
				n -= vectorUnits(i, q)
			}
		}
		if i == VecMemory {
			for hp, h := range it.Capacity {
				if strings.HasPrefix(string(hp), corev1.ResourceHugePagesPrefix) {
					n -= h.Value()
				}
			}
		}
		v[i] = max(n, 0)
	}
	return v
}
