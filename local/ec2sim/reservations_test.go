package ec2sim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/aws/awserr"
)

func (e *env) addReservation(t *testing.T, r ec2sim.CapacityReservation) ec2sim.CapacityReservation {
	t.Helper()
	out, err := e.sim.AddCapacityReservation(r)
	if err != nil {
		t.Fatalf("AddCapacityReservation(%+v) error = %v", r, err)
	}
	return out
}

// describeReservations returns the IDs DescribeCapacityReservations
// answers for in, following NextToken.
func (e *env) describeReservations(t *testing.T, in *ec2.DescribeCapacityReservationsInput) (ids []string, byID map[string]ec2types.CapacityReservation) {
	t.Helper()
	byID = map[string]ec2types.CapacityReservation{}
	p := ec2.NewDescribeCapacityReservationsPaginator(e.ec2, in)
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("DescribeCapacityReservations error = %v", err)
		}
		for _, r := range out.CapacityReservations {
			ids = append(ids, aws.ToString(r.CapacityReservationId))
			byID[aws.ToString(r.CapacityReservationId)] = r
		}
	}
	return ids, byID
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

func TestDescribeCapacityReservations(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	end := epoch.Add(48 * time.Hour)
	odcr := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "m5.large", Zone: "us-east-1a", TotalInstanceCount: 2,
		Tags: map[string]string{"team": "ml", "env": "prod"}})
	targeted := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "c5.xlarge", Zone: "us-east-1b", TotalInstanceCount: 1,
		InstanceMatchCriteria: "targeted", Interruptible: true, Tags: map[string]string{"team": "web"}})
	block := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", Zone: "us-east-1c", TotalInstanceCount: 4,
		ReservationType: "capacity-block", OwnerID: "210987654321", EndDate: end})
	scheduled := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", Zone: "us-east-1c", TotalInstanceCount: 1,
		ReservationType: "capacity-block", StartDate: epoch.Add(time.Hour), EndDate: end})
	all := []string{odcr.ID, targeted.ID, block.ID, scheduled.ID}

	for _, tc := range []struct {
		name string
		in   ec2.DescribeCapacityReservationsInput
		want []string
	}{
		{"everything", ec2.DescribeCapacityReservationsInput{}, all},
		{"by ID", ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{block.ID, odcr.ID}}, []string{odcr.ID, block.ID}},
		{"tag:K=V", ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("tag:team", "ml")}}, []string{odcr.ID}},
		{"tag-key", ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("tag-key", "team")}}, []string{odcr.ID, targeted.ID}},
		{"tags ANDed", ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("tag:team", "ml"), filter("tag:env", "dev")}}, nil},
		{"instance-type", ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("instance-type", "p5.48xlarge")}}, []string{block.ID, scheduled.ID}},
		{"availability-zone", ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("availability-zone", "us-east-1b")}}, []string{targeted.ID}},
		{"state active", ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("state", "active")}}, []string{odcr.ID, targeted.ID, block.ID}},
		{"owner-id", ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("owner-id", "210987654321")}}, []string{block.ID}},
		{"instance-match-criteria", ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("instance-match-criteria", "targeted")}}, []string{targeted.ID, block.ID, scheduled.ID}},
		{"paged one by one", ec2.DescribeCapacityReservationsInput{MaxResults: aws.Int32(1)}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := e.describeReservations(t, &tc.in)
			if !slices.Equal(got, tc.want) {
				t.Errorf("IDs = %v, want %v", got, tc.want)
			}
		})
	}

	_, byID := e.describeReservations(t, &ec2.DescribeCapacityReservationsInput{})
	b := byID[block.ID]
	if b.ReservationType != ec2types.CapacityReservationTypeCapacityBlock || !aws.ToTime(b.EndDate).Equal(end) || b.State != ec2types.CapacityReservationStateActive ||
		aws.ToInt32(b.TotalInstanceCount) != 4 || aws.ToInt32(b.AvailableInstanceCount) != 4 || aws.ToString(b.OwnerId) != "210987654321" {
		t.Errorf("capacity block = %+v", b)
	}
	if r := byID[targeted.ID]; !aws.ToBool(r.Interruptible) || r.InstanceMatchCriteria != ec2types.InstanceMatchCriteriaTargeted || r.ReservationType != "default" {
		t.Errorf("targeted ODCR = %+v", r)
	}
	if r := byID[scheduled.ID]; r.State != ec2types.CapacityReservationStateScheduled {
		t.Errorf("block before its start: state %s, want scheduled", r.State)
	}
	e.clock.Advance(48 * time.Hour)
	if _, byID := e.describeReservations(t, &ec2.DescribeCapacityReservationsInput{}); byID[block.ID].State != ec2types.CapacityReservationStateExpired {
		t.Errorf("block past its end: state %s, want expired", byID[block.ID].State)
	}

	_, err := e.ec2.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-0000000000000000a"}})
	if awserr.Code(err) != "InvalidCapacityReservationId.NotFound" {
		t.Errorf("unknown ID: error %v, want InvalidCapacityReservationId.NotFound", err)
	}
	_, err = e.ec2.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{filter("vpc-id", "x")}})
	if awserr.Code(err) != "InvalidParameterValue" {
		t.Errorf("unknown filter: error %v, want InvalidParameterValue", err)
	}
	if _, err := e.sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", Zone: "us-east-1a", TotalInstanceCount: 1, ReservationType: "capacity-block"}); err == nil {
		t.Error("a capacity block without an end date was accepted")
	}
}

