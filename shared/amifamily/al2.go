package amifamily

import (
	"net/netip"
	"strings"
)

// bootstrapScript renders AL2 user data: the user's parts, then a shell part
// calling the AMI's /etc/eks/bootstrap.sh (karpenter-spec §9.2 AL2 row;
// flags per the amazon-eks-ami bootstrap.sh usage).
func bootstrapScript(o Options) (string, error) {
	parts, err := userParts(o.userData(), false)
	if err != nil {
		return "", err
	}
	lines := []string{
		"#!/bin/bash -xe",
		"/etc/eks/bootstrap.sh " + shellQuote(o.ClusterName) +
			" --apiserver-endpoint " + shellQuote(o.ClusterEndpoint) +
			" --b64-cluster-ca " + shellQuote(o.CABundle) + ` \`,
	}
	dns := o.clusterDNS()
	if ipv6(dns) {
		lines = append(lines, `--ip-family ipv6 \`)
	}
	if dns != "" {
		lines = append(lines, "--dns-cluster-ip "+shellQuote(dns)+` \`)
	}
	lines = append(lines, `--use-max-pods false \`)
	last := "--kubelet-extra-args " + shellQuote(o.kubeletArgs())
	if o.raid0() {
		lines = append(lines, last+` \`, "--local-disks raid0")
	} else {
		lines = append(lines, last)
	}
	parts = append(parts, mimePart{
		headers: []string{"Content-Type: " + contentTypeShell},
		content: strings.Join(lines, "\n"),
	})
	return renderMIME(parts), nil
}

// ipv6 reports whether s is an IPv6 address.
func ipv6(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6() && !a.Is4In6()
}
