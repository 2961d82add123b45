package schedulingtest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// The realistic workload runs on the full embedded EC2 catalog of one region.
// It is modelled on the seed manifests (a general c/m/r pool, a tainted Spot
// batch pool, plus an arm64 and a GPU pool) and on what a mid-size cluster
// runs: web and API Deployments with zone spread, workers, a memory-heavy
// JVM service spread one per node, three-replica caches with hostname
// anti-affinity, batch Jobs, an arm64 service, a GPU inference service and
// pods with a heavy init container; four DaemonSets (VPC CNI, kube-proxy, a
// log shipper, the NVIDIA device plugin on GPU nodes only).
const (
	// RealisticRegion is the region whose catalog and prices are used.
	RealisticRegion = "us-east-1"
	// RealisticSpotPriceRatio prices spot offerings at this fraction of
	// on-demand: an offline assumption (the embedded table has no spot
	// prices), a 65% discount, inside the 50-90% range AWS advertises.
	RealisticSpotPriceRatio = 0.35
)

// RealisticZones are the zones of the realistic EC2NodeClasses' subnets.
var RealisticZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// RealisticNodePools returns the workload's NodePools:
//   - general: c/m/r, generation > 5, amd64, spot and on-demand, weight 0;
//   - batch: c/m/r, generation > 5, spot only, taint workload=batch:NoSchedule,
//     weight 10 (tried first, by pods that tolerate it);
//   - arm64: c/m/r, generation > 6, arm64, spot and on-demand, weight 0;
//   - gpu: NVIDIA g types, on-demand, taint nvidia.com/gpu=true:NoSchedule,
//     EC2NodeClass "gpu".
func RealisticNodePools() []v1.NodePool {
	in, gt := corev1.NodeSelectorOpIn, corev1.NodeSelectorOpGt
	cmr := PoolRequirement(v1.LabelInstanceCategory, in, "c", "m", "r")
	return []v1.NodePool{
		NodePool("general", cmr, PoolRequirement(v1.LabelInstanceGeneration, gt, "5"),
			PoolRequirement(v1.LabelArch, in, "amd64"),
			PoolRequirement(v1.LabelCapacityType, in, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand),
			PoolLimits("cpu", "200000", "memory", "800000Gi")),
		NodePool("batch", cmr, PoolRequirement(v1.LabelInstanceGeneration, gt, "5"),
			PoolRequirement(v1.LabelArch, in, "amd64"),
			PoolRequirement(v1.LabelCapacityType, in, v1.CapacityTypeSpot),
			PoolTaint("workload", "batch", corev1.TaintEffectNoSchedule), PoolWeight(10),
			PoolLimits("cpu", "50000")),
		NodePool("arm64", cmr, PoolRequirement(v1.LabelInstanceGeneration, gt, "6"),
			PoolRequirement(v1.LabelArch, in, "arm64"),
			PoolRequirement(v1.LabelCapacityType, in, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand),
			PoolLimits("cpu", "50000")),
		NodePool("gpu", PoolNodeClass("gpu"), PoolRequirement(v1.LabelInstanceCategory, in, "g"),
			PoolRequirement(v1.LabelInstanceGPUManufacturer, in, "nvidia"),
			PoolRequirement(v1.LabelCapacityType, in, v1.CapacityTypeOnDemand),
			PoolTaint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule),
			PoolLimits("cpu", "20000")),
	}
}

// RealisticNodeClasses returns the EC2NodeClasses "default" and "gpu" (a
// 100Gi root volume), both AL2023 with subnets in RealisticZones.
func RealisticNodeClasses() []v1.EC2NodeClass {
	size := resource.MustParse("100Gi")
	dev, gp3 := "/dev/xvda", "gp3"
	gpu := EC2NodeClass("gpu", ClassZones(RealisticZones...), func(nc *v1.EC2NodeClass) {
		nc.Spec.BlockDeviceMappings = []*v1.BlockDeviceMapping{{
			DeviceName: &dev, EBS: &v1.BlockDevice{VolumeSize: &size, VolumeType: &gp3},
		}}
	})
	return []v1.EC2NodeClass{EC2NodeClass("default", ClassZones(RealisticZones...)), gpu}
}

// RealisticDaemonSets returns aws-node (25m CPU), kube-proxy (100m CPU) and
// fluent-bit (100m, 200Mi), which tolerate every taint, and
// nvidia-device-plugin (50m, 64Mi), which tolerates nvidia.com/gpu and
// requires karpenter.k8s.aws/instance-gpu-count to exist.
func RealisticDaemonSets() []appsv1.DaemonSet {
	all := Toleration("", "", "")
	return []appsv1.DaemonSet{
		DaemonSet("aws-node", Requests("25m", ""), all),
		DaemonSet("kube-proxy", Requests("100m", ""), all),
		DaemonSet("fluent-bit", Requests("100m", "200Mi"), all),
		DaemonSet("nvidia-device-plugin", Requests("50m", "64Mi"),
			Toleration("nvidia.com/gpu", "", corev1.TaintEffectNoSchedule),
			RequiredNodeAffinity(Term(Exists(v1.LabelInstanceGPUCount)))),
	}
}

