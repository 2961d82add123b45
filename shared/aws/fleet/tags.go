package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/shared/aws/awserr"
)

// TagAPI is the subset of the EC2 client Tagger calls (*ec2.Client).
type TagAPI interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
}

var _ TagAPI = (*ec2.Client)(nil)

// Tagger reads and adds the tags of existing instances: Karpenter's
// post-registration tagging (aws: pkg/controllers/nodeclaim/tagging;
// karpenter-spec §1.5). It holds no state and is safe for concurrent use.
type Tagger struct {
	api TagAPI
}

// NewTagger returns a Tagger calling api.
func NewTagger(api TagAPI) *Tagger { return &Tagger{api: api} }

// InstanceTags returns the tags of instance id (DescribeInstances). A
// missing or terminated instance is ErrNotFound (wrapped).
func (t *Tagger) InstanceTags(ctx context.Context, id string) (map[string]string, error) {
	inst, err := New(describeOnly{t.api}).Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return inst.Tags, nil
}

// AddTags adds tags to instance id with one CreateTags call (keys sorted);
// existing tags with the same keys are overwritten, as CreateTags does. No
// tags is no call. A missing instance is ErrNotFound (wrapped); other
// failures are the call's error, wrapped.
func (t *Tagger) AddTags(ctx context.Context, id string, tags map[string]string) error {
	if len(tags) == 0 {
		return nil
	}
	list := make([]ec2types.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		list = append(list, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	_, err := t.api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: list})
	if awserr.Classify(err) == awserr.NotFound {
		return fmt.Errorf("tag instance %s: %w", id, errors.Join(ErrNotFound, err))
	}
	if err != nil {
		return fmt.Errorf("tag instance %s: %w", id, err)
	}
	return nil
}

// describeOnly lets Client.Get run over a TagAPI: Get calls
// DescribeInstances only.
type describeOnly struct{ TagAPI }

func (describeOnly) CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return nil, errors.New("describeOnly: CreateFleet not available")
}

func (describeOnly) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return nil, errors.New("describeOnly: TerminateInstances not available")
}
