package provisioning

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

// launchState is what solving and launching read about the configuration:
// the usable NodePools, the resolved EC2NodeClasses and their instance
// types.
type launchState struct {
	// pools are the valid NodePools, defaulted.
	pools []v1.NodePool
	// classes holds the resolved, ready EC2NodeClasses referenced by a
	// valid pool, by name.
	classes map[string]*v1.EC2NodeClass
	// subnets holds each class's subnets with their free addresses.
	subnets map[string][]launch.Subnet
	// types holds each class's instance types, unavailable offerings
	// marked and types no resolved AMI can boot removed.
	types map[string][]*catalog.InstanceType
	// warnings name what was left out and why.
	warnings []string
	// leftOut holds why a referenced class was left out (not ready,
	// authorization denied), by name.
	leftOut map[string]string
	// noCompatible names the NodePools the solve found with no compatible
	// instance type (scheduling.Result.NoCompatibleInstanceTypes).
	noCompatible []string
	// dataSource says where the round's instance types, offerings and
	// prices came from (catalog.PriceSource.Description of the classes;
	// the live data is the region's, the same for every class).
	dataSource string
}

// classList returns the resolved classes sorted by name.
func (s *launchState) classList() []v1.EC2NodeClass {
	names := slices.Sorted(maps.Keys(s.classes))
	out := make([]v1.EC2NodeClass, len(names))
	for i, n := range names {
		out[i] = *s.classes[n]
	}
	return out
}

// loadLaunchState reads the configuration and the unavailable offerings and
// resolves every EC2NodeClass a valid NodePool refers to. Invalid or
// unresolvable objects are left out with a warning; only port failures of
// the configuration and the offering cache are errors.
func (p *Provisioner) loadLaunchState(ctx context.Context, now time.Time) (*launchState, error) {
	pools, classes, err := p.ports.Config.ClusterConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("read cluster config: %w", err)
	}
	unavailable, err := p.ports.Offerings.UnavailableOfferings(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("read unavailable offerings: %w", err)
	}
	fullSubnets := map[string]bool{}
	if p.ports.Subnets != nil {
		ids, err := p.ports.Subnets.UnavailableSubnets(ctx, now)
		if err != nil {
			return nil, fmt.Errorf("read unavailable subnets: %w", err)
		}
		for _, id := range ids {
			fullSubnets[id] = true
		}
	}
	st := &launchState{classes: map[string]*v1.EC2NodeClass{}, subnets: map[string][]launch.Subnet{}, types: map[string][]*catalog.InstanceType{}, leftOut: map[string]string{}}
	referenced := map[string]bool{}
	for _, np := range pools {
		np.SetDefaults()
		if err := np.Validate(); err != nil {
			st.warnings = append(st.warnings, fmt.Sprintf("NodePool %s left out: invalid: %v", np.Name, err))
			continue
		}
		st.pools = append(st.pools, np)
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			referenced[ref.Name] = true
		}
	}
	sort.Slice(classes, func(i, j int) bool { return classes[i].Name < classes[j].Name })
	live, warning := ReadLiveData(ctx, p.ports.EC2Data, now)
	if warning != "" {
		st.warnings = append(st.warnings, warning)
	}
	opts := LaunchOptions{Region: p.opts.Region, SpotPriceRatio: p.opts.SpotPriceRatio, ReservedENIs: p.opts.ReservedENIs,
		VMMemoryOverheadPercent: p.opts.VMMemoryOverheadPercent, Unavailable: unavailable, UnavailableSubnets: fullSubnets,
		Live: live, Now: now, LiveUnreadable: warning, IsolatedVPC: p.opts.IsolatedVPC, Auth: p.ports.Auth}
	for _, nc := range classes {
		if !referenced[nc.Name] {
			continue
		}
		lc, err := ResolveLaunchClass(ctx, p.ports.NodeClass, nc, opts)
		if lc.NodeClass.Name != "" && p.ports.ClassStatus != nil {
			p.ports.ClassStatus.RecordClassStatus(ctx, lc.NodeClass)
		}
		if err != nil {
			st.warnings = append(st.warnings, err.Error())
			continue
		}
		resolved := lc.NodeClass
		if c := meta.FindStatusCondition(resolved.Status.Conditions, v1.ConditionTypeReady); c != nil && c.Status == metav1.ConditionFalse {
			st.warnings = append(st.warnings, fmt.Sprintf("EC2NodeClass %s left out: not ready: %s: %s", nc.Name, c.Reason, c.Message))
			continue
		}
		if c, failed := validationFailed(resolved.Status.Conditions); failed {
			st.warnings = append(st.warnings, fmt.Sprintf("EC2NodeClass %s left out: not ready: %s: %s", nc.Name, c.Reason, c.Message))
			st.leftOut[nc.Name] = fmt.Sprintf("%s: %s", c.Reason, c.Message)
			continue
		}
		st.classes[nc.Name] = &resolved
		st.subnets[nc.Name] = lc.Subnets
		st.types[nc.Name] = lc.InstanceTypes
		if st.dataSource == "" {
			st.dataSource = lc.PriceSource.Description
			if w := FallbackWarning(lc.PriceSource); w != "" {
				st.warnings = append(st.warnings, w)
			}
		}
	}
	return st, nil
}

