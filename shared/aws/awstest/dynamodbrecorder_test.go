package awstest_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/awstest"
)

// nopDynamoDB answers every call with nothing.
type nopDynamoDB struct{}

func (nopDynamoDB) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (nopDynamoDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

func (nopDynamoDB) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, nil
}

func (nopDynamoDB) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return &dynamodb.QueryOutput{}, nil
}

func (nopDynamoDB) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func TestDynamoDBRecorderRecordsTheKeyIAMMatches(t *testing.T) {
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	r := &awstest.DynamoDBRecorder{Next: nopDynamoDB{}, PartitionKey: "pk"}
	_, _ = r.GetItem(ctx, &dynamodb.GetItemInput{Key: map[string]types.AttributeValue{"pk": s("c#A"), "sk": s("x")}})
	_, _ = r.PutItem(ctx, &dynamodb.PutItemInput{Item: map[string]types.AttributeValue{"pk": s("c#B"), "sk": s("x")}})
	_, _ = r.DeleteItem(ctx, &dynamodb.DeleteItemInput{Key: map[string]types.AttributeValue{"pk": s("c#C")}})
	_, _ = r.Query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":prefix": s("p"), ":pk": s("c#D")},
	})
	_, _ = r.Query(ctx, &dynamodb.QueryInput{
		IndexName: aws.String("byInstance"), KeyConditionExpression: aws.String("#ik = :ik"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":ik": s("c#i-1")},
	})
	_, _ = r.GetItem(ctx, &dynamodb.GetItemInput{Key: map[string]types.AttributeValue{"pk": s("c#A"), "sk": s("y")}})
	_, _ = r.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{Item: map[string]types.AttributeValue{"pk": s("c#E"), "sk": s("x")}}},
		{Update: &types.Update{Key: map[string]types.AttributeValue{"pk": s("c#F"), "sk": s("x")}}},
		{Delete: &types.Delete{Key: map[string]types.AttributeValue{"pk": s("c#G"), "sk": s("x")}}},
	}})
	want := []awstest.DynamoDBCall{
		{Op: "GetItem", PartitionKey: "c#A"},
		{Op: "PutItem", PartitionKey: "c#B"},
		{Op: "DeleteItem", PartitionKey: "c#C"},
		{Op: "Query", PartitionKey: "c#D"},
		{Op: "Query", Index: "byInstance", PartitionKey: "c#i-1"},
		{Op: "GetItem", PartitionKey: "c#A"},
		{Op: "PutItem", PartitionKey: "c#E"},
		{Op: "UpdateItem", PartitionKey: "c#F"},
		{Op: "DeleteItem", PartitionKey: "c#G"},
	}
	if diff := cmp.Diff(want, r.Calls()); diff != "" {
		t.Errorf("Calls() mismatch (-want +got):\n%s", diff)
	}
	denied := r.Denied(func(c awstest.DynamoDBCall) bool { return c.Op != "GetItem" && c.Index == "" })
	if diff := cmp.Diff([]awstest.DynamoDBCall{want[0], want[4]}, denied); diff != "" {
		t.Errorf("Denied() mismatch, want each distinct refused call once (-want +got):\n%s", diff)
	}
}
