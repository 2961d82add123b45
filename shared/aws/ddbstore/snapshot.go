package ddbstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Cluster snapshots (v1.ClusterSnapshot) arrive in parts. Each part is a
// blob in its own partition, "<c>#SNAPSHOT#<snapshotID>#PART#<n>"; a small
// marker item per part in "<c>#SNAPSHOT#<snapshotID>" records its arrival,
// so one query tells whether every part is in. The part that completes a
// snapshot makes it current by rewriting the pointer item "<c>#SNAPSHOT" /
// "CURRENT" (snapshot ID, part count, creation time), version-checked and
// only if no newer complete snapshot is current, so the newest snapshot
// wins whatever order parts and snapshots arrive in. Everything carries a
// deadline: a reader ignores a pointer older than SnapshotTTL, and TTL
// removes old snapshots.
const (
	kindSnapshotPart   = "SnapshotPart"
	kindSnapshotMarker = "SnapshotPartMarker"
	kindSnapshot       = "Snapshot"
	pkSnapshot         = "SNAPSHOT"
	skSnapshotCurrent  = "CURRENT"
	attrSnapshotID     = "snapshotID"
	attrParts          = "parts"
	attrCreatedAtMs    = "createdAtMs"
	// snapshotPartMargin keeps parts readable a while after the pointer
	// naming them expires.
	snapshotPartMargin = 10 * time.Minute
	// pointerAttempts bounds the version-checked pointer writes.
	pointerAttempts = 8
)

// SnapshotTTL is how long a snapshot stays current without a newer one.
// The forwarder re-posts its snapshot at least every 5 minutes, so a
// current snapshot is never older than that while the forwarder runs; an
// hour without one means the forwarder is gone and its view is stale.
const SnapshotTTL = time.Hour

// SnapshotPartResult says where a snapshot stands after one part.
type SnapshotPartResult struct {
	// Received is how many distinct parts of the snapshot are stored.
	Received int
	// Parts is how many parts the snapshot has.
	Parts int
	// Current is true when the snapshot is complete and is the current
	// one (now or already).
	Current bool
}

// PutSnapshotPart stores one part of a cluster snapshot at now and, when
// it completes the snapshot, makes the snapshot current unless a newer one
// (by CreatedAt, then snapshot ID) already is. Storing a part again is
// harmless. The part is stored as a blob (gzip, chunked), so any part the
// intake API accepts (up to 4 MiB of JSON) fits. Errors: ErrInvalid for a
// part whose IDs cannot form keys or whose part numbers are out of range,
// *ConflictError when the pointer kept changing under concurrent writers,
// and DynamoDB failures, wrapped.
func (s *Store) PutSnapshotPart(ctx context.Context, part *v1.ClusterSnapshot, now time.Time) (SnapshotPartResult, error) {
	if part == nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot part: nil: %w", ErrInvalid)
	}
	sid := part.SnapshotID
	if err := checkKeyPart("snapshot id", sid); err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot part: %w", err)
	}
	if part.Parts < 1 || part.Part < 0 || part.Part >= part.Parts {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d of %d: %w", sid, part.Part, part.Parts, ErrInvalid)
	}
	raw, err := json.Marshal(part)
	if err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d: encode: %w", sid, part.Part, err)
	}
	partsUntil := now.Add(SnapshotTTL + snapshotPartMargin)
	if err := s.putBlob(ctx, s.snapshotPartPK(sid, part.Part), kindSnapshotPart, raw, partsUntil); err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d: %w", sid, part.Part, err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: map[string]types.AttributeValue{
		attrPK:          str(s.pk(pkSnapshot, sid)),
		attrSK:          str(fmt.Sprintf("PART#%05d", part.Part)),
		attrKind:        str(kindSnapshotMarker),
		attrParts:       num(int64(part.Parts)),
		attrCreatedAtMs: num(part.CreatedAt.UnixMilli()),
		attrUntilMs:     num(partsUntil.UnixMilli()),
		attrExpiresAt:   num(ttlSeconds(partsUntil)),
	}})
	if err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d: marker: %w", sid, part.Part, err)
	}
	markers, err := s.queryPartition(ctx, s.pk(pkSnapshot, sid))
	if err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d: list parts: %w", sid, part.Part, err)
	}
	res := SnapshotPartResult{Received: len(markers), Parts: part.Parts}
	var createdMs int64
	for _, m := range markers {
		if c, err := getInt(m, attrCreatedAtMs); err == nil && c > createdMs {
			createdMs = c
		}
	}
	if res.Received < res.Parts {
		return res, nil
	}
	res.Current, err = s.makeCurrent(ctx, sid, part.Parts, createdMs, now)
	if err != nil {
		return res, fmt.Errorf("put snapshot %s: %w", sid, err)
	}
	return res, nil
}

func (s *Store) snapshotPartPK(sid string, part int) string {
	return s.pk(pkSnapshot, sid, "PART", strconv.Itoa(part))
}

