package ec2sim_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/local/ec2sim"
)

// newTypeItem is a DescribeInstanceTypes item of a type the embedded
// catalog lacks (hypothetical name).
const newTypeItem = `<item><instanceType>m9i.xlarge</instanceType><currentGeneration>true</currentGeneration>
<supportedVirtualizationTypes><item>hvm</item></supportedVirtualizationTypes><hypervisor>nitro</hypervisor>
<processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures><manufacturer>Intel</manufacturer></processorInfo>
<vCpuInfo><defaultVCpus>4</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo>
<networkInfo><maximumNetworkInterfaces>4</maximumNetworkInterfaces><ipv4AddressesPerInterface>15</ipv4AddressesPerInterface></networkInfo></item>`

func TestAddInstanceTypeServesTheTypeAsGiven(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	if err := e.sim.AddInstanceType([]byte(newTypeItem), 0.2); err != nil {
		t.Fatalf("AddInstanceType() error = %v", err)
	}
	out, err := e.ec2.DescribeInstanceTypes(t.Context(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m9i.xlarge"}})
	if err != nil {
		t.Fatalf("DescribeInstanceTypes() error = %v", err)
	}
	if len(out.InstanceTypes) != 1 {
		t.Fatalf("DescribeInstanceTypes() = %d types, want 1", len(out.InstanceTypes))
	}
	it := out.InstanceTypes[0]
	if aws.ToInt32(it.VCpuInfo.DefaultVCpus) != 4 || aws.ToInt64(it.MemoryInfo.SizeInMiB) != 16384 ||
		aws.ToInt32(it.NetworkInfo.MaximumNetworkInterfaces) != 4 || aws.ToInt32(it.NetworkInfo.Ipv4AddressesPerInterface) != 15 {
		t.Errorf("DescribeInstanceTypes() = %+v, want the item's facts", it)
	}
	if p, ok := e.sim.Price("m9i.xlarge", e.sim.Zones()[0], "on-demand"); !ok || p != 0.2 {
		t.Errorf("Price(on-demand) = %v, %v; want 0.2", p, ok)
	}
	if !slices.Contains(e.sim.InstanceTypes(), "m9i.xlarge") {
		t.Error("InstanceTypes() lacks the added type")
	}
	// Another simulator of the region shares the catalog, not the addition.
	other := newEnv(t, ec2sim.Options{})
	if slices.Contains(other.sim.InstanceTypes(), "m9i.xlarge") {
		t.Error("another simulator serves the added type")
	}
}

func TestAddInstanceTypeRefusesBadInput(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	tests := []struct {
		name, item string
		price      float64
		want       string
	}{
		{"should refuse a type it already serves", strings.Replace(newTypeItem, "m9i.xlarge", "m5.large", 1), 0.1, `instanceType "m5.large": the simulator already serves it`},
		{"should refuse another architecture", strings.Replace(newTypeItem, "x86_64", "i386", 1), 0.1, "processorInfo.supportedArchitectures"},
		{"should refuse a name without a size", strings.Replace(newTypeItem, "m9i.xlarge", "m9i", 1), 0.1, `instanceType "m9i": want <family>.<size>`},
		{"should refuse a non-positive price", newTypeItem, 0, "onDemand 0: want a positive price per hour"},
		{"should refuse XML that does not parse", "<item>", 0.1, "add instance type:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.sim.AddInstanceType([]byte(tt.item), tt.price)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("AddInstanceType() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
