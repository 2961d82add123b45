package provisioning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
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
	// AuthAllowed is DryRunOperation: the call would have succeeded.
	AuthAllowed AuthOutcome = iota
	// AuthDenied is UnauthorizedOperation (or another authorization failure).
	AuthDenied
	// AuthInconclusive is anything else (throttling, a server error, a
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

// AuthKey is the verdict key of a resolved class: a SHA-256 (hex) over its
// UID and generation (spec.tags, role and instance profile among the
// spec) and the resolved inputs the dry runs carry (AMIs, subnets,
// security groups, instance profile). A change to any of them makes the
// check due again.
func AuthKey(nc v1.EC2NodeClass) string {
	ids := func(n int, id func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = id(i)
		}
		slices.Sort(out)
		return out
	}
	st := nc.Status
	b, _ := json.Marshal([]any{
		string(nc.UID), nc.Generation, nc.Spec.Tags, st.InstanceProfile,
		ids(len(st.AMIs), func(i int) string { return st.AMIs[i].ID }),
		ids(len(st.Subnets), func(i int) string { return st.Subnets[i].ID }),
		ids(len(st.SecurityGroups), func(i int) string { return st.SecurityGroups[i].ID }),
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// AuthDryRunner makes a class's three dry runs (nodeclass.Resolver):
// CreateLaunchTemplate, CreateFleet and RunInstances with the class's
// launch tags, image, instance profile, subnets and security groups, one
// instance type it; it stops at the first result that is not AuthAllowed.
type AuthDryRunner interface {
	DryRunAuthorization(ctx context.Context, nc *v1.EC2NodeClass, it *catalog.InstanceType) []AuthResult
}

// AuthVerdictStore keeps the last verdict of each class UID across
// invocations (a nil verdict and nil error: none stored).
type AuthVerdictStore interface {
	AuthVerdict(ctx context.Context, uid string) (*AuthVerdict, error)
	PutAuthVerdict(ctx context.Context, uid string, v AuthVerdict) error
}

// AuthChecker computes a resolved class's ValidationSucceeded condition
// from dry-run authorization checks, as Karpenter's validation controller
// does (aws: pkg/controllers/nodeclass/validation.go): the verdict stands
// AuthCheckTTL per AuthKey, so a steady class costs at most three dry runs
// per AuthCheckTTL (per verdict store); an inconclusive check keeps the
// last verdict. It is safe for concurrent use.
type AuthChecker struct {
	// DryRuns makes the dry runs; nil: the checker only reports stored
	// verdicts (for a component without the launch permissions).
	DryRuns AuthDryRunner
	// Verdicts keeps verdicts across invocations; nil: in memory only.
	Verdicts AuthVerdictStore

	mu   sync.Mutex
	last map[string]AuthVerdict // by class UID
}

// Condition returns nc's ValidationSucceeded condition at now, ok false
// when there is no verdict (never checked and the check inconclusive, or a
// read-only checker without a stored verdict). nc is resolved; types are
// its launchable instance types, of which the dry runs name one
// (AuthInstanceType). A verdict store that fails to read or write is
// treated as empty, or left behind: the check goes on.
func (c *AuthChecker) Condition(ctx context.Context, nc v1.EC2NodeClass, types []*catalog.InstanceType, now time.Time) (metav1.Condition, bool) {
	uid, key := string(nc.UID), AuthKey(nc)
	c.mu.Lock()
	own, mine := c.last[uid]
	c.mu.Unlock()
	if mine && !AuthCheckDue(&own, key, now) {
		// A verdict this checker made and that still stands: no store read.
		return own.Condition(nc.Generation), true
	}
	prev := c.prev(ctx, uid)
	if c.DryRuns == nil || !AuthCheckDue(prev, key, now) {
		if prev == nil {
			return metav1.Condition{}, false
		}
		return prev.Condition(nc.Generation), true
	}
	it := AuthInstanceType(types)
	if it == nil {
		if prev == nil {
			return metav1.Condition{}, false
		}
		return prev.Condition(nc.Generation), true
	}
	v, ok := DecideAuth(c.DryRuns.DryRunAuthorization(ctx, &nc, it), key, now)
	if !ok {
		if prev == nil {
			return metav1.Condition{}, false
		}
		return prev.Condition(nc.Generation), true
	}
	c.mu.Lock()
	if c.last == nil {
		c.last = map[string]AuthVerdict{}
	}
	c.last[uid] = v
	c.mu.Unlock()
	if c.Verdicts != nil {
		_ = c.Verdicts.PutAuthVerdict(ctx, uid, v)
	}
	return v.Condition(nc.Generation), true
}

// prev is the last verdict of uid: the stored one when a store is set and
// answers, else the one in memory.
func (c *AuthChecker) prev(ctx context.Context, uid string) *AuthVerdict {
	if c.Verdicts != nil {
		if v, err := c.Verdicts.AuthVerdict(ctx, uid); err == nil && v != nil {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.last[uid]; ok {
		return &v
	}
	return nil
}

// AuthInstanceType is the instance type the dry runs name: Karpenter's
// fallback types m5.large or m6g.large when the class can launch one (aws:
// pkg/controllers/nodeclass/validation.go getFallbackInstanceTypes), else
// the first of types; nil when types is empty.
func AuthInstanceType(types []*catalog.InstanceType) *catalog.InstanceType {
	for _, name := range []string{"m5.large", "m6g.large"} {
		if i := slices.IndexFunc(types, func(it *catalog.InstanceType) bool { return it.Name == name }); i >= 0 {
			return types[i]
		}
	}
	if len(types) == 0 {
		return nil
	}
	return types[0]
}

// validationFailed returns conds' ValidationSucceeded condition when it is
// False.
func validationFailed(conds []metav1.Condition) (metav1.Condition, bool) {
	c := meta.FindStatusCondition(conds, v1.ConditionTypeValidationSucceeded)
	if c == nil || c.Status != metav1.ConditionFalse {
		return metav1.Condition{}, false
	}
	return *c, true
}
