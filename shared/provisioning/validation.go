package provisioning

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// AuthCheckTTL is how long a class's authorization verdict stands before
// the dry runs are made again (Karpenter's validation cache: aws:
// pkg/cache/cache.go, karpenter-spec "validation ... cached 30 min").
const AuthCheckTTL = 30 * time.Minute

// The actions a class's authorization check dry-runs, in the order it makes
// them (aws: pkg/controllers/nodeclass/validation.go).
const (
	ActionCreateLaunchTemplate = "CreateLaunchTemplate"
	ActionCreateFleet          = "CreateFleet"
	ActionRunInstances         = "RunInstances"
)

// AuthCheckActions are the dry-run actions in check order.
var AuthCheckActions = []string{ActionCreateLaunchTemplate, ActionCreateFleet, ActionRunInstances}

// ValidationSucceeded=False reasons of a failed dry run, Karpenter's (aws:
// pkg/controllers/nodeclass/validation.go).
const (
	ReasonCreateLaunchTemplateAuthCheckFailed = "CreateLaunchTemplateAuthCheckFailed"
	ReasonCreateFleetAuthCheckFailed          = "CreateFleetAuthCheckFailed"
	ReasonRunInstancesAuthCheckFailed         = "RunInstancesAuthCheckFailed"
)

var authReasons = map[string]string{
	ActionCreateLaunchTemplate: ReasonCreateLaunchTemplateAuthCheckFailed,
	ActionCreateFleet:          ReasonCreateFleetAuthCheckFailed,
	ActionRunInstances:         ReasonRunInstancesAuthCheckFailed,
}

// AuthOutcome is what one dry run answered, as the adapter classified it.
type AuthOutcome int

const (
	// AuthAllowed: DryRunOperation, the call would have succeeded.
	AuthAllowed AuthOutcome = iota
	// AuthDenied: UnauthorizedOperation (or another authorization failure).
	AuthDenied
	// AuthInconclusive: anything else (throttling, a server error, a
	// transport failure, an unexpected code): no verdict.
	AuthInconclusive
)

// AuthResult is one dry run's answer.
type AuthResult struct {
	// Action is one of AuthCheckActions.
	Action  string
	Outcome AuthOutcome
	// Detail is the error's message (Denied, Inconclusive).
	Detail string
}

// AuthVerdict is a class's authorization verdict and what it was made for.
type AuthVerdict struct {
	// Key identifies the class object and the inputs the dry runs used
	// (UID, generation, tags, image, subnets, security groups, instance
	// profile); a verdict for another key is stale.
	Key string `json:"key"`
	// CheckedAt is when the dry runs answered (the caller's clock).
	CheckedAt time.Time `json:"checkedAt"`
	// Reason is "" when every action was allowed, else the failed
	// action's reason (ReasonCreateFleetAuthCheckFailed...).
	Reason string `json:"reason,omitempty"`
	// Message names the failed action and carries EC2's message.
	Message string `json:"message,omitempty"`
}

// AuthCheckDue reports whether the dry runs must be made for key at now:
// there is no previous verdict, it was made for another key, or it is
// AuthCheckTTL old or older.
func AuthCheckDue(prev *AuthVerdict, key string, now time.Time) bool {
	return prev == nil || prev.Key != key || !now.Before(prev.CheckedAt.Add(AuthCheckTTL))
}

// DecideAuth folds the dry-run results (in AuthCheckActions order; the
// check stops at its first denial) into the verdict for key at now. The
// first denied action fails the verdict with its reason and a message
// naming it ("not authorized to call ec2:CreateFleet: <EC2's message>").
// An inconclusive result before any denial gives no new verdict: ok is
// false, and the caller keeps prev (the last verdict stands and the check
// is due again on the next resolution).
func DecideAuth(results []AuthResult, key string, now time.Time) (v AuthVerdict, ok bool) {
	v = AuthVerdict{Key: key, CheckedAt: now}
	for _, r := range results {
		switch r.Outcome {
		case AuthInconclusive:
			return AuthVerdict{}, false
		case AuthDenied:
			v.Reason = authReasons[r.Action]
			v.Message = "not authorized to call ec2:" + r.Action + ": " + r.Detail
			return v, true
		}
	}
	return v, len(results) > 0
}

// Condition is the verdict as the class's ValidationSucceeded condition
// (True with its type as reason, or False with Reason and Message),
// stamped with generation.
func (v AuthVerdict) Condition(generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeValidationSucceeded, ObservedGeneration: generation}
	if v.Reason != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v.Reason, v.Message
	}
	return c
}
