package ddbstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	kindEvent = "Event"
	pkEvent   = "EVENT"
)

// EventTTL is how long an event record waits to be emitted: long enough
// for the forwarder to pick it up through a slow or paused poll, short
// enough that a stale record is not emitted as news.
const EventTTL = time.Hour

// Event is a Kubernetes Event a Lambda records for the forwarder to emit on
// a NodeClaim and its Node, a Pod or a NodePool (the Lambdas do not write
// cluster Events themselves); for example the interruption Lambda's
// SpotInterrupted, the disruption tasks' DisruptionTerminating on a Node or
// Evicted on a Pod, the decider's DisruptionBlocked on a NodePool
// (karpenter-spec.md section 10.2). The forwarder writes it on the most
// specific object named: the Pod, else the Node, else the NodeClaim, else
// the NodePool.
type Event struct {
	// ID identifies the record. Writing an ID again replaces the record,
	// so a retried writer that derives the ID from what happened records
	// it once. At most 512 bytes, no '#'.
	ID string `json:"id"`
	// Time is when it happened.
	Time time.Time `json:"time"`
	// Type is "Normal" or "Warning".
	Type string `json:"type"`
	// Reason is the event reason, e.g. "SpotInterrupted".
	Reason string `json:"reason"`
	// Message is the event's text.
	Message string `json:"message"`
	// NodeClaim names the NodeClaim the event is about, if any.
	NodeClaim string `json:"nodeClaim"`
	// Node names its Node; empty if it never registered.
	Node string `json:"node,omitempty"`
	// Pod names the Pod the event is about, "<namespace>/<name>"; empty
	// when it is not about a Pod.
	Pod string `json:"pod,omitempty"`
	// PodUID is the Pod's UID when the writer knows it (an evicted pod is
	// usually gone before the forwarder could look it up).
	PodUID string `json:"podUID,omitempty"`
	// NodePool names the NodePool the event is about, when it is about
	// the pool rather than one of its nodes.
	NodePool string `json:"nodePool,omitempty"`
	// Condition, when set, is the status condition the forwarder also sets
	// on the Karpenter NodeClaim named NodeClaim (v1.EventRecord.Condition).
	Condition *metav1.Condition `json:"condition,omitempty"`
	// OnNodeClaim, when set, makes the record a pair: this event on Node
	// and a second one on the NodeClaim alone, as Karpenter writes its
	// disruption events on a Node and its NodeClaim (karpenter:
	// pkg/controllers/disruption/events). The pair is one item, one write
	// unit where two records would take two; Expand gives the two events.
	// It needs Node and NodeClaim, and no Pod or NodePool.
	OnNodeClaim *NodeClaimEvent `json:"onNodeClaim,omitempty"`
}

// NodeClaimEvent is the NodeClaim's half of a paired Event: what differs
// from the Node's.
type NodeClaimEvent struct {
	// ID identifies the NodeClaim's event, as Event.ID does; not the
	// pair's ID.
	ID string `json:"id"`
	// Message is its text; empty means the Node's.
	Message string `json:"message,omitempty"`
}

// Expand returns the events the records hold, in order: a paired record
// (Event.OnNodeClaim) gives its Node's event and then its NodeClaim's (no
// Node, the pair's Time, Type and Reason, its own ID and message); any
// other record is itself.
func Expand(records []Event) []Event {
	out := make([]Event, 0, len(records))
	for _, e := range records {
		pair := e.OnNodeClaim
		e.OnNodeClaim = nil
		out = append(out, e)
		if pair == nil {
			continue
		}
		c := e
		c.ID, c.Node = pair.ID, ""
		if pair.Message != "" {
			c.Message = pair.Message
		}
		out = append(out, c)
	}
	return out
}

// Involved reports whether e names an object to write its Event on: a
// NodeClaim, Node, Pod or NodePool.
func (e Event) Involved() bool {
	return e.NodeClaim != "" || e.Node != "" || e.Pod != "" || e.NodePool != ""
}

// PutEvent records e until now+ttl (use EventTTL). The write is
// unconditional: a record with the same ID is replaced. It returns an error
// wrapping ErrInvalid if ID or Reason is empty, ID is not a valid
// key part, Type is neither "Normal" nor "Warning", no object is named
// (Involved), Pod is not "<namespace>/<name>", or ttl is not positive;
// ErrItemTooLarge if the record exceeds MaxBodyBytes.
func (s *Store) PutEvent(ctx context.Context, e Event, now time.Time, ttl time.Duration) error {
	_, err := s.putEvent(ctx, e, now, ttl, false)
	return err
}