// createReservationLT creates a launch template with a capacity
// reservation specification (preference "" leaves it out).
// createReservationLT creates a launch template with this capacity
// reservation preference and target ("" for none) and, when given, this
// InstanceMarketOptions.MarketType.
func (e *env) createReservationLT(t *testing.T, name, preference, target string, marketType ...ec2types.MarketType) {
	t.Helper()
	data := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(e.al2023(t, "x86_64"))}
	if len(marketType) > 0 {
		data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: marketType[0]}
	}
	if preference != "" {
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreference(preference)}
		if target != "" {
			data.CapacityReservationSpecification.CapacityReservationTarget = &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(target)}
		}
	}
	if _, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data}); err != nil {
		t.Fatalf("CreateLaunchTemplate(%s) error = %v", name, err)
	}
}

func (e *env) available(t *testing.T, id string) int32 {
	t.Helper()
	_, byID := e.describeReservations(t, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	return aws.ToInt32(byID[id].AvailableInstanceCount)
}

func TestCreateFleetLaunchesIntoATargetedReservation(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ShutdownDelay: time.Minute})
	cr := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "m5.large", Zone: "us-east-1a", TotalInstanceCount: 2, InstanceMatchCriteria: "targeted"})
	e.createReservationLT(t, "reserved", "capacity-reservations-only", cr.ID)
	subnet := e.subnets()["us-east-1a"]
	var ids []string
	for i := range 2 {
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput("reserved", "on-demand", 1, []string{"m5.large"}, []string{subnet}))
		if err != nil || len(instanceIDs(out)) != 1 {
			t.Fatalf("launch %d: CreateFleet = %v, %v, errors %v", i, out, err, fleetErrors(out))
		}
		ids = append(ids, instanceIDs(out)...)
		if got := e.available(t, cr.ID); got != int32(1-i) {
			t.Errorf("after launch %d: AvailableInstanceCount = %d, want %d", i, got, 1-i)
		}
	}
	for id, in := range e.describe(t, ids...) {
		if aws.ToString(in.CapacityReservationId) != cr.ID || in.CapacityReservationSpecification == nil ||
			in.CapacityReservationSpecification.CapacityReservationPreference != "capacity-reservations-only" {
			t.Errorf("instance %s: CapacityReservationId %q spec %+v, want %s", id, aws.ToString(in.CapacityReservationId), in.CapacityReservationSpecification, cr.ID)
		}
	}
	out, err := e.ec2.CreateFleet(t.Context(), fleetInput("reserved", "on-demand", 1, []string{"m5.large"}, []string{subnet}))
	if err != nil {
		t.Fatalf("third CreateFleet error = %v", err)
	}
	if got, want := fleetErrors(out), []string{"ReservationCapacityExceeded m5.large/us-east-1a/on-demand"}; len(instanceIDs(out)) != 0 || !slices.Equal(got, want) {
		t.Errorf("full reservation: instances %v errors %v, want none and %v", instanceIDs(out), got, want)
	}
	if awserr.ClassifyCode("ReservationCapacityExceeded") != awserr.Unfulfillable {
		t.Error("ReservationCapacityExceeded is not unfulfillable for Karpenter's error classes")
	}
	// A type the reservation is not for fails per override.
	out, err = e.ec2.CreateFleet(t.Context(), fleetInput("reserved", "on-demand", 1, []string{"m5.xlarge"}, []string{subnet}))
	if err != nil || len(instanceIDs(out)) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidParameterCombination" {
		t.Errorf("mismatched type: %v, %v, errors %v", out, err, fleetErrors(out))
	}

	if _, err := e.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: ids[:1]}); err != nil {
		t.Fatal(err)
	}
	if got := e.available(t, cr.ID); got != 0 {
		t.Errorf("shutting down: AvailableInstanceCount = %d, want 0 until terminated", got)
	}
	e.clock.Advance(10 * time.Minute)
	if got := e.available(t, cr.ID); got != 1 {
		t.Errorf("terminated: AvailableInstanceCount = %d, want 1", got)
	}
	out, err = e.ec2.CreateFleet(t.Context(), fleetInput("reserved", "on-demand", 1, []string{"m5.large"}, []string{subnet}))
	if err != nil || len(instanceIDs(out)) != 1 {
		t.Errorf("after termination: CreateFleet = %v, %v, errors %v", out, err, fleetErrors(out))
	}
}

