package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// RouteReplacements is the path of the operator's contract for manual
// replacements (nodewright replace):
//
//	POST RouteReplacements  ReplacementRequest -> 200 ReplacementResult (dry run: nothing started)
//	                                           -> 201 ReplacementResult (executions started or found)
//	                                           -> 400 ErrorResponse (a field at fault)
//	                                           -> 403 ErrorResponse (no caller identity)
//	                                           -> 422 ErrorResponse (nodes refused, one field per node; nothing started)
//	                                           -> 503 ErrorResponse (no current cluster state yet)
//
// The route is IAM-authorized; the caller's IAM ARN, as API Gateway
// authenticated it, is recorded in every execution's input. Repeating a
// request (the same nodes and forceAfterSeconds) answers with the same
// executions and starts none.
const RouteReplacements = "/v1/replacements"

// Kinds of the replacement messages.
const (
	KindReplacementRequest = "ReplacementRequest"
	KindReplacementResult  = "ReplacementResult"
)

// MaxReplacementNodes bounds ReplacementRequest.Nodes.
const MaxReplacementNodes = 100

// ReplacementRequest asks for the manual replacement of nodes.
type ReplacementRequest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Nodes names the nodes, by Node or NodeClaim name: 1 to
	// MaxReplacementNodes, none twice.
	Nodes []string `json:"nodes"`
	// ForceAfterSeconds is how long the drain honours
	// PodDisruptionBudgets before it deletes the pods they protect; 0
	// never forces. 0 to 7 days.
	ForceAfterSeconds int `json:"forceAfterSeconds,omitempty"`
	// DryRun plans and reports, starting nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// maxForceAfter bounds ReplacementRequest.ForceAfterSeconds.
const maxForceAfter = 7 * 24 * time.Hour

// DecodeReplacementRequest decodes and validates a request body. Its error
// is a *ValidationError naming each field at fault.
func DecodeReplacementRequest(data []byte) (ReplacementRequest, error) {
	var r ReplacementRequest
	if err := json.Unmarshal(data, &r); err != nil {
		return r, &ValidationError{Kind: KindReplacementRequest, Fields: []FieldError{{Path: "(body)", Message: "not a JSON ReplacementRequest: " + err.Error()}}}
	}
	var fields []FieldError
	if r.APIVersion != APIVersion {
		fields = append(fields, FieldError{Path: "apiVersion", Message: fmt.Sprintf("must be %q, got %q", APIVersion, r.APIVersion)})
	}
	if r.Kind != KindReplacementRequest {
		fields = append(fields, FieldError{Path: "kind", Message: fmt.Sprintf("must be %q, got %q", KindReplacementRequest, r.Kind)})
	}
	switch {
	case len(r.Nodes) == 0:
		fields = append(fields, FieldError{Path: "nodes", Message: "at least one node is required"})
	case len(r.Nodes) > MaxReplacementNodes:
		fields = append(fields, FieldError{Path: "nodes", Message: fmt.Sprintf("at most %d nodes, got %d", MaxReplacementNodes, len(r.Nodes))})
	}
	seen := map[string]bool{}
	for i, n := range r.Nodes {
		switch {
		case n == "":
			fields = append(fields, FieldError{Path: fmt.Sprintf("nodes[%d]", i), Message: "must not be empty"})
		case seen[n]:
			fields = append(fields, FieldError{Path: fmt.Sprintf("nodes[%d]", i), Message: fmt.Sprintf("%q is listed twice", n)})
		}
		seen[n] = true
	}
	if r.ForceAfterSeconds < 0 || time.Duration(r.ForceAfterSeconds)*time.Second > maxForceAfter {
		fields = append(fields, FieldError{Path: "forceAfterSeconds", Message: fmt.Sprintf("must be 0 to %d, got %d", int(maxForceAfter/time.Second), r.ForceAfterSeconds)})
	}
	if len(fields) > 0 {
		return r, &ValidationError{Kind: KindReplacementRequest, Fields: fields}
	}
	return r, nil
}

// ReplacementResult is what a replacement request planned and started.
type ReplacementResult struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// DryRun is true when nothing was started.
	DryRun bool `json:"dryRun"`
	// Snapshot is the cluster snapshot the plan was made from.
	Snapshot string `json:"snapshot"`
	// RequestedBy is the caller's IAM ARN.
	RequestedBy string `json:"requestedBy"`
	// Nodes are the replacements, in the request's order.
	Nodes []ReplacementNode `json:"nodes"`
	// Budgets are the disruption budgets of the nodes' NodePools now:
	// reported, not consumed.
	Budgets []ReplacementBudget `json:"budgets"`
	// Warnings name what was left out of the plan's input.
	Warnings []string `json:"warnings,omitempty"`
}

// ReplacementNode is the replacement of one node.
type ReplacementNode struct {
	Node      string `json:"node"`
	NodeClaim string `json:"nodeClaim"`
	NodePool  string `json:"nodePool"`
	// Execution is the Step Functions execution's name
	// ("manual-<nodeclaim>-<hash>").
	Execution string `json:"execution"`
	// Started is true once the execution exists; AlreadyExisted when an
	// earlier request started it.
	Started        bool `json:"started"`
	AlreadyExisted bool `json:"alreadyExisted,omitempty"`
	// Replacements are the NodeClaims launched first, each by its
	// expected instance type (none when the pods fit elsewhere).
	Replacements []string `json:"replacements"`
	// Moving are the pods the drain evicts (namespace/name).
	Moving []string `json:"moving"`
	// DoNotDisrupt and PDBBlocked say what automatic disruption would
	// stop at: do-not-disrupt (evicted here all the same) and the
	// PodDisruptionBudgets refusing evictions now (waited for until
	// forceAfterSeconds).
	DoNotDisrupt []string `json:"doNotDisrupt"`
	PDBBlocked   []string `json:"pdbBlocked"`
}

// ReplacementBudget is one NodePool's budget for one reason.
type ReplacementBudget struct {
	NodePool string `json:"nodePool"`
	Reason   string `json:"reason"`
	// Allowed and Available are -1 when unlimited.
	Allowed   int `json:"allowed"`
	Available int `json:"available"`
}
