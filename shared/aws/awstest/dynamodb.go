package awstest

import (
	"context"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDBQueryPageBytes is how much item data one DynamoDB Query answer
// holds at most: "A single Query operation will read up to the maximum
// number of items set (if using the Limit parameter) or a maximum of 1 MB of
// data and then apply any filtering" (DynamoDB Developer Guide, Paginating
// table query results).
const DynamoDBQueryPageBytes = 1 << 20

// DynamoDBQuerier is the Query call of the DynamoDB client.
type DynamoDBQuerier interface {
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// DynamoDBPages wraps a DynamoDB Query that never cuts an answer by size
// (kumo v0.33.1 pages only at Limit) so that it pages as DynamoDB does: an
// answer stops once its items reach DynamoDBQueryPageBytes, with the last
// returned item's key as LastEvaluatedKey. Item sizes follow DynamoDB's
// rule (attribute names plus values: UTF-8 bytes of strings, raw bytes of
// binaries, about one byte per two digits of numbers).
type DynamoDBPages struct {
	Next DynamoDBQuerier
	// Keys names the table's key attributes, copied into LastEvaluatedKey.
	Keys []string
	// IndexKeys names each index's key attributes, copied too when a query
	// names the index (DynamoDB's LastEvaluatedKey of an index query holds
	// the table's and the index's keys).
	IndexKeys map[string][]string
	// PageBytes, when positive, replaces DynamoDBQueryPageBytes (to page
	// small tables).
	PageBytes int
}

// Query runs in through Next and cuts the answer at the page size.
func (p *DynamoDBPages) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := p.Next.Query(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	limit := p.PageBytes
	if limit <= 0 {
		limit = DynamoDBQueryPageBytes
	}
	size := 0
	for i, item := range out.Items {
		size += ItemSize(item)
		if size >= limit && i+1 < len(out.Items) {
			cut := *out
			cut.Items = out.Items[:i+1]
			cut.Count = int32(i + 1)
			cut.ScannedCount = int32(i + 1)
			cut.LastEvaluatedKey = map[string]types.AttributeValue{}
			keys := p.Keys
			if in.IndexName != nil {
				keys = append(slices.Clone(keys), p.IndexKeys[*in.IndexName]...)
			}
			for _, k := range keys {
				if v, ok := item[k]; ok {
					cut.LastEvaluatedKey[k] = v
				}
			}
			return &cut, nil
		}
	}
	return out, nil
}

// ItemSize is an item's size as DynamoDB counts it (DynamoDB Developer
// Guide, Item sizes and formats), to within a few bytes per number.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(strings.TrimLeft(v.Value, "-0"))/2 + 1
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	}
	return 1
}
