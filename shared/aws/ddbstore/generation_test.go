package ddbstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

func generation(t *testing.T, s *ddbstore.Store) int64 {
	t.Helper()
	g, err := s.NodeClaimGeneration(context.Background())
	if err != nil {
		t.Fatalf("NodeClaimGeneration() error = %v", err)
	}
	return g
}

func list(t *testing.T, s *ddbstore.Store) []v1.NodeClaim {
	t.Helper()
	claims, err := s.ListNodeClaims(context.Background())
	if err != nil {
		t.Fatalf("ListNodeClaims() error = %v", err)
	}
	return claims
}

func TestNodeClaimGenerationCountsEveryWrite(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)
	if g := generation(t, s); g != 0 {
		t.Fatalf("generation of a new table = %d, want 0", g)
	}
	a := mustPut(t, s, nodeClaim("default-a"))
	if g := generation(t, s); g != 1 {
		t.Errorf("generation after a create = %d, want 1", g)
	}
	a.Status.ProviderID = "aws:///us-east-1a/i-0abc"
	a, err := s.UpdateNodeClaim(ctx, a)
	if err != nil {
		t.Fatalf("UpdateNodeClaim() error = %v", err)
	}
	if g := generation(t, s); g != 2 {
		t.Errorf("generation after a status change = %d, want 2", g)
	}
	if err := s.DeleteNodeClaim(ctx, a); err != nil {
		t.Fatalf("DeleteNodeClaim() error = %v", err)
	}
	if g := generation(t, s); g != 3 {
		t.Errorf("generation after a delete = %d, want 3", g)
	}
	if diff := cmp.Diff([]string{}, names(list(t, s))); diff != "" {
		t.Errorf("the generation item is listed as a NodeClaim (-want +got):\n%s", diff)
	}
	page, _, err := s.ListNodeClaimsPage(ctx, "", 10)
	if err != nil {
		t.Fatalf("ListNodeClaimsPage() error = %v", err)
	}
	if len(page) != 0 {
		t.Errorf("ListNodeClaimsPage() = %v, want no NodeClaim", names(page))
	}
}

func TestNodeClaimGenerationUnchangedByRefusedWrites(t *testing.T) {
	ctx := context.Background()
	s := newEnv(t).store(t, testCluster)
	a := mustPut(t, s, nodeClaim("default-a"))
	before := generation(t, s)
	if _, err := s.PutNodeClaim(ctx, nodeClaim("default-a")); !errors.Is(err, ddbstore.ErrAlreadyExists) {
		t.Fatalf("PutNodeClaim(existing) error = %v, want ErrAlreadyExists", err)
	}
	stale := a
	stale.ResourceVersion = "7"
	if _, err := s.UpdateNodeClaim(ctx, stale); !errors.Is(err, v1.ErrConflict) {
		t.Fatalf("UpdateNodeClaim(stale) error = %v, want a conflict", err)
	}
	if err := s.DeleteNodeClaim(ctx, nodeClaim("default-b", withVersion("1"))); !errors.Is(err, ddbstore.ErrNotFound) {
		t.Fatalf("DeleteNodeClaim(absent) error = %v, want ErrNotFound", err)
	}
	if g := generation(t, s); g != before {
		t.Errorf("generation after three refused writes = %d, want %d", g, before)
	}
}

// cancelBump makes the generation bump of every transaction fail its
// (added) condition, so that DynamoDB cancels the whole transaction, as
// it would if the bump could not be applied.
type cancelBump struct{ ddbstore.API }

func (c cancelBump) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	items := make([]ddbtypes.TransactWriteItem, len(in.TransactItems))
	for i, it := range in.TransactItems {
		if u := it.Update; u != nil {
			bump := *u
			bump.ConditionExpression = aws.String("attribute_not_exists(#kind) AND attribute_exists(#kind)")
			it.Update = &bump
		}
		items[i] = it
	}
	out := *in
	out.TransactItems = items
	return c.API.TransactWriteItems(ctx, &out, opts...)
}

