package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
)

// LaunchTemplateUnusedTTL is how long a launch template nodewright created
// is kept without use. Karpenter deletes its templates when its in-memory
// cache evicts them, one minute after their last use (aws:
// pkg/providers/launchtemplate DefaultTTL; karpenter-spec section 4 step 6,
// 11.3 item 15). Lambdas keep no cache, so garbage collection judges use
// from EC2 instead, over a longer window: a template younger than this, or
// that an instance launched less than this ago came from, is kept. Ten
// minutes spans several garbage-collection runs and any launch retry, while
// a template is re-created on demand in one call, so a longer life costs
// nothing but the template.
const LaunchTemplateUnusedTTL = 10 * time.Minute

// tagLaunchTemplateID is the tag EC2 puts on every instance launched from a
// launch template (EC2 User Guide, "Launch an instance from a launch
// template"): the template's ID.
const tagLaunchTemplateID = "aws:ec2launchtemplate:id"

// TemplateCleanupReason says why a launch template is deleted.
type TemplateCleanupReason string

// Launch-template cleanup reasons.
const (
	// TemplateUnused: no launch used it for LaunchTemplateUnusedTTL.
	TemplateUnused TemplateCleanupReason = "unused"
	// TemplateNodeClassDeleted: its EC2NodeClass is gone from the synced
	// configuration (Karpenter deletes a class's templates with it).
	TemplateNodeClassDeleted TemplateCleanupReason = "nodeclass_deleted"
)

// TemplateCleanup is one launch template to delete.
type TemplateCleanup struct {
	launch.ClusterTemplate
	Reason TemplateCleanupReason `json:"reason"`
}

// TemplateGCInput is everything launch-template collection decides on.
type TemplateGCInput struct {
	Now time.Time
	// Cluster is the EKS cluster name: a template is deleted only when it
	// carries nodewright's ownership mark for it (v1.OwnedBy).
	Cluster string
	// Templates are the cluster's launch templates (found by the cluster
	// tags; a template without the ownership mark is left alone).
	Templates []launch.ClusterTemplate
	// NodeClasses are the names of the EC2NodeClasses in the synced
	// configuration.
	NodeClasses []string
	// NodeClaims are all NodeClaims: those not launched yet protect their
	// class's templates.
	NodeClaims []v1.NodeClaim
	// Instances are the cluster's instances with their tags and launch
	// times.
	Instances []launch.Instance
}

