package nodewright

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInstanceStatusFunction checks the instance-status poll's row: it is
// deployed with or without the interruption queue (Karpenter registers the
// poll regardless, karpenter-spec 8.2), runs every minute, may call
// ec2:DescribeInstanceStatus in the stack's region only, and may start
// only the interruption state machine.
func TestInstanceStatusFunction(t *testing.T) {
	for _, interruption := range []bool{true, false} {
		name := "with the interruption queue"
		if !interruption {
			name = "without the interruption queue"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			props := baseProps(f)
			props.Interruption = interruption
			_, c := mustTemplate(t, props)

			var schedules []string
			for _, r := range c.ofType("AWS::Scheduler::Schedule") {
				if d := render(r.Properties["Description"]); strings.Contains(d, "instancestatus") {
					schedules = append(schedules, d+" "+render(r.Properties["ScheduleExpression"]))
				}
			}
			if diff := cmp.Diff([]string{"nodewright prod-east: instancestatus every 1m0s rate(1 minute)"}, schedules); diff != "" {
				t.Errorf("instancestatus schedules mismatch (-want +got):\n%s", diff)
			}

			roleID(t, c, "instancestatus") // it has a role
			owner := "Nodewright" + camel("instancestatus") + "Role"
			var ec2, states []string
			for _, st := range c.identityStatements() {
				if st.effect != "Allow" || !strings.HasPrefix(st.owner, owner) {
					continue
				}
				for _, a := range st.actions {
					switch {
					case strings.HasPrefix(a, "ec2:"):
						ec2 = append(ec2, st.sid+" "+a+" "+strings.Join(st.resources, ",")+" "+strings.Join(st.conditionKeys(), ","))
					case strings.HasPrefix(a, "states:"):
						states = append(states, a+" "+strings.Join(st.resources, ","))
					}
				}
			}
			if diff := cmp.Diff([]string{"ReadInstanceStatus ec2:DescribeInstanceStatus * aws:RequestedRegion"}, ec2); diff != "" {
				t.Errorf("instancestatus EC2 grants mismatch (-want +got):\n%s", diff)
			}
			wantStates := []string{"states:StartExecution arn:<AWS::Partition>:states:us-east-1:111122223333:stateMachine:" + stateMachineName(props.Cluster.Name, "interruption")}
			if diff := cmp.Diff(wantStates, states); diff != "" {
				t.Errorf("instancestatus Step Functions grants mismatch (-want +got):\n%s", diff)
			}
			if !slices.ContainsFunc(specByName(t, "instancestatus").grants, func(g grant) bool { return g == grantTable }) {
				t.Error("instancestatus cannot read the NodeClaims nor record events: no table grant")
			}
		})
	}
}
