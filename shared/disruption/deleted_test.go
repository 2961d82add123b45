package disruption_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// deletedCluster has NodeClaims a and b of pool "default" on m5.large
// nodes node-a and node-b, with UIDs uid-a and uid-b.
func deletedCluster() *cluster {
	c := newCluster(onDemandTypes(), pool("default"))
	c.node("a", large, "us-east-1a", v1.CapacityTypeOnDemand, "default")
	c.node("b", large, "us-east-1b", v1.CapacityTypeOnDemand, "default")
	for i := range c.in.NodeClaims {
		c.in.NodeClaims[i].UID = types.UID("uid-" + c.in.NodeClaims[i].Name)
	}
	for i := range c.in.Nodes {
		c.in.Nodes[i].UID = types.UID("node-uid-" + c.in.Nodes[i].Name)
	}
	return c
}

func deleteNode(name string, at time.Time) func(*disruption.Input) {
	return func(in *disruption.Input) {
		for i := range in.Nodes {
			if in.Nodes[i].Name == name {
				in.Nodes[i].DeletionTimestamp = &metav1.Time{Time: at}
			}
		}
	}
}

func editClaim(name string, edit func(*v1.NodeClaim)) func(*disruption.Input) {
	return func(in *disruption.Input) {
		for i := range in.NodeClaims {
			if in.NodeClaims[i].Name == name {
				edit(&in.NodeClaims[i])
			}
		}
	}
}

func inFlight(claims ...string) func(*disruption.Input) {
	return func(in *disruption.Input) {
		cmd := disruption.Command{ID: "drift-x-01234567", Method: disruption.MethodDrifted}
		for _, c := range claims {
			cmd.Candidates = append(cmd.Candidates, disruption.Candidate{NodeClaim: c})
		}
		in.InFlight = append(in.InFlight, cmd)
	}
}

