package ddbstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

const (
	kindMetric = "Metric"
	pkMetric   = "METRIC"
)

// maxMetricAttempts bounds the read-modify-write retries of one metric
// update that keeps losing the race to concurrent writers of its series.
const maxMetricAttempts = 16

// AddCounter adds delta (>= 0) to the counter series name{labels}, creating
// it at delta. Concurrent adds to one series never lose an increment: each is
// a read and a put conditional on the version read (retried on conflict, at
// most 16 times). Callers count an effect once by adding only after an
// effect that is itself applied once (a create-only NodeClaim, an execution
// name Step Functions had not seen, a first-seen idempotency key), so a
// retried invocation does not count twice. It returns an error wrapping
// ErrInvalid for an empty name, a negative or non-finite delta, or a series
// whose key exceeds 1,024 bytes.
func (s *Store) AddCounter(ctx context.Context, name string, labels map[string]string, delta float64) error {
	if delta < 0 || math.IsNaN(delta) || math.IsInf(delta, 0) {
		return fmt.Errorf("add counter %s: delta %v: must be finite and not negative: %w", name, delta, ErrInvalid)
	}
	return s.updateMetric(ctx, v1.MetricCounter, name, labels, func(m *v1.MetricSample) { m.Value += delta })
}

// SetGauge sets the gauge series name{labels} to value, under the same
// conditions and errors as AddCounter. A series that already holds value
// is read and not written: a stored series carries no timestamp, so its
// readers (ListMetrics, the forwarder's /metrics) see the unchanged value
// as current without a rewrite.
func (s *Store) SetGauge(ctx context.Context, name string, labels map[string]string, value float64) error {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return fmt.Errorf("set gauge %s: value %v: must be finite: %w", name, value, ErrInvalid)
	}
	return s.updateMetric(ctx, v1.MetricGauge, name, labels, func(m *v1.MetricSample) { m.Value = value })
}

// Observe records one observation (seconds, >= 0) in the histogram series
// name{labels}: Count+1, Sum+value, and +1 in every bucket of
// v1.MetricBuckets whose bound is >= value. Same conditions and errors as
// AddCounter.
func (s *Store) Observe(ctx context.Context, name string, labels map[string]string, value float64) error {
	if value < 0 || math.IsNaN(value) || math.IsInf(value, 0) {
		return fmt.Errorf("observe %s: value %v: must be finite and not negative: %w", name, value, ErrInvalid)
	}
	return s.updateMetric(ctx, v1.MetricHistogram, name, labels, func(m *v1.MetricSample) {
		if len(m.Buckets) != len(v1.MetricBuckets) {
			m.Buckets = make([]uint64, len(v1.MetricBuckets))
		}
		m.Count++
		m.Sum += value
		for i, le := range v1.MetricBuckets {
			if value <= le {
				m.Buckets[i]++
			}
		}
	})
}

// updateMetric applies apply to the stored series (a new one when none is
// stored) and puts the result under the version read, retried on
// conflict; an update that leaves a stored series as it is (a gauge set to
// its value, a counter added 0) is not written.
func (s *Store) updateMetric(ctx context.Context, typ v1.MetricType, name string, labels map[string]string, apply func(*v1.MetricSample)) error {
	if name == "" {
		return fmt.Errorf("metric: name must not be empty: %w", ErrInvalid)
	}
	sk := v1.SeriesKey(name, labels)
	if len(sk) > 1024 {
		return fmt.Errorf("metric %s: series key of %d bytes, at most 1024: %w", name, len(sk), ErrInvalid)
	}
	pk := s.pk(pkMetric)
	for range maxMetricAttempts {
		// A copy: json.Unmarshal below decodes the stored labels into this
		// map, and the caller's map may be shared (read by concurrent adds).
		sample := v1.MetricSample{Name: name, Type: typ, Labels: maps.Clone(labels)}
		var version int64
		item, err := s.getItem(ctx, pk, sk)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("metric %s: %w", sk, err)
		default:
			if version, err = getInt(item, attrVersion); err != nil {
				return fmt.Errorf("metric %s: %w", sk, err)
			}
			if err := json.Unmarshal([]byte(getString(item, attrBody)), &sample); err != nil {
				return fmt.Errorf("metric %s: decode: %w", sk, err)
			}
			if sample.Type != typ {
				return fmt.Errorf("metric %s: stored as a %s, updated as a %s: %w", sk, sample.Type, typ, ErrInvalid)
			}
		}
		before, err := json.Marshal(sample)
		if err != nil {
			return fmt.Errorf("metric %s: %w", sk, err)
		}
		apply(&sample)
		body, err := json.Marshal(sample)
		if err != nil {
			return fmt.Errorf("metric %s: %w", sk, err)
		}
		if item != nil && bytes.Equal(before, body) {
			return nil // stored as it would be written: no write
		}
		in := &dynamodb.PutItemInput{
			TableName: &s.table,
			Item: map[string]types.AttributeValue{
				attrPK: str(pk), attrSK: str(sk), attrKind: str(kindMetric),
				attrBody: str(string(body)), attrVersion: num(version + 1),
			},
		}
		putIfVersion(in, version)
		_, err = s.api.PutItem(ctx, in)
		if isConditionFailed(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("metric %s: %w", sk, err)
		}
		return nil
	}
	return fmt.Errorf("metric %s: %w", sk, &ConflictError{Kind: kindMetric, Name: sk})
}

// ListMetrics returns every stored series of the cluster, sorted by
// SeriesKey, read with strong consistency.
func (s *Store) ListMetrics(ctx context.Context) ([]v1.MetricSample, error) {
	items, err := s.queryPartition(ctx, s.pk(pkMetric))
	if err != nil {
		return nil, fmt.Errorf("list metrics: %w", err)
	}
	out := make([]v1.MetricSample, 0, len(items))
	for _, item := range items {
		var m v1.MetricSample
		if err := json.Unmarshal([]byte(getString(item, attrBody)), &m); err != nil {
			return nil, fmt.Errorf("list metrics: %s: decode: %w", getString(item, attrSK), err)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SeriesKey() < out[j].SeriesKey() })
	return out, nil
}
