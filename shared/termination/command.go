package termination

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/workflow"
)

// AnnotationReplacementFor names, on a replacement NodeClaim, the
// execution that launched it.
const AnnotationReplacementFor = "nodewright.dev/replacement-for"

// AnnotationReplacementReason holds, on a replacement NodeClaim, the
// disruption method of the command that launched it ("Drifted",
// "Underutilized", ...): the reason karpenter_nodeclaims_created_total
// counts it under (lower-cased), as Karpenter labels a replacement.
const AnnotationReplacementReason = "nodewright.dev/replacement-reason"

// Execution is a disruption command ready to start: its execution name,
// its input, and the replacement NodeClaims to store under
// Input.CommandRef before the start.
type Execution struct {
	Name         string
	Input        workflow.DisruptionInput
	Replacements []v1.NodeClaim
}

// Prepare turns a command of shared/disruption, decided at decidedAt, into
// an execution of statemachines/disruption.asl.json: the name
// ExecutionName(cmd.ID, decidedAt); the input with the candidates, a
// summary of each replacement (at most workflow.MaxListedInstanceTypes
// instance types), the budgets of the candidates' pools for the method
// (Karpenter's allowed disruptions, from budgets) and DefaultSettings; and
// the replacement NodeClaims renamed ReplacementName(pool, name, i),
// created at decidedAt and annotated with the execution. A pool without a
// budget status gets Allowed 0 (fail closed).
func Prepare(cmd disruption.Command, budgets []disruption.BudgetStatus, decidedAt time.Time) Execution {
	return prepare(cmd, budgets, ExecutionName(cmd.ID, decidedAt), decidedAt)
}

// PrepareManual is Prepare for a command of disruption.Manual, requested
// by requestedBy (the caller's IAM ARN) with req, at decidedAt. The
// execution's name is the command's ID itself, which depends only on the
// request (disruption.ManualID): a retried or redelivered request names
// the same execution, and Step Functions starts it once whenever it comes.
// The input carries the request (workflow.ManualRequest) and, for the
// record, the pools' Drifted budgets, which a Manual execution does not
// lease (Budget.Budgeted is false).
func PrepareManual(cmd disruption.Command, budgets []disruption.BudgetStatus, req disruption.ManualRequest, requestedBy string, decidedAt time.Time) Execution {
	drifted := make([]disruption.BudgetStatus, 0, len(budgets))
	for _, b := range budgets {
		if b.Reason == disruption.MethodDrifted {
			b.Reason = cmd.Method
			drifted = append(drifted, b)
		}
	}
	ex := prepare(cmd, drifted, cmd.ID, decidedAt)
	ex.Input.Manual = &workflow.ManualRequest{
		RequestedBy: requestedBy, Nodes: append([]string{}, req.Nodes...), ForceAfterSeconds: int(req.ForceAfter / time.Second),
	}
	return ex
}

