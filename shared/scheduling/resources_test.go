package scheduling

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func container(requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func sidecar(requests corev1.ResourceList) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	c := container(requests, nil)
	c.RestartPolicy = &always
	return c
}

// TestPodRequests follows Kubernetes' PodRequests (k8s.io/component-helpers
// resource), which Karpenter's RequestsForPods uses.
func TestPodRequests(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.PodSpec
		want map[string]int64 // cpu in millicores, memory in MiB
	}{
		{
			name: "should sum the requests of all containers",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				container(rl("cpu", "500m", "memory", "1Gi"), nil), container(rl("cpu", "250m", "memory", "256Mi"), nil)}},
			want: map[string]int64{"cpu": 750, "memory": 1280},
		},
		{
			name: "should take the largest init container when it exceeds the containers",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container(rl("cpu", "2", "memory", "512Mi"), nil), container(rl("cpu", "1", "memory", "3Gi"), nil)},
				Containers:     []corev1.Container{container(rl("cpu", "250m", "memory", "1Gi"), nil)}},
			want: map[string]int64{"cpu": 2000, "memory": 3072},
		},
		{
			name: "should add sidecars to the containers and to every later init step",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{sidecar(rl("cpu", "100m", "memory", "100Mi")), container(rl("cpu", "1", "memory", "100Mi"), nil)},
				Containers:     []corev1.Container{container(rl("cpu", "200m", "memory", "200Mi"), nil)}},
			// steady state 300m/300Mi; init step 100m+1 = 1100m, 200Mi
			want: map[string]int64{"cpu": 1100, "memory": 300},
		},
		{
			name: "should ignore a sidecar started after the init container",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container(rl("cpu", "1"), nil), sidecar(rl("cpu", "500m"))},
				Containers:     []corev1.Container{container(rl("cpu", "200m"), nil)}},
			want: map[string]int64{"cpu": 1000},
		},
		{
			name: "should add the pod overhead",
			spec: corev1.PodSpec{
				Overhead:   rl("cpu", "250m", "memory", "120Mi"),
				Containers: []corev1.Container{container(rl("cpu", "1", "memory", "1Gi"), nil)}},
			want: map[string]int64{"cpu": 1250, "memory": 1144},
		},
		{
			name: "should count limits as requests for a limits-only container",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("cpu", "300m", "memory", "64Mi"))}},
			want: map[string]int64{"cpu": 300, "memory": 64},
		},
		{
			name: "should prefer the request over the limit when both are set",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "100m"), rl("cpu", "2", "memory", "1Gi"))}},
			want: map[string]int64{"cpu": 100, "memory": 1024},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ri := newResourceIndex()
			v, missing := ri.podRequestVector(&tt.spec)
			if len(missing) > 0 {
				t.Fatalf("missing resources %v", missing)
			}
			got := map[string]int64{}
			if v[resCPU] != 0 {
				got["cpu"] = v[resCPU]
			}
			if v[resMemory] != 0 {
				got["memory"] = v[resMemory] >> 20
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("podRequests() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		give int64
		want string
	}{
		{give: 512, want: "512"},
		{give: 100 << 20, want: "100Mi"},
		{give: 6903 << 20, want: "6.7Gi"},
		{give: 3 << 39, want: "1.5Ti"},
		{give: 2 << 40, want: "2Ti"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := humanBytes(tt.give); got != tt.want {
				t.Errorf("humanBytes(%d) = %q, want %q", tt.give, got, tt.want)
			}
		})
	}
}

func TestResourceIndexRejectsTooManyNames(t *testing.T) {
	ri := newResourceIndex()
	list := corev1.ResourceList{}
	for i := 0; i < maxResources; i++ {
		list[corev1.ResourceName("example.com/r"+string(rune('a'+i)))] = resource.MustParse("1")
	}
	if err := ri.addAll(list); err == nil {
		t.Fatalf("addAll(%d extended resources) = nil, want an error", len(list))
	}
}

func TestPodRequestVectorReportsMissingResources(t *testing.T) {
	ri := newResourceIndex()
	spec := corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1", "example.com/fpga", "1"), nil)}}
	v, missing := ri.podRequestVector(&spec)
	if v[resCPU] != 1000 || len(missing) != 1 || missing[0] != "example.com/fpga" {
		t.Errorf("podRequestVector() = cpu %d, missing %v; want 1000 and [example.com/fpga]", v[resCPU], missing)
	}
}
