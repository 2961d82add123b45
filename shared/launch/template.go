package launch

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
