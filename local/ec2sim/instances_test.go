package ec2sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/aws/awserr"
)

// launch starts n instances of one type in one zone with instance tags and
// returns their IDs.
func (e *env) launch(t *testing.T, capacityType, instanceType, zone string, n int32, tags map[string]string) []string {
	t.Helper()
	if _, ok := e.sim.LaunchTemplate("amd64"); !ok {
		e.createLT(t, "amd64", e.al2023(t, "x86_64"), "")
	}
	in := fleetInput("amd64", capacityType, n, []string{instanceType}, []string{e.subnets()[zone]})
	var ts []ec2types.Tag
	for k, v := range tags {
		ts = append(ts, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	if len(ts) > 0 {
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: ts}}
	}
	out, err := e.ec2.CreateFleet(t.Context(), in)
	if err != nil {
		t.Fatalf("CreateFleet() error = %v", err)
	}
	ids := instanceIDs(out)
	if len(ids) != int(n) {
		t.Fatalf("launched %d instances, want %d (errors %v)", len(ids), n, fleetErrors(out))
	}
	return ids
}

func TestDescribeInstancesFilters(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	a := e.launch(t, "spot", "c5.large", "us-east-1a", 2, map[string]string{"karpenter.sh/nodepool": "alpha", "kubernetes.io/cluster/nodewright": "owned"})
	b := e.launch(t, "on-demand", "m5.large", "us-east-1b", 1, map[string]string{"karpenter.sh/nodepool": "beta", "kubernetes.io/cluster/nodewright": "owned"})
	c := e.launch(t, "on-demand", "m5.large", "us-east-1c", 1, nil)
	if _, err := e.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: c}); err != nil {
		t.Fatalf("TerminateInstances() error = %v", err)
	}
	all := []string{a[0], a[1], b[0], c[0]}

	tests := []struct {
		name    string
		filters []ec2types.Filter
		ids     []string
		want    []string
	}{
		{name: "no filter lists every instance, terminated ones included", want: all},
		{name: "tag:K=V", filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/nodepool"), Values: []string{"alpha"}}}, want: a},
		{name: "tag values are ORed", filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/nodepool"), Values: []string{"alpha", "beta"}}}, want: append(append([]string{}, a...), b...)},
		{name: "tag value wildcard", filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/nodepool"), Values: []string{"b*"}}}, want: b},
		{name: "tag-key", filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"kubernetes.io/cluster/nodewright"}}}, want: append(append([]string{}, a...), b...)},
		{name: "instance-state-name excludes terminated instances as Karpenter's garbage collection asks",
			filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}}},
			want:    []string{a[0], a[1], b[0]}},
		{name: "instance-state-name terminated", filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"terminated"}}}, want: c},
		{name: "filters are ANDed", filters: []ec2types.Filter{
			{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/nodepool"}},
			{Name: aws.String("instance-type"), Values: []string{"m5.large"}}}, want: b},
		{name: "instance-id filter", filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: []string{a[1]}}}, want: a[1:]},
		{name: "instance-lifecycle spot", filters: []ec2types.Filter{{Name: aws.String("instance-lifecycle"), Values: []string{"spot"}}}, want: a},
		{name: "availability-zone", filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1b"}}}, want: b},
		{name: "instance IDs and filters together", ids: []string{a[0], b[0]}, filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/nodepool"), Values: []string{"beta"}}}, want: b},
		{name: "a filter matching nothing", filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/nodepool"), Values: []string{"gamma"}}}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: tt.ids, Filters: tt.filters})
			if err != nil {
				t.Fatalf("DescribeInstances() error = %v", err)
			}
			var got []string
			for _, r := range out.Reservations {
				for _, in := range r.Instances {
					got = append(got, aws.ToString(in.InstanceId))
				}
			}
			if diff := cmp.Diff(sorted(tt.want), sorted(got)); diff != "" {
				t.Errorf("instances mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeInstancesErrors(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	ids := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)
	tests := []struct {
		name     string
		input    *ec2.DescribeInstancesInput
		wantCode string
	}{
		{name: "unknown instance ID", input: &ec2.DescribeInstancesInput{InstanceIds: []string{ids[0], "i-0123456789abcdef0"}}, wantCode: "InvalidInstanceID.NotFound"},
		{name: "malformed instance ID", input: &ec2.DescribeInstancesInput{InstanceIds: []string{"node-1"}}, wantCode: "InvalidInstanceID.Malformed"},
		{name: "unknown filter name", input: &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("nodepool"), Values: []string{"a"}}}}, wantCode: "InvalidParameterValue"},
		{name: "instance IDs with MaxResults", input: &ec2.DescribeInstancesInput{InstanceIds: ids, MaxResults: aws.Int32(5)}, wantCode: "InvalidParameterCombination"},
		{name: "MaxResults below 5", input: &ec2.DescribeInstancesInput{MaxResults: aws.Int32(2)}, wantCode: "InvalidParameterValue"},
		{name: "foreign pagination token", input: &ec2.DescribeInstancesInput{NextToken: aws.String("bm90LWEtdG9rZW4")}, wantCode: "InvalidPaginationToken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ec2.DescribeInstances(t.Context(), tt.input)
			if code, status := apiCode(err); code != tt.wantCode || status != 400 {
				t.Errorf("DescribeInstances() error = %v; want %s (400)", err, tt.wantCode)
			}
		})
	}
}