// LaunchOptions shape the instance types of a class (catalog.Options) and
// the offerings and subnets a launch may use.
type LaunchOptions struct {
	Region string
	// Zones, when set, limits offerings to these zones (catalog.Options).
	Zones                   []string
	SpotPriceRatio          float64
	ReservedENIs            int
	VMMemoryOverheadPercent *float64
	// Unavailable are the offerings the cache holds unavailable.
	Unavailable []catalog.OfferingKey
	// UnavailableSubnets are subnet IDs recently out of addresses (nil:
	// none known).
	UnavailableSubnets map[string]bool
	// Live is the region's live EC2 data (catalog.Options.Live); nil: the
	// embedded tables only. Now dates it (catalog.Options.Now).
	Live *catalog.LiveData
	Now  time.Time
	// LiveUnreadable is ReadLiveData's warning when the stored live data
	// could not be read ("" otherwise); IsolatedVPC is the deployment's
	// isolatedVPC option. Both feed the class's EC2DataLive condition
	// (EC2DataCondition).
	LiveUnreadable string
	IsolatedVPC    bool
	// ReservationCapacity is the class's reservation capacity
	// (ResolvedNodeClass.ReservationCapacity; ResolveLaunchClass sets it);
	// without it reserved offerings are unavailable.
	ReservationCapacity map[string]int
	// Auth, when set, computes a Ready class's ValidationSucceeded
	// condition from dry-run authorization checks (AuthChecker.Condition
	// at Now); nil: no such condition.
	Auth *AuthChecker
}

// LaunchClass is one EC2NodeClass resolved as launches see it.
type LaunchClass struct {
	// NodeClass is the class with its resolved status.
	NodeClass v1.EC2NodeClass
	// Subnets are its subnets, full ones marked.
	Subnets []launch.Subnet
	// InstanceTypes are its instance types: unavailable offerings marked
	// (zones whose subnets are all full included) and types no resolved
	// AMI can boot removed.
	InstanceTypes []*catalog.InstanceType
	// PriceSource says where the types, offerings and prices came from.
	PriceSource catalog.PriceSource
}

