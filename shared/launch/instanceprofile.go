package launch

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// The instance profiles nodewright creates for an EC2NodeClass's
// spec.role, as Karpenter does (karpenter-spec §7, "Instance profile for
// role"): one per (class, role), named InstanceProfileName, under
// InstanceProfilePath, tagged with InstanceProfileTags. nodewright's path
// starts "/nodewright/" where Karpenter's starts "/karpenter/", so the two
// never share a profile and the IAM grants can be scoped to nodewright's
// path (infra/nodewright iam.go).

// InstanceProfileRoot is the first segment of every path nodewright
// creates an instance profile under.
const InstanceProfileRoot = "/nodewright/"

// InstanceProfileGrace is how long a superseded profile of a live class
// (its role changed) is kept after its creation when no NodeClaim names
// it, as Karpenter protects the old profile for an hour.
const InstanceProfileGrace = time.Hour

// InstanceProfileName is the name of the instance profile of class uid in
// region with role: "<cluster>_<decimal FNV-64a of region/uid/role>" (at
// most 100+1+20 characters, within IAM's 128). It is deterministic, so a
// retried or concurrent resolution finds the profile another made, and a
// role change gives a new name (and the static drift hash, which holds
// spec.role, drifts the class's NodeClaims).
func InstanceProfileName(cluster, region, uid, role string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(region + "/" + uid + "/" + role))
	return cluster + "_" + strconv.FormatUint(h.Sum64(), 10)
}

// InstanceProfilePathPrefix is the path prefix of every profile nodewright
// creates for cluster in region: "/nodewright/<region>/<cluster>/".
func InstanceProfilePathPrefix(region, cluster string) string {
	return InstanceProfileRoot + region + "/" + cluster + "/"
}

// InstanceProfilePath is the path of class uid's profiles:
// "/nodewright/<region>/<cluster>/<uid>/".
func InstanceProfilePath(region, cluster, uid string) string {
	return InstanceProfilePathPrefix(region, cluster) + uid + "/"
}

// InstanceProfileTags are the tags of class nc's profile: its spec.tags,
// then kubernetes.io/cluster/<cluster>=owned, eks:eks-cluster-name,
// karpenter.k8s.aws/ec2nodeclass, topology.kubernetes.io/region (Karpenter's
// set) and nodewright's ownership mark (v1.TagKeyOwner), which the IAM
// grants on profiles require.
func InstanceProfileTags(cluster, region string, nc v1.EC2NodeClass) map[string]string {
	out := maps.Clone(nc.Spec.Tags)
	if out == nil {
		out = map[string]string{}
	}
	out[v1.TagKeyClusterPrefix+cluster] = "owned"
	out[v1.TagKeyEKSClusterName] = cluster
	out[v1.TagKeyEC2NodeClass] = nc.Name
	out[v1.LabelTopologyRegion] = region
	out[v1.TagKeyOwner] = cluster
	return out
}

// NodeRoles are the node roles a deployment allows an EC2NodeClass's
// spec.role to name: the listed role ARNs, and any role whose IAM path
// starts with PathPrefix. The zero value allows none.
type NodeRoles struct {
	// ARNs are role ARNs ("arn:aws:iam::111122223333:role/path/Name").
	ARNs []string
	// PathPrefix, when set, is an IAM path prefix ("/nodes/").
	PathPrefix string
}

// ParseNodeRoles reads the deployment's NODE_ROLE_ARNS (comma-separated
// role ARNs) and NODE_ROLE_PATH_PREFIX settings. Errors name the setting:
// an entry that is not an IAM role ARN, a prefix not starting and ending
// with "/".
func ParseNodeRoles(arns, pathPrefix string) (NodeRoles, error) {
	var r NodeRoles
	var errs []error
	for a := range strings.SplitSeq(arns, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, ok := roleARNParts(a); !ok {
			errs = append(errs, fmt.Errorf("NODE_ROLE_ARNS: %q: not an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)", a))
			continue
		}
		r.ARNs = append(r.ARNs, a)
	}
	if pathPrefix != "" && (!strings.HasPrefix(pathPrefix, "/") || !strings.HasSuffix(pathPrefix, "/")) {
		errs = append(errs, fmt.Errorf("NODE_ROLE_PATH_PREFIX: %q: must begin and end with /", pathPrefix))
	}
	r.PathPrefix = pathPrefix
	return r, errors.Join(errs...)
}

