package disruption

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// Drift reasons, Karpenter's values of the Drifted condition's reason
// (karpenter: pkg/controllers/nodeclaim/disruption/drift.go; aws:
// pkg/cloudprovider/drift.go).
const (
	DriftNodePool            = "NodePoolDrifted"
	DriftRequirements        = "RequirementsDrifted"
	DriftInstanceTypeMissing = "InstanceTypeNotFound"
	DriftNodeClass           = "NodeClassDrift"
	DriftAMI                 = "AMIDrift"
	DriftSecurityGroup       = "SecurityGroupDrift"
	DriftSubnet              = "SubnetDrift"
	DriftCapacityReservation = "CapacityReservationDrift"
	DriftPlacementGroup      = "PlacementGroupDrift"
)

// instanceTypeDriftAge is how old a NodeClaim must be before a missing
// instance type drifts it (karpenter-spec §7).
const instanceTypeDriftAge = time.Hour

// driftOf returns the first drift reason that applies to n, with a
// sentence saying what changed, in Karpenter's order: NodePool static hash,
// requirements, instance type, EC2NodeClass static hash, AMI, security
// groups, subnet, capacity reservation, placement group (karpenter-spec
// §7). Only launched NodeClaims drift. Checks whose data is missing (no
// hash annotations, no resolved AMIs, subnets or security groups in the
// EC2NodeClass status, no Instance entry, a status.capacityReservations
// not resolved for the class's generation, a placement group selector not
// resolved) do not drift anything, as Karpenter skips them.
func (e *evaluation) driftOf(n *node) (reason, detail string, err error) {
	c := n.claim
	if !meta.IsStatusConditionTrue(c.Status.Conditions, v1.ConditionTypeLaunched) && c.Status.ProviderID == "" {
		return "", "", nil
	}
	if r, d, err := e.nodePoolDrift(n); err != nil || r != "" {
		return r, d, err
	}
	if err := requirements.FromLabels(c.Labels).StrictlyCompatible(requirements.FromNodeSelector(n.pool.Spec.Template.Spec.Requirements)); err != nil {
		return DriftRequirements, fmt.Sprintf("its labels no longer satisfy NodePool %s's requirements: %v", n.pool.Name, err), nil
	}
	if r, d := e.instanceTypeDrift(n); r != "" {
		return r, d, nil
	}
	if n.class == nil {
		return "", "", nil
	}
	if r, d, err := e.nodeClassDrift(n); err != nil || r != "" {
		return r, d, err
	}
	inst, haveInst := e.instances[c.Status.ProviderID]
	if r, d := e.amiDrift(n, inst); r != "" {
		return r, d, nil
	}
	if haveInst {
		if r, d := securityGroupDrift(n.class, inst); r != "" {
			return r, d, nil
		}
		if r, d := subnetDrift(n.class, inst); r != "" {
			return r, d, nil
		}
	}
	if r, d := e.capacityReservationDrift(n); r != "" {
		return r, d, nil
	}
	if r, d := placementGroupDrift(n); r != "" {
		return r, d, nil
	}
	return "", "", nil
}

// placementGroupDrift: the NodeClaim's karpenter.k8s.aws/placement-group-id
// label is not the ID of the group its EC2NodeClass resolves to now ("" on
// both sides without a group), so adding, removing or re-pointing
// spec.placementGroupSelector drifts (aws: pkg/cloudprovider/drift.go
// isPlacementGroupDrifted). A selector whose group is not resolved
// (status.placementGroup nil: not found, or not looked up) says nothing.
func placementGroupDrift(n *node) (string, string) {
	want := ""
	if n.class.Spec.PlacementGroupSelector != nil {
		if n.class.Status.PlacementGroup == nil {
			return "", ""
		}
		want = n.class.Status.PlacementGroup.ID
	}
	got := n.claim.Labels[v1.LabelPlacementGroupID]
	if got == want {
		return "", ""
	}
	switch {
	case want == "":
		return DriftPlacementGroup, fmt.Sprintf("it runs in placement group %s and EC2NodeClass %s selects none", got, n.class.Name)
	case got == "":
		return DriftPlacementGroup, fmt.Sprintf("EC2NodeClass %s selects placement group %s and it runs in none", n.class.Name, want)
	}
	return DriftPlacementGroup, fmt.Sprintf("it runs in placement group %s and EC2NodeClass %s selects %s", got, n.class.Name, want)
}

// nodePoolDrift compares the NodeClaim's karpenter.sh/nodepool-hash with
// the pool's current hash when both carry version v3; a NodeClaim without
// the annotations, or stamped under another version, never drifts here.
func (e *evaluation) nodePoolDrift(n *node) (string, string, error) {
	got, ok1 := n.claim.Annotations[v1.AnnotationNodePoolHash]
	ver, ok2 := n.claim.Annotations[v1.AnnotationNodePoolHashVersion]
	if !ok1 || !ok2 || ver != v1.NodePoolHashVersion {
		return "", "", nil
	}
	want, err := e.nodePoolHash(n.pool)
	if err != nil {
		return "", "", err
	}
	if got == want {
		return "", "", nil
	}
	return DriftNodePool, fmt.Sprintf("NodePool %s's template changed (hash %s, the NodeClaim has %s)", n.pool.Name, want, got), nil
}

func (e *evaluation) nodePoolHash(np *v1.NodePool) (string, error) {
	if h, ok := e.poolHash[np.Name]; ok {
		return h, nil
	}
	h, err := NodePoolHash(np)
	if err != nil {
		return "", err
	}
	e.poolHash[np.Name] = h
	return h, nil
}

