package v1

import (
	"github.com/nodewright/nodewright/shared/apis/apijson"
)

// DecodeNodePool decodes one NodePool from JSON. Fields that Karpenter
// v1.14.1 does not define (newer or misspelt ones) do not fail the decode:
// they are dropped and returned as warnings naming their path. A value of the
// wrong type is an error naming its field path. The result is not defaulted
// or validated; call SetDefaults and Validate. A decode error is an
// *apijson.FieldError. It never panics.
//
// One v1.14.1 subtlety is reported as a warning: when spec.disruption is
// written without consolidateAfter, the v1.14.1 CRD rejects the object
// (consolidateAfter is required inside a written disruption block), while
// Karpenter HEAD defaults it to "0s". nodewright follows HEAD: SetDefaults
// fills "0s".
func DecodeNodePool(data []byte) (*NodePool, []FieldError, error) {
	np := &NodePool{}
	warnings, err := decode(data, np)
	if err != nil {
		return nil, warnings, err
	}
	d := np.Spec.Disruption
	if !d.ConsolidateAfter.IsSet() && (d.ConsolidationPolicy != "" || d.Budgets != nil) {
		warnings = append(warnings, FieldError{
			Path:    "spec.disruption.consolidateAfter",
			Message: `not set; Karpenter v1.14.1 requires it when spec.disruption is written, Karpenter HEAD defaults it to "0s" (applied here)`,
		})
	}
	return np, warnings, nil
}

// DecodeNodeClaim decodes one NodeClaim from JSON, with the same contract as
// DecodeNodePool.
func DecodeNodeClaim(data []byte) (*NodeClaim, []FieldError, error) {
	nc := &NodeClaim{}
	warnings, err := decode(data, nc)
	if err != nil {
		return nil, warnings, err
	}
	return nc, warnings, nil
}

// DecodeEC2NodeClass decodes one EC2NodeClass from JSON, with the same
// contract as DecodeNodePool. Keys of spec.kubelet outside the v1.14.1 typed
// schema (Karpenter HEAD accepts any upstream KubeletConfiguration key) are
// kept in KubeletConfiguration.Extra, so they survive a round trip, and are
// returned as warnings.
func DecodeEC2NodeClass(data []byte) (*EC2NodeClass, []FieldError, error) {
	nc := &EC2NodeClass{}
	warnings, err := decode(data, nc)
	if err != nil {
		return nil, warnings, err
	}
	if k := nc.Spec.Kubelet; k != nil {
		for _, name := range sortedKeys(k.Extra) {
			warnings = append(warnings, FieldError{
				Path:    "spec.kubelet." + name,
				Message: "not part of Karpenter v1.14.1's kubelet schema (accepted by newer Karpenter); kept but not used by nodewright",
			})
		}
	}
	return nc, warnings, nil
}

// The messages of the decode warnings for fields the API server's strict
// field validation rejects (kubectl apply's default): a field the schema
// does not have, and a field written twice. Lenient readers (the intake's
// wire contract) keep them as warnings; the CLI treats them as errors.
const (
	MessageUnknownField   = "unknown field (not in Karpenter v1.14.1); ignored"
	MessageDuplicateField = "duplicate field; the last value is used"
)

func decode(data []byte, into any) ([]FieldError, error) {
	strays, err := apijson.Unmarshal(data, into)
	if err != nil {
		return nil, err
	}
	var warnings []FieldError
	for _, s := range strays {
		msg := MessageUnknownField
		if s.Duplicate {
			msg = MessageDuplicateField
		}
		warnings = append(warnings, FieldError{Path: s.Path, Message: msg})
	}
	return warnings, nil
}
