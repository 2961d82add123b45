package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/manifest"
)

// defaultRegion is the region plan and disruption price in when neither
// --region nor the input names one.
const defaultRegion = "us-east-1"

// regionOfZone is v1.RegionOfZone.
var regionOfZone = v1.RegionOfZone

// inferRegion returns the one region the objects name, and where it was
// read: a Node's or NodeClaim's topology.kubernetes.io/region or zone
// label, a NodePool's or NodeClaim's zone requirement (In values), an
// EC2NodeClass's status.subnets zones. It returns "" when they name none,
// and an error naming two sources when they name more than one region
// (the input mixes clusters; --region decides).
func inferRegion(objs []manifest.Object) (region, from string, err error) {
	seen := map[string]string{} // region -> first source
	note := func(r, src string) {
		if _, ok := seen[r]; !ok && r != "" {
			seen[r] = src
		}
	}
	fromLabels := func(labels map[string]string, what string) {
		if r := labels[corev1.LabelTopologyRegion]; r != "" {
			note(r, what+" label "+corev1.LabelTopologyRegion)
		} else if r, ok := regionOfZone(labels[corev1.LabelTopologyZone]); ok {
			note(r, what+" label "+corev1.LabelTopologyZone)
		}
	}
	fromRequirements := func(reqs []v1.NodeSelectorRequirementWithMinValues, what string) {
		for _, r := range reqs {
			if r.Key != corev1.LabelTopologyZone || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			for _, z := range r.Values {
				if reg, ok := regionOfZone(z); ok {
					note(reg, what+" requirement "+corev1.LabelTopologyZone)
				}
			}
		}
	}
	for _, o := range objs {
		what := fmt.Sprintf("%s %s", o.Kind, o.Name)
		switch t := o.Typed.(type) {
		case *corev1.Node:
			fromLabels(t.Labels, what)
		case *v1.NodeClaim:
			fromLabels(t.Labels, what)
			fromRequirements(t.Spec.Requirements, what)
		case *v1.NodePool:
			fromRequirements(t.Spec.Template.Spec.Requirements, what)
		case *v1.EC2NodeClass:
			for _, sn := range t.Status.Subnets {
				if reg, ok := regionOfZone(sn.Zone); ok {
					note(reg, what+" status.subnets")
				}
			}
		}
	}
	regions := slices.Sorted(func(yield func(string) bool) {
		for r := range seen {
			if !yield(r) {
				return
			}
		}
	})
	switch len(regions) {
	case 0:
		return "", "", nil
	case 1:
		return regions[0], seen[regions[0]], nil
	}
	var parts []string
	for _, r := range regions {
		parts = append(parts, fmt.Sprintf("%s (%s)", r, seen[r]))
	}
	return "", "", fmt.Errorf("the input names more than one region: %s; set --region", strings.Join(parts, ", "))
}

// chooseRegion returns the --region value when given, else the region the
// input names (inferRegion), else defaultRegion; the last two are said on
// stderr, since they decide the catalog and prices.
func chooseRegion(flagValue string, objs []manifest.Object, stderr io.Writer) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	region, from, err := inferRegion(objs)
	switch {
	case err != nil:
		return "", err
	case region == "":
		fmt.Fprintf(stderr, "note: no --region and the input names none; using %s\n", defaultRegion)
		return defaultRegion, nil
	case !regionName.MatchString(region):
		return "", fmt.Errorf("region %q (from %s) is not an AWS region name; set --region", region, from)
	}
	fmt.Fprintf(stderr, "note: no --region; using %s, from %s\n", region, from)
	return region, nil
}

// completeRegions completes a --region value with the regions the embedded
// catalog knows zones of (localRegions).
func completeRegions(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return localRegions, cobra.ShellCompDirectiveNoFileComp
}
