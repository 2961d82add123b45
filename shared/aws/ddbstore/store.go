// Package ddbstore keeps nodewright's durable state in one DynamoDB table:
// NodeClaims (the source of truth, with optimistic locking on a version
// attribute), the synced NodePool / EC2NodeClass configuration, the
// unavailable-offerings cache, idempotency keys, leases and disruption-budget
// leases. Every write that could race is a conditional write, so retried or
// concurrent Lambda invocations never half-apply or double-apply a change.
//
// The table layout (keys, indexes, TTL, conditions, size bounds) is described
// in docs/dynamodb.md and defined by Schema. The store never reads the clock:
// every method that depends on time takes `now` from the caller.
package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// API is the subset of the DynamoDB client the store calls. Only five
// operations are needed, so an IAM policy for the Lambdas can grant exactly
// dynamodb:GetItem, PutItem, UpdateItem, DeleteItem and Query:
// TransactWriteItems (every NodeClaim write and its generation bump) is
// authorized by IAM as the PutItem, UpdateItem and DeleteItem of its items
// (DynamoDB Developer Guide, "Using IAM with DynamoDB transactions").
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Store reads and writes one cluster's state in one table. It is safe for
// concurrent use; it holds no state besides its configuration, except the
// NodeClaim list a store made WithNodeClaimCache keeps.
type Store struct {
	api     API
	table   string
	cluster string
	// claims, when set, is the last NodeClaim list and the generation it
	// is at least as new as (WithNodeClaimCache).
	claims *claimCache
}

// New returns a store for cluster's items in table. cluster is the EKS
// cluster name; it prefixes every partition key, so several clusters may
// share a table. It returns an error if table or cluster is empty or cluster
// contains '#', the key separator.
func New(api API, table, cluster string) (*Store, error) {
	if table == "" {
		return nil, errors.New("table name: must not be empty")
	}
	if err := checkKeyPart("cluster", cluster); err != nil {
		return nil, err
	}
	return &Store{api: api, table: table, cluster: cluster}, nil
}

// Errors returned by the store. Compare with errors.Is. ErrNotFound and
// ErrAlreadyExists are the shared store errors of shared/apis/v1, and a
// *ConflictError matches v1.ErrConflict, so the store's errors reach the
// provisioning and termination ports untranslated.
var (
	// ErrNotFound (v1.ErrNotFound): the item does not exist.
	ErrNotFound = v1.ErrNotFound
	// ErrAlreadyExists (v1.ErrAlreadyExists): a create-only write found the
	// item already present.
	ErrAlreadyExists = v1.ErrAlreadyExists
	// ErrItemTooLarge: the encoded item would exceed MaxBodyBytes.
	ErrItemTooLarge = errors.New("item too large")
	// ErrInvalid: an argument cannot form a key or a valid item.
	ErrInvalid = errors.New("invalid argument")
)

// ConflictError reports that a conditional write lost a race: the item was
// changed or deleted since the caller read it at Version. It is safe to
// re-read the item and retry.
type ConflictError struct {
	// Kind is the item kind: "NodeClaim", "Config" or "Budget".
	Kind string
	// Name identifies the item within its kind (NodeClaim or NodePool name;
	// "" for the config snapshot).
	Name string
	// Version is the version the caller expected to replace.
	Version int64
}

func (e *ConflictError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("conflict: %s changed since version %d", e.Kind, e.Version)
	}
	return fmt.Sprintf("conflict: %s %q changed since version %d", e.Kind, e.Name, e.Version)
}

// Is reports whether target is v1.ErrConflict, the store error a lost
// conditional write means.
func (e *ConflictError) Is(target error) bool { return target == v1.ErrConflict }

// MaxBodyBytes bounds the encoded body of one item (NodeClaim JSON, the
// compressed config snapshot, the budget lease map). DynamoDB rejects items
// over 400 KiB (attribute names and values together); the rest of the
// headroom is for the key and index attributes.
const MaxBodyBytes = 384 * 1024

