package meter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"
)

// The DynamoDB capacity rule (Amazon DynamoDB Developer Guide, "Read/write
// capacity mode" and "Item sizes and formats",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
// one write request unit per 1 KB written, rounded up per item; one read
// request unit per 4 KB read strongly consistent, half of it eventually
// consistent; transactional reads and writes cost twice; Query and Scan
// round up the sum of the items' sizes, BatchGetItem and BatchWriteItem
// each item.

// WriteUnits is the write request units of writing one item of size
// bytes (the larger of its size before and after): ceil(size/1 KB), at
// least 1.
func WriteUnits(size int) float64 { return float64(max(1, (size+1023)/1024)) }

// ReadUnits is the read request units of reading size bytes in one item
// (or in the items of one Query or Scan page): ceil(size/4 KB), at least
// 1, halved when eventually consistent.
func ReadUnits(size int, consistent bool) float64 {
	u := float64(max(1, (size+4095)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// ItemSize is the size DynamoDB bills for an item in DynamoDB JSON (the
// wire form: attribute name -> {"S": ...}): per attribute the UTF-8 bytes
// of its name plus its value's size (ValueSize).
func ItemSize(item map[string]json.RawMessage) (int, error) {
	n := 0
	for name, raw := range item {
		v, err := ValueSize(raw)
		if err != nil {
			return 0, fmt.Errorf("attribute %q: %w", name, err)
		}
		n += len(name) + v
	}
	return n, nil
}

// ValueSize is the size of one AttributeValue in DynamoDB JSON: a string's
// UTF-8 bytes; a binary's raw bytes; a number's significant digits halved,
// rounded up, plus 1; 1 for a Boolean or null; for a list or map 3 bytes
// plus 1 per element plus the elements' sizes (map keys included); a set's
// elements summed.
func ValueSize(raw json.RawMessage) (int, error) {
	var av map[string]json.RawMessage
	if err := json.Unmarshal(raw, &av); err != nil {
		return 0, fmt.Errorf("attribute value: %w", err)
	}
	if len(av) != 1 {
		return 0, fmt.Errorf("attribute value: want one type key, got %d", len(av))
	}
	for typ, v := range av {
		switch typ {
		case "S":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return 0, fmt.Errorf("attribute of type S: %w", err)
			}
			return len(s), nil
		case "N":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return 0, fmt.Errorf("attribute of type N: %w", err)
			}
			return numberSize(s), nil
		case "B":
			b, err := binarySize(v)
			if err != nil {
				return 0, fmt.Errorf("attribute of type B: %w", err)
			}
			return b, nil
		case "BOOL", "NULL":
			return 1, nil
		case "SS", "NS", "BS":
			var ss []json.RawMessage
			if err := json.Unmarshal(v, &ss); err != nil {
				return 0, fmt.Errorf("%s: %w", typ, err)
			}
			n := 0
			for _, e := range ss {
				var s string
				if err := json.Unmarshal(e, &s); err != nil {
					return 0, fmt.Errorf("%s: %w", typ, err)
				}
				switch typ {
				case "SS":
					n += len(s)
				case "NS":
					n += numberSize(s)
				default:
					b, err := binarySize(e)
					if err != nil {
						return 0, fmt.Errorf("BS: %w", err)
					}
					n += b
				}
			}
			return n, nil
		case "L":
			var l []json.RawMessage
			if err := json.Unmarshal(v, &l); err != nil {
				return 0, fmt.Errorf("attribute of type L: %w", err)
			}
			n := 3
			for _, e := range l {
				s, err := ValueSize(e)
				if err != nil {
					return 0, err
				}
				n += 1 + s
			}
			return n, nil
		case "M":
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v, &m); err != nil {
				return 0, fmt.Errorf("attribute of type M: %w", err)
			}
			n := 3
			for k, e := range m {
				s, err := ValueSize(e)
				if err != nil {
					return 0, fmt.Errorf("attribute %q of a map: %w", k, err)
				}
				n += 1 + len(k) + s
			}
			return n, nil
		default:
			return 0, fmt.Errorf("attribute value: unknown type %q", typ)
		}
	}
	return 0, nil
}

func binarySize(v json.RawMessage) (int, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return 0, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// numberSize: DynamoDB stores numbers in a variable-length form, about one
// byte per two significant digits plus one; leading and trailing zeros do
// not count.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.ReplaceAll(mant, ".", "")
	digits = strings.Trim(digits, "0")
	if digits == "" {
		return 1
	}
	return int(math.Ceil(float64(utf8.RuneCountInString(digits))/2)) + 1
}

