package nodeclass

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/requirements"
)

// image is a described image with the requirements it serves.
type image struct {
	id, name     string
	created      time.Time
	deprecated   bool
	requirements []v1.NodeSelectorRequirementWithMinValues
}

// AMIs resolves spec.amiSelectorTerms for a cluster at k8sVersion
// (karpenter-spec §9.1):
//   - an alias term reads the family's SSM parameters (amifamily
//     Alias.Parameters; missing parameters are skipped) and describes the
//     images they name; each image serves its parameter's requirements;
//   - other terms become one DescribeImages call each (id terms merged into
//     one image-id call; name with owners self and amazon unless owner is
//     set; tags as tag filters; owner alone as owners; ssmParameter read
//     through GetParameter), always with state=available and
//     IncludeDeprecated; such images serve their architecture only.
//
// For each distinct requirement set the best image is kept: not deprecated
// (deprecation time not after the Resolver's clock) before deprecated, then
// the newest creation date, then the greater name. The result is sorted
// newest first (then by name, descending, then ID), the order in which a
// launch picks the first AMI an instance type satisfies. Errors: an
// unsupported alias (wrapping amifamily.ErrUnsupportedAlias), a failed call
// (wrapped), or ErrAMIsNotFound when nothing matches.
func (r *Resolver) AMIs(ctx context.Context, nc *v1.EC2NodeClass, k8sVersion string) ([]v1.AMI, error) {
	var images []image
	var err error
	if alias := aliasTerm(nc); alias != "" {
		images, err = r.aliasImages(ctx, alias, k8sVersion)
	} else {
		images, err = r.termImages(ctx, nc)
	}
	if err != nil {
		return nil, fmt.Errorf("node class %s: %w", nc.Name, err)
	}
	best := map[string]image{}
	var order []string
	for _, img := range images {
		key := requirements.FromNodeSelector(img.requirements).Canonical()
		cur, ok := best[key]
		if !ok {
			order = append(order, key)
		}
		if !ok || better(img, cur) {
			best[key] = img
		}
	}
	if len(best) == 0 {
		return nil, fmt.Errorf("node class %s: %w for spec.amiSelectorTerms", nc.Name, ErrAMIsNotFound)
	}
	kept := make([]image, 0, len(best))
	for _, key := range order {
		kept = append(kept, best[key])
	}
	slices.SortStableFunc(kept, func(a, b image) int {
		return cmp.Or(b.created.Compare(a.created), strings.Compare(b.name, a.name), strings.Compare(a.id, b.id))
	})
	out := make([]v1.AMI, len(kept))
	for i, img := range kept {
		out[i] = v1.AMI{ID: img.id, Name: img.name, Deprecated: img.deprecated, Requirements: img.requirements}
	}
	return out, nil
}

// better reports whether a beats b: not deprecated first, then newer, then
// the greater name.
func better(a, b image) bool {
	if a.deprecated != b.deprecated {
		return !a.deprecated
	}
	if c := a.created.Compare(b.created); c != 0 {
		return c > 0
	}
	return a.name > b.name
}

func aliasTerm(nc *v1.EC2NodeClass) string {
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			return t.Alias
		}
	}
	return ""
}

// aliasImages resolves an alias through SSM and DescribeImages.
func (r *Resolver) aliasImages(ctx context.Context, aliasName, k8sVersion string) ([]image, error) {
	alias, err := amifamily.ParseAlias(aliasName)
	if err != nil {
		return nil, err
	}
	params, err := alias.Parameters(k8sVersion)
	if err != nil {
		return nil, err
	}
	idOf := map[string]string{} // parameter name -> image ID ("" when missing)
	var ids []string
	for _, p := range params {
		if _, done := idOf[p.Name]; done {
			continue
		}
		id, err := r.parameter(ctx, p.Name)
		if err != nil {
			return nil, err
		}
		idOf[p.Name] = id
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	described, err := r.describeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: ids}}})
	if err != nil {
		return nil, err
	}
	var out []image
	for _, p := range params {
		for _, img := range described {
			if img.id == idOf[p.Name] {
				img.requirements = p.Requirements
				out = append(out, img)
			}
		}
	}
	return out, nil
}

// parameter reads an SSM parameter holding an AMI ID; "" when the parameter
// does not exist or does not hold an AMI ID.
func (r *Resolver) parameter(ctx context.Context, name string) (string, error) {
	out, err := r.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if awserr.Classify(err) == awserr.NotFound {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get parameter %s: %w", name, err)
	}
	if out.Parameter == nil || !strings.HasPrefix(aws.ToString(out.Parameter.Value), "ami-") {
		return "", nil
	}
	return aws.ToString(out.Parameter.Value), nil
}

// termImages resolves non-alias terms.
func (r *Resolver) termImages(ctx context.Context, nc *v1.EC2NodeClass) ([]image, error) {
	var queries []*ec2.DescribeImagesInput
	var ids []string
	for _, t := range nc.Spec.AMISelectorTerms {
		switch {
		case t.ID != "":
			ids = append(ids, t.ID)
		case t.SSMParameter != "":
			id, err := r.parameter(ctx, t.SSMParameter)
			if err != nil {
				return nil, err
			}
			if id != "" {
				ids = append(ids, id)
			}
		default:
			in := &ec2.DescribeImagesInput{Filters: tagFilters(t.Tags)}
			if t.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
				in.Owners = []string{"self", "amazon"}
			}
			if t.Owner != "" {
				in.Owners = []string{t.Owner}
			}
			if len(in.Filters) == 0 && len(in.Owners) == 0 {
				continue
			}
			queries = append(queries, in)
		}
	}
	if len(ids) > 0 {
		queries = append(queries, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: ids}}})
	}
	var out []image
	for _, in := range queries {
		found, err := r.describeImages(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, img := range found {
			if !slices.ContainsFunc(out, func(o image) bool { return o.id == img.id }) {
				out = append(out, img)
			}
		}
	}
	return out, nil
}

// describeImages runs one DescribeImages query (state=available,
// IncludeDeprecated) through every page. Images of an architecture
// Kubernetes does not run get no requirements and are dropped.
func (r *Resolver) describeImages(ctx context.Context, in *ec2.DescribeImagesInput) ([]image, error) {
	in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.ImageStateAvailable)}})
	in.IncludeDeprecated = aws.Bool(true)
	now := r.now()
	var out []image
	for {
		page, err := r.ec2.DescribeImages(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("describe images: %w", err)
		}
		for _, img := range page.Images {
			reqs, ok := amifamily.ImageRequirements(string(img.Architecture))
			if !ok {
				continue
			}
			created, _ := time.Parse(time.RFC3339, aws.ToString(img.CreationDate))
			deprecated := false
			if dt := aws.ToString(img.DeprecationTime); dt != "" {
				if t, err := time.Parse(time.RFC3339, dt); err == nil && !t.After(now) {
					deprecated = true
				}
			}
			out = append(out, image{
				id: aws.ToString(img.ImageId), name: aws.ToString(img.Name), created: created,
				deprecated: deprecated, requirements: reqs,
			})
		}
		if aws.ToString(page.NextToken) == "" {
			break
		}
		in.NextToken = page.NextToken
	}
	return out, nil
}