func TestNodeClaimWriteAndGenerationLandTogether(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	good := e.store(t, testCluster)
	a := mustPut(t, good, nodeClaim("default-a"))
	before := generation(t, good)
	bad := e.storeWith(t, cancelBump{e.client}, testCluster)

	if _, err := bad.PutNodeClaim(ctx, nodeClaim("default-b")); err == nil {
		t.Fatal("PutNodeClaim() with a cancelled transaction: error = nil")
	}
	changed := a
	changed.Status.ProviderID = "aws:///us-east-1a/i-0abc"
	if _, err := bad.UpdateNodeClaim(ctx, changed); err == nil {
		t.Fatal("UpdateNodeClaim() with a cancelled transaction: error = nil")
	}
	if err := bad.DeleteNodeClaim(ctx, a); err == nil {
		t.Fatal("DeleteNodeClaim() with a cancelled transaction: error = nil")
	}
	if g := generation(t, good); g != before {
		t.Errorf("generation after cancelled writes = %d, want %d", g, before)
	}
	if diff := cmp.Diff([]v1.NodeClaim{a}, list(t, good)); diff != "" {
		t.Errorf("NodeClaims after cancelled writes mismatch (-want +got):\n%s", diff)
	}
}

// conflicting cancels the first Conflicts transactions with reason
// TransactionConflict on the generation item, as DynamoDB does when
// another transaction is writing it.
type conflicting struct {
	ddbstore.API
	mu        sync.Mutex
	Conflicts int
	calls     int
}

func (c *conflicting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	c.calls++
	fail := c.Conflicts > 0
	if fail {
		c.Conflicts--
	}
	c.mu.Unlock()
	if fail {
		return nil, &ddbtypes.TransactionCanceledException{
			Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]"),
			CancellationReasons: []ddbtypes.CancellationReason{
				{Code: aws.String("None")},
				{Code: aws.String("TransactionConflict"), Message: aws.String("Transaction is ongoing for the item")},
			},
		}
	}
	return c.API.TransactWriteItems(ctx, in, opts...)
}

func TestNodeClaimWriteRetriesATransactionConflict(t *testing.T) {
	e := newEnv(t)
	api := &conflicting{API: e.client, Conflicts: 2}
	s := e.storeWith(t, api, testCluster)
	mustPut(t, s, nodeClaim("default-a"))
	if api.calls != 3 {
		t.Errorf("TransactWriteItems calls = %d, want 3 (two conflicts, then the write)", api.calls)
	}
	if g := generation(t, s); g != 1 {
		t.Errorf("generation = %d, want 1 (the write counted once)", g)
	}
}

func TestNodeClaimWriteGivesUpOnPersistentConflicts(t *testing.T) {
	e := newEnv(t)
	api := &conflicting{API: e.client, Conflicts: 1000}
	s := e.storeWith(t, api, testCluster)
	_, err := s.PutNodeClaim(context.Background(), nodeClaim("default-a"))
	var tce *ddbtypes.TransactionCanceledException
	if !errors.As(err, &tce) || errors.Is(err, ddbstore.ErrAlreadyExists) {
		t.Fatalf("PutNodeClaim() error = %v, want the transaction's cancellation", err)
	}
	if g := generation(t, s); g != 0 {
		t.Errorf("generation = %d, want 0", g)
	}
}

// countingQueries counts the Queries of the NodeClaim partition and runs
// Before and After (once each, when set) around the next one: another
// process's write landing just before or just after the list is read.
type countingQueries struct {
	ddbstore.API
	queries       int
	Before, After func()
}

func (c *countingQueries) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if v, ok := in.ExpressionAttributeValues[":pk"].(*ddbtypes.AttributeValueMemberS); !ok || !strings.HasSuffix(v.Value, "#NODECLAIM") {
		return c.API.Query(ctx, in, opts...)
	}
	c.queries++
	if f := c.Before; f != nil {
		c.Before = nil
		f()
	}
	out, err := c.API.Query(ctx, in, opts...)
	if f := c.After; f != nil {
		c.After = nil
		f()
	}
	return out, err
}

