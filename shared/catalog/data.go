package catalog

import "sort"

//go:generate go run gen.go

// Extended resources of the catalog (aws: pkg/apis/v1/labels.go resource
// names; data/README.md `resources`).
const (
	ResourceNVIDIAGPU          = "nvidia.com/gpu"
	ResourceAMDGPU             = "amd.com/gpu"
	ResourceHabanaGaudi        = "habana.ai/gaudi"
	ResourceAWSNeuron          = "aws.amazon.com/neuron"
	ResourceAWSNeuronCore      = "aws.amazon.com/neuroncore"
	ResourceAWSPodENI          = "vpc.amazonaws.com/pod-eni"
	ResourceEFA                = "vpc.amazonaws.com/efa"
	ResourcePrivateIPv4Address = "vpc.amazonaws.com/PrivateIPv4Address"
)

// absent marks a numeric field the data leaves null.
const absent = -1

// typeInfo is one record of data/ec2-instance-types.json, compiled into the
// binary by gen.go as zz_generated.go (catalogTypes). Field meanings and
// units are those of data/README.md. Nullable numbers are absent (-1) when
// null; nullable strings are "" when null (gen.go refuses a present empty
// value). The table is static data: nothing writes to it, and Resolve copies
// whatever it hands out.
type typeInfo struct {
	name, category, family  string
	generation              int64
	size, arch              string
	vcpu, memoryMiB         int64
	cpuManufacturer         string
	clockMHz                int64
	flex                    bool
	gpuCount                int64
	gpuName, gpuMfr         string
	gpuMemoryMiB            int64
	acceleratorCount        int64
	acceleratorName, accMfr string
	localNVMeGB             int64
	networkBandwidthMbps    int64
	ebsBandwidthMbps        int64
	hypervisor              string
	bareMetal               bool
	encryptionInTransit     bool
	// maxPods is the ENI-limited pod count as listed (RESERVED_ENIS=0).
	maxPods int64
	// vpclimits fields; absent for the 8 types vpclimits lacks.
	maxENIs, defaultCardMaxENIs, ipv4PerENI, branchENIs int64
	trunkingCompatible                                  bool
	networkCards                                        int64
	// Extended resources as listed; 0 when not listed.
	nvidiaGPU, amdGPU, neuron, neuronCore, efa int64
}

// priceTable is one region of data/ec2-on-demand-prices.json, compiled in as
// priceTables (sorted by region). prices is sorted by instance type.
type priceTable struct {
	region, currency, generatedAt, sourceFile string
	prices                                    []namedPrice
}

type namedPrice struct {
	name  string
	price float64
}

// lookupPriceTable returns the embedded table of region.
func lookupPriceTable(region string) (*priceTable, bool) {
	i := sort.Search(len(priceTables), func(i int) bool { return priceTables[i].region >= region })
	if i < len(priceTables) && priceTables[i].region == region {
		return &priceTables[i], true
	}
	return nil, false
}

// price returns the on-demand price of instanceType.
func (t *priceTable) price(instanceType string) (float64, bool) {
	i := sort.Search(len(t.prices), func(i int) bool { return t.prices[i].name >= instanceType })
	if i < len(t.prices) && t.prices[i].name == instanceType {
		return t.prices[i].price, true
	}
	return 0, false
}
