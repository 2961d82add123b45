package ddbstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

const (
	kindConfig = "Config"
	skConfig   = "CURRENT"
	// maxConfigJSON bounds the decompressed snapshot a reader accepts.
	maxConfigJSON = 64 << 20
)

// Config is the cluster's whole synced configuration: every NodePool and
// every EC2NodeClass, as the forwarder last observed them.
type Config struct {
	NodePools   []v1.NodePool     `json:"nodePools"`
	NodeClasses []v1.EC2NodeClass `json:"nodeClasses"`
	// CreatedAt (millisecond precision) and then Generation order configs:
	// PutConfig keeps the newest (v1.ClusterConfig's "newest kept"). They
	// are stored beside the body, not in its hash.
	CreatedAt  time.Time `json:"-"`
	Generation int64     `json:"-"`
}

// ErrSuperseded is wrapped by PutConfig when the stored configuration is
// newer than the one offered, which is then not written.
var ErrSuperseded = errors.New("superseded by a newer configuration")

// older reports whether a is ordered before b (CreatedAt in milliseconds,
// then Generation). Configs of the same order replace each other in
// arrival order.
func older(a, b Config) bool {
	aMs, bMs := unixMilli(a.CreatedAt), unixMilli(b.CreatedAt)
	return aMs < bMs || (aMs == bMs && a.Generation < b.Generation)
}

// unixMilli is t in Unix milliseconds, 0 for the zero time (unordered).
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ConfigSnapshot is a stored Config with its version.
type ConfigSnapshot struct {
	Config
	// Version is 1 for the first snapshot and +1 per replacement.
	Version int64
	// Hash is the hex SHA-256 of the canonical JSON of Config (objects
	// sorted by name).
	Hash string
}

// GetConfig returns the current snapshot, read with strong consistency, or
// ErrNotFound if none was ever stored.
func (s *Store) GetConfig(ctx context.Context) (ConfigSnapshot, error) {
	item, err := s.getItem(ctx, s.pk(pkConfig), skConfig)
	if err != nil {
		return ConfigSnapshot{}, fmt.Errorf("get config: %w", err)
	}
	snap, err := decodeConfig(item)
	if err != nil {
		return ConfigSnapshot{}, fmt.Errorf("get config: %w", err)
	}
	return snap, nil
}

// PutConfig replaces the whole configuration with cfg in one conditional
// write of one item, so readers see either the previous set or the new one,
// never a mix. expectedVersion is the Version the caller read, or 0 when no
// snapshot exists yet (create-only). Objects are stored sorted by name;
// names must be non-empty and unique per kind (else ErrInvalid).
//
// PutConfig keeps the newest configuration: it writes only if cfg is not
// older (CreatedAt, then Generation) than the stored one, checked in the
// conditional write, and otherwise returns the stored snapshot with an error
// wrapping ErrSuperseded. A repeat of the stored content is not rewritten
// (idempotent) unless it is newer, which advances the stored order. It returns a *ConflictError if the stored version
// is not expectedVersion, ErrItemTooLarge if the compressed snapshot exceeds
// MaxBodyBytes, and the new snapshot on success. A cfg without CreatedAt is
// unordered: it replaces whatever is stored (tools seeding a table).
func (s *Store) PutConfig(ctx context.Context, cfg Config, expectedVersion int64) (ConfigSnapshot, error) {
	if expectedVersion < 0 {
		return ConfigSnapshot{}, fmt.Errorf("put config: expected version %d: %w", expectedVersion, ErrInvalid)
	}
	cfg, raw, err := canonicalConfig(cfg)
	if err != nil {
		return ConfigSnapshot{}, fmt.Errorf("put config: %w", err)
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])

	ordered, createdMs := !cfg.CreatedAt.IsZero(), unixMilli(cfg.CreatedAt)
	current, err := s.GetConfig(ctx)
	switch {
	case err == nil && current.Hash == hash && !older(current.Config, cfg):
		return current, nil
	case err == nil && ordered && older(cfg, current.Config):
		return current, fmt.Errorf("put config: stored configuration of %s (generation %d) is newer than this one of %s (generation %d): %w",
			current.CreatedAt.Format(time.RFC3339Nano), current.Generation, cfg.CreatedAt.Format(time.RFC3339Nano), cfg.Generation, ErrSuperseded)
	case err != nil && !errors.Is(err, ErrNotFound):
		return ConfigSnapshot{}, fmt.Errorf("put config: %w", err)
	}

	body, err := gzipBytes(raw)
	if err != nil {
		return ConfigSnapshot{}, fmt.Errorf("put config: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return ConfigSnapshot{}, fmt.Errorf("put config: %d bytes compressed (%d bytes of JSON), at most %d: %w", len(body), len(raw), MaxBodyBytes, ErrItemTooLarge)
	}
	in := &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			attrPK:          str(s.pk(pkConfig)),
			attrSK:          str(skConfig),
			attrKind:        str(kindConfig),
			attrVersion:     num(expectedVersion + 1),
			attrHash:        str(hash),
			attrBody:        &types.AttributeValueMemberB{Value: body},
			attrPoolCount:   num(int64(len(cfg.NodePools))),
			attrClassCount:  num(int64(len(cfg.NodeClasses))),
			attrCreatedAtMs: num(createdMs),
			attrGeneration:  num(cfg.Generation),
		},
	}
	switch {
	case expectedVersion == 0:
		in.ConditionExpression = strPtr("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": attrPK}
	case !ordered:
		in.ConditionExpression = strPtr("#ver = :expected")
		in.ExpressionAttributeNames = map[string]string{"#ver": attrVersion}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":expected": num(expectedVersion)}
	default:
		// The order is checked in the write itself, so a writer holding an
		// older configuration can never replace a newer one, whatever it read.
		in.ConditionExpression = strPtr("#ver = :expected AND (attribute_not_exists(#created) OR #created < :created OR " +
			"(#created = :created AND (attribute_not_exists(#gen) OR #gen <= :gen)))")
		in.ExpressionAttributeNames = map[string]string{"#ver": attrVersion, "#created": attrCreatedAtMs, "#gen": attrGeneration}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":expected": num(expectedVersion), ":created": num(createdMs), ":gen": num(cfg.Generation),
		}
	}
	_, err = s.api.PutItem(ctx, in)
	if isConditionFailed(err) {
		// A concurrent writer may have stored the same content, or a newer
		// configuration.
		now, gerr := s.GetConfig(ctx)
		switch {
		case gerr == nil && now.Hash == hash:
			return now, nil
		case gerr == nil && ordered && older(cfg, now.Config):
			return now, fmt.Errorf("put config: a configuration at least as new was stored meanwhile: %w", ErrSuperseded)
		}
		return ConfigSnapshot{}, fmt.Errorf("put config: %w", &ConflictError{Kind: kindConfig, Version: expectedVersion})
	}
	if err != nil {
		return ConfigSnapshot{}, fmt.Errorf("put config: %w", err)
	}
	return ConfigSnapshot{Config: cfg, Version: expectedVersion + 1, Hash: hash}, nil
}

