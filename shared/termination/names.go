package termination

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/nodewright/nodewright/shared/workflow"
)

// Annotations nodewright writes while it disrupts a node. The claim
// annotations are on the stored NodeClaim; AnnotationClaimHolder is also put
// on the Node when it is tainted, so `kubectl get node -o yaml` names the
// execution to open in the console.
const (
	// AnnotationClaimHolder names the execution that holds the NodeClaim.
	AnnotationClaimHolder = "nodewright.dev/disruption-execution"
	// AnnotationClaimMethod is the holder's method (workflow.Method*).
	AnnotationClaimMethod = "nodewright.dev/disruption-method"
	// AnnotationClaimUntil is when the claim lapses unless renewed
	// (RFC 3339).
	AnnotationClaimUntil = "nodewright.dev/disruption-claimed-until"
	// AnnotationExcludedFromLB marks a Node whose load-balancer exclusion
	// label nodewright added (so a rollback removes only its own).
	AnnotationExcludedFromLB = "nodewright.dev/excluded-from-load-balancers"
)

// LabelValueExcludeFromLB is the value Karpenter gives
// node.kubernetes.io/exclude-from-external-load-balancers at termination
// (karpenter-spec.md section 1.4).
const LabelValueExcludeFromLB = "karpenter"

// Karpenter's timers for a disruption command (karpenter-spec.md sections
// 6.4 and 6.5), as the defaults of DefaultSettings.
const (
	// ValidationDelay is waited before emptiness and consolidation
	// commands act (Karpenter validates them after 15 s).
	ValidationDelay = 15 * time.Second
	// ReplacementTimeout bounds the wait for replacements to initialize
	// (Karpenter's command timeout is at least 10 minutes).
	ReplacementTimeout = 10 * time.Minute
	// PollInterval is the pause between replacement readiness checks.
	PollInterval = 10 * time.Second
	// DrainPollInterval and DrainPollMax bound the pause between drain
	// rounds (Karpenter's eviction queue backs off similarly).
	DrainPollInterval = 5 * time.Second
	DrainPollMax      = time.Minute
	// MaxDrainRounds keeps an execution's history below Step Functions'
	// 25,000 events (about ten per round); a longer drain continues in a
	// new execution.
	MaxDrainRounds = 1000
	// LeaseDuration is how long budget leases and claims last unrenewed.
	LeaseDuration = 15 * time.Minute
)

// DefaultSettings returns the timers for a command of method.
func DefaultSettings(method string) workflow.Settings {
	s := workflow.Settings{
		PollSeconds:               int(PollInterval / time.Second),
		ReplacementTimeoutSeconds: int(ReplacementTimeout / time.Second),
		DrainPollSeconds:          int(DrainPollInterval / time.Second),
		DrainPollMaxSeconds:       int(DrainPollMax / time.Second),
		MaxDrainRounds:            MaxDrainRounds,
		LeaseSeconds:              int(LeaseDuration / time.Second),
	}
	if method == workflow.MethodEmpty || method == workflow.MethodUnderutilized {
		s.ValidationDelaySeconds = int(ValidationDelay / time.Second)
	}
	return s
}

// maxExecutionName is Step Functions' limit on execution names.
const maxExecutionName = 80

// attemptWindow is how long the same decision maps to the same execution
// name.
const attemptWindow = 5 * time.Minute

// ExecutionName returns the execution name for a command whose ID is
// commandID ("consolidate-<nodeclaim>-<8 hex>", shared/disruption)
// decided at decidedAt: the ID with its hash replaced by one of the ID and
// the five-minute window decidedAt falls in. Evaluations that race over the
// same state in the same window derive the same name, so Step Functions
// starts one execution (ExecutionAlreadyExists); the same decision made
// again later, after an execution that failed or was abandoned, gets a new
// name and so a new attempt. At most 80 characters.
func ExecutionName(commandID string, decidedAt time.Time) string {
	base := commandID
	if i := strings.LastIndexByte(base, '-'); i > 0 {
		base = base[:i]
	}
	window := decidedAt.UTC().Truncate(attemptWindow).Unix()
	sum := sha256.Sum256([]byte(commandID + "\x00" + strconv.FormatInt(window, 10)))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	if len(base)+len(suffix) > maxExecutionName {
		base = base[:maxExecutionName-len(suffix)]
	}
	return base + suffix
}

// ContinuationName names the n-th continuation of the execution id:
// "<id>-c<n>", id cut to fit 80 characters.
func ContinuationName(id string, n int) string {
	suffix := "-c" + strconv.Itoa(n)
	if len(id)+len(suffix) > maxExecutionName {
		id = id[:maxExecutionName-len(suffix)]
	}
	return id + suffix
}

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ReplacementName names the i-th replacement NodeClaim of execution id in
// nodePool: "<nodePool>-<10 characters of [a-z2-7]>", the same shape as a
// provisioned NodeClaim's name. The same arguments always give the same
// name, so a retried launch step creates each replacement once.
func ReplacementName(nodePool, id string, i int) string {
	sum := sha256.Sum256([]byte("nodewright/replacement/" + id + "/" + strconv.Itoa(i)))
	return nodePool + "-" + lowerBase32.EncodeToString(sum[:])[:10]
}

// CommandRef is the key under which the disruption Lambda stores the
// replacement NodeClaims of execution id.
func CommandRef(id string) string { return "disruption/" + id }
