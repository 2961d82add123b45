package schedulingtest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// InstanceTypeOption changes an instance type built by InstanceType.
type InstanceTypeOption func(*catalog.InstanceType)

// InstanceType returns an amd64 Linux instance type named name with the
// given capacity (e.g. "2", "8Gi", "29"), no overhead, and on-demand
// offerings at price in us-east-1a, us-east-1b and us-east-1c unless
// Offerings replaces them. Labels carry arch, os and instance-type; the
// family/category/size labels are derived from a "family.size" name.
func InstanceType(name, cpu, memory, pods string, price float64, opts ...InstanceTypeOption) *catalog.InstanceType {
	capacity := list(cpu, memory)
	capacity[corev1.ResourcePods] = mustQuantity(pods)
	it := &catalog.InstanceType{
		Name: name,
		Labels: map[string]string{
			v1.LabelInstanceType: name, v1.LabelArch: "amd64", v1.LabelOS: "linux",
		},
		Capacity: capacity,
		Offerings: catalog.Offerings{
			{Zone: "us-east-1a", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true},
			{Zone: "us-east-1b", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true},
			{Zone: "us-east-1c", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true},
		},
	}
	if fam, size, ok := cut(name); ok {
		it.Labels[v1.LabelInstanceFamily] = fam
		it.Labels[v1.LabelInstanceSize] = size
		it.Labels[v1.LabelInstanceCategory] = fam[:1]
	}
	for _, o := range opts {
		o(it)
	}
	return it
}

// TypeLabels merges labels into the instance type's labels.
func TypeLabels(labels map[string]string) InstanceTypeOption {
	return func(it *catalog.InstanceType) {
		for k, v := range labels {
			it.Labels[k] = v
		}
	}
}

// TypeResources adds extended resources (e.g. nvidia.com/gpu) to capacity.
func TypeResources(rl corev1.ResourceList) InstanceTypeOption {
	return func(it *catalog.InstanceType) { it.Capacity = mergeList(it.Capacity, rl) }
}

// TypeOverhead sets kube-reserved cpu and memory.
func TypeOverhead(cpu, memory string) InstanceTypeOption {
	return func(it *catalog.InstanceType) { it.Overhead.KubeReserved = list(cpu, memory) }
}

// TypeOfferings replaces the offerings.
func TypeOfferings(offerings ...catalog.Offering) InstanceTypeOption {
	return func(it *catalog.InstanceType) { it.Offerings = offerings }
}

// Offering is an available offering.
func Offering(zone, capacityType string, price float64) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: capacityType, Price: price, Available: true}
}

// InputOption changes an Input built by Input.
type InputOption func(*scheduling.Input)

// Input returns a snapshot at Epoch with pools, the EC2NodeClass(name) of
// every distinct nodeClassRef of pools (created with EC2NodeClass(name)),
// and types as the resolved instance types of each of those classes.
func Input(pools []v1.NodePool, types []*catalog.InstanceType, pods []*corev1.Pod, opts ...InputOption) scheduling.Input {
	in := scheduling.Input{
		Now:           Epoch,
		NodePools:     pools,
		InstanceTypes: map[string][]*catalog.InstanceType{},
		Pods:          pods,
	}
	for _, np := range pools {
		name := np.Spec.Template.Spec.NodeClassRef.Name
		if _, ok := in.InstanceTypes[name]; ok {
			continue
		}
		in.NodeClasses = append(in.NodeClasses, EC2NodeClass(name))
		in.InstanceTypes[name] = types
	}
	for _, o := range opts {
		o(&in)
	}
	return in
}

// WithNodes sets the existing capacity.
func WithNodes(nodes ...scheduling.ExistingNode) InputOption {
	return func(in *scheduling.Input) { in.Nodes = append(in.Nodes, nodes...) }
}

// WithDaemonSets sets the DaemonSets.
func WithDaemonSets(ds ...appsv1.DaemonSet) InputOption {
	return func(in *scheduling.Input) { in.DaemonSets = append(in.DaemonSets, ds...) }
}

// WithOptions sets the solver options.
func WithOptions(o scheduling.Options) InputOption {
	return func(in *scheduling.Input) { in.Options = o }
}

// WithNodeClassTypes gives the EC2NodeClass name its own instance types,
// adding the class to NodeClasses if absent.
func WithNodeClassTypes(name string, types []*catalog.InstanceType) InputOption {
	return func(in *scheduling.Input) {
		if _, ok := in.InstanceTypes[name]; !ok {
			in.NodeClasses = append(in.NodeClasses, EC2NodeClass(name))
		}
		in.InstanceTypes[name] = types
	}
}

func mustQuantity(s string) resource.Quantity {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		panic(fmt.Sprintf("schedulingtest: quantity %q: %v", s, err))
	}
	return q
}

func cut(name string) (family, size string, ok bool) {
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			return name[:i], name[i+1:], i > 0 && i < len(name)-1
		}
	}
	return "", "", false
}
