package ddbstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

const (
	kindBatchResult = "BatchResult"
	pkBatch         = "BATCH"
)

// More idempotency-key scopes, one per intake route (ScopeBatch serves pod
// batches).
const (
	// ScopeConfig dedupes ClusterConfig messages by message ID.
	ScopeConfig = "config"
	// ScopeRegistrations dedupes NodeRegistrations messages by message ID.
	ScopeRegistrations = "registrations"
)

// BatchResultTTL is how long a pod batch's result is kept: the forwarder
// polls it for minutes, and a redelivered batch resumes its stored plan
// instead of solving again, so it must outlive the provisioning queue's
// redelivery (the queue keeps messages for less than this).
const BatchResultTTL = 24 * time.Hour

// PutBatchResult stores r as the result of batch r.BatchID until
// now+BatchResultTTL, replacing any earlier result. The result is stored as
// a blob (gzip-compressed JSON, chunked past MaxBodyBytes), so a batch of
// thousands of NodeClaims fits. It returns ErrInvalid for an unusable
// batch ID and ErrItemTooLarge past MaxBlobChunks chunks.
func (s *Store) PutBatchResult(ctx context.Context, r v1.PodBatchResult, now time.Time) error {
	if err := checkKeyPart("batch id", r.BatchID); err != nil {
		return fmt.Errorf("put batch result: %w", err)
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("put batch result %s: encode: %w", r.BatchID, err)
	}
	if err := s.putBlob(ctx, s.pk(pkBatch, r.BatchID), kindBatchResult, raw, now.Add(BatchResultTTL)); err != nil {
		return fmt.Errorf("put batch result %s: %w", r.BatchID, err)
	}
	return nil
}

// BatchResult returns the result stored for batchID and whether there is
// one (a result older than BatchResultTTL at now counts as absent). The
// read is strongly consistent.
func (s *Store) BatchResult(ctx context.Context, batchID string, now time.Time) (v1.PodBatchResult, bool, error) {
	if err := checkKeyPart("batch id", batchID); err != nil {
		return v1.PodBatchResult{}, false, fmt.Errorf("get batch result: %w", err)
	}
	raw, err := s.getBlob(ctx, s.pk(pkBatch, batchID), now)
	if errors.Is(err, ErrNotFound) {
		return v1.PodBatchResult{}, false, nil
	}
	if err != nil {
		return v1.PodBatchResult{}, false, fmt.Errorf("get batch result %s: %w", batchID, err)
	}
	var r v1.PodBatchResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return v1.PodBatchResult{}, false, fmt.Errorf("get batch result %s: decode: %w", batchID, err)
	}
	return r, true, nil
}

// HasIdempotencyKey reports whether key was claimed in scope (and, for a
// BeginApply claim, its apply completed) and has not expired at now, without
// claiming it. The intake API uses it to tell a
// batch it accepted but has not solved yet from one it never saw.
func (s *Store) HasIdempotencyKey(ctx context.Context, scope, key string, now time.Time) (bool, error) {
	pk, err := s.idempotencyPK(scope, key)
	if err != nil {
		return false, fmt.Errorf("read idempotency key: %w", err)
	}
	item, err := s.getItem(ctx, pk, skIdempotency)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read idempotency key %s/%s: %w", scope, key, err)
	}
	until, err := getInt(item, attrUntilMs)
	if err != nil {
		return false, fmt.Errorf("read idempotency key %s/%s: %w", scope, key, err)
	}
	return until > now.UnixMilli() && getString(item, attrState) != statePending, nil
}
