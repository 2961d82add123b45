package amifamily

import "strings"

// powershell renders Windows user data: one <powershell> block with the
// user's script first, then the EKS-optimized AMI's Start-EKSBootstrap.ps1
// (karpenter-spec §9.2 Windows row; parameters per the Amazon EKS
// "Windows bootstrap script" documentation). <powershell> tags around the
// user's script are removed so that blocks do not nest.
func powershell(o Options) string {
	var b strings.Builder
	b.WriteString("<powershell>\n")
	if user := userPowerShell(o.UserData); user != "" {
		b.WriteString(user + "\n")
	}
	b.WriteString(`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n")
	b.WriteString("& $EKSBootstrapScriptFile" +
		" -EKSClusterName " + psQuote(o.ClusterName) +
		" -APIServerEndpoint " + psQuote(o.ClusterEndpoint) +
		" -Base64ClusterCA " + psQuote(o.CABundle) +
		" -KubeletExtraArgs " + psQuote(o.kubeletArgs()))
	if dns := o.clusterDNS(); dns != "" {
		b.WriteString(" -DNSClusterIP " + psQuote(dns))
	}
	b.WriteString("\n</powershell>\n")
	return b.String()
}

// userPowerShell returns the user's script without surrounding
// <powershell> tags or blank edges.
func userPowerShell(data *string) string {
	if data == nil {
		return ""
	}
	s := strings.TrimSpace(strings.ReplaceAll(*data, "\r", ""))
	s = strings.TrimPrefix(s, "<powershell>")
	s = strings.TrimSuffix(s, "</powershell>")
	return strings.TrimSpace(s)
}
