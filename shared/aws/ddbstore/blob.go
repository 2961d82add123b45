package ddbstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Blobs are byte strings larger than one item may hold: batch results,
// claim-checked queue payloads and cluster-snapshot parts. A blob lives in
// a partition of its own, gzip-compressed: in its head item when the
// compressed bytes fit MaxBodyBytes, else in chunk items written first and
// a head item, written last, that names them. Chunk sort keys carry a
// content hash, so a reader that read a head always finds that head's
// chunks, and rewriting a blob never mixes old and new chunks. Every item
// of a blob carries the blob's deadline (untilMs, expiresAt): readers treat
// an expired head as absent, and DynamoDB's TTL removes superseded chunks.
const (
	skBlobHead        = "HEAD"
	skBlobChunkPrefix = "CHUNK#"
	attrChunks        = "chunks"
	// MaxBlobChunks bounds the chunks of one blob: 24 MiB compressed.
	MaxBlobChunks = 64
	// maxBlobBytes bounds what a reader inflates one blob to.
	maxBlobBytes = 256 << 20
)

// putBlob stores raw under partition pk until until, replacing any blob
// there. It returns ErrItemTooLarge when the compressed bytes need more
// than MaxBlobChunks chunks.
func (s *Store) putBlob(ctx context.Context, pk, kind string, raw []byte, until time.Time) error {
	return s.writeBlob(ctx, pk, kind, raw, until, time.Time{})
}

// writeBlob is putBlob; with a non-zero absentAt, the head is written only
// if pk holds no blob unexpired at absentAt, else the error is DynamoDB's
// ConditionalCheckFailedException (isConditionFailed).
func (s *Store) writeBlob(ctx context.Context, pk, kind string, raw []byte, until, absentAt time.Time) error {
	z, err := gzipBytes(raw)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:16])
	head := map[string]types.AttributeValue{
		attrPK:        str(pk),
		attrSK:        str(skBlobHead),
		attrKind:      str(kind),
		attrHash:      str(hash),
		attrUntilMs:   num(until.UnixMilli()),
		attrExpiresAt: num(ttlSeconds(until)),
	}
	if len(z) <= MaxBodyBytes {
		head[attrBody] = &types.AttributeValueMemberB{Value: z}
		head[attrChunks] = num(0)
	} else {
		n := (len(z) + MaxBodyBytes - 1) / MaxBodyBytes
		if n > MaxBlobChunks {
			return fmt.Errorf("%d bytes compressed need %d chunks, at most %d: %w", len(z), n, MaxBlobChunks, ErrItemTooLarge)
		}
		for i := range n {
			chunk := z[i*MaxBodyBytes : min(len(z), (i+1)*MaxBodyBytes)]
			_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: map[string]types.AttributeValue{
				attrPK:        str(pk),
				attrSK:        str(chunkKey(hash, i)),
				attrKind:      str(kind),
				attrBody:      &types.AttributeValueMemberB{Value: chunk},
				attrUntilMs:   num(until.UnixMilli()),
				attrExpiresAt: num(ttlSeconds(until)),
			}})
			if err != nil {
				return fmt.Errorf("put chunk %d of %d: %w", i, n, err)
			}
		}
		head[attrChunks] = num(int64(n))
	}
	in := &dynamodb.PutItemInput{TableName: &s.table, Item: head}
	if !absentAt.IsZero() {
		putIfExpired(in, absentAt)
	}
	if _, err := s.api.PutItem(ctx, in); err != nil {
		return err
	}
	return nil
}

func chunkKey(hash string, i int) string {
	return skBlobChunkPrefix + hash + "#" + fmt.Sprintf("%04d", i)
}

// getBlob returns the blob in partition pk, or ErrNotFound when there is
// none or it expired at now. Reads are strongly consistent.
func (s *Store) getBlob(ctx context.Context, pk string, now time.Time) ([]byte, error) {
	head, err := s.getItem(ctx, pk, skBlobHead)
	if err != nil {
		return nil, err
	}
	untilMs, err := getInt(head, attrUntilMs)
	if err != nil {
		return nil, err
	}
	if untilMs <= now.UnixMilli() {
		return nil, ErrNotFound
	}
	n, err := getInt(head, attrChunks)
	if err != nil {
		return nil, err
	}
	hash := getString(head, attrHash)
	var z []byte
	if n == 0 {
		b, ok := head[attrBody].(*types.AttributeValueMemberB)
		if !ok {
			return nil, errors.New("attribute body: missing or not binary")
		}
		z = b.Value
	} else {
		items, err := s.queryAll(ctx, &dynamodb.QueryInput{
			TableName:                 &s.table,
			KeyConditionExpression:    strPtr("#pk = :pk AND begins_with(#sk, :prefix)"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":prefix": str(skBlobChunkPrefix + hash + "#")},
			ConsistentRead:            boolPtr(true),
		})
		if err != nil {
			return nil, fmt.Errorf("read chunks: %w", err)
		}
		if int64(len(items)) != n {
			return nil, fmt.Errorf("read chunks: found %d of %d", len(items), n)
		}
		for i, it := range items {
			if getString(it, attrSK) != chunkKey(hash, i) {
				return nil, fmt.Errorf("read chunks: chunk %d is %q", i, getString(it, attrSK))
			}
			b, ok := it[attrBody].(*types.AttributeValueMemberB)
			if !ok {
				return nil, fmt.Errorf("chunk %d: attribute body missing or not binary", i)
			}
			z = append(z, b.Value...)
		}
	}
	raw, err := gunzip(z, maxBlobBytes)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:16]) != hash {
		return nil, errors.New("blob content does not match its hash")
	}
	return raw, nil
}

func gunzip(z []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("decompress: more than %d bytes", limit)
	}
	return raw, nil
}
