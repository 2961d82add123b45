package fleet_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
)

// stubEC2 answers CreateFleet with one instance at once, so the benchmark
// measures Launch's own work (filters, truncation, request building, the
// response fold), not a double's bookkeeping.
type stubEC2 struct{ fleet.EC2API }

func (stubEC2) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	ov := in.LaunchTemplateConfigs[0].Overrides[0]
	return &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{
		InstanceIds: []string{"i-0123456789abcdef0"}, InstanceType: ov.InstanceType, Lifecycle: ec2types.InstanceLifecycleSpot,
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
			InstanceType: ov.InstanceType, AvailabilityZone: ov.AvailabilityZone, SubnetId: ov.SubnetId, ImageId: ov.ImageId,
		}},
	}}}, nil
}

// BenchmarkLaunch launches one NodeClaim that admits every type of the
// embedded us-east-1 catalog (spot and on-demand, three zones): the per-claim
// overhead of the launch side with EC2 latency zero.
func BenchmarkLaunch(b *testing.B) {
	nc := &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.EC2NodeClassSpec{
		AMIFamily: aws.String(v1.AMIFamilyAL2023), AMISelectorTerms: []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
	}}
	types, _, err := catalog.Resolve(nc, catalog.Options{Region: "us-east-1", Zones: zones, SpotPriceRatio: 0.35})
	if err != nil {
		b.Fatal(err)
	}
	tmpl := fleet.TemplateFunc(func(_ context.Context, r fleet.TemplateRequest) ([]launch.Template, error) {
		lt := launch.Template{Name: "nodewright/bench", ImageID: "ami-1"}
		for _, it := range r.InstanceTypes {
			lt.InstanceTypes = append(lt.InstanceTypes, it.Name)
		}
		return []launch.Template{lt}, nil
	})
	req := fleet.Request{ClusterName: "prod", NodeClaim: nodeClaim(), NodeClass: nodeClass(), InstanceTypes: types, Subnets: subnets(), Templates: tmpl}
	c := fleet.New(stubEC2{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Launch(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(types)), "types")
}
