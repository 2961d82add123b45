package kwoknode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func launchOptions() amifamily.Options {
	return amifamily.Options{
		ClusterName:     "local",
		ClusterEndpoint: "https://127.0.0.1:6443",
		CABundle:        "Y2EtYnVuZGxlCg==",
		ClusterCIDR:     "10.100.0.0/16",
		MaxPods:         58,
		Labels: map[string]string{
			v1.LabelNodePool:     "default",
			v1.LabelCapacityType: "spot",
			"team":               "a",
		},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
	}
}

func TestParseUserDataReadsBackWhatEveryFamilyWrites(t *testing.T) {
	want := Launch{
		Labels: map[string]string{
			v1.LabelNodePool:                  "default",
			v1.LabelCapacityType:              "spot",
			"team":                            "a",
			"karpenter.sh/do-not-sync-taints": "true",
		},
		Taints: []corev1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute},
		},
		MaxPods: 58,
	}
	sortTaints := cmpopts.SortSlices(func(a, b corev1.Taint) bool { return a.Key < b.Key })
	for _, family := range []amifamily.Family{amifamily.AL2023, amifamily.AL2, amifamily.Bottlerocket} {
		t.Run(string(family), func(t *testing.T) {
			data, err := family.UserData(launchOptions())
			if err != nil {
				t.Fatalf("UserData() error = %v", err)
			}
			got, err := ParseUserData([]byte(data))
			if err != nil {
				t.Fatalf("ParseUserData() error = %v", err)
			}
			if diff := cmp.Diff(want, got, sortTaints); diff != "" {
				t.Errorf("ParseUserData() mismatch (-want +got):\n%s\nuser data:\n%s", diff, data)
			}
		})
	}
}

func TestParseUserDataRejectsMalformedSettings(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{name: "should reject a label without a value", data: "--kubelet-extra-args '--node-labels=team'"},
		{name: "should reject a taint without an effect", data: "--register-with-taints=dedicated=gpu"},
		{name: "should reject max pods that is not a number", data: "--max-pods=many"},
		{name: "should reject bottlerocket max pods that is not a number", data: "[settings.kubernetes]\nmax-pods = \"x\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := ParseUserData([]byte(tt.data)); err == nil {
				t.Errorf("ParseUserData() = %+v, want an error", got)
			}
		})
	}
}