// makeCurrent points the cluster's current snapshot at sid unless a newer
// unexpired one is current.
func (s *Store) makeCurrent(ctx context.Context, sid string, parts int, createdMs int64, now time.Time) (bool, error) {
	until := now.Add(SnapshotTTL)
	for range pointerAttempts {
		var version int64
		cur, err := s.getItem(ctx, s.pk(pkSnapshot), skSnapshotCurrent)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return false, fmt.Errorf("read current snapshot: %w", err)
		default:
			if version, err = getInt(cur, attrVersion); err != nil {
				return false, fmt.Errorf("read current snapshot: %w", err)
			}
			curSID := getString(cur, attrSnapshotID)
			curCreated, _ := getInt(cur, attrCreatedAtMs)
			curUntil, _ := getInt(cur, attrUntilMs)
			if curUntil > now.UnixMilli() && (curCreated > createdMs || (curCreated == createdMs && curSID >= sid)) {
				return curSID == sid, nil
			}
		}
		in := &dynamodb.PutItemInput{TableName: &s.table, Item: map[string]types.AttributeValue{
			attrPK:          str(s.pk(pkSnapshot)),
			attrSK:          str(skSnapshotCurrent),
			attrKind:        str(kindSnapshot),
			attrVersion:     num(version + 1),
			attrSnapshotID:  str(sid),
			attrParts:       num(int64(parts)),
			attrCreatedAtMs: num(createdMs),
			attrUntilMs:     num(until.UnixMilli()),
			attrExpiresAt:   num(ttlSeconds(until)),
		}}
		if version == 0 {
			in.ConditionExpression = strPtr("attribute_not_exists(#pk)")
			in.ExpressionAttributeNames = map[string]string{"#pk": attrPK}
		} else {
			in.ConditionExpression = strPtr("#ver = :expected")
			in.ExpressionAttributeNames = map[string]string{"#ver": attrVersion}
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":expected": num(version)}
		}
		_, err = s.api.PutItem(ctx, in)
		if isConditionFailed(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("write current snapshot: %w", err)
		}
		return true, nil
	}
	return false, &ConflictError{Kind: kindSnapshot, Name: sid}
}

// Snapshot is the cluster's current snapshot, its parts merged.
type Snapshot struct {
	// ID is the snapshot ID shared by its parts.
	ID string
	// CreatedAt is when the forwarder built it (its clock).
	CreatedAt time.Time
	// Version counts the snapshots made current, 1 for the first.
	Version              int64
	Nodes                []v1.NodeSummary
	Pods                 []v1.PodSummary
	PodDisruptionBudgets []v1.PDBSummary
	DaemonSets           []v1.DaemonSetSummary
	// ForeignNodeClaims are the cluster's NodeClaims nodewright did not
	// write (v1.ClusterSnapshot.ForeignNodeClaims), of every part.
	ForeignNodeClaims []v1.NodeClaim
	// KarpenterActive is the first part's non-empty
	// v1.ClusterSnapshot.KarpenterActive: Karpenter still runs.
	KarpenterActive string
}

// CurrentSnapshot returns the current snapshot with its parts merged in
// part order, or ErrNotFound when there is none, it is older than
// SnapshotTTL at now, or a part of it is gone. Reads are strongly
// consistent.
func (s *Store) CurrentSnapshot(ctx context.Context, now time.Time) (Snapshot, error) {
	cur, err := s.getItem(ctx, s.pk(pkSnapshot), skSnapshotCurrent)
	if err != nil {
		return Snapshot{}, fmt.Errorf("get current snapshot: %w", err)
	}
	until, err := getInt(cur, attrUntilMs)
	if err != nil {
		return Snapshot{}, fmt.Errorf("get current snapshot: %w", err)
	}
	if until <= now.UnixMilli() {
		return Snapshot{}, fmt.Errorf("get current snapshot: expired: %w", ErrNotFound)
	}
	parts, err := getInt(cur, attrParts)
	if err != nil {
		return Snapshot{}, fmt.Errorf("get current snapshot: %w", err)
	}
	version, err := getInt(cur, attrVersion)
	if err != nil {
		return Snapshot{}, fmt.Errorf("get current snapshot: %w", err)
	}
	createdMs, _ := getInt(cur, attrCreatedAtMs)
	snap := Snapshot{ID: getString(cur, attrSnapshotID), CreatedAt: time.UnixMilli(createdMs).UTC(), Version: version}
	for i := range int(parts) {
		raw, err := s.getBlob(ctx, s.snapshotPartPK(snap.ID, i), now)
		if err != nil {
			return Snapshot{}, fmt.Errorf("get snapshot %s part %d: %w", snap.ID, i, err)
		}
		var p v1.ClusterSnapshot
		if err := json.Unmarshal(raw, &p); err != nil {
			return Snapshot{}, fmt.Errorf("get snapshot %s part %d: decode: %w", snap.ID, i, err)
		}
		snap.Nodes = append(snap.Nodes, p.Nodes...)
		snap.Pods = append(snap.Pods, p.Pods...)
		snap.PodDisruptionBudgets = append(snap.PodDisruptionBudgets, p.PodDisruptionBudgets...)
		snap.DaemonSets = append(snap.DaemonSets, p.DaemonSets...)
		snap.ForeignNodeClaims = append(snap.ForeignNodeClaims, p.ForeignNodeClaims...)
		if snap.KarpenterActive == "" {
			snap.KarpenterActive = p.KarpenterActive
		}
	}
	return snap, nil
}
