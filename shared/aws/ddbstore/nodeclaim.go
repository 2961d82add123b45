package ddbstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

const kindNodeClaim = "NodeClaim"

// The store owns metadata.resourceVersion of the NodeClaims it returns: it is
// the decimal form of the item's version attribute (1 after creation, +1 per
// update), the same optimistic-concurrency contract as a Kubernetes
// resourceVersion. It is not part of the stored JSON body.
//
// Every NodeClaim write (PutNodeClaim, UpdateNodeClaim, DeleteNodeClaim)
// also raises the cluster's NodeClaim generation (NodeClaimGeneration), in
// the same TransactWriteItems: the claim's change and the generation that
// counts it become visible together or not at all.

// PutNodeClaim creates claim. It is create-only (condition
// attribute_not_exists(pk)): it returns ErrAlreadyExists if a NodeClaim of
// that name exists, so a retried provisioner that derives names from its
// input writes each NodeClaim once. claim.Name must be set and
// claim.ResourceVersion must be empty. It returns the stored claim with
// ResourceVersion "1".
func (s *Store) PutNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error) {
	if claim.ResourceVersion != "" {
		return v1.NodeClaim{}, fmt.Errorf("create nodeclaim %s: resourceVersion %q must be empty: %w", claim.Name, claim.ResourceVersion, ErrInvalid)
	}
	item, err := s.nodeClaimItem(claim, 1)
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("create nodeclaim %s: %w", claim.Name, err)
	}
	err = s.writeNodeClaim(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName:                &s.table,
		Item:                     item,
		ConditionExpression:      strPtr("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	}})
	if claimConditionFailed(err) {
		return v1.NodeClaim{}, fmt.Errorf("create nodeclaim %s: %w", claim.Name, ErrAlreadyExists)
	}
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("create nodeclaim %s: %w", claim.Name, err)
	}
	claim.ResourceVersion = "1"
	return claim, nil
}

// UpdateNodeClaim replaces the whole stored claim if its version is still
// claim.ResourceVersion and, when claim.UID is set, its UID is claim.UID
// (condition version = :expected AND uid = :uid). It returns a
// *ConflictError if the stored claim differs, ErrNotFound if it is gone,
// ErrItemTooLarge if its JSON exceeds MaxBodyBytes, and otherwise the stored
// claim with the next ResourceVersion.
func (s *Store) UpdateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error) {
	expected, err := parseResourceVersion(claim.ResourceVersion)
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %w", claim.Name, err)
	}
	item, err := s.nodeClaimItem(claim, expected+1)
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %w", claim.Name, err)
	}
	cond, names, values := versionCondition(expected, string(claim.UID))
	err = s.writeNodeClaim(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName:                 &s.table,
		Item:                      item,
		ConditionExpression:       &cond,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}})
	if claimConditionFailed(err) {
		return v1.NodeClaim{}, s.nodeClaimConditionError(ctx, "update", claim.Name, expected)
	}
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %w", claim.Name, err)
	}
	claim.ResourceVersion = strconv.FormatInt(expected+1, 10)
	return claim, nil
}

// DeleteNodeClaim deletes claim if the stored one still has claim's
// ResourceVersion (and UID, when claim.UID is set). It returns ErrNotFound
// if it is already gone (callers that only want it gone can ignore that)
// and a *ConflictError if it changed since it was read.
func (s *Store) DeleteNodeClaim(ctx context.Context, claim v1.NodeClaim) error {
	if err := checkKeyPart("nodeclaim name", claim.Name); err != nil {
		return fmt.Errorf("delete nodeclaim: %w", err)
	}
	expected, err := parseResourceVersion(claim.ResourceVersion)
	if err != nil {
		return fmt.Errorf("delete nodeclaim %s: %w", claim.Name, err)
	}
	cond, names, values := versionCondition(expected, string(claim.UID))
	err = s.writeNodeClaim(ctx, types.TransactWriteItem{Delete: &types.Delete{
		TableName:                 &s.table,
		Key:                       itemKey(s.pk(pkNodeClaim), claim.Name),
		ConditionExpression:       &cond,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}})
	if claimConditionFailed(err) {
		return s.nodeClaimConditionError(ctx, "delete", claim.Name, expected)
	}
	if err != nil {
		return fmt.Errorf("delete nodeclaim %s: %w", claim.Name, err)
	}
	return nil
}