// Transport meters the DynamoDB and SQS requests an SDK client sends
// through it (both JSON protocols, told apart by X-Amz-Target). For the
// write operations it reads the item before (and after, for UpdateItem)
// with an unmetered consistent GetItem through Base, since DynamoDB bills
// the larger of the item's sizes before and after the write. A
// conditional write that fails is billed on the existing item, as
// DynamoDB bills it.
//
// Limits, stated: Query and Scan are billed on the returned items (a
// projection or a filter makes them smaller than what DynamoDB reads);
// ConditionCheck in a transaction is billed as a transactional write of
// the checked item.
type Transport struct {
	Base  http.RoundTripper
	Meter *Meter

	mu   sync.Mutex
	keys map[string][]string // table -> key attribute names
}

const ddbPrefix = "DynamoDB_20120810."

// RoundTrip forwards r through Base and meters it.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	target := r.Header.Get("X-Amz-Target")
	switch {
	case strings.HasPrefix(target, "AmazonSQS."):
		return t.sqs(r, strings.TrimPrefix(target, "AmazonSQS."))
	case strings.HasPrefix(target, ddbPrefix):
		return t.dynamo(r, strings.TrimPrefix(target, ddbPrefix))
	}
	return t.Base.RoundTrip(r)
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return data, nil
}

func readResp(resp *http.Response) ([]byte, error) {
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return data, err
}

func (t *Transport) sqs(r *http.Request, api string) (*http.Response, error) {
	in, err := readBody(r)
	if err != nil {
		return nil, err
	}
	resp, err := t.Base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	out, err := readResp(resp)
	if err != nil {
		return nil, err
	}
	if api == "ReceiveMessage" {
		var got struct{ Messages []json.RawMessage }
		if json.Unmarshal(out, &got); len(got.Messages) == 0 {
			api = "ReceiveMessage (empty)"
		}
	}
	t.Meter.SQSRequest(api, max(len(in), len(out)))
	return resp, nil
}

type item = map[string]json.RawMessage

// ddbRequest is the part of every DynamoDB request the meter reads.
type ddbRequest struct {
	TableName      string                     `json:"TableName"`
	Key            item                       `json:"Key"`
	Item           item                       `json:"Item"`
	ConsistentRead bool                       `json:"ConsistentRead"`
	RequestItems   map[string]json.RawMessage `json:"RequestItems"`
	TransactItems  []map[string]ddbRequest    `json:"TransactItems"`
}

type ddbResponse struct {
	Item      item            `json:"Item"`
	Items     []item          `json:"Items"`
	Responses json.RawMessage `json:"Responses"`
}

// failedCondition reports whether an error answer is one DynamoDB bills
// (a failed condition or a canceled transaction).
func failedCondition(status int, out []byte) bool {
	return status/100 == 4 && (bytes.Contains(out, []byte("ConditionalCheckFailed")) || bytes.Contains(out, []byte("TransactionCanceled")))
}

