// Package demo embeds the manifests `nodewright demo` applies: the guide's
// complete example (guide-complete/, copied from the seed examples; see
// README.md).
package demo

import "embed"

// GuideComplete holds guide-complete/ec2nodeclass.yaml, nodepool.yaml and
// inflate.yaml.
//
//go:embed guide-complete/*.yaml
var GuideComplete embed.FS
