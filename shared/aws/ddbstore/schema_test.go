package ddbstore_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

var update = flag.Bool("update", false, "rewrite schema.json from Schema()")

// TestSchemaFile keeps schema.json, which the CDK app reads, equal to
// Schema(). Run `go test ./shared/aws/ddbstore -run TestSchemaFile -update`
// after changing Schema.
func TestSchemaFile(t *testing.T) {
	want, err := json.MarshalIndent(ddbstore.Schema(), "", "  ")
	if err != nil {
		t.Fatalf("marshal schema: %v", err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile("schema.json", want, 0o644); err != nil {
			t.Fatalf("write schema.json: %v", err)
		}
	}
	got, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatalf("read schema.json: %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("schema.json is stale; rerun with -update (-Schema() +file):\n%s", diff)
	}
}

// tableShape is the part of a table description the store depends on.
type tableShape struct {
	Keys    []string          // "name:HASH", "name:RANGE"
	Attrs   map[string]string // attribute definitions: name -> type
	Indexes map[string]string // name -> "keys; projection"
}

func keyStrings(ks []types.KeySchemaElement) []string {
	var out []string
	for _, k := range ks {
		out = append(out, *k.AttributeName+":"+string(k.KeyType))
	}
	return out
}

func TestCreateTable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t) // creates the table through CreateTable

	// A second call finds the table and TTL in place.
	if err := ddbstore.CreateTable(ctx, e.client, e.table, time.Minute); err != nil {
		t.Fatalf("CreateTable() again error = %v", err)
	}
	desc, err := e.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &e.table})
	if err != nil {
		t.Fatalf("DescribeTable() error = %v", err)
	}
	got := tableShape{Keys: keyStrings(desc.Table.KeySchema), Attrs: map[string]string{}, Indexes: map[string]string{}}
	for _, a := range desc.Table.AttributeDefinitions {
		got.Attrs[*a.AttributeName] = string(a.AttributeType)
	}
	for _, ix := range desc.Table.GlobalSecondaryIndexes {
		got.Indexes[*ix.IndexName] = strings.Join(keyStrings(ix.KeySchema), ",") + "; " + string(ix.Projection.ProjectionType)
	}
	want := tableShape{
		Keys:  []string{"pk:HASH", "sk:RANGE"},
		Attrs: map[string]string{"pk": "S", "sk": "S", "instanceKey": "S", "nodePoolKey": "S"},
		Indexes: map[string]string{
			ddbstore.IndexByInstance: "instanceKey:HASH; KEYS_ONLY",
			ddbstore.IndexByNodePool: "nodePoolKey:HASH,sk:RANGE; ALL",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table shape mismatch (-want +got):\n%s", diff)
	}
	ttl, err := e.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &e.table})
	if err != nil {
		t.Fatalf("DescribeTimeToLive() error = %v", err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.AttributeName == nil || *d.AttributeName != ddbstore.TTLAttribute || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Errorf("TTL = %+v, want ENABLED on %s", d, ddbstore.TTLAttribute)
	}
}

// TestDocsDescribeSchema checks that docs/dynamodb.md names every key
// attribute and index of Schema().
func TestDocsDescribeSchema(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/dynamodb.md")
	if err != nil {
		t.Fatalf("read docs/dynamodb.md: %v", err)
	}
	sc := ddbstore.Schema()
	terms := []string{sc.PartitionKey, sc.SortKey, sc.TTLAttribute, sc.BillingMode}
	for _, ix := range sc.Indexes {
		terms = append(terms, ix.Name, ix.PartitionKey, ix.Projection)
	}
	sort.Strings(terms)
	for _, term := range terms {
		if !strings.Contains(string(doc), "`"+term+"`") {
			t.Errorf("docs/dynamodb.md does not mention `%s`", term)
		}
	}
}

func TestAccessAllows(t *testing.T) {
	a := ddbstore.Access{Read: []string{"CONFIG"}, Write: []string{"NODECLAIM", "BATCH#*"}, Indexes: []string{ddbstore.IndexByInstance}}
	tests := []struct {
		name          string
		op, index, pk string
		want          bool
	}{
		{name: "should allow reading a read key", op: "GetItem", pk: "c#CONFIG", want: true},
		{name: "should deny writing a read key", op: "PutItem", pk: "c#CONFIG"},
		{name: "should allow reading a write key", op: "Query", pk: "c#NODECLAIM", want: true},
		{name: "should allow deleting under a wildcard", op: "DeleteItem", pk: "c#BATCH#b1", want: true},
		{name: "should deny a key that only shares an exact key's prefix", op: "GetItem", pk: "c#CONFIG#x"},
		{name: "should deny another cluster's key", op: "GetItem", pk: "d#CONFIG"},
		{name: "should deny a key naming no cluster", op: "GetItem", pk: "CONFIG"},
		{name: "should allow querying a listed index for the cluster", op: "Query", index: ddbstore.IndexByInstance, pk: "c#i-0123", want: true},
		{name: "should deny querying an index not listed", op: "Query", index: ddbstore.IndexByNodePool, pk: "c#default"},
		{name: "should deny an index query for another cluster", op: "Query", index: ddbstore.IndexByInstance, pk: "d#i-0123"},
		{name: "should allow updating a write key (a transaction's generation bump)", op: "UpdateItem", pk: "c#NODECLAIM", want: true},
		{name: "should deny updating a read-only key", op: "UpdateItem", pk: "c#CONFIG"},
		{name: "should deny an unknown operation", op: "Scan", pk: "c#NODECLAIM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := a.Allows("c", tt.op, tt.index, tt.pk); got != tt.want {
				t.Errorf("Allows(c, %s, %q, %s) = %v, want %v", tt.op, tt.index, tt.pk, got, tt.want)
			}
		})
	}
}
