package ddbstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

const (
	// pkNodeClassStatus is the partition of resolved EC2NodeClass status,
	// after "<cluster>#"; the sort key is the class name.
	pkNodeClassStatus   = "NODECLASSSTATUS"
	kindNodeClassStatus = "NodeClassStatus"
)

// PutNodeClassStatus records what a Lambda resolved for one EC2NodeClass
// (served to the forwarder by GET v1.RouteNodeClasses, which writes it to
// the class's status subresource). It writes only a change: the item's
// hash covers the name, UID, generation and status but not ChangedAt, and
// the stored item is read first (one strongly consistent GetItem), so
// recording the same resolution again writes nothing (DynamoDB bills a
// failed conditional write like a write) and changed reports false; the
// write itself is conditional on the hash, so a concurrent writer of the
// same resolution is a failed condition, not a second write. Errors: an
// empty or malformed name (ErrInvalid), an item over MaxBodyBytes
// (ErrItemTooLarge), or the GetItem or PutItem error, wrapped.
func (s *Store) PutNodeClassStatus(ctx context.Context, rec v1.NodeClassStatus) (changed bool, err error) {
	if err := checkKeyPart("node class name", rec.Name); err != nil {
		return false, fmt.Errorf("put node class status: %w", err)
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("put node class status %s: encode: %w", rec.Name, err)
	}
	if len(body) > MaxBodyBytes {
		return false, fmt.Errorf("put node class status %s: %d bytes: %w", rec.Name, len(body), ErrItemTooLarge)
	}
	hash, err := nodeClassStatusHash(rec)
	if err != nil {
		return false, fmt.Errorf("put node class status %s: %w", rec.Name, err)
	}
	stored, err := s.getItem(ctx, s.pk(pkNodeClassStatus), rec.Name)
	switch {
	case err == nil && getString(stored, attrHash) == hash:
		return false, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return false, fmt.Errorf("put node class status %s: %w", rec.Name, err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			attrPK:   str(s.pk(pkNodeClassStatus)),
			attrSK:   str(rec.Name),
			attrKind: str(kindNodeClassStatus),
			attrHash: str(hash),
			attrBody: str(string(body)),
		},
		ConditionExpression:       strPtr("attribute_not_exists(#pk) OR #hash <> :hash"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#hash": attrHash},
		ExpressionAttributeValues: map[string]types.AttributeValue{":hash": str(hash)},
	})
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("put node class status %s: %w", rec.Name, err)
	}
	return true, nil
}

// nodeClassStatusHash is the SHA-256 of rec without ChangedAt, hex.
func nodeClassStatusHash(rec v1.NodeClassStatus) (string, error) {
	st, err := json.Marshal(rec.Status)
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(strings.Join([]string{rec.Name, string(rec.UID), strconv.FormatInt(rec.Generation, 10), string(st)}, "\x00")))
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ListNodeClassStatuses returns every recorded EC2NodeClass resolution,
// sorted by name. The read is strongly consistent.
func (s *Store) ListNodeClassStatuses(ctx context.Context) ([]v1.NodeClassStatus, error) {
	items, err := s.queryPartition(ctx, s.pk(pkNodeClassStatus))
	if err != nil {
		return nil, fmt.Errorf("list node class status: %w", err)
	}
	return decodeNodeClassStatuses(items)
}

// ListNodeClassStatusesPage returns up to limit resolutions sorted by class
// name, those after the name after ("" for the first page), and whether
// more may follow; paged as ListNodeClaimsPage is. limit must be positive.
func (s *Store) ListNodeClassStatusesPage(ctx context.Context, after string, limit int) ([]v1.NodeClassStatus, bool, error) {
	pk := s.pk(pkNodeClassStatus)
	items, more, err := s.queryPage(ctx, s.partitionQuery(pk), pk, after, limit)
	if err != nil {
		return nil, false, fmt.Errorf("list node class status: %w", err)
	}
	out, err := decodeNodeClassStatuses(items)
	return out, more, err
}

// decodeNodeClassStatuses decodes items of the NodeClassStatus partition,
// sorted by class name (the sort key).
func decodeNodeClassStatuses(items []map[string]types.AttributeValue) ([]v1.NodeClassStatus, error) {
	out := []v1.NodeClassStatus{}
	for _, item := range items {
		var rec v1.NodeClassStatus
		if err := json.Unmarshal([]byte(getString(item, attrBody)), &rec); err != nil {
			return nil, fmt.Errorf("list node class status: %s: decode: %w", getString(item, attrSK), err)
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b v1.NodeClassStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
