package launch

import "time"

// Template is an existing launch template and the instance types it
// serves: what the node-class resolver ensures (shared/aws/nodeclass) and
// the fleet adapter renders into CreateFleet's launch template configs.
type Template struct {
	// Name is the launch template name; CreateFleet uses version $Latest.
	Name string
	// ImageID is the template's AMI, repeated on each override.
	ImageID string
	// InstanceTypes are the instance type names the template serves.
	InstanceTypes []string
}

// ClusterTemplate is one of the cluster's existing launch templates as EC2
// lists it (shared/aws/nodeclass Templates.List) and garbage collection
// judges it (shared/provisioning): the one listed-template type of both.
type ClusterTemplate struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// NodeClass is the EC2NodeClass it was created for (its
	// karpenter.k8s.aws/ec2nodeclass tag); "" when untagged.
	NodeClass string `json:"nodeClass,omitempty"`
	// CreateTime is when EC2 created it.
	CreateTime time.Time `json:"createTime"`
	// Tags are all its tags; only a template carrying nodewright's
	// ownership mark (v1.OwnedBy) is ever deleted.
	Tags map[string]string `json:"tags,omitempty"`
}
