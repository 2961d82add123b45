package amifamily

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Resource types that carry the launch tags (karpenter-spec §1.5): the fleet,
// instance and volume through CreateFleet TagSpecifications, the launch
// template itself, and the network interfaces (and, for spot, the spot request)
// through the template's TagSpecifications. The strings are EC2 ResourceType
// values.
const (
	ResourceInstance             = "instance"
	ResourceVolume               = "volume"
	ResourceFleet                = "fleet"
	ResourceLaunchTemplate       = "launch-template"
	ResourceNetworkInterface     = "network-interface"
	ResourceSpotInstancesRequest = "spot-instances-request"
)

// LaunchTags returns the tags of every resource a launch creates: the node
// class's spec.tags, overlaid by kubernetes.io/cluster/<cluster>=owned,
// eks:eks-cluster-name=<cluster>, karpenter.sh/nodepool=<nodePool> and
// karpenter.k8s.aws/ec2nodeclass=<nodeClass> (aws: pkg/utils/utils.go
// GetTags; karpenter-spec §1.5), plus nodewright's ownership mark
// v1.TagKeyOwner=<cluster>, which Karpenter does not write. Ours win over a user tag of the same key,
// though ValidateTags rejects such keys beforehand. The result is a new map.
func LaunchTags(cluster, nodePool, nodeClass string, userTags map[string]string) map[string]string {
	out := make(map[string]string, len(userTags)+4)
	maps.Copy(out, userTags)
	out[v1.TagKeyClusterPrefix+cluster] = "owned"
	out[v1.TagKeyEKSClusterName] = cluster
	out[v1.TagKeyNodePool] = nodePool
	out[v1.TagKeyEC2NodeClass] = nodeClass
	out[v1.TagKeyOwner] = cluster
	return out
}

// RegistrationTags returns the tags an instance gains once its node has
// registered: Name=<node name>, karpenter.sh/nodeclaim=<claim> and
// eks:eks-cluster-name=<cluster> (aws: pkg/controllers/nodeclaim/tagging;
// karpenter-spec §1.5). The caller adds only the ones the instance lacks.
func RegistrationTags(cluster, nodeName, nodeClaim string) map[string]string {
	return map[string]string{
		v1.TagKeyName:           nodeName,
		v1.TagKeyNodeClaim:      nodeClaim,
		v1.TagKeyEKSClusterName: cluster,
	}
}

// EC2 tag limits (EC2 User Guide, "Tag restrictions").
const (
	maxTagKeyLen   = 128
	maxTagValueLen = 256
	maxTags        = 50
	// launchTagCount is how many tags LaunchTags adds to spec.tags.
	launchTagCount = 5
)

// ValidateTags checks spec.tags before a launch (karpenter-spec §1.3 and §4
// step 1): no empty key; none of the keys nodewright sets itself
// (eks:eks-cluster-name, kubernetes.io/cluster/*, karpenter.sh/nodepool,
// karpenter.sh/nodeclaim, karpenter.k8s.aws/ec2nodeclass); and EC2's own
// rules (no "aws:" prefix, keys up to 128 and values up to 256 characters,
// at most 45 user tags so that the five launch tags fit EC2's 50). The error
// names the first offending key as a field path (spec.tags["key"]), in key
// order.
func ValidateTags(tags map[string]string) error {
	if n := len(tags); n > maxTags-launchTagCount {
		return fmt.Errorf("spec.tags: %d tags, at most %d (EC2 allows %d per resource, %d are nodewright's)", n, maxTags-launchTagCount, maxTags, launchTagCount)
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		switch {
		case k == "":
			return fmt.Errorf("spec.tags: empty key")
		case RestrictedTag(k):
			return fmt.Errorf("spec.tags[%q]: restricted key, set by nodewright", k)
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return fmt.Errorf("spec.tags[%q]: the aws: prefix is reserved by AWS", k)
		case len(k) > maxTagKeyLen:
			return fmt.Errorf("spec.tags[%q]: key longer than %d characters", k, maxTagKeyLen)
		case len(tags[k]) > maxTagValueLen:
			return fmt.Errorf("spec.tags[%q]: value longer than %d characters", k, maxTagValueLen)
		}
	}
	return nil
}

// RestrictedTag reports whether key is one nodewright sets itself and users
// may not: the EC2NodeClass CRD's CEL rules (karpenter-spec §1.3), and the
// nodewright.dev domain of the ownership mark (v1.TagKeyOwner), so that no
// spec.tags can forge or hide it.
func RestrictedTag(key string) bool {
	switch key {
	case v1.TagKeyEKSClusterName, v1.TagKeyNodePool, v1.TagKeyNodeClaim, v1.TagKeyEC2NodeClass:
		return true
	}
	return strings.HasPrefix(key, "kubernetes.io/cluster") || strings.HasPrefix(key, "nodewright.dev/")
}
