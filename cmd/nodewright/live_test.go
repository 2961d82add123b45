package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodewright/nodewright/local/ec2sim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// liveManifests is a Spot-or-on-demand NodePool on a class whose subnets
// are the simulator's ap-northeast-1 zones, with one pending pod.
const liveManifests = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c1}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c1}}]
status:
  subnets:
    - {id: subnet-a, zone: ap-northeast-1a}
    - {id: subnet-c, zone: ap-northeast-1c}
    - {id: subnet-d, zone: ap-northeast-1d}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: web
      image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
      resources: {requests: {cpu: 500m, memory: 512Mi}}
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
`

// liveSim serves the simulator's realistic ap-northeast-1 (a region the
// embedded price table lacks; some types not offered in some zones, Spot
// prices per zone) for EC2 and Pricing, and returns it with the SDK
// options that point --live at it, as AWS_ENDPOINT_URL would.
func liveSim(t *testing.T) (*ec2sim.Server, liveConfig) {
	t.Helper()
	// The simulator speaks plain HTTP on loopback: no CA bundle or
	// endpoint from this machine's environment applies.
	for _, k := range []string{"AWS_CA_BUNDLE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL_PRICING", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	sim, err := ec2sim.New(ec2sim.Options{Region: "ap-northeast-1", World: ec2sim.WorldRealistic, ClusterName: "c1"})
	if err != nil {
		t.Fatalf("ec2sim.New() error = %v", err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: ec2sim.LoopbackTransport(http.DefaultTransport.(*http.Transport).Clone())}
	return sim, liveConfig{Enabled: true, AWS: []func(*awsconfig.LoadOptions) error{
		awsconfig.WithBaseEndpoint(srv.URL),
		awsconfig.WithHTTPClient(client),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")),
		awsconfig.WithSharedConfigFiles([]string{}),
		awsconfig.WithSharedCredentialsFiles([]string{}),
		awsconfig.WithRetryMaxAttempts(1),
	}}
}

func writeManifests(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPlanLiveReadsTheRegionThroughTheLambdasProvider(t *testing.T) {
	sim, live := liveSim(t)
	var stderr bytes.Buffer
	cfg, err := parsePlanFlags([]string{"-f", writeManifests(t, liveManifests), "--region", "ap-northeast-1", "--live"}, &stderr, time.Now)
	if err != nil {
		t.Fatalf("parsePlanFlags() error = %v: %s", err, stderr.String())
	}
	cfg.Live = live
	r, err := plan(t.Context(), cfg, nil, &stderr)
	if err != nil {
		t.Fatalf("plan() error = %v, stderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"instance-types: DescribeInstanceTypes in ap-northeast-1, fetched",
		"offerings: DescribeInstanceTypeOfferings in ap-northeast-1, fetched",
		"on-demand-prices: Pricing GetProducts in ap-northeast-1, fetched",
		"spot-prices: DescribeSpotPriceHistory in ap-northeast-1, fetched",
	} {
		if !strings.Contains(r.PriceSource, want) {
			t.Errorf("PriceSource = %q, want it to say %q", r.PriceSource, want)
		}
	}
	for _, action := range []string{"DescribeInstanceTypes", "DescribeInstanceTypeOfferings", "DescribeSpotPriceHistory"} {
		if len(sim.CallsTo(action)) == 0 {
			t.Errorf("no %s call reached the simulator", action)
		}
	}
	if len(r.NodeClaims) != 1 {
		t.Fatalf("NodeClaims = %+v, want 1", r.NodeClaims)
	}
	e := r.NodeClaims[0].Expected
	if !sim.Offered(e.InstanceType, e.Zone) {
		t.Errorf("expected offering %s in %s: the simulator's zone does not offer it", e.InstanceType, e.Zone)
	}
	if price, ok := sim.Price(e.InstanceType, e.Zone, e.CapacityType); !ok || price != e.PricePerHour {
		t.Errorf("expected %s %s in %s at %v, want the simulator's price %v", e.CapacityType, e.InstanceType, e.Zone, e.PricePerHour, price)
	}
	// The cheapest fitting offering is the simulator's cheapest for the
	// chosen type: no zone offers it for less.
	for _, z := range sim.Zones() {
		if p, ok := sim.Price(e.InstanceType, z, v1.CapacityTypeSpot); ok && sim.Offered(e.InstanceType, z) && p < e.PricePerHour {
			t.Errorf("%s costs %v as spot in %s, less than the planned %v", e.InstanceType, p, z, e.PricePerHour)
		}
	}
}

func TestPlanLiveNeedsARegionAndOfflineStaysTheDefault(t *testing.T) {
	path := writeManifests(t, liveManifests)
	code, _, errOut := runCLI(t, "", "plan", "-f", path, "--live")
	if code != exitUsage || !strings.Contains(errOut, "--live: --region is required") {
		t.Errorf("plan --live without --region: exit %d, stderr %q; want 2 naming --region", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "disruption", "-f", path, "--live")
	if code != exitUsage || !strings.Contains(errOut, "--live: --region is required") {
		t.Errorf("disruption --live without --region: exit %d, stderr %q; want 2 naming --region", code, errOut)
	}
	r := planJSON(t, "", "-f", path, "--region", "ap-northeast-1")
	if !strings.Contains(r.PriceSource, "embedded") || strings.Contains(r.PriceSource, "DescribeSpotPriceHistory") {
		t.Errorf("offline PriceSource = %q, want the embedded tables only", r.PriceSource)
	}
}

func TestDisruptionLiveSaysWhereEveryPriceCameFrom(t *testing.T) {
	sim, live := liveSim(t)
	var stderr bytes.Buffer
	cfg, err := parseDisruptionFlags([]string{"-f", writeManifests(t, liveManifests), "--region", "ap-northeast-1", "--live"}, &stderr, time.Now)
	if err != nil {
		t.Fatalf("parseDisruptionFlags() error = %v: %s", err, stderr.String())
	}
	if cfg.SpotPriceRatio != 1 {
		t.Errorf("--live SpotPriceRatio = %v, want the on-demand price (1) until Spot prices load, as the Lambdas", cfg.SpotPriceRatio)
	}
	cfg.Live = live
	rep, err := evaluateDisruption(t.Context(), cfg, nil, &stderr)
	if err != nil {
		t.Fatalf("evaluateDisruption() error = %v, stderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"DescribeInstanceTypes in ap-northeast-1", "Pricing GetProducts in ap-northeast-1", "DescribeSpotPriceHistory in ap-northeast-1"} {
		if !strings.Contains(rep.PriceSource, want) {
			t.Errorf("PriceSource = %q, want it to say %q", rep.PriceSource, want)
		}
	}
	if len(sim.CallsTo("DescribeSpotPriceHistory")) == 0 {
		t.Error("no DescribeSpotPriceHistory call reached the simulator")
	}
}

func TestLiveFailsWhenNothingCanBeRead(t *testing.T) {
	_, live := liveSim(t)
	live.AWS = append(live.AWS, awsconfig.WithBaseEndpoint("http://127.0.0.1:1"))
	var stderr bytes.Buffer
	_, err := fetchLive(t.Context(), live, "ap-northeast-1", time.Now(), &stderr)
	if err == nil || !strings.Contains(err.Error(), "no EC2 data read from ap-northeast-1") {
		t.Errorf("fetchLive(unreachable) error = %v, want one saying nothing was read", err)
	}
}
