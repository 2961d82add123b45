// Package catalog models EC2 instance types as the solver sees them: labels,
// capacity, allocatable (Karpenter's per-AMI-family formulas) and offerings
// (zone x capacity type, with price and availability). It ships the EC2
// instance-type catalog and on-demand price table (data/, sourced from
// karpenter-provider-aws; see data/README.md) compiled into a static table,
// so using it costs no parsing; Resolve turns it into InstanceTypes for one
// EC2NodeClass. The package does no I/O, reads no clock and keeps no mutable
// state.
package catalog

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// InstanceType is one EC2 instance type resolved for one EC2NodeClass.
// Capacity and Allocatable depend on the node class (AMI family, kubelet
// settings, block devices), so the same EC2 type yields different values for
// different classes.
type InstanceType struct {
	// Name is the EC2 instance type, e.g. "m5.large".
	Name string
	// Labels holds the value of every well-known instance-type label
	// (kubernetes.io/arch, kubernetes.io/os, node.kubernetes.io/instance-type,
	// karpenter.k8s.aws/instance-*, node.kubernetes.io/windows-build for
	// Windows families) plus topology.kubernetes.io/region. A well-known key
	// the type does not have (e.g. instance-gpu-count on a CPU type) is
	// absent: the requirement algebra treats it as DoesNotExist. Zone, zone
	// ID and capacity type are not here; they come from Offerings.
	// karpenter.k8s.aws/instance-tenancy (In [default, dedicated]) has two
	// values and is not represented.
	Labels map[string]string
	// Capacity is the node's capacity (cpu, memory, ephemeral-storage, pods,
	// extended resources) as Karpenter computes it (spec §3.5). cpu, memory,
	// ephemeral-storage and pods are always present; extended resources only
	// when non-zero.
	Capacity corev1.ResourceList
	// Overhead is kube-reserved + system-reserved + eviction threshold.
	Overhead Overhead
	// Offerings lists where and how the type can be bought.
	Offerings Offerings
}

// Overhead is what the kubelet holds back from capacity. SystemReserved is
// nil unless kubelet.systemReserved is set.
type Overhead struct {
	KubeReserved      corev1.ResourceList
	SystemReserved    corev1.ResourceList
	EvictionThreshold corev1.ResourceList
}

// Offering is one purchasable (zone, capacity type) of an instance type.
type Offering struct {
	// Zone is the availability-zone name, e.g. "us-east-1a".
	Zone string
	// ZoneID is the zone's ID (topology.k8s.aws/zone-id) when the node
	// class's status.subnets names it, else "".
	ZoneID string
	// CapacityType is "on-demand", "spot" or "reserved".
	CapacityType string
	// Price is in the price table's currency per instance-hour (see
	// PriceSource); 0 when the type has no price, in which case the
	// offering is unavailable.
	Price float64
	// Available is false when the offering is marked unavailable (e.g. an
	// insufficient-capacity error within the last 3 minutes) or has no price.
	Available bool
	// ReservationID is set for reserved offerings only: the capacity
	// reservation (cr-...) a launch of this offering must target.
	ReservationID string
	// ReservationCapacity is, for a reserved offering, how many more
	// instances the reservation can take (DescribeCapacityReservations
	// AvailableInstanceCount less the launches made since); 0 otherwise.
	ReservationCapacity int
	// ReservationType is, for a reserved offering, v1.ReservationTypeDefault
	// or v1.ReservationTypeCapacityBlock; "" otherwise.
	ReservationType string
	// Interruptible is true for a reserved offering of an interruptible
	// capacity reservation.
	Interruptible bool
}

// Offerings is a list of offerings.
type Offerings []Offering

// Allocatable is Capacity minus kube-reserved, system-reserved and the
// eviction threshold, per resource, with hugepages-* capacity also taken from
// memory, floored at zero (karpenter: pkg/cloudprovider/types.go
// computeAllocatable). Zero-valued resources are omitted. It allocates a new
// list on each call; see AllocatableVector for an allocation-free form.
func (it *InstanceType) Allocatable() corev1.ResourceList {
	out := make(corev1.ResourceList, len(it.Capacity))
	for name, c := range it.Capacity {
		q := c.DeepCopy()
		if v, ok := it.Overhead.KubeReserved[name]; ok {
			q.Sub(v)
		}
		if v, ok := it.Overhead.SystemReserved[name]; ok {
			q.Sub(v)
		}
		if v, ok := it.Overhead.EvictionThreshold[name]; ok {
			q.Sub(v)
		}
		if name == corev1.ResourceMemory {
			for hp, h := range it.Capacity {
				if strings.HasPrefix(string(hp), corev1.ResourceHugePagesPrefix) {
					q.Sub(h)
				}
			}
		}
		if q.Sign() > 0 {
			out[name] = q
		}
	}
	return out
}

// Options configure Resolve.
type Options struct {
	// Region selects the price table and the default zone list, e.g. "us-east-1".
	Region string
	// Zones limits offerings to these zones; each must belong to Region.
	// Empty means the zones of the node class's resolved subnets
	// (status.subnets) if any, else every zone of Region (a small embedded
	// table: see Resolve).
	Zones []string
	// SpotPriceRatio prices spot offerings at on-demand x ratio when Live
	// holds no Spot prices: an estimate for offline use (the CLI), or 1 in
	// the Lambdas until Spot prices load (Karpenter prices Spot at the
	// on-demand price until its first Spot refresh); 0 means no spot
	// offerings. Ignored once Live holds Spot prices. Must be >= 0.
	SpotPriceRatio float64
	// Live is the region's data from its EC2 and Pricing APIs; nil means
	// every part comes from the embedded tables. Each part Live holds
	// replaces its embedded counterpart (see Resolve); Live.Region must be
	// Region.
	Live *LiveData
	// Now is the clock reading the PriceSource measures the live data's
	// age against; zero leaves ages unset.
	Now time.Time
	// ReservedENIs is Karpenter's RESERVED_ENIS setting (default 0, >= 0).
	ReservedENIs int
	// VMMemoryOverheadPercent is VM_MEMORY_OVERHEAD_PERCENT as a fraction
	// (0 <= value < 1); nil means 0.075.
	VMMemoryOverheadPercent *float64
	// Unavailable reports offerings marked unavailable (insufficient
	// capacity cache); nil means none. It is called once per generated
	// offering and must not retain its arguments.
	Unavailable func(instanceType, zone, capacityType string) bool
	// ReservationCapacity maps a capacity reservation ID of the node
	// class's status.capacityReservations to how many instances it can
	// still take (DescribeCapacityReservations AvailableInstanceCount); a
	// reservation it lacks has 0, so its offering is unavailable.
	ReservationCapacity map[string]int
}
