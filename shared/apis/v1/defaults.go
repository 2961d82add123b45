package v1

// Default values Karpenter's CRDs apply (karpenter: pkg/apis/v1/nodepool.go,
// nodeclaim.go; aws: pkg/apis/v1/ec2nodeclass.go).
const (
	DefaultExpireAfter      = "720h"
	DefaultConsolidateAfter = "0s"
	DefaultBudgetNodes      = "10%"

	DefaultMetadataHTTPEndpoint     = "enabled"
	DefaultMetadataHTTPProtocolIPv6 = "disabled"
	DefaultMetadataHTTPHopLimit     = int64(1)
	DefaultMetadataHTTPTokens       = "required"
)

// SetDefaults fills the fields Karpenter's API server would default when
// they are absent: spec.template.spec.expireAfter "720h";
// spec.disruption.consolidationPolicy WhenEmptyOrUnderutilized;
// spec.disruption.budgets [{nodes: "10%"}] when the list is absent (an
// explicit empty list stays empty and means "no limit"), and nodes "10%" in
// a budget that omits it; spec.disruption.consolidateAfter "0s".
//
// consolidateAfter: the v1.14.1 CRD defaults the whole disruption block to
// {consolidateAfter: 0s} only when disruption is omitted, and rejects a
// written disruption block without consolidateAfter; Karpenter HEAD defaults
// the field itself. nodewright follows HEAD (DecodeNodePool warns when the
// v1.14.1 rule would have rejected the manifest). SetDefaults is idempotent.
func (np *NodePool) SetDefaults() {
	if !np.Spec.Template.Spec.ExpireAfter.IsSet() {
		np.Spec.Template.Spec.ExpireAfter = MustParseNillable(DefaultExpireAfter)
	}
	d := &np.Spec.Disruption
	if !d.ConsolidateAfter.IsSet() {
		d.ConsolidateAfter = MustParseNillable(DefaultConsolidateAfter)
	}
	if d.ConsolidationPolicy == "" {
		d.ConsolidationPolicy = ConsolidationPolicyWhenEmptyOrUnderutilized
	}
	if d.Budgets == nil {
		d.Budgets = []Budget{{Nodes: DefaultBudgetNodes}}
	}
	for i := range d.Budgets {
		if d.Budgets[i].Nodes == "" {
			d.Budgets[i].Nodes = DefaultBudgetNodes
		}
	}
}

// SetDefaults fills spec.expireAfter "720h" when absent, as the NodeClaim
// CRD does. It is idempotent.
func (nc *NodeClaim) SetDefaults() {
	if !nc.Spec.ExpireAfter.IsSet() {
		nc.Spec.ExpireAfter = MustParseNillable(DefaultExpireAfter)
	}
}

// SetDefaults fills spec.metadataOptions as the EC2NodeClass CRD does: the
// whole object {httpEndpoint: enabled, httpProtocolIPv6: disabled,
// httpPutResponseHopLimit: 1, httpTokens: required} when absent, and each of
// those fields when a written metadataOptions omits it. (Karpenter's
// per-family IMDS defaults are unreachable because of this CRD default;
// karpenter-spec §1.6.) It is idempotent.
func (nc *EC2NodeClass) SetDefaults() {
	if nc.Spec.MetadataOptions == nil {
		nc.Spec.MetadataOptions = &MetadataOptions{}
	}
	m := nc.Spec.MetadataOptions
	if m.HTTPEndpoint == nil {
		m.HTTPEndpoint = ptr(DefaultMetadataHTTPEndpoint)
	}
	if m.HTTPProtocolIPv6 == nil {
		m.HTTPProtocolIPv6 = ptr(DefaultMetadataHTTPProtocolIPv6)
	}
	if m.HTTPPutResponseHopLimit == nil {
		m.HTTPPutResponseHopLimit = ptr(DefaultMetadataHTTPHopLimit)
	}
	if m.HTTPTokens == nil {
		m.HTTPTokens = ptr(DefaultMetadataHTTPTokens)
	}
}

func ptr[T any](v T) *T { return &v }
