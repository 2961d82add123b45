package disruption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

func TestResultDriftReportsEveryCheckedNodeClaim(t *testing.T) {
	tests := []struct {
		name  string
		build func(c *cluster)
		want  map[string]string // NodeClaim -> drift reason; absent when not checked
	}{
		{
			name: "a node on an old AMI is drifted, one on the current AMI is not",
			build: func(c *cluster) {
				c.node("old", xlarge, "us-east-1a", od, "general", imageID("ami-old"))
				c.node("new", xlarge, "us-east-1b", od, "general", imageID("ami-new"))
			},
			want: map[string]string{"old": disruption.DriftAMI, "new": ""},
		},
		{
			name: "a do-not-disrupt NodeClaim is not checked, so it is absent",
			build: func(c *cluster) {
				c.node("old", xlarge, "us-east-1a", od, "general", imageID("ami-old"), claimAnnotations(v1.AnnotationDoNotDisrupt, "true"))
				c.node("new", xlarge, "us-east-1b", od, "general", imageID("ami-new"))
			},
			want: map[string]string{"new": ""},
		},
		{
			name: "a NodeClaim of an unknown NodePool is not checked",
			build: func(c *cluster) {
				c.node("stray", xlarge, "us-east-1a", od, "gone", imageID("ami-old"))
			},
			want: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(onDemandTypes(), pool("general"))
			withAMIs(&c.in.NodeClasses[0], "ami-new")
			tt.build(c)
			res, err := disruption.Evaluate(t.Context(), c.in)
			if err != nil {
				t.Fatalf("Evaluate() error = %v", err)
			}
			got := map[string]string{}
			for i, d := range res.Drift {
				got[d.NodeClaim] = d.Reason
				if (d.Reason == "") != (d.Detail == "") {
					t.Errorf("Drift[%d] = %+v: want a detail exactly when drifted", i, d)
				}
				if i > 0 && res.Drift[i-1].NodeClaim >= d.NodeClaim {
					t.Errorf("Drift not sorted by NodeClaim: %q before %q", res.Drift[i-1].NodeClaim, d.NodeClaim)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Result.Drift reasons (-want +got):\n%s", diff)
			}
		})
	}
}