func TestDeleted(t *testing.T) {
	deletedAt := now.Add(-40 * time.Second)
	classes := []v1.EC2NodeClass{st.EC2NodeClass(st.DefaultNodeClass)}
	tests := []struct {
		name    string
		edits   []func(*disruption.Input)
		classes []v1.EC2NodeClass
		taken   []disruption.Command
		// want are "<ID prefix> <candidate node>" per command, in order.
		want []string
	}{
		{name: "should start nothing when no Node is being deleted and every owner exists", classes: classes},
		{
			name: "should drain and delete the NodeClaim of a Node being deleted", classes: classes,
			edits: []func(*disruption.Input){deleteNode("node-a", deletedAt)},
			want:  []string{"delete-a- node-a"},
		},
		{
			name: "should find the NodeClaim of a deleted Node by providerID when status.nodeName is unset", classes: classes,
			edits: []func(*disruption.Input){deleteNode("node-a", deletedAt), editClaim("a", func(c *v1.NodeClaim) { c.Status.NodeName = "" })},
			want:  []string{"delete-a- node-a"},
		},
		{
			name: "should leave a deleted Node whose NodeClaim is being deleted itself", classes: classes,
			edits: []func(*disruption.Input){deleteNode("node-a", deletedAt), editClaim("a", func(c *v1.NodeClaim) { c.DeletionTimestamp = &metav1.Time{Time: deletedAt} })},
		},
		{
			name: "should leave a deleted Node that a live execution holds", classes: classes,
			edits: []func(*disruption.Input){deleteNode("node-a", deletedAt), inFlight("a")},
		},
		{
			name: "should leave a deleted Node no NodeClaim names", classes: classes,
			edits: []func(*disruption.Input){deleteNode("node-a", deletedAt), editClaim("a", func(c *v1.NodeClaim) { c.Status.NodeName, c.Status.ProviderID = "", "" })},
		},
		{
			name:  "should drain and delete every NodeClaim of a NodePool no longer configured, by NodeClaim",
			edits: []func(*disruption.Input){func(in *disruption.Input) { in.NodePools = nil }}, classes: classes,
			want: []string{"delete-a- node-a", "delete-b- node-b"},
		},
		{
			name:    "should drain and delete the NodeClaims of an EC2NodeClass no longer configured",
			classes: nil,
			want:    []string{"delete-a- node-a", "delete-b- node-b"},
		},
		{
			name:  "should not delete an owner-deleted NodeClaim twice when its Node is being deleted too",
			edits: []func(*disruption.Input){func(in *disruption.Input) { in.NodePools = nil }, deleteNode("node-b", deletedAt)}, classes: classes,
			want: []string{"delete-b- node-b", "delete-a- node-a"},
		},
		{
			name:  "should leave an owner-deleted NodeClaim that a live execution or another command holds",
			edits: []func(*disruption.Input){func(in *disruption.Input) { in.NodePools = nil }, inFlight("a")}, classes: classes,
			taken: []disruption.Command{{ID: "expire-b-01234567", Candidates: []disruption.Candidate{{NodeClaim: "b"}}}},
		},
		{
			name: "should leave an owner-deleted NodeClaim without a Node to a later poll",
			edits: []func(*disruption.Input){func(in *disruption.Input) { in.NodePools = nil },
				editClaim("a", func(c *v1.NodeClaim) { c.Status.NodeName, c.Status.ProviderID = "", "" })}, classes: classes,
			want: []string{"delete-b- node-b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := deletedCluster().in
			for _, e := range tt.edits {
				e(&in)
			}
			got := []string{}
			for _, c := range disruption.Deleted(in, tt.classes, tt.taken) {
				if c.Method != disruption.MethodDeleted || c.Decision != disruption.DecisionDelete || c.Budgeted || len(c.Replacements) != 0 || len(c.Candidates) != 1 || c.Reason == "" {
					t.Errorf("command %+v, want an unbudgeted Deleted delete of one candidate without replacements, with a reason", c)
					continue
				}
				id := c.ID[:strings.LastIndex(c.ID, "-")+1]
				got = append(got, id+" "+c.Candidates[0].Node)
			}
			want := tt.want
			if want == nil {
				want = []string{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Deleted() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeletedIsStableAcrossPolls checks that the same deletion gives the
// same command ID on every poll (so its execution is started once), and a
// new deletion of the same NodeClaim (another Node incarnation, another
// deletion instant, another owner gone) a new one.
func TestDeletedIsStableAcrossPolls(t *testing.T) {
	deletedAt := now.Add(-40 * time.Second)
	id := func(edits ...func(*disruption.Input)) string {
		t.Helper()
		in := deletedCluster().in
		for _, e := range edits {
			e(&in)
		}
		cmds := disruption.Deleted(in, []v1.EC2NodeClass{st.EC2NodeClass(st.DefaultNodeClass)}, nil)
		if len(cmds) != 1 {
			t.Fatalf("Deleted() = %+v, want one command", cmds)
		}
		return cmds[0].ID
	}
	first := id(deleteNode("node-a", deletedAt))
	later := id(deleteNode("node-a", deletedAt), func(in *disruption.Input) { in.Now = in.Now.Add(time.Minute) })
	if later != first {
		t.Errorf("a later poll of the same deletion has ID %s, want %s", later, first)
	}
	if again := id(deleteNode("node-a", deletedAt.Add(time.Hour))); again == first {
		t.Errorf("a deletion at another instant kept ID %s", again)
	}
	if other := id(deleteNode("node-a", deletedAt), func(in *disruption.Input) { in.Nodes[0].UID = "node-uid-2" }); other == first {
		t.Errorf("a deletion of another Node incarnation kept ID %s", other)
	}
	poolGone := func(in *disruption.Input) { in.NodePools = nil; in.NodeClaims = in.NodeClaims[:1] }
	if a, b := id(poolGone), id(poolGone, func(in *disruption.Input) { in.NodeClaims[0].UID = "uid-a2" }); a == b {
		t.Errorf("an owner deletion of another NodeClaim incarnation kept ID %s", a)
	}
}
