package ddbstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

// noise returns n bytes that gzip cannot shrink, so blobs of them need
// several chunks.
func noise(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func batchResult(id string, claims int, annotation string) v1.PodBatchResult {
	r := v1.PodBatchResult{
		TypeMeta:      metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatchResult},
		BatchID:       id,
		State:         v1.BatchSolved,
		Nominations:   map[types.UID]v1.Nomination{"pod-1": {NodeClaim: "default-aaaaaaaaaa"}},
		Unschedulable: map[types.UID]string{"pod-2": "incompatible with nodepool \"default\""},
	}
	for i := range claims {
		c := nodeClaim(fmt.Sprintf("default-%04d", i))
		if annotation != "" {
			c.Annotations = map[string]string{"test/noise": annotation + fmt.Sprint(i)}
		}
		r.NodeClaims = append(r.NodeClaims, c)
	}
	return r
}

func TestBatchResult(t *testing.T) {
	big := string(noise(300<<10, 7))
	big = fmt.Sprintf("%x", big) // 600 KiB of hex, about 300 KiB gzipped per claim
	tests := []struct {
		name string
		give []v1.PodBatchResult
	}{
		{name: "a small result is stored and read back", give: []v1.PodBatchResult{batchResult("b1", 2, "")}},
		{name: "a result larger than one item is chunked and read back", give: []v1.PodBatchResult{batchResult("b1", 3, big)}},
		{name: "a later put replaces the result, chunked or not", give: []v1.PodBatchResult{batchResult("b1", 3, big), batchResult("b1", 1, ""), batchResult("b1", 2, big[:1000])}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).store(t, testCluster)
			ctx := context.Background()
			for _, r := range tt.give {
				if err := s.PutBatchResult(ctx, r, t0); err != nil {
					t.Fatalf("PutBatchResult() error = %v", err)
				}
			}
			got, found, err := s.BatchResult(ctx, "b1", t0.Add(time.Minute))
			if err != nil || !found {
				t.Fatalf("BatchResult() = found %v, error %v; want found", found, err)
			}
			if diff := cmp.Diff(tt.give[len(tt.give)-1], got); diff != "" {
				t.Errorf("BatchResult() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBatchResultAbsent(t *testing.T) {
	e := newEnv(t)
	s, other := e.store(t, testCluster), e.store(t, "other-cluster")
	ctx := context.Background()
	if err := s.PutBatchResult(ctx, batchResult("b1", 1, ""), t0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		store *ddbstore.Store
		id    string
		now   time.Time
	}{
		{name: "a batch never stored", store: s, id: "b2", now: t0},
		{name: "a result past BatchResultTTL", store: s, id: "b1", now: t0.Add(ddbstore.BatchResultTTL)},
		{name: "another cluster's batch", store: other, id: "b1", now: t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, found, err := tt.store.BatchResult(ctx, tt.id, tt.now)
			if err != nil || found {
				t.Errorf("BatchResult() = found %v, error %v; want not found", found, err)
			}
		})
	}
}

func TestBatchResultErrors(t *testing.T) {
	s := newEnv(t).store(t, testCluster)
	ctx := context.Background()
	if err := s.PutBatchResult(ctx, batchResult("", 0, ""), t0); !errors.Is(err, ddbstore.ErrInvalid) {
		t.Errorf("PutBatchResult(no id) error = %v, want ErrInvalid", err)
	}
	if _, _, err := s.BatchResult(ctx, "a#b", t0); !errors.Is(err, ddbstore.ErrInvalid) {
		t.Errorf("BatchResult(a#b) error = %v, want ErrInvalid", err)
	}
	// 64 chunks of 384 KiB is the bound; 26 MiB of noise exceeds it.
	if err := s.PutPayload(ctx, "huge", noise(26<<20, 3), t0, time.Hour); !errors.Is(err, ddbstore.ErrItemTooLarge) {
		t.Errorf("PutPayload(26 MiB) error = %v, want ErrItemTooLarge", err)
	}
}

func TestPayload(t *testing.T) {
	tests := []struct {
		name     string
		give     []byte
		wantPuts int
	}{
		{name: "a small payload is one item", give: []byte(`{"kind":"PodBatch"}`), wantPuts: 1},
		{name: "a payload of 1 MiB is three chunks and a head", give: noise(1<<20, 1), wantPuts: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			// Small query pages make the chunk read follow LastEvaluatedKey.
			api := &countingAPI{API: &pagingAPI{API: e.client, limit: 1}}
			s := e.storeWith(t, api, testCluster)
			ctx := context.Background()
			if err := s.PutPayload(ctx, "m1", tt.give, t0, time.Hour); err != nil {
				t.Fatalf("PutPayload() error = %v", err)
			}
			if api.puts != tt.wantPuts {
				t.Errorf("PutPayload() wrote %d items, want %d", api.puts, tt.wantPuts)
			}
			got, err := s.GetPayload(ctx, "m1", t0.Add(59*time.Minute))
			if err != nil {
				t.Fatalf("GetPayload() error = %v", err)
			}
			if diff := cmp.Diff(tt.give, got); diff != "" {
				t.Errorf("GetPayload() mismatch (-want +got):\n%s", diff)
			}
			if _, err := s.GetPayload(ctx, "m1", t0.Add(time.Hour)); !errors.Is(err, ddbstore.ErrNotFound) {
				t.Errorf("GetPayload(after ttl) error = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestHasIdempotencyKey(t *testing.T) {
	s := newEnv(t).store(t, testCluster)
	ctx := context.Background()
	if _, err := s.ClaimIdempotencyKey(ctx, ddbstore.ScopeBatch, "b1", t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		scope string
		key   string
		now   time.Time
		want  bool
	}{
		{name: "a claimed key", scope: ddbstore.ScopeBatch, key: "b1", now: t0, want: true},
		{name: "the same key in another scope", scope: ddbstore.ScopeConfig, key: "b1", now: t0, want: false},
		{name: "a key never claimed", scope: ddbstore.ScopeBatch, key: "b2", now: t0, want: false},
		{name: "an expired key", scope: ddbstore.ScopeBatch, key: "b1", now: t0.Add(time.Hour), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.HasIdempotencyKey(ctx, tt.scope, tt.key, tt.now)
			if err != nil {
				t.Fatalf("HasIdempotencyKey() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("HasIdempotencyKey() = %v, want %v", got, tt.want)
			}
		})
	}
	// Reading does not claim.
	if seen, err := s.ClaimIdempotencyKey(ctx, ddbstore.ScopeBatch, "b2", t0, time.Hour); err != nil || seen {
		t.Errorf("ClaimIdempotencyKey(b2) after reads = %v, %v; want unseen", seen, err)
	}
}

// countingAPI counts PutItem calls.
type countingAPI struct {
	ddbstore.API
	puts int
}

func (c *countingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.puts++
	return c.API.PutItem(ctx, in, opts...)
}

func TestPutPayloadOnceKeepsTheFirstPayloadUntilItExpires(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, testCluster)
	ctx := context.Background()
	first, second := []byte(`{"request":1}`), []byte(`{"request":2}`)
	got, err := s.PutPayloadOnce(ctx, "fleet-request/tok", first, t0, time.Hour)
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("PutPayloadOnce(first) = %s, %v; want the first payload stored", got, err)
	}
	got, err = s.PutPayloadOnce(ctx, "fleet-request/tok", second, t0.Add(time.Minute), time.Hour)
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("PutPayloadOnce(second) = %s, %v; want the first payload back", got, err)
	}
	if stored, err := s.GetPayload(ctx, "fleet-request/tok", t0.Add(time.Minute)); err != nil || !bytes.Equal(stored, first) {
		t.Errorf("GetPayload() = %s, %v; want the first payload kept", stored, err)
	}
	got, err = s.PutPayloadOnce(ctx, "fleet-request/tok", second, t0.Add(time.Hour), time.Hour)
	if err != nil || !bytes.Equal(got, second) {
		t.Errorf("PutPayloadOnce(after expiry) = %s, %v; want the second payload stored", got, err)
	}
}
