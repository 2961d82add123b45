package nodeclass

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/launch"
)

// TemplateAPI is the subset of the EC2 client Templates calls
// (*ec2.Client).
type TemplateAPI interface {
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
}

var _ TemplateAPI = (*ec2.Client)(nil)

// Templates lists and deletes the launch templates EnsureLaunchTemplates
// created for a cluster, for their garbage collection (Karpenter deletes
// its templates when its cache evicts them and at EC2NodeClass deletion;
// karpenter-spec §4 step 6, §5.4). It holds no state and is safe for
// concurrent use.
type Templates struct {
	api TemplateAPI
}

// NewTemplates returns a Templates calling api.
func NewTemplates(api TemplateAPI) *Templates { return &Templates{api: api} }

// List returns the cluster's launch templates: named NamePrefix..., tagged
// kubernetes.io/cluster/<cluster>=owned and eks:eks-cluster-name=<cluster>
// with a karpenter.sh/nodepool tag (the tags EnsureLaunchTemplates sets and
// the DeleteLaunchTemplate grant is conditioned on), following NextToken
// through every page, in EC2's order. Errors: an empty cluster, or the
// call's error, wrapped.
func (t *Templates) List(ctx context.Context, cluster string) ([]launch.ClusterTemplate, error) {
	if cluster == "" {
		return nil, fmt.Errorf("list launch templates: cluster name: required")
	}
	in := &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + v1.TagKeyClusterPrefix + cluster), Values: []string{"owned"}},
		{Name: aws.String("tag:" + v1.TagKeyEKSClusterName), Values: []string{cluster}},
		{Name: aws.String("tag-key"), Values: []string{v1.TagKeyNodePool}},
	}}
	var out []launch.ClusterTemplate
	for {
		page, err := t.api.DescribeLaunchTemplates(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list launch templates of cluster %s: %w", cluster, err)
		}
		for _, lt := range page.LaunchTemplates {
			name := aws.ToString(lt.LaunchTemplateName)
			if !strings.HasPrefix(name, NamePrefix) {
				continue
			}
			info := launch.ClusterTemplate{ID: aws.ToString(lt.LaunchTemplateId), Name: name, CreateTime: aws.ToTime(lt.CreateTime), Tags: map[string]string{}}
			for _, tag := range lt.Tags {
				info.Tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
			info.NodeClass = info.Tags[v1.TagKeyEC2NodeClass]
			out = append(out, info)
		}
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// Delete deletes the launch template with the given ID. A template
// already gone is not an error. Other failures are the call's error,
// wrapped.
func (t *Templates) Delete(ctx context.Context, id string) error {
	_, err := t.api.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
	if err != nil && awserr.Classify(err) != awserr.NotFound {
		return fmt.Errorf("delete launch template %s: %w", id, err)
	}
	return nil
}
