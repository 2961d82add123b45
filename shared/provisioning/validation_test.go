package provisioning_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

var authEpoch = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func allowed(actions ...string) []provisioning.AuthResult {
	var out []provisioning.AuthResult
	for _, a := range actions {
		out = append(out, provisioning.AuthResult{Action: a, Outcome: provisioning.AuthAllowed})
	}
	return out
}

func TestDecideAuth(t *testing.T) {
	denied := func(a string) provisioning.AuthResult {
		return provisioning.AuthResult{Action: a, Outcome: provisioning.AuthDenied, Detail: "You are not authorized to perform this operation."}
	}
	cases := []struct {
		name       string
		results    []provisioning.AuthResult
		wantOK     bool
		wantReason string
		wantAction string
	}{
		{name: "all allowed", results: allowed(provisioning.AuthCheckActions...), wantOK: true},
		{name: "launch template denied", results: []provisioning.AuthResult{denied("CreateLaunchTemplate")}, wantOK: true,
			wantReason: "CreateLaunchTemplateAuthCheckFailed", wantAction: "ec2:CreateLaunchTemplate"},
		{name: "fleet denied", results: append(allowed("CreateLaunchTemplate"), denied("CreateFleet")), wantOK: true,
			wantReason: "CreateFleetAuthCheckFailed", wantAction: "ec2:CreateFleet"},
		{name: "run instances denied", results: append(allowed("CreateLaunchTemplate", "CreateFleet"), denied("RunInstances")), wantOK: true,
			wantReason: "RunInstancesAuthCheckFailed", wantAction: "ec2:RunInstances"},
		{name: "throttled: no verdict", results: append(allowed("CreateLaunchTemplate"),
			provisioning.AuthResult{Action: "CreateFleet", Outcome: provisioning.AuthInconclusive, Detail: "RequestLimitExceeded"})},
		{name: "nothing checked: no verdict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, ok := provisioning.DecideAuth(c.results, "k1", authEpoch)
			if ok != c.wantOK {
				t.Fatalf("ok = %v, want %v", ok, c.wantOK)
			}
			if !ok {
				return
			}
			if v.Key != "k1" || !v.CheckedAt.Equal(authEpoch) || v.Reason != c.wantReason {
				t.Errorf("verdict = %+v, want key k1 at epoch, reason %q", v, c.wantReason)
			}
			cond := v.Condition(3)
			wantStatus := metav1.ConditionTrue
			if c.wantReason != "" {
				wantStatus = metav1.ConditionFalse
				if !strings.Contains(cond.Message, c.wantAction) || !strings.Contains(cond.Message, "not authorized") {
					t.Errorf("message %q does not name %s", cond.Message, c.wantAction)
				}
			}
			if cond.Type != "ValidationSucceeded" || cond.Status != wantStatus || cond.ObservedGeneration != 3 {
				t.Errorf("condition = %+v, want ValidationSucceeded %s at generation 3", cond, wantStatus)
			}
		})
	}
}

func TestAuthCheckDue(t *testing.T) {
	prev := &provisioning.AuthVerdict{Key: "k1", CheckedAt: authEpoch}
	cases := []struct {
		name string
		prev *provisioning.AuthVerdict
		key  string
		at   time.Duration
		want bool
	}{
		{"never checked", nil, "k1", 0, true},
		{"fresh", prev, "k1", 29*time.Minute + 59*time.Second, false},
		{"expired at 30 minutes", prev, "k1", 30 * time.Minute, true},
		{"inputs changed", prev, "k2", time.Minute, true},
	}
	for _, c := range cases {
		if got := provisioning.AuthCheckDue(c.prev, c.key, authEpoch.Add(c.at)); got != c.want {
			t.Errorf("%s: AuthCheckDue = %v, want %v", c.name, got, c.want)
		}
	}
}

// scriptedDryRuns answers each DryRunAuthorization with the next script
// entry (the last one repeats) and counts the dry runs made.
type scriptedDryRuns struct {
	script [][]provisioning.AuthResult
	calls  int
	types  []string
}

func (s *scriptedDryRuns) DryRunAuthorization(_ context.Context, _ *v1.EC2NodeClass, it *catalog.InstanceType) []provisioning.AuthResult {
	i := min(s.calls, len(s.script)-1)
	s.calls++
	s.types = append(s.types, it.Name)
	return s.script[i]
}

// memVerdicts is an in-memory verdict store.
type memVerdicts map[string]provisioning.AuthVerdict

func (m memVerdicts) AuthVerdict(_ context.Context, uid string) (*provisioning.AuthVerdict, error) {
	if v, ok := m[uid]; ok {
		return &v, nil
	}
	return nil, nil
}

func (m memVerdicts) PutAuthVerdict(_ context.Context, uid string, v provisioning.AuthVerdict) error {
	m[uid] = v
	return nil
}

func authClass() v1.EC2NodeClass {
	nc := v1.EC2NodeClass{}
	nc.Name, nc.UID, nc.Generation = "default", "uid-1", 2
	nc.Status.AMIs = []v1.AMI{{ID: "ami-1"}}
	nc.Status.Subnets = []v1.Subnet{{ID: "subnet-1"}}
	nc.Status.SecurityGroups = []v1.SecurityGroup{{ID: "sg-1"}}
	nc.Status.InstanceProfile = "profile"
	return nc
}

