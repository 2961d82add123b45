package disruption_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

const reserved = v1.CapacityTypeReserved

// inReservation labels a NodeClaim and its Node as launched into
// reservation id of type typ, and registers the Node.
func inReservation(id, typ string) managedOption {
	return func(nc *v1.NodeClaim, n *corev1.Node) {
		for _, l := range []map[string]string{nc.Labels, n.Labels} {
			l[v1.LabelCapacityReservationID] = id
			l[v1.LabelCapacityReservationType] = typ
		}
		n.Labels[v1.LabelRegistered] = "true"
	}
}

// reservationStatus sets the default class's status.capacityReservations
// to crs, resolved for its generation when resolved is true.
func (c *cluster) reservationStatus(resolved bool, crs ...v1.CapacityReservation) {
	nc := &c.in.NodeClasses[0]
	nc.Generation = 3
	nc.Status.CapacityReservations = crs
	if resolved {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{
			Type: v1.ConditionTypeCapacityReservationsReady, Status: metav1.ConditionTrue, Reason: "CapacityReservationsReady", ObservedGeneration: 3})
	}
}

// instance lists the instance of NodeClaim name (as c.node built it) in
// reservation id ("" for none).
func (c *cluster) instance(name, zone, id string) {
	c.in.Instances = append(c.in.Instances, disruption.Instance{ProviderID: "aws:///" + zone + "/i-" + name, CapacityReservationID: id})
}

func block(id string, end time.Time) v1.CapacityReservation {
	return v1.CapacityReservation{ID: id, AvailabilityZone: "us-east-1a", InstanceType: "m5.xlarge", OwnerID: "111122223333",
		ReservationType: v1.ReservationTypeCapacityBlock, EndTime: &metav1.Time{Time: end}, State: v1.ReservationStateActive}
}

func odcr(id string) v1.CapacityReservation {
	return v1.CapacityReservation{ID: id, AvailabilityZone: "us-east-1a", InstanceType: "m5.xlarge", OwnerID: "111122223333",
		ReservationType: v1.ReservationTypeDefault, State: v1.ReservationStateActive}
}

