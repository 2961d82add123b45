package nodeclass_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
)

func TestCapacityReservations(t *testing.T) {
	e := network(t)
	blockEnd := now.Add(30 * time.Minute) // within CapacityBlockExpiryLead: expiring
	e.On.DescribeCapacityReservations.Push(&ec2.DescribeCapacityReservationsOutput{
		CapacityReservations: []ec2types.CapacityReservation{{
			CapacityReservationId: aws.String("cr-b"), AvailabilityZone: aws.String("us-east-1b"), InstanceType: aws.String("p5.48xlarge"),
			OwnerId: aws.String("123456789012"), InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted,
			ReservationType: ec2types.CapacityReservationTypeCapacityBlock, EndDate: aws.Time(blockEnd), AvailableInstanceCount: aws.Int32(1),
		}},
		NextToken: aws.String("page2"),
	}, nil)
	e.On.DescribeCapacityReservations.Push(&ec2.DescribeCapacityReservationsOutput{
		CapacityReservations: []ec2types.CapacityReservation{{
			CapacityReservationId: aws.String("cr-a"), AvailabilityZone: aws.String("us-east-1a"), InstanceType: aws.String("m5.large"),
			OwnerId: aws.String("123456789012"), InstanceMatchCriteria: ec2types.InstanceMatchCriteriaOpen, AvailableInstanceCount: aws.Int32(2),
			Interruptible: aws.Bool(true),
		}},
	}, nil)
	e.On.DescribeCapacityReservations.Push(&ec2.DescribeCapacityReservationsOutput{
		CapacityReservations: []ec2types.CapacityReservation{{ // found again by ID: de-duplicated
			CapacityReservationId: aws.String("cr-a"), AvailabilityZone: aws.String("us-east-1a"), InstanceType: aws.String("m5.large"),
			OwnerId: aws.String("123456789012"), InstanceMatchCriteria: ec2types.InstanceMatchCriteriaOpen, AvailableInstanceCount: aws.Int32(2),
			Interruptible: aws.Bool(true),
		}},
	}, nil)
	nc := &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: v1.EC2NodeClassSpec{CapacityReservationSelectorTerms: []v1.CapacityReservationSelectorTerm{
		{ID: "cr-a"},
		{Tags: map[string]string{"team": "ml", "any": "*"}, OwnerID: "123456789012"},
		{InstanceMatchCriteria: "open"},
		{ID: "cr-c"},
	}}}
	got, available, err := nodeclass.New(e, nil, clock).CapacityReservations(t.Context(), nc)
	if err != nil {
		t.Fatalf("CapacityReservations() error = %v", err)
	}
	want := []v1.CapacityReservation{
		{ID: "cr-a", AvailabilityZone: "us-east-1a", InstanceType: "m5.large", OwnerID: "123456789012", InstanceMatchCriteria: "open",
			ReservationType: v1.ReservationTypeDefault, Interruptible: true, State: v1.ReservationStateActive},
		{ID: "cr-b", AvailabilityZone: "us-east-1b", InstanceType: "p5.48xlarge", OwnerID: "123456789012", InstanceMatchCriteria: "targeted",
			ReservationType: v1.ReservationTypeCapacityBlock, EndTime: &metav1.Time{Time: blockEnd}, State: v1.ReservationStateExpiring},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reservations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"cr-a": 2, "cr-b": 1}, available); diff != "" {
		t.Errorf("available (-want +got):\n%s", diff)
	}
	active := filter("state", "active")
	wantInputs := []*ec2.DescribeCapacityReservationsInput{
		{Filters: []ec2types.Filter{filter("tag-key", "any"), filter("tag:team", "ml"), filter("owner-id", "123456789012"), active}},
		{Filters: []ec2types.Filter{filter("tag-key", "any"), filter("tag:team", "ml"), filter("owner-id", "123456789012"), active}, NextToken: aws.String("page2")},
		{Filters: []ec2types.Filter{filter("instance-match-criteria", "open"), active}},
		{CapacityReservationIds: []string{"cr-a", "cr-c"}, Filters: []ec2types.Filter{active}},
	}
	inputs := e.On.DescribeCapacityReservations.Inputs()
	// The paginated input is reused: compare the recorded shapes, not
	// pointers (the first two inputs are one value).
	if len(inputs) != 4 {
		t.Fatalf("%d DescribeCapacityReservations calls, want 4", len(inputs))
	}
	for i := 2; i < 4; i++ {
		if diff := cmp.Diff(wantInputs[i], inputs[i], sdkOpts); diff != "" {
			t.Errorf("call %d (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(wantInputs[1], inputs[1], sdkOpts); diff != "" {
		t.Errorf("call 1 (-want +got):\n%s", diff)
	}

	none, _, err := nodeclass.New(e, nil, clock).CapacityReservations(t.Context(), &v1.EC2NodeClass{})
	if err != nil || len(none) != 0 || e.On.DescribeCapacityReservations.Count() != 4 {
		t.Errorf("no terms: %v, %v after %d calls; want no call", none, err, e.On.DescribeCapacityReservations.Count())
	}
}

func TestCapacityReservationsAreReadAgainOnceAMinuteOld(t *testing.T) {
	e := network(t)
	answer := func(free int32) {
		e.On.DescribeCapacityReservations.Push(&ec2.DescribeCapacityReservationsOutput{
			CapacityReservations: []ec2types.CapacityReservation{{
				CapacityReservationId: aws.String("cr-a"), AvailabilityZone: aws.String("us-east-1a"), InstanceType: aws.String("m5.large"),
				AvailableInstanceCount: aws.Int32(free),
			}},
		}, nil)
	}
	at := now
	r := nodeclass.New(e, nil, func() time.Time { return at })
	nc := &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.EC2NodeClassSpec{CapacityReservationSelectorTerms: []v1.CapacityReservationSelectorTerm{{ID: "cr-a"}}}}
	read := func() int {
		t.Helper()
		_, available, err := r.CapacityReservations(t.Context(), nc)
		if err != nil {
			t.Fatalf("CapacityReservations() error = %v", err)
		}
		return available["cr-a"]
	}
	answer(2)
	if got := read(); got != 2 {
		t.Fatalf("first read: %d available, want 2", got)
	}
	answer(0) // EC2 now says 0; the answer 59 s old is still used
	at = now.Add(nodeclass.ReservationRefreshInterval - time.Second)
	if got, calls := read(), e.On.DescribeCapacityReservations.Count(); got != 2 || calls != 1 {
		t.Errorf("59 s later: %d available after %d calls, want 2 after 1", got, calls)
	}
	at = now.Add(nodeclass.ReservationRefreshInterval)
	if got, calls := read(), e.On.DescribeCapacityReservations.Count(); got != 0 || calls != 2 {
		t.Errorf("a minute later: %d available after %d calls, want 0 after 2 (read again)", got, calls)
	}
	other := &v1.EC2NodeClass{ObjectMeta: nc.ObjectMeta}
	other.Spec.CapacityReservationSelectorTerms = []v1.CapacityReservationSelectorTerm{{ID: "cr-b"}}
	if _, _, err := r.CapacityReservations(t.Context(), other); err != nil || e.On.DescribeCapacityReservations.Count() != 3 {
		t.Errorf("other terms: error %v after %d calls, want a call of their own", err, e.On.DescribeCapacityReservations.Count())
	}
}

