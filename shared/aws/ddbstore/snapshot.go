package ddbstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// wins whatever order parts and snapshots arrive in. A snapshot of one
// part (most: a part holds up to 4 MiB of JSON) needs no marker: its blob
// is "<c>#SNAPSHOT#<snapshotID>#WHOLE", apart from any part of a
// multi-part snapshot that reuses its ID, and its pointer says so
// (attrWhole). Everything carries a deadline: a reader ignores a pointer
// older than SnapshotTTL, and TTL removes old snapshots.
const (
	kindSnapshotPart   = "SnapshotPart"
	kindSnapshotMarker = "SnapshotPartMarker"
	kindSnapshot       = "Snapshot"
	pkSnapshot         = "SNAPSHOT"
	skSnapshotCurrent  = "CURRENT"
	attrSnapshotID     = "snapshotID"
	attrParts          = "parts"
	attrCreatedAtMs    = "createdAtMs"
	attrNodeHashes     = "nodeHashes"
	// attrWhole marks a pointer to a one-part snapshot's blob
	// (snapshotWholePK).
	attrWhole = "whole"
	// nodeHashBytes is the length of one node-name hash in a marker.
	nodeHashBytes = 8
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
// part whose IDs cannot form keys or whose part numbers are out of range, a
// *v1.ValidationError (nothing stored) for a part that disagrees with the
// snapshot's parts already stored (another part count, or a node another
// part lists; a snapshot of one part has no parts to disagree with, see
// putWholeSnapshot), an error (the snapshot not made current) when parts that
// raced past each other's checks disagree,
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
	if part.Parts == 1 {
		return s.putWholeSnapshot(ctx, part, raw, partsUntil, now)
	}
	markers, err := s.queryPartition(ctx, s.pk(pkSnapshot, sid))
	if err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d: list parts: %w", sid, part.Part, err)
	}
	hashes := nodeHashes(part.Nodes)
	if fields := partDisagreements(part, hashes, markers); len(fields) > 0 {
		return SnapshotPartResult{}, &v1.ValidationError{Kind: v1.KindClusterSnapshot, Name: part.ID, Fields: fields}
	}
	if err := s.putBlob(ctx, s.snapshotPartPK(sid, part.Part), kindSnapshotPart, raw, partsUntil); err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d: %w", sid, part.Part, err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: map[string]types.AttributeValue{
		attrPK:          str(s.pk(pkSnapshot, sid)),
		attrSK:          str(fmt.Sprintf("PART#%05d", part.Part)),
		attrKind:        str(kindSnapshotMarker),
		attrParts:       num(int64(part.Parts)),
		attrCreatedAtMs: num(part.CreatedAt.UnixMilli()),
		attrNodeHashes:  &types.AttributeValueMemberB{Value: hashes},
		attrUntilMs:     num(partsUntil.UnixMilli()),
		attrExpiresAt:   num(ttlSeconds(partsUntil)),
	}})
	if err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d: marker: %w", sid, part.Part, err)
	}
	markers, err = s.queryPartition(ctx, s.pk(pkSnapshot, sid))
	if err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s part %d: list parts: %w", sid, part.Part, err)
	}
	res := SnapshotPartResult{Received: len(markers), Parts: part.Parts}
	if res.Received >= res.Parts {
		// Parts that raced past each other's checks are caught here: a
		// snapshot whose parts disagree never becomes current.
		if fields := partDisagreements(part, hashes, markers); len(fields) > 0 {
			return res, fmt.Errorf("put snapshot %s: its parts disagree (%s); it is not made current", sid, fields[0].Message)
		}
	}
	var createdMs int64
	for _, m := range markers {
		if c, err := getInt(m, attrCreatedAtMs); err == nil && c > createdMs {
			createdMs = c
		}
	}
	if res.Received < res.Parts {
		return res, nil
	}
	res.Current, err = s.makeCurrent(ctx, sid, part.Parts, false, createdMs, now)
	if err != nil {
		return res, fmt.Errorf("put snapshot %s: %w", sid, err)
	}
	return res, nil
}

// putWholeSnapshot is PutSnapshotPart for a snapshot of one part (raw, its
// JSON, kept until): its blob and the pointer, no marker (nothing to check
// it against, nothing to wait for). Its blob's partition is not a part's,
// so a multi-part snapshot reusing the ID cannot mix with it: each pointer
// names blobs of one post.
func (s *Store) putWholeSnapshot(ctx context.Context, part *v1.ClusterSnapshot, raw []byte, until, now time.Time) (SnapshotPartResult, error) {
	sid := part.SnapshotID
	if err := s.putBlob(ctx, s.snapshotWholePK(sid), kindSnapshotPart, raw, until); err != nil {
		return SnapshotPartResult{}, fmt.Errorf("put snapshot %s: %w", sid, err)
	}
	var err error
	res := SnapshotPartResult{Received: 1, Parts: 1}
	res.Current, err = s.makeCurrent(ctx, sid, 1, true, part.CreatedAt.UnixMilli(), now)
	if err != nil {
		return res, fmt.Errorf("put snapshot %s: %w", sid, err)
	}
	return res, nil
}

