package launch_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

func TestTenancyIsDefaultUnlessOnlyDedicatedIsAllowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		reqs requirements.Requirements
		want string
	}{
		{"should launch default tenancy without a requirement", requirements.NewRequirements(), launch.TenancyDefault},
		{"should launch default tenancy when both are allowed", requirements.NewRequirements(requirements.New(v1.LabelInstanceTenancy, corev1.NodeSelectorOpIn, "default", "dedicated")), launch.TenancyDefault},
		{"should launch default tenancy for Exists", requirements.NewRequirements(requirements.New(v1.LabelInstanceTenancy, corev1.NodeSelectorOpExists)), launch.TenancyDefault},
		{"should launch dedicated tenancy for In [dedicated]", requirements.NewRequirements(requirements.New(v1.LabelInstanceTenancy, corev1.NodeSelectorOpIn, "dedicated")), launch.TenancyDedicated},
		{"should launch dedicated tenancy for NotIn [default]", requirements.NewRequirements(requirements.New(v1.LabelInstanceTenancy, corev1.NodeSelectorOpNotIn, "default")), launch.TenancyDedicated},
	} {
		if got := launch.Tenancy(tc.reqs); got != tc.want {
			t.Errorf("%s: Tenancy() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
