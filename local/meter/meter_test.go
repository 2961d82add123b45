package meter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sivchari/kumo"
)

// The examples of the DynamoDB Developer Guide's capacity-unit pages
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/provisioned-capacity-mode.html,
// .../CapacityUnitCalculations.html, .../transaction-apis.html#transaction-capacity-handling).
func TestCapacityUnitsFollowAWSExamples(t *testing.T) {
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"should bill a 500-byte write as 1 WRU", WriteUnits(500), 1},
		{"should bill a 3.5 KB write as 4 WRU (rounded up per KB)", WriteUnits(3584), 4},
		{"should bill a 1 KB write as 1 WRU", WriteUnits(1024), 1},
		{"should bill an empty write as 1 WRU at least", WriteUnits(0), 1},
		{"should bill a 7 KB strongly consistent read as 2 RRU", ReadUnits(7*1024, true), 2},
		{"should bill a 7 KB eventually consistent read as 1 RRU", ReadUnits(7*1024, false), 1},
		{"should bill a 4 KB strongly consistent read as 1 RRU", ReadUnits(4096, true), 1},
		{"should bill a missing item eventually consistent as 0.5 RRU", ReadUnits(0, false), 0.5},
		{"should bill a 40.8 KB Query page as 11 RRU strongly consistent", ReadUnits(41779, true), 11},
		{"should bill a 40.8 KB Query page as 5.5 RRU eventually consistent", ReadUnits(41779, false), 5.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestItemSize(t *testing.T) {
	tests := []struct {
		name string
		item string
		want int
	}{
		{"should count name and string bytes", `{"pk":{"S":"abc"}}`, 2 + 3},
		{"should count a string's UTF-8 bytes", `{"a":{"S":"é"}}`, 1 + 2},
		{"should count a number's significant digits halved plus one", `{"n":{"N":"12345"}}`, 1 + 4},
		{"should not count a number's leading and trailing zeros", `{"n":{"N":"001200"}}`, 1 + 2},
		{"should count binary as its raw bytes", `{"b":{"B":"AAECAw=="}}`, 1 + 4},
		{"should count a Boolean and a null as 1", `{"t":{"BOOL":true},"z":{"NULL":true}}`, 1 + 1 + 1 + 1},
		{"should count a map as 3 plus 1 per element plus the elements", `{"m":{"M":{"k":{"S":"vv"}}}}`, 1 + 3 + 1 + 1 + 2},
		{"should count a list as 3 plus 1 per element plus the elements", `{"l":{"L":[{"S":"x"},{"BOOL":false}]}}`, 1 + 3 + 2 + 1 + 1},
		{"should count an empty list as 3", `{"l":{"L":[]}}`, 1 + 3},
		{"should sum a string set", `{"ss":{"SS":["ab","c"]}}`, 2 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var it map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.item), &it); err != nil {
				t.Fatal(err)
			}
			got, err := ItemSize(it)
			if err != nil {
				t.Fatalf("ItemSize() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("ItemSize(%s) = %d, want %d", tt.item, got, tt.want)
			}
		})
	}
	t.Run("should name the attribute of a bad value", func(t *testing.T) {
		_, err := ItemSize(map[string]json.RawMessage{"bad": json.RawMessage(`{"Q":"x"}`)})
		if err == nil || !strings.Contains(err.Error(), `"bad"`) {
			t.Errorf("ItemSize() error = %v, want one naming \"bad\"", err)
		}
	})
}

func TestLambdaMemoryReadsInfraTable(t *testing.T) {
	mem, err := LambdaMemory(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("LambdaMemory() error = %v", err)
	}
	for name, want := range map[string]int{"intake": 512, "provisioner": 2048, "gc": 512, "disrupttask": 1024} {
		if mem[name] != want {
			t.Errorf("memory[%s] = %d, want %d (infra/nodewright/functions.go)", name, mem[name], want)
		}
	}
	if _, err := LambdaMemory(t.TempDir()); err == nil {
		t.Error("LambdaMemory(no repo) error = nil, want one")
	}
}

