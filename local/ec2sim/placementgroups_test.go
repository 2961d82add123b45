package ec2sim_test

import (
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
)

var regexpPG = regexp.MustCompile(`^pg-[0-9a-f]{17}$`)

func TestDescribePlacementGroups(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ClusterName: "prod"})
	for _, pg := range []ec2sim.PlacementGroup{
		{Name: "training", Strategy: ec2sim.PlacementCluster, Tags: map[string]string{"team": "ml"}},
		{Name: "kafka", Strategy: ec2sim.PlacementPartition, PartitionCount: 3},
		{Name: "zk", Strategy: ec2sim.PlacementSpread, State: ec2sim.PlacementGroupPending},
		{Name: "old", Strategy: ec2sim.PlacementCluster, State: ec2sim.PlacementGroupDeleted},
	} {
		if _, err := e.sim.AddPlacementGroup(pg); err != nil {
			t.Fatalf("AddPlacementGroup(%s) error = %v", pg.Name, err)
		}
	}
	if _, err := e.sim.AddPlacementGroup(ec2sim.PlacementGroup{Name: "kafka", Strategy: ec2sim.PlacementCluster}); err == nil {
		t.Error("AddPlacementGroup(duplicate name) succeeded")
	}
	if _, err := e.sim.AddPlacementGroup(ec2sim.PlacementGroup{Name: "p8", Strategy: ec2sim.PlacementPartition, PartitionCount: 8}); err == nil {
		t.Error("AddPlacementGroup(8 partitions) succeeded; EC2 allows at most 7")
	}
	type brief struct {
		Name, Strategy, State string
		Partitions            int32
		Spread                string
	}
	summary := func(out *ec2.DescribePlacementGroupsOutput) []brief {
		var b []brief
		for _, g := range out.PlacementGroups {
			if !regexpPG.MatchString(aws.ToString(g.GroupId)) || aws.ToString(g.GroupArn) != "arn:aws:ec2:us-east-1:111122223333:placement-group/"+aws.ToString(g.GroupName) {
				t.Errorf("group %s: id %q, arn %q", aws.ToString(g.GroupName), aws.ToString(g.GroupId), aws.ToString(g.GroupArn))
			}
			b = append(b, brief{aws.ToString(g.GroupName), string(g.Strategy), string(g.State), aws.ToInt32(g.PartitionCount), string(g.SpreadLevel)})
		}
		return b
	}
	all, err := e.ec2.DescribePlacementGroups(t.Context(), &ec2.DescribePlacementGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	want := []brief{{"training", "cluster", "available", 0, ""}, {"kafka", "partition", "available", 3, ""}, {"zk", "spread", "pending", 0, "rack"}}
	if diff := cmp.Diff(want, summary(all)); diff != "" {
		t.Errorf("DescribePlacementGroups() mismatch (-want +got):\n%s", diff)
	}
	byName, err := e.ec2.DescribePlacementGroups(t.Context(), &ec2.DescribePlacementGroupsInput{GroupNames: []string{"old"}})
	if err != nil || len(byName.PlacementGroups) != 1 || byName.PlacementGroups[0].State != ec2types.PlacementGroupStateDeleted {
		t.Errorf("DescribePlacementGroups(GroupNames old) = %+v, %v; want the deleted group", byName, err)
	}
	training := aws.ToString(all.PlacementGroups[0].GroupId)
	byID, err := e.ec2.DescribePlacementGroups(t.Context(), &ec2.DescribePlacementGroupsInput{GroupIds: []string{training}})
	if err != nil || len(byID.PlacementGroups) != 1 || aws.ToString(byID.PlacementGroups[0].GroupName) != "training" || len(byID.PlacementGroups[0].Tags) != 1 {
		t.Errorf("DescribePlacementGroups(GroupIds %s) = %+v, %v; want training with its tag", training, byID, err)
	}
	filtered, err := e.ec2.DescribePlacementGroups(t.Context(), &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("strategy"), Values: []string{"partition", "spread"}}, {Name: aws.String("state"), Values: []string{"available"}}}})
	if err != nil || len(filtered.PlacementGroups) != 1 || aws.ToString(filtered.PlacementGroups[0].GroupName) != "kafka" {
		t.Errorf("DescribePlacementGroups(strategy partition|spread, state available) = %+v, %v; want kafka", filtered, err)
	}
	for _, in := range []*ec2.DescribePlacementGroupsInput{{GroupNames: []string{"nope"}}, {GroupIds: []string{"pg-0123456789abcdef0"}}} {
		if _, err := e.ec2.DescribePlacementGroups(t.Context(), in); err == nil {
			t.Errorf("DescribePlacementGroups(%+v) succeeded", in)
		} else if code, _ := apiCode(err); code != "InvalidPlacementGroup.Unknown" {
			t.Errorf("DescribePlacementGroups(%+v) error = %v, want InvalidPlacementGroup.Unknown", in, err)
		}
	}
}

