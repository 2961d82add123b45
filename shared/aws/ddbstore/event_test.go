package ddbstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func TestEvents(t *testing.T) {
	spot := ddbstore.Event{ID: "e1-spot", Time: t0, Type: "Warning", Reason: "SpotInterrupted",
		Message: "EC2 sent a Spot interruption warning", NodeClaim: "default-x7k2p", Node: "ip-10-0-1-23.ec2.internal"}
	rebalance := ddbstore.Event{ID: "e0-rebalance", Time: t0.Add(-time.Minute), Type: "Normal", Reason: "SpotRebalanceRecommendation",
		Message: "EC2 recommends rebalancing", NodeClaim: "default-x7k2p"}
	later := ddbstore.Event{ID: "a-later", Time: t0.Add(time.Minute), Type: "Warning", Reason: "InstanceStopping",
		Message: "The instance is stopping", NodeClaim: "default-q9w4z"}
	evicted := ddbstore.Event{ID: "evicted-web-1", Time: t0, Type: "Normal", Reason: "Evicted",
		Message: "Evicted pod: disrupting its node", Pod: "shop/web-1", PodUID: "uid-web-1"}
	poolBlocked := ddbstore.Event{ID: "blocked-default", Time: t0, Type: "Normal", Reason: "DisruptionBlocked",
		Message: "No allowed disruptions for disruption reason Drifted due to blocking budget", NodePool: "default"}
	pair := ddbstore.Event{ID: "Unconsolidatable:default-x7k2p", Time: t0, Type: "Normal", Reason: "Unconsolidatable",
		Message: "Consolidation is disabled", NodeClaim: "default-x7k2p", Node: "ip-10-0-1-23.ec2.internal",
		OnNodeClaim: &ddbstore.NodeClaimEvent{ID: "Unconsolidatable:nodeclaim:default-x7k2p", Message: "on the claim"}}
	ttl := ddbstore.EventTTL

	type put struct {
		event ddbstore.Event
		at    time.Time
	}
	tests := []struct {
		name string
		puts []put
		now  time.Time
		want []ddbstore.Event
	}{
		{
			name: "should list a recorded event until its TTL",
			puts: []put{{spot, t0}},
			now:  t0.Add(ttl - time.Millisecond),
			want: []ddbstore.Event{spot},
		},
		{
			name: "should drop an event at its deadline even before DynamoDB deletes it",
			puts: []put{{spot, t0}},
			now:  t0.Add(ttl),
			want: []ddbstore.Event{},
		},
		{
			name: "should list events oldest first",
			puts: []put{{later, t0}, {spot, t0}, {rebalance, t0}},
			now:  t0,
			want: []ddbstore.Event{rebalance, spot, later},
		},
		{
			name: "should record an event written twice once",
			puts: []put{{spot, t0}, {spot, t0.Add(time.Second)}},
			now:  t0,
			want: []ddbstore.Event{spot},
		},
		{
			name: "should record events about a Pod or a NodePool without a NodeClaim",
			puts: []put{{evicted, t0}, {poolBlocked, t0}},
			now:  t0,
			want: []ddbstore.Event{poolBlocked, evicted},
		},
		{
			name: "should keep a pair's NodeClaim event in its record",
			puts: []put{{pair, t0}},
			now:  t0,
			want: []ddbstore.Event{pair},
		},
		{
			name: "should list no events when none were recorded",
			now:  t0,
			want: []ddbstore.Event{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t, testCluster)
			for _, p := range tt.puts {
				if err := s.PutEvent(t.Context(), p.event, p.at, ttl); err != nil {
					t.Fatalf("PutEvent(%s) error = %v", p.event.ID, err)
				}
			}
			got, err := s.ListEvents(t.Context(), tt.now)
			if err != nil {
				t.Fatalf("ListEvents() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListEvents() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEventsOfOneCluster(t *testing.T) {
	e := newEnv(t)
	ours, theirs := e.store(t, testCluster), e.store(t, "other-cluster")
	ev := ddbstore.Event{ID: "e1", Time: t0, Type: "Warning", Reason: "SpotInterrupted", NodeClaim: "default-x7k2p"}
	if err := theirs.PutEvent(t.Context(), ev, t0, ddbstore.EventTTL); err != nil {
		t.Fatalf("PutEvent() error = %v", err)
	}
	got, err := ours.ListEvents(t.Context(), t0)
	if err != nil {
		t.Fatalf("ListEvents() error = %v", err)
	}
	if diff := cmp.Diff([]ddbstore.Event{}, got); diff != "" {
		t.Errorf("ListEvents() of another cluster's table partition mismatch (-want +got):\n%s", diff)
	}
}

func TestPutEventErrors(t *testing.T) {
	valid := ddbstore.Event{ID: "e1", Time: t0, Type: "Warning", Reason: "SpotInterrupted", NodeClaim: "default-x7k2p"}
	tests := []struct {
		name    string
		edit    func(e *ddbstore.Event)
		ttl     time.Duration
		wantErr error
	}{
		{name: "should refuse an empty id", edit: func(e *ddbstore.Event) { e.ID = "" }, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse an id with the key separator", edit: func(e *ddbstore.Event) { e.ID = "a#b" }, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse an id over 512 bytes", edit: func(e *ddbstore.Event) { e.ID = strings.Repeat("x", 513) }, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse an event that names no object", edit: func(e *ddbstore.Event) { e.NodeClaim = "" }, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a pod without its namespace", edit: func(e *ddbstore.Event) { e.NodeClaim, e.Pod = "", "web-1" }, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a pod with an empty name", edit: func(e *ddbstore.Event) { e.NodeClaim, e.Pod = "", "default/" }, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse an event without a reason", edit: func(e *ddbstore.Event) { e.Reason = "" }, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a type other than Normal or Warning", edit: func(e *ddbstore.Event) { e.Type = "Error" }, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a ttl that is not positive", edit: func(*ddbstore.Event) {}, ttl: 0, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a pair without its NodeClaim event's id", edit: func(e *ddbstore.Event) {
			e.Node, e.OnNodeClaim = "ip-10-0-1-23", &ddbstore.NodeClaimEvent{}
		}, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a pair whose NodeClaim event has the pair's id", edit: func(e *ddbstore.Event) {
			e.Node, e.OnNodeClaim = "ip-10-0-1-23", &ddbstore.NodeClaimEvent{ID: e.ID}
		}, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a pair without a Node", edit: func(e *ddbstore.Event) {
			e.OnNodeClaim = &ddbstore.NodeClaimEvent{ID: "e1-claim"}
		}, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a pair without a NodeClaim", edit: func(e *ddbstore.Event) {
			e.NodeClaim, e.Node, e.OnNodeClaim = "", "ip-10-0-1-23", &ddbstore.NodeClaimEvent{ID: "e1-claim"}
		}, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse a pair about a pod", edit: func(e *ddbstore.Event) {
			e.Node, e.Pod, e.OnNodeClaim = "ip-10-0-1-23", "shop/web-1", &ddbstore.NodeClaimEvent{ID: "e1-claim"}
		}, ttl: time.Hour, wantErr: ddbstore.ErrInvalid},
		{name: "should refuse an event too large for an item", edit: func(e *ddbstore.Event) { e.Message = strings.Repeat("x", ddbstore.MaxBodyBytes) }, ttl: time.Hour, wantErr: ddbstore.ErrItemTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t, testCluster)
			ev := valid
			tt.edit(&ev)
			if err := s.PutEvent(t.Context(), ev, t0, tt.ttl); !errors.Is(err, tt.wantErr) {
				t.Fatalf("PutEvent() error = %v, want %v", err, tt.wantErr)
			}
			got, err := s.ListEvents(t.Context(), t0)
			if err != nil {
				t.Fatalf("ListEvents() error = %v", err)
			}
			if len(got) != 0 {
				t.Errorf("ListEvents() = %v after a refused write, want none", got)
			}
		})
	}
}