func TestOwnLaunchesLowerAKeptReservationCount(t *testing.T) {
	e := network(t)
	answer := func(free int32) {
		e.On.DescribeCapacityReservations.Push(&ec2.DescribeCapacityReservationsOutput{
			CapacityReservations: []ec2types.CapacityReservation{
				{CapacityReservationId: aws.String("cr-a"), AvailabilityZone: aws.String("us-east-1a"), InstanceType: aws.String("m5.large"), AvailableInstanceCount: aws.Int32(free)},
				{CapacityReservationId: aws.String("cr-b"), AvailabilityZone: aws.String("us-east-1a"), InstanceType: aws.String("m5.large"), AvailableInstanceCount: aws.Int32(5)},
			},
		}, nil)
	}
	at := now
	r := nodeclass.New(e, nil, func() time.Time { return at })
	nc := &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.EC2NodeClassSpec{CapacityReservationSelectorTerms: []v1.CapacityReservationSelectorTerm{{ID: "cr-a"}, {ID: "cr-b"}}}}
	read := func() map[string]int {
		t.Helper()
		_, available, err := r.CapacityReservations(t.Context(), nc)
		if err != nil {
			t.Fatalf("CapacityReservations() error = %v", err)
		}
		return available
	}
	answer(2)
	read()
	at = now.Add(10 * time.Second)
	r.ReservationLaunched("cr-a", "i-1")
	r.ReservationLaunched("cr-a", "i-1") // a replayed answer: the same instance
	r.ReservationLaunched("", "i-2")     // not in a reservation
	if got, want := read(), map[string]int{"cr-a": 1, "cr-b": 5}; !cmp.Equal(got, want) {
		t.Errorf("after one launch into cr-a: %v, want %v", got, want)
	}
	r.ReservationLaunched("cr-a", "i-3")
	r.ReservationLaunched("cr-a", "i-4") // EC2 would refuse it; the count stays at 0
	if got := read()["cr-a"]; got != 0 {
		t.Errorf("after three launches into a reservation of 2: %d available, want 0", got)
	}
	// The next read counts the launches itself: they are not taken off again.
	answer(0)
	at = now.Add(nodeclass.ReservationRefreshInterval)
	if got, calls := read()["cr-a"], e.On.DescribeCapacityReservations.Count(); got != 0 || calls != 2 {
		t.Errorf("a minute later: %d available after %d calls, want 0 after 2", got, calls)
	}
	answer(2) // two instances terminated meanwhile
	at = now.Add(2 * nodeclass.ReservationRefreshInterval)
	if got := read()["cr-a"]; got != 2 {
		t.Errorf("a read after the launches: %d available, want EC2's 2 (launches before a read are in it)", got)
	}
}
