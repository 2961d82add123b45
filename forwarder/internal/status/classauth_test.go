package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// The class's ValidationSucceeded is the dry-run verdict the resolution
// carries; a resolution without one keeps a previous auth-check failure;
// a refused field wins over both.
func TestClassConditionsAuthVerdict(t *testing.T) {
	nc := v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 2}, Spec: v1.EC2NodeClassSpec{
		AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       "NodeRole",
		SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"a": "b"}}},
		SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"a": "b"}}},
	}}
	denied := metav1.Condition{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionFalse, Reason: "CreateFleetAuthCheckFailed",
		Message: "not authorized to call ec2:CreateFleet: You are not authorized to perform this operation."}
	rec := func(conds ...metav1.Condition) *v1.NodeClassStatus {
		r := &v1.NodeClassStatus{Name: "default", Generation: 2}
		r.Status.InstanceProfile = "NodeRole"
		r.Status.Conditions = append([]metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady}}, conds...)
		return r
	}
	get := func(conds []metav1.Condition, typ string) metav1.Condition {
		if c := Find(conds, typ); c != nil {
			return *c
		}
		t.Fatalf("no %s in %+v", typ, conds)
		return metav1.Condition{}
	}
	conds := ClassConditions(nc, rec(denied), nil, t0)
	if v := get(conds, v1.ConditionTypeValidationSucceeded); v.Status != metav1.ConditionFalse || v.Reason != "CreateFleetAuthCheckFailed" || v.Message != denied.Message {
		t.Errorf("ValidationSucceeded = %+v, want the recorded denial", v)
	}
	if r := get(conds, v1.ConditionTypeReady); r.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False", r)
	}
	// A resolution recorded without a verdict keeps the failure.
	if v := get(ClassConditions(nc, rec(), conds, t0), v1.ConditionTypeValidationSucceeded); v.Reason != "CreateFleetAuthCheckFailed" {
		t.Errorf("without a verdict: %+v, want the previous denial kept", v)
	}
	// A True verdict recovers.
	ok := metav1.Condition{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeValidationSucceeded}
	if v := get(ClassConditions(nc, rec(ok), conds, t0), v1.ConditionTypeValidationSucceeded); v.Status != metav1.ConditionTrue {
		t.Errorf("after a True verdict: %+v", v)
	}
	// A refused field wins.
	bad := nc
	bad.Spec.Role = ""
	if v := get(ClassConditions(bad, rec(denied), nil, t0), v1.ConditionTypeValidationSucceeded); v.Reason != ReasonNodeClassValidationFailed {
		t.Errorf("refused class: %+v, want %s", v, ReasonNodeClassValidationFailed)
	}
}
