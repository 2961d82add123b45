// Package demo embeds the manifests `nodewright demo` applies: the guide's
// complete example (guide-complete/, copied from the seed examples; see
// README.md) and the demo's own Spot NodePool and workload for its Spot
// interruption step (spot/).
package demo

import "embed"

// GuideComplete holds guide-complete/ec2nodeclass.yaml, nodepool.yaml and
// inflate.yaml.
//
//go:embed guide-complete/*.yaml
var GuideComplete embed.FS

// Spot holds spot/nodepool.yaml (NodePool spot: Spot capacity of the
// guide's EC2NodeClass, tainted nodewright.dev/demo-spot:NoSchedule) and
// spot/spot-inflate.yaml (Deployment spot-inflate, 2 pods of 1 CPU and
// 1Gi that tolerate the taint).
//
//go:embed spot/*.yaml
var Spot embed.FS