func prepare(cmd disruption.Command, budgets []disruption.BudgetStatus, name string, decidedAt time.Time) Execution {
	method := string(cmd.Method)
	in := workflow.DisruptionInput{
		ID: name, Method: method, NodePool: cmd.NodePool, Reason: cmd.Reason, DecidedAt: decidedAt.UTC(),
		Candidates: []workflow.Candidate{}, Replacements: []workflow.Replacement{}, SavingsPerHour: cmd.SavingsPerHour,
		Budget:   workflow.Budget{Budgeted: cmd.Budgeted, Pools: []workflow.PoolBudget{}},
		Settings: DefaultSettings(method),
	}
	pools := map[string]bool{}
	for _, c := range cmd.Candidates {
		pool := c.NodePool
		if pool == "" {
			pool = cmd.NodePool
		}
		in.Candidates = append(in.Candidates, workflow.Candidate{
			NodeClaim: c.NodeClaim, Node: c.Node, NodePool: pool, ProviderID: c.ProviderID, InstanceType: c.InstanceType,
			Zone: c.Zone, CapacityType: c.CapacityType, PricePerHour: c.PricePerHour, Reason: c.DriftReason,
		})
		if pool != "" && !pools[pool] {
			pools[pool] = true
			in.Budget.Pools = append(in.Budget.Pools, workflow.PoolBudget{NodePool: pool, Allowed: allowedIn(budgets, pool, cmd.Method)})
		}
	}
	var planned []v1.NodeClaim
	for i, r := range cmd.Replacements {
		claim := r.NodeClaim
		pool := claim.Labels[v1.LabelNodePool]
		if pool == "" {
			pool = cmd.NodePool
		}
		claim.Name = ReplacementName(pool, name, i)
		claim.GenerateName, claim.UID, claim.ResourceVersion = "", "", ""
		claim.CreationTimestamp = metav1.NewTime(decidedAt)
		claim.Labels = maps.Clone(claim.Labels)
		if claim.Labels == nil {
			claim.Labels = map[string]string{}
		}
		claim.Labels[v1.LabelNodePool] = pool
		claim.Annotations = maps.Clone(claim.Annotations)
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[AnnotationReplacementFor] = name
		claim.Annotations[AnnotationReplacementReason] = string(cmd.Method)
		planned = append(planned, claim)
		types := r.InstanceTypes
		if len(types) > workflow.MaxListedInstanceTypes {
			types = types[:workflow.MaxListedInstanceTypes]
		}
		rep := workflow.Replacement{NodeClaim: claim.Name, InstanceTypes: append([]string{}, types...), InstanceTypeCount: len(r.InstanceTypes)}
		if r.Expected.InstanceType != "" {
			rep.Expected = &workflow.ExpectedOffering{InstanceType: r.Expected.InstanceType, Zone: r.Expected.Zone,
				CapacityType: r.Expected.CapacityType, PricePerHour: r.Expected.PricePerHour}
		}
		in.Replacements = append(in.Replacements, rep)
	}
	in.ReplacementCount = len(in.Replacements)
	if len(planned) > 0 {
		in.CommandRef = CommandRef(name)
	}
	return Execution{Name: name, Input: in, Replacements: planned}
}

func allowedIn(budgets []disruption.BudgetStatus, pool string, method disruption.Method) int {
	for _, b := range budgets {
		if b.NodePool == pool && b.Reason == method {
			return b.Allowed
		}
	}
	return 0
}

// EncodeReplacements is the stored form of replacement NodeClaims (JSON).
func EncodeReplacements(claims []v1.NodeClaim) ([]byte, error) {
	b, err := json.Marshal(claims)
	if err != nil {
		return nil, fmt.Errorf("encode replacements: %w", err)
	}
	return b, nil
}

// DecodeReplacements reads what EncodeReplacements wrote.
func DecodeReplacements(data []byte) ([]v1.NodeClaim, error) {
	var claims []v1.NodeClaim
	if err := json.Unmarshal(data, &claims); err != nil {
		return nil, fmt.Errorf("decode replacements: %w", err)
	}
	return claims, nil
}

// ManualInFlight splits off the NodeClaims of claims that the manual
// execution req would start for them already holds (a live claim by
// disruption.ManualID(name, req)): a retried or redelivered request must
// find its own execution, not be refused because that execution already
// claimed, tainted or began deleting the node. It returns claims with
// those NodeClaims as they were before the execution took them (claim
// annotations, DisruptionReason condition and deletionTimestamp removed;
// the others unchanged, claims itself untouched) and their names, sorted.
// Planning over the returned claims yields the same execution names; the
// caller must not store their replacements again.
func ManualInFlight(claims []v1.NodeClaim, req disruption.ManualRequest, now time.Time) ([]v1.NodeClaim, []string) {
	out := make([]v1.NodeClaim, len(claims))
	var own []string
	for i := range claims {
		c := claims[i]
		cl := ClaimOf(&c)
		if cl.Live(now) && cl.Method == workflow.MethodManual && cl.Holder == disruption.ManualID(c.Name, req) {
			c = copyClaim(c)
			clearClaim(&c, cl.Holder)
			c.DeletionTimestamp = nil
			own = append(own, c.Name)
		}
		out[i] = c
	}
	slices.Sort(own)
	return out, own
}