// roleARNParts splits a role ARN into its path ("/" at least) and name.
func roleARNParts(arn string) (path, name string, ok bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" || !strings.HasPrefix(parts[5], "role/") {
		return "", "", false
	}
	res := strings.TrimPrefix(parts[5], "role")
	i := strings.LastIndex(res, "/")
	path, name = res[:i+1], res[i+1:]
	return path, name, name != ""
}

// Allows reports whether the role with this ARN (as IAM's GetRole reports
// it) may back a class's instance profile: it is listed, or its path is
// under PathPrefix.
func (r NodeRoles) Allows(roleARN string) bool {
	if slices.Contains(r.ARNs, roleARN) {
		return true
	}
	path, _, ok := roleARNParts(roleARN)
	return ok && r.PathPrefix != "" && strings.HasPrefix(path, r.PathPrefix)
}

// String describes the allowed roles for a condition message.
func (r NodeRoles) String() string {
	var parts []string
	if len(r.ARNs) > 0 {
		parts = append(parts, "roles "+strings.Join(r.ARNs, ", "))
	}
	if r.PathPrefix != "" {
		parts = append(parts, "roles under path "+r.PathPrefix)
	}
	if len(parts) == 0 {
		return "no role"
	}
	return strings.Join(parts, " and ")
}

// InstanceProfile is one instance profile as IAM reports it.
type InstanceProfile struct {
	Name, Path string
	Created    time.Time
	// Roles are the names of its roles (IAM allows one).
	Roles []string
	Tags  map[string]string
}

// ProfileGCInput is a snapshot for PlanInstanceProfileCleanup.
type ProfileGCInput struct {
	Now             time.Time
	Cluster, Region string
	// Profiles are those listed under InstanceProfilePathPrefix.
	Profiles []InstanceProfile
	// NodeClasses are the cluster's EC2NodeClasses (configuration).
	NodeClasses []v1.EC2NodeClass
	// InUse are the instance profile names the NodeClaims name
	// (v1.AnnotationInstanceProfileName).
	InUse []string
}

// ProfileCleanup is one profile to delete: its roles removed first.
type ProfileCleanup struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles,omitempty"`
	// Reason is "nodeclass-deleted" or "superseded".
	Reason string `json:"reason"`
}

// PlanInstanceProfileCleanup returns the profiles to delete: those under
// nodewright's path for the cluster and carrying its ownership mark (no
// other is ever touched) that no NodeClaim names, and whose class (the UID
// in the path) is gone, or, for a live class, that are not its current
// profile (spec.role changed) and older than InstanceProfileGrace. Order:
// by name.
func PlanInstanceProfileCleanup(in ProfileGCInput) []ProfileCleanup {
	prefix := InstanceProfilePathPrefix(in.Region, in.Cluster)
	current := map[string]string{} // class UID → current profile name
	for _, nc := range in.NodeClasses {
		name := ""
		if nc.Spec.Role != "" && nc.Spec.InstanceProfile == nil {
			name = InstanceProfileName(in.Cluster, in.Region, string(nc.UID), nc.Spec.Role)
		}
		current[string(nc.UID)] = name
	}
	var out []ProfileCleanup
	for _, p := range in.Profiles {
		if !strings.HasPrefix(p.Path, prefix) || !v1.OwnedBy(p.Tags, in.Cluster) || slices.Contains(in.InUse, p.Name) {
			continue
		}
		uid := strings.TrimSuffix(strings.TrimPrefix(p.Path, prefix), "/")
		cur, live := current[uid]
		switch {
		case !live:
			out = append(out, ProfileCleanup{Name: p.Name, Roles: slices.Clone(p.Roles), Reason: "nodeclass-deleted"})
		case cur != p.Name && !in.Now.Before(p.Created.Add(InstanceProfileGrace)):
			out = append(out, ProfileCleanup{Name: p.Name, Roles: slices.Clone(p.Roles), Reason: "superseded"})
		}
	}
	slices.SortFunc(out, func(a, b ProfileCleanup) int { return strings.Compare(a.Name, b.Name) })
	return out
}
