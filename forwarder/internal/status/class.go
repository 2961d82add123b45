package status

import (
	"context"
	"errors"
	"fmt"
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

// ClassConditions expands the API's resolution of a class (its single Ready
// condition) into Karpenter's EC2NodeClass conditions, in this order:
// SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady,
// ValidationSucceeded, PlacementGroupReady, Ready (aws:
// pkg/apis/v1/ec2nodeclass_status.go), stamped with rec.Generation.
//
// The resolver stops at its first failure, in the order subnets, security
// groups, AMIs: the failed condition is False with Karpenter's reason and
// message (AMIsReady: AMINotFound, or UnsupportedAlias with the resolver's
// message), and the ones it never reached are Unknown
// (AwaitingReconciliation). InstanceProfileReady is True when an instance
// profile is known. ValidationSucceeded is True: the API resolves only
// classes that pass v1 validation, and nodewright makes none of Karpenter's
// dry-run authorization checks. PlacementGroupReady is True: nodewright
// resolves no placement groups. Ready is True when all are, else False
// UnhealthyDependents. Unchanged conditions keep their lastTransitionTime
// from prev.
func ClassConditions(rec v1.NodeClassStatus, prev []metav1.Condition, now time.Time) []metav1.Condition {
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
	known := failed == ""
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
	if rec.Status.InstanceProfile == "" {
		profile.Status, profile.Reason, profile.Message = metav1.ConditionUnknown, ReasonAwaitingReconciliation, "object is awaiting reconciliation"
	}
	conds = append(conds, profile,
		metav1.Condition{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeValidationSucceeded},
		metav1.Condition{Type: v1.ConditionTypePlacementGroupReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypePlacementGroupReady},
	)
	return finish(append(conds, readyOf(conds)), rec.Generation, prev, now)
}

// ClassStatus is the EC2NodeClass status the Writer writes for rec.
func ClassStatus(rec v1.NodeClassStatus, prev []metav1.Condition, now time.Time) v1.EC2NodeClassStatus {
	st := rec.Status
	st.Conditions = ClassConditions(rec, prev, now)
	return st
}

// syncClasses writes the API's resolution of each class in the cluster;
// classes the API holds nothing for, or holds a resolution of an older
// object of the same name (another UID), are left alone. It updates classes
// in place so that the NodePools of this pass read the new Ready.
func (w *Writer) syncClasses(ctx context.Context, classes map[string]*unstructured.Unstructured, now time.Time) (int, error) {
	list, err := w.o.Classes.NodeClasses(ctx)
	if err != nil {
		return 0, fmt.Errorf("get resolved ec2nodeclasses: %w", err)
	}
	var errs []error
	written := 0
	for _, rec := range list.Items {
		u, ok := classes[rec.Name]
		if !ok || (rec.UID != "" && rec.UID != u.GetUID()) || u.GetDeletionTimestamp() != nil {
			continue
		}
		var nc v1.EC2NodeClass
		if err := convert(u.Object, &nc); err != nil {
			errs = append(errs, fmt.Errorf("ec2nodeclass %s: %w", rec.Name, err))
			continue
		}
		want := ClassStatus(rec, nc.Status.Conditions, now)
		changed, err := w.write(ctx, NodeClassesGVR, u, &nc.Status, &want)
		if err != nil {
			errs = append(errs, fmt.Errorf("ec2nodeclass %s: %w", rec.Name, err))
			continue
		}
		if changed {
			written++
			if m, err := toMap(want); err == nil {
				cp := u.DeepCopy()
				cp.Object["status"] = m
				classes[rec.Name] = cp
			}
		}
	}
	return written, errors.Join(errs...)
}
