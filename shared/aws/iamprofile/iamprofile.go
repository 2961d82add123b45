// Package iamprofile creates, finds and deletes the instance profiles
// nodewright makes for an EC2NodeClass's spec.role, through IAM, as
// Karpenter's instance-profile provider does (karpenter-spec §7): named,
// placed and tagged by shared/launch (InstanceProfileName,
// InstanceProfilePath, InstanceProfileTags), holding the class's one role.
// It acts only on profiles under nodewright's path that carry the
// cluster's ownership mark.
package iamprofile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/launch"
)

// API is the subset of the IAM client Client calls (*iam.Client).
type API interface {
	GetRole(context.Context, *iam.GetRoleInput, ...func(*iam.Options)) (*iam.GetRoleOutput, error)
	GetInstanceProfile(context.Context, *iam.GetInstanceProfileInput, ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(context.Context, *iam.CreateInstanceProfileInput, ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	TagInstanceProfile(context.Context, *iam.TagInstanceProfileInput, ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error)
	AddRoleToInstanceProfile(context.Context, *iam.AddRoleToInstanceProfileInput, ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(context.Context, *iam.RemoveRoleFromInstanceProfileInput, ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(context.Context, *iam.DeleteInstanceProfileInput, ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
	ListInstanceProfiles(context.Context, *iam.ListInstanceProfilesInput, ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
}

var _ API = (*iam.Client)(nil)

// Errors of Ensure that the class's conditions report (InstanceProfileReady
// False) rather than retry.
var (
	// ErrRoleNotAllowed: spec.role is not among the deployment's node
	// roles (launch.NodeRoles).
	ErrRoleNotAllowed = errors.New("role not allowed")
	// ErrRoleNotFound: IAM has no role of that name.
	ErrRoleNotFound = errors.New("role not found")
	// ErrNotOwned: a profile of the name exists without the cluster's
	// ownership mark or under another path; nodewright leaves it alone.
	ErrNotOwned = errors.New("instance profile not owned by nodewright")
)

// Client manages one cluster's instance profiles in one region. It holds
// no state and is safe for concurrent use.
type Client struct {
	api             API
	cluster, region string
	roles           launch.NodeRoles
}

// New returns a Client for cluster in region allowing roles.
func New(api API, cluster, region string, roles launch.NodeRoles) *Client {
	return &Client{api: api, cluster: cluster, region: region, roles: roles}
}

// Ensure returns the name of class nc's instance profile for nc.Spec.Role,
// creating it (path, tags), tagging it and adding the role when needed; a
// profile another caller made meanwhile is found (EntityAlreadyExists,
// LimitExceeded are not failures). Errors: ErrRoleNotAllowed,
// ErrRoleNotFound or ErrNotOwned (wrapped, naming spec.role or the
// profile); otherwise the IAM call's error, wrapped.
func (c *Client) Ensure(ctx context.Context, nc v1.EC2NodeClass) (string, error) {
	role := nc.Spec.Role
	got, err := c.api.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	if awserr.Classify(err) == awserr.NotFound {
		return "", fmt.Errorf("spec.role %q: %w in IAM", role, ErrRoleNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get role %s: %w", role, err)
	}
	if arn := aws.ToString(got.Role.Arn); !c.roles.Allows(arn) {
		return "", fmt.Errorf("spec.role %q (%s): %w; the deployment allows %s", role, arn, ErrRoleNotAllowed, c.roles)
	}
	name := launch.InstanceProfileName(c.cluster, c.region, string(nc.UID), role)
	path := launch.InstanceProfilePath(c.region, c.cluster, string(nc.UID))
	want := launch.InstanceProfileTags(c.cluster, c.region, nc)
	p, err := c.get(ctx, name)
	if awserr.Classify(err) == awserr.NotFound {
		out, cerr := c.api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name), Path: aws.String(path), Tags: iamTags(want),
		})
		switch {
		case cerr == nil:
			p, err = out.InstanceProfile, nil
		case awserr.Classify(cerr) == awserr.AlreadyExists:
			p, err = c.get(ctx, name)
		default:
			return "", fmt.Errorf("create instance profile %s: %w", name, cerr)
		}
	} else if err != nil {
		return "", err
	}
	if err != nil {
		return "", err
	}
	tags := tagMap(p.Tags)
	if aws.ToString(p.Path) != path || !v1.OwnedBy(tags, c.cluster) {
		return "", fmt.Errorf("instance profile %s (path %s): %w", name, aws.ToString(p.Path), ErrNotOwned)
	}
	if missing := missingTags(tags, want); len(missing) > 0 {
		if _, err := c.api.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: iamTags(missing)}); err != nil {
			return "", fmt.Errorf("tag instance profile %s: %w", name, err)
		}
	}
	if slices.ContainsFunc(p.Roles, func(r iamtypes.Role) bool { return aws.ToString(r.RoleName) == role }) {
		return name, nil
	}
	for _, r := range p.Roles {
		// The name holds the role, so another role here was put there by
		// hand; the profile is ours, so it is corrected.
		if _, err := c.api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil && awserr.Classify(err) != awserr.NotFound {
			return "", fmt.Errorf("remove role %s from instance profile %s: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	_, err = c.api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
	if err != nil && awserr.Code(err) == "LimitExceeded" {
		// Another caller added a role meanwhile: fine when it is ours.
		if again, gerr := c.get(ctx, name); gerr == nil && slices.ContainsFunc(again.Roles, func(r iamtypes.Role) bool { return aws.ToString(r.RoleName) == role }) {
			return name, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("add role %s to instance profile %s: %w", role, name, err)
	}
	return name, nil
}

func (c *Client) get(ctx context.Context, name string) (*iamtypes.InstanceProfile, error) {
	out, err := c.api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("get instance profile %s: %w", name, err)
	}
	return out.InstanceProfile, nil
}

// List returns the cluster's profiles: those under
// launch.InstanceProfilePathPrefix (every page), each read with
// GetInstanceProfile for its tags (IAM's listing carries none). A profile
// deleted between the two calls is left out. Errors: the call's, wrapped.
func (c *Client) List(ctx context.Context) ([]launch.InstanceProfile, error) {
	in := &iam.ListInstanceProfilesInput{PathPrefix: aws.String(launch.InstanceProfilePathPrefix(c.region, c.cluster))}
	var out []launch.InstanceProfile
	for {
		page, err := c.api.ListInstanceProfiles(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list instance profiles of cluster %s: %w", c.cluster, err)
		}
		for _, listed := range page.InstanceProfiles {
			p, err := c.get(ctx, aws.ToString(listed.InstanceProfileName))
			if awserr.Classify(err) == awserr.NotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			ip := launch.InstanceProfile{Name: aws.ToString(p.InstanceProfileName), Path: aws.ToString(p.Path), Created: aws.ToTime(p.CreateDate), Tags: tagMap(p.Tags)}
			for _, r := range p.Roles {
				ip.Roles = append(ip.Roles, aws.ToString(r.RoleName))
			}
			out = append(out, ip)
		}
		if !page.IsTruncated {
			return out, nil
		}
		in.Marker = page.Marker
	}
}

// Delete removes roles from profile name, then deletes it. A role or
// profile already gone is not an error; others are the call's, wrapped.
func (c *Client) Delete(ctx context.Context, name string, roles []string) error {
	for _, r := range roles {
		_, err := c.api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(r)})
		if err != nil && awserr.Classify(err) != awserr.NotFound {
			return fmt.Errorf("remove role %s from instance profile %s: %w", r, name, err)
		}
	}
	_, err := c.api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil && awserr.Classify(err) != awserr.NotFound {
		return fmt.Errorf("delete instance profile %s: %w", name, err)
	}
	return nil
}

func iamTags(m map[string]string) []iamtypes.Tag {
	var out []iamtypes.Tag
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func tagMap(tags []iamtypes.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

// missingTags are the tags of want that have tags lacks or differs on
// (IAM tag keys compare case-insensitively).
func missingTags(tags, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		found := false
		for hk, hv := range tags {
			if strings.EqualFold(hk, k) && hv == v {
				found = true
			}
		}
		if !found {
			out[k] = v
		}
	}
	return out
}
