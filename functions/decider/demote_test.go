package decider_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/decider"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// reservationResolver is resolver with status.capacityReservations set
// to crs, its one Ready condition observed at the class's generation as
// adapters.NodeClasses records it; resolved says whether discovery
// succeeded for that generation: when false, CapacityReservationsReady is
// Unknown (discovery not run yet).
type reservationResolver struct {
	resolved bool
	crs      []v1.CapacityReservation
}

func (r reservationResolver) ResolveNodeClass(ctx context.Context, nc v1.EC2NodeClass) (provisioning.ResolvedNodeClass, error) {
	out, err := resolver{}.ResolveNodeClass(ctx, nc)
	out.NodeClass.Status.CapacityReservations = r.crs
	for i := range out.NodeClass.Status.Conditions {
		out.NodeClass.Status.Conditions[i].ObservedGeneration = nc.Generation
	}
	if !r.resolved {
		out.NodeClass.Status.Conditions = append(out.NodeClass.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeCapacityReservationsReady,
			Status: metav1.ConditionUnknown, Reason: "AwaitingReconciliation", ObservedGeneration: nc.Generation})
	}
	return out, err
}

// instanceIn lists i-0a in reservation id ("" for none).
type instanceIn struct{ id string }

func (i instanceIn) List(context.Context, string) ([]launch.Instance, error) {
	ct := v1.CapacityTypeOnDemand
	if i.id != "" {
		ct = v1.CapacityTypeReserved
	}
	return []launch.Instance{{ID: "i-0a", Zone: "us-east-1a", ImageID: "ami-1", SubnetID: "subnet-a", State: "running", CapacityType: ct, ReservationID: i.id}}, nil
}

// fakeNodes holds Nodes by name for decider.Deps.Nodes and counts writes.
type fakeNodes struct {
	nodes  map[string]*corev1.Node
	writes int
}

func (f *fakeNodes) UpdateNode(_ context.Context, name string, mutate func(*corev1.Node) error) error {
	n, ok := f.nodes[name]
	if !ok {
		return v1.ErrNotFound
	}
	next := n.DeepCopy()
	if err := mutate(next); err != nil {
		return err
	}
	if !maps.Equal(n.Labels, next.Labels) {
		f.writes++
		f.nodes[name] = next
	}
	return nil
}

