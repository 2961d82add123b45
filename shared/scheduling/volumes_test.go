package scheduling_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

func withVolumes(v scheduling.Volumes) st.InputOption {
	return func(in *scheduling.Input) { in.Volumes = v }
}

func TestSolveVolumeTopology(t *testing.T) {
	pool := st.NodePool("default")
	immediate := st.ZonalClass("immediate", "us-east-1a")
	imm := storagev1.VolumeBindingImmediate
	immediate.VolumeBindingMode = &imm
	deleting := st.UnboundClaim("default", "data-deleting", "zonal-b")
	deleting.DeletionTimestamp = &metav1.Time{}
	lost := st.BoundClaim("default", "data-lost", "pv-lost")
	lost.Status.Phase = corev1.ClaimLost
	halfBound := st.BoundClaim("default", "data-half", "pv-b")
	halfBound.Annotations = nil
	noClass := st.UnboundClaim("default", "data-noclass", "")
	local := st.ZonalVolume("pv-local", "us-east-1c")
	local.Spec.CSI = nil
	local.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disks/1"}
	local.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions = append(local.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions,
		st.In(v1.LabelHostname, "ip-10-0-0-9"))
	vols := scheduling.Volumes{
		Claims: []corev1.PersistentVolumeClaim{
			st.BoundClaim("default", "data-b", "pv-b"), st.UnboundClaim("default", "data-c", "zonal-c"),
			st.UnboundClaim("default", "data-imm", "immediate"), st.UnboundClaim("default", "data-gone", "no-such-class"),
			st.BoundClaim("default", "data-orphan", "no-such-pv"), st.BoundClaim("default", "data-local", "pv-local"),
			st.UnboundClaim("default", "data-any", "anywhere"),
			deleting, lost, halfBound, noClass,
		},
		PersistentVolumes: []corev1.PersistentVolume{st.ZonalVolume("pv-b", "us-east-1b"), local},
		StorageClasses:    []storagev1.StorageClass{st.ZonalClass("zonal-b", "us-east-1b"), st.ZonalClass("zonal-c", "us-east-1c"), immediate, st.ZonalClass("anywhere")},
	}
	vols.StorageClasses[3].AllowedTopologies = nil
	tests := []struct {
		name string
		pods []*corev1.Pod
		want view
	}{
		{
			name: "should launch in the zone of a pod's bound zonal PersistentVolume",
			pods: []*corev1.Pod{st.Pod("db-0", st.Requests("1", "1Gi"), st.WithClaim("data-b"))},
			want: view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1b", Capacity: "on-demand", Pods: []string{"db-0"}}}, Placements: map[string]string{}, Unschedulable: map[string]string{}},
		},
		{
			name: "should launch in the allowed zone of an unbound claim's WaitForFirstConsumer StorageClass",
			pods: []*corev1.Pod{st.Pod("db-0", st.Requests("1", "1Gi"), st.WithClaim("data-c"))},
			want: view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1c", Capacity: "on-demand", Pods: []string{"db-0"}}}, Placements: map[string]string{}, Unschedulable: map[string]string{}},
		},
		{
			name: "should put pods whose volumes are in different zones on different nodes",
			pods: []*corev1.Pod{st.Pod("db-0", st.Requests("500m", "1Gi"), st.WithClaim("data-b")), st.Pod("db-1", st.Requests("500m", "1Gi"), st.WithClaim("data-c"))},
			want: view{Claims: []claimView{
				{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1b", Capacity: "on-demand", Pods: []string{"db-0"}},
				{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1c", Capacity: "on-demand", Pods: []string{"db-1"}},
			}, Placements: map[string]string{}, Unschedulable: map[string]string{}},
		},
		{
			name: "should drop a local volume's hostname requirement and keep its zone",
			pods: []*corev1.Pod{st.Pod("db-0", st.Requests("1", "1Gi"), st.WithClaim("data-local"))},
			want: view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1c", Capacity: "on-demand", Pods: []string{"db-0"}}}, Placements: map[string]string{}, Unschedulable: map[string]string{}},
		},
		{
			name: "should add nothing for a StorageClass without allowedTopologies",
			pods: []*corev1.Pod{st.Pod("db-0", st.Requests("1", "1Gi"), st.WithClaim("data-any"))},
			want: view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"db-0"}}}, Placements: map[string]string{}, Unschedulable: map[string]string{}},
		},
		{
			name: "should explain a volume zone the pod's own zone selector excludes",
			pods: []*corev1.Pod{st.Pod("db-0", st.Requests("1", "1Gi"), st.WithClaim("data-b"), st.NodeSelector(map[string]string{v1.LabelTopologyZone: "us-east-1a"}))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{pool}, tt.pods, withVolumes(vols))
			got := viewOf(in, solve(t, in))
			if tt.want.Claims == nil {
				if len(got.Claims) != 0 || len(got.Unschedulable) != 1 {
					t.Fatalf("plan %+v, want the pod unschedulable", got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}

	reasons := []struct {
		name  string
		claim string
		want  string
	}{
		{"should leave a pod pending whose claim does not exist, naming it", "data-missing",
			`waiting for volumes: PersistentVolumeClaim default/data-missing (volume "data") does not exist`},
		{"should leave a pod pending whose StorageClass does not exist, naming it", "data-gone",
			`waiting for volumes: StorageClass "no-such-class" of PersistentVolumeClaim default/data-gone (volume "data") does not exist`},
		{"should leave a pod pending whose bound PersistentVolume does not exist, naming it", "data-orphan",
			`waiting for volumes: PersistentVolume "no-such-pv" of PersistentVolumeClaim default/data-orphan (volume "data") does not exist`},
		{"should leave a pod pending whose unbound claim's class binds Immediately", "data-imm",
			`waiting for volumes: PersistentVolumeClaim default/data-imm (volume "data") is unbound and StorageClass "immediate" binds Immediately (its provisioner binds the claim before the pod can be scheduled)`},
		{"should leave a pod pending whose claim is being deleted", "data-deleting",
			`waiting for volumes: PersistentVolumeClaim default/data-deleting (volume "data") is being deleted`},
		{"should leave a pod pending whose claim is Lost", "data-lost",
			`waiting for volumes: PersistentVolumeClaim default/data-lost (volume "data") is Lost (its PersistentVolume is gone)`},
		{"should leave a pod pending whose claim is bound without bind-completed", "data-half",
			`waiting for volumes: PersistentVolumeClaim default/data-half (volume "data") is not fully bound yet (no pv.kubernetes.io/bind-completed annotation)`},
		{"should leave a pod pending whose unbound claim names no StorageClass", "data-noclass",
			`waiting for volumes: PersistentVolumeClaim default/data-noclass (volume "data") is unbound and names no storageClassName`},
	}
	for _, tt := range reasons {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{pool}, []*corev1.Pod{st.Pod("db-0", st.Requests("1", "1Gi"), st.WithClaim(tt.claim))}, withVolumes(vols))
			if got := reasonOf(t, solve(t, in)); got != tt.want {
				t.Errorf("reason = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSolveVolumeTopologyOnExistingNodes(t *testing.T) {
	pool := st.NodePool("default")
	vols := scheduling.Volumes{
		Claims:            []corev1.PersistentVolumeClaim{st.BoundClaim("default", "data-b", "pv-b")},
		PersistentVolumes: []corev1.PersistentVolume{st.ZonalVolume("pv-b", "us-east-1b")},
	}
	types := testTypes()
	nodeA := st.Existing(st.Node("node-a", st.NodeType(types[4], "us-east-1a", v1.CapacityTypeOnDemand), st.ManagedBy("default")))
	nodeB := st.Existing(st.Node("node-b", st.NodeType(types[4], "us-east-1b", v1.CapacityTypeOnDemand), st.ManagedBy("default")))
	in := input([]v1.NodePool{pool}, []*corev1.Pod{st.Pod("db-0", st.Requests("1", "1Gi"), st.WithClaim("data-b"))},
		withVolumes(vols), st.WithNodes(nodeA, nodeB))
	got := viewOf(in, solve(t, in))
	want := view{Placements: map[string]string{"db-0": "node-b"}, Unschedulable: map[string]string{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("should place a pod with a zonal volume on the existing node in its zone (-want +got):\n%s", diff)
	}
}

func TestSolveCSIAttachLimitsOnExistingNodes(t *testing.T) {
	const ebs, efs = "ebs.csi.aws.com", "efs.csi.aws.com"
	efsClass := st.ZonalClass("efs", "us-east-1a")
	efsClass.Provisioner = efs
	vols := scheduling.Volumes{
		Claims: []corev1.PersistentVolumeClaim{
			st.BoundClaim("default", "data-0", "pv-0"), st.UnboundClaim("default", "data-1", "zonal-a"),
			st.UnboundClaim("default", "data-2", "zonal-a"), st.UnboundClaim("default", "shared", "efs"),
		},
		PersistentVolumes: []corev1.PersistentVolume{st.ZonalVolume("pv-0", "us-east-1a")},
		StorageClasses:    []storagev1.StorageClass{st.ZonalClass("zonal-a", "us-east-1a"), efsClass},
	}
	types := testTypes()
	// node-a runs db-0, whose claim data-0 is an attached EBS volume.
	bound := st.Pod("db-0", st.Requests("100m", "128Mi"), st.WithClaim("data-0"))
	for _, tc := range []struct {
		name   string
		limits map[string]int
		pods   []*corev1.Pod
		// onNode are the pods placed on node-a; the others get a new NodeClaim.
		onNode []string
	}{
		{
			name:   "should not place a pod on a node whose EBS attach limit its claim would exceed",
			limits: map[string]int{ebs: 1},
			pods:   []*corev1.Pod{st.Pod("db-1", st.Requests("1", "1Gi"), st.WithClaim("data-1"))},
		},
		{
			name:   "should place a pod on a node with room under its EBS attach limit",
			limits: map[string]int{ebs: 2},
			pods:   []*corev1.Pod{st.Pod("db-1", st.Requests("1", "1Gi"), st.WithClaim("data-1"))},
			onNode: []string{"db-1"},
		},
		{
			name:   "should count a claim already attached to the node once",
			limits: map[string]int{ebs: 1},
			pods:   []*corev1.Pod{st.Pod("reader", st.Requests("1", "1Gi"), st.WithClaim("data-0"))},
			onNode: []string{"reader"},
		},
		{
			name:   "should count only the claims of the limited driver",
			limits: map[string]int{ebs: 1, efs: 5},
			pods:   []*corev1.Pod{st.Pod("web", st.Requests("1", "1Gi"), st.WithClaim("shared"))},
			onNode: []string{"web"},
		},
		{
			name:   "should count the volumes of pods placed on the node earlier in the solve",
			limits: map[string]int{ebs: 2},
			pods: []*corev1.Pod{
				// Larger first: db-1 is placed before db-2.
				st.Pod("db-1", st.Requests("1500m", "1Gi"), st.WithClaim("data-1")),
				st.Pod("db-2", st.Requests("1", "1Gi"), st.WithClaim("data-2")),
			},
			onNode: []string{"db-1"},
		},
		{
			name:   "should count every new claim of one pod",
			limits: map[string]int{ebs: 2},
			pods:   []*corev1.Pod{st.Pod("db-12", st.Requests("1", "1Gi"), st.WithClaimAs("a", "data-1"), st.WithClaimAs("b", "data-2"))},
		},
		{
			name:   "should not limit a node without CSINode limits",
			pods:   []*corev1.Pod{st.Pod("db-1", st.Requests("1", "1Gi"), st.WithClaim("data-1"))},
			onNode: []string{"db-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodeA := st.Existing(st.Node("node-a", st.NodeType(types[4], "us-east-1a", v1.CapacityTypeOnDemand), st.ManagedBy("default")), bound)
			nodeA.VolumeLimits = tc.limits
			in := input([]v1.NodePool{st.NodePool("default")}, tc.pods, withVolumes(vols), st.WithNodes(nodeA))
			got := viewOf(in, solve(t, in))
			want := map[string]string{}
			for _, p := range tc.onNode {
				want[p] = "node-a"
			}
			if diff := cmp.Diff(want, got.Placements); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			var inClaims int
			for _, c := range got.Claims {
				inClaims += len(c.Pods)
			}
			if want := len(tc.pods) - len(tc.onNode); inClaims != want || len(got.Unschedulable) != 0 {
				t.Errorf("pods on new NodeClaims = %d, unschedulable %v; want %d and none", inClaims, got.Unschedulable, want)
			}
		})
	}
}