// nodeHashes is the first nodeHashBytes of the SHA-256 of each node's name,
// concatenated: what a part's marker records so that later parts can be
// checked against it (5,000 nodes take 40 KB).
func nodeHashes(nodes []v1.NodeSummary) []byte {
	out := make([]byte, 0, len(nodes)*nodeHashBytes)
	for _, n := range nodes {
		sum := sha256.Sum256([]byte(n.Name))
		out = append(out, sum[:nodeHashBytes]...)
	}
	return out
}

// partDisagreements checks part (whose node hashes are hashes) against the
// markers of the snapshot's other parts: every part must name the same
// number of parts, and no node may be in two parts. It returns the fields
// at fault, empty when the part agrees. A marker of the part's own number is
// its earlier copy and is skipped.
func partDisagreements(part *v1.ClusterSnapshot, hashes []byte, markers []map[string]types.AttributeValue) []v1.FieldError {
	own := fmt.Sprintf("PART#%05d", part.Part)
	index := make(map[string]int, len(part.Nodes))
	for i := range part.Nodes {
		index[string(hashes[i*nodeHashBytes:(i+1)*nodeHashBytes])] = i
	}
	var fields []v1.FieldError
	for _, m := range markers {
		sk := getString(m, attrSK)
		if sk == own {
			continue
		}
		other, _ := strconv.Atoi(strings.TrimPrefix(sk, "PART#"))
		if parts, err := getInt(m, attrParts); err == nil && parts != int64(part.Parts) {
			fields = append(fields, v1.FieldError{Path: "parts", Message: fmt.Sprintf("%d, but part %d of snapshot %s says %d", part.Parts, other, part.SnapshotID, parts)})
		}
		b, _ := m[attrNodeHashes].(*types.AttributeValueMemberB)
		if b == nil {
			continue
		}
		for off := 0; off+nodeHashBytes <= len(b.Value); off += nodeHashBytes {
			if i, dup := index[string(b.Value[off:off+nodeHashBytes])]; dup {
				fields = append(fields, v1.FieldError{Path: fmt.Sprintf("nodes[%d].name", i), Message: fmt.Sprintf("node %q is also in part %d of snapshot %s", part.Nodes[i].Name, other, part.SnapshotID)})
			}
		}
	}
	return fields
}

func (s *Store) snapshotPartPK(sid string, part int) string {
	return s.pk(pkSnapshot, sid, "PART", strconv.Itoa(part))
}

// snapshotWholePK is the blob partition of a one-part snapshot.
func (s *Store) snapshotWholePK(sid string) string {
	return s.pk(pkSnapshot, sid, "WHOLE")
}

// makeCurrent points the cluster's current snapshot at sid (its blob at
// snapshotWholePK when whole, else its parts) unless a newer unexpired
// one is current.
func (s *Store) makeCurrent(ctx context.Context, sid string, parts int, whole bool, createdMs int64, now time.Time) (bool, error) {
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
		if whole {
			in.Item[attrWhole] = &types.AttributeValueMemberBOOL{Value: true}
		}
		putIfVersion(in, version)
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
	// CSINodes and Volumes are every part's (v1.ClusterSnapshot.CSINodes
	// and .Volumes): the nodes' CSI attach limits and the storage objects
	// the bound pods name.
	CSINodes []v1.CSINodeSummary
	Volumes  v1.VolumeObjects
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
	whole, _ := cur[attrWhole].(*types.AttributeValueMemberBOOL)
	for i := range int(parts) {
		pk := s.snapshotPartPK(snap.ID, i)
		if whole != nil && whole.Value {
			pk = s.snapshotWholePK(snap.ID)
		}
		raw, err := s.getBlob(ctx, pk, now)
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
		snap.CSINodes = append(snap.CSINodes, p.CSINodes...)
		snap.Volumes.Claims = append(snap.Volumes.Claims, p.Volumes.Claims...)
		snap.Volumes.PersistentVolumes = append(snap.Volumes.PersistentVolumes, p.Volumes.PersistentVolumes...)
		snap.Volumes.StorageClasses = append(snap.Volumes.StorageClasses, p.Volumes.StorageClasses...)
		if snap.KarpenterActive == "" {
			snap.KarpenterActive = p.KarpenterActive
		}
	}
	return snap, nil
}