var authTypes = []*catalog.InstanceType{{Name: "c5.large"}, {Name: "m5.large"}}

func TestAuthCheckerCachesThirtyMinutes(t *testing.T) {
	denied := append(allowed("CreateLaunchTemplate"), provisioning.AuthResult{Action: "CreateFleet", Outcome: provisioning.AuthDenied, Detail: "You are not authorized to perform this operation."})
	runs := &scriptedDryRuns{script: [][]provisioning.AuthResult{allowed(provisioning.AuthCheckActions...), denied}}
	c := &provisioning.AuthChecker{DryRuns: runs, Verdicts: memVerdicts{}}
	nc := authClass()
	status := func(at time.Duration) metav1.Condition {
		t.Helper()
		cond, ok := c.Condition(t.Context(), nc, authTypes, authEpoch.Add(at))
		if !ok {
			t.Fatalf("at %v: no condition", at)
		}
		return cond
	}
	if got := status(0); got.Status != metav1.ConditionTrue {
		t.Fatalf("first check: %+v, want True", got)
	}
	// Within the 30 minutes the verdict stands, though the permission is
	// gone: no dry run is made.
	if got := status(29 * time.Minute); got.Status != metav1.ConditionTrue || runs.calls != 1 {
		t.Fatalf("at 29m: %+v after %d dry-run rounds, want True after 1", got, runs.calls)
	}
	got := status(30 * time.Minute)
	if got.Status != metav1.ConditionFalse || got.Reason != "CreateFleetAuthCheckFailed" || !strings.Contains(got.Message, "ec2:CreateFleet") || runs.calls != 2 {
		t.Fatalf("at 30m: %+v after %d rounds, want False CreateFleetAuthCheckFailed naming ec2:CreateFleet after 2", got, runs.calls)
	}
	// A changed input (a new AMI) makes the check due at once.
	nc.Status.AMIs = []v1.AMI{{ID: "ami-2"}}
	status(31 * time.Minute)
	if runs.calls != 3 {
		t.Errorf("after an AMI change: %d rounds, want 3", runs.calls)
	}
	if runs.types[0] != "m5.large" {
		t.Errorf("dry runs named %s, want Karpenter's fallback m5.large", runs.types[0])
	}
}

// A throttled dry run keeps the last verdict and is retried next time.
func TestAuthCheckerThrottledKeepsLastVerdict(t *testing.T) {
	denied := []provisioning.AuthResult{{Action: "CreateLaunchTemplate", Outcome: provisioning.AuthDenied, Detail: "no"}}
	throttled := []provisioning.AuthResult{{Action: "CreateLaunchTemplate", Outcome: provisioning.AuthInconclusive, Detail: "RequestLimitExceeded"}}
	runs := &scriptedDryRuns{script: [][]provisioning.AuthResult{denied, throttled, allowed(provisioning.AuthCheckActions...)}}
	store := memVerdicts{}
	c := &provisioning.AuthChecker{DryRuns: runs, Verdicts: store}
	nc := authClass()
	if got, _ := c.Condition(t.Context(), nc, authTypes, authEpoch); got.Reason != "CreateLaunchTemplateAuthCheckFailed" {
		t.Fatalf("first: %+v", got)
	}
	got, ok := c.Condition(t.Context(), nc, authTypes, authEpoch.Add(31*time.Minute))
	if !ok || got.Status != metav1.ConditionFalse || got.Reason != "CreateLaunchTemplateAuthCheckFailed" {
		t.Fatalf("throttled: %+v %v, want the last verdict (False)", got, ok)
	}
	if !store["uid-1"].CheckedAt.Equal(authEpoch) {
		t.Errorf("a throttled check moved the stored verdict to %v", store["uid-1"].CheckedAt)
	}
	got, _ = c.Condition(t.Context(), nc, authTypes, authEpoch.Add(32*time.Minute))
	if got.Status != metav1.ConditionTrue || runs.calls != 3 {
		t.Errorf("retry after the throttle: %+v after %d rounds, want True after 3", got, runs.calls)
	}
	// Without any verdict, an inconclusive check gives no condition.
	fresh := &provisioning.AuthChecker{DryRuns: &scriptedDryRuns{script: [][]provisioning.AuthResult{throttled}}}
	if _, ok := fresh.Condition(t.Context(), nc, authTypes, authEpoch); ok {
		t.Error("inconclusive first check gave a condition")
	}
}

// A checker without dry runs (a component lacking the launch grants)
// reports the stored verdict and makes no check.
func TestAuthCheckerReadOnly(t *testing.T) {
	store := memVerdicts{}
	nc := authClass()
	ro := &provisioning.AuthChecker{Verdicts: store}
	if _, ok := ro.Condition(t.Context(), nc, authTypes, authEpoch); ok {
		t.Fatal("read-only checker without a verdict gave a condition")
	}
	store["uid-1"] = provisioning.AuthVerdict{Key: provisioning.AuthKey(nc), CheckedAt: authEpoch, Reason: "RunInstancesAuthCheckFailed", Message: "not authorized to call ec2:RunInstances: no"}
	if got, ok := ro.Condition(t.Context(), nc, authTypes, authEpoch.Add(time.Hour)); !ok || got.Reason != "RunInstancesAuthCheckFailed" {
		t.Errorf("read-only: %+v %v, want the stored verdict", got, ok)
	}
}
