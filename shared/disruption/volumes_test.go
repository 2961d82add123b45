package disruption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/requirements"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestConsolidationKeepsPodsInTheirVolumesZone is issue 19 item 3: a pod
// whose claim is bound to a zonal PersistentVolume moves with its volume,
// so consolidation never plans it onto a node of another zone; the
// replacement it plans instead is restricted to the volume's zone.
func TestConsolidationKeepsPodsInTheirVolumesZone(t *testing.T) {
	build := func(zonal bool) *cluster {
		c := newCluster(onDemandTypes(), pool("general"))
		c.node("a", xlarge, "us-east-1a", od, "general")
		c.node("b", xlarge2, "us-east-1b", od, "general")
		if zonal {
			c.pod("a-0", "node-a", st.Requests("1", "256Mi"), st.WithClaim("data-a-0"))
			c.in.Volumes = scheduling.Volumes{
				Claims:            []corev1.PersistentVolumeClaim{st.BoundClaim("default", "data-a-0", "pv-a-0")},
				PersistentVolumes: []corev1.PersistentVolume{st.ZonalVolume("pv-a-0", "us-east-1a")},
			}
		} else {
			c.pods("node-a", "1", "a-0")
		}
		c.pods("node-b", "1", "b-0", "b-1", "b-2", "b-3", "b-4", "b-5")
		return c
	}
	t.Run("should delete the node when its pod has no volume (control)", func(t *testing.T) {
		res, err := disruption.Evaluate(t.Context(), build(false).in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]cmdSummary{del(disruption.MethodUnderutilized, "a")}, summarize(res).Commands); diff != "" {
			t.Errorf("commands (-want +got):\n%s", diff)
		}
	})
	t.Run("should not move a pod to a node outside its volume's zone and replace within the zone", func(t *testing.T) {
		res, err := disruption.Evaluate(t.Context(), build(true).in)
		if err != nil {
			t.Fatal(err)
		}
		replaced := false
		for _, c := range res.Commands {
			for _, cand := range c.Candidates {
				if cand.NodeClaim != "a" {
					continue
				}
				if c.Decision == disruption.DecisionDelete {
					t.Fatalf("command %s deletes a without a replacement: its pod would move to node-b in us-east-1b, away from its volume", c.ID)
				}
				for _, r := range c.Replacements {
					replaced = true
					zones := requirements.FromNodeSelector(r.NodeClaim.Spec.Requirements).Get(v1.LabelTopologyZone)
					if zones == nil || zones.Has("us-east-1b") || !zones.Has("us-east-1a") {
						t.Errorf("replacement %s zones %v, want us-east-1a only (the volume's zone)", r.NodeClaim.Name, zones)
					}
				}
			}
		}
		if !replaced {
			t.Errorf("commands %+v, want a replaced by a cheaper node in us-east-1a", summarize(res).Commands)
		}
	})
}

// TestConsolidationCountsTheTargetNodesAttachLimits is issue 19 item 3: a
// pod is not moved to a node whose CSINode attach limit its claim would
// pass (Input.VolumeLimits); with room under the limit it is.
func TestConsolidationCountsTheTargetNodesAttachLimits(t *testing.T) {
	const ebs = "ebs.csi.aws.com"
	for _, tt := range []struct {
		name  string
		limit int
		want  []cmdSummary
	}{
		{name: "should delete a node whose pod's volume fits under the other node's attach limit", limit: 2,
			want: []cmdSummary{del(disruption.MethodUnderutilized, "a")}},
		{name: "should not delete a node whose pod's volume would pass the other node's attach limit", limit: 1,
			want: []cmdSummary{replace(disruption.MethodUnderutilized, od, []string{"m5.large"}, "a")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(onDemandTypes(), pool("general"))
			c.node("a", xlarge, "us-east-1a", od, "general")
			c.node("b", xlarge2, "us-east-1a", od, "general")
			c.pod("a-0", "node-a", st.Requests("1", "256Mi"), st.WithClaim("data-a-0"))
			c.pod("b-0", "node-b", st.Requests("1", "256Mi"), st.WithClaim("data-b-0"))
			c.pods("node-b", "1", "b-1", "b-2", "b-3", "b-4", "b-5")
			c.in.Volumes = scheduling.Volumes{
				Claims:            []corev1.PersistentVolumeClaim{st.BoundClaim("default", "data-a-0", "pv-a-0"), st.BoundClaim("default", "data-b-0", "pv-b-0")},
				PersistentVolumes: []corev1.PersistentVolume{st.ZonalVolume("pv-a-0", "us-east-1a"), st.ZonalVolume("pv-b-0", "us-east-1a")},
			}
			c.in.VolumeLimits = map[string]map[string]int{"node-b": {ebs: tt.limit}}
			res, err := disruption.Evaluate(t.Context(), c.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(res).Commands); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
		})
	}
}