// realisticGroup is one Deployment- or Job-like group of identical pods.
type realisticGroup struct {
	name     string
	replicas int
	opts     func(app string) []PodOption
}

var realisticGroups = []realisticGroup{
	{"web", 24, func(app string) []PodOption {
		return []PodOption{Requests("200m", "384Mi"), Container("envoy", "50m", "128Mi"),
			TopologySpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, map[string]string{"app": app})}
	}},
	{"api", 16, func(app string) []PodOption {
		return []PodOption{Requests("500m", "1Gi"),
			TopologySpread(v1.LabelTopologyZone, 1, corev1.ScheduleAnyway, map[string]string{"app": app}),
			PreferredPodAntiAffinity(100, v1.LabelHostname, map[string]string{"app": app})}
	}},
	{"worker", 12, func(string) []PodOption { return []PodOption{Requests("1", "2Gi")} }},
	{"jvm", 6, func(app string) []PodOption {
		return []PodOption{Requests("1500m", "6Gi"),
			TopologySpread(v1.LabelHostname, 1, corev1.DoNotSchedule, map[string]string{"app": app})}
	}},
	{"cache", 3, func(app string) []PodOption {
		return []PodOption{Requests("1", "8Gi"), PodAntiAffinity(v1.LabelHostname, map[string]string{"app": app})}
	}},
	{"batch", 16, func(string) []PodOption {
		return []PodOption{Requests("2", "4Gi"), Toleration("workload", "batch", corev1.TaintEffectNoSchedule)}
	}},
	{"arm", 8, func(string) []PodOption {
		return []PodOption{Requests("500m", "1Gi"), NodeSelector(map[string]string{v1.LabelArch: "arm64"})}
	}},
	{"infer", 1, func(string) []PodOption {
		return []PodOption{Requests("4", "16Gi"), Resources(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}),
			Toleration("nvidia.com/gpu", "", corev1.TaintEffectNoSchedule)}
	}},
	{"migrate", 6, func(string) []PodOption {
		return []PodOption{Requests("250m", "512Mi"), InitContainer("migrate", "2", "2Gi")}
	}},
}

// RealisticPods returns n pending pods: the groups below repeated in this
// order, each repetition c a new set of Deployments labelled
// app=<group>-<c>, the last one cut short at n. Per repetition (92 pods):
// 24 web (200m/384Mi + an envoy container 50m/128Mi, zone spread maxSkew 1
// DoNotSchedule), 16 api (500m/1Gi, zone spread ScheduleAnyway, preferred
// hostname anti-affinity), 12 worker (1/2Gi), 6 jvm (1500m/6Gi, hostname
// spread maxSkew 1), 3 cache (1/8Gi, required hostname anti-affinity), 16
// batch (2/4Gi, tolerate workload=batch), 8 arm (500m/1Gi, arch arm64), 1
// infer (4/16Gi and one nvidia.com/gpu, tolerates the GPU taint), 6 migrate
// (250m/512Mi after a 2/2Gi init container). Names are
// "<group>-<c>-<hash>-<i>" in namespace default.
func RealisticPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	for c := 0; len(pods) < n; c++ {
		for _, g := range realisticGroups {
			app := fmt.Sprintf("%s-%d", g.name, c)
			hash := string(UID("ReplicaSet", DefaultNamespace, app))[:8]
			for i := 0; i < g.replicas && len(pods) < n; i++ {
				opts := append([]PodOption{Labels(map[string]string{"app": app})}, g.opts(app)...)
				pods = append(pods, Pod(fmt.Sprintf("%s-%s-%d", app, hash, i), opts...))
			}
		}
	}
	return pods
}

// RealisticInput resolves the realistic node classes against the embedded
// catalog (catalog.Resolve, region RealisticRegion, zones RealisticZones,
// spot at RealisticSpotPriceRatio) and returns the snapshot for n pods at
// Epoch with an empty cluster. The error is catalog.Resolve's.
func RealisticInput(n int) (scheduling.Input, error) {
	in := scheduling.Input{
		Now:           Epoch,
		NodePools:     RealisticNodePools(),
		NodeClasses:   RealisticNodeClasses(),
		InstanceTypes: map[string][]*catalog.InstanceType{},
		Pods:          RealisticPods(n),
		DaemonSets:    RealisticDaemonSets(),
	}
	for i := range in.NodeClasses {
		nc := &in.NodeClasses[i]
		types, _, err := catalog.Resolve(nc, catalog.Options{
			Region: RealisticRegion, Zones: RealisticZones, SpotPriceRatio: RealisticSpotPriceRatio,
		})
		if err != nil {
			return scheduling.Input{}, fmt.Errorf("resolve instance types of %s: %w", nc.Name, err)
		}
		in.InstanceTypes[nc.Name] = types
	}
	return in, nil
}
