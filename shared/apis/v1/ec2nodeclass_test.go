package v1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCapacityReservationStateAt(t *testing.T) {
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	block := CapacityReservation{ID: "cr-1", ReservationType: ReservationTypeCapacityBlock, EndTime: &metav1.Time{Time: end}}
	odcr := CapacityReservation{ID: "cr-2", ReservationType: ReservationTypeDefault, EndTime: &metav1.Time{Time: end}}
	for _, tc := range []struct {
		name string
		r    CapacityReservation
		now  time.Time
		want string
	}{
		{"block 41 min before its end", block, end.Add(-41 * time.Minute), ReservationStateActive},
		{"block 40 min before its end", block, end.Add(-40 * time.Minute), ReservationStateExpiring},
		{"block past its end", block, end.Add(time.Minute), ReservationStateExpiring},
		{"ODCR with an end date never expires early", odcr, end.Add(-time.Minute), ReservationStateActive},
		{"block without an end time", CapacityReservation{ReservationType: ReservationTypeCapacityBlock}, end, ReservationStateActive},
	} {
		if got := tc.r.StateAt(tc.now); got != tc.want {
			t.Errorf("%s: StateAt = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCapacityReservationsResolved(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, gen int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: typ, ObservedGeneration: gen}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  bool
	}{
		{"no conditions: discovery not run", nil, false},
		{"CapacityReservationsReady True at the generation", []metav1.Condition{cond(ConditionTypeCapacityReservationsReady, metav1.ConditionTrue, 4)}, true},
		{"CapacityReservationsReady True behind a spec change", []metav1.Condition{cond(ConditionTypeCapacityReservationsReady, metav1.ConditionTrue, 3)}, false},
		{"CapacityReservationsReady Unknown decides over Ready True", []metav1.Condition{
			cond(ConditionTypeReady, metav1.ConditionTrue, 4), cond(ConditionTypeCapacityReservationsReady, metav1.ConditionUnknown, 4)}, false},
		{"the API's resolution: Ready True at the generation", []metav1.Condition{cond(ConditionTypeReady, metav1.ConditionTrue, 4)}, true},
		{"the API's resolution: Ready False", []metav1.Condition{cond(ConditionTypeReady, metav1.ConditionFalse, 4)}, false},
		{"the API's resolution: Ready True behind a spec change", []metav1.Condition{cond(ConditionTypeReady, metav1.ConditionTrue, 3)}, false},
	} {
		nc := EC2NodeClass{}
		nc.Generation, nc.Status.Conditions = 4, tc.conds
		if got := nc.CapacityReservationsResolved(); got != tc.want {
			t.Errorf("%s: CapacityReservationsResolved() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
