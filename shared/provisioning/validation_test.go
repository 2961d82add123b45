package provisioning_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