func TestDescribeInstancesPaginates(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	want := e.launch(t, "on-demand", "c5.large", "us-east-1a", 7, nil)
	p := ec2.NewDescribeInstancesPaginator(e.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	var got []string
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("NextPage() error = %v", err)
		}
		pages++
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				got = append(got, aws.ToString(in.InstanceId))
			}
		}
	}
	if pages != 2 {
		t.Errorf("pages = %d, want 2", pages)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paginated instances mismatch (-want +got):\n%s", diff)
	}
}

func TestTerminateInstances(t *testing.T) {
	e := newEnv(t, ec2sim.Options{ShutdownDelay: 30 * time.Second})
	ids := e.launch(t, "on-demand", "c5.large", "us-east-1a", 2, nil)
	freeBefore := e.sim.Network().Subnets[0].AvailableIPs

	type change struct{ ID, Previous, Current string }
	terminate := func(ids ...string) []change {
		t.Helper()
		out, err := e.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: ids})
		if err != nil {
			t.Fatalf("TerminateInstances(%v) error = %v", ids, err)
		}
		var got []change
		for _, c := range out.TerminatingInstances {
			got = append(got, change{aws.ToString(c.InstanceId), string(c.PreviousState.Name), string(c.CurrentState.Name)})
		}
		return got
	}

	steps := []struct {
		name    string
		advance time.Duration
		ids     []string
		want    []change
		state   string
	}{
		{name: "a running instance starts shutting down", ids: ids[:1], want: []change{{ids[0], "running", "shutting-down"}}, state: "shutting-down"},
		{name: "terminating a shutting-down instance changes nothing", advance: 10 * time.Second, ids: ids[:1], want: []change{{ids[0], "shutting-down", "shutting-down"}}, state: "shutting-down"},
		{name: "after the shutdown delay it is terminated and terminating it again is a no-op", advance: 20 * time.Second, ids: ids, want: []change{{ids[0], "terminated", "terminated"}, {ids[1], "running", "shutting-down"}}, state: "terminated"},
	}
	for _, st := range steps {
		e.clock.Advance(st.advance)
		if diff := cmp.Diff(st.want, terminate(st.ids...)); diff != "" {
			t.Errorf("%s: state changes mismatch (-want +got):\n%s", st.name, diff)
		}
		if got := e.stateOf(t, ids[0]); got != st.state {
			t.Errorf("%s: state = %s, want %s", st.name, got, st.state)
		}
	}
	got := e.describe(t, ids[0])[ids[0]]
	if got.StateReason == nil || aws.ToString(got.StateReason.Code) != "Client.UserInitiatedShutdown" {
		t.Errorf("StateReason = %+v, want Client.UserInitiatedShutdown", got.StateReason)
	}
	e.clock.Advance(30 * time.Second)
	if free := e.sim.Network().Subnets[0].AvailableIPs; free != freeBefore+2 {
		t.Errorf("subnet free addresses = %d after terminating both, want %d", free, freeBefore+2)
	}

	e.clock.Advance(ec2sim.TerminatedVisibility)
	_, err := e.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	if awserr.Classify(err) != awserr.NotFound {
		t.Errorf("DescribeInstances() an hour after termination: error = %v, want NotFound", err)
	}
	_, err = e.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	if code, _ := apiCode(err); code != "InvalidInstanceID.NotFound" || awserr.Classify(err) != awserr.NotFound {
		t.Errorf("TerminateInstances() of a forgotten instance: error = %v, want InvalidInstanceID.NotFound", err)
	}
}

