package launch_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

func TestOfferFilterReservationLabels(t *testing.T) {
	odcr := catalog.Offering{Zone: "us-east-1a", CapacityType: v1.CapacityTypeReserved, ReservationID: "cr-1", ReservationType: v1.ReservationTypeDefault}
	block := catalog.Offering{Zone: "us-east-1a", CapacityType: v1.CapacityTypeReserved, ReservationID: "cr-2", ReservationType: v1.ReservationTypeCapacityBlock, Interruptible: true}
	od := catalog.Offering{Zone: "us-east-1a", CapacityType: v1.CapacityTypeOnDemand}
	for _, tc := range []struct {
		name string
		req  *requirements.Requirement
		want [3]bool // odcr, block, on-demand
	}{
		{"no requirement", nil, [3]bool{true, true, true}},
		{"type In capacity-block", requirements.New(v1.LabelCapacityReservationType, corev1.NodeSelectorOpIn, "capacity-block"), [3]bool{false, true, false}},
		{"type NotIn capacity-block", requirements.New(v1.LabelCapacityReservationType, corev1.NodeSelectorOpNotIn, "capacity-block"), [3]bool{true, false, true}},
		{"interruptible In true", requirements.New(v1.LabelCapacityReservationInterruptible, corev1.NodeSelectorOpIn, "true"), [3]bool{false, true, false}},
		{"interruptible DoesNotExist", requirements.New(v1.LabelCapacityReservationInterruptible, corev1.NodeSelectorOpDoesNotExist), [3]bool{false, false, true}},
		{"id In cr-1", requirements.New(v1.LabelCapacityReservationID, corev1.NodeSelectorOpIn, "cr-1"), [3]bool{true, false, false}},
	} {
		r := requirements.Requirements{}
		if tc.req != nil {
			r.Add(tc.req)
		}
		f := launch.NewOfferFilter(r)
		got := [3]bool{f.Allows(&odcr), f.Allows(&block), f.Allows(&od)}
		if got != tc.want {
			t.Errorf("%s: Allows(odcr, block, on-demand) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
