// Package catalog models EC2 instance types as the solver sees them: labels,
// capacity, allocatable (Karpenter's per-AMI-family formulas) and offerings
// (zone x capacity type, with price and availability). It ships the EC2
// instance-type catalog and on-demand price table as embedded data.
package catalog

import (
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
	// karpenter.k8s.aws/instance-*). A well-known key the type does not have
	// (e.g. instance-gpu-count on a CPU type) is absent: the requirement
	// algebra treats it as DoesNotExist. Zone and capacity type are not here;
	// they come from Offerings.
	Labels map[string]string
	// Capacity is the node's capacity (cpu, memory, ephemeral-storage, pods,
	// extended resources) as Karpenter computes it (spec §3.5).
	Capacity corev1.ResourceList
	// Overhead is kube-reserved + system-reserved + eviction threshold.
	Overhead Overhead
	// Offerings lists where and how the type can be bought.
	Offerings Offerings
}

// Overhead is what the kubelet holds back from capacity.
type Overhead struct {
	KubeReserved      corev1.ResourceList
	SystemReserved    corev1.ResourceList
	EvictionThreshold corev1.ResourceList
}

// Offering is one purchasable (zone, capacity type) of an instance type.
type Offering struct {
	Zone string
	// CapacityType is "on-demand", "spot" or "reserved".
	CapacityType string
	// Price is in the price table's currency per instance-hour.
	Price float64
	// Available is false when the offering is marked unavailable (e.g. an
	// insufficient-capacity error within the last 3 minutes) or has no price.
	Available bool
	// ReservationID is set for reserved offerings only.
	ReservationID string
}

// Offerings is a list of offerings.
type Offerings []Offering