// ResolveLaunchClass is the one loader of an EC2NodeClass's launch state,
// used by provisioning, disruption (its replacements) and the CLI: defaults
// and validation, resolution through r, subnets marked, instance types
// resolved (catalog.Resolve) and filtered to those a resolved AMI boots.
// Readiness is the caller's decision (Ready=False classes still resolve).
// When live data is wired (opts.Live or opts.LiveUnreadable), the resolved
// status also carries the informational EC2DataLive condition
// (EC2DataCondition); it never affects Ready. With opts.Auth, a class
// that resolved Ready also carries ValidationSucceeded from its dry-run
// authorization checks (AuthChecker.Condition); a False one leaves the
// class out of launches, as Karpenter's Ready does.
// The error says why the class is left out ("EC2NodeClass <name> left out:
// invalid|resolve|instance types: ..."); with an instance-types error
// LaunchClass.NodeClass is still the resolved class.
func ResolveLaunchClass(ctx context.Context, r nodeClassResolver, nc v1.EC2NodeClass, opts LaunchOptions) (LaunchClass, error) {
	nc.SetDefaults()
	if err := nc.Validate(); err != nil {
		return LaunchClass{}, fmt.Errorf("EC2NodeClass %s left out: invalid: %w", nc.Name, err)
	}
	res, err := r.ResolveNodeClass(ctx, nc)
	if err != nil {
		return LaunchClass{}, fmt.Errorf("EC2NodeClass %s left out: resolve: %w", nc.Name, err)
	}
	resolved := res.NodeClass
	opts.ReservationCapacity = res.ReservationCapacity
	types, src, subnets, err := LaunchTypes(&resolved, res.Subnets, opts)
	if err != nil {
		return LaunchClass{NodeClass: resolved}, fmt.Errorf("EC2NodeClass %s left out: instance types: %w", nc.Name, err)
	}
	if c, ok := EC2DataCondition(src, opts.LiveUnreadable, opts.IsolatedVPC, resolved.Generation); ok {
		resolved.Status.Conditions = append(slices.Clone(resolved.Status.Conditions), c)
	}
	if opts.Auth != nil && meta.IsStatusConditionTrue(resolved.Status.Conditions, v1.ConditionTypeReady) {
		if c, ok := opts.Auth.Condition(ctx, resolved, types, opts.Now); ok {
			resolved.Status.Conditions = append(slices.Clone(resolved.Status.Conditions), c)
		}
	}
	return LaunchClass{NodeClass: resolved, Subnets: subnets, InstanceTypes: types, PriceSource: src}, nil
}

// LaunchTypes is the pure part of ResolveLaunchClass, for a class whose
// status is already resolved (the CLI reads it from manifests): subnets
// marked (a copy is returned), instance types resolved with unavailable
// offerings marked (those of a reservation marked unavailable too:
// catalog.ReservationsUnavailable), types no resolved AMI boots removed. Errors are
// catalog.Resolve's.
func LaunchTypes(nc *v1.EC2NodeClass, subnets []launch.Subnet, opts LaunchOptions) ([]*catalog.InstanceType, catalog.PriceSource, []launch.Subnet, error) {
	subnets = slices.Clone(subnets)
	fullZones := markSubnets(subnets, opts.UnavailableSubnets)
	types, src, err := catalog.Resolve(nc, catalog.Options{
		Region:                  opts.Region,
		Zones:                   opts.Zones,
		SpotPriceRatio:          opts.SpotPriceRatio,
		ReservedENIs:            opts.ReservedENIs,
		VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent,
		Unavailable:             withFullZones(catalog.UnavailableFunc(opts.Unavailable), fullZones),
		Live:                    opts.Live,
		Now:                     opts.Now,
		ReservationCapacity:     opts.ReservationCapacity,
	})
	if err != nil {
		return nil, src, nil, err
	}
	types = catalog.ReservationsUnavailable(types, opts.Unavailable)
	return bootable(types, nc.Status.AMIs), src, subnets, nil
}

