package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestExpectedPriceHasNoFloatNoise checks that a claim's expected price is
// the decimal price, without the noise of a derived float (on-demand x a
// spot ratio), so that the JSON plan reads 0.1324855, not
// 0.13248549999999998.
func TestExpectedPriceHasNoFloatNoise(t *testing.T) {
	tests := []struct {
		name  string
		price float64
		want  float64
	}{
		{name: "should drop float noise from a derived spot price", price: 0.37853 * 0.35, want: 0.1324855},
		{name: "should keep an exact catalog price", price: 0.096, want: 0.096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := st.InstanceType("m5.large", "2", "8Gi", "29", tt.price,
				st.TypeOfferings(catalog.Offering{Zone: "us-east-1a", CapacityType: v1.CapacityTypeSpot, Price: tt.price, Available: true}))
			in := st.Input([]v1.NodePool{st.NodePool("default")}, []*catalog.InstanceType{it}, []*corev1.Pod{st.Pod("web", st.Requests("1", "1Gi"))})
			res := solve(t, in)
			if len(res.NewClaims) != 1 {
				t.Fatalf("want one claim, got %d (unschedulable %v)", len(res.NewClaims), res.Unschedulable)
			}
			if got := res.NewClaims[0].Expected.PricePerHour; got != tt.want {
				t.Errorf("Expected.PricePerHour = %v, want %v", got, tt.want)
			}
		})
	}
}