func TestCapacityBlockExpiry(t *testing.T) {
	dnd := nodeAnnotations(v1.AnnotationDoNotDisrupt, "true")
	runEvaluations(t, []evaluation{
		{
			name: "should delete a capacity block's NodeClaim once the block is within 40 minutes of its end",
			build: func(c *cluster) {
				c.reservationStatus(true, block("cr-block", now.Add(40*time.Minute)))
				c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-block", v1.ReservationTypeCapacityBlock), dnd)
				c.pods("node-a", "1", "a-0")
			},
			want: []cmdSummary{del(disruption.MethodCapacityBlockExpiring, "a")},
		},
		{
			name: "should not delete a capacity block's NodeClaim 41 minutes before the block's end",
			build: func(c *cluster) {
				c.reservationStatus(true, block("cr-block", now.Add(41*time.Minute)))
				c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-block", v1.ReservationTypeCapacityBlock), dnd)
			},
			blocked: map[string]string{"a": "do-not-disrupt"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should take the reservation type from the NodeClaim's label when the status entry has none",
			build: func(c *cluster) {
				cr := block("cr-block", now.Add(10*time.Minute))
				cr.ReservationType = ""
				c.reservationStatus(false, cr)
				c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-block", v1.ReservationTypeCapacityBlock))
			},
			want: []cmdSummary{del(disruption.MethodCapacityBlockExpiring, "a")},
		},
		{
			name: "should follow the instance's reservation when EC2 lists it",
			build: func(c *cluster) {
				c.reservationStatus(true, block("cr-block", now.Add(time.Minute)), odcr("cr-odcr"))
				c.node("a", xlarge, "us-east-1a", od, "general")
				c.instance("a", "us-east-1a", "cr-block")
				c.node("b", xlarge, "us-east-1a", reserved, "general", inReservation("cr-block", v1.ReservationTypeCapacityBlock), dnd)
				c.instance("b", "us-east-1a", "cr-odcr")
			},
			want:    []cmdSummary{del(disruption.MethodCapacityBlockExpiring, "a")},
			blocked: map[string]string{"b": "do-not-disrupt"},
			events:  map[string]string{"b": disruption.EventDisruptionBlocked},
		},
		{
			name: "should never expire an on-demand capacity reservation",
			build: func(c *cluster) {
				cr := odcr("cr-odcr")
				cr.EndTime = &metav1.Time{Time: now}
				c.reservationStatus(true, cr)
				c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-odcr", v1.ReservationTypeDefault), dnd)
			},
			blocked: map[string]string{"a": "do-not-disrupt"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
	})
}

func TestCapacityBlockExpiryCommand(t *testing.T) {
	c := newCluster(onDemandTypes(), pool("general", budgets(v1.Budget{Nodes: "0"})))
	c.reservationStatus(true, block("cr-block", now.Add(30*time.Minute)))
	c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-block", v1.ReservationTypeCapacityBlock))
	res, err := disruption.Evaluate(t.Context(), c.in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if len(res.Commands) != 1 {
		t.Fatalf("Evaluate() commands = %+v, want one despite a zero budget", res.Commands)
	}
	cmd := res.Commands[0]
	if cmd.Budgeted || cmd.Decision != disruption.DecisionDelete || !strings.HasPrefix(cmd.ID, "cbexpire-a-") {
		t.Errorf("command = budgeted %v, decision %s, id %s; want unbudgeted delete named cbexpire-a-*", cmd.Budgeted, cmd.Decision, cmd.ID)
	}
	if !strings.Contains(cmd.Reason, "cr-block") {
		t.Errorf("command reason %q does not name the reservation", cmd.Reason)
	}
	// Re-validation never abandons it: the block is still expiring.
	if why, err := disruption.Validate(t.Context(), c.in, cmd); err != nil || why != "" {
		t.Errorf("Validate() = %q, %v; want it to hold", why, err)
	}
	// Evaluated again with the command in flight, it is not started twice.
	c.in.InFlight = []disruption.Command{cmd}
	res, err = disruption.Evaluate(t.Context(), c.in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	if len(res.Commands) != 0 {
		t.Errorf("Evaluate() with the command in flight = %+v, want none", res.Commands)
	}
}

func TestCapacityReservationDrift(t *testing.T) {
	runEvaluations(t, []evaluation{
		{
			name:  "should drift a reserved instance whose reservation the class no longer selects",
			pools: []v1.NodePool{pool("general", consolidateAfter("Never"))},
			build: func(c *cluster) {
				c.reservationStatus(true, odcr("cr-other"))
				c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-gone", v1.ReservationTypeDefault))
				c.instance("a", "us-east-1a", "cr-gone")
			},
			want: []cmdSummary{del(disruption.MethodDrifted, "a")},
		},
		{
			name: "should not drift while discovery has not resolved the class's reservations",
			build: func(c *cluster) {
				c.reservationStatus(false)
				c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-gone", v1.ReservationTypeDefault), nodeAnnotations(v1.AnnotationDoNotDisrupt, "true"))
				c.instance("a", "us-east-1a", "cr-gone")
			},
			blocked: map[string]string{"a": "do-not-disrupt"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should not drift a reservation still selected",
			build: func(c *cluster) {
				c.reservationStatus(true, odcr("cr-odcr"))
				c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-odcr", v1.ReservationTypeDefault), nodeAnnotations(v1.AnnotationDoNotDisrupt, "true"))
				c.instance("a", "us-east-1a", "cr-odcr")
			},
			blocked: map[string]string{"a": "do-not-disrupt"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
		{
			name: "should not drift an instance EC2 reports in no reservation (it is demoted instead)",
			build: func(c *cluster) {
				c.reservationStatus(true)
				c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-gone", v1.ReservationTypeDefault), nodeAnnotations(v1.AnnotationDoNotDisrupt, "true"))
				c.instance("a", "us-east-1a", "")
			},
			blocked: map[string]string{"a": "do-not-disrupt"},
			events:  map[string]string{"a": disruption.EventDisruptionBlocked},
		},
	})
}

func TestDriftReportsCapacityReservationDrift(t *testing.T) {
	c := newCluster(onDemandTypes(), pool("general"))
	c.reservationStatus(true)
	c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-gone", v1.ReservationTypeDefault))
	res, err := disruption.Evaluate(t.Context(), c.in)
	if err != nil {
		t.Fatalf("Evaluate() error = %v", err)
	}
	want := []disruption.DriftStatus{{NodeClaim: "a", Reason: disruption.DriftCapacityReservation,
		Detail: `capacity reservation "cr-gone" is no longer selected by EC2NodeClass default`}}
	if diff := cmp.Diff(want, res.Drift); diff != "" {
		t.Errorf("Drift mismatch (-want +got):\n%s", diff)
	}
}

func TestDemotions(t *testing.T) {
	resv := inReservation("cr-gone", v1.ReservationTypeDefault)
	tests := []struct {
		name   string
		build  func(c *cluster)
		active string
		want   []disruption.Demotion
	}{
		{
			name: "should demote a reserved NodeClaim and its Node once the reservation is gone from EC2 and the resolved status",
			build: func(c *cluster) {
				c.reservationStatus(true, odcr("cr-other"))
				c.node("a", xlarge, "us-east-1a", reserved, "general", resv)
				c.instance("a", "us-east-1a", "")
			},
			want: []disruption.Demotion{{NodeClaim: "a", Node: "node-a", ReservationID: "cr-gone"}},
		},
		{
			name: "should not demote before discovery has resolved the class's reservations",
			build: func(c *cluster) {
				c.reservationStatus(false)
				c.node("a", xlarge, "us-east-1a", reserved, "general", resv)
				c.instance("a", "us-east-1a", "")
			},
		},
		{
			name: "should not demote when the status was resolved for an older generation",
			build: func(c *cluster) {
				c.reservationStatus(true)
				c.in.NodeClasses[0].Generation = 4
				c.node("a", xlarge, "us-east-1a", reserved, "general", resv)
				c.instance("a", "us-east-1a", "")
			},
		},
		{
			name: "should not demote while the status still lists the reservation",
			build: func(c *cluster) {
				c.reservationStatus(true, odcr("cr-gone"))
				c.node("a", xlarge, "us-east-1a", reserved, "general", resv)
				c.instance("a", "us-east-1a", "")
			},
		},
		{
			name: "should not demote while EC2 still reports the instance in a reservation, or does not list it",
			build: func(c *cluster) {
				c.reservationStatus(true)
				c.node("a", xlarge, "us-east-1a", reserved, "general", resv)
				c.instance("a", "us-east-1a", "cr-gone")
				c.node("b", xlarge, "us-east-1a", reserved, "general", resv)
			},
		},
		{
			name: "should demote the NodeClaim only while its Node is not registered or is leaving",
			build: func(c *cluster) {
				c.reservationStatus(true)
				c.node("a", xlarge, "us-east-1a", reserved, "general", resv, func(_ *v1.NodeClaim, n *corev1.Node) { delete(n.Labels, v1.LabelRegistered) })
				c.instance("a", "us-east-1a", "")
				c.node("b", xlarge, "us-east-1a", reserved, "general", resv, func(_ *v1.NodeClaim, n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: now} })
				c.instance("b", "us-east-1a", "")
			},
			want: []disruption.Demotion{{NodeClaim: "a", ReservationID: "cr-gone"}, {NodeClaim: "b", ReservationID: "cr-gone"}},
		},
		{
			name: "should not demote a NodeClaim being deleted, an on-demand one, or an adopted one while Karpenter runs",
			build: func(c *cluster) {
				c.reservationStatus(true)
				c.node("a", xlarge, "us-east-1a", reserved, "general", resv, deletingClaim)
				c.instance("a", "us-east-1a", "")
				c.node("b", xlarge, "us-east-1a", od, "general")
				c.instance("b", "us-east-1a", "")
				c.node("c", xlarge, "us-east-1a", reserved, "general", resv, claimAnnotations(v1.AnnotationAdoptedFrom, "karpenter"))
				c.instance("c", "us-east-1a", "")
			},
			active: "karpenter deployment is running",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(onDemandTypes(), pool("general"))
			tt.build(c)
			got, err := disruption.Demotions(c.in, tt.active)
			if err != nil {
				t.Fatalf("Demotions() error = %v", err)
			}
			for i := range got {
				if !strings.Contains(got[i].Reason, "cr-gone") {
					t.Errorf("Demotions()[%d].Reason = %q, want it to name the reservation", i, got[i].Reason)
				}
				got[i].Reason = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Demotions() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDemoteLabels(t *testing.T) {
	in := map[string]string{v1.LabelCapacityType: reserved, v1.LabelCapacityReservationID: "cr-1", v1.LabelCapacityReservationType: "default", "team": "a"}
	got, changed := disruption.DemoteLabels(in)
	want := map[string]string{v1.LabelCapacityType: od, v1.LabelCapacityReservationType: "default", "team": "a"}
	if !changed || !cmp.Equal(want, got) {
		t.Errorf("DemoteLabels() = %v, %v; want %v, true", got, changed, want)
	}
	if in[v1.LabelCapacityType] != reserved {
		t.Errorf("DemoteLabels() modified its input: %v", in)
	}
	again, changed := disruption.DemoteLabels(got)
	if changed || !cmp.Equal(want, again) {
		t.Errorf("DemoteLabels() twice = %v, %v; want %v unchanged", again, changed, want)
	}
}

func TestApplyDemotionsStopsDrift(t *testing.T) {
	c := newCluster(onDemandTypes(), pool("general"))
	c.reservationStatus(true)
	c.node("a", xlarge, "us-east-1a", reserved, "general", inReservation("cr-gone", v1.ReservationTypeDefault))
	c.instance("a", "us-east-1a", "")
	ds, err := disruption.Demotions(c.in, "")
	if err != nil || len(ds) != 1 {
		t.Fatalf("Demotions() = %v, %v; want one", ds, err)
	}
	disruption.ApplyDemotions(&c.in, ds)
	if got := c.in.NodeClaims[0].Labels[v1.LabelCapacityType]; got != od {
		t.Errorf("NodeClaim capacity type = %q, want on-demand", got)
	}
	if got := c.in.Nodes[0].Labels[v1.LabelCapacityType]; got != od {
		t.Errorf("Node capacity type = %q, want on-demand", got)
	}
	if ds, _ := disruption.Demotions(c.in, ""); len(ds) != 0 {
		t.Errorf("Demotions() after applying = %v, want none", ds)
	}
}