// PutEventOnce records e until now+ttl unless an unexpired record with
// its ID exists, with a conditional put (attribute_not_exists(pk) OR
// untilMs <= :now): written is true when this call wrote it, false when
// the record was there already (a duplicated or concurrent run, a retried
// invocation), which is no error. The record is never replaced while
// unexpired, so its Time and Message stay those of the first write.
// Errors are PutEvent's.
func (s *Store) PutEventOnce(ctx context.Context, e Event, now time.Time, ttl time.Duration) (written bool, err error) {
	return s.putEvent(ctx, e, now, ttl, true)
}

// putEvent is PutEvent, conditional on no unexpired record when once.
func (s *Store) putEvent(ctx context.Context, e Event, now time.Time, ttl time.Duration, once bool) (bool, error) {
	if err := checkKeyPart("event id", e.ID); err != nil {
		return false, fmt.Errorf("put event: %w", err)
	}
	switch {
	case e.Reason == "":
		return false, fmt.Errorf("put event %s: reason is required: %w", e.ID, ErrInvalid)
	case !e.Involved():
		return false, fmt.Errorf("put event %s: one of nodeClaim, node, pod and nodePool is required: %w", e.ID, ErrInvalid)
	case e.Pod != "" && !validPodKey(e.Pod):
		return false, fmt.Errorf("put event %s: pod %q, want <namespace>/<name>: %w", e.ID, e.Pod, ErrInvalid)
	case e.Type != "Normal" && e.Type != "Warning":
		return false, fmt.Errorf("put event %s: type %q, want Normal or Warning: %w", e.ID, e.Type, ErrInvalid)
	case ttl <= 0:
		return false, fmt.Errorf("put event %s: ttl %v must be positive: %w", e.ID, ttl, ErrInvalid)
	}
	if c := e.OnNodeClaim; c != nil {
		if err := checkKeyPart("onNodeClaim.id", c.ID); err != nil {
			return false, fmt.Errorf("put event %s: %w", e.ID, err)
		}
		switch {
		case c.ID == e.ID:
			return false, fmt.Errorf("put event %s: onNodeClaim.id must differ from the pair's id: %w", e.ID, ErrInvalid)
		case e.Node == "" || e.NodeClaim == "":
			return false, fmt.Errorf("put event %s: onNodeClaim needs node and nodeClaim: %w", e.ID, ErrInvalid)
		case e.Pod != "" || e.NodePool != "":
			return false, fmt.Errorf("put event %s: onNodeClaim with a pod or nodePool: the pair is a Node's and its NodeClaim's: %w", e.ID, ErrInvalid)
		}
	}
	body, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("put event %s: %w", e.ID, err)
	}
	if len(body) > MaxBodyBytes {
		return false, fmt.Errorf("put event %s: %d bytes: %w", e.ID, len(body), ErrItemTooLarge)
	}
	until := now.Add(ttl)
	in := &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			attrPK:        str(s.pk(pkEvent)),
			attrSK:        str(e.ID),
			attrKind:      str(kindEvent),
			attrBody:      str(string(body)),
			attrUntilMs:   num(until.UnixMilli()),
			attrExpiresAt: num(ttlSeconds(until)),
		},
	}
	if once {
		putIfExpired(in, now)
	}
	_, err = s.api.PutItem(ctx, in)
	if once && isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("put event %s: %w", e.ID, err)
	}
	return true, nil
}

// ListEvents returns the event records still unexpired at now, oldest
// first (by Time, then ID). Expired records are skipped even if DynamoDB
// has not deleted them yet.
//
// The read is eventually consistent (half the read units of a strongly
// consistent Query): a record written in about the last second may be
// missing, and is in the next list. Both readers allow for that: the
// forwarder relays a record at its next poll, and the disruption
// evaluation, which lists to write only records not stored, writes a
// missed one with PutEventOnce, which keeps the stored one.
func (s *Store) ListEvents(ctx context.Context, now time.Time) ([]Event, error) {
	q := s.partitionQuery(s.pk(pkEvent))
	q.ConsistentRead = boolPtr(false)
	items, err := s.queryAll(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out := []Event{}
	for _, item := range items {
		untilMs, err := getInt(item, attrUntilMs)
		if err != nil {
			return nil, fmt.Errorf("list events: %s: %w", getString(item, attrSK), err)
		}
		if untilMs <= now.UnixMilli() {
			continue
		}
		var e Event
		if err := json.Unmarshal([]byte(getString(item, attrBody)), &e); err != nil {
			return nil, fmt.Errorf("list events: %s: decode: %w", getString(item, attrSK), err)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Event) int {
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// validPodKey reports whether key is "<namespace>/<name>", both non-empty.
func validPodKey(key string) bool {
	ns, name, ok := strings.Cut(key, "/")
	return ok && ns != "" && name != "" && !strings.Contains(name, "/")
}