// putIfVersion makes in an optimistic write at version: the item must not
// exist when version is 0, else its version attribute must equal version
// (the write fails with ConditionalCheckFailedException otherwise).
func putIfVersion(in *dynamodb.PutItemInput, version int64) {
	if version == 0 {
		in.ConditionExpression = strPtr("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": attrPK}
		return
	}
	in.ConditionExpression = strPtr("#ver = :expected")
	in.ExpressionAttributeNames = map[string]string{"#ver": attrVersion}
	in.ExpressionAttributeValues = map[string]types.AttributeValue{":expected": num(version)}
}

// putIfExpired makes in a write that succeeds only when no unexpired item
// holds its key at now: absent, or its untilMs at or before now (an
// expired item DynamoDB's TTL has not deleted yet counts as absent); the
// write fails with ConditionalCheckFailedException otherwise.
func putIfExpired(in *dynamodb.PutItemInput, now time.Time) {
	in.ConditionExpression = strPtr("attribute_not_exists(#pk) OR #until <= :now")
	in.ExpressionAttributeNames = map[string]string{"#pk": attrPK, "#until": attrUntilMs}
	in.ExpressionAttributeValues = map[string]types.AttributeValue{":now": num(now.UnixMilli())}
}

// versionCondition is "version = :expected", plus "AND uid = :uid" when uid
// is set. Versions restart at 1 when a name is deleted and created again;
// the UID check keeps a writer holding the old incarnation from passing the
// version check of the new one.
func versionCondition(expected int64, uid string) (string, map[string]string, map[string]types.AttributeValue) {
	cond := "#ver = :expected"
	names := map[string]string{"#ver": attrVersion}
	values := map[string]types.AttributeValue{":expected": num(expected)}
	if uid != "" {
		cond += " AND #uid = :uid"
		names["#uid"] = attrUID
		values[":uid"] = str(uid)
	}
	return cond, names, values
}

// GetNodeClaim returns the claim name, read with strong consistency, or
// ErrNotFound.
func (s *Store) GetNodeClaim(ctx context.Context, name string) (v1.NodeClaim, error) {
	if err := checkKeyPart("nodeclaim name", name); err != nil {
		return v1.NodeClaim{}, fmt.Errorf("get nodeclaim: %w", err)
	}
	item, err := s.getItem(ctx, s.pk(pkNodeClaim), name)
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("get nodeclaim %s: %w", name, err)
	}
	claim, err := decodeNodeClaim(item)
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("get nodeclaim %s: %w", name, err)
	}
	return claim, nil
}

// ListNodeClaims returns every NodeClaim of the cluster sorted by name, read
// with strong consistency from the cluster's NodeClaim partition (so a claim
// written before the call is always included: the provisioner relies on this
// to count in-flight capacity). A store made WithNodeClaimCache keeps that
// contract and reads the partition only when the NodeClaim generation moved
// since its last list.
func (s *Store) ListNodeClaims(ctx context.Context) ([]v1.NodeClaim, error) {
	var items []map[string]types.AttributeValue
	var err error
	if s.claims != nil {
		items, err = s.claims.list(ctx, s)
	} else {
		items, err = s.queryPartition(ctx, s.pk(pkNodeClaim))
	}
	if err != nil {
		return nil, fmt.Errorf("list nodeclaims: %w", err)
	}
	claims, err := decodeNodeClaims(items)
	if err != nil {
		return nil, fmt.Errorf("list nodeclaims: %w", err)
	}
	return claims, nil
}

// ListNodeClaimsPage returns up to limit NodeClaims sorted by name, those
// after the name after ("" for the first page), read with strong
// consistency, and whether more may follow (a last page may come out empty).
// Paging by name means a NodeClaim that exists for the whole listing is
// returned exactly once; one created or deleted meanwhile may or may not be.
// limit must be positive (else ErrInvalid).
func (s *Store) ListNodeClaimsPage(ctx context.Context, after string, limit int) ([]v1.NodeClaim, bool, error) {
	pk := s.pk(pkNodeClaim)
	if after == "" {
		// The generation item sorts before every NodeClaim name.
		after = skGeneration
	}
	items, more, err := s.queryPage(ctx, s.partitionQuery(pk), pk, after, limit)
	if err != nil {
		return nil, false, fmt.Errorf("list nodeclaims: %w", err)
	}
	claims, err := decodeNodeClaims(items)
	if err != nil {
		return nil, false, fmt.Errorf("list nodeclaims: %w", err)
	}
	return claims, more, nil
}

