// Package crds embeds the CustomResourceDefinitions of the three Karpenter
// kinds nodewright reads: karpenter.sh NodePool and NodeClaim and
// karpenter.k8s.aws EC2NodeClass (apiextensions.k8s.io/v1, structural
// schemas with Karpenter v1.14.1's validation rules), so that a cluster or
// the local stack can install them.
package crds

import (
	"embed"
	"io/fs"
	"sort"
)

//go:embed *.yaml
var files embed.FS

// CRD is one CustomResourceDefinition manifest.
type CRD struct {
	// File is the manifest's file name, "<group>_<plural>.yaml".
	File string
	// YAML is the manifest.
	YAML []byte
}

// All returns the CRD manifests sorted by file name.
func All() []CRD {
	names, _ := fs.Glob(files, "*.yaml") // the pattern is constant and valid
	sort.Strings(names)
	out := make([]CRD, 0, len(names))
	for _, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			continue // unreachable: n was listed from the same embedded FS
		}
		out = append(out, CRD{File: n, YAML: data})
	}
	return out
}
