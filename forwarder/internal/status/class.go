package status

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// EC2NodeClass condition reasons and messages, as Karpenter's node-class
// sub-controllers write them (aws: pkg/controllers/nodeclass/subnet.go,
// securitygroup.go, ami.go) and operatorpkg's default reason for a
// condition not reconciled yet.
const (
	ReasonSubnetsNotFound        = "SubnetsNotFound"
	ReasonSecurityGroupsNotFound = "SecurityGroupsNotFound"
	ReasonAMINotFound            = "AMINotFound"
	ReasonAwaitingReconciliation = "AwaitingReconciliation"

	MessageSubnetsNotFound        = "SubnetSelector did not match any Subnets"
	MessageSecurityGroupsNotFound = "SecurityGroupSelector did not match any SecurityGroups"
	MessageAMINotFound            = "AMISelector did not match any AMIs"
)

// ReasonNodeClassValidationFailed is nodewright's ValidationSucceeded=False
// reason for a class that v1 EC2NodeClass validation refuses (the message is
// the error, naming each field).
const ReasonNodeClassValidationFailed = "NodeClassValidationFailed"

// ClassConditions expands the API's resolution of class nc (rec, its single
// Ready condition; nil when the API holds none for nc) into Karpenter's
// EC2NodeClass conditions, in this order: SubnetsReady,
// SecurityGroupsReady, AMIsReady, InstanceProfileReady,
// ValidationSucceeded, PlacementGroupReady, CapacityReservationsReady
// (Karpenter's ReservedCapacity gate is on by default), Ready (aws:
// pkg/apis/v1/ec2nodeclass_status.go), stamped with rec.Generation, or
// nc's generation without rec.
//
// The resolver stops at its first failure, in the order subnets, security
// groups, AMIs: the failed condition is False with Karpenter's reason and
// message (AMIsReady: AMINotFound, or UnsupportedAlias with the resolver's
// message), and the ones it never reached are Unknown
// (AwaitingReconciliation); without rec all three and InstanceProfileReady
// are Unknown. InstanceProfileReady is True when an instance profile is
// known, and False with rec's reason and message (RoleNotAllowed,
// InstanceProfileCreationFailed; they name spec.role) when spec.role got
// no profile, the selectors then being resolved. ValidationSucceeded is nc's v1 validation (after defaulting): True,
// or False NodeClassValidationFailed with the error, which names every
// refused field (v1.UnappliedFields among them); a class that passes takes
// the verdict of the dry-run authorization checks of CreateLaunchTemplate,
// CreateFleet and RunInstances (authCondition: False with Karpenter's
// CreateLaunchTemplateAuthCheckFailed, CreateFleetAuthCheckFailed or
// RunInstancesAuthCheckFailed and a message naming the action), True
// without one. PlacementGroupReady (aws:
// pkg/controllers/nodeclass/placementgroup.go) is True without
// spec.placementGroupSelector or when rec resolved the group; False with
// Karpenter's PlacementGroupNotFound and rec's message (it names
// spec.placementGroupSelector) when rec found no available group; else
// Unknown (AwaitingReconciliation). The resolver looks for the group last,
// so that failure leaves the other conditions True.
// CapacityReservationsReady is True when rec
// resolved the class (Ready True, or False for the placement group only), else Unknown (AwaitingReconciliation). Ready is True when all are, else False
// UnhealthyDependents. After Ready comes rec's informational EC2DataLive
// condition, when rec has one (where the class's instance types, offerings
// and prices came from: provisioning.EC2DataCondition); it is not one of
// Ready's dependents, as Karpenter's non-root conditions are not.
// Unchanged conditions keep their lastTransitionTime from prev.
func ClassConditions(nc v1.EC2NodeClass, rec *v1.NodeClassStatus, prev []metav1.Condition, now time.Time) []metav1.Condition {
	awaiting := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionUnknown, Reason: ReasonAwaitingReconciliation, Message: "object is awaiting reconciliation"}
	}
	var conds []metav1.Condition
	generation := nc.Generation
	if rec == nil {
		conds = []metav1.Condition{
			awaiting(v1.ConditionTypeSubnetsReady), awaiting(v1.ConditionTypeSecurityGroupsReady),
			awaiting(v1.ConditionTypeAMIsReady), awaiting(v1.ConditionTypeInstanceProfileReady),
		}
	} else {
		generation = rec.Generation
		conds = resolvedConditions(*rec)
	}
	validation := metav1.Condition{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeValidationSucceeded}
	if err := validateClass(nc); err != nil {
		validation.Status, validation.Reason, validation.Message = metav1.ConditionFalse, ReasonNodeClassValidationFailed, err.Error()
	} else if c := authCondition(rec, prev); c != nil {
		validation.Status, validation.Reason, validation.Message = c.Status, c.Reason, c.Message
	}
	var ready *metav1.Condition
	if rec != nil {
		ready = Find(rec.Status.Conditions, v1.ConditionTypeReady)
	}
	placementMissing := ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == v1.ConditionReasonPlacementGroupNotFound
	placement := metav1.Condition{Type: v1.ConditionTypePlacementGroupReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypePlacementGroupReady}
	switch {
	case nc.Spec.PlacementGroupSelector == nil, rec != nil && rec.Status.PlacementGroup != nil:
	case placementMissing:
		placement.Status, placement.Reason, placement.Message = metav1.ConditionFalse, v1.ConditionReasonPlacementGroupNotFound, ready.Message
	default:
		placement = awaiting(v1.ConditionTypePlacementGroupReady)
	}
	// CapacityReservationsReady: the API resolves the reservations after
	// subnets, security groups and AMIs, and before the placement group (a
	// failed DescribeCapacityReservations fails the resolution), so a
	// resolution that reached Ready, or failed for the group only, has them.
	reservations := awaiting(v1.ConditionTypeCapacityReservationsReady)
	if ready != nil && ready.Status == metav1.ConditionTrue || placementMissing {
		reservations = metav1.Condition{Type: v1.ConditionTypeCapacityReservationsReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeCapacityReservationsReady}
	}
	conds = append(conds, validation, placement, reservations)
	conds = append(conds, readyOf(conds))
	if rec != nil {
		if c := Find(rec.Status.Conditions, v1.ConditionTypeEC2DataLive); c != nil {
			conds = append(conds, metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	return finish(conds, generation, prev, now)
}

// authCondition is the ValidationSucceeded verdict of the dry-run
// authorization checks (provisioning.AuthChecker): rec's, when the
// resolution carries one; else, when rec is nil or was recorded by a
// component that makes no check, the class's previous False verdict with a
// Karpenter "...AuthCheckFailed" reason, which stands until a check says
// otherwise. nil: no verdict (True).
func authCondition(rec *v1.NodeClassStatus, prev []metav1.Condition) *metav1.Condition {
	if rec != nil {
		if c := Find(rec.Status.Conditions, v1.ConditionTypeValidationSucceeded); c != nil {
			return c
		}
	}
	if c := Find(prev, v1.ConditionTypeValidationSucceeded); c != nil && c.Status == metav1.ConditionFalse && strings.HasSuffix(c.Reason, "AuthCheckFailed") {
		return c
	}
	return nil
}

// validateClass is nc's v1 validation after defaulting. It takes nc by
// value; SetDefaults only fills unset fields with their defaults.
func validateClass(nc v1.EC2NodeClass) error {
	nc.SetDefaults()
	return nc.Validate()
}

// resolvedConditions are the SubnetsReady, SecurityGroupsReady, AMIsReady
// and InstanceProfileReady conditions of the API's resolution rec.
func resolvedConditions(rec v1.NodeClassStatus) []metav1.Condition {
	failed := ""
	var message string
	if r := Find(rec.Status.Conditions, v1.ConditionTypeReady); r != nil && r.Status != metav1.ConditionTrue {
		failed, message = r.Reason, r.Message
	}
	// AMIsReady fails with AMINotFound, or with UnsupportedAlias and the
	// resolver's message (it names the alias and the version).
	amiReason, amiMessage := ReasonAMINotFound, MessageAMINotFound
	if failed == v1.ConditionReasonUnsupportedAlias {
		amiReason, amiMessage = failed, message
	}
	steps := []struct{ typ, reason, message string }{
		{v1.ConditionTypeSubnetsReady, ReasonSubnetsNotFound, MessageSubnetsNotFound},
		{v1.ConditionTypeSecurityGroupsReady, ReasonSecurityGroupsNotFound, MessageSecurityGroupsNotFound},
		{v1.ConditionTypeAMIsReady, amiReason, amiMessage},
	}
	// A class whose spec.role got no instance profile resolved every
	// selector first (adapters.NodeClasses): only InstanceProfileReady
	// fails. One whose placement group is missing resolved everything
	// else: only PlacementGroupReady fails (ClassConditions).
	profileFailed := failed == v1.ConditionReasonRoleNotAllowed || failed == v1.ConditionReasonInstanceProfileFailed
	known := failed == "" || profileFailed || failed == v1.ConditionReasonPlacementGroupNotFound
	for _, s := range steps {
		known = known || failed == s.reason
	}
	var conds []metav1.Condition
	reached := true
	for _, s := range steps {
		c := metav1.Condition{Type: s.typ, Status: metav1.ConditionTrue, Reason: s.typ}
		switch {
		case !reached:
			c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonAwaitingReconciliation, "object is awaiting reconciliation"
		case failed == s.reason:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, s.reason, s.message
			reached = false
		case !known:
			// A failure this package does not know: nothing is
			// known to be resolved.
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, failed, message
			reached = false
		}
		conds = append(conds, c)
	}
	profile := metav1.Condition{Type: v1.ConditionTypeInstanceProfileReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeInstanceProfileReady}
	switch {
	case profileFailed:
		profile.Status, profile.Reason, profile.Message = metav1.ConditionFalse, failed, message
	case rec.Status.InstanceProfile == "":
		profile.Status, profile.Reason, profile.Message = metav1.ConditionUnknown, ReasonAwaitingReconciliation, "object is awaiting reconciliation"
	}
	return append(conds, profile)
}

// ClassStatus is the EC2NodeClass status the Writer writes for class nc
// and the API's resolution rec (nil: none; the status then holds only
// conditions). It leaves out rec's placementGroup: Karpenter's
// EC2NodeClass status has no such field (its CRD would prune it), and
// PlacementGroupReady says what the object needs.
func ClassStatus(nc v1.EC2NodeClass, rec *v1.NodeClassStatus, prev []metav1.Condition, now time.Time) v1.EC2NodeClassStatus {
	var st v1.EC2NodeClassStatus
	if rec != nil {
		st = rec.Status
	}
	st.PlacementGroup = nil
	st.Conditions = ClassConditions(nc, rec, prev, now)
	return st
}

// syncClasses writes the API's resolution (resolved) of each class in the cluster,
// and the conditions of a class that fails v1 validation (ValidationSucceeded
// False) even when the API holds no resolution of it, as the API never
// resolves an invalid class. Other classes the API holds nothing for, or
// holds a resolution of an older object of the same name (another UID),
// are left alone. It updates classes in place so that the NodePools of
// this pass read the new Ready.
func (w *Writer) syncClasses(ctx context.Context, classes map[string]*unstructured.Unstructured, resolved []v1.NodeClassStatus, now time.Time) (int, error) {
	records := map[string]*v1.NodeClassStatus{}
	for i, rec := range resolved {
		if u, ok := classes[rec.Name]; ok && (rec.UID == "" || rec.UID == u.GetUID()) {
			records[rec.Name] = &resolved[i]
		}
	}
	var errs []error
	written := 0
	for _, name := range slices.Sorted(maps.Keys(classes)) {
		u := classes[name]
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		var nc v1.EC2NodeClass
		if err := convert(u.Object, &nc); err != nil {
			errs = append(errs, fmt.Errorf("ec2nodeclass %s: %w", name, err))
			continue
		}
		rec := records[name]
		if rec == nil {
			if validateClass(nc) == nil {
				continue
			}
		}
		want := ClassStatus(nc, rec, nc.Status.Conditions, now)
		changed, err := w.write(ctx, NodeClassesGVR, u, &nc.Status, &want)
		if err != nil {
			errs = append(errs, fmt.Errorf("ec2nodeclass %s: %w", name, err))
			continue
		}
		if changed {
			written++
			if m, err := toMap(want); err == nil {
				cp := u.DeepCopy()
				cp.Object["status"] = m
				classes[name] = cp
			}
		}
	}
	return written, errors.Join(errs...)
}