// TestExpand checks that a paired record gives its Node's event and then
// its NodeClaim's, and that other records pass unchanged and in order.
func TestExpand(t *testing.T) {
	plain := ddbstore.Event{ID: "spot", Time: t0, Type: "Warning", Reason: "SpotInterrupted", Message: "m", NodeClaim: "a", Node: "node-a"}
	pair := func(claimMsg string) ddbstore.Event {
		return ddbstore.Event{ID: "blocked:a", Time: t0.Add(time.Second), Type: "Normal", Reason: "DisruptionBlocked",
			Message: "Cannot disrupt Node: x", NodeClaim: "a", Node: "node-a",
			OnNodeClaim: &ddbstore.NodeClaimEvent{ID: "blocked:nodeclaim:a", Message: claimMsg}}
	}
	onNode := ddbstore.Event{ID: "blocked:a", Time: t0.Add(time.Second), Type: "Normal", Reason: "DisruptionBlocked",
		Message: "Cannot disrupt Node: x", NodeClaim: "a", Node: "node-a"}
	onClaim := func(msg string) ddbstore.Event {
		return ddbstore.Event{ID: "blocked:nodeclaim:a", Time: t0.Add(time.Second), Type: "Normal", Reason: "DisruptionBlocked",
			Message: msg, NodeClaim: "a"}
	}
	tests := []struct {
		name string
		in   []ddbstore.Event
		want []ddbstore.Event
	}{
		{name: "should give nothing for no records", in: nil, want: []ddbstore.Event{}},
		{name: "should pass records that are not pairs", in: []ddbstore.Event{plain}, want: []ddbstore.Event{plain}},
		{name: "should give a pair's NodeClaim event its own message", in: []ddbstore.Event{pair("Cannot disrupt NodeClaim: x"), plain},
			want: []ddbstore.Event{onNode, onClaim("Cannot disrupt NodeClaim: x"), plain}},
		{name: "should give a pair's NodeClaim event the Node's message when it has none", in: []ddbstore.Event{plain, pair("")},
			want: []ddbstore.Event{plain, onNode, onClaim("Cannot disrupt Node: x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			if diff := cmp.Diff(tt.want, ddbstore.Expand(in)); diff != "" {
				t.Errorf("Expand() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.in, in); diff != "" {
				t.Errorf("Expand() changed its input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPutEventOnce(t *testing.T) {
	first := ddbstore.Event{ID: "blocked-a", Time: t0, Type: "Normal", Reason: "DisruptionBlocked", Message: "first", NodeClaim: "default-a"}
	second := first
	second.Time, second.Message = t0.Add(time.Second), "second"
	ttl := ddbstore.EventTTL
	tests := []struct {
		name        string
		secondAt    time.Time
		wantWritten bool
		want        ddbstore.Event
	}{
		{name: "should keep the first record of an ID written twice while it lives", secondAt: t0.Add(time.Second), wantWritten: false, want: first},
		{name: "should write an ID again once its record expired, before DynamoDB deletes it", secondAt: t0.Add(ttl), wantWritten: true, want: second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			written, err := s.PutEventOnce(t.Context(), first, t0, ttl)
			if err != nil || !written {
				t.Fatalf("first PutEventOnce() = %v, %v; want true, nil", written, err)
			}
			written, err = s.PutEventOnce(t.Context(), second, tt.secondAt, ttl)
			if err != nil || written != tt.wantWritten {
				t.Fatalf("second PutEventOnce() = %v, %v; want %v, nil", written, err, tt.wantWritten)
			}
			got, err := s.ListEvents(t.Context(), tt.secondAt)
			if err != nil {
				t.Fatalf("ListEvents() error = %v", err)
			}
			if diff := cmp.Diff([]ddbstore.Event{tt.want}, got); diff != "" {
				t.Errorf("ListEvents() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := newEnv(t).store(t, testCluster).PutEventOnce(t.Context(), ddbstore.Event{ID: "x", Type: "Normal", NodeClaim: "a"}, t0, ttl); !errors.Is(err, ddbstore.ErrInvalid) {
		t.Errorf("PutEventOnce() without a reason error = %v, want ErrInvalid", err)
	}
}

// consistencyRecorder records the ConsistentRead of every Query.
type consistencyRecorder struct {
	ddbstore.API
	queries []bool
}

func (c *consistencyRecorder) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries = append(c.queries, aws.ToBool(in.ConsistentRead))
	return c.API.Query(ctx, in, opts...)
}

// TestListEventsReadsEventuallyConsistent: listing event records is
// billed half the read units of a strongly consistent Query (each reader
// takes a record missed once at its next list; see ListEvents).
func TestListEventsReadsEventuallyConsistent(t *testing.T) {
	e := newEnv(t)
	rec := &consistencyRecorder{API: e.client}
	s := e.storeWith(t, rec, testCluster)
	ev := ddbstore.Event{ID: "e1", Time: t0, Type: "Normal", Reason: "Unconsolidatable", Message: "m", NodeClaim: "a"}
	if _, err := s.PutEventOnce(t.Context(), ev, t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListEvents(t.Context(), t0)
	if err != nil || len(got) != 1 {
		t.Fatalf("ListEvents() = %v, %v; want the record", got, err)
	}
	if len(rec.queries) == 0 || slices.Contains(rec.queries, true) {
		t.Errorf("ListEvents() queried with ConsistentRead %v, want false", rec.queries)
	}
}