func TestCreateFleetLaunchesIntoTheLaunchTemplatesPlacementGroup(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ClusterName: "prod"})
	kafka, err := e.sim.AddPlacementGroup(ec2sim.PlacementGroup{Name: "kafka", Strategy: ec2sim.PlacementPartition, PartitionCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	lt := func(name string, p *ec2types.LaunchTemplatePlacementRequest) string {
		t.Helper()
		if _, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(e.al2023(t, "x86_64")), Placement: p}}); err != nil {
			t.Fatalf("CreateLaunchTemplate(%s) error = %v", name, err)
		}
		return name
	}
	launch := func(name string) ec2types.Instance {
		t.Helper()
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput(name, "on-demand", 1, []string{"m5.large"}, []string{e.subnets()["us-east-1a"]}))
		if err != nil {
			t.Fatalf("CreateFleet(%s) error = %v", name, err)
		}
		ids := instanceIDs(out)
		if len(ids) != 1 {
			t.Fatalf("CreateFleet(%s) launched %v (errors %v)", name, ids, fleetErrors(out))
		}
		return e.describe(t, ids[0])[ids[0]]
	}
	spread := lt("nodewright/kafka", &ec2types.LaunchTemplatePlacementRequest{GroupId: aws.String(kafka.ID)})
	var partitions []int32
	for range 4 {
		got := launch(spread)
		if aws.ToString(got.Placement.GroupId) != kafka.ID || aws.ToString(got.Placement.GroupName) != "kafka" {
			t.Errorf("Placement = group %q %q, want %s kafka", aws.ToString(got.Placement.GroupId), aws.ToString(got.Placement.GroupName), kafka.ID)
		}
		partitions = append(partitions, aws.ToInt32(got.Placement.PartitionNumber))
	}
	if diff := cmp.Diff([]int32{1, 2, 3, 1}, partitions); diff != "" {
		t.Errorf("partitions mismatch (-want +got); EC2 spreads instances over the partitions:\n%s", diff)
	}
	if got := launch(lt("nodewright/kafka-3", &ec2types.LaunchTemplatePlacementRequest{GroupName: aws.String("kafka"), PartitionNumber: aws.Int32(3)})); aws.ToInt32(got.Placement.PartitionNumber) != 3 {
		t.Errorf("PartitionNumber = %d, want the template's 3", aws.ToInt32(got.Placement.PartitionNumber))
	}
	if got := launch(lt("nodewright/none", nil)); got.Placement.GroupId != nil || aws.ToString(got.Placement.GroupName) != "" || got.Placement.PartitionNumber != nil {
		t.Errorf("Placement = %+v; want no group", got.Placement)
	}
	for name, p := range map[string]*ec2types.LaunchTemplatePlacementRequest{
		"nodewright/unknown":   {GroupName: aws.String("nope")},
		"nodewright/partition": {GroupId: aws.String(kafka.ID), PartitionNumber: aws.Int32(4)},
	} {
		_, err := e.ec2.CreateFleet(t.Context(), fleetInput(lt(name, p), "on-demand", 1, []string{"m5.large"}, []string{e.subnets()["us-east-1a"]}))
		if err == nil {
			t.Errorf("CreateFleet(%s) succeeded", name)
		}
	}
}

func TestCreateFleetKeepsAClusterPlacementGroupInOneZone(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ClusterName: "prod"})
	training, err := e.sim.AddPlacementGroup(ec2sim.PlacementGroup{Name: "training", Strategy: ec2sim.PlacementCluster})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("nodewright/training"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(e.al2023(t, "x86_64")),
			Placement: &ec2types.LaunchTemplatePlacementRequest{GroupId: aws.String(training.ID)}}}); err != nil {
		t.Fatal(err)
	}
	launch := func(zone string) (*ec2.CreateFleetOutput, []string) {
		t.Helper()
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput("nodewright/training", "on-demand", 1, []string{"m5.large"}, []string{e.subnets()[zone]}))
		if err != nil {
			t.Fatalf("CreateFleet(%s) error = %v", zone, err)
		}
		return out, instanceIDs(out)
	}
	if _, ids := launch("us-east-1b"); len(ids) != 1 {
		t.Fatalf("the empty group's first instance: launched %v; want one, in any zone", ids)
	}
	out, ids := launch("us-east-1a")
	if len(ids) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" {
		t.Fatalf("a launch into the group from another zone: instances %v, errors %v; want none and InsufficientInstanceCapacity", ids, fleetErrors(out))
	}
	if _, ids := launch("us-east-1b"); len(ids) != 1 {
		t.Errorf("a launch into the group's zone: launched %v; want one", ids)
	}
}