func TestInvocationBillsGBSeconds(t *testing.T) {
	m := New(map[string]int{"gc": 512}, time.Unix(0, 0))
	m.Invocation("gc", 1500*time.Millisecond)
	m.Invocation("gc", 499*time.Microsecond) // rounded up to 1 ms
	row, ok := m.Report(time.Unix(60, 0)).Find(Lambda, "gc", UnitGBSeconds)
	if !ok {
		t.Fatal("no gc row")
	}
	if want := 0.5*1.5 + 0.5*0.001; row.Calls != 2 || abs(row.Units-want) > 1e-9 || row.MemoryMiB != 512 {
		t.Errorf("row = %+v, want 2 calls, %v GB-s at 512 MiB", row, want)
	}
}

func TestLogWriterMetersBytesPerFunction(t *testing.T) {
	m := New(nil, time.Unix(0, 0))
	var buf bytes.Buffer
	w := m.LogWriter(&buf)
	l1 := `{"msg":"a","function":"intake"}` + "\n"
	l2 := `{"msg":"bb","function":"intake"}` + "\n"
	l3 := `{"msg":"c","component":"queue-pump"}` + "\n"
	for _, l := range []string{l1, l2, l3} {
		if _, err := w.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	rep := m.Report(time.Unix(1, 0))
	if row, _ := rep.Find(Logs, "intake", UnitBytes); row.Calls != 2 || row.Units != float64(len(l1)+len(l2)) {
		t.Errorf("intake log row = %+v, want 2 lines of %d bytes", row, len(l1)+len(l2))
	}
	if row, _ := rep.Find(Logs, "component:queue-pump", UnitBytes); row.Calls != 1 {
		t.Errorf("queue-pump log row = %+v, want 1 line", row)
	}
	if buf.String() != l1+l2+l3 {
		t.Errorf("the writer changed the log: %q", buf.String())
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// kumoClients returns DynamoDB and SQS clients of an in-process kumo
// metered by m, and a table "t" with key pk (string) and sk (string).
func kumoClients(t *testing.T, m *Meter) (*dynamodb.Client, *sqs.Client, string) {
	t.Helper()
	k := kumo.NewServer()
	t.Cleanup(k.Close)
	tr := &Transport{Base: http.DefaultTransport, Meter: m}
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), HTTPClient: &http.Client{Transport: tr}}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(k.URL) })
	sq := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(k.URL) })
	table := fmt.Sprintf("meter-%d", time.Now().UnixNano())
	_, err := ddb.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange}},
	})
	if err != nil {
		t.Fatalf("CreateTable() error = %v", err)
	}
	return ddb, sq, table
}

// blob is an item of pk, sk and a string attribute d that make it exactly
// size bytes.
func blob(pk, sk string, size int) map[string]ddbtypes.AttributeValue {
	pad := size - (2 + len(pk)) - (2 + len(sk)) - 1
	return map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk},
		"d": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", pad)},
	}
}

func ddbKey(pk, sk string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}}
}