func TestNodeClaimCacheListsOnlyWhenTheGenerationMoved(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	other := e.store(t, testCluster) // another Lambda, without a cache
	mustPut(t, other, nodeClaim("default-a"))
	api := &countingQueries{API: e.client}
	s := e.storeWith(t, api, testCluster).WithNodeClaimCache()

	if diff := cmp.Diff([]string{"default-a"}, names(list(t, s))); diff != "" {
		t.Errorf("first list (a cold start) mismatch (-want +got):\n%s", diff)
	}
	got := list(t, s)
	if api.queries != 1 {
		t.Errorf("queries after two lists of an unchanged generation = %d, want 1", api.queries)
	}
	// A caller changing what it was given changes nothing the next gets.
	got[0].Labels[v1.LabelNodePool] = "changed"
	if pool := list(t, s)[0].Labels[v1.LabelNodePool]; pool != "default" {
		t.Errorf("nodepool label of the cached claim = %q after a caller changed its copy, want default", pool)
	}

	b := mustPut(t, other, nodeClaim("default-b"))
	if diff := cmp.Diff([]string{"default-a", "default-b"}, names(list(t, s))); diff != "" {
		t.Errorf("list after another process's create mismatch (-want +got):\n%s", diff)
	}
	b.Status.ProviderID = "aws:///us-east-1a/i-0abc"
	if _, err := other.UpdateNodeClaim(ctx, b); err != nil {
		t.Fatalf("UpdateNodeClaim() error = %v", err)
	}
	listed := list(t, s)
	if len(listed) != 2 || listed[1].Status.ProviderID != b.Status.ProviderID || listed[1].ResourceVersion != "2" {
		t.Errorf("list after another process's status change = %+v, want default-b launched at resourceVersion 2", listed)
	}
	if api.queries != 3 {
		t.Errorf("queries = %d, want 3 (one per generation)", api.queries)
	}
}

func TestNodeClaimCacheNeverHidesAWriteRacingTheList(t *testing.T) {
	tests := []struct {
		name string
		race func(api *countingQueries, write func())
	}{
		{name: "should show a write landing after the generation read and before the list", race: func(api *countingQueries, write func()) { api.Before = write }},
		{name: "should show a write landing just after the list", race: func(api *countingQueries, write func()) { api.After = write }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			other := e.store(t, testCluster)
			mustPut(t, other, nodeClaim("default-a"))
			api := &countingQueries{API: e.client}
			s := e.storeWith(t, api, testCluster).WithNodeClaimCache()
			tt.race(api, func() { mustPut(t, other, nodeClaim("default-b")) })
			_ = list(t, s) // may or may not hold default-b
			for i := range 2 {
				if diff := cmp.Diff([]string{"default-a", "default-b"}, names(list(t, s))); diff != "" {
					t.Errorf("list %d after the racing write mismatch (-want +got):\n%s", i+2, diff)
				}
			}
		})
	}
}

func TestNodeClaimCacheOfATableWithoutGeneration(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// A claim item as a version without the generation wrote it.
	s := e.store(t, testCluster)
	mustPut(t, s, nodeClaim("default-a"))
	if _, err := e.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &e.table, Key: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: testCluster + "#NODECLAIM"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "#generation"},
	}}); err != nil {
		t.Fatalf("DeleteItem(generation) error = %v", err)
	}
	api := &countingQueries{API: e.client}
	cached := e.storeWith(t, api, testCluster).WithNodeClaimCache()
	_ = list(t, cached)
	_ = list(t, cached)
	if api.queries != 2 {
		t.Errorf("queries of two lists at generation 0 = %d, want 2 (nothing cached)", api.queries)
	}
}
