package ddbstore_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/sivchari/kumo"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/catalog"
)

// t0 is the tests' "now". kumo deletes items whose TTL attribute is before
// the wall clock every 30 s; a base time in the future keeps that reaper away,
// so expiry is only ever decided by the store's own filtering, as on AWS
// where TTL deletion may lag by days.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const testCluster = "test-cluster"

// env is one test's DynamoDB: the real SDK client against an in-process kumo
// server, with a table of its own. kumo keeps DynamoDB state per process, not
// per server, so every test creates a table named after itself.
type env struct {
	client *dynamodb.Client
	table  string
}

func newEnv(t testing.TB) env {
	t.Helper()
	srv := kumo.NewServer()
	t.Cleanup(srv.Close)
	client := dynamodb.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
	})
	table := "nw-" + regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "-")
	if len(table) > 255 {
		table = table[:255]
	}
	ctx := context.Background()
	if err := ddbstore.CreateTable(ctx, client, table, time.Minute); err != nil {
		t.Fatalf("CreateTable() error = %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table})
	})
	return env{client: client, table: table}
}

// store returns a store for cluster over e's table.
func (e env) store(t testing.TB, cluster string) *ddbstore.Store {
	t.Helper()
	s, err := ddbstore.New(e.client, e.table, cluster)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return s
}

// storeWith returns a store over api (e.g. a wrapper of e.client).
func (e env) storeWith(t *testing.T, api ddbstore.API, cluster string) *ddbstore.Store {
	t.Helper()
	s, err := ddbstore.New(api, e.table, cluster)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return s
}

// pagingAPI forces small Query pages (limit > 0), so that the store must
// follow LastEvaluatedKey (kumo, like DynamoDB, pages only past 1 MB
// otherwise), and counts queries.
type pagingAPI struct {
	ddbstore.API
	limit   int32
	queries int
}

func (p *pagingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	p.queries++
	paged := *in
	if p.limit > 0 {
		paged.Limit = &p.limit
	}
	return p.API.Query(ctx, &paged, opts...)
}

// pagedAPI is api whose Query answers stop at 1 MB, as DynamoDB's do.
type pagedAPI struct {
	ddbstore.API
	pages *awstest.DynamoDBPages
}

func dynamoPages(api ddbstore.API) pagedAPI {
	return pagedAPI{api, &awstest.DynamoDBPages{Next: api, Keys: []string{"pk", "sk"},
		IndexKeys: map[string][]string{ddbstore.IndexByInstance: {"instanceKey"}, ddbstore.IndexByNodePool: {"nodePoolKey"}}}}
}

func (p pagedAPI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return p.pages.Query(ctx, in, opts...)
}

// failingAPI fails every call with err, as a throttled or unreachable
// DynamoDB would after the SDK's own retries.
type failingAPI struct{ err error }

func (f failingAPI) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, f.err
}

func (f failingAPI) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, f.err
}

func (f failingAPI) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, f.err
}

func (f failingAPI) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, f.err
}

func (f failingAPI) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, f.err
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name    string
		table   string
		cluster string
	}{
		{name: "should refuse an empty table name", table: "", cluster: "c"},
		{name: "should refuse an empty cluster name", table: "t", cluster: ""},
		{name: "should refuse a cluster name containing the key separator", table: "t", cluster: "a#b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ddbstore.New(failingAPI{}, tt.table, tt.cluster); err == nil {
				t.Errorf("New(%q, %q) error = nil, want an error", tt.table, tt.cluster)
			}
		})
	}
}

func TestSDKErrorsPassThrough(t *testing.T) {
	sdkErr := errors.New("ProvisionedThroughputExceededException: slow down")
	s, err := ddbstore.New(failingAPI{err: sdkErr}, "t", testCluster)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"GetNodeClaim":   func() error { _, err := s.GetNodeClaim(ctx, "a"); return err },
		"PutNodeClaim":   func() error { _, err := s.PutNodeClaim(ctx, nodeClaim("a")); return err },
		"ListNodeClaims": func() error { _, err := s.ListNodeClaims(ctx); return err },
		"DeleteNodeClaim": func() error {
			return s.DeleteNodeClaim(ctx, nodeClaim("a", func(c *v1.NodeClaim) { c.ResourceVersion = "1" }))
		},
		"NodeClaimGeneration": func() error { _, err := s.NodeClaimGeneration(ctx); return err },
		"ListNodeClaims with the cache": func() error {
			_, err := s.WithNodeClaimCache().ListNodeClaims(ctx)
			return err
		},
		"GetConfig": func() error { _, err := s.GetConfig(ctx); return err },
		"MarkUnavailable": func() error {
			return s.MarkUnavailable(ctx, catalog.OfferingKey{CapacityType: "spot"}, "", t0, time.Minute)
		},
		"ClaimIdempotencyKey": func() error { _, err := s.ClaimIdempotencyKey(ctx, "batch", "k", t0, time.Minute); return err },
		"AcquireLease":        func() error { _, err := s.AcquireLease(ctx, "l", "h", t0, time.Minute); return err },
		"AcquireBudget": func() error {
			return s.AcquireBudget(ctx, ddbstore.BudgetRequest{NodePool: "p", Execution: "e", Nodes: 1, Limit: 1}, t0, time.Minute)
		},
	}
	for name, call := range calls {
		t.Run("should wrap the SDK error of "+name, func(t *testing.T) {
			if err := call(); !errors.Is(err, sdkErr) {
				t.Errorf("%s() error = %v, want it to wrap %v", name, err, sdkErr)
			}
		})
	}
}
