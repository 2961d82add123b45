package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/launch"
)

// ErrNotFound is returned (wrapped) by Get when the instance does not exist
// or has terminated; it matches v1.ErrNotFound too.
var ErrNotFound = fmt.Errorf("instance %w", v1.ErrNotFound)

// terminateBatch bounds the instance IDs of one TerminateInstances call.
const terminateBatch = 100

// Terminate terminates the instances. It is idempotent: an instance that
// does not exist (InvalidInstanceID.NotFound) or is already terminating
// counts as terminated, so Terminate returns nil for it. IDs are sent in
// batches of 100; when a batch fails because some ID is not found, its IDs
// are retried one by one. Other errors are returned wrapped, after every
// batch has been tried.
func (c *Client) Terminate(ctx context.Context, ids ...string) error {
	var errs []error
	for batch := range slices.Chunk(slices.Compact(slices.Sorted(slices.Values(ids))), terminateBatch) {
		err := c.terminate(ctx, batch)
		if err == nil {
			continue
		}
		if awserr.Classify(err) != awserr.NotFound || len(batch) == 1 {
			if awserr.Classify(err) != awserr.NotFound {
				errs = append(errs, err)
			}
			continue
		}
		for _, id := range batch {
			if err := c.terminate(ctx, []string{id}); err != nil && awserr.Classify(err) != awserr.NotFound {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (c *Client) terminate(ctx context.Context, ids []string) error {
	if _, err := c.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
		return fmt.Errorf("terminate instances %v: %w", ids, err)
	}
	return nil
}

// liveStates are the states List reports (karpenter-spec §5.4).
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// List returns the cluster's instances: those tagged
// eks:eks-cluster-name=<cluster> with a karpenter.sh/nodepool and a
// karpenter.k8s.aws/ec2nodeclass tag, in a state other than terminated
// (aws: pkg/controllers/nodeclaim/garbagecollection; karpenter-spec §5.4).
// It follows NextToken through every page and returns the instances sorted
// by ID.
func (c *Client) List(ctx context.Context, cluster string) ([]launch.Instance, error) {
	if cluster == "" {
		return nil, errors.New("list instances: cluster name: required")
	}
	in := &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + v1.TagKeyEKSClusterName), Values: []string{cluster}},
			{Name: aws.String("tag-key"), Values: []string{v1.TagKeyNodePool}},
			{Name: aws.String("tag-key"), Values: []string{v1.TagKeyEC2NodeClass}},
			{Name: aws.String("instance-state-name"), Values: liveStates},
		},
	}
	var out []launch.Instance
	for {
		page, err := c.api.DescribeInstances(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list instances of cluster %s: %w", cluster, err)
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				out = append(out, instance(&r.Instances[i]))
			}
		}
		if aws.ToString(page.NextToken) == "" {
			break
		}
		in.NextToken = page.NextToken
	}
	slices.SortFunc(out, func(a, b launch.Instance) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return slices.CompactFunc(out, func(a, b launch.Instance) bool { return a.ID == b.ID }), nil
}

// Get returns one instance. A missing or terminated instance is ErrNotFound
// (wrapped), as Karpenter's Get treats both.
func (c *Client) Get(ctx context.Context, id string) (launch.Instance, error) {
	out, err := c.api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if awserr.Classify(err) == awserr.NotFound {
		return launch.Instance{}, fmt.Errorf("get instance %s: %w", id, errors.Join(ErrNotFound, err))
	}
	if err != nil {
		return launch.Instance{}, fmt.Errorf("get instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for i := range r.Instances {
			inst := instance(&r.Instances[i])
			if inst.ID != id {
				continue
			}
			if inst.State == string(ec2types.InstanceStateNameTerminated) {
				return launch.Instance{}, fmt.Errorf("get instance %s: terminated: %w", id, ErrNotFound)
			}
			return inst, nil
		}
	}
	return launch.Instance{}, fmt.Errorf("get instance %s: %w", id, ErrNotFound)
}

// instance converts a DescribeInstances entry.
func instance(in *ec2types.Instance) launch.Instance {
	out := launch.Instance{
		ID:           aws.ToString(in.InstanceId),
		InstanceType: string(in.InstanceType),
		SubnetID:     aws.ToString(in.SubnetId),
		ImageID:      aws.ToString(in.ImageId),
		CapacityType: v1.CapacityTypeOnDemand,
		LaunchTime:   aws.ToTime(in.LaunchTime),
		Tags:         map[string]string{},
	}
	if in.Placement != nil {
		out.Zone = aws.ToString(in.Placement.AvailabilityZone)
		out.ZoneID = aws.ToString(in.Placement.AvailabilityZoneId)
		out.Tenancy = string(in.Placement.Tenancy)
	}
	if in.State != nil {
		out.State = string(in.State.Name)
	}
	if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		out.CapacityType = v1.CapacityTypeSpot
	}
	if id := aws.ToString(in.CapacityReservationId); id != "" {
		out.CapacityType, out.ReservationID = v1.CapacityTypeReserved, id
	}
	for _, t := range in.Tags {
		out.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}
