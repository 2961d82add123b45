package provisioning

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
)

// profileStore lists and deletes the cluster's instance profiles
// (shared/aws/iamprofile.Client in production).
type profileStore interface {
	// List returns every profile under the cluster's path, with tags and
	// roles; it fails rather than return a partial list.
	List(ctx context.Context) ([]launch.InstanceProfile, error)
	// Delete removes roles from the profile, then deletes it; nil when
	// it is already gone.
	Delete(ctx context.Context, name string, roles []string) error
}

// ProfileCollector deletes the instance profiles nodewright made for
// EC2NodeClasses that are gone, or for a role a class no longer names
// (launch.PlanInstanceProfileCleanup). It holds no state and is safe for
// concurrent use.
type ProfileCollector struct {
	cluster, region string
	profiles        profileStore
	config          configSource
	claims          gcClaimStore
}

// NewProfileCollector returns a ProfileCollector, or an error naming a
// missing argument.
func NewProfileCollector(cluster, region string, profiles profileStore, config configSource, claims gcClaimStore) (*ProfileCollector, error) {
	switch {
	case cluster == "":
		return nil, fmt.Errorf("profile collector: cluster: %w", errMissing)
	case region == "":
		return nil, fmt.Errorf("profile collector: region: %w", errMissing)
	case profiles == nil:
		return nil, fmt.Errorf("profile collector: profiles: %w", errMissing)
	case config == nil:
		return nil, fmt.Errorf("profile collector: config: %w", errMissing)
	case claims == nil:
		return nil, fmt.Errorf("profile collector: claims: %w", errMissing)
	}
	return &ProfileCollector{cluster: cluster, region: region, profiles: profiles, config: config, claims: claims}, nil
}

// ProfileCleanupResult is one executed launch.ProfileCleanup.
type ProfileCleanupResult struct {
	launch.ProfileCleanup
	// Err is the deletion's failure, nil when it is done.
	Err error `json:"-"`
}

// CollectInstanceProfiles lists the profiles first, then the
// configuration and the NodeClaims (so a profile made for a class that
// was just applied is seen with its class), plans and deletes. It returns
// the results and, when a read failed (nothing is deleted then) or a
// deletion failed, an error.
func (c *ProfileCollector) CollectInstanceProfiles(ctx context.Context, now time.Time) ([]ProfileCleanupResult, error) {
	profiles, err := c.profiles.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect instance profiles: %w", err)
	}
	if len(profiles) == 0 {
		return nil, nil
	}
	_, classes, err := c.config.ClusterConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect instance profiles: read cluster config: %w", err)
	}
	claims, err := c.claims.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect instance profiles: list nodeclaims: %w", err)
	}
	var inUse []string
	for _, cl := range claims {
		if name := cl.Annotations[v1.AnnotationInstanceProfileName]; name != "" {
			inUse = append(inUse, name)
		}
	}
	plan := launch.PlanInstanceProfileCleanup(launch.ProfileGCInput{Now: now, Cluster: c.cluster, Region: c.region, Profiles: profiles, NodeClasses: classes, InUse: inUse})
	results := make([]ProfileCleanupResult, len(plan))
	var errs []error
	for i, p := range plan {
		results[i] = ProfileCleanupResult{ProfileCleanup: p}
		if err := c.profiles.Delete(ctx, p.Name, p.Roles); err != nil {
			results[i].Err = fmt.Errorf("%s: %w", p.Reason, err)
			errs = append(errs, results[i].Err)
		}
	}
	return results, errors.Join(errs...)
}