// bootable keeps the instance types at least one resolved AMI serves (an
// AMI's requirements: architecture, GPU or accelerator variant; karpenter-spec
// section 9.1). A launch uses, per type, the first AMI whose requirements it
// meets (section 4 step 6), so a type no AMI serves cannot launch and must
// not be planned. With no resolved AMIs every type is kept.
func bootable(types []*catalog.InstanceType, amis []v1.AMI) []*catalog.InstanceType {
	if len(amis) == 0 {
		return types
	}
	reqs := make([]requirements.Requirements, len(amis))
	for i, ami := range amis {
		reqs[i] = requirements.FromNodeSelector(ami.Requirements)
	}
	out := make([]*catalog.InstanceType, 0, len(types))
	for _, it := range types {
		if slices.ContainsFunc(reqs, func(r requirements.Requirements) bool { return r.AdmitsLabels(it.Labels, v1.WellKnownLabels) }) {
			out = append(out, it)
		}
	}
	return out
}

// outcome is one NodeClaim's launch outcome with its stored form, when it
// still exists.
type outcome struct {
	Launch
	claim *v1.NodeClaim
}

// launchAll creates and launches the planned NodeClaims, at most
// LaunchParallelism at a time. It returns when every launch has ended.
func (p *Provisioner) launchAll(ctx context.Context, planned []v1.NodeClaim, st *launchState, now time.Time) []outcome {
	out := make([]outcome, len(planned))
	var g errgroup.Group
	g.SetLimit(p.opts.LaunchParallelism)
	for i := range planned {
		g.Go(func() error {
			out[i] = p.launchOne(ctx, planned[i], st, now)
			return nil
		})
	}
	// The goroutines report through out and never return an error.
	_ = g.Wait()
	return out
}

// errAbandoned: a planned NodeClaim is gone from the store and too old to
// recreate.
var errAbandoned = errors.New("abandoned")

func (p *Provisioner) launchOne(ctx context.Context, planned v1.NodeClaim, st *launchState, now time.Time) outcome {
	o := outcome{Launch: Launch{NodeClaim: planned.Name}}
	if planned.Status.ProviderID != "" {
		o.Status, o.ProviderID = launch.AlreadyLaunched, planned.Status.ProviderID
		return o
	}
	claim, err := p.ensureClaim(ctx, planned, now)
	switch {
	case errors.Is(err, errAbandoned):
		o.Status, o.Reason = launch.Abandoned, fmt.Sprintf("the NodeClaim is gone from the store and its plan is older than the %v launch timeout", LaunchTimeout)
		return o
	case err != nil:
		o.Status, o.Reason = launch.LaunchFailed, err.Error()
		return o
	case claim.DeletionTimestamp != nil:
		o.Status, o.Reason = launch.Abandoned, "the NodeClaim is being deleted"
		return o
	case claim.Status.ProviderID != "":
		o.Status, o.ProviderID, o.claim = launch.AlreadyLaunched, claim.Status.ProviderID, &claim
		return o
	}
	className := ""
	if ref := claim.Spec.NodeClassRef; ref != nil {
		className = ref.Name
	}
	class := st.classes[className]
	if class == nil {
		reason := fmt.Sprintf("EC2NodeClass %q is missing, invalid or not ready", className)
		if why := st.leftOut[className]; why != "" {
			reason = fmt.Sprintf("EC2NodeClass %q is not ready: %s", className, why)
		}
		return p.giveUp(ctx, claim, launch.NodeClassNotReady, reason)
	}
	res, err := p.ports.Launcher.Launch(ctx, LaunchRequest{
		NodeClaim: claim, NodeClass: *class, Subnets: st.subnets[className], InstanceTypes: st.types[className],
	})
	var ice *launch.InsufficientCapacityError
	if errors.As(err, &ice) {
		markErr := p.markUnavailable(ctx, ice.Offerings, now)
		o = p.giveUp(ctx, claim, launch.InsufficientCapacity, ice.Reason)
		if markErr != nil {
			o.Reason += "; " + markErr.Error()
		}
		return o
	}
	if err != nil {
		return p.recordFailure(ctx, claim, err, now)
	}
	o = p.recordLaunch(ctx, claim, res.Instance, class, st.types[className], now)
	if markErr := p.markUnavailable(ctx, res.Unavailable, now); markErr != nil {
		o.Reason = strings.TrimPrefix(o.Reason+"; "+markErr.Error(), "; ")
	}
	return o
}