// Attribute names. docs/dynamodb.md documents each; Schema declares the key
// attributes.
const (
	attrPK          = "pk"
	attrSK          = "sk"
	attrKind        = "kind"
	attrVersion     = "version"
	attrBody        = "body"
	attrUID         = "uid"
	attrNodePool    = "nodePool"
	attrProviderID  = "providerID"
	attrInstanceKey = "instanceKey"
	attrNodePoolKey = "nodePoolKey"
	attrExpiresAt   = "expiresAt"
	attrUntilMs     = "untilMs"
	attrHolder      = "holder"
	attrReason      = "reason"
	attrHash        = "hash"
	attrLeases      = "leases"
	attrPoolCount   = "nodePoolCount"
	attrClassCount  = "nodeClassCount"
)

// Partition-key prefixes, after "<cluster>#".
const (
	pkNodeClaim   = "NODECLAIM"
	pkConfig      = "CONFIG"
	pkOffering    = "OFFERING"
	pkIdempotency = "IDEMPOTENCY"
	pkLease       = "LEASE"
	pkBudget      = "BUDGET"
)

// maxKeyPart bounds a caller-supplied key component, well below DynamoDB's
// 1,024-byte sort-key and 2,048-byte partition-key limits.
const maxKeyPart = 512

func checkKeyPart(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s: must not be empty: %w", what, ErrInvalid)
	case len(s) > maxKeyPart:
		return fmt.Errorf("%s: %d bytes, at most %d: %w", what, len(s), maxKeyPart, ErrInvalid)
	case strings.Contains(s, "#"):
		return fmt.Errorf("%s %q: must not contain '#': %w", what, s, ErrInvalid)
	}
	return nil
}

func (s *Store) pk(parts ...string) string {
	return s.cluster + "#" + strings.Join(parts, "#")
}

func itemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(pk), attrSK: str(sk)}
}

func str(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func getString(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getInt(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s: missing or not a number", name)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return n, nil
}

// ttlSeconds is the TTL attribute value for a deadline: Unix seconds,
// rounded up so DynamoDB never deletes an item before its deadline.
func ttlSeconds(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return sec
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// queryAll runs a query and follows LastEvaluatedKey to the end.
func (s *Store) queryAll(ctx context.Context, in *dynamodb.QueryInput) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for {
		out, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		next := *in
		next.ExclusiveStartKey = out.LastEvaluatedKey
		in = &next
	}
}

// queryPage returns up to limit items of in's query that sort after the
// sort key after ("" for the first page), following LastEvaluatedKey while
// DynamoDB's 1 MB pages hold fewer, and whether more items may follow. in
// must be a query of one base-table partition, pk.
func (s *Store) queryPage(ctx context.Context, in *dynamodb.QueryInput, pk, after string, limit int) ([]map[string]types.AttributeValue, bool, error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("page limit %d: must be positive: %w", limit, ErrInvalid)
	}
	next := *in
	if after != "" {
		next.ExclusiveStartKey = itemKey(pk, after)
	}
	var items []map[string]types.AttributeValue
	for {
		next.Limit = aws.Int32(int32(min(limit-len(items), math.MaxInt32)))
		out, err := s.api.Query(ctx, &next)
		if err != nil {
			return nil, false, err
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, false, nil
		}
		if len(items) >= limit {
			return items, true, nil
		}
		next.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// partitionQuery is a strongly consistent query of every item of partition
// pk in sort-key order.
func (s *Store) partitionQuery(pk string) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    strPtr("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
		ConsistentRead:            boolPtr(true),
	}
}

// queryPartition returns every item of partition pk in sort-key order,
// read with strong consistency.
func (s *Store) queryPartition(ctx context.Context, pk string) ([]map[string]types.AttributeValue, error) {
	return s.queryAll(ctx, s.partitionQuery(pk))
}

func (s *Store) getItem(ctx context.Context, pk, sk string) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            itemKey(pk, sk),
		ConsistentRead: boolPtr(true),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, ErrNotFound
	}
	return out.Item, nil
}

func strPtr(s string) *string { return &s }
func boolPtr(b bool) *bool    { return &b }