// ListNodeClaimsByNodePool returns the NodeClaims labelled
// karpenter.sh/nodepool=nodePool, sorted by name, through the byNodePool
// index. Index reads are eventually consistent: a claim written a moment ago
// (typically under a second) may be missing or stale. Use ListNodeClaims
// when that matters.
func (s *Store) ListNodeClaimsByNodePool(ctx context.Context, nodePool string) ([]v1.NodeClaim, error) {
	if err := checkKeyPart("nodepool name", nodePool); err != nil {
		return nil, fmt.Errorf("list nodeclaims by nodepool: %w", err)
	}
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 strPtr(IndexByNodePool),
		KeyConditionExpression:    strPtr("#npk = :npk"),
		ExpressionAttributeNames:  map[string]string{"#npk": attrNodePoolKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":npk": str(s.cluster + "#" + nodePool)},
	})
	if err != nil {
		return nil, fmt.Errorf("list nodeclaims of nodepool %s: %w", nodePool, err)
	}
	claims, err := decodeNodeClaims(items)
	if err != nil {
		return nil, fmt.Errorf("list nodeclaims of nodepool %s: %w", nodePool, err)
	}
	return claims, nil
}

// FindByInstanceID returns the NodeClaim whose status.providerID names the
// EC2 instance id (e.g. "i-0123456789abcdef0"). It looks the name up in the
// byInstance index, then reads the claim with strong consistency, so the
// result carries the current ResourceVersion. It returns ErrNotFound if no
// claim has that instance, and an error if several do (corrupt state).
func (s *Store) FindByInstanceID(ctx context.Context, instanceID string) (v1.NodeClaim, error) {
	if err := checkKeyPart("instance id", instanceID); err != nil {
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by instance: %w", err)
	}
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 strPtr(IndexByInstance),
		KeyConditionExpression:    strPtr("#ik = :ik"),
		ExpressionAttributeNames:  map[string]string{"#ik": attrInstanceKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":ik": str(s.cluster + "#" + instanceID)},
	})
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by instance %s: %w", instanceID, err)
	}
	switch len(items) {
	case 0:
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by instance %s: %w", instanceID, ErrNotFound)
	case 1:
	default:
		names := make([]string, 0, len(items))
		for _, it := range items {
			names = append(names, getString(it, attrSK))
		}
		sort.Strings(names)
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by instance %s: %d nodeclaims claim it: %s", instanceID, len(items), strings.Join(names, ", "))
	}
	claim, err := s.GetNodeClaim(ctx, getString(items[0], attrSK))
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by instance %s: %w", instanceID, err)
	}
	// The index is eventually consistent: the claim may have moved on.
	if id, _ := InstanceIDFromProviderID(claim.Status.ProviderID); id != instanceID {
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by instance %s: %w", instanceID, ErrNotFound)
	}
	return claim, nil
}

// FindByProviderID returns the NodeClaim whose status.providerID equals
// providerID ("aws:///<zone>/<instance-id>"), as FindByInstanceID does.
func (s *Store) FindByProviderID(ctx context.Context, providerID string) (v1.NodeClaim, error) {
	id, err := InstanceIDFromProviderID(providerID)
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by providerID: %w", err)
	}
	claim, err := s.FindByInstanceID(ctx, id)
	if err != nil {
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by providerID %s: %w", providerID, err)
	}
	if claim.Status.ProviderID != providerID {
		return v1.NodeClaim{}, fmt.Errorf("find nodeclaim by providerID %s: %w", providerID, ErrNotFound)
	}
	return claim, nil
}

// InstanceIDFromProviderID returns the EC2 instance id of an AWS providerID
// as v1.ParseProviderID reads it, e.g. "aws:///us-east-1a/i-0123" ->
// "i-0123". Any other form is an error wrapping ErrInvalid (and
// v1.ErrInvalidProviderID).
func InstanceIDFromProviderID(providerID string) (string, error) {
	_, id, err := v1.ParseProviderID(providerID)
	if err != nil {
		return "", fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return id, nil
}

func parseResourceVersion(rv string) (int64, error) {
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("resourceVersion %q: want the version read from the store: %w", rv, ErrInvalid)
	}
	return v, nil
}