func (e *evaluation) nodeClassHash(nc *v1.EC2NodeClass) (string, string, error) {
	if h, ok := e.classHash[nc.Name]; ok {
		return h[0], h[1], nil
	}
	h, ver, err := EC2NodeClassHash(nc, e.in.Options.ClusterCABundle)
	if err != nil {
		return "", "", err
	}
	e.classHash[nc.Name] = [2]string{h, ver}
	return h, ver, nil
}

// nodeClassDrift compares the NodeClaim's karpenter.k8s.aws/ec2nodeclass-
// hash with the class's current hash when both carry the same version.
func (e *evaluation) nodeClassDrift(n *node) (string, string, error) {
	got, ok1 := n.claim.Annotations[v1.AnnotationEC2NodeClassHash]
	gotVer, ok2 := n.claim.Annotations[v1.AnnotationEC2NodeClassHashVersion]
	if !ok1 || !ok2 {
		return "", "", nil
	}
	want, ver, err := e.nodeClassHash(n.class)
	if err != nil {
		return "", "", err
	}
	if gotVer != ver || got == want {
		return "", "", nil
	}
	return DriftNodeClass, fmt.Sprintf("EC2NodeClass %s's spec changed (hash %s, the NodeClaim has %s)", n.class.Name, want, got), nil
}

// instanceTypeDrift: a NodeClaim older than an hour whose instance type is
// no longer offered, or has no offering in its zone and capacity type (a
// reserved NodeClaim also matches on-demand).
func (e *evaluation) instanceTypeDrift(n *node) (string, string) {
	if e.now.Sub(n.claim.CreationTimestamp.Time) <= instanceTypeDriftAge || n.types == nil {
		return "", ""
	}
	name := n.claim.Labels[v1.LabelInstanceType]
	if name == "" {
		name = n.labels[v1.LabelInstanceType]
	}
	if n.it == nil {
		return DriftInstanceTypeMissing, fmt.Sprintf("instance type %q is no longer among EC2NodeClass %s's instance types", name, n.className)
	}
	zone, ct := n.labels[v1.LabelTopologyZone], n.labels[v1.LabelCapacityType]
	for _, o := range n.it.Offerings {
		if (zone == "" || o.Zone == zone) && (ct == "" || o.CapacityType == ct || (ct == v1.CapacityTypeReserved && o.CapacityType == v1.CapacityTypeOnDemand)) {
			return "", ""
		}
	}
	return DriftInstanceTypeMissing, fmt.Sprintf("instance type %s has no %s offering in %s any more", name, ct, zone)
}

// amiDrift: the instance's image is not the AMI the EC2NodeClass status
// now maps to its instance type, the first status AMI whose requirements
// the type satisfies (aws: amifamily.MapToInstanceTypes). So a newer AMI
// behind an alias, a re-pointed tag or a changed selector all drift.
func (e *evaluation) amiDrift(n *node, inst Instance) (string, string) {
	image := inst.ImageID
	if image == "" {
		image = n.claim.Status.ImageID
	}
	if image == "" || n.it == nil || len(n.class.Status.AMIs) == 0 {
		return "", ""
	}
	typeReqs := requirements.FromInstanceLabels(n.it.Labels, v1.WellKnownLabels)
	for _, ami := range n.class.Status.AMIs {
		if typeReqs.Compatible(requirements.FromNodeSelector(ami.Requirements)) != nil {
			continue
		}
		if ami.ID == image {
			return "", ""
		}
		return DriftAMI, fmt.Sprintf("image %s is not the AMI EC2NodeClass %s now selects for %s (%s)", image, n.class.Name, n.it.Name, ami.ID)
	}
	return DriftAMI, fmt.Sprintf("image %s: EC2NodeClass %s selects no AMI for %s any more", image, n.class.Name, n.it.Name)
}

// securityGroupDrift: the instance's security groups differ from those the
// EC2NodeClass status lists.
func securityGroupDrift(nc *v1.EC2NodeClass, inst Instance) (string, string) {
	if len(nc.Status.SecurityGroups) == 0 || inst.SecurityGroupIDs == nil {
		return "", ""
	}
	want := make([]string, 0, len(nc.Status.SecurityGroups))
	for _, sg := range nc.Status.SecurityGroups {
		want = append(want, sg.ID)
	}
	got := append([]string(nil), inst.SecurityGroupIDs...)
	sort.Strings(want)
	sort.Strings(got)
	want, got = slices.Compact(want), slices.Compact(got)
	if slices.Equal(want, got) {
		return "", ""
	}
	return DriftSecurityGroup, fmt.Sprintf("instance security groups [%s] differ from those EC2NodeClass %s selects [%s]", strings.Join(got, ", "), nc.Name, strings.Join(want, ", "))
}

// subnetDrift: the instance's subnet is no longer among the EC2NodeClass
// status subnets.
func subnetDrift(nc *v1.EC2NodeClass, inst Instance) (string, string) {
	if len(nc.Status.Subnets) == 0 || inst.SubnetID == "" {
		return "", ""
	}
	for _, s := range nc.Status.Subnets {
		if s.ID == inst.SubnetID {
			return "", ""
		}
	}
	return DriftSubnet, fmt.Sprintf("subnet %s is no longer selected by EC2NodeClass %s", inst.SubnetID, nc.Name)
}
