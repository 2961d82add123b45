package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The NodeClaim generation item: one small item in the NodeClaim partition
// ("<cluster>#NODECLAIM"), sort key skGeneration, whose version attribute
// counts the NodeClaim writes. '#' never appears in a NodeClaim name
// (checkKeyPart) and sorts before every character a name may hold, so the
// item sorts first in the partition and no claim can take its key; it has
// no index attributes, so the byInstance and byNodePool indexes never hold
// it.
const (
	skGeneration   = "#generation"
	kindGeneration = "NodeClaimGeneration"
)

// Retries of a NodeClaim write that met another transaction on the
// generation item (TransactionCanceledException, reason
// TransactionConflict: DynamoDB cancels a transaction that touches an item
// another transaction is writing, and the SDK does not retry it). Delays
// start at conflictBaseDelay and double up to conflictMaxDelay, each drawn
// between half and all of its nominal value.
const (
	conflictAttempts  = 10
	conflictBaseDelay = 10 * time.Millisecond
	conflictMaxDelay  = 640 * time.Millisecond
)

// isGenerationItem reports whether item is the NodeClaim generation item.
func isGenerationItem(item map[string]types.AttributeValue) bool {
	return getString(item, attrSK) == skGeneration
}

// writeNodeClaim applies op, one write of a NodeClaim item, and raises the
// NodeClaim generation by one, in one TransactWriteItems: both land or
// neither does. A cancellation only because another transaction held the
// generation item (TransactionConflict) is retried, since nothing of a
// cancelled transaction was applied; any other error is returned as
// DynamoDB reported it (claimConditionFailed tells op's condition failure).
func (s *Store) writeNodeClaim(ctx context.Context, op types.TransactWriteItem) error {
	delay := conflictBaseDelay
	for attempt := 1; ; attempt++ {
		// A fresh input per attempt: the SDK fills in ClientRequestToken,
		// and a retry of a cancelled transaction is a new request.
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{op, s.generationBump()},
		})
		if err == nil || !transactionConflict(err) || attempt == conflictAttempts {
			return err
		}
		wait := delay/2 + rand.N(delay/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (after a transaction conflict: %w)", ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, conflictMaxDelay)
	}
}

// generationBump is the Update that raises the generation by one (creating
// the item at 1).
func (s *Store) generationBump() types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 &s.table,
		Key:                       itemKey(s.pk(pkNodeClaim), skGeneration),
		UpdateExpression:          strPtr("SET #kind = :kind ADD #ver :one"),
		ExpressionAttributeNames:  map[string]string{"#kind": attrKind, "#ver": attrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":kind": str(kindGeneration), ":one": num(1)},
	}}
}

// cancellationReasons returns the reasons of a cancelled transaction, one
// per item in request order, or nil for any other error.
func cancellationReasons(err error) []types.CancellationReason {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	return tce.CancellationReasons
}

// claimConditionFailed reports whether err is writeNodeClaim's transaction
// cancelled by the claim's own condition (the first item's reason
// ConditionalCheckFailed).
func claimConditionFailed(err error) bool {
	r := cancellationReasons(err)
	return len(r) > 0 && aws.ToString(r[0].Code) == "ConditionalCheckFailed"
}

// transactionConflict reports whether err is a transaction cancelled
// because another transaction was writing one of its items and for no
// other reason (every reason None or TransactionConflict, at least one the
// latter).
func transactionConflict(err error) bool {
	conflict := false
	for _, r := range cancellationReasons(err) {
		switch aws.ToString(r.Code) {
		case "TransactionConflict":
			conflict = true
		case "", "None":
		default:
			return false
		}
	}
	return conflict
}

// NodeClaimGeneration returns the cluster's NodeClaim generation: a counter
// every NodeClaim write of this store raises by one in the same transaction
// as the write, so that two reads of the same generation bracket no
// NodeClaim change. A list made after reading generation g holds every
// write g counts (and maybe later ones). It is 0 while no NodeClaim was
// written since the table was created (or since a version without the
// generation wrote its claims). The read is strongly consistent: one
// GetItem of a small item, 1 RRU.
func (s *Store) NodeClaimGeneration(ctx context.Context) (int64, error) {
	item, err := s.getItem(ctx, s.pk(pkNodeClaim), skGeneration)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read nodeclaim generation: %w", err)
	}
	g, err := getInt(item, attrVersion)
	if err != nil {
		return 0, fmt.Errorf("read nodeclaim generation: %w", err)
	}
	return g, nil
}

// WithNodeClaimCache returns a store over the same table whose
// ListNodeClaims keeps its last list in memory, keyed by the NodeClaim
// generation read before that list, and reads the NodeClaim partition
// again only when the generation read at the call differs (so a warm
// Lambda pays 1 RRU for an unchanged list instead of one read of every
// claim). The result is what ListNodeClaims without the cache would
// return at the call or later, never older: the generation read decides,
// so a write by any other process or a cold start is seen by the next
// call, and a write landing between the generation read and the list is
// counted by a generation the cache does not hold. With generation 0 it
// never caches. The returned store is safe for concurrent use; every
// store derived from it shares the cache.
func (s *Store) WithNodeClaimCache() *Store {
	out := *s
	out.claims = &claimCache{}
	return &out
}

// claimCache is a NodeClaim partition's items as read after generation
// gen was read (gen 0: nothing cached).
type claimCache struct {
	mu    sync.Mutex
	gen   int64
	items []map[string]types.AttributeValue
}

// list returns the NodeClaim partition's items: the cached ones when the
// generation read now is the cached one, else a fresh strongly consistent
// query, cached under the generation read before it. Items are never
// modified after they are cached (decoding copies them into new claims).
func (c *claimCache) list(ctx context.Context, s *Store) ([]map[string]types.AttributeValue, error) {
	gen, err := s.NodeClaimGeneration(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if gen != 0 && gen == c.gen {
		items := c.items
		c.mu.Unlock()
		return items, nil
	}
	c.mu.Unlock()
	items, err := s.queryPartition(ctx, s.pk(pkNodeClaim))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	// A concurrent caller may have cached a newer generation meanwhile:
	// keep the newest, so that the cache never moves back.
	if gen != 0 && gen >= c.gen {
		c.gen, c.items = gen, items
	}
	c.mu.Unlock()
	return items, nil
}