func TestTerminateInstancesIsAllOrNothing(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	ids := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)
	_, err := e.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{ids[0], "i-0123456789abcdef0"}})
	if code, _ := apiCode(err); code != "InvalidInstanceID.NotFound" {
		t.Fatalf("TerminateInstances() error = %v, want InvalidInstanceID.NotFound", err)
	}
	if got := e.stateOf(t, ids[0]); got != "running" {
		t.Errorf("state of the known instance = %s, want running", got)
	}
}

func TestBootDelay(t *testing.T) {
	e := newEnv(t, ec2sim.Options{BootDelay: 45 * time.Second})
	first := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	steps := []struct {
		advance time.Duration
		want    string
	}{{0, "pending"}, {44 * time.Second, "pending"}, {time.Second, "running"}}
	for _, st := range steps {
		e.clock.Advance(st.advance)
		if got := e.stateOf(t, first); got != st.want {
			t.Errorf("after %v more: state = %s, want %s", st.advance, got, st.want)
		}
	}
	e.sim.SetBootDelay(0)
	second := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	if got := e.stateOf(t, second); got != "running" {
		t.Errorf("with no boot delay: state = %s, want running", got)
	}
}

func TestSpotInterruption(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	spot := e.launch(t, "spot", "c5.large", "us-east-1a", 1, nil)[0]
	onDemand := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]

	warning, err := e.sim.InterruptSpot(spot)
	if err != nil {
		t.Fatalf("InterruptSpot() error = %v", err)
	}
	want := ec2sim.SpotInterruption{InstanceID: spot, InstanceType: "c5.large", Zone: "us-east-1a", WarningTime: epoch,
		ReclaimTime: epoch.Add(2 * time.Minute), Action: "terminate"}
	if diff := cmp.Diff(want, warning); diff != "" {
		t.Errorf("InterruptSpot() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ec2sim.SpotInterruption{want}, e.sim.SpotInterruptions()); diff != "" {
		t.Errorf("SpotInterruptions() mismatch (-want +got):\n%s", diff)
	}
	e.clock.Advance(2*time.Minute - time.Second)
	if got := e.stateOf(t, spot); got != "running" {
		t.Errorf("1s before reclaim: state = %s, want running", got)
	}
	e.clock.Advance(time.Second)
	got := e.describe(t, spot)[spot]
	if got.State.Name != ec2types.InstanceStateNameTerminated || aws.ToString(got.StateReason.Code) != "Server.SpotInstanceTermination" {
		t.Errorf("at reclaim: state %s, reason %+v; want terminated by Server.SpotInstanceTermination", got.State.Name, got.StateReason)
	}
	if _, err := e.sim.InterruptSpot(onDemand); err == nil {
		t.Error("InterruptSpot(on-demand instance) error = nil, want one")
	}
}

func TestFailInstance(t *testing.T) {
	e := newEnv(t, ec2sim.Options{BootDelay: time.Minute})
	id := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	if err := e.sim.FailInstance(id); err != nil {
		t.Fatalf("FailInstance() error = %v", err)
	}
	got := e.describe(t, id)[id]
	if got.State.Name != ec2types.InstanceStateNameTerminated || aws.ToString(got.StateReason.Code) != "Server.InternalError" {
		t.Errorf("failed instance: state %s, reason %+v; want terminated by Server.InternalError", got.State.Name, got.StateReason)
	}
	if err := e.sim.FailInstance(id); err == nil {
		t.Error("FailInstance() of a terminated instance error = nil, want one")
	}
}

