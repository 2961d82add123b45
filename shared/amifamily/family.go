// Package amifamily knows how each EKS AMI family is found and booted: the
// SSM parameters behind an amiSelectorTerms alias and the requirements each
// image variant serves, the family's default block devices, the user data that
// joins a node to the cluster (AL2023 nodeadm, AL2 bootstrap.sh, Bottlerocket
// TOML, Windows PowerShell, Custom verbatim), and the EC2 tags every launched
// resource carries. It follows karpenter-provider-aws v1.14.1
// (aws: pkg/providers/amifamily/*, karpenter-spec §1.5, §4 step 6, §9).
//
// The package is pure: it performs no I/O and reads no clock. Callers resolve
// SSM parameters and images against AWS (shared/aws/nodeclass) with what it
// returns.
package amifamily

import (
	"fmt"
	"strings"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Family is an AMI family exactly as spec.amiFamily spells it ("AL2023",
// "Bottlerocket", ...). The zero value is not a family.
type Family string

// The families Karpenter v1 accepts (aws: pkg/apis/v1/ec2nodeclass.go).
const (
	AL2          Family = v1.AMIFamilyAL2
	AL2023       Family = v1.AMIFamilyAL2023
	Bottlerocket Family = v1.AMIFamilyBottlerocket
	Custom       Family = v1.AMIFamilyCustom
	Windows2019  Family = v1.AMIFamilyWindows2019
	Windows2022  Family = v1.AMIFamilyWindows2022
	Windows2025  Family = v1.AMIFamilyWindows2025
)

// Families lists every family in a fixed order.
var Families = []Family{AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025}

// Parse returns the family spec.amiFamily names. Matching is exact, as the
// CRD enum is; an unknown name is an error listing the accepted values.
func Parse(name string) (Family, error) {
	for _, f := range Families {
		if string(f) == name {
			return f, nil
		}
	}
	return "", fmt.Errorf("ami family %q: want one of AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025", name)
}

// ForNodeClass returns the family a node class launches with: spec.amiFamily
// when set, else the family of its alias term (aws: pkg/apis/v1/ec2nodeclass.go
// AMIFamily). Errors name the field at fault: a nil class, an unknown
// spec.amiFamily or alias family, or neither being set.
func ForNodeClass(nc *v1.EC2NodeClass) (Family, error) {
	if nc == nil {
		return "", fmt.Errorf("node class: nil")
	}
	if nc.Spec.AMIFamily != nil {
		f, err := Parse(*nc.Spec.AMIFamily)
		if err != nil {
			return "", fmt.Errorf("spec.amiFamily: %w", err)
		}
		return f, nil
	}
	for i, term := range nc.Spec.AMISelectorTerms {
		if term.Alias == "" {
			continue
		}
		a, err := ParseAlias(term.Alias)
		if err != nil {
			return "", fmt.Errorf("spec.amiSelectorTerms[%d].alias: %w", i, err)
		}
		return a.Family, nil
	}
	return "", fmt.Errorf("spec.amiFamily: required unless an amiSelectorTerms alias names the family")
}

// Windows reports whether the family boots Windows nodes.
func (f Family) Windows() bool {
	return f == Windows2019 || f == Windows2022 || f == Windows2025
}

// WindowsBuild is the node.kubernetes.io/windows-build label value of a
// Windows family (spec §1.4), "" for Linux families.
func (f Family) WindowsBuild() string {
	switch f {
	case Windows2019:
		return "10.0.17763"
	case Windows2022:
		return "10.0.20348"
	case Windows2025:
		return "10.0.26100"
	}
	return ""
}

// aliasName is the lower-case family name aliases use ("al2023").
func (f Family) aliasName() string { return strings.ToLower(string(f)) }
