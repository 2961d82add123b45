package ec2sim_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/local/ec2sim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// typeSummary is what the cases compare of an InstanceTypeInfo.
type typeSummary struct {
	Arch, Manufacturer, Hypervisor string
	VCPUs, Threads                 int32
	MemoryMiB                      int64
	ENIs, IPv4PerENI               int32
	EBSMbps                        int32
	GPU                            string // manufacturer name count memory
	NeuronDevice                   string // name count
	LocalNVMeGB                    int64
	EFA                            int32
}

func summarize(it ec2types.InstanceTypeInfo) typeSummary {
	s := typeSummary{
		Arch:         string(it.ProcessorInfo.SupportedArchitectures[0]),
		Manufacturer: aws.ToString(it.ProcessorInfo.Manufacturer),
		Hypervisor:   string(it.Hypervisor),
		VCPUs:        aws.ToInt32(it.VCpuInfo.DefaultVCpus),
		Threads:      aws.ToInt32(it.VCpuInfo.DefaultThreadsPerCore),
		MemoryMiB:    aws.ToInt64(it.MemoryInfo.SizeInMiB),
		ENIs:         aws.ToInt32(it.NetworkInfo.MaximumNetworkInterfaces),
		IPv4PerENI:   aws.ToInt32(it.NetworkInfo.Ipv4AddressesPerInterface),
	}
	if it.EbsInfo.EbsOptimizedInfo != nil {
		s.EBSMbps = aws.ToInt32(it.EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps)
	}
	if it.GpuInfo != nil {
		g := it.GpuInfo.Gpus[0]
		s.GPU = fmt.Sprintf("%s %s x%d %dMiB", aws.ToString(g.Manufacturer), aws.ToString(g.Name), aws.ToInt32(g.Count), aws.ToInt32(g.MemoryInfo.SizeInMiB))
	}
	if it.NeuronInfo != nil {
		d := it.NeuronInfo.NeuronDevices[0]
		s.NeuronDevice = fmt.Sprintf("%s x%d", aws.ToString(d.Name), aws.ToInt32(d.Count))
	}
	if it.InstanceStorageInfo != nil {
		s.LocalNVMeGB = aws.ToInt64(it.InstanceStorageInfo.TotalSizeInGB)
	}
	if it.NetworkInfo.EfaInfo != nil {
		s.EFA = aws.ToInt32(it.NetworkInfo.EfaInfo.MaximumEfaInterfaces)
	}
	return s
}