// ensureClaim creates the planned NodeClaim create-only, or returns the
// stored one when it exists. A missing NodeClaim whose plan is older than
// LaunchTimeout is not recreated (errAbandoned): garbage collection deleted
// it, and its pods have moved on to later batches.
func (p *Provisioner) ensureClaim(ctx context.Context, planned v1.NodeClaim, now time.Time) (v1.NodeClaim, error) {
	if now.Sub(planned.CreationTimestamp.Time) >= LaunchTimeout {
		stored, err := p.ports.Claims.GetNodeClaim(ctx, planned.Name)
		if errors.Is(err, v1.ErrNotFound) {
			return v1.NodeClaim{}, errAbandoned
		}
		if err != nil {
			return v1.NodeClaim{}, fmt.Errorf("get nodeclaim %s: %w", planned.Name, err)
		}
		return stored, nil
	}
	created, err := p.ports.Claims.CreateNodeClaim(ctx, newClaim(planned, now))
	if err == nil {
		return created, nil
	}
	if !errors.Is(err, v1.ErrAlreadyExists) {
		return v1.NodeClaim{}, fmt.Errorf("create nodeclaim %s: %w", planned.Name, err)
	}
	stored, err := p.ports.Claims.GetNodeClaim(ctx, planned.Name)
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("get existing nodeclaim %s: %w", planned.Name, err)
	}
	if b := stored.Annotations[AnnotationBatchID]; b != planned.Annotations[AnnotationBatchID] {
		return v1.NodeClaim{}, fmt.Errorf("create nodeclaim %s: the name is taken by batch %q's NodeClaim", planned.Name, b)
	}
	return stored, nil
}

// newClaim is the NodeClaim as first written: a fresh UID, created now,
// with the termination finalizer (added before any launch, karpenter-spec
// section 5.1) and every lifecycle condition Unknown.
func newClaim(planned v1.NodeClaim, now time.Time) v1.NodeClaim {
	c := planned
	c.UID = claimUID(c.Name, now)
	c.ResourceVersion = ""
	c.Generation = 1
	c.CreationTimestamp = metav1.NewTime(now)
	c.Finalizers = []string{v1.TerminationFinalizer}
	c.Status = v1.NodeClaimStatus{}
	for _, t := range lifecycleConditions {
		c.Status.Conditions = v1.SetCondition(c.Status.Conditions, t, metav1.ConditionUnknown, ReasonAwaitingReconciliation, "", c.Generation, now)
	}
	return c
}

// giveUp deletes a NodeClaim that cannot launch now, so its pods are placed
// again next round. If the claim turns out to have launched meanwhile (a
// concurrent delivery of the batch), it is kept.
func (p *Provisioner) giveUp(ctx context.Context, claim v1.NodeClaim, status launch.Status, reason string) outcome {
	o := outcome{Launch: Launch{NodeClaim: claim.Name, Status: status, Reason: reason}}
	for range 3 {
		err := p.ports.Claims.DeleteNodeClaim(ctx, claim.Name, claim.ResourceVersion)
		if err == nil || errors.Is(err, v1.ErrNotFound) {
			return o
		}
		if !errors.Is(err, v1.ErrConflict) {
			o.Status, o.Reason, o.claim = launch.LaunchFailed, fmt.Sprintf("%s; delete nodeclaim: %v", reason, err), &claim
			return o
		}
		claim, err = p.ports.Claims.GetNodeClaim(ctx, claim.Name)
		if errors.Is(err, v1.ErrNotFound) {
			return o
		}
		if err != nil {
			o.Status, o.Reason, o.claim = launch.LaunchFailed, fmt.Sprintf("%s; re-read nodeclaim: %v", reason, err), nil
			return o
		}
		if claim.Status.ProviderID != "" {
			return outcome{Launch: Launch{NodeClaim: claim.Name, Status: launch.AlreadyLaunched, ProviderID: claim.Status.ProviderID}, claim: &claim}
		}
	}
	o.Status, o.Reason, o.claim = launch.LaunchFailed, reason+"; delete nodeclaim: kept changing", &claim
	return o
}