// reserve relabels seed's NodeClaim general-a and its Node as launched into
// capacity reservation cr-gone, and lets the NodePool take reserved
// capacity.
func reserve(t *testing.T, e env) *corev1.Node {
	t.Helper()
	cfg, err := e.store.GetConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodePools[0].Spec.Template.Spec.Requirements[0].Values = []string{v1.CapacityTypeOnDemand, v1.CapacityTypeReserved}
	cfg.NodePools[0].Spec.Disruption.ConsolidateAfter = v1.MustParseNillable(v1.Never)
	if _, err := e.store.PutConfig(t.Context(), cfg.Config, cfg.Version); err != nil {
		t.Fatal(err)
	}
	c, err := e.store.GetNodeClaim(t.Context(), "general-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Labels[v1.LabelCapacityType] = v1.CapacityTypeReserved
	c.Labels[v1.LabelCapacityReservationID] = "cr-gone"
	c.Labels[v1.LabelCapacityReservationType] = v1.ReservationTypeDefault
	if _, err := e.store.UpdateNodeClaim(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	n := seededNode(c.Labels, c.CreationTimestamp)
	part := &v1.ClusterSnapshot{ID: "part-2", Cluster: testCluster, CreatedAt: metav1.NewTime(t0.Add(-30 * time.Second)), SnapshotID: "snap-2",
		Part: 0, Parts: 1, Nodes: []v1.NodeSummary{v1.SummarizeNode(n)}}
	if _, err := e.store.PutSnapshotPart(t.Context(), part, t0.Add(-30*time.Second)); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHandleDemotesANodeClaimWhoseReservationIsGone checks the reserved ->
// on-demand demotion through the handler (aws:
// pkg/controllers/capacityreservation/capacitytype): the NodeClaim record
// and its Node lose the reserved capacity type and the reservation ID once
// EC2 runs the instance in no reservation and discovery no longer lists it;
// discovery not yet run, or an instance still in its reservation, demotes
// nothing; a second run writes nothing.
func TestHandleDemotesANodeClaimWhoseReservationIsGone(t *testing.T) {
	tests := []struct {
		name        string
		resolver    reservationResolver
		instance    string
		wantDemoted bool
		wantDrift   bool // CapacityReservationDrift: still in a reservation the class no longer selects
	}{
		{name: "should demote once EC2 and the resolved status agree the reservation is gone", resolver: reservationResolver{resolved: true}, wantDemoted: true},
		{name: "should not demote before discovery has run (empty, unresolved status)", resolver: reservationResolver{}},
		{name: "should drift, not demote, while the instance still runs in a reservation the class no longer selects", resolver: reservationResolver{resolved: true}, instance: "cr-gone", wantDrift: true},
		{name: "should neither demote nor drift while the class still selects the reservation", resolver: reservationResolver{resolved: true, crs: []v1.CapacityReservation{{ID: "cr-gone", AvailabilityZone: "us-east-1a", InstanceType: "m5.large", OwnerID: "111122223333", ReservationType: v1.ReservationTypeDefault, State: v1.ReservationStateActive}}}, instance: "cr-gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed(t)
			node := reserve(t, e)
			nodes := &fakeNodes{nodes: map[string]*corev1.Node{node.Name: node}}
			st, err := sfnstarter.New(e.sfn, e.arn)
			if err != nil {
				t.Fatal(err)
			}
			deps := decider.Deps{Store: e.handlerStore, NodeClasses: tt.resolver, Instances: instanceIn{id: tt.instance}, Starter: st, Nodes: nodes,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return t0 }}
			h, err := decider.NewWithDeps(decider.Config{Cluster: testCluster, Region: "us-east-1"}, deps)
			if err != nil {
				t.Fatal(err)
			}
			out, err := h.Handle(t.Context(), nil)
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			var want []string
			wantType := v1.CapacityTypeReserved
			if tt.wantDemoted {
				want, wantType = []string{"general-a"}, v1.CapacityTypeOnDemand
			}
			if diff := cmp.Diff(want, out.Demoted); diff != "" {
				t.Errorf("Demoted mismatch (-want +got):\n%s", diff)
			}
			c, err := e.store.GetNodeClaim(t.Context(), "general-a")
			if err != nil {
				t.Fatal(err)
			}
			n := nodes.nodes["node-a"]
			for what, labels := range map[string]map[string]string{"NodeClaim": c.Labels, "Node": n.Labels} {
				if got := labels[v1.LabelCapacityType]; got != wantType {
					t.Errorf("%s capacity type = %q, want %q", what, got, wantType)
				}
				if _, has := labels[v1.LabelCapacityReservationID]; has == tt.wantDemoted {
					t.Errorf("%s reservation ID label present = %v, want %v", what, has, !tt.wantDemoted)
				}
			}
			var started []string
			for _, s := range out.Started {
				started = append(started, s.Method)
			}
			var wantStarted []string
			if tt.wantDrift {
				wantStarted = []string{"Drifted"}
				in := e.executions(t)[out.Started[0].Execution]
				if len(in.Candidates) != 1 || in.Candidates[0].Reason != disruption.DriftCapacityReservation {
					t.Errorf("execution candidates = %+v, want general-a drifted with reason %s", in.Candidates, disruption.DriftCapacityReservation)
				}
			}
			if diff := cmp.Diff(wantStarted, started); diff != "" {
				t.Errorf("started methods mismatch (-want +got):\n%s", diff)
			}
			version, writes := c.ResourceVersion, nodes.writes
			out, err = h.Handle(t.Context(), nil)
			if err != nil {
				t.Fatalf("second Handle() error = %v", err)
			}
			c, err = e.store.GetNodeClaim(t.Context(), "general-a")
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Demoted) != 0 || c.ResourceVersion != version || nodes.writes != writes {
				t.Errorf("second Handle() demoted %v (NodeClaim version %s -> %s, Node writes %d -> %d); want no writes",
					out.Demoted, version, c.ResourceVersion, writes, nodes.writes)
			}
		})
	}
}
