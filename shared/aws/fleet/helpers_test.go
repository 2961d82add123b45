package fleet_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	smithydocument "github.com/aws/smithy-go/document"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
)

// sdkOpts compares SDK structs (which embed an unexported marker type).
var sdkOpts = cmp.Options{cmpopts.IgnoreTypes(smithydocument.NoSerde{})}

var zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// instanceType builds a type with cpu vCPUs, cpu*4 GiB and 29 pods, an
// on-demand offering at odPrice and a spot offering at spotPrice (0: none)
// in every zone of zones. Overhead is empty, so allocatable = capacity.
func instanceType(name string, cpu int64, odPrice, spotPrice float64, opts ...func(*catalog.InstanceType)) *catalog.InstanceType {
	family, size, _ := strings.Cut(name, ".")
	it := &catalog.InstanceType{
		Name: name,
		Labels: map[string]string{
			v1.LabelInstanceType: name, v1.LabelArch: "amd64", v1.LabelOS: "linux", v1.LabelTopologyRegion: "us-east-1",
			v1.LabelInstanceFamily: family, v1.LabelInstanceSize: size, v1.LabelInstanceCategory: family[:1],
			v1.LabelInstanceCPU: strconv.FormatInt(cpu, 10),
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(cpu*4<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(29, resource.DecimalSI),
		},
	}
	for _, z := range zones {
		it.Offerings = append(it.Offerings, catalog.Offering{Zone: z, ZoneID: "use1-az" + z[len(z)-1:], CapacityType: v1.CapacityTypeOnDemand, Price: odPrice, Available: true})
		if spotPrice > 0 {
			it.Offerings = append(it.Offerings, catalog.Offering{Zone: z, ZoneID: "use1-az" + z[len(z)-1:], CapacityType: v1.CapacityTypeSpot, Price: spotPrice, Available: true})
		}
	}
	for _, o := range opts {
		o(it)
	}
	return it
}

func gpu(it *catalog.InstanceType) { it.Labels[v1.LabelInstanceGPUCount] = "1" }

func unavailableIn(zone, capacityType string) func(*catalog.InstanceType) {
	return func(it *catalog.InstanceType) {
		for i := range it.Offerings {
			if it.Offerings[i].Zone == zone && it.Offerings[i].CapacityType == capacityType {
				it.Offerings[i].Available = false
			}
		}
	}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// nodeClaim returns claim "default-abcde" of pool "default" asking for
// 1 CPU and the given requirements.
func nodeClaim(reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: "default-abcde", UID: types.UID("8d3c2f5e-0000-4000-8000-000000000001"),
			Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelEC2NodeClass: "default"},
		},
		Spec: v1.NodeClaimSpec{
			Requirements: reqs,
			Resources:    v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: "default"},
		},
	}
}

func nodeClass() *v1.EC2NodeClass {
	return &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.EC2NodeClassSpec{Tags: map[string]string{"team": "platform"}}}
}

// subnets has two subnets in us-east-1a (the second with more free
// addresses) and one in each other zone.
func subnets() []launch.Subnet {
	return []launch.Subnet{
		{ID: "subnet-a1", Zone: "us-east-1a", ZoneID: "use1-az1", AvailableIPs: 100},
		{ID: "subnet-a2", Zone: "us-east-1a", ZoneID: "use1-az1", AvailableIPs: 4000},
		{ID: "subnet-b1", Zone: "us-east-1b", ZoneID: "use1-az2", AvailableIPs: 50},
		{ID: "subnet-c1", Zone: "us-east-1c", ZoneID: "use1-az3", AvailableIPs: 70},
	}
}

// templates serves every requested type from one launch template
// "nodewright/test-<capacity type>" with image ami-123, registering it in
// the EC2 double; it records each request.
type templates struct {
	ec2      *awstest.EC2
	requests []fleet.TemplateRequest
}

func (s *templates) LaunchTemplates(_ context.Context, r fleet.TemplateRequest) ([]launch.Template, error) {
	s.requests = append(s.requests, r)
	name := "nodewright/test-" + r.CapacityType + r.ReservationID
	if _, _, ok := s.ec2.LaunchTemplateData(name); !ok {
		s.ec2.AddLaunchTemplate(name, "ami-123")
	}
	lt := launch.Template{Name: name, ImageID: "ami-123"}
	for _, it := range r.InstanceTypes {
		lt.InstanceTypes = append(lt.InstanceTypes, it.Name)
	}
	return []launch.Template{lt}, nil
}

func request(ec2 *awstest.EC2, claim *v1.NodeClaim, types ...*catalog.InstanceType) fleet.Request {
	return fleet.Request{
		ClusterName:   "prod",
		NodeClaim:     claim,
		NodeClass:     nodeClass(),
		InstanceTypes: types,
		Subnets:       subnets(),
		Templates:     &templates{ec2: ec2},
	}
}

// overrideKeys summarises a CreateFleet input's overrides as
// "type zone subnet".
func overrideKeys(t *testing.T, ec2 *awstest.EC2) []string {
	t.Helper()
	ins := ec2.On.CreateFleet.Inputs()
	if len(ins) == 0 {
		t.Fatal("no CreateFleet call")
	}
	var out []string
	for _, cfg := range ins[len(ins)-1].LaunchTemplateConfigs {
		for _, ov := range cfg.Overrides {
			out = append(out, fmt.Sprintf("%s %s %s", ov.InstanceType, *ov.AvailabilityZone, *ov.SubnetId))
		}
	}
	return out
}