// recordLaunch writes the launched instance into the NodeClaim with a
// version-checked update, re-reading it on conflict.
func (p *Provisioner) recordLaunch(ctx context.Context, claim v1.NodeClaim, inst launch.Instance, class *v1.EC2NodeClass, types []*catalog.InstanceType, now time.Time) outcome {
	o := outcome{Launch: Launch{NodeClaim: claim.Name}}
	for range 3 {
		updated, err := p.ports.Claims.UpdateNodeClaim(ctx, launchedClaim(claim, inst, class, types, now))
		switch {
		case err == nil:
			o.Status, o.ProviderID, o.claim = launch.Launched, updated.Status.ProviderID, &updated
			return o
		case errors.Is(err, v1.ErrNotFound):
			o.Status, o.Reason = launch.Abandoned, fmt.Sprintf("the NodeClaim was deleted while instance %s launched; garbage collection terminates the instance", inst.ID)
			return o
		case !errors.Is(err, v1.ErrConflict):
			o.Status, o.Reason, o.claim = launch.LaunchFailed, fmt.Sprintf("instance %s launched; record it: %v", inst.ID, err), &claim
			return o
		}
		claim, err = p.ports.Claims.GetNodeClaim(ctx, claim.Name)
		if errors.Is(err, v1.ErrNotFound) {
			o.Status, o.Reason = launch.Abandoned, fmt.Sprintf("the NodeClaim was deleted while instance %s launched; garbage collection terminates the instance", inst.ID)
			return o
		}
		if err != nil {
			o.Status, o.Reason = launch.LaunchFailed, fmt.Sprintf("instance %s launched; re-read nodeclaim: %v", inst.ID, err)
			return o
		}
		if claim.Status.ProviderID == inst.ProviderID() {
			o.Status, o.ProviderID, o.claim = launch.Launched, claim.Status.ProviderID, &claim
			return o
		}
	}
	o.Status, o.Reason, o.claim = launch.LaunchFailed, fmt.Sprintf("instance %s launched; record it: the NodeClaim kept changing", inst.ID), &claim
	return o
}

// recordFailure leaves the NodeClaim for a retry with Launched=Unknown and
// the reason (karpenter-spec section 4 step 9: other errors are retried).
// Writing the reason is best effort: the outcome is LaunchFailed either way.
func (p *Provisioner) recordFailure(ctx context.Context, claim v1.NodeClaim, launchErr error, now time.Time) outcome {
	o := outcome{Launch: Launch{NodeClaim: claim.Name, Status: launch.LaunchFailed, Reason: launchErr.Error()}, claim: &claim}
	failed := claim
	setClaimCondition(&failed, v1.ConditionTypeLaunched, metav1.ConditionUnknown, ReasonLaunchFailed, launchErr.Error(), now)
	if updated, err := p.ports.Claims.UpdateNodeClaim(ctx, failed); err == nil {
		o.claim = &updated
	}
	return o
}

// markUnavailable records capacity errors in the unavailable-offerings
// cache for catalog.UnavailableOfferingsTTL. A full subnet is not an offering: it
// goes to the unavailable-subnets cache, when there is one, for as long
// (karpenter-spec section 4 step 5). It tries every entry and returns the
// errors joined.
func (p *Provisioner) markUnavailable(ctx context.Context, offerings []launch.UnavailableOffering, now time.Time) error {
	var errs []error
	marked := map[string]bool{}
	for _, u := range offerings {
		if u.Code == codeInsufficientFreeAddressesInSubnet {
			if p.ports.Subnets == nil || u.SubnetID == "" || marked[u.SubnetID] {
				continue
			}
			marked[u.SubnetID] = true
			if err := p.ports.Subnets.MarkSubnetUnavailable(ctx, u.SubnetID, u.Code, now, catalog.UnavailableOfferingsTTL); err != nil {
				errs = append(errs, fmt.Errorf("mark subnet %s unavailable: %w", u.SubnetID, err))
			}
			continue
		}
		if err := p.ports.Offerings.MarkUnavailable(ctx, u.OfferingKey, u.Code, now, catalog.UnavailableOfferingsTTL); err != nil {
			errs = append(errs, fmt.Errorf("mark offering %s unavailable: %w", u.OfferingKey, err))
		}
	}
	return errors.Join(errs...)
}