// PlanLaunchTemplateCleanup decides which launch templates to delete
// (karpenter-spec section 4 step 6, 5.4, 11.3 item 15), among those
// carrying nodewright's ownership mark for in.Cluster (any other template,
// Karpenter's say, is never deleted):
//   - every template of an EC2NodeClass no longer in the configuration;
//   - a template created LaunchTemplateUnusedTTL or more ago that no
//     instance launched less than LaunchTemplateUnusedTTL ago carries as its
//     aws:ec2launchtemplate:id (an instance without a launch time counts as
//     recent), and whose EC2NodeClass has no NodeClaim in flight (not
//     launched and not being deleted: its launch may be about to use any of
//     the class's templates).
//
// A launch that still loses the race (it found the template just before the
// deletion) gets InvalidLaunchTemplateName.NotFoundException from
// CreateFleet, and shared/aws/fleet ensures the templates again and retries
// once, as Karpenter does. The result is sorted by name. It reads nothing
// but in.
func PlanLaunchTemplateCleanup(in TemplateGCInput) []TemplateCleanup {
	classes := map[string]bool{}
	for _, n := range in.NodeClasses {
		classes[n] = true
	}
	inFlight := map[string]bool{}
	for i := range in.NodeClaims {
		c := &in.NodeClaims[i]
		if c.DeletionTimestamp == nil && c.Status.ProviderID == "" && c.Spec.NodeClassRef != nil {
			inFlight[c.Spec.NodeClassRef.Name] = true
		}
	}
	recentlyUsed := map[string]bool{}
	for _, inst := range in.Instances {
		id := inst.Tags[tagLaunchTemplateID]
		if id != "" && (inst.LaunchTime.IsZero() || in.Now.Sub(inst.LaunchTime) < LaunchTemplateUnusedTTL) {
			recentlyUsed[id] = true
		}
	}
	var out []TemplateCleanup
	for _, t := range in.Templates {
		switch {
		case !v1.OwnedBy(t.Tags, in.Cluster):
		case t.NodeClass != "" && !classes[t.NodeClass]:
			out = append(out, TemplateCleanup{ClusterTemplate: t, Reason: TemplateNodeClassDeleted})
		case in.Now.Sub(t.CreateTime) < LaunchTemplateUnusedTTL, recentlyUsed[t.ID], inFlight[t.NodeClass]:
		default:
			out = append(out, TemplateCleanup{ClusterTemplate: t, Reason: TemplateUnused})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// templateStore lists and deletes the cluster's launch templates
// (shared/aws/nodeclass.Templates in production).
type templateStore interface {
	// ListLaunchTemplates returns all the cluster's launch templates; it
	// fails rather than return a partial list.
	ListLaunchTemplates(ctx context.Context) ([]launch.ClusterTemplate, error)
	// DeleteLaunchTemplate deletes one by ID; nil when it is already gone.
	DeleteLaunchTemplate(ctx context.Context, id string) error
}

// TemplateCollector deletes the cluster's unused launch templates. It holds
// no state and is safe for concurrent use.
type TemplateCollector struct {
	cluster   string
	templates templateStore
	config    configSource
	claims    gcClaimStore
	instances instanceProvider
}

// NewTemplateCollector returns a TemplateCollector for cluster, or an error
// naming a missing argument.
func NewTemplateCollector(cluster string, templates templateStore, config configSource, claims gcClaimStore, instances instanceProvider) (*TemplateCollector, error) {
	switch {
	case cluster == "":
		return nil, fmt.Errorf("template collector: cluster: %w", errMissing)
	case templates == nil:
		return nil, fmt.Errorf("template collector: templates: %w", errMissing)
	case config == nil:
		return nil, fmt.Errorf("template collector: config: %w", errMissing)
	case claims == nil:
		return nil, fmt.Errorf("template collector: claims: %w", errMissing)
	case instances == nil:
		return nil, fmt.Errorf("template collector: instances: %w", errMissing)
	}
	return &TemplateCollector{cluster: cluster, templates: templates, config: config, claims: claims, instances: instances}, nil
}

// TemplateCleanupResult is one executed TemplateCleanup.
type TemplateCleanupResult struct {
	TemplateCleanup
	// Err is the deletion's failure, nil when it is done.
	Err error `json:"-"`
}

// CollectLaunchTemplates lists the launch templates first, then the
// configuration, NodeClaims and instances (so a launch that started before
// the templates were listed is seen), decides with
// PlanLaunchTemplateCleanup and deletes each template. It returns the
// results and, when a read failed (nothing is deleted then) or a deletion
// failed, an error.
func (c *TemplateCollector) CollectLaunchTemplates(ctx context.Context, now time.Time) ([]TemplateCleanupResult, error) {
	templates, err := c.templates.ListLaunchTemplates(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect launch templates: list templates: %w", err)
	}
	if len(templates) == 0 {
		return nil, nil
	}
	_, classes, err := c.config.ClusterConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect launch templates: read cluster config: %w", err)
	}
	claims, err := c.claims.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect launch templates: list nodeclaims: %w", err)
	}
	instances, err := c.instances.ListInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect launch templates: list instances: %w", err)
	}
	names := make([]string, len(classes))
	for i, nc := range classes {
		names[i] = nc.Name
	}
	plan := PlanLaunchTemplateCleanup(TemplateGCInput{Now: now, Cluster: c.cluster, Templates: templates, NodeClasses: names, NodeClaims: claims, Instances: instances})
	results := make([]TemplateCleanupResult, len(plan))
	var errs []error
	for i, cl := range plan {
		results[i] = TemplateCleanupResult{TemplateCleanup: cl}
		if err := c.templates.DeleteLaunchTemplate(ctx, cl.ID); err != nil {
			results[i].Err = fmt.Errorf("%s: delete launch template %s: %w", cl.Reason, cl.Name, err)
			errs = append(errs, results[i].Err)
		}
	}
	if len(errs) > 0 {
		return results, fmt.Errorf("collect launch templates: %w", errors.Join(errs...))
	}
	return results, nil
}
