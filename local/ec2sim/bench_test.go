package ec2sim_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/local/ec2sim"
)

// sixtyTypes are 60 x86_64 types: Karpenter's CreateFleet override limit.
func sixtyTypes() []string {
	var out []string
	for _, fam := range []string{"c5", "m5", "r5", "c5a", "m5a", "r5a", "c6i", "m6i", "r6i", "c6a", "m6a", "r6a", "c7i", "m7i", "r7i"} {
		for _, size := range []string{"large", "xlarge", "2xlarge", "4xlarge"} {
			out = append(out, fam+"."+size)
		}
	}
	return out
}

// BenchmarkCreateFleet measures one CreateFleet round trip through the real
// SDK client over loopback HTTP: 60 types x 3 zones = 180 overrides, one
// spot instance per call, a new ClientToken per call.
func BenchmarkCreateFleet(b *testing.B) {
	e := newEnv(b, ec2sim.Options{})
	e.createLT(b, "amd64", e.al2023(b, "x86_64"), "")
	sn := e.subnets()
	in := fleetInput("amd64", "spot", 1, sixtyTypes(), []string{sn["us-east-1a"], sn["us-east-1b"], sn["us-east-1c"]})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		in.ClientToken = aws.String(fmt.Sprintf("bench-%d", i))
		i++
		out, err := e.ec2.CreateFleet(b.Context(), in)
		if err != nil || len(out.Instances) != 1 {
			b.Fatalf("CreateFleet() = %v, %v", out, err)
		}
	}
}

// BenchmarkDescribeInstancesByTag measures the garbage collector's listing
// call (tag-key and state filters) over 1,000 instances.
func BenchmarkDescribeInstancesByTag(b *testing.B) {
	e := newEnv(b, ec2sim.Options{})
	e.createLT(b, "amd64", e.al2023(b, "x86_64"), "")
	in := fleetInput("amd64", "on-demand", 1000, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]})
	if _, err := e.ec2.CreateFleet(b.Context(), in); err != nil {
		b.Fatalf("CreateFleet() error = %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := e.ec2.DescribeInstances(b.Context(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag-key"), Values: []string{"aws:ec2:fleet-id"}},
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
		}})
		if err != nil || len(out.Reservations[0].Instances) != 1000 {
			b.Fatalf("DescribeInstances() error = %v", err)
		}
	}
}