// launchedClaim returns claim recording inst (karpenter-spec section 4 step
// 10, section 1.4): the instance type's single-valued labels and the zone,
// zone ID, capacity type, tenancy, reservation, placement group and node
// class labels;
// capacity and allocatable of the type as resolved for the class;
// providerID and imageID; the instance-profile and node-class hash
// annotations; Launched=True.
func launchedClaim(claim v1.NodeClaim, inst launch.Instance, class *v1.EC2NodeClass, types []*catalog.InstanceType, now time.Time) v1.NodeClaim {
	c := claim
	c.Labels = maps.Clone(c.Labels)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Annotations = maps.Clone(c.Annotations)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Status.Capacity, c.Status.Allocatable = nil, nil
	for _, it := range types {
		if it.Name != inst.InstanceType {
			continue
		}
		maps.Copy(c.Labels, it.Labels)
		c.Status.Capacity = it.Capacity.DeepCopy()
		c.Status.Allocatable = it.Allocatable()
		break
	}
	c.Labels[v1.LabelInstanceType] = inst.InstanceType
	c.Labels[v1.LabelTopologyZone] = inst.Zone
	zoneID := inst.ZoneID
	for _, s := range class.Status.Subnets {
		if zoneID == "" && s.Zone == inst.Zone {
			zoneID = s.ZoneID
		}
	}
	if zoneID != "" {
		c.Labels[v1.LabelZoneID] = zoneID
	}
	c.Labels[v1.LabelCapacityType] = inst.CapacityType
	// The node's tenancy label is the launched tenancy (karpenter-spec
	// section 1.4); an instance that does not report one launched as the
	// claim's requirements chose.
	c.Labels[v1.LabelInstanceTenancy] = cmp.Or(inst.Tenancy, launch.Tenancy(requirements.FromNodeSelector(claim.Spec.Requirements)))
	c.Labels[v1.LabelEC2NodeClass] = class.Name
	if inst.ReservationID != "" {
		// The reservation labels of a reserved NodeClaim (aws:
		// pkg/cloudprovider/cloudprovider.go instanceToNodeClaim).
		c.Labels[v1.LabelCapacityReservationID] = inst.ReservationID
		if inst.ReservationType != "" {
			c.Labels[v1.LabelCapacityReservationType] = inst.ReservationType
		}
	}
	if pg := class.Status.PlacementGroup; pg != nil {
		// Launched into the class's placement group (the launch template's
		// Placement.GroupId): its ID label, as Karpenter's
		// instanceToNodeClaim sets it.
		c.Labels[v1.LabelPlacementGroupID] = pg.ID
	}
	if class.Status.InstanceProfile != "" {
		c.Annotations[v1.AnnotationInstanceProfileName] = class.Status.InstanceProfile
	}
	for _, k := range []string{v1.AnnotationEC2NodeClassHash, v1.AnnotationEC2NodeClassHashVersion} {
		if v, ok := class.Annotations[k]; ok {
			c.Annotations[k] = v
		}
	}
	c.Status.ProviderID = inst.ProviderID()
	c.Status.ImageID = inst.ImageID
	setClaimCondition(&c, v1.ConditionTypeLaunched, metav1.ConditionTrue, "", "", now)
	return c
}

// hasTaint reports whether taints holds one matching t by key and effect
// (corev1.Taint.MatchTaint).
func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
}