func TestCreateTags(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	id := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	snap, _ := e.sim.Instance(id)
	_, err := e.ec2.CreateTags(t.Context(), &ec2.CreateTagsInput{
		Resources: []string{id, snap.Volumes[0].ID},
		Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("ip-10-0-0-4.ec2.internal")},
			{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("default-x7k2p")}},
	})
	if err != nil {
		t.Fatalf("CreateTags() error = %v", err)
	}
	snap, _ = e.sim.Instance(id)
	if snap.Tags["Name"] != "ip-10-0-0-4.ec2.internal" || snap.Tags["karpenter.sh/nodeclaim"] != "default-x7k2p" ||
		snap.Volumes[0].Tags["karpenter.sh/nodeclaim"] != "default-x7k2p" {
		t.Errorf("tags after CreateTags: instance %v, volume %v", snap.Tags, snap.Volumes[0].Tags)
	}

	errs := []struct {
		name      string
		resources []string
		key       string
		wantCode  string
	}{
		{name: "unknown instance", resources: []string{id, "i-0123456789abcdef0"}, key: "k", wantCode: "InvalidInstanceID.NotFound"},
		{name: "unknown resource kind", resources: []string{"eni-12345678"}, key: "k", wantCode: "InvalidID"},
		{name: "reserved aws: prefix", resources: []string{id}, key: "aws:cloudformation:stack", wantCode: "InvalidParameterValue"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ec2.CreateTags(t.Context(), &ec2.CreateTagsInput{Resources: tt.resources,
				Tags: []ec2types.Tag{{Key: aws.String(tt.key), Value: aws.String("v")}}})
			if code, _ := apiCode(err); code != tt.wantCode {
				t.Errorf("CreateTags() error = %v, want %s", err, tt.wantCode)
			}
			if snap, _ := e.sim.Instance(id); snap.Tags[tt.key] != "" {
				t.Errorf("a failed CreateTags still tagged the instance with %s", tt.key)
			}
		})
	}
}

// A released address goes back to the pool but is handed out again only
// once the never-used ones run out, so a Node name (the private DNS name)
// is not reused minutes after its node went away.
func TestReleasedAddressesAreNotReusedWhileFreshOnesRemain(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	sn := e.subnets()["us-east-1a"]
	first := e.launch(t, "on-demand", "c5.large", "us-east-1a", 2, nil)
	firstIP, _ := e.sim.Instance(first[0])
	if _, err := e.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: first[:1]}); err != nil {
		t.Fatalf("TerminateInstances() error = %v", err)
	}
	next := e.launch(t, "on-demand", "c5.large", "us-east-1a", 1, nil)[0]
	got, _ := e.sim.Instance(next)
	second, _ := e.sim.Instance(first[1])
	if got.PrivateIP == firstIP.PrivateIP || got.PrivateIP == second.PrivateIP {
		t.Errorf("new instance IP = %s, want a never-used one (released %s, in use %s)", got.PrivateIP, firstIP.PrivateIP, second.PrivateIP)
	}
	if err := e.sim.SetAvailableIPs(sn, 0); err != nil {
		t.Fatalf("SetAvailableIPs() error = %v", err)
	}
	out, err := e.ec2.CreateFleet(t.Context(), fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{sn}))
	if err != nil {
		t.Fatalf("CreateFleet() error = %v", err)
	}
	if diff := cmp.Diff([]string{"InsufficientFreeAddressesInSubnet c5.large/us-east-1a/on-demand"}, fleetErrors(out)); diff != "" {
		t.Errorf("fleet errors mismatch (-want +got):\n%s", diff)
	}
	if err := e.sim.SetAvailableIPs(sn, 1<<20); err == nil {
		t.Error("SetAvailableIPs() above the subnet size: error = nil, want one")
	}
}

func TestConcurrentCallsKeepOneInstancePerToken(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "amd64", e.al2023(t, "x86_64"), "")
	sn := e.subnets()["us-east-1a"]
	const workers, perWorker = 4, 10
	errs := make(chan error, workers*perWorker*2)
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range perWorker {
				in := fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{sn})
				// Two workers share each token: the second call must replay.
				in.ClientToken = aws.String(fmt.Sprintf("token-%d-%d", w/2, i))
				if _, err := e.ec2.CreateFleet(t.Context(), in); err != nil {
					errs <- err
				}
				if _, err := e.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call error = %v", err)
	}
	if got, want := len(e.sim.Instances()), workers/2*perWorker; got != want {
		t.Errorf("instances = %d, want %d (one per distinct token)", got, want)
	}
}