// nodeClaimConditionError classifies a failed version condition: the claim
// is gone (ErrNotFound) or was changed (*ConflictError). DynamoDB reports
// both as ConditionalCheckFailed, so it reads the item to tell them apart.
func (s *Store) nodeClaimConditionError(ctx context.Context, op, name string, expected int64) error {
	_, err := s.getItem(ctx, s.pk(pkNodeClaim), name)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%s nodeclaim %s: %w", op, name, ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s nodeclaim %s: classify condition failure: %w", op, name, err)
	}
	return fmt.Errorf("%s nodeclaim %s: %w", op, name, &ConflictError{Kind: kindNodeClaim, Name: name, Version: expected})
}

// nodeClaimItem encodes claim at version. The JSON body omits
// resourceVersion; the key and index attributes are derived from the claim.
func (s *Store) nodeClaimItem(claim v1.NodeClaim, version int64) (map[string]types.AttributeValue, error) {
	if err := checkKeyPart("nodeclaim name", claim.Name); err != nil {
		return nil, err
	}
	claim.ResourceVersion = ""
	body, err := json.Marshal(claim)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("%d bytes of JSON, at most %d: %w", len(body), MaxBodyBytes, ErrItemTooLarge)
	}
	// Stored gzip-compressed: every NodeClaim list reads every claim, and
	// DynamoDB bills reads and writes by the item's size (a NodeClaim's
	// JSON compresses about 3 to 1).
	z, err := gzipBytes(body)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	item := map[string]types.AttributeValue{
		attrPK:      str(s.pk(pkNodeClaim)),
		attrSK:      str(claim.Name),
		attrKind:    str(kindNodeClaim),
		attrVersion: num(version),
		attrBody:    &types.AttributeValueMemberB{Value: z},
	}
	if claim.UID != "" {
		item[attrUID] = str(string(claim.UID))
	}
	if pool := claim.Labels[v1.LabelNodePool]; pool != "" {
		if err := checkKeyPart("label "+v1.LabelNodePool, pool); err != nil {
			return nil, err
		}
		item[attrNodePool] = str(pool)
		item[attrNodePoolKey] = str(s.cluster + "#" + pool)
	}
	if pid := claim.Status.ProviderID; pid != "" {
		id, err := InstanceIDFromProviderID(pid)
		if err != nil {
			return nil, fmt.Errorf("status.providerID: %w", err)
		}
		item[attrProviderID] = str(pid)
		item[attrInstanceKey] = str(s.cluster + "#" + id)
	}
	return item, nil
}

func decodeNodeClaim(item map[string]types.AttributeValue) (v1.NodeClaim, error) {
	version, err := getInt(item, attrVersion)
	if err != nil {
		return v1.NodeClaim{}, err
	}
	// The body is gzip-compressed JSON (binary); a claim written before
	// bodies were compressed holds its JSON as a string.
	var raw []byte
	switch b := item[attrBody].(type) {
	case *types.AttributeValueMemberB:
		if raw, err = gunzip(b.Value, MaxBodyBytes); err != nil {
			return v1.NodeClaim{}, fmt.Errorf("decode nodeclaim %s: %w", getString(item, attrSK), err)
		}
	case *types.AttributeValueMemberS:
		raw = []byte(b.Value)
	default:
		return v1.NodeClaim{}, fmt.Errorf("decode nodeclaim %s: attribute body missing or neither binary nor string", getString(item, attrSK))
	}
	var claim v1.NodeClaim
	if err := json.Unmarshal(raw, &claim); err != nil {
		return v1.NodeClaim{}, fmt.Errorf("decode nodeclaim %s: %w", getString(item, attrSK), err)
	}
	claim.ResourceVersion = strconv.FormatInt(version, 10)
	return claim, nil
}

func decodeNodeClaims(items []map[string]types.AttributeValue) ([]v1.NodeClaim, error) {
	claims := make([]v1.NodeClaim, 0, len(items))
	for _, item := range items {
		if isGenerationItem(item) {
			continue
		}
		c, err := decodeNodeClaim(item)
		if err != nil {
			return nil, err
		}
		claims = append(claims, c)
	}
	// Query returns sort-key order already; sorting keeps the contract
	// independent of the index's sort key.
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	return claims, nil
}