func TestTransportMetersDynamoDBAsDynamoDBBills(t *testing.T) {
	ctx := context.Background()
	m := New(nil, time.Now())
	ddb, _, table := kumoClients(t, m)
	units := func(api, unit string) float64 {
		row, _ := m.Report(time.Now()).Find(DynamoDB, api, unit)
		return row.Units
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// 500 B -> 1 WRU; 3.5 KB -> 4 WRU.
	must(ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: blob("a", "1", 500)}))
	must(ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: blob("a", "2", 3584)}))
	if got := units("PutItem", UnitWRU); got != 5 {
		t.Errorf("PutItem WRU = %v, want 1 + 4", got)
	}
	// Overwriting the 3.5 KB item with a 100 B one bills the larger: 4.
	must(ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: blob("a", "2", 100)}))
	if got := units("PutItem", UnitWRU); got != 9 {
		t.Errorf("PutItem WRU after shrinking overwrite = %v, want 5 + 4", got)
	}
	// An update that grows a 100 B item to 2.5 KB bills 3.
	must(ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: ddbKey("a", "2"), UpdateExpression: aws.String("SET d = :d"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":d": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("y", 2500)}}}))
	if got := units("UpdateItem", UnitWRU); got != 3 {
		t.Errorf("UpdateItem WRU = %v, want 3", got)
	}
	// A failed conditional put still bills the existing item: 1 (500 B).
	_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: blob("a", "1", 200), ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if err == nil {
		t.Fatal("conditional put succeeded, want ConditionalCheckFailed")
	}
	if got := units("PutItem", UnitWRU); got != 10 {
		t.Errorf("PutItem WRU after a failed condition = %v, want 9 + 1", got)
	}
	// Reads: 2.5 KB eventually consistent 0.5, strongly 1.
	must(ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: ddbKey("a", "2")}))
	must(ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: ddbKey("a", "2"), ConsistentRead: aws.Bool(true)}))
	if got := units("GetItem", UnitRRU); got != 1.5 {
		t.Errorf("GetItem RRU = %v, want 0.5 + 1", got)
	}
	// Query sums the page: 500 B + ~2.5 KB = 3 KB -> 1 RRU strongly.
	must(ddb.Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :p"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: "a"}}}))
	if got := units("Query", UnitRRU); got != 1 {
		t.Errorf("Query RRU = %v, want 1 (page summed, not per item)", got)
	}
	// A transaction of two 1 KB puts bills 2 x 2.
	must(ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: &table, Item: blob("b", "1", 1024)}},
		{Put: &ddbtypes.Put{TableName: &table, Item: blob("b", "2", 1024)}},
	}}))
	if got := units("TransactWriteItems", UnitWRU); got != 4 {
		t.Errorf("TransactWriteItems WRU = %v, want 4", got)
	}
	// BatchWriteItem bills per item: 1.5 KB + 0.5 KB -> 2 + 1.
	must(ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: {
		{PutRequest: &ddbtypes.PutRequest{Item: blob("c", "1", 1536)}},
		{PutRequest: &ddbtypes.PutRequest{Item: blob("c", "2", 512)}},
	}}}))
	if got := units("BatchWriteItem", UnitWRU); got != 3 {
		t.Errorf("BatchWriteItem WRU = %v, want 3", got)
	}
	// Deleting the 500 B item bills 1.
	must(ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: ddbKey("a", "1")}))
	if got := units("DeleteItem", UnitWRU); got != 1 {
		t.Errorf("DeleteItem WRU = %v, want 1", got)
	}
}

func TestTransportMetersSQSPer64KB(t *testing.T) {
	ctx := context.Background()
	m := New(nil, time.Now())
	_, sq, _ := kumoClients(t, m)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("meter-%d", time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("small")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(strings.Repeat("z", 200*1024))}); err != nil {
		t.Fatal(err)
	}
	row, _ := m.Report(time.Now()).Find(SQS, "SendMessage", UnitRequests)
	if row.Calls != 2 || row.Units != 1+4 {
		t.Errorf("SendMessage row = %+v, want 2 calls billed 1 + 4 (200 KB in 64 KB chunks)", row)
	}
	if SQSChunks(64*1024) != 1 || SQSChunks(64*1024+1) != 2 || SQSChunks(0) != 1 {
		t.Error("SQSChunks: want 1 per started 64 KiB, at least 1")
	}
}