const attrGeneration = "generation"

// canonicalConfig sorts copies of cfg's slices by name, checks names, and
// returns the canonical JSON.
func canonicalConfig(cfg Config) (Config, []byte, error) {
	cfg.NodePools = slices.Clone(cfg.NodePools)
	cfg.NodeClasses = slices.Clone(cfg.NodeClasses)
	slices.SortFunc(cfg.NodePools, func(a, b v1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(cfg.NodeClasses, func(a, b v1.EC2NodeClass) int { return strings.Compare(a.Name, b.Name) })
	for i, np := range cfg.NodePools {
		if np.Name == "" {
			return Config{}, nil, fmt.Errorf("nodePools: a NodePool has no name: %w", ErrInvalid)
		}
		if i > 0 && cfg.NodePools[i-1].Name == np.Name {
			return Config{}, nil, fmt.Errorf("nodePools: NodePool %q appears twice: %w", np.Name, ErrInvalid)
		}
	}
	for i, nc := range cfg.NodeClasses {
		if nc.Name == "" {
			return Config{}, nil, fmt.Errorf("nodeClasses: an EC2NodeClass has no name: %w", ErrInvalid)
		}
		if i > 0 && cfg.NodeClasses[i-1].Name == nc.Name {
			return Config{}, nil, fmt.Errorf("nodeClasses: EC2NodeClass %q appears twice: %w", nc.Name, ErrInvalid)
		}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return Config{}, nil, fmt.Errorf("encode config: %w", err)
	}
	return cfg, raw, nil
}

func decodeConfig(item map[string]types.AttributeValue) (ConfigSnapshot, error) {
	version, err := getInt(item, attrVersion)
	if err != nil {
		return ConfigSnapshot{}, err
	}
	b, ok := item[attrBody].(*types.AttributeValueMemberB)
	if !ok {
		return ConfigSnapshot{}, errors.New("attribute body: missing or not binary")
	}
	zr, err := gzip.NewReader(bytes.NewReader(b.Value))
	if err != nil {
		return ConfigSnapshot{}, fmt.Errorf("decompress config: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxConfigJSON+1))
	if err != nil {
		return ConfigSnapshot{}, fmt.Errorf("decompress config: %w", err)
	}
	if len(raw) > maxConfigJSON {
		return ConfigSnapshot{}, fmt.Errorf("decompress config: more than %d bytes", maxConfigJSON)
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return ConfigSnapshot{}, fmt.Errorf("decode config: %w", err)
	}
	if ms, err := getInt(item, attrCreatedAtMs); err == nil && ms != 0 {
		cfg.CreatedAt = time.UnixMilli(ms).UTC()
	}
	cfg.Generation, _ = getInt(item, attrGeneration)
	return ConfigSnapshot{Config: cfg, Version: version, Hash: getString(item, attrHash)}, nil
}

func gzipBytes(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("compress config: %w", err)
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("compress config: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress config: %w", err)
	}
	return buf.Bytes(), nil
}
