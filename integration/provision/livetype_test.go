package provision_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/pricing"

	gchandler "github.com/nodewright/nodewright/functions/gc/handler"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ec2data"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/kube"
)

// m9iLarge is a DescribeInstanceTypes item, in EC2's XML, of a type newer
// than the embedded catalog: the name is hypothetical, the facts are an
// m8i.large's (2 vCPUs, 8 GiB, Intel, nitro, 3 ENIs of 10 IPv4
// addresses, 12.5 Gbps network, 10 Gbps EBS).
const m9iLarge = `<item>
  <instanceType>m9i.large</instanceType>
  <currentGeneration>true</currentGeneration>
  <supportedUsageClasses><item>on-demand</item><item>spot</item></supportedUsageClasses>
  <supportedRootDeviceTypes><item>ebs</item></supportedRootDeviceTypes>
  <supportedVirtualizationTypes><item>hvm</item></supportedVirtualizationTypes>
  <bareMetal>false</bareMetal>
  <hypervisor>nitro</hypervisor>
  <processorInfo>
    <supportedArchitectures><item>x86_64</item></supportedArchitectures>
    <sustainedClockSpeedInGhz>3.9</sustainedClockSpeedInGhz>
    <manufacturer>Intel</manufacturer>
  </processorInfo>
  <vCpuInfo><defaultVCpus>2</defaultVCpus><defaultCores>1</defaultCores><defaultThreadsPerCore>2</defaultThreadsPerCore></vCpuInfo>
  <memoryInfo><sizeInMiB>8192</sizeInMiB></memoryInfo>
  <instanceStorageSupported>false</instanceStorageSupported>
  <ebsInfo>
    <ebsOptimizedSupport>default</ebsOptimizedSupport>
    <encryptionSupport>supported</encryptionSupport>
    <ebsOptimizedInfo><baselineBandwidthInMbps>650</baselineBandwidthInMbps><maximumBandwidthInMbps>10000</maximumBandwidthInMbps></ebsOptimizedInfo>
    <nvmeSupport>required</nvmeSupport>
  </ebsInfo>
  <networkInfo>
    <networkPerformance>Up to 12.5 Gigabit</networkPerformance>
    <maximumNetworkInterfaces>3</maximumNetworkInterfaces>
    <maximumNetworkCards>1</maximumNetworkCards>
    <defaultNetworkCardIndex>0</defaultNetworkCardIndex>
    <networkCards><item><networkCardIndex>0</networkCardIndex><networkPerformance>Up to 12.5 Gigabit</networkPerformance><maximumNetworkInterfaces>3</maximumNetworkInterfaces><baselineBandwidthInGbps>0.781</baselineBandwidthInGbps><peakBandwidthInGbps>12.5</peakBandwidthInGbps></item></networkCards>
    <ipv4AddressesPerInterface>10</ipv4AddressesPerInterface>
    <ipv6AddressesPerInterface>10</ipv6AddressesPerInterface>
    <ipv6Supported>true</ipv6Supported>
    <enaSupport>required</enaSupport>
    <efaSupported>false</efaSupported>
    <encryptionInTransitSupported>true</encryptionInTransitSupported>
  </networkInfo>
  <placementGroupInfo><supportedStrategies><item>cluster</item><item>partition</item><item>spread</item></supportedStrategies></placementGroupInfo>
  <hibernationSupported>true</hibernationSupported>
  <burstablePerformanceSupported>false</burstablePerformanceSupported>
  <dedicatedHostsSupported>true</dedicatedHostsSupported>
  <autoRecoverySupported>true</autoRecoverySupported>
  <supportedBootModes><item>legacy-bios</item><item>uefi</item></supportedBootModes>
</item>`