func TestTransportAttributesDynamoDBToItsCaller(t *testing.T) {
	ctx := context.Background()
	m := New(nil, time.Now())
	ddb, _, table := kumoClients(t, m)
	if _, err := ddb.PutItem(WithCaller(ctx, "gc"), &dynamodb.PutItemInput{TableName: &table, Item: blob("a", "1", 3584)}); err != nil {
		t.Fatal(err)
	}
	for _, caller := range []string{"gc", "instancestatus", "instancestatus"} {
		if _, err := ddb.GetItem(WithCaller(ctx, caller), &dynamodb.GetItemInput{TableName: &table, Key: ddbKey("a", "1"), ConsistentRead: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
	}
	// An unattributed request is counted in the DynamoDB rows only.
	if _, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: ddbKey("a", "1"), ConsistentRead: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	rep := m.Report(time.Now())
	for _, tc := range []struct {
		service, api, unit string
		calls              int64
		units              float64
	}{
		{DynamoDB, "GetItem", UnitRRU, 4, 4},
		{DynamoDBByCaller, "gc GetItem", UnitRRU, 1, 1},
		{DynamoDBByCaller, "instancestatus GetItem", UnitRRU, 2, 2},
		{DynamoDBByCaller, "gc PutItem", UnitWRU, 1, 4},
	} {
		row, _ := rep.Find(tc.service, tc.api, tc.unit)
		if row.Calls != tc.calls || row.Units != tc.units {
			t.Errorf("%s %s = %d calls, %v %s, want %d, %v", tc.service, tc.api, row.Calls, row.Units, tc.unit, tc.calls, tc.units)
		}
	}
	// The bill prices the DynamoDB rows once, not the attribution again.
	bill := Monthly(rep, Fixed{})
	want := ((4*Prices["ddb.wru"].USD)/1e6 + (4*Prices["ddb.rru"].USD)/1e6) * float64(MonthHours) * float64(time.Hour) / float64(rep.Window)
	for _, l := range bill.Lines {
		if l.Service == DynamoDB && abs(l.USD-want) > want*1e-9 {
			t.Errorf("DynamoDB line = %v, want %v (the rows by caller not priced again)", l.USD, want)
		}
	}
}

func TestAtRateScalesOneFunctionsRows(t *testing.T) {
	m := New(map[string]int{"instancestatus": 256, "gc": 512}, time.Now())
	for range 6 {
		m.Scheduled("instancestatus")
		m.Invocation("instancestatus", 10*time.Millisecond)
		m.dynamo("instancestatus", "Query", UnitRRU, 60)
		m.LogLine("instancestatus", 100)
	}
	m.Invocation("gc", 10*time.Millisecond)
	m.dynamo("gc", "Query", UnitRRU, 60)
	m.dynamo("", "Query", UnitRRU, 4)
	got := m.Report(time.Now()).AtRate("instancestatus", 1.0/6)
	for _, tc := range []struct {
		service, api, unit string
		calls              int64
		units              float64
	}{
		{DynamoDB, "Query", UnitRRU, 1 + 1 + 1, 60 + 60 + 4},
		{DynamoDBByCaller, "instancestatus Query", UnitRRU, 1, 60},
		{DynamoDBByCaller, "gc Query", UnitRRU, 1, 60},
		{Scheduler, "instancestatus", UnitRequests, 1, 1},
		{Logs, "instancestatus", UnitBytes, 1, 100},
		{Lambda, "gc", UnitGBSeconds, 1, 0.5 * 0.01},
	} {
		row, _ := got.Find(tc.service, tc.api, tc.unit)
		if row.Calls != tc.calls || abs(row.Units-tc.units) > 1e-9 {
			t.Errorf("%s %s = %d calls, %v %s, want %d, %v", tc.service, tc.api, row.Calls, row.Units, tc.unit, tc.calls, tc.units)
		}
	}
	if row, _ := got.Find(Lambda, "instancestatus", UnitGBSeconds); row.Calls != 1 || row.Duration != 10*time.Millisecond {
		t.Errorf("instancestatus Lambda row = %d calls, %v, want 1 call of 10ms", row.Calls, row.Duration)
	}
}

// The idle polls of the event source mappings follow Lambda's documented
// poller counts: a standard queue's mapping scales down to 2 pollers, a
// FIFO queue's stays at 5, each one 20 s long poll at a time, each queue's
// requests at its own price.
func TestMonthlyModelsIdlePollsPerQueueType(t *testing.T) {
	rep := New(nil, time.Now()).Report(time.Now().Add(time.Hour))
	rep.Window = time.Hour
	minutes := float64(MonthHours * 60)
	for _, tc := range []struct {
		name  string
		fixed Fixed
		want  float64
	}{
		{"one FIFO queue: 5 pollers x 3 receives a minute", Fixed{FIFOQueues: 1}, 15 * minutes * Prices["sqs.fifo"].USD / 1e6},
		{"one standard queue: 2 pollers x 3 receives a minute", Fixed{StandardQueues: 1}, 6 * minutes * Prices["sqs.standard"].USD / 1e6},
		{"both", Fixed{FIFOQueues: 1, StandardQueues: 1}, (15*minutes*Prices["sqs.fifo"].USD + 6*minutes*Prices["sqs.standard"].USD) / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got float64
			for _, l := range Monthly(rep, tc.fixed).Lines {
				if l.Service == SQS {
					got = l.USD
				}
			}
			if abs(got-tc.want) > 1e-9 {
				t.Errorf("SQS line = $%v, want $%v", got, tc.want)
			}
		})
	}
}
