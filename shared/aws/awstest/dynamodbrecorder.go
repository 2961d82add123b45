package awstest

import (
	"context"
	"regexp"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDBItemAPI is the item calls of the DynamoDB client a store makes.
type DynamoDBItemAPI interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// DynamoDBCall is one recorded call: its operation, the index a Query
// names ("" for the table) and the partition key value the call is matched
// on, as IAM's dynamodb:LeadingKeys sees it (the table's partition key, or
// the index's for an index query).
type DynamoDBCall struct {
	Op, Index, PartitionKey string
}

// DynamoDBRecorder passes calls to Next and records each one's partition
// key, so a test can check them against what a role is granted.
type DynamoDBRecorder struct {
	Next DynamoDBItemAPI
	// PartitionKey names the table's partition key attribute.
	PartitionKey string

	mu    sync.Mutex
	calls []DynamoDBCall
}

// Calls returns the calls recorded so far.
func (r *DynamoDBRecorder) Calls() []DynamoDBCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]DynamoDBCall(nil), r.calls...)
}

// Reset forgets the calls recorded so far (a test's setup).
func (r *DynamoDBRecorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

func (r *DynamoDBRecorder) record(op, index string, pk types.AttributeValue) {
	c := DynamoDBCall{Op: op, Index: index, PartitionKey: "(no partition key)"}
	if s, ok := pk.(*types.AttributeValueMemberS); ok {
		c.PartitionKey = s.Value
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// GetItem records the key's partition key.
func (r *DynamoDBRecorder) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.record("GetItem", "", in.Key[r.PartitionKey])
	return r.Next.GetItem(ctx, in, opts...)
}

// PutItem records the item's partition key.
func (r *DynamoDBRecorder) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.record("PutItem", "", in.Item[r.PartitionKey])
	return r.Next.PutItem(ctx, in, opts...)
}

// DeleteItem records the key's partition key.
func (r *DynamoDBRecorder) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	r.record("DeleteItem", "", in.Key[r.PartitionKey])
	return r.Next.DeleteItem(ctx, in, opts...)
}

// TransactWriteItems records each item as the call IAM authorizes it as
// (PutItem, UpdateItem, DeleteItem or ConditionCheckItem of its key's
// partition key; DynamoDB Developer Guide, "Using IAM with DynamoDB
// transactions").
func (r *DynamoDBRecorder) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			r.record("PutItem", "", it.Put.Item[r.PartitionKey])
		case it.Update != nil:
			r.record("UpdateItem", "", it.Update.Key[r.PartitionKey])
		case it.Delete != nil:
			r.record("DeleteItem", "", it.Delete.Key[r.PartitionKey])
		case it.ConditionCheck != nil:
			r.record("ConditionCheckItem", "", it.ConditionCheck.Key[r.PartitionKey])
		}
	}
	return r.Next.TransactWriteItems(ctx, in, opts...)
}

// keyCondition finds the value placeholder of a key condition's first
// equality ("#pk = :pk AND ..."), the partition key's in the stores here,
// which always write the partition key's condition first.
var keyCondition = regexp.MustCompile(`^\s*\(?\s*#?[A-Za-z0-9_]+\s*=\s*(:[A-Za-z0-9_]+)`)

// Query records the value its key condition compares the partition key
// with (the first equality of KeyConditionExpression).
func (r *DynamoDBRecorder) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	var pk types.AttributeValue
	if in.KeyConditionExpression != nil {
		if m := keyCondition.FindStringSubmatch(*in.KeyConditionExpression); m != nil {
			pk = in.ExpressionAttributeValues[m[1]]
		}
	}
	index := ""
	if in.IndexName != nil {
		index = *in.IndexName
	}
	r.record("Query", index, pk)
	return r.Next.Query(ctx, in, opts...)
}

// Denied returns each distinct recorded call that allows refuses, in the
// order first made.
func (r *DynamoDBRecorder) Denied(allows func(DynamoDBCall) bool) []DynamoDBCall {
	seen := map[DynamoDBCall]bool{}
	var out []DynamoDBCall
	for _, c := range r.Calls() {
		if !seen[c] && !allows(c) {
			out = append(out, c)
		}
		seen[c] = true
	}
	return out
}