func TestCreateFleetOpenReservationsAndPreferenceNone(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	cr := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "m5.large", Zone: "us-east-1a", TotalInstanceCount: 1})
	e.createReservationLT(t, "none", "none", "")
	e.createReservationLT(t, "default", "", "")
	subnet := e.subnets()["us-east-1a"]

	out, err := e.ec2.CreateFleet(t.Context(), fleetInput("none", "on-demand", 1, []string{"m5.large"}, []string{subnet}))
	if err != nil || len(instanceIDs(out)) != 1 {
		t.Fatalf("preference none: %v, %v", out, err)
	}
	if in := e.describe(t, instanceIDs(out)...)[instanceIDs(out)[0]]; in.CapacityReservationId != nil || e.available(t, cr.ID) != 1 {
		t.Errorf("preference none used reservation %q (available %d)", aws.ToString(in.CapacityReservationId), e.available(t, cr.ID))
	}
	out, err = e.ec2.CreateFleet(t.Context(), fleetInput("default", "on-demand", 1, []string{"m5.large"}, []string{subnet}))
	if err != nil || len(instanceIDs(out)) != 1 {
		t.Fatalf("default preference: %v, %v", out, err)
	}
	if in := e.describe(t, instanceIDs(out)...)[instanceIDs(out)[0]]; aws.ToString(in.CapacityReservationId) != cr.ID || e.available(t, cr.ID) != 0 {
		t.Errorf("open preference: reservation %q, available %d; want %s, 0", aws.ToString(in.CapacityReservationId), e.available(t, cr.ID), cr.ID)
	}
	// Spot never uses a reservation.
	out, err = e.ec2.CreateFleet(t.Context(), fleetInput("default", "spot", 1, []string{"m5.large"}, []string{subnet}))
	if err != nil || len(instanceIDs(out)) != 1 || e.describe(t, instanceIDs(out)...)[instanceIDs(out)[0]].CapacityReservationId != nil {
		t.Errorf("spot: %v, %v", out, err)
	}
}