func (t *Transport) dynamo(r *http.Request, api string) (*http.Response, error) {
	raw, err := readBody(r)
	if err != nil {
		return nil, err
	}
	var in ddbRequest
	_ = json.Unmarshal(raw, &in)
	caller := callerOf(r.Context())
	// The items' sizes before the write.
	var before []int
	type write struct {
		table string
		key   item
		put   item // nil for an update, delete or condition check
		tx    bool
	}
	var writes []write
	switch api {
	case "PutItem":
		writes = append(writes, write{table: in.TableName, key: t.keyOf(r, in.TableName, in.Item), put: in.Item})
	case "UpdateItem", "DeleteItem":
		writes = append(writes, write{table: in.TableName, key: in.Key})
	case "BatchWriteItem":
		for table, raw := range in.RequestItems {
			var reqs []struct {
				PutRequest    *struct{ Item item }
				DeleteRequest *struct{ Key item }
			}
			_ = json.Unmarshal(raw, &reqs)
			for _, q := range reqs {
				switch {
				case q.PutRequest != nil:
					writes = append(writes, write{table: table, key: t.keyOf(r, table, q.PutRequest.Item), put: q.PutRequest.Item})
				case q.DeleteRequest != nil:
					writes = append(writes, write{table: table, key: q.DeleteRequest.Key})
				}
			}
		}
	case "TransactWriteItems":
		for _, ti := range in.TransactItems {
			for kind, q := range ti {
				w := write{table: q.TableName, key: q.Key, tx: true}
				if kind == "Put" {
					w.key, w.put = t.keyOf(r, q.TableName, q.Item), q.Item
				}
				writes = append(writes, w)
			}
		}
	}
	for _, w := range writes {
		before = append(before, t.sizeAt(r, w.table, w.key))
	}
	resp, err := t.Base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	outRaw, err := readResp(resp)
	if err != nil {
		return nil, err
	}
	ok := resp.StatusCode/100 == 2
	billed := ok || failedCondition(resp.StatusCode, outRaw)
	var out ddbResponse
	_ = json.Unmarshal(outRaw, &out)
	if len(writes) > 0 {
		units := 0.0
		if billed {
			for i, w := range writes {
				size := before[i]
				switch {
				case !ok:
				case w.put != nil:
					n, _ := ItemSize(w.put)
					size = max(size, n)
				case api == "UpdateItem" || api == "TransactWriteItems":
					size = max(size, t.sizeAt(r, w.table, w.key))
				}
				u := WriteUnits(size)
				if w.tx {
					u *= 2
				}
				units += u
			}
		}
		t.Meter.dynamo(caller, api, UnitWRU, units)
		return resp, nil
	}
	switch api {
	case "GetItem":
		u := 0.0
		if ok {
			n, _ := ItemSize(out.Item)
			u = ReadUnits(n, in.ConsistentRead)
		}
		t.Meter.dynamo(caller, api, UnitRRU, u)
	case "Query", "Scan":
		u := 0.0
		if ok {
			total := 0
			for _, it := range out.Items {
				n, _ := ItemSize(it)
				total += n
			}
			u = ReadUnits(total, in.ConsistentRead)
		}
		t.Meter.dynamo(caller, api, UnitRRU, u)
	case "BatchGetItem":
		u := 0.0
		if ok {
			var resps map[string][]item
			_ = json.Unmarshal(out.Responses, &resps)
			for table, items := range resps {
				var q struct{ ConsistentRead bool }
				_ = json.Unmarshal(in.RequestItems[table], &q)
				for _, it := range items {
					n, _ := ItemSize(it)
					u += ReadUnits(n, q.ConsistentRead)
				}
			}
		}
		t.Meter.dynamo(caller, api, UnitRRU, u)
	case "TransactGetItems":
		u := 0.0
		if ok {
			var resps []struct{ Item item }
			_ = json.Unmarshal(out.Responses, &resps)
			for _, it := range resps {
				n, _ := ItemSize(it.Item)
				u += 2 * ReadUnits(n, true)
			}
		}
		t.Meter.dynamo(caller, api, UnitRRU, u)
	default:
		// Control-plane calls (CreateTable, DescribeTable, ...) bill no
		// request units.
		t.Meter.add(DynamoDB, api, UnitRequests, 1, 0, nil)
	}
	return resp, nil
}

// ddbCall sends one unmetered DynamoDB call through Base, with r's
// endpoint and headers, and decodes its answer into out.
func (t *Transport) ddbCall(r *http.Request, api string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, r.URL.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", ddbPrefix+api)
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	resp, err := t.Base.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %d %s", api, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

// sizeAt is the size of the item of key in table now, 0 when absent (or
// unreadable).
func (t *Transport) sizeAt(r *http.Request, table string, key item) int {
	if table == "" || len(key) == 0 {
		return 0
	}
	var out struct{ Item item }
	if err := t.ddbCall(r, "GetItem", map[string]any{"TableName": table, "Key": key, "ConsistentRead": true}, &out); err != nil {
		return 0
	}
	n, _ := ItemSize(out.Item)
	return n
}

// keyOf picks the key attributes of table out of a full item.
func (t *Transport) keyOf(r *http.Request, table string, it item) item {
	t.mu.Lock()
	names, ok := t.keys[table]
	t.mu.Unlock()
	if !ok {
		var out struct {
			Table struct {
				KeySchema []struct{ AttributeName string }
			}
		}
		if err := t.ddbCall(r, "DescribeTable", map[string]any{"TableName": table}, &out); err != nil {
			return nil
		}
		for _, k := range out.Table.KeySchema {
			names = append(names, k.AttributeName)
		}
		t.mu.Lock()
		if t.keys == nil {
			t.keys = map[string][]string{}
		}
		t.keys[table] = names
		t.mu.Unlock()
	}
	key := item{}
	for _, n := range names {
		if v, ok := it[n]; ok {
			key[n] = v
		}
	}
	return key
}
