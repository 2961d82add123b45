// Package queue sends nodewright's messages to an SQS FIFO queue and reads
// them back on the consumer side: the intake Lambda enqueues pod batches and
// node registrations for the provisioner Lambda, one message group per
// cluster, so SQS hands the provisioner one message of a cluster at a time,
// in order (shared/provisioning, "Single writer").
//
// A message's body is the forwarder's JSON message as received. Its
// attributes say what it is: "kind" (PodBatch, NodeRegistrations), and,
// when set, "content-encoding" ("gzip": the body is base64 of the gzipped
// JSON, used when the JSON alone exceeds MaxMessageBytes) and "payload-ref"
// (the body is stored elsewhere under that key, a claim check for messages
// that do not fit even compressed; the caller stores and fetches it).
//
// The package declares the narrow API it calls; *sqs.Client satisfies it.
package queue

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// API is the subset of the SQS client this package calls.
type API interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ API = (*sqs.Client)(nil)

// MaxMessageBytes bounds a message: SQS counts the body and every message
// attribute's name, type and value against the queue's MaximumMessageSize.
// 256 KiB was SQS's limit for years and is still the default of many queue
// definitions; the queue must allow at least this much.
const MaxMessageBytes = 256 << 10

// maxDecodedBytes bounds what Decode inflates a compressed body to: the
// intake API's bodies are at most 4 MiB (apis/v1 MaxMessageBytes).
const maxDecodedBytes = 8 << 20

// Message attribute names.
const (
	AttrKind            = "kind"
	AttrContentEncoding = "content-encoding"
	AttrPayloadRef      = "payload-ref"
	encodingGzip        = "gzip"
)

// ErrTooLarge is wrapped by Send when a message does not fit MaxMessageBytes
// even compressed; the caller stores the body and sends a claim check
// (Message.PayloadRef) instead.
var ErrTooLarge = errors.New("message too large for the queue")

// Message is one queue message.
type Message struct {
	// GroupID is the FIFO message group (the cluster name); messages of one
	// group are delivered one at a time, in order. Required.
	GroupID string
	// DeduplicationID makes SQS drop a second message with the same ID sent
	// within its 5-minute deduplication window (the message's idempotency
	// key). Required, at most 128 characters.
	DeduplicationID string
	// Kind is the message kind, e.g. "PodBatch". Required.
	Kind string
	// Body is the message's JSON, or empty when PayloadRef is set.
	Body []byte
	// PayloadRef names where the body is stored instead (a claim check).
	PayloadRef string
}

// Queue sends to one queue. It is safe for concurrent use.
type Queue struct {
	api API
	url string
}

// New returns a Queue sending to the queue at url.
func New(api API, url string) (*Queue, error) {
	if api == nil || url == "" {
		return nil, errors.New("queue: api and url are required")
	}
	return &Queue{api: api, url: url}, nil
}

// Send enqueues m. A body too large for MaxMessageBytes is sent gzipped and
// base64-encoded; one still too large fails with ErrTooLarge before
// anything is sent. Errors from SQS are returned wrapped.
func (q *Queue) Send(ctx context.Context, m Message) error {
	switch {
	case m.GroupID == "" || m.DeduplicationID == "" || m.Kind == "":
		return fmt.Errorf("send message: group id, deduplication id and kind are required")
	case len(m.DeduplicationID) > 128:
		return fmt.Errorf("send message %s: deduplication id longer than 128 characters", m.DeduplicationID)
	case len(m.Body) == 0 && m.PayloadRef == "":
		return fmt.Errorf("send message %s: empty body", m.DeduplicationID)
	}
	attrs := map[string]types.MessageAttributeValue{AttrKind: stringAttr(m.Kind)}
	body := string(m.Body)
	if m.PayloadRef != "" {
		// The claim check's body is only the reference (SQS needs one).
		attrs[AttrPayloadRef] = stringAttr(m.PayloadRef)
		body = m.PayloadRef
	} else if size(body, attrs) > MaxMessageBytes || !utf8.ValidString(body) {
		z, err := compress(m.Body)
		if err != nil {
			return fmt.Errorf("send message %s: %w", m.DeduplicationID, err)
		}
		attrs[AttrContentEncoding] = stringAttr(encodingGzip)
		body = z
	}
	if n := size(body, attrs); n > MaxMessageBytes {
		return fmt.Errorf("send message %s: %d bytes compressed, limit %d: %w", m.DeduplicationID, n, MaxMessageBytes, ErrTooLarge)
	}
	_, err := q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(q.url),
		MessageBody:            aws.String(body),
		MessageGroupId:         aws.String(m.GroupID),
		MessageDeduplicationId: aws.String(m.DeduplicationID),
		MessageAttributes:      attrs,
	})
	if err != nil {
		return fmt.Errorf("send message %s: %w", m.DeduplicationID, err)
	}
	return nil
}

// Decode turns a received message back into a Message: body is the SQS
// body, attributes the string values of its message attributes, groupID
// and dedupID its MessageGroupId and MessageDeduplicationId system
// attributes. A message without a kind, with an unknown content encoding or
// with a body that does not inflate (or inflates past 8 MiB) is an error:
// such a message can never be processed.
func Decode(body string, attributes map[string]string, groupID, dedupID string) (Message, error) {
	m := Message{GroupID: groupID, DeduplicationID: dedupID, Kind: attributes[AttrKind], PayloadRef: attributes[AttrPayloadRef]}
	if m.Kind == "" {
		return Message{}, errors.New("decode message: no kind attribute")
	}
	switch enc := attributes[AttrContentEncoding]; enc {
	case "":
		m.Body = []byte(body)
	case encodingGzip:
		raw, err := decompress(body)
		if err != nil {
			return Message{}, fmt.Errorf("decode message: %w", err)
		}
		m.Body = raw
	default:
		return Message{}, fmt.Errorf("decode message: unknown content encoding %q", enc)
	}
	if m.PayloadRef != "" {
		m.Body = nil
	}
	return m, nil
}

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// size is what SQS counts against the limit: the body plus each
// attribute's name, data type and value.
func size(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
	}
	return n
}

func compress(data []byte) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return "", fmt.Errorf("compress body: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("compress body: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

func decompress(body string) ([]byte, error) {
	z, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("gzip body: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("gzip body: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxDecodedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gzip body: %w", err)
	}
	if len(raw) > maxDecodedBytes {
		return nil, fmt.Errorf("gzip body: inflates past %d bytes", maxDecodedBytes)
	}
	return raw, nil
}