func TestCreateFleetCapacityBlock(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	block := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", Zone: "us-east-1a", TotalInstanceCount: 1,
		ReservationType: "capacity-block", EndDate: epoch.Add(24 * time.Hour)})
	later := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "p5.48xlarge", Zone: "us-east-1a", TotalInstanceCount: 1,
		ReservationType: "capacity-block", StartDate: epoch.Add(time.Hour), EndDate: epoch.Add(24 * time.Hour)})
	e.createReservationLT(t, "block", "capacity-reservations-only", block.ID, ec2types.MarketTypeCapacityBlock)
	e.createReservationLT(t, "block-without-market-type", "capacity-reservations-only", block.ID)
	e.createReservationLT(t, "later", "capacity-reservations-only", later.ID, ec2types.MarketTypeCapacityBlock)
	e.createReservationLT(t, "untargeted", "none", "")
	subnet := e.subnets()["us-east-1a"]

	out, err := e.ec2.CreateFleet(t.Context(), fleetInput("block", "capacity-block", 1, []string{"p5.48xlarge"}, []string{subnet}))
	if err != nil || len(instanceIDs(out)) != 1 {
		t.Fatalf("capacity block launch: %v, %v, errors %v", out, err, fleetErrors(out))
	}
	in := e.describe(t, instanceIDs(out)...)[instanceIDs(out)[0]]
	if aws.ToString(in.CapacityReservationId) != block.ID || in.InstanceLifecycle != ec2types.InstanceLifecycleTypeCapacityBlock {
		t.Errorf("block instance: reservation %q lifecycle %q", aws.ToString(in.CapacityReservationId), in.InstanceLifecycle)
	}
	for _, tc := range []struct{ lt, capacityType, code string }{
		// EC2 refuses a launch into a capacity block whose launch
		// template lacks MarketType capacity-block.
		{"block-without-market-type", "capacity-block", "InvalidParameterValue"},
		{"later", "capacity-block", "InvalidCapacityReservationId.NotFound"}, // scheduled, not active
		{"untargeted", "capacity-block", "MissingParameter"},
		{"block", "on-demand", "InvalidParameterCombination"},
	} {
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput(tc.lt, tc.capacityType, 1, []string{"p5.48xlarge"}, []string{subnet}))
		if err != nil || len(instanceIDs(out)) != 0 || len(out.Errors) == 0 || aws.ToString(out.Errors[0].ErrorCode) != tc.code {
			t.Errorf("%s as %s: %v, %v, errors %v; want error %s", tc.lt, tc.capacityType, out, err, fleetErrors(out), tc.code)
		}
	}
}

func TestCreateFleetReservationNeedsItsMarketType(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	odcr := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "m5.large", Zone: "us-east-1a", TotalInstanceCount: 2, InstanceMatchCriteria: "targeted"})
	interruptible := e.addReservation(t, ec2sim.CapacityReservation{InstanceType: "m5.large", Zone: "us-east-1a", TotalInstanceCount: 2,
		InstanceMatchCriteria: "targeted", Interruptible: true})
	e.createReservationLT(t, "odcr-as-block", "capacity-reservations-only", odcr.ID, ec2types.MarketTypeCapacityBlock)
	e.createReservationLT(t, "interruptible-plain", "capacity-reservations-only", interruptible.ID)
	e.createReservationLT(t, "interruptible", "capacity-reservations-only", interruptible.ID, ec2types.MarketTypeInterruptibleCapacityReservation)
	e.createReservationLT(t, "odcr", "capacity-reservations-only", odcr.ID)
	subnet := e.subnets()["us-east-1a"]
	for _, tc := range []struct{ lt, capacityType, code string }{
		{"odcr-as-block", "on-demand", "InvalidParameterValue"},
		{"interruptible-plain", "reserved-capacity", "InvalidParameterValue"},
		{"interruptible", "reserved-capacity", ""},
		{"odcr", "on-demand", ""},
	} {
		out, err := e.ec2.CreateFleet(t.Context(), fleetInput(tc.lt, tc.capacityType, 1, []string{"m5.large"}, []string{subnet}))
		if err != nil {
			t.Fatalf("%s: CreateFleet error = %v", tc.lt, err)
		}
		if tc.code == "" {
			if len(instanceIDs(out)) != 1 {
				t.Errorf("%s as %s: no instance, errors %v", tc.lt, tc.capacityType, fleetErrors(out))
			}
			continue
		}
		if len(instanceIDs(out)) != 0 || len(out.Errors) == 0 || aws.ToString(out.Errors[0].ErrorCode) != tc.code {
			t.Errorf("%s as %s: instances %v, errors %v; want error %s", tc.lt, tc.capacityType, instanceIDs(out), fleetErrors(out), tc.code)
		}
	}
	_, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad-market"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(e.al2023(t, "x86_64")),
			InstanceMarketOptions: &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: "on-demand"}}})
	if code, _ := apiCode(err); code != "InvalidParameterValue" {
		t.Errorf("CreateLaunchTemplate(MarketType on-demand) error = %v, want InvalidParameterValue", err)
	}
}