func TestDescribeInstanceTypes(t *testing.T) {
	tests := []struct {
		name string
		want typeSummary
	}{
		{name: "m5.large", want: typeSummary{Arch: "x86_64", Manufacturer: "Intel", Hypervisor: "nitro", VCPUs: 2, Threads: 2, MemoryMiB: 8192, ENIs: 3, IPv4PerENI: 10, EBSMbps: 4750}},
		{name: "m6g.large", want: typeSummary{Arch: "arm64", Manufacturer: "AWS", Hypervisor: "nitro", VCPUs: 2, Threads: 1, MemoryMiB: 8192, ENIs: 3, IPv4PerENI: 10, EBSMbps: 4750}},
		{name: "g4dn.xlarge", want: typeSummary{Arch: "x86_64", Manufacturer: "Intel", Hypervisor: "nitro", VCPUs: 4, Threads: 2, MemoryMiB: 16384, ENIs: 3, IPv4PerENI: 10, EBSMbps: 3500,
			GPU: "NVIDIA T4 x1 16384MiB", LocalNVMeGB: 125}},
		{name: "inf2.xlarge", want: typeSummary{Arch: "x86_64", Manufacturer: "AMD", Hypervisor: "nitro", VCPUs: 4, Threads: 2, MemoryMiB: 16384, ENIs: 4, IPv4PerENI: 15, EBSMbps: 10000,
			NeuronDevice: "Inferentia2 x1"}},
	}
	e := newEnv(t, ec2sim.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeInstanceTypes(t.Context(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(tt.name)}})
			if err != nil {
				t.Fatalf("DescribeInstanceTypes() error = %v", err)
			}
			if len(out.InstanceTypes) != 1 {
				t.Fatalf("got %d types, want 1", len(out.InstanceTypes))
			}
			if diff := cmp.Diff(tt.want, summarize(out.InstanceTypes[0])); diff != "" {
				t.Errorf("DescribeInstanceTypes(%s) mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

// TestDescribeInstanceTypesMatchesTheCatalog pages through the whole catalog
// with the filters Karpenter sends (spec §3.4) and checks that the ENI
// facts reproduce the catalog's ENI-limited pod count for every type:
// pods = ENIs × (IPv4 per ENI − 1) + 2.
func TestDescribeInstanceTypesMatchesTheCatalog(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	family := v1.AMIFamilyAL2023
	nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMIFamily: &family}}
	types, _, err := catalog.Resolve(nc, catalog.Options{Region: "us-east-1", Zones: []string{"us-east-1a"}})
	if err != nil {
		t.Fatalf("catalog.Resolve() error = %v", err)
	}
	pods := map[string]int64{}
	for _, it := range types {
		q := it.Capacity[corev1.ResourcePods]
		pods[it.Name] = q.Value()
	}

	p := ec2.NewDescribeInstanceTypesPaginator(e.ec2, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		{Name: aws.String("supported-virtualization-type"), Values: []string{"hvm"}},
		{Name: aws.String("processor-info.supported-architecture"), Values: []string{"x86_64", "arm64"}},
	}})
	pages, withoutENIs := 0, 0
	var names []string
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("NextPage() error = %v", err)
		}
		pages++
		if len(out.InstanceTypes) > 100 {
			t.Errorf("page %d holds %d types, EC2 returns at most 100", pages, len(out.InstanceTypes))
		}
		for _, it := range out.InstanceTypes {
			name := string(it.InstanceType)
			names = append(names, name)
			enis, ips := int64(aws.ToInt32(it.NetworkInfo.MaximumNetworkInterfaces)), int64(aws.ToInt32(it.NetworkInfo.Ipv4AddressesPerInterface))
			if enis == 0 {
				withoutENIs++
				continue
			}
			if got := enis*(ips-1) + 2; got != pods[name] {
				t.Errorf("%s: %d ENIs x %d IPv4 give %d pods, catalog says %d", name, enis, ips, got, pods[name])
			}
		}
	}
	if len(names) != len(types) {
		t.Errorf("paged through %d types, catalog has %d", len(names), len(types))
	}
	slices.Sort(names)
	if diff := cmp.Diff(names, e.sim.InstanceTypes()); diff != "" {
		t.Errorf("InstanceTypes() differs from what DescribeInstanceTypes pages through (-paged +InstanceTypes):\n%s", diff)
	}
	if withoutENIs != 8 {
		t.Errorf("%d types without ENI facts, want the 8 the catalog lacks vpclimits for", withoutENIs)
	}
}

func TestDescribeInstanceTypeOfferings(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	tests := []struct {
		name    string
		locType ec2types.LocationType
		want    []string
	}{
		{name: "by zone", locType: ec2types.LocationTypeAvailabilityZone, want: []string{"us-east-1a", "us-east-1b", "us-east-1c"}},
		{name: "by zone ID", locType: ec2types.LocationTypeAvailabilityZoneId, want: []string{"use1-az1", "use1-az2", "use1-az3"}},
		{name: "by region", locType: ec2types.LocationTypeRegion, want: []string{"us-east-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeInstanceTypeOfferings(t.Context(), &ec2.DescribeInstanceTypeOfferingsInput{LocationType: tt.locType,
				Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.large"}}}})
			if err != nil {
				t.Fatalf("DescribeInstanceTypeOfferings() error = %v", err)
			}
			var got []string
			for _, o := range out.InstanceTypeOfferings {
				got = append(got, aws.ToString(o.Location))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("locations mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeSpotPriceHistory(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.sim.SetSpotPrice("m5.large", "us-east-1b", 0.0211)
	out, err := e.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"}})
	if err != nil {
		t.Fatalf("DescribeSpotPriceHistory() error = %v", err)
	}
	var got []string
	for _, p := range out.SpotPriceHistory {
		got = append(got, aws.ToString(p.AvailabilityZone)+"="+aws.ToString(p.SpotPrice))
	}
	// 0.096 on-demand x 0.35 default ratio = 0.0336.
	want := []string{"us-east-1a=0.033600", "us-east-1b=0.021100", "us-east-1c=0.033600"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spot prices mismatch (-want +got):\n%s", diff)
	}
}

func TestDescribeInstanceTypesErrors(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	tests := []struct {
		name     string
		input    *ec2.DescribeInstanceTypesInput
		wantCode string
	}{
		{name: "unknown instance type", input: &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large", "m99.huge"}}, wantCode: "InvalidInstanceType"},
		{name: "MaxResults above 100", input: &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(500)}, wantCode: "InvalidParameterValue"},
		{name: "unknown filter", input: &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{{Name: aws.String("gpu"), Values: []string{"1"}}}}, wantCode: "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ec2.DescribeInstanceTypes(t.Context(), tt.input)
			if code, _ := apiCode(err); code != tt.wantCode {
				t.Errorf("DescribeInstanceTypes() error = %v, want %s", err, tt.wantCode)
			}
		})
	}
}