// refreshLive runs a gc pass wired as functions/gc/main.go wires it, with
// the Pricing client (the env's gc has none), and fails t unless every
// part of the live EC2 data was fetched from the simulator and stored.
func (e *env) refreshLive(t *testing.T) {
	t.Helper()
	env := map[string]string{
		"CLUSTER_NAME": cluster, "TABLE_NAME": e.table, "AWS_REGION": region,
		"CLUSTER_ENDPOINT": "https://e2e-cluster.example", "CLUSTER_CA_DATA": caData,
	}
	cfg, err := gchandler.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	o := e.ec2.Options()
	pricingClient := pricing.New(pricing.Options{Region: ec2data.PricingRegion(region), BaseEndpoint: o.BaseEndpoint, Credentials: creds, HTTPClient: o.HTTPClient})
	gc, err := gchandler.New(cfg, gchandler.Clients{DynamoDB: e.calls["gc"], EC2: e.ec2, Pricing: pricingClient, Nodes: kube.NewFromClientset(e.kube)},
		slog.New(slog.DiscardHandler), e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	out, err := gc.Handle(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("gc Handle() error = %v", err)
	}
	if out.EC2Data == nil || out.EC2Data.Error != "" || !slices.Equal(out.EC2Data.Stored, catalog.Parts) {
		t.Fatalf("gc EC2Data = %+v, want every part (%v) stored", out.EC2Data, catalog.Parts)
	}
}

// TestTypeOnlyInTheLiveAnswerLaunches: a type the embedded catalog lacks,
// which the region's DescribeInstanceTypes lists, is unschedulable until
// the live data is loaded, and then launches end to end: solved with the
// labels and allocatable the catalog computes from the DescribeInstanceTypes
// answer, priced at the Pricing API's price, and launched by CreateFleet in
// a zone that offers it.
func TestTypeOnlyInTheLiveAnswerLaunches(t *testing.T) {
	e := newEnv(t)
	family := v1.AMIFamilyAL2023
	offline, _, err := catalog.Resolve(&v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMIFamily: &family}}, catalog.Options{Region: region})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(offline, func(it *catalog.InstanceType) bool { return it.Name == "m9i.large" }) {
		t.Fatal("the embedded catalog has m9i.large: pick a type it lacks")
	}
	if err := e.sim.AddInstanceType([]byte(m9iLarge), 0.1123); err != nil {
		t.Fatalf("AddInstanceType() error = %v", err)
	}
	e.postConfig(t, `
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m9i.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}`)

	// Embedded tables only (no refresh yet): nothing can launch.
	e.postBatch(t, "b0", pod("web-0", "1", "2Gi"))
	e.drainOK(t)
	if claims := e.claims(t); len(claims) != 0 {
		t.Fatalf("before the refresh: nodeclaims %v, want none (the embedded catalog lacks m9i.large)", names(claims))
	}

	e.refreshLive(t)
	e.postBatch(t, "b1", pod("web-1", "1", "2Gi"))
	e.drainOK(t)
	claims := e.claims(t)
	if len(claims) != 1 || claims[0].Status.ProviderID == "" {
		t.Fatalf("after the refresh: nodeclaims %v, want one launched", names(claims))
	}
	c := claims[0]
	for k, want := range map[string]string{
		"node.kubernetes.io/instance-type":        "m9i.large",
		v1.LabelInstanceFamily:                    "m9i",
		v1.LabelInstanceGeneration:                "9",
		v1.LabelInstanceCPU:                       "2",
		v1.LabelInstanceMemory:                    "8192",
		v1.LabelInstanceCPUManufacturer:           "intel",
		v1.LabelInstanceHypervisor:                "nitro",
		v1.LabelInstanceNetworkBandwidth:          "781",
		v1.LabelInstanceEBSBandwidth:              "10000",
		v1.LabelInstanceCPUSustainedClockSpeedMhz: "3900",
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("NodeClaim label %s = %q, want %q (from the DescribeInstanceTypes answer)", k, got, want)
		}
	}
	// ENI-limited pods: 3 ENIs × (10 − 1) + 2 = 29 (Karpenter's formula).
	if pods := c.Status.Capacity.Pods(); pods.Value() != 29 {
		t.Errorf("NodeClaim capacity pods = %s, want 29 (3 ENIs × 9 + 2)", pods)
	}
	if mem := c.Status.Allocatable.Memory(); mem.IsZero() || mem.Value() >= 8192<<20 {
		t.Errorf("NodeClaim allocatable memory = %s, want the catalog's overhead and reservations taken off 8Gi", mem)
	}
	id := instanceID(t, c.Status.ProviderID)
	inst, ok := e.sim.Instance(id)
	if !ok || inst.InstanceType != "m9i.large" {
		t.Fatalf("instance %s = %+v, want an m9i.large", id, inst)
	}
	if !e.sim.Offered("m9i.large", inst.Zone) {
		t.Errorf("m9i.large launched in %s, which does not offer it", inst.Zone)
	}
	if price, ok := e.sim.Price("m9i.large", inst.Zone, v1.CapacityTypeOnDemand); !ok || price != 0.1123 {
		t.Errorf("simulator price %v (%v), want the 0.1123 the type was added with", price, ok)
	}
}
