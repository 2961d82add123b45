package disruption_test

import (
	"testing"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestValidate evaluates a snapshot, changes it as the cluster might
// during the validation wait, and re-checks the command.
func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		build  func(c *cluster)
		change func(c *cluster)
		want   string
	}{
		{
			name:   "should keep an empty command when nothing changed",
			build:  func(c *cluster) { c.node("a", xlarge, "us-east-1a", od, "general") },
			change: func(*cluster) {},
			want:   "",
		},
		{
			name:   "should drop an empty candidate that received a pod during validation (11.3 item 25)",
			build:  func(c *cluster) { c.node("a", xlarge, "us-east-1a", od, "general") },
			change: func(c *cluster) { c.pods("node-a", "1", "late-0") },
			want:   "NodeClaim a is no longer empty: 1 pods to reschedule",
		},
		{
			name:  "should drop a candidate that became nominated",
			build: func(c *cluster) { c.node("a", xlarge, "us-east-1a", od, "general") },
			change: func(c *cluster) {
				c.in.NominatedUntil = map[string]time.Time{"a": now.Add(time.Minute)}
			},
			want: "NodeClaim a is no longer a candidate: nominated until 2026-01-01T01:01:00Z: the provisioner placed pending pods on it",
		},
		{
			name:   "should drop a candidate that is gone",
			build:  func(c *cluster) { c.node("a", xlarge, "us-east-1a", od, "general") },
			change: func(c *cluster) { c.in.NodeClaims, c.in.Nodes = nil, nil },
			want:   "NodeClaim a no longer exists",
		},
		{
			name: "should keep a consolidation whose pods still fit",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge2, "us-east-1a", od, "general")
				c.pods("node-a", "1", "a-0")
				c.pods("node-b", "1", "b-0", "b-1", "b-2", "b-3", "b-4", "b-5")
			},
			change: func(*cluster) {},
			want:   "",
		},
		{
			name: "should drop a delete whose pods no longer fit on the remaining nodes",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge2, "us-east-1a", od, "general")
				c.pods("node-a", "1", "a-0")
				c.pods("node-b", "1", "b-0", "b-1", "b-2", "b-3", "b-4", "b-5")
			},
			change: func(c *cluster) { c.pods("node-b", "2", "late-0") },
			want:   "the candidates' pods now need 1 new NodeClaim(s)",
		},
		{
			name: "should drop a consolidation whose candidate got a do-not-disrupt pod",
			build: func(c *cluster) {
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.node("b", xlarge2, "us-east-1a", od, "general")
				c.pods("node-a", "1", "a-0")
				c.pods("node-b", "1", "b-0", "b-1", "b-2", "b-3", "b-4", "b-5")
			},
			change: func(c *cluster) {
				c.pod("guarded", "node-a", st.Requests("100m", "64Mi"), annotate(v1.AnnotationDoNotDisrupt, "true"))
			},
			want: `NodeClaim a: pod default/guarded has karpenter.sh/do-not-disrupt: "true"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(onDemandTypes(), pool("general"))
			tt.build(c)
			res, err := disruption.Evaluate(t.Context(), c.in)
			if err != nil {
				t.Fatalf("Evaluate() error = %v", err)
			}
			if len(res.Commands) != 1 {
				t.Fatalf("Evaluate() commands = %+v, want one", res.Commands)
			}
			cmd := res.Commands[0]
			c.in.InFlight = []disruption.Command{cmd}
			tt.change(c)
			got, err := disruption.Validate(t.Context(), c.in, cmd)
			if err != nil {
				t.Fatalf("Validate() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}
